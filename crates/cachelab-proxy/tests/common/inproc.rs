//! The proxy served in this process: [`server::start`] and [`Ready::serve`] on a runtime
//! of its own in a background thread, configured from the same command line the binary
//! takes, with its listeners bound here, its shutdown and reloads in the test's hands,
//! and its log captured in memory (so a test waits on a line, not on a file's appender).
//!
//! [`Ready::serve`]: cachelab_proxy::server::Ready::serve

use std::cell::RefCell;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use cachelab_proxy::config::{Args, Config};
use cachelab_proxy::endpoint::{Endpoint, Listener};
use cachelab_proxy::server;
use cachelab_proxy::stats_file::RunSummary;
use cachelab_testkit::{Client, Memcached};
use clap::Parser;
use tokio::sync::{mpsc, oneshot};
use tracing::dispatcher::{self, DefaultGuard, Dispatch};

/// How long `wait_for_log` waits for its line.
const LOG_WAIT: Duration = Duration::from_secs(5);

/// The log lines written so far, and a signal for each new one.
#[derive(Default)]
struct LogBuffer {
    text: Mutex<Vec<u8>>,
    written: Condvar,
}

/// What the subscriber writes into: the shared buffer.
struct LogWriter(Arc<LogBuffer>);

impl std::io::Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let mut text = self.0.text.lock().unwrap_or_else(|p| p.into_inner());
        text.extend_from_slice(buf);
        self.0.written.notify_all();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

thread_local! {
    /// The proxy's subscriber on each of its runtime's threads: tracing's default
    /// dispatcher is per thread, and a worker thread does not inherit its spawner's.
    static LOG_ON_THIS_THREAD: RefCell<Option<DefaultGuard>> = const { RefCell::new(None) };
}

/// The subscriber the binary installs (same format and filter), writing to `buffer`.
fn log_dispatch(level: &str, buffer: &Arc<LogBuffer>) -> Dispatch {
    let buffer = Arc::clone(buffer);
    Dispatch::new(cachelab_proxy::logging::subscriber(level, move || {
        LogWriter(Arc::clone(&buffer))
    }))
}

/// A listener bound by the test before the proxy's runtime exists.
enum Bound {
    Tcp(std::net::TcpListener),
    Unix(Endpoint, u32),
}

impl Bound {
    fn bind(endpoint: &Endpoint, mode: u32) -> Bound {
        match endpoint {
            Endpoint::Tcp(addr) => {
                let listener = std::net::TcpListener::bind(addr)
                    .unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
                listener.set_nonblocking(true).unwrap();
                Bound::Tcp(listener)
            }
            Endpoint::Unix(_) => Bound::Unix(endpoint.clone(), mode),
        }
    }

    fn addr(&self) -> Option<SocketAddr> {
        match self {
            Bound::Tcp(l) => Some(l.local_addr().unwrap()),
            Bound::Unix(..) => None,
        }
    }

    /// The proxy's listener; needs the runtime (tokio registers the socket with it).
    async fn into_listener(self) -> std::io::Result<Listener> {
        match self {
            Bound::Tcp(l) => Ok(tokio::net::TcpListener::from_std(l)?.into()),
            Bound::Unix(endpoint, mode) => Listener::bind(&endpoint, mode).await,
        }
    }
}

/// A proxy served in this process, stopped (and its temporary directory removed) on
/// drop unless [`Proxy::stop`]ped.
pub struct Proxy {
    /// The first listener's address.
    pub addr: SocketAddr,
    /// Every TCP listener's address, in the configuration's order.
    pub addrs: Vec<SocketAddr>,
    pub dir: tempfile::TempDir,
    log: Arc<LogBuffer>,
    reloads: mpsc::Sender<()>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<RunSummary>>,
}

impl Proxy {
    /// In front of `servers` on 127.0.0.1, port 0, with `extra` options: the arguments
    /// the binary's tests give it.
    pub fn start(servers: &[&Memcached], extra: &[&str]) -> Proxy {
        let mut args: Vec<String> = vec!["-l".into(), "127.0.0.1".into(), "-p".into(), "0".into()];
        args.push("-m".into());
        args.extend(servers.iter().map(|s| s.addr.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        Proxy::start_args(&args)
    }

    /// With exactly `args` (plus the stats file in a temporary directory), e.g.
    /// `--config FILE`; panics if the proxy cannot start.
    pub fn start_args(args: &[String]) -> Proxy {
        let dir = cachelab_testkit::temp_dir();
        let mut argv = vec!["cachelab-proxy".to_string()];
        argv.extend(args.iter().cloned());
        argv.push("--stats-file".into());
        argv.push(dir.path().join("stats.jsonl").display().to_string());
        let parsed = Args::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let config = Config::try_from(&parsed).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let bound: Vec<Bound> = config
            .listeners
            .iter()
            .map(|l| Bound::bind(&l.listen, config.unix_socket_mode))
            .collect();
        let addrs: Vec<SocketAddr> = bound.iter().filter_map(Bound::addr).collect();
        let log = Arc::new(LogBuffer::default());
        let dispatch = log_dispatch(&parsed.log_level, &log);
        let (reloads_tx, reloads) = mpsc::channel(4);
        let (shutdown_tx, shutdown) = oneshot::channel::<()>();
        let (started_tx, started) = std::sync::mpsc::channel::<Result<(), String>>();
        let thread = thread::Builder::new()
            .name("cachelab-proxy".into())
            .spawn(move || serve(config, bound, dispatch, shutdown, reloads, started_tx))
            .unwrap();
        match started.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the proxy did not start: {e}"),
            Err(_) => panic!(
                "the proxy's thread ended before it started (panicked: {})",
                thread.join().is_err()
            ),
        }
        Proxy {
            addr: *addrs.first().expect("a TCP listener"),
            addrs,
            dir,
            log,
            reloads: reloads_tx,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    pub fn stats_path(&self) -> PathBuf {
        self.dir.path().join("stats.jsonl")
    }

    /// The stats file as JSON values, one per line.
    pub fn stats_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.stats_path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// What the proxy has logged so far.
    pub fn log(&self) -> String {
        let text = self.log.text.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&text).into_owned()
    }

    /// Waits (woken by each line, for at most 5 s) until the log holds `pattern` at least
    /// `count` times; returns the log.
    pub fn wait_for_log(&self, pattern: &str, count: usize) -> String {
        let deadline = Instant::now() + LOG_WAIT;
        let mut text = self.log.text.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            let log = String::from_utf8_lossy(&text).into_owned();
            let now = Instant::now();
            if log.matches(pattern).count() >= count || now >= deadline {
                return log;
            }
            text = self
                .log
                .written
                .wait_timeout(text, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Asks for a reload, as SIGHUP does in the binary.
    pub fn reload(&self) {
        self.reloads.try_send(()).expect("the proxy takes reloads");
    }

    /// Shuts the proxy down (it answers what it has received, within the drain timeout)
    /// and returns its summary; its stats file stays until the proxy is dropped.
    pub fn stop(&mut self) -> RunSummary {
        self.finish().expect("the proxy was running")
    }

    fn finish(&mut self) -> Option<RunSummary> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let summary = self.thread.take()?.join();
        Some(summary.unwrap_or_else(|_| panic!("the proxy's thread panicked")))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if thread::panicking() {
            // Stop it without a second panic hiding the first.
            if let Some(shutdown) = self.shutdown.take() {
                let _ = shutdown.send(());
            }
            if let Some(thread) = self.thread.take() {
                let _ = thread.join();
            }
        } else {
            self.finish();
        }
    }
}

/// The proxy's thread: its runtime (the binary's: one thread), its
/// subscriber on every runtime thread, start, then serve until shut down.
fn serve(
    config: Config,
    bound: Vec<Bound>,
    dispatch: Dispatch,
    shutdown: oneshot::Receiver<()>,
    reloads: mpsc::Receiver<()>,
    started: std::sync::mpsc::Sender<Result<(), String>>,
) -> RunSummary {
    let _log = dispatcher::set_default(&dispatch);
    // As the binary: the event loop has its own thread; the runtime is the control
    // plane's, one thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .on_thread_start(move || {
            let guard = dispatcher::set_default(&dispatch);
            LOG_ON_THIS_THREAD.with(|slot| *slot.borrow_mut() = Some(guard));
        })
        .on_thread_stop(|| {
            LOG_ON_THIS_THREAD.with(|slot| slot.borrow_mut().take());
        })
        .build()
        .unwrap();
    let summary = runtime.block_on(async move {
        let mut listeners = Vec::new();
        for b in bound {
            match b.into_listener().await {
                Ok(l) => listeners.push(l),
                Err(e) => {
                    let _ = started.send(Err(e.to_string()));
                    return None;
                }
            }
        }
        let ready = match server::start(listeners, config).await {
            Ok(ready) => ready,
            Err(e) => {
                let _ = started.send(Err(e.to_string()));
                return None;
            }
        };
        let _ = started.send(Ok(()));
        let stopped = async {
            let _ = shutdown.await;
        };
        Some(ready.serve(stopped, reloads).await)
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    summary.expect("started")
}
