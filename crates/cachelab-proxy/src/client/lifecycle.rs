//! A client connection's life in time, without I/O or a clock: the TLS handshake and its
//! deadline, serving, the idle timeout, the drain after it stops reading (answer what was
//! received), and the linger after FIN (read and drop what the client still sends, so
//! that closing with unread input cannot make the kernel reset the connection and
//! destroy replies in flight). The loop (`evloop/clients.rs`) does the reading and
//! writing and passes the time in; every rule about when is here, tested in simulated
//! time.

use std::time::{Duration, Instant};

/// How long a closing connection keeps reading (and dropping) client input.
pub const LINGER: Duration = Duration::from_secs(1);

/// How long a client may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// A TLS handshake under way, to be done by `until`.
    Handshaking { until: Instant },
    /// Reading, decoding and answering.
    Open,
    /// Stopped reading; answering what was received. `linger` once written.
    Draining { linger: bool },
    /// Replies written and FIN sent; dropping input until EOF or `until`.
    Lingering { until: Instant },
}

/// What is due when time passes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    Nothing,
    /// The handshake did not finish in time: closed without a reply.
    HandshakeTimedOut,
    /// Idle past the idle timeout with nothing in flight: stop reading and drain.
    Idle,
    /// The linger is over: close.
    Close,
}

/// Once every reply owed is written: FIN, then close or linger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterDrain {
    Close,
    Linger { until: Instant },
}

#[derive(Debug, Clone, Copy)]
pub struct Lifecycle {
    phase: Phase,
    last_read: Instant,
}

impl Lifecycle {
    /// A connection accepted at `now`; a TLS listener's first completes its handshake.
    pub fn new(now: Instant, tls: bool) -> Lifecycle {
        let phase = if tls {
            Phase::Handshaking {
                until: now + HANDSHAKE_TIMEOUT,
            }
        } else {
            Phase::Open
        };
        Lifecycle {
            phase,
            last_read: now,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub fn is_handshaking(&self) -> bool {
        matches!(self.phase, Phase::Handshaking { .. })
    }

    /// The handshake is done: serving starts, and the idle time counts from now.
    pub fn handshake_done(&mut self, now: Instant) {
        if self.is_handshaking() {
            self.phase = Phase::Open;
            self.last_read = now;
        }
    }

    /// Bytes were read at `now`.
    pub fn read(&mut self, now: Instant) {
        self.last_read = now;
    }

    /// Reading stops (end of stream, `quit`, an error, the idle timeout, shutdown): what
    /// was received is answered first; `linger` if the client may still be sending.
    pub fn stop(&mut self, linger: bool) {
        if matches!(self.phase, Phase::Open | Phase::Handshaking { .. }) {
            self.phase = Phase::Draining { linger };
        }
    }

    /// Every reply owed is written (the caller sends FIN): close, or linger until
    /// `now + LINGER`. None if it was not draining.
    pub fn drained(&mut self, now: Instant) -> Option<AfterDrain> {
        match self.phase {
            Phase::Draining { linger: false } => Some(AfterDrain::Close),
            Phase::Draining { linger: true } => {
                let until = now + LINGER;
                self.phase = Phase::Lingering { until };
                Some(AfterDrain::Linger { until })
            }
            _ => None,
        }
    }

    /// When time must next be looked at: the handshake's or the linger's end, or, while
    /// open and `idle` (nothing in flight), the idle timeout's.
    pub fn deadline(&self, idle_timeout: Option<Duration>, idle: bool) -> Option<Instant> {
        match self.phase {
            Phase::Handshaking { until } | Phase::Lingering { until } => Some(until),
            Phase::Open => idle_timeout.filter(|_| idle).map(|t| self.last_read + t),
            Phase::Draining { .. } => None,
        }
    }

    /// What is due at `now`; `idle`: nothing is in flight.
    pub fn due(&self, now: Instant, idle_timeout: Option<Duration>, idle: bool) -> Due {
        let passed = self
            .deadline(idle_timeout, idle)
            .is_some_and(|at| now >= at);
        match self.phase {
            _ if !passed => Due::Nothing,
            Phase::Handshaking { .. } => Due::HandshakeTimedOut,
            Phase::Open => Due::Idle,
            Phase::Lingering { .. } => Due::Close,
            Phase::Draining { .. } => Due::Nothing,
        }
    }

    /// Whether its deadline counts without an idle timeout: handshaking, or lingering.
    pub fn lingers(&self) -> bool {
        matches!(
            self.phase,
            Phase::Handshaking { .. } | Phase::Lingering { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Option<Duration> = Some(Duration::from_secs(30));

    fn t0() -> Instant {
        Instant::now()
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_tls_client_that_does_not_finish_its_handshake_in_10_s_is_closed_unserved() {
        let t = t0();
        let life = Lifecycle::new(t, true);
        assert!(
            life.lingers(),
            "its deadline counts without an idle timeout"
        );
        assert_eq!(life.deadline(None, true), Some(t + HANDSHAKE_TIMEOUT));
        assert_eq!(life.due(t + secs(9), None, true), Due::Nothing);
        assert_eq!(life.due(t + secs(10), None, true), Due::HandshakeTimedOut);
    }

    #[test]
    fn the_idle_time_counts_from_the_end_of_the_handshake_and_each_read() {
        let t = t0();
        let mut life = Lifecycle::new(t, true);
        life.handshake_done(t + secs(5));
        assert_eq!(life.phase(), Phase::Open);
        assert_eq!(life.deadline(IDLE, true), Some(t + secs(35)));
        life.read(t + secs(20));
        assert_eq!(life.due(t + secs(49), IDLE, true), Due::Nothing);
        assert_eq!(life.due(t + secs(50), IDLE, true), Due::Idle);
    }

    #[test]
    fn a_client_with_requests_in_flight_is_never_idle_and_no_timeout_means_never() {
        let t = t0();
        let life = Lifecycle::new(t, false);
        assert_eq!(life.deadline(IDLE, false), None);
        assert_eq!(life.due(t + secs(3600), IDLE, false), Due::Nothing);
        assert_eq!(life.deadline(None, true), None);
        assert!(!life.lingers());
    }

    #[test]
    fn a_drained_client_that_may_still_send_lingers_one_second_then_closes() {
        let t = t0();
        let mut life = Lifecycle::new(t, false);
        life.stop(true);
        assert_eq!(life.phase(), Phase::Draining { linger: true });
        assert_eq!(
            life.deadline(IDLE, true),
            None,
            "no timeout while answering"
        );
        let until = t + secs(2) + LINGER;
        assert_eq!(
            life.drained(t + secs(2)),
            Some(AfterDrain::Linger { until })
        );
        assert!(life.lingers());
        assert_eq!(
            life.due(until - Duration::from_millis(1), None, true),
            Due::Nothing
        );
        assert_eq!(life.due(until, None, true), Due::Close);
    }

    #[test]
    fn a_client_that_closed_or_failed_is_closed_as_soon_as_it_is_answered() {
        let t = t0();
        let mut life = Lifecycle::new(t, false);
        assert_eq!(life.drained(t), None, "open: nothing to drain");
        life.stop(false);
        assert_eq!(life.drained(t), Some(AfterDrain::Close));
    }

    #[test]
    fn stopping_twice_keeps_the_first_reason() {
        let t = t0();
        let mut life = Lifecycle::new(t, false);
        life.stop(false);
        life.stop(true);
        assert_eq!(life.phase(), Phase::Draining { linger: false });
    }
}
