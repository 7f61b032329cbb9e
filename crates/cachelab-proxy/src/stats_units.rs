//! Every worker's statistics as its event loop hands them over. A worker records into a
//! unit of its own, in its loop's thread, with no lock on a request's path; readers on
//! other threads ask the loops for what they need and wait for the answer:
//! - the statistics writer, at a window's end, for each worker's window
//!   ([`StatsUnits::ask_windows`]): the loop swaps its worker's unit for the fresh one
//!   the writer left in the worker's [`Handover`];
//! - the metrics endpoint, for the cumulative latencies
//!   ([`StatsUnits::ask_latencies`]): the loop copies them into
//!   [`crate::histograms::LatencyUnits`].
//!
//! A loop looks at the two requests once per turn (two relaxed loads) and is woken to
//! answer them. A loop that ends hands over everything and answers every later request
//! at once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use mio::Waker;

use crate::metrics::WorkerStats;

/// One worker's window in transit between its loop and the statistics writer.
pub struct Handover {
    /// Handed: the worker's window, for the writer to take. Not handed: the fresh unit
    /// the worker will record into next.
    pub unit: WorkerStats,
    pub handed: bool,
}

/// What one kind of request to the loops stands at: how many were made, and per loop
/// the last it answered (`u64::MAX` once the loop ended).
struct Requests {
    asked: CachePadded<AtomicU64>,
    answered: Box<[CachePadded<AtomicU64>]>,
}

impl Requests {
    fn new(loops: usize) -> Self {
        Requests {
            asked: CachePadded::new(AtomicU64::new(0)),
            answered: (0..loops).map(|_| CachePadded::default()).collect(),
        }
    }

    fn all_answered(&self, n: u64) -> bool {
        self.answered.iter().all(|a| a.load(Ordering::Acquire) >= n)
    }
}

/// Every worker's handover, and the requests to the loops.
pub struct StatsUnits {
    handovers: Box<[CachePadded<Mutex<Handover>>]>,
    windows: Requests,
    latencies: Requests,
    wakers: OnceLock<Box<[Arc<Waker>]>>,
}

/// How often a waiting reader looks whether the loops have answered.
const LOOK_EVERY: Duration = Duration::from_micros(200);

impl StatsUnits {
    pub fn new(workers: usize, loops: usize, servers: usize, now: Instant) -> Self {
        StatsUnits {
            handovers: (0..workers)
                .map(|_| {
                    CachePadded::new(Mutex::new(Handover {
                        unit: WorkerStats::new(servers, now),
                        handed: false,
                    }))
                })
                .collect(),
            windows: Requests::new(loops),
            latencies: Requests::new(loops),
            wakers: OnceLock::new(),
        }
    }

    /// The loops' wakers, in loop order, once they are built (before, a request is
    /// seen at the loop's first turn).
    pub fn set_wakers(&self, wakers: Vec<Arc<Waker>>) {
        let _ = self.wakers.set(wakers.into_boxed_slice());
    }

    pub fn len(&self) -> usize {
        self.handovers.len()
    }

    pub fn is_empty(&self) -> bool {
        self.handovers.is_empty()
    }

    pub fn lock(&self, worker: usize) -> MutexGuard<'_, Handover> {
        self.handovers[worker]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks every loop to hand over its workers' windows; waits at most `patience`.
    /// False if some loop had not answered by then (its workers' windows stay with it
    /// and count in a later window).
    pub async fn ask_windows(&self, patience: Duration) -> bool {
        self.ask(&self.windows, patience).await
    }

    /// Asks every loop to publish its workers' cumulative latencies; waits at most
    /// `patience`.
    pub async fn ask_latencies(&self, patience: Duration) -> bool {
        self.ask(&self.latencies, patience).await
    }

    /// Asks every loop to publish its latencies, without waiting (a loop answering
    /// `stats` publishes its own at once).
    pub fn nudge_latencies(&self) {
        self.post(&self.latencies);
    }

    /// Makes a request and wakes the loops; its number.
    fn post(&self, requests: &Requests) -> u64 {
        let n = requests.asked.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(wakers) = self.wakers.get() {
            for waker in wakers.iter() {
                let _ = waker.wake();
            }
        }
        n
    }

    async fn ask(&self, requests: &Requests, patience: Duration) -> bool {
        let n = self.post(requests);
        let until = Instant::now() + patience;
        while !requests.all_answered(n) {
            if Instant::now() >= until {
                return false;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
        true
    }

    /// For a loop, once per turn: what it has yet to answer (the window request's
    /// number, the latencies request's number; None where it is up to date).
    pub fn pending(&self, seen: &Seen) -> (Option<u64>, Option<u64>) {
        let windows = self.windows.asked.load(Ordering::Relaxed);
        let latencies = self.latencies.asked.load(Ordering::Relaxed);
        (
            (windows != seen.windows).then_some(windows),
            (latencies != seen.latencies).then_some(latencies),
        )
    }

    /// Loop `index` answered the window request `n`.
    pub fn answered_windows(&self, index: usize, n: u64, seen: &mut Seen) {
        seen.windows = n;
        self.windows.answered[index].store(n, Ordering::Release);
    }

    /// Loop `index` answered the latencies request `n`.
    pub fn answered_latencies(&self, index: usize, n: u64, seen: &mut Seen) {
        seen.latencies = n;
        self.latencies.answered[index].store(n, Ordering::Release);
    }

    /// Loop `index` ended (having handed everything over): every request is answered.
    pub fn ended(&self, index: usize) {
        self.windows.answered[index].store(u64::MAX, Ordering::Release);
        self.latencies.answered[index].store(u64::MAX, Ordering::Release);
    }
}

/// The requests a loop has answered (its own copy: no shared reads to compare).
#[derive(Debug, Default)]
pub struct Seen {
    windows: u64,
    latencies: u64,
}

/// Hands `live` (a worker's unit) over in `handover`: swapped for the fresh unit there,
/// or, if the writer has not taken the last window yet, merged into it (and `live`
/// starts again from `now`).
pub fn hand_over(handover: &mut Handover, live: &mut WorkerStats, now: Instant) {
    if handover.handed {
        handover.unit.merge(live);
        *live = WorkerStats::new(live.servers(), now);
    } else {
        std::mem::swap(&mut handover.unit, live);
        handover.handed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::{OpKind, Outcome, Timestamps};

    fn recorded(n: usize, now: Instant) -> WorkerStats {
        let mut unit = WorkerStats::new(1, now);
        let ts = Timestamps {
            arrival: now,
            enqueued: now,
            dequeued: now,
            first_sent: None,
            last_answer: None,
            reply_sent: now + Duration::from_micros(10),
        };
        for _ in 0..n {
            unit.record(OpKind::Get, &ts, Outcome::default());
        }
        unit
    }

    #[test]
    fn a_handed_over_window_is_swapped_for_the_fresh_unit() {
        let now = Instant::now();
        let units = StatsUnits::new(1, 1, 1, now);
        let mut live = recorded(3, now);
        hand_over(&mut units.lock(0), &mut live, now);
        assert_eq!(live.op(OpKind::Get).count, 0, "the worker records afresh");
        let handover = units.lock(0);
        assert!(handover.handed);
        assert_eq!(handover.unit.op(OpKind::Get).count, 3);
    }

    #[test]
    fn a_window_not_yet_taken_gathers_the_next_one_too() {
        let now = Instant::now();
        let units = StatsUnits::new(1, 1, 1, now);
        let mut live = recorded(3, now);
        hand_over(&mut units.lock(0), &mut live, now);
        let mut live = recorded(2, now);
        hand_over(&mut units.lock(0), &mut live, now);
        assert_eq!(live.op(OpKind::Get).count, 0);
        assert_eq!(units.lock(0).unit.op(OpKind::Get).count, 5, "nothing lost");
    }

    #[tokio::test]
    async fn a_reader_waits_for_every_loop_to_answer() {
        let units = Arc::new(StatsUnits::new(2, 2, 1, Instant::now()));
        // Nobody answers: the reader gives up after its patience.
        assert!(!units.ask_windows(Duration::from_millis(5)).await);
        let loops = Arc::clone(&units);
        let answering = std::thread::spawn(move || {
            let mut seen = [Seen::default(), Seen::default()];
            let mut answered = [false, false];
            let until = Instant::now() + Duration::from_secs(10);
            while answered.iter().any(|a| !a) && Instant::now() < until {
                for (index, seen) in seen.iter_mut().enumerate() {
                    // The first request is never answered: the second one is.
                    if let (Some(n), _) = loops.pending(seen) {
                        if n >= 2 {
                            loops.answered_windows(index, n, seen);
                            answered[index] = true;
                        }
                    }
                }
                std::thread::yield_now();
            }
        });
        assert!(units.ask_windows(Duration::from_secs(10)).await);
        answering.join().unwrap();
        // An ended loop answers everything.
        units.ended(0);
        units.ended(1);
        assert!(units.ask_latencies(Duration::from_millis(1)).await);
    }
}
