//! The control plane's handle on a running loop: drain, abort, wake.

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use mio::Waker;

/// The loop's states, in its `state` cell.
pub(super) const RUN: u8 = 0;
pub(super) const DRAIN: u8 = 1;
pub(super) const ABORT: u8 = 2;

/// The control plane's handle on a running loop.
#[derive(Clone)]
pub struct Control {
    pub(super) waker: Arc<Waker>,
    pub(super) state: Arc<AtomicU8>,
}

impl Control {
    /// Stops accepting and reading, answers what was received, then ends the loop.
    pub fn drain(&self) {
        self.state.store(DRAIN, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// Ends the loop now (the drain timeout passed).
    pub fn abort(&self) {
        self.state.store(ABORT, Ordering::Release);
        let _ = self.waker.wake();
    }

    /// The loop's waker (a statistics reader wakes the loop to answer it).
    pub fn waker(&self) -> Arc<Waker> {
        Arc::clone(&self.waker)
    }

    /// Makes the loop look at the shared health now (a probe ejected or restored a
    /// server).
    pub fn wake(&self) {
        let _ = self.waker.wake();
    }
}
