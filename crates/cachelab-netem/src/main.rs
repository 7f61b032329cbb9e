use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::thread::{self, ScopedJoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context};
use cachelab_netem::forward::{self, Direction, ForwardError};
use cachelab_netem::socket::PacketSocket;
use cachelab_netem::stats::{DirectionStats, Report};
use cachelab_netem::stop::Stop;
use clap::Parser;

const DEFAULT_LIMIT_PACKETS: usize = 10_000;
const DEFAULT_SPIN_US: u64 = 0;
/// Kernel buffers of each socket, each way: room for about 60 GSO frames of 64 KiB.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;
/// How often the main thread checks, while waiting for a signal, that both directions
/// still run.
const WATCH_INTERVAL: Duration = Duration::from_millis(100);

/// A netem-style delay line in user space, for kernels without sch_netem.
///
/// Holds every frame arriving on interface A for a fixed delay, then sends it out of
/// interface B, and the same from B to A. Prints `ready` once both sockets are bound; on
/// SIGTERM or SIGINT stops and writes one JSON line of statistics.
#[derive(Debug, Parser)]
#[command(name = "cachelab-delay", version)]
struct Args {
    /// Interface A.
    #[arg(long, value_name = "IFACE_A")]
    a: String,
    /// Interface B.
    #[arg(long, value_name = "IFACE_B")]
    b: String,
    /// One-way delay from A to B, in microseconds.
    #[arg(long, value_name = "N")]
    delay_us_ab: u64,
    /// One-way delay from B to A, in microseconds.
    #[arg(long, value_name = "N")]
    delay_us_ba: u64,
    /// Frames queued per direction beyond which arrivals are dropped (netem's limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT_PACKETS)]
    limit_packets: usize,
    /// Busy-wait instead of sleeping when the next frame is due within this many
    /// microseconds (sleeps end this much early): more precise, costs CPU.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SPIN_US)]
    spin_us: u64,
    /// Write the statistics line here instead of stdout.
    #[arg(long, value_name = "PATH")]
    stats_file: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cachelab-delay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> anyhow::Result<()> {
    // Before any thread exists, so that every thread inherits the mask and the signals
    // reach only the main thread's sigtimedwait: no handler, nothing async-signal-unsafe.
    let signals = block_stop_signals()?;
    anyhow::ensure!(args.a != args.b, "--a and --b name the same interface");
    let a = PacketSocket::open(&args.a, SOCKET_BUFFER_BYTES)?;
    let b = PacketSocket::open(&args.b, SOCKET_BUFFER_BYTES)?;
    let stop = Stop::new().context("eventfd")?;
    let spin = Duration::from_micros(args.spin_us);
    let ab = Direction {
        rx: &a,
        tx: &b,
        delay: Duration::from_micros(args.delay_us_ab),
        limit_packets: args.limit_packets,
        spin,
    };
    let ba = Direction {
        rx: &b,
        tx: &a,
        delay: Duration::from_micros(args.delay_us_ba),
        ..ab
    };
    let started = Instant::now();
    let (ab, ba) = thread::scope(|s| -> anyhow::Result<_> {
        let stop = &stop;
        let spawn = |name: &str, dir| {
            thread::Builder::new()
                .name(name.to_owned())
                .spawn_scoped(s, move || forward::run(dir, stop))
        };
        let ab = spawn("a-to-b", ab)?;
        let ba = match spawn("b-to-a", ba) {
            Ok(handle) => handle,
            Err(e) => {
                stop.trigger();
                return Err(e.into());
            }
        };
        let mut stdout = std::io::stdout();
        writeln!(stdout, "ready")?;
        stdout.flush()?;
        wait_for_stop_signal(&signals, &[&ab, &ba]);
        stop.trigger();
        Ok((join(ab)?, join(ba)?))
    })?;
    let report = Report {
        a: args.a.clone(),
        b: args.b.clone(),
        delay_us_ab: args.delay_us_ab,
        delay_us_ba: args.delay_us_ba,
        ab: ab.report(),
        ba: ba.report(),
        elapsed_s: started.elapsed().as_secs_f64(),
        cpu_s: process_cpu_seconds(),
    };
    let line = serde_json::to_string(&report)? + "\n";
    match &args.stats_file {
        Some(path) => std::fs::write(path, line)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut stdout = std::io::stdout();
            stdout.write_all(line.as_bytes())?;
            stdout.flush()?;
        }
    }
    Ok(())
}

fn join(
    handle: ScopedJoinHandle<'_, Result<DirectionStats, ForwardError>>,
) -> anyhow::Result<DirectionStats> {
    let name = handle.thread().name().unwrap_or("direction").to_owned();
    handle
        .join()
        .map_err(|_| anyhow!("{name} panicked"))?
        .with_context(|| format!("{name} failed"))
}

fn block_stop_signals() -> anyhow::Result<libc::sigset_t> {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc)).context("pthread_sigmask");
        }
        Ok(set)
    }
}

/// Returns on SIGTERM or SIGINT, or when a direction has ended by itself (it failed).
fn wait_for_stop_signal<T>(signals: &libc::sigset_t, directions: &[&ScopedJoinHandle<'_, T>]) {
    let timeout = libc::timespec {
        tv_sec: 0,
        tv_nsec: WATCH_INTERVAL.as_nanos() as libc::c_long,
    };
    loop {
        // SAFETY: `signals` is an initialised set blocked in this thread; a null info
        // pointer is allowed.
        let sig = unsafe { libc::sigtimedwait(signals, std::ptr::null_mut(), &timeout) };
        if sig > 0 || directions.iter().any(|d| d.is_finished()) {
            return;
        }
    }
}

/// User + system CPU time of the process so far (getrusage).
fn process_cpu_seconds() -> f64 {
    // SAFETY: all-zero is a valid rusage, filled in by the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage to write to.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
