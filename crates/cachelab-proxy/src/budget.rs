//! The memory budget: one limit on the bytes the proxy holds for requests and replies,
//! whatever clients send.
//!
//! Charged, each against the same `--memory-budget`:
//! - every forwarded request's bytes, from decode until its worker is done with it;
//! - every reply byte a worker has read from a server and not yet handed on;
//! - every reply byte waiting in a client's outbox for the client to read it.
//!
//! What does not fit is refused, not queued: a request gets `SERVER_ERROR out of memory`
//! at once, a reply that would not fit is replaced by that line, and each refusal is
//! counted (`stats`: `memory_refusals`). So the proxy's memory is at most
//!
//! ```text
//! RSS <= base + budget + connections x (2 x 16 KiB + request in progress)
//!        + workers x servers x 20 KiB
//! ```
//!
//! where the request in progress is at most --max-value-size plus its command line (a
//! request is charged once it is complete).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

pub struct MemoryBudget {
    limit: usize,
    used: AtomicUsize,
    refusals: AtomicU64,
}

impl MemoryBudget {
    pub fn new(limit: usize) -> Self {
        MemoryBudget {
            limit,
            used: AtomicUsize::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes if they fit; a refusal is counted.
    pub fn try_take(&self, n: usize) -> bool {
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used.saturating_add(n) > self.limit {
                self.refusals.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            match self.used.compare_exchange_weak(
                used,
                used + n,
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(now) => used = now,
            }
        }
    }

    /// Takes `n` bytes whether they fit or not (the error line that replaces a refused
    /// reply: a few bytes, and the client must get an answer).
    pub fn force_take(&self, n: usize) {
        self.used.fetch_add(n, Ordering::AcqRel);
    }

    pub fn give_back(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Bytes held against the budget, given back on drop; resized as a buffer grows and
/// shrinks.
pub struct Charge {
    budget: Arc<MemoryBudget>,
    held: usize,
}

impl Charge {
    pub fn new(budget: Arc<MemoryBudget>) -> Self {
        Charge { budget, held: 0 }
    }

    /// A charge of `n` bytes, if they fit.
    pub fn take(budget: &Arc<MemoryBudget>, n: usize) -> Option<Charge> {
        budget.try_take(n).then(|| Charge {
            budget: Arc::clone(budget),
            held: n,
        })
    }

    pub fn held(&self) -> usize {
        self.held
    }

    /// Resizes the charge to `n` bytes; false (and unchanged) if growing does not fit.
    pub fn resize(&mut self, n: usize) -> bool {
        if n == self.held {
            // Nothing to move: no locked instruction on the process-wide count.
            return true;
        }
        if n > self.held {
            if !self.budget.try_take(n - self.held) {
                return false;
            }
        } else {
            self.budget.give_back(self.held - n);
        }
        self.held = n;
        true
    }

    /// Resizes to `n` even past the limit.
    pub fn force_resize(&mut self, n: usize) {
        if n == self.held {
            return;
        }
        if n > self.held {
            self.budget.force_take(n - self.held);
        } else {
            self.budget.give_back(self.held - n);
        }
        self.held = n;
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.held > 0 {
            self.budget.give_back(self.held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_does_not_fit_is_refused_and_counted() {
        let budget = Arc::new(MemoryBudget::new(100));
        let a = Charge::take(&budget, 60).unwrap();
        assert!(Charge::take(&budget, 50).is_none());
        assert_eq!(budget.refusals(), 1);
        let b = Charge::take(&budget, 40).unwrap();
        assert_eq!(budget.used(), 100);
        drop(a);
        drop(b);
        assert_eq!(budget.used(), 0);
    }

    #[test]
    fn a_charge_grows_only_within_the_limit_and_shrinks_freely() {
        let budget = Arc::new(MemoryBudget::new(100));
        let mut c = Charge::new(Arc::clone(&budget));
        assert!(c.resize(80));
        assert!(!c.resize(120));
        assert_eq!(c.held(), 80);
        assert!(c.resize(10));
        assert_eq!(budget.used(), 10);
        c.force_resize(150);
        assert_eq!(budget.used(), 150);
        drop(c);
        assert_eq!(budget.used(), 0);
    }
}
