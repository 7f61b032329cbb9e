//! A limit on log lines for the whole proxy: per-connection limits alone let many
//! connections (or one reconnecting client) write the log as fast as they send bad
//! bytes. At most `per_second` lines pass in each second; the rest are counted, and the
//! count is logged once the next second's first line passes.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::warn;

/// Log lines allowed per second by default.
pub const DEFAULT_LINES_PER_SECOND: u32 = 50;

/// The window logic, without a clock of its own.
#[derive(Debug)]
pub struct Window {
    per_second: u32,
    started: Option<Instant>,
    passed: u32,
    suppressed: u64,
}

impl Window {
    pub fn new(per_second: u32) -> Self {
        Window {
            per_second,
            started: None,
            passed: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be logged at `now`; with it, how many lines were suppressed
    /// since the last one that passed (to be reported).
    pub fn allow(&mut self, now: Instant) -> (bool, u64) {
        if self
            .started
            .is_none_or(|s| now.duration_since(s) >= Duration::from_secs(1))
        {
            self.started = Some(now);
            self.passed = 0;
        }
        if self.passed < self.per_second {
            self.passed += 1;
            (true, std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            (false, 0)
        }
    }
}

pub struct LogLimit {
    window: Mutex<Window>,
}

impl LogLimit {
    pub fn new(per_second: u32) -> Self {
        LogLimit {
            window: Mutex::new(Window::new(per_second)),
        }
    }

    /// True if the caller may log a line now.
    pub fn allow(&self) -> bool {
        let (allowed, suppressed) = self
            .window
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .allow(Instant::now());
        if suppressed > 0 {
            warn!(
                suppressed,
                "log lines suppressed by the proxy-wide log rate limit"
            );
        }
        allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_passes_per_second_and_the_rest_is_counted_then_reported() {
        let t0 = Instant::now();
        let mut w = Window::new(3);
        let passed: Vec<bool> = (0..10).map(|_| w.allow(t0).0).collect();
        assert_eq!(passed.iter().filter(|p| **p).count(), 3);
        // a second later the next line passes and reports the 7 suppressed
        assert_eq!(w.allow(t0 + Duration::from_millis(1000)), (true, 7));
        assert_eq!(w.allow(t0 + Duration::from_millis(1001)), (true, 0));
    }
}
