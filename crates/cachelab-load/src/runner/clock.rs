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

fn read(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; both clocks always exist on Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    assert_eq!(rc, 0, "clock {clock} is unavailable");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds since the Unix epoch (`CLOCK_REALTIME`, the kernel's socket timestamps'
/// clock).
pub fn realtime_ns() -> u64 {
    read(libc::CLOCK_REALTIME)
}

/// `CLOCK_REALTIME - CLOCK_MONOTONIC` now, read between two monotonic readings (the
/// tightest of a few tries, so a preemption between the readings does not count). The
/// two clocks run at one rate (NTP slews both), so this changes only when the wall
/// clock is stepped.
pub fn realtime_offset_ns() -> i128 {
    let mut best = (u64::MAX, 0i128);
    for _ in 0..3 {
        let before = monotonic_ns();
        let real = realtime_ns();
        let after = monotonic_ns();
        let spread = after - before;
        if spread < best.0 {
            best = (spread, real as i128 - (before + spread / 2) as i128);
        }
        if spread < 1_000 {
            break;
        }
    }
    best.1
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

    /// The run-relative time of a `CLOCK_REALTIME` reading (a kernel timestamp), given
    /// [`realtime_offset_ns`]; 0 for a time before the run.
    pub fn at_realtime(&self, real_ns: u64, offset_ns: i128) -> u64 {
        let monotonic = real_ns as i128 - offset_ns - self.origin_ns as i128;
        u64::try_from(monotonic).unwrap_or(0)
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
    fn a_realtime_reading_maps_onto_the_runs_time_line() {
        let clock = Clock::starting_at(monotonic_ns());
        let offset = realtime_offset_ns();
        let before = clock.now();
        let mapped = clock.at_realtime(realtime_ns(), offset);
        let after = clock.now();
        // Within the readings, give or take the offset's own error (half the spread of
        // its tightest reading: microseconds, unless all three were preempted).
        assert!(mapped + 10_000_000 >= before && mapped <= after + 10_000_000);
        assert_eq!(clock.at_realtime(0, offset), 0, "before the run");
    }

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
