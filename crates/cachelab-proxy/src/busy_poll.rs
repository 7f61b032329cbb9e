//! `--busy-poll-us`: after each read from a client or a server, the event loop keeps
//! polling its sockets without blocking for the window instead of sleeping in
//! `epoll_wait` (`evloop/timers.rs` decides how long it may sleep).
//!
//! Why: at moderate rates a proxy sleeps between requests, and waking a sleeping CPU
//! takes tens of microseconds on a VM (more with halt polling off). Each request meets
//! that wake-up twice at the proxy: when it arrives and when the server's reply does. A
//! polling loop reads both as they land, at the price of the CPU it spins: up to the
//! window after every burst of activity, a whole core under steady load.
//!
//! This module only keeps the window for `stats` and the metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The window in microseconds; 0 while busy-polling is off.
static WINDOW_US: AtomicU64 = AtomicU64::new(0);

/// The window in microseconds, for `stats` (0: not busy-polling).
pub fn window_us() -> u64 {
    WINDOW_US.load(Ordering::Relaxed)
}

/// Records the window of the event loop that busy-polls, for `stats` and the metrics.
pub fn announce(window: Duration) {
    // At least 1: zero means off.
    WINDOW_US.store((window.as_micros() as u64).max(1), Ordering::Relaxed);
}
