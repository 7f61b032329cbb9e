use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use cachelab_proxy::config::{Args, Config};
use cachelab_proxy::endpoint::Listener;
use cachelab_proxy::{logging, server, stats_file};
use clap::Parser;
use tokio::signal::unix::{signal, SignalKind};

fn main() -> ExitCode {
    let args = match Args::try_parse() {
        Ok(args) => args,
        Err(e) if !e.use_stderr() => e.exit(), // --help, --version
        Err(e) => {
            eprintln!(
                "cachelab-proxy: {}",
                cachelab_proxy::config::args::one_line(&e)
            );
            return ExitCode::from(2);
        }
    };
    let config = match Config::try_from(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("cachelab-proxy: {e}");
            return ExitCode::from(2);
        }
    };
    if let Err(e) = fit_descriptors(&config) {
        eprintln!("cachelab-proxy: {e}");
        return ExitCode::from(2);
    }
    let _log_guard = match logging::init(args.log_file.as_deref(), &args.log_level) {
        Ok(guard) => guard,
        Err(e) => {
            eprintln!("cachelab-proxy: cannot open the log file: {e}");
            return ExitCode::from(2);
        }
    };
    let served = serve(config, args.pid_file.as_deref());
    if let Some(path) = &args.pid_file {
        let _ = std::fs::remove_file(path);
    }
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Once on stderr; the log gets it too only when it is a file, or stderr
            // would show it twice.
            if args.log_file.is_some() {
                tracing::error!("{e:#}");
            }
            eprintln!("cachelab-proxy: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn serve(config: Config, pid_file: Option<&std::path::Path>) -> anyhow::Result<()> {
    // The data path is the event loop's own thread; the runtime serves only the control
    // plane (signals, reload, metrics, statistics, probes): one thread.
    let mut runtime = tokio::runtime::Builder::new_current_thread();
    let runtime = runtime
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        // Signal handlers first: a script that sends SIGHUP once it sees the pid file or
        // the first stdout line must not kill us.
        let hup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
        let terminated = termination();
        if let Some(path) = pid_file {
            std::fs::write(path, format!("{}\n", std::process::id()))
                .with_context(|| format!("cannot write the pid file {}", path.display()))?;
        }
        let mut listeners = Vec::new();
        for spec in &config.listeners {
            let listener = Listener::bind(&spec.listen, config.unix_socket_mode)
                .await
                .with_context(|| {
                    format!("cannot listen on {} (pool {})", spec.listen, spec.pool.name)
                })?;
            listeners.push(listener);
        }
        let ready = server::start(listeners, config).await?;
        // The first stdout lines tell scripts and tests where we listen (useful with
        // port 0): one per listener, in the configuration's order, printed only now that
        // nothing can fail at start any more.
        let mut stdout = std::io::stdout();
        for addr in ready.local_addrs()? {
            writeln!(stdout, "listening on {addr}")?;
        }
        stdout.flush()?;
        let (reload_tx, reloads) = tokio::sync::mpsc::channel(4);
        tokio::spawn(hangups(hup, reload_tx));
        let summary = ready.serve(terminated, reloads).await;
        stats_file::log_summary(&summary);
        write!(stdout, "{}", stats_file::format_summary(&summary))?;
        stdout.flush()?;
        Ok(())
    })
}

/// Raises the soft file-descriptor limit to the hard one, and refuses to start when even
/// that cannot hold what --max-connections and the server connections need (accept
/// would fail with EMFILE under load instead).
fn fit_descriptors(config: &Config) -> Result<(), String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read the struct we pass and nothing else.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Ok(()); // cannot tell: let accept report it
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            limit = raised;
        }
    }
    let needed = config.descriptors_needed();
    if limit.rlim_cur < needed {
        return Err(format!(
            "--max-connections {} with {} workers x {} servers needs about {needed} file \
             descriptors, but the limit is {} (ulimit -n); lower --max-connections or raise \
             the limit",
            config.max_connections,
            config.workers,
            config.server_keys().len(),
            limit.rlim_cur
        ));
    }
    Ok(())
}

/// Asks for a reload on every SIGHUP.
async fn hangups(mut hup: tokio::signal::unix::Signal, reload: tokio::sync::mpsc::Sender<()>) {
    while hup.recv().await.is_some() {
        tracing::info!("SIGHUP received: reloading the configuration");
        if reload.send(()).await.is_err() {
            return;
        }
    }
}

/// Installs the SIGTERM and SIGINT handlers now; the future resolves on the first.
fn termination() -> impl std::future::Future<Output = ()> {
    let mut term = signal(SignalKind::terminate()).expect("installing the SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("installing the SIGINT handler");
    async move {
        tokio::select! {
            _ = term.recv() => tracing::info!("SIGTERM received"),
            _ = int.recv() => tracing::info!("SIGINT received"),
        }
    }
}
