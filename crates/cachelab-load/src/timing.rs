//! Where each request's time went, from the kernel's timestamps (`SO_TIMESTAMPING`) and
//! the program's own clock. Pure: the runner hands in the times, already on the run's
//! time line (ns since the run started, on the monotonic clock the runner starts).
//!
//! Per request, four instants (and the wire time measured on one kernel clock):
//! - **intended**: when the request was meant to go. Open loop: its scheduled time.
//!   Closed loop: just before the write that carries it (there is no schedule).
//! - **transmitted** (kernel): when the kernel handed the segment holding the request's
//!   last byte to the network device (the software TX stamp, from the socket's error queue).
//! - **received** (kernel): when the segment holding the reply's last byte reached the
//!   network stack (the RX stamp of the `recvmsg` that completed the reply).
//! - **read**: when the program had parsed the reply (after `recvmsg` returned).
//!
//! The figures, written as equations (held by `the_parts_add_up_to_the_user_latency`):
//! - wire = received - transmitted (the network and the server; both kernel stamps of
//!   one clock, hardware ones when the NIC gave both);
//! - response = received - intended (coordinated-omission-free, without the client's
//!   wake-up after the reply landed: the default latency where the kernel stamps);
//! - send delay = transmitted - intended (the client's own: timer wake-up, composing,
//!   the write and the kernel's transmit path);
//! - read delay = read - received (the client's own: its wake-up and the read);
//! - user latency = read - intended = send delay + wire + read delay.

use cachelab_stats::{LatencyHistogram, Welford};

/// Nanoseconds to whole microseconds, rounded to nearest (the histograms' unit).
pub fn ns_to_us(ns: u64) -> u64 {
    (ns + 500) / 1000
}

/// `--timestamps`: which clock ends the latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampMode {
    /// Kernel stamps where the kernel gives them: the latency ends at the kernel's
    /// receipt of the reply; wire time and the client's delays are reported.
    Kernel,
    /// The program's clock only (no `SO_TIMESTAMPING`): the latency ends when the
    /// program has read the reply.
    User,
}

impl TimestampMode {
    pub fn name(self) -> &'static str {
        match self {
            TimestampMode::Kernel => "kernel",
            TimestampMode::User => "user",
        }
    }
}

/// One request's instants, in ns since the run started (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub intended_ns: u64,
    pub transmitted_ns: Option<u64>,
    pub received_ns: Option<u64>,
    /// received - transmitted on one kernel clock, when both stamps exist.
    pub wire: Option<Wire>,
    pub read_ns: u64,
}

/// A wire time and the clock that measured both its ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire {
    pub ns: u64,
    pub hardware: bool,
}

impl Times {
    /// Where the request's latency ends under `mode`: the kernel's receipt when it was
    /// stamped, else the program's read (the fallback is counted in [`Timing`]).
    pub fn latency_end(&self, mode: TimestampMode) -> u64 {
        match (mode, self.received_ns) {
            (TimestampMode::Kernel, Some(received)) => received,
            _ => self.read_ns,
        }
    }
}

/// A histogram (µs) with the exact mean and deviation beside it.
#[derive(Debug, Clone, Default)]
pub struct Figure {
    pub histogram: LatencyHistogram,
    pub moments: Welford,
}

impl Figure {
    pub(crate) fn add(&mut self, ns: u64) {
        let us = ns_to_us(ns);
        self.histogram.record(us);
        self.moments.add(us as f64);
    }

    pub(crate) fn merge(&mut self, other: &Figure) {
        self.histogram
            .merge(&other.histogram)
            .expect("histograms of one unit merge");
        self.moments.merge(&other.moments);
    }
}

/// The timing figures of the requests answered inside the summary window.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    /// Requests answered (every one has a user latency).
    pub requests: u64,
    /// ...of which the kernel stamped the transmit, the receipt, and both ends of the
    /// wire time on the NIC's clock.
    pub transmit_stamped: u64,
    pub receipt_stamped: u64,
    pub hardware_wire: u64,
    pub wire: Figure,
    pub response: Figure,
    pub user_latency: Figure,
    pub send_delay: Figure,
    pub read_delay: Figure,
    /// Connections opened with kernel timestamping on, and those the kernel refused it.
    pub stamped_connections: u64,
    pub unstamped_connections: u64,
    /// Why the kernel refused (the first reason seen).
    pub refusal: Option<String>,
}

impl Timing {
    pub fn record(&mut self, t: &Times) {
        self.requests += 1;
        self.user_latency
            .add(t.read_ns.saturating_sub(t.intended_ns));
        if let Some(tx) = t.transmitted_ns {
            self.transmit_stamped += 1;
            // The stamps are converted from the kernel's clock: a few hundred ns of
            // conversion error must not wrap below zero.
            self.send_delay.add(tx.saturating_sub(t.intended_ns));
        }
        if let Some(rx) = t.received_ns {
            self.receipt_stamped += 1;
            self.response.add(rx.saturating_sub(t.intended_ns));
            self.read_delay.add(t.read_ns.saturating_sub(rx));
        }
        if let Some(wire) = t.wire {
            self.hardware_wire += u64::from(wire.hardware);
            self.wire.add(wire.ns);
        }
    }

    /// A connection was opened; `refused` says why the kernel would not stamp it.
    pub fn connection(&mut self, refused: Option<&str>) {
        match refused {
            None => self.stamped_connections += 1,
            Some(reason) => {
                self.unstamped_connections += 1;
                self.refusal.get_or_insert_with(|| reason.to_string());
            }
        }
    }

    pub fn merge(&mut self, other: &Timing) {
        self.requests += other.requests;
        self.transmit_stamped += other.transmit_stamped;
        self.receipt_stamped += other.receipt_stamped;
        self.hardware_wire += other.hardware_wire;
        self.wire.merge(&other.wire);
        self.response.merge(&other.response);
        self.user_latency.merge(&other.user_latency);
        self.send_delay.merge(&other.send_delay);
        self.read_delay.merge(&other.read_delay);
        self.stamped_connections += other.stamped_connections;
        self.unstamped_connections += other.unstamped_connections;
        if self.refusal.is_none() {
            self.refusal.clone_from(&other.refusal);
        }
    }

    /// Which clock ended the latency of the summary's requests: `kernel` (every one
    /// at the kernel's receipt), `user` (every one at the program's read), or `mixed`.
    pub fn latency_clock(&self, mode: TimestampMode) -> &'static str {
        let kernel = match mode {
            TimestampMode::Kernel => self.receipt_stamped,
            TimestampMode::User => 0,
        };
        if kernel == 0 {
            "user"
        } else if kernel == self.requests {
            "kernel"
        } else {
            "mixed"
        }
    }

    /// The clock of both ends of the wire times: `kernel_software`, `kernel_hardware`,
    /// `mixed`, or None when there is none.
    pub fn wire_clock(&self) -> Option<&'static str> {
        let n = self.wire.histogram.len();
        match self.hardware_wire {
            _ if n == 0 => None,
            0 => Some("kernel_software"),
            h if h == n => Some("kernel_hardware"),
            _ => Some("mixed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times(intended: u64, tx: u64, rx: u64, read: u64) -> Times {
        Times {
            intended_ns: intended,
            transmitted_ns: Some(tx),
            received_ns: Some(rx),
            wire: Some(Wire {
                ns: rx - tx,
                hardware: false,
            }),
            read_ns: read,
        }
    }

    #[test]
    fn the_parts_add_up_to_the_user_latency() {
        let mut t = Timing::default();
        t.record(&times(1_000, 21_000, 76_000, 104_000));
        let mean = |f: &Figure| f.moments.mean;
        assert_eq!(mean(&t.send_delay), 20.0);
        assert_eq!(mean(&t.wire), 55.0);
        assert_eq!(mean(&t.read_delay), 28.0);
        assert_eq!(mean(&t.response), 75.0);
        assert_eq!(mean(&t.user_latency), 103.0);
        assert_eq!(
            mean(&t.send_delay) + mean(&t.wire) + mean(&t.read_delay),
            mean(&t.user_latency)
        );
        assert_eq!(mean(&t.send_delay) + mean(&t.wire), mean(&t.response));
    }

    #[test]
    fn the_latency_ends_at_the_kernels_receipt_only_when_asked_and_stamped() {
        let stamped = times(0, 10, 50, 90);
        assert_eq!(stamped.latency_end(TimestampMode::Kernel), 50);
        assert_eq!(stamped.latency_end(TimestampMode::User), 90);
        let unstamped = Times {
            received_ns: None,
            ..stamped
        };
        assert_eq!(unstamped.latency_end(TimestampMode::Kernel), 90);
    }

    #[test]
    fn a_request_without_stamps_has_a_user_latency_only() {
        let mut t = Timing::default();
        t.record(&Times {
            intended_ns: 0,
            transmitted_ns: None,
            received_ns: None,
            wire: None,
            read_ns: 40_000,
        });
        assert_eq!(
            (t.requests, t.transmit_stamped, t.receipt_stamped),
            (1, 0, 0)
        );
        assert_eq!(t.user_latency.histogram.len(), 1);
        assert!(t.wire.histogram.is_empty() && t.response.histogram.is_empty());
        assert_eq!(t.latency_clock(TimestampMode::Kernel), "user");
        assert_eq!(t.wire_clock(), None);
    }

    #[test]
    fn the_clocks_say_kernel_user_or_mixed() {
        let mut t = Timing::default();
        t.record(&times(0, 10, 50, 90));
        assert_eq!(t.latency_clock(TimestampMode::Kernel), "kernel");
        assert_eq!(t.latency_clock(TimestampMode::User), "user");
        assert_eq!(t.wire_clock(), Some("kernel_software"));
        t.record(&Times {
            received_ns: None,
            wire: Some(Wire {
                ns: 30,
                hardware: true,
            }),
            ..times(0, 10, 50, 90)
        });
        assert_eq!(t.latency_clock(TimestampMode::Kernel), "mixed");
        assert_eq!(t.wire_clock(), Some("mixed"));
    }

    #[test]
    fn a_stamp_a_little_before_the_intended_time_counts_as_no_delay() {
        // The kernel's clock is converted to ours; the conversion may err by a little.
        let mut t = Timing::default();
        t.record(&times(1_000, 900, 5_000, 6_000));
        assert_eq!(t.send_delay.histogram.percentiles().max, 1);
        assert_eq!(t.send_delay.moments.mean, 0.0);
    }

    #[test]
    fn merging_adds_counts_and_keeps_the_first_refusal() {
        let mut a = Timing::default();
        let mut b = Timing::default();
        a.connection(None);
        b.connection(Some("EPERM"));
        b.connection(Some("later"));
        b.record(&times(0, 10_000, 60_000, 70_000));
        a.merge(&b);
        assert_eq!((a.stamped_connections, a.unstamped_connections), (1, 2));
        assert_eq!(a.refusal.as_deref(), Some("EPERM"));
        assert_eq!(a.wire.histogram.len(), 1);
        assert_eq!(a.requests, 1);
    }
}
