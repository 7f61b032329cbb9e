//! `--busy-poll-us`: after each read from a client or a server, one runtime thread keeps
//! running (yielding to the scheduler, which polls every socket without blocking) for the
//! window instead of sleeping in `epoll_wait`.
//!
//! Why: at moderate rates a proxy sleeps between requests, and waking a sleeping CPU
//! takes tens of microseconds on a VM (more with halt polling off). Each request meets
//! that wake-up twice at the proxy: when it arrives and when the server's reply does. A
//! spinning thread reads both as they land, at the price of the CPU it spins: up to the
//! window after every burst of activity, a whole core under steady load.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The window in microseconds; 0 until the spinner starts (busy-polling off).
static WINDOW_US: AtomicU64 = AtomicU64::new(0);
/// Reads seen, from any thread; the spinner only compares it with what it saw last.
static ACTIVITY: AtomicU64 = AtomicU64::new(0);
/// The spinner is waiting for activity (not spinning).
static ASLEEP: AtomicBool = AtomicBool::new(false);
static WOKEN: Notify = Notify::const_new();

/// Records a read; wakes the spinner if it sleeps. Free when busy-polling is off (one load
/// of a value that is never written after start).
#[inline]
pub fn touch() {
    if WINDOW_US.load(Ordering::Relaxed) == 0 {
        return;
    }
    ACTIVITY.fetch_add(1, Ordering::Relaxed);
    if ASLEEP.load(Ordering::Relaxed) {
        WOKEN.notify_one();
    }
}

/// When to stop spinning: `window` after the last activity seen. Pure, for tests.
#[derive(Debug)]
struct Window {
    window: Duration,
    seen: u64,
    since: Instant,
}

impl Window {
    fn new(window: Duration, activity: u64, now: Instant) -> Window {
        Window {
            window,
            seen: activity,
            since: now,
        }
    }

    /// Whether to keep spinning, given the activity counter at `now`.
    fn keep_spinning(&mut self, activity: u64, now: Instant) -> bool {
        if activity != self.seen {
            self.seen = activity;
            self.since = now;
            return true;
        }
        now.duration_since(self.since) < self.window
    }
}

/// The window in microseconds, for `stats` (0: not busy-polling).
pub fn window_us() -> u64 {
    WINDOW_US.load(Ordering::Relaxed)
}

/// Records the window of a shell that busy-polls by itself (the event loop), for
/// `stats` and the metrics.
pub fn announce(window: Duration) {
    WINDOW_US.store((window.as_micros() as u64).max(1), Ordering::Relaxed);
}

/// Spins for `window` after each burst of reads, until the runtime ends. Spawn it once.
pub async fn spin(window: Duration) {
    // At least 1: zero means off to `touch`.
    announce(window);
    loop {
        ASLEEP.store(true, Ordering::Relaxed);
        // A read between the store and this await leaves a permit: no wake-up is lost.
        WOKEN.notified().await;
        ASLEEP.store(false, Ordering::Relaxed);
        let mut until = Window::new(window, ACTIVITY.load(Ordering::Relaxed), Instant::now());
        loop {
            tokio::task::yield_now().await;
            if !until.keep_spinning(ACTIVITY.load(Ordering::Relaxed), Instant::now()) {
                break;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spinning_lasts_the_window_after_the_last_activity() {
        let t0 = Instant::now();
        let us = Duration::from_micros;
        let mut w = Window::new(us(100), 7, t0);
        assert!(w.keep_spinning(7, t0 + us(99)));
        assert!(!w.keep_spinning(7, t0 + us(100)), "quiet for the window");
        // New activity restarts the window from when it was seen.
        let mut w = Window::new(us(100), 7, t0);
        assert!(w.keep_spinning(8, t0 + us(90)));
        assert!(w.keep_spinning(8, t0 + us(150)));
        assert!(!w.keep_spinning(8, t0 + us(190)));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn the_spinner_sleeps_when_quiet_and_spins_again_on_a_read() {
        let spinner = tokio::spawn(spin(Duration::from_millis(2)));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(ASLEEP.load(Ordering::Relaxed), "quiet: asleep");
        touch();
        tokio::task::yield_now().await;
        assert!(!ASLEEP.load(Ordering::Relaxed), "a read wakes it");
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            ASLEEP.load(Ordering::Relaxed),
            "asleep again after the window"
        );
        spinner.abort();
    }
}
