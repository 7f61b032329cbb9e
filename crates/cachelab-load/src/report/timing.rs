//! The report's `timing` (where each request's time went, and on which clock) and
//! `client_cpu` (the load generator's own CPU) sections. Pure.

use cachelab_stats::LatencyHistogram;
use serde::{Deserialize, Serialize};

use super::LatencyMs;
use crate::record::CpuUsage;
use crate::timing::{Figure, TimestampMode, Timing};

/// A load thread busier than this share of its wall time may have limited the
/// throughput it measured (a closed loop then measures the client, not the server).
pub const CLIENT_SATURATED_SHARE: f64 = 0.85;

/// Where each figure starts and ends: `intended` is the program's clock (the scheduled
/// time, or just before the write in a closed loop), `user_read` the program's clock when
/// the reply had been read, `kernel_tx`/`kernel_rx` the kernel's software stamps and
/// `nic_tx`/`nic_rx` the NIC's. `mixed` when requests differ; null when no request has
/// the figure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Clocks {
    /// The summary's latencies, histograms and per-second series.
    pub latency: String,
    pub wire: Option<String>,
    pub response: Option<String>,
    pub user_latency: String,
    pub send_delay: Option<String>,
    pub read_delay: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimingHistograms {
    pub wire: String,
    pub response: String,
    pub user_latency: String,
    pub send_delay: String,
    pub read_delay: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TimingReport {
    /// `--timestamps`: `kernel` or `user`.
    pub timestamps: String,
    /// The kernel stamped every connection of the run.
    pub kernel: bool,
    /// Why some or all connections went without kernel stamps (null when none did).
    pub fallback: Option<String>,
    pub clocks: Clocks,
    /// Requests answered in the summary window, and how many of them the kernel stamped
    /// on transmit, on receipt, and on both ends on the NIC's clock.
    pub requests: u64,
    pub transmit_stamped: u64,
    pub receipt_stamped: u64,
    pub hardware_wire: u64,
    /// Kernel receipt of the reply minus kernel transmit of the request.
    pub wire_ms: Option<LatencyMs>,
    /// Intended send to the kernel's receipt of the reply.
    pub response_ms: Option<LatencyMs>,
    /// Intended send to the program's read of the reply.
    pub user_latency_ms: LatencyMs,
    /// Intended send to the kernel's transmit (the client's own).
    pub send_delay_ms: Option<LatencyMs>,
    /// The kernel's receipt to the program's read (the client's own).
    pub read_delay_ms: Option<LatencyMs>,
    pub histograms: TimingHistograms,
}

fn figure(f: &Figure) -> Option<LatencyMs> {
    (!f.histogram.is_empty()).then(|| LatencyMs::of(&f.histogram, &f.moments))
}

fn encode(h: &LatencyHistogram) -> String {
    h.encode_base64().expect("a histogram always encodes")
}

/// `count` of `total` requests had the figure: `clock` when all did.
fn clock_of(count: u64, total: u64, clock: &str) -> Option<String> {
    match count {
        0 => None,
        n if n == total => Some(clock.into()),
        _ => Some("mixed".into()),
    }
}

pub fn timing(t: &Timing, mode: TimestampMode) -> TimingReport {
    let fallback = match (mode, &t.refusal) {
        (TimestampMode::User, _) => None,
        (TimestampMode::Kernel, Some(reason)) => Some(format!(
            "{} of {} connections without kernel timestamps: {reason}",
            t.unstamped_connections,
            t.unstamped_connections + t.stamped_connections
        )),
        (TimestampMode::Kernel, None) if t.requests > 0 && t.receipt_stamped == 0 => {
            Some("the kernel gave no receive timestamps".into())
        }
        _ => None,
    };
    let latency = match t.latency_clock(mode) {
        "kernel" => "intended->kernel_rx",
        "user" => "intended->user_read",
        other => other,
    };
    let wire = t.wire_clock().map(|c| match c {
        "kernel_software" => "kernel_tx->kernel_rx".to_string(),
        "kernel_hardware" => "nic_tx->nic_rx".to_string(),
        other => other.to_string(),
    });
    TimingReport {
        timestamps: mode.name().into(),
        kernel: mode == TimestampMode::Kernel
            && t.unstamped_connections == 0
            && t.stamped_connections > 0,
        fallback,
        clocks: Clocks {
            latency: latency.into(),
            wire,
            response: clock_of(t.receipt_stamped, t.requests, "intended->kernel_rx"),
            user_latency: "intended->user_read".into(),
            send_delay: clock_of(t.transmit_stamped, t.requests, "intended->kernel_tx"),
            read_delay: clock_of(t.receipt_stamped, t.requests, "kernel_rx->user_read"),
        },
        requests: t.requests,
        transmit_stamped: t.transmit_stamped,
        receipt_stamped: t.receipt_stamped,
        hardware_wire: t.hardware_wire,
        wire_ms: figure(&t.wire),
        response_ms: figure(&t.response),
        user_latency_ms: LatencyMs::of(&t.user_latency.histogram, &t.user_latency.moments),
        send_delay_ms: figure(&t.send_delay),
        read_delay_ms: figure(&t.read_delay),
        histograms: TimingHistograms {
            wire: encode(&t.wire.histogram),
            response: encode(&t.response.histogram),
            user_latency: encode(&t.user_latency.histogram),
            send_delay: encode(&t.send_delay.histogram),
            read_delay: encode(&t.read_delay.histogram),
        },
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct ClientCpu {
    pub threads: u64,
    pub user_s: f64,
    pub system_s: f64,
    /// user_s + system_s.
    pub cpu_s: f64,
    /// The load threads' wall times added up (from the start of the clock until each
    /// thread's connections were done).
    pub wall_s: f64,
    /// cpu_s / wall_s: 1.0 when every thread was always on a CPU.
    pub share: f64,
    /// The busiest thread's CPU over its own wall time.
    pub busiest_thread_share: f64,
    /// busiest_thread_share > [`CLIENT_SATURATED_SHARE`].
    pub saturated: bool,
}

pub fn client_cpu(c: &CpuUsage) -> ClientCpu {
    let s = |ns: u64| ns as f64 / 1e9;
    let busiest = c.busiest_ppm as f64 / 1e6;
    ClientCpu {
        threads: c.threads,
        user_s: s(c.user_ns),
        system_s: s(c.system_ns),
        cpu_s: s(c.user_ns + c.system_ns),
        wall_s: s(c.wall_ns),
        share: c.share(),
        busiest_thread_share: busiest,
        saturated: busiest > CLIENT_SATURATED_SHARE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{Times, Wire};

    fn stamped(wire_us: u64) -> Times {
        Times {
            intended_ns: 0,
            transmitted_ns: Some(10_000),
            received_ns: Some(10_000 + wire_us * 1000),
            wire: Some(Wire {
                ns: wire_us * 1000,
                hardware: false,
            }),
            read_ns: 100_000 + wire_us * 1000,
        }
    }

    #[test]
    fn a_kernel_stamped_run_names_the_kernels_clocks() {
        let mut t = Timing::default();
        t.connection(None);
        t.record(&stamped(50));
        let r = timing(&t, TimestampMode::Kernel);
        assert!(r.kernel);
        assert_eq!(r.fallback, None);
        assert_eq!(r.clocks.latency, "intended->kernel_rx");
        assert_eq!(r.clocks.wire.as_deref(), Some("kernel_tx->kernel_rx"));
        assert_eq!(r.clocks.send_delay.as_deref(), Some("intended->kernel_tx"));
        assert_eq!(r.wire_ms.unwrap().p50, 0.05);
        assert_eq!(r.response_ms.unwrap().p50, 0.06);
        assert_eq!(r.user_latency_ms.p50, 0.15);
    }

    #[test]
    fn a_refused_connection_says_why_and_its_requests_fall_back_to_the_users_clock() {
        let mut t = Timing::default();
        t.connection(Some("SO_TIMESTAMPING: Operation not permitted"));
        t.record(&Times {
            transmitted_ns: None,
            received_ns: None,
            wire: None,
            ..stamped(50)
        });
        let r = timing(&t, TimestampMode::Kernel);
        assert!(!r.kernel);
        assert_eq!(
            r.fallback.as_deref(),
            Some("1 of 1 connections without kernel timestamps: SO_TIMESTAMPING: Operation not permitted")
        );
        assert_eq!(r.clocks.latency, "intended->user_read");
        assert_eq!((r.clocks.wire.clone(), r.wire_ms), (None, None));
    }

    #[test]
    fn the_user_clock_asked_for_is_no_fallback() {
        let mut t = Timing::default();
        t.record(&Times {
            transmitted_ns: None,
            received_ns: None,
            wire: None,
            ..stamped(50)
        });
        let r = timing(&t, TimestampMode::User);
        assert_eq!((r.kernel, r.fallback.clone()), (false, None));
        assert_eq!(r.timestamps, "user");
        assert_eq!(r.clocks.latency, "intended->user_read");
    }

    #[test]
    fn a_thread_over_85_percent_busy_is_saturated() {
        let mut cpu = CpuUsage::thread(800_000_000, 100_000_000, 1_000_000_000);
        cpu.merge(&CpuUsage::thread(100_000_000, 0, 1_000_000_000));
        let c = client_cpu(&cpu);
        assert_eq!((c.threads, c.cpu_s, c.wall_s), (2, 1.0, 2.0));
        assert_eq!((c.share, c.busiest_thread_share), (0.5, 0.9));
        assert!(c.saturated);
        let idle = client_cpu(&CpuUsage::thread(1, 1, 1_000_000_000));
        assert!(!idle.saturated);
    }
}
