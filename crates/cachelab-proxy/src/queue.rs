//! The FCFS request queue between the net layer and the W workers.
//!
//! Jobs go into one lock-free FIFO; idle workers park on their own `Notify`, and a
//! producer wakes exactly one idle worker. Nothing here is a lock shared by all workers,
//! and nothing allocates per request beyond the FIFO's amortised blocks.
//!
//! The wake-up protocol is the classic store-then-check on both sides (a producer pushes
//! the job then looks for an idle worker; a worker announces itself idle then looks for a
//! job), with SeqCst fences between, so at least one side sees the other and no job waits
//! while a worker sleeps.

use std::sync::atomic::{fence, AtomicBool, Ordering};

use crossbeam_queue::SegQueue;
use crossbeam_utils::CachePadded;
use tokio::sync::Notify;

struct WorkerSlot {
    /// True while the worker is parked or about to park and no producer has claimed it.
    idle: AtomicBool,
    wake: Notify,
}

pub struct RequestQueue<T> {
    jobs: SegQueue<T>,
    idle: SegQueue<usize>,
    workers: Box<[CachePadded<WorkerSlot>]>,
    closed: AtomicBool,
}

impl<T> RequestQueue<T> {
    pub fn new(workers: usize) -> Self {
        RequestQueue {
            jobs: SegQueue::new(),
            idle: SegQueue::new(),
            workers: (0..workers)
                .map(|_| {
                    CachePadded::new(WorkerSlot {
                        idle: AtomicBool::new(false),
                        wake: Notify::new(),
                    })
                })
                .collect(),
            closed: AtomicBool::new(false),
        }
    }

    /// Appends a job and wakes one idle worker, if any.
    pub fn push(&self, job: T) {
        self.jobs.push(job);
        fence(Ordering::SeqCst);
        while let Some(worker) = self.idle.pop() {
            let slot = &self.workers[worker];
            if slot
                .idle
                .compare_exchange(true, false, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                slot.wake.notify_one();
                return;
            }
            // A stale entry: that worker found work on its own. Try the next one.
        }
    }

    /// The oldest job, waiting if there is none; `None` once the queue is closed and
    /// empty (jobs queued before `close` are still handed out).
    pub async fn pop(&self, worker: usize) -> Option<T> {
        let slot = &self.workers[worker];
        loop {
            if let Some(job) = self.jobs.pop() {
                return Some(job);
            }
            if self.closed.load(Ordering::Acquire) {
                return None;
            }
            slot.idle.store(true, Ordering::Release);
            self.idle.push(worker);
            fence(Ordering::SeqCst);
            if let Some(job) = self.jobs.pop() {
                // If a producer claimed us meanwhile, its notification stays stored and
                // makes a later wait return at once; the loop absorbs it.
                slot.idle.store(false, Ordering::Release);
                return Some(job);
            }
            if self.closed.load(Ordering::Acquire) {
                slot.idle.store(false, Ordering::Release);
                return None;
            }
            slot.wake.notified().await;
        }
    }

    /// The oldest job if one is waiting, without waiting.
    pub fn try_pop(&self) -> Option<T> {
        self.jobs.pop()
    }

    /// Stops waiting workers once the remaining jobs are taken.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        fence(Ordering::SeqCst);
        for slot in self.workers.iter() {
            slot.wake.notify_one();
        }
    }

    /// Jobs waiting (not yet taken by a worker).
    pub fn len(&self) -> usize {
        self.jobs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn jobs_come_out_in_arrival_order() {
        let q = RequestQueue::new(1);
        for i in 0..5 {
            q.push(i);
        }
        for i in 0..5 {
            assert_eq!(q.pop(0).await, Some(i));
        }
        assert_eq!(q.len(), 0);
    }

    #[tokio::test]
    async fn close_drains_remaining_jobs_then_stops_workers() {
        let q = RequestQueue::new(2);
        q.push(1);
        q.close();
        assert_eq!(q.pop(0).await, Some(1));
        assert_eq!(q.pop(1).await, None);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_job_is_taken_exactly_once_by_parked_workers() {
        const WORKERS: usize = 8;
        const JOBS: u64 = 20_000;
        let q = Arc::new(RequestQueue::new(WORKERS));
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let q = Arc::clone(&q);
                tokio::spawn(async move {
                    let (mut n, mut sum) = (0u64, 0u64);
                    while let Some(job) = q.pop(w).await {
                        n += 1;
                        sum += job;
                        if job % 97 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                    (n, sum)
                })
            })
            .collect();
        for i in 0..JOBS {
            q.push(i);
            if i % 1000 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        q.close();
        let (mut n, mut sum) = (0, 0);
        for h in handles {
            let (a, b) = tokio::time::timeout(Duration::from_secs(10), h)
                .await
                .expect("a worker hung")
                .unwrap();
            n += a;
            sum += b;
        }
        assert_eq!(n, JOBS);
        assert_eq!(sum, JOBS * (JOBS - 1) / 2);
    }

    #[tokio::test]
    async fn a_parked_worker_wakes_for_a_new_job() {
        let q = Arc::new(RequestQueue::new(1));
        let q2 = Arc::clone(&q);
        let worker = tokio::spawn(async move { q2.pop(0).await });
        tokio::task::yield_now().await;
        q.push(42);
        let got = tokio::time::timeout(Duration::from_secs(5), worker).await;
        assert_eq!(got.unwrap().unwrap(), Some(42));
    }
}
