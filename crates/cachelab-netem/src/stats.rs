//! What a direction counts, and the JSON line written at exit.
//!
//! **Lateness** of a send = (instant read just before the `send` call) − (due instant),
//! where due = (instant read just after the `recv` call that got the frame) + delay.
//! Both instants come from the monotonic clock. Lateness is what the delay line adds to
//! the configured delay: the wake-up latency of `ppoll`'s timer, and the time spent
//! sending frames due before it. It does not see how long a frame waited in the
//! kernel's receive queue before `recv` (the frame is stamped when we get it), nor the
//! time `send` takes to hand it to the other interface.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Lateness above this is recorded as this (a send a minute late is lost anyway).
const LATENESS_MAX_NS: u64 = 60_000_000_000;

/// Send lateness in nanoseconds: an HDR histogram (three significant digits) for the
/// percentiles and an exact sum for the mean.
#[derive(Debug, Clone)]
pub struct Lateness {
    hist: Histogram<u64>,
    sum_ns: u128,
}

impl Default for Lateness {
    fn default() -> Self {
        Lateness {
            hist: Histogram::new_with_bounds(1, LATENESS_MAX_NS, 3)
                .expect("1 ns .. 60 s with 3 digits is a valid histogram"),
            sum_ns: 0,
        }
    }
}

impl Lateness {
    pub fn record(&mut self, late: Duration) {
        let ns = u64::try_from(late.as_nanos()).unwrap_or(u64::MAX);
        self.sum_ns += u128::from(ns);
        self.hist.saturating_record(ns.clamp(1, LATENESS_MAX_NS));
    }

    pub fn summary(&self) -> LatenessSummary {
        let n = self.hist.len();
        if n == 0 {
            return LatenessSummary::default();
        }
        let us = |ns: u64| round3(ns as f64 / 1e3);
        LatenessSummary {
            mean: round3(self.sum_ns as f64 / n as f64 / 1e3),
            p50: us(self.hist.value_at_quantile(0.5)),
            p99: us(self.hist.value_at_quantile(0.99)),
            max: us(self.hist.max()),
        }
    }
}

/// Send lateness in microseconds (to the nanosecond); all zero when nothing was sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessSummary {
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The counters of one direction. A frame is what one `recv` returned: a GSO
/// super-packet of up to 64 KiB counts once.
#[derive(Debug, Clone, Default)]
pub struct DirectionStats {
    /// Frames sent out of the other interface.
    pub packets: u64,
    /// Their bytes, Ethernet header included, virtio-net header not.
    pub bytes: u64,
    /// Frames dropped because the queue held `--limit-packets` frames.
    pub drops: u64,
    /// Frames larger than the receive buffer, dropped.
    pub truncated: u64,
    /// Sends the kernel refused (a full qdisc: `ENOBUFS`; an interface down); the frame is lost.
    pub send_errors: u64,
    /// Receives that failed with something other than "nothing to read".
    pub recv_errors: u64,
    /// Frames still queued when the line stopped, never sent.
    pub queued_at_exit: u64,
    pub lateness: Lateness,
}

impl DirectionStats {
    pub fn report(&self) -> DirectionReport {
        DirectionReport {
            packets: self.packets,
            bytes: self.bytes,
            drops: self.drops,
            truncated: self.truncated,
            send_errors: self.send_errors,
            recv_errors: self.recv_errors,
            queued_at_exit: self.queued_at_exit,
            lateness_us: self.lateness.summary(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectionReport {
    pub packets: u64,
    pub bytes: u64,
    pub drops: u64,
    pub truncated: u64,
    pub send_errors: u64,
    pub recv_errors: u64,
    pub queued_at_exit: u64,
    pub lateness_us: LatenessSummary,
}

/// One link in the statistics line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    /// The name the link was given (`--link NAME:...`; the host it belongs to).
    pub name: String,
    pub a: String,
    pub b: String,
    pub delay_us_ab: u64,
    pub delay_us_ba: u64,
    pub ab: DirectionReport,
    pub ba: DirectionReport,
}

/// The one JSON line written when the process stops: every link it served, and the
/// CPU the whole process used for them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub links: Vec<LinkReport>,
    /// From the moment every socket was bound to the stop.
    pub elapsed_s: f64,
    /// User + system CPU time of the whole process (getrusage), the same span plus setup.
    pub cpu_s: f64,
    /// Frames sent over all links and directions, and `cpu_s` per frame in µs.
    pub packets: u64,
    pub cpu_us_per_packet: f64,
}

fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_sent_reports_zero_lateness() {
        assert_eq!(Lateness::default().summary(), LatenessSummary::default());
    }

    #[test]
    fn lateness_is_reported_in_microseconds_with_an_exact_mean() {
        let mut l = Lateness::default();
        for ns in [1_000, 2_000, 3_000, 10_500] {
            l.record(Duration::from_nanos(ns));
        }
        let s = l.summary();
        assert_eq!(s.mean, 4.125);
        assert_eq!(s.p50, 2.0);
        // Three significant digits: 10.5 us is recorded within 0.1%.
        assert!((s.p99 - 10.5).abs() <= 0.011, "{s:?}");
        assert!((s.max - 10.5).abs() <= 0.011, "{s:?}");
    }

    #[test]
    fn p99_is_the_ninety_ninth_of_a_hundred() {
        let mut l = Lateness::default();
        for us in 1..=100 {
            l.record(Duration::from_micros(us));
        }
        let s = l.summary();
        assert!((s.p50 - 50.0).abs() <= 0.05, "{s:?}");
        assert!((s.p99 - 99.0).abs() <= 0.1, "{s:?}");
        assert_eq!(s.mean, 50.5);
    }

    #[test]
    fn zero_and_huge_lateness_are_recorded_not_lost() {
        let mut l = Lateness::default();
        l.record(Duration::ZERO);
        l.record(Duration::from_secs(3600));
        let s = l.summary();
        assert_eq!(l.hist.len(), 2);
        assert!((s.max - 60e6).abs() / 60e6 < 1e-3, "{s:?}");
    }

    #[test]
    fn the_report_serialises_to_the_documented_fields() {
        let mut stats = DirectionStats {
            packets: 2,
            bytes: 3000,
            ..Default::default()
        };
        stats.lateness.record(Duration::from_micros(2));
        let json = serde_json::to_value(stats.report()).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "bytes",
                "drops",
                "lateness_us",
                "packets",
                "queued_at_exit",
                "recv_errors",
                "send_errors",
                "truncated"
            ]
        );
        assert_eq!(json["lateness_us"]["p50"], 2.0);
    }
}
