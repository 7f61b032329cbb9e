//! One server's health as pure state: the rules that count failures, eject and
//! restore, without I/O, clocks or sharing ([`super::Health`] holds one per server).

/// What went wrong with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No answer within the server timeout.
    Timeout,
    /// Refused, reset, closed, or a reply that could not be parsed.
    Connection,
}

/// One server's health, without I/O or clocks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HealthState {
    /// Failures since the last answer.
    pub failures: u32,
    pub ejected: bool,
    /// Why it failed last (for the SERVER_ERROR line and the log).
    pub reason: String,
    pub ejections: u64,
}

impl HealthState {
    /// Counts a failure; true if this ejects the server.
    pub fn failure(&mut self, kind: FailureKind, reason: &str, limit: u32) -> bool {
        self.failures = self.failures.saturating_add(1);
        self.reason.clear();
        self.reason.push_str(reason);
        if limit == 0 || self.ejected {
            return false;
        }
        if kind == FailureKind::Timeout || self.failures >= limit {
            self.ejected = true;
            self.ejections += 1;
            return true;
        }
        false
    }

    /// An answer from the server: the failure count starts again.
    pub fn success(&mut self) {
        self.failures = 0;
    }

    /// The probe got an answer; true if the server was ejected.
    pub fn restore(&mut self) -> bool {
        let was = self.ejected;
        self.ejected = false;
        self.failures = 0;
        was
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_ejects_at_once() {
        let mut s = HealthState::default();
        assert!(s.failure(FailureKind::Timeout, "no reply", 3));
        assert!(s.ejected);
        assert_eq!(s.ejections, 1);
    }

    #[test]
    fn connection_failures_eject_at_the_limit_and_an_answer_resets_the_count() {
        let mut s = HealthState::default();
        assert!(!s.failure(FailureKind::Connection, "refused", 2));
        s.success();
        assert!(!s.failure(FailureKind::Connection, "refused", 2));
        assert!(s.failure(FailureKind::Connection, "refused", 2));
        assert_eq!(s.reason, "refused");
    }

    #[test]
    fn limit_zero_never_ejects() {
        let mut s = HealthState::default();
        for _ in 0..10 {
            assert!(!s.failure(FailureKind::Timeout, "x", 0));
        }
        assert!(!s.ejected);
    }

    #[test]
    fn an_ejected_server_is_ejected_once_and_restored_once() {
        let mut s = HealthState::default();
        assert!(s.failure(FailureKind::Timeout, "a", 2));
        assert!(!s.failure(FailureKind::Timeout, "b", 2));
        assert_eq!(s.ejections, 1);
        assert!(s.restore());
        assert!(!s.restore());
        assert_eq!(s.failures, 0);
    }
}
