//! One open-loop timer per load thread for all its connections. Each connection says when
//! its next request is due; the ticker keeps one timerfd armed for the earliest of them
//! and, on expiry, wakes every connection that is due, so the requests due together go out
//! in one wake-up of the thread instead of one timer, one arming and one wake-up each.
//!
//! With a busy-poll window the timer is armed that much before the earliest deadline and
//! the ticker then yields to the runtime (which keeps polling every socket) until the
//! deadline passes: the send is then on time even when the kernel's wake-up is late, at
//! the cost of the CPU spent spinning. The same window also follows each send: while a
//! connection waits for a reply to a request sent less than the window ago, the ticker
//! spins too, so the reply is read (and timed) when it lands rather than after the idle
//! CPU's wake-up, which on a VM takes tens of microseconds and ends up in every latency.

use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::poll_fn;
use std::io;
use std::task::{Poll, Waker};

use tokio::sync::Notify;

use super::clock::Clock;
use super::timer::PreciseTimer;

#[derive(Default)]
struct Slot {
    /// The time this connection waits for (run-relative ns), if it waits.
    due: Option<u64>,
    waker: Option<Waker>,
}

/// Deadlines waited for; pure bookkeeping, so it can be tested without a timer.
#[derive(Default)]
struct Deadlines {
    /// (due, slot); an entry whose slot no longer waits for that time is stale and skipped.
    heap: BinaryHeap<Reverse<(u64, usize)>>,
    slots: Vec<Slot>,
}

impl Deadlines {
    /// Records that `slot` waits for `due`; true if this is a new deadline for it.
    fn wait(&mut self, slot: usize, due: u64, waker: &Waker) -> bool {
        let s = &mut self.slots[slot];
        match &mut s.waker {
            Some(w) if w.will_wake(waker) => {}
            w => *w = Some(waker.clone()),
        }
        if s.due == Some(due) {
            return false;
        }
        s.due = Some(due);
        self.heap.push(Reverse((due, slot)));
        true
    }

    fn forget(&mut self, slot: usize) {
        self.slots[slot].due = None;
    }

    /// The earliest deadline still waited for (stale entries are dropped on the way).
    fn earliest(&mut self) -> Option<u64> {
        while let Some(&Reverse((due, slot))) = self.heap.peek() {
            if self.slots[slot].due == Some(due) {
                return Some(due);
            }
            self.heap.pop();
        }
        None
    }

    /// Takes the wakers of every slot due at or before `now`.
    fn take_due(&mut self, now: u64, woken: &mut Vec<Waker>) {
        while let Some(due) = self.earliest() {
            if due > now {
                break;
            }
            let Reverse((_, slot)) = self.heap.pop().expect("peeked");
            let s = &mut self.slots[slot];
            s.due = None;
            if let Some(w) = s.waker.take() {
                woken.push(w);
            }
        }
    }
}

/// Which connections wait for a reply, and how long the thread spins for one; pure
/// bookkeeping like `Deadlines`.
#[derive(Default)]
struct Replies {
    waiting: Vec<bool>,
    count: usize,
    /// Run-relative ns until which a reply is spun for: the latest send plus the window.
    spin_until: u64,
}

impl Replies {
    /// Records whether `slot` waits for a reply (to a request sent at `sent`); true if the
    /// thread now has a reply to spin for later than before.
    fn set(&mut self, slot: usize, sent: Option<u64>, window: u64) -> bool {
        let waiting = &mut self.waiting[slot];
        match sent {
            Some(sent) => {
                if !*waiting {
                    *waiting = true;
                    self.count += 1;
                }
                let until = sent.saturating_add(window);
                let later = until > self.spin_until;
                self.spin_until = self.spin_until.max(until);
                later
            }
            None => {
                if *waiting {
                    *waiting = false;
                    self.count -= 1;
                }
                false
            }
        }
    }

    /// Whether a reply is still worth spinning for at `now`.
    fn spinning(&self, now: u64) -> bool {
        self.count > 0 && now < self.spin_until
    }
}

pub struct Ticker {
    clock: Clock,
    busy_poll_ns: u64,
    timer: PreciseTimer,
    deadlines: RefCell<Deadlines>,
    replies: RefCell<Replies>,
    /// Told by a connection whose deadline comes before the armed time, or (busy-polling)
    /// that just sent a request.
    rearm: Notify,
    /// The ticker waits in the kernel for its timer (not spinning).
    asleep: std::cell::Cell<bool>,
}

impl Ticker {
    /// A ticker for `slots` connections, numbered from 0.
    pub fn new(clock: Clock, busy_poll_ns: u64, slots: usize) -> io::Result<Ticker> {
        let mut deadlines = Deadlines::default();
        deadlines.slots.resize_with(slots, Slot::default);
        let replies = Replies {
            waiting: vec![false; slots],
            ..Replies::default()
        };
        Ok(Ticker {
            clock,
            busy_poll_ns,
            timer: PreciseTimer::new()?,
            deadlines: RefCell::new(deadlines),
            replies: RefCell::new(replies),
            rearm: Notify::new(),
            asleep: std::cell::Cell::new(false),
        })
    }

    /// Busy-polling: `slot` waits for a reply to the request it sent at run-relative `sent`
    /// (None: for no reply). Called before each wait of the connection.
    pub fn awaiting_reply(&self, slot: usize, sent: Option<u64>) {
        if self.busy_poll_ns == 0 {
            return;
        }
        let later = self.replies.borrow_mut().set(slot, sent, self.busy_poll_ns);
        if later && self.asleep.get() {
            self.rearm.notify_one();
        }
    }

    /// Resolves once the run-relative time `due` has come.
    pub async fn until(&self, slot: usize, due: u64) {
        struct Forget<'a>(&'a Ticker, usize);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0.deadlines.borrow_mut().forget(self.1);
            }
        }
        let _forget = Forget(self, slot);
        poll_fn(|cx| {
            if self.clock.now() >= due {
                return Poll::Ready(());
            }
            if self.deadlines.borrow_mut().wait(slot, due, cx.waker()) {
                // A deadline before the one the timer is set for: the ticker re-arms once
                // all the connections that run in this turn have said when they are due
                // (each arming of the first timer to expire reprograms the CPU's timer,
                // which costs an exit to the hypervisor in a VM).
                let wake = self.clock.absolute(due.saturating_sub(self.busy_poll_ns));
                if self.timer.armed_at().is_none_or(|armed| wake < armed) {
                    self.rearm.notify_one();
                }
            }
            Poll::Pending
        })
        .await
    }

    /// Serves the deadlines until the run ends (the task is dropped with its runtime).
    pub async fn run(&self) -> io::Result<()> {
        let mut woken = Vec::new();
        loop {
            let now = self.clock.now();
            self.deadlines.borrow_mut().take_due(now, &mut woken);
            for waker in woken.drain(..) {
                waker.wake();
            }
            let next = self.deadlines.borrow_mut().earliest();
            let wake = next.map(|due| due.saturating_sub(self.busy_poll_ns));
            let spin = self.busy_poll_ns > 0 && {
                let now = self.clock.now();
                wake.is_some_and(|wake| now >= wake) || self.replies.borrow().spinning(now)
            };
            match wake {
                _ if spin => {
                    tokio::task::yield_now().await;
                    continue;
                }
                Some(wake) => {
                    // Re-arming at the time it is already set for is free (see `arm`).
                    self.timer.arm(self.clock.absolute(wake))?;
                }
                // Nothing waits: the next connection to wait tells us.
                None => {}
            }
            self.asleep.set(true);
            let woken = tokio::select! {
                biased;
                expired = self.timer.expired() => expired,
                _ = self.rearm.notified() => Ok(()),
            };
            self.asleep.set(false);
            woken?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::clock::monotonic_ns;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn deadlines(n: usize) -> Deadlines {
        let mut d = Deadlines::default();
        d.slots.resize_with(n, Slot::default);
        d
    }

    #[test]
    fn every_slot_due_is_taken_in_one_pass_and_later_ones_stay() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut d = deadlines(3);
        assert!(d.wait(0, 100, &waker));
        assert!(d.wait(1, 50, &waker));
        assert!(d.wait(2, 300, &waker));
        assert_eq!(d.earliest(), Some(50));
        let mut woken = Vec::new();
        d.take_due(100, &mut woken);
        assert_eq!(woken.len(), 2);
        assert_eq!(d.earliest(), Some(300));
    }

    #[test]
    fn a_forgotten_or_moved_deadline_is_stale() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut d = deadlines(2);
        d.wait(0, 10, &waker);
        d.wait(1, 20, &waker);
        d.forget(0);
        assert_eq!(d.earliest(), Some(20));
        // Waiting again for the same time is not a new deadline.
        assert!(!d.wait(1, 20, &waker));
        assert!(d.wait(1, 40, &waker));
        assert_eq!(d.earliest(), Some(40));
        let mut woken = Vec::new();
        d.take_due(30, &mut woken);
        assert!(woken.is_empty());
    }

    #[test]
    fn a_reply_is_spun_for_until_the_window_after_the_latest_send_or_until_none_waits() {
        let mut r = Replies {
            waiting: vec![false; 2],
            ..Replies::default()
        };
        assert!(!r.spinning(0));
        assert!(r.set(0, Some(1_000), 100));
        assert!(r.spinning(1_050));
        assert!(!r.spinning(1_100), "the window after the send is over");
        // A second connection's later send extends the window; an earlier one does not.
        assert!(r.set(1, Some(1_080), 100));
        assert!(!r.set(0, Some(1_000), 100));
        assert!(r.spinning(1_150));
        // Answered: nothing left to wait for, whatever the window says.
        r.set(0, None, 100);
        assert!(r.spinning(1_150));
        r.set(1, None, 100);
        r.set(1, None, 100);
        assert!(!r.spinning(1_150));
        assert_eq!(r.count, 0);
    }

    /// Many connections share one timer: each is woken at (not before) its time. How
    /// late is a measurement, not a test's business on a shared machine (the send-lag
    /// targets of `bench/load_bench.py`); the bound here only catches a timer that
    /// waits for some coarse period instead of the next due time.
    fn wakes_each_on_time(busy_poll_ns: u64) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let local = tokio::task::LocalSet::new();
        local.block_on(&rt, async {
            let clock = Clock::starting_at(monotonic_ns());
            let ticker = std::rc::Rc::new(Ticker::new(clock, busy_poll_ns, 4).unwrap());
            let t = ticker.clone();
            tokio::task::spawn_local(async move { t.run().await });
            let mut tasks = Vec::new();
            for slot in 0..4u64 {
                let ticker = ticker.clone();
                tasks.push(tokio::task::spawn_local(async move {
                    let mut late = Vec::new();
                    for i in 1..=20u64 {
                        let due = i * 400_000 + slot * 50_000;
                        ticker.until(slot as usize, due).await;
                        let now = clock.now();
                        assert!(now >= due, "woken early");
                        late.push(now - due);
                    }
                    late
                }));
            }
            let mut late = Vec::new();
            for t in tasks {
                late.extend(t.await.unwrap());
            }
            late.sort_unstable();
            assert_eq!(late.len(), 80, "every connection woken every time");
            assert!(
                late[late.len() / 2] < 50_000_000,
                "median lateness {} ns",
                late[late.len() / 2]
            );
        });
    }

    #[test]
    fn connections_sharing_the_timer_are_woken_at_their_times() {
        wakes_each_on_time(0);
    }

    #[test]
    fn with_busy_polling_too() {
        wakes_each_on_time(100_000);
    }
}
