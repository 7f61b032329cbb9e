//! How long to wait before trying again after a failure (a connection that could not be
//! made, an accept that failed, a probe unanswered): the first wait, doubling with each
//! failure in a row up to a maximum, and back to the first after a success. Pure: the
//! caller owns the clock and the sleeping.

use std::time::Duration;

/// A doubling wait between attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// The wait after a failed `accept` (typically out of file descriptors), in either of
    /// the proxy's shells: 5 ms, doubling to 1 s, so a short shortage costs little and a
    /// long one does not spin.
    pub const fn for_accept() -> Self {
        Backoff::new(Duration::from_millis(5), Duration::from_secs(1))
    }

    /// Waits `first` after the first failure, then twice the last wait but at most
    /// `max` (so a `max` below `first` shortens every wait after the first).
    pub const fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            next: first,
        }
    }

    /// An attempt failed: the wait before the next one (and the one after doubles).
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        wait
    }

    /// An attempt succeeded: the next failure waits the first wait again.
    pub fn succeeded(&mut self) {
        self.next = self.first;
    }

    /// The wait the next failure will get.
    pub fn next_wait(&self) -> Duration {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn waits_double_up_to_the_maximum() {
        let mut b = Backoff::new(10 * MS, 50 * MS);
        let waits: Vec<_> = (0..5).map(|_| b.failed()).collect();
        assert_eq!(waits, [10 * MS, 20 * MS, 40 * MS, 50 * MS, 50 * MS]);
    }

    #[test]
    fn a_failed_accept_waits_5_ms_doubling_to_1_s() {
        let mut b = Backoff::for_accept();
        let waits: Vec<_> = (0..9).map(|_| b.failed()).collect();
        assert_eq!(waits[..3], [5 * MS, 10 * MS, 20 * MS]);
        assert_eq!(waits[8], Duration::from_secs(1));
    }

    #[test]
    fn a_success_starts_over_from_the_first_wait() {
        let mut b = Backoff::new(5 * MS, Duration::from_secs(1));
        b.failed();
        b.failed();
        assert_eq!(b.next_wait(), 20 * MS);
        b.succeeded();
        assert_eq!(b.failed(), 5 * MS);
    }

    #[test]
    fn a_maximum_below_the_first_wait_caps_the_waits_after_it() {
        let mut b = Backoff::new(10 * MS, 5 * MS);
        assert_eq!(b.failed(), 10 * MS);
        assert_eq!(b.failed(), 5 * MS);
        assert_eq!(b.failed(), 5 * MS);
    }

    #[test]
    fn a_huge_maximum_does_not_overflow() {
        let mut b = Backoff::new(Duration::from_secs(1), Duration::MAX);
        for _ in 0..200 {
            b.failed();
        }
        assert_eq!(b.next_wait(), Duration::MAX);
    }
}
