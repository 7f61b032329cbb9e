//! When a worker's connection to a server may be tried again: the retry time after a
//! failure, doubling up to `--backoff-max`, ended at once when a probe restores the
//! server. Pure (time passed in), used by the event loop's server links; the
//! doubling is `cachelab-net`'s [`Backoff`].

use std::time::{Duration, Instant};

use cachelab_net::backoff::Backoff;

use crate::down::Down;
use crate::health::BACKOFF_INITIAL;

#[derive(Debug)]
pub struct Reconnect {
    /// `Health::restores` of the server when this connection last failed.
    restores_seen: u64,
    backoff: Backoff,
    retry_at: Option<Instant>,
    /// Why the server is down, for the error line.
    pub down: Down,
}

impl Reconnect {
    pub fn new(backoff_max: Duration) -> Self {
        Reconnect {
            restores_seen: 0,
            backoff: Backoff::new(BACKOFF_INITIAL, backoff_max),
            retry_at: None,
            down: Down::NotConnectedYet,
        }
    }

    /// Whether a connection may be attempted at `now`, given the server's restore count;
    /// Err says why not.
    pub fn may_attempt(&self, now: Instant, restores: u64) -> Result<(), Down> {
        let restored = restores != self.restores_seen;
        if !restored && self.retry_at.is_some_and(|at| now < at) {
            return Err(self.down.clone());
        }
        Ok(())
    }

    /// A connection was made; true if it ends a period of retries (worth a log line).
    pub fn connected(&mut self) -> bool {
        self.backoff.succeeded();
        self.retry_at.take().is_some()
    }

    /// A connection failed (or could not be made) at `now`: the next attempt waits.
    pub fn failed(&mut self, now: Instant, restores: u64, down: Down) {
        self.retry_at = Some(now + self.backoff.failed());
        self.restores_seen = restores;
        self.down = down;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_wait_doubling_to_the_maximum_and_a_restore_ends_the_wait() {
        let t0 = Instant::now();
        let mut r = Reconnect::new(Duration::from_millis(
            4 * BACKOFF_INITIAL.as_millis() as u64,
        ));
        assert!(r.may_attempt(t0, 0).is_ok());
        r.failed(t0, 0, Down::Closed);
        assert!(matches!(r.may_attempt(t0, 0), Err(Down::Closed)));
        assert!(r.may_attempt(t0 + BACKOFF_INITIAL, 0).is_ok());
        r.failed(t0, 0, Down::Closed);
        assert!(r.may_attempt(t0 + BACKOFF_INITIAL, 0).is_err());
        assert!(r.may_attempt(t0 + 2 * BACKOFF_INITIAL, 0).is_ok());
        r.failed(t0, 0, Down::Closed);
        r.failed(t0, 0, Down::Closed);
        // Capped at the maximum (4x the initial wait).
        assert!(r.may_attempt(t0 + 4 * BACKOFF_INITIAL, 0).is_ok());
        // A probe restored the server: no wait.
        assert!(r.may_attempt(t0, 1).is_ok());
        assert!(r.connected());
        assert!(!r.connected());
        r.failed(t0, 1, Down::Closed);
        assert!(r.may_attempt(t0, 1).is_err(), "the backoff starts over");
        assert!(r.may_attempt(t0 + BACKOFF_INITIAL, 1).is_ok());
    }
}
