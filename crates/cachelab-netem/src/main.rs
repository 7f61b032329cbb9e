use std::io::Write;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use cachelab_netem::forward::{self, Link, Settings};
use cachelab_netem::link_arg::LinkArg;
use cachelab_netem::socket::PacketSocket;
use cachelab_netem::stats::{LinkReport, Report};
use cachelab_netem::wake::{block_stop_signals, StopSignals};
use clap::Parser;

const DEFAULT_LIMIT_PACKETS: usize = 10_000;
const DEFAULT_SPIN_US: u64 = 0;
/// Kernel buffers of each socket, each way: room for about 60 GSO frames of 64 KiB.
const SOCKET_BUFFER_BYTES: usize = 4 << 20;

/// A netem-style delay line in user space, for kernels without sch_netem.
///
/// For every link, holds each frame arriving on interface A for a fixed delay, then
/// sends it out of interface B, and the same from B to A. One thread serves every link.
/// Prints `ready` once every socket is bound; on SIGTERM or SIGINT stops and writes one
/// JSON line of statistics.
#[derive(Debug, Parser)]
#[command(name = "cachelab-delay", version)]
struct Args {
    /// A link: NAME:IFACE_A:IFACE_B:DELAY_US[:DELAY_US_BA] (one-way delay from A to B
    /// in microseconds, and back; the second defaults to the first). Repeat for more.
    #[arg(long, value_name = "LINK")]
    link: Vec<LinkArg>,
    /// One link's interface A (with --b and the delays: the same as one --link).
    #[arg(long, value_name = "IFACE_A", requires_all = ["b", "delay_us_ab", "delay_us_ba"])]
    a: Option<String>,
    /// One link's interface B.
    #[arg(long, value_name = "IFACE_B", requires = "a")]
    b: Option<String>,
    /// One-way delay from A to B, in microseconds.
    #[arg(long, value_name = "N", requires = "a")]
    delay_us_ab: Option<u64>,
    /// One-way delay from B to A, in microseconds.
    #[arg(long, value_name = "N", requires = "a")]
    delay_us_ba: Option<u64>,
    /// Frames queued per direction beyond which arrivals are dropped (netem's limit).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LIMIT_PACKETS)]
    limit_packets: usize,
    /// Busy-wait instead of sleeping when the next frame is due within this many
    /// microseconds (the timer fires this much early): more precise, costs CPU.
    #[arg(long, value_name = "S", default_value_t = DEFAULT_SPIN_US)]
    spin_us: u64,
    /// Write the statistics line here instead of stdout.
    #[arg(long, value_name = "PATH")]
    stats_file: Option<PathBuf>,
}

impl Args {
    fn links(&self) -> anyhow::Result<Vec<LinkArg>> {
        let mut links = self.link.clone();
        if let (Some(a), Some(b), Some(ab), Some(ba)) =
            (&self.a, &self.b, self.delay_us_ab, self.delay_us_ba)
        {
            links.push(format!("link:{a}:{b}:{ab}:{ba}").parse()?);
        }
        anyhow::ensure!(!links.is_empty(), "no link: give --link (or --a and --b)");
        let mut ifaces: Vec<&str> = links.iter().flat_map(|l| [&*l.a, &*l.b]).collect();
        ifaces.sort_unstable();
        if let Some(w) = ifaces.windows(2).find(|w| w[0] == w[1]) {
            anyhow::bail!("interface {} is in two links", w[0]);
        }
        Ok(links)
    }
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
    // Blocked before anything else, so SIGTERM and SIGINT wait in the signalfd that the
    // loop polls: no handler, nothing async-signal-unsafe.
    let signals = block_stop_signals().context("pthread_sigmask")?;
    let stop = StopSignals::new(&signals).context("signalfd")?;
    let specs = args.links()?;
    let links = specs
        .iter()
        .map(|l| -> anyhow::Result<Link> {
            Ok(Link {
                name: l.name.clone(),
                a: PacketSocket::open(&l.a, SOCKET_BUFFER_BYTES)?,
                b: PacketSocket::open(&l.b, SOCKET_BUFFER_BYTES)?,
                delay_ab: Duration::from_micros(l.delay_us_ab),
                delay_ba: Duration::from_micros(l.delay_us_ba),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let settings = Settings {
        limit_packets: args.limit_packets,
        spin: Duration::from_micros(args.spin_us),
    };
    let started = Instant::now();
    {
        let mut stdout = std::io::stdout();
        writeln!(stdout, "ready")?;
        stdout.flush()?;
    }
    let stats = forward::run(&links, settings, stop.as_fd())?;
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = process_cpu_seconds();
    let links: Vec<LinkReport> = specs
        .iter()
        .zip(&stats)
        .map(|(l, s)| LinkReport {
            name: l.name.clone(),
            a: l.a.clone(),
            b: l.b.clone(),
            delay_us_ab: l.delay_us_ab,
            delay_us_ba: l.delay_us_ba,
            ab: s.ab.report(),
            ba: s.ba.report(),
        })
        .collect();
    let packets: u64 = links.iter().map(|l| l.ab.packets + l.ba.packets).sum();
    let report = Report {
        links,
        elapsed_s,
        cpu_s,
        packets,
        cpu_us_per_packet: if packets == 0 {
            0.0
        } else {
            (cpu_s * 1e6 / packets as f64 * 1e3).round() / 1e3
        },
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

/// User + system CPU time of the process so far (getrusage).
fn process_cpu_seconds() -> f64 {
    // SAFETY: all-zero is a valid rusage, filled in by the call.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid rusage to write to.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
