//! The monotonic clock every timer reads: `CLOCK_MONOTONIC`, the clock `Instant` uses and
//! the one the open-loop timer (a timerfd) sleeps on, so scheduled times and measured
//! times are on one time line.

/// Nanoseconds on the monotonic clock (a vDSO call, no system call).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "CLOCK_MONOTONIC is unavailable");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Time since the run started, in nanoseconds.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin_ns: u64,
}

impl Clock {
    pub fn starting_at(origin_ns: u64) -> Clock {
        Clock { origin_ns }
    }

    pub fn now(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin_ns)
    }

    /// The monotonic clock reading of a run-relative time.
    pub fn absolute(&self, at_ns: u64) -> u64 {
        self.origin_ns + at_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_never_goes_back_and_agrees_with_instant() {
        let clock = Clock::starting_at(monotonic_ns());
        let start = std::time::Instant::now();
        let a = clock.now();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = clock.now();
        let elapsed = start.elapsed().as_nanos() as u64;
        assert!(b >= a + 20_000_000);
        assert!(b - a <= elapsed + 1_000_000, "{} vs {elapsed}", b - a);
    }
}
