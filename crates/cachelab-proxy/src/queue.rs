//! The FCFS request queue between the net layer and the W workers of one event loop:
//! the loop pushes a request when it is decoded (or when its connection's write barrier
//! lifts) and hands the oldest to an idle worker in the same turn, so nothing here
//! waits or wakes. The loop owns it; its length is published in a [`QueueLength`] for
//! `stats`, the metrics and the statistics writer on other threads.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A queue's length as last published by its loop (a plain store per change: no
/// fence, no read-modify-write), readable from any thread.
#[derive(Debug, Default)]
pub struct QueueLength(AtomicUsize);

impl QueueLength {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn set(&self, len: usize) {
        self.0.store(len, Ordering::Relaxed);
    }
}

pub struct RequestQueue<T> {
    jobs: VecDeque<T>,
    length: Arc<QueueLength>,
}

impl<T> Default for RequestQueue<T> {
    fn default() -> Self {
        RequestQueue::new(Arc::default())
    }
}

impl<T> RequestQueue<T> {
    /// An empty queue that publishes its length in `length`.
    pub fn new(length: Arc<QueueLength>) -> Self {
        length.set(0);
        RequestQueue {
            jobs: VecDeque::new(),
            length,
        }
    }

    /// Appends a job.
    pub fn push(&mut self, job: T) {
        self.jobs.push_back(job);
        self.length.set(self.jobs.len());
    }

    /// The oldest job if one is waiting.
    pub fn try_pop(&mut self) -> Option<T> {
        let job = self.jobs.pop_front()?;
        self.length.set(self.jobs.len());
        Some(job)
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

    #[test]
    fn jobs_come_out_in_arrival_order() {
        let mut q = RequestQueue::default();
        for i in 0..5 {
            q.push(i);
        }
        assert_eq!(q.len(), 5);
        for i in 0..5 {
            assert_eq!(q.try_pop(), Some(i));
        }
        assert!(q.is_empty());
        assert_eq!(q.try_pop(), None);
    }

    #[test]
    fn the_length_is_published_for_other_threads() {
        let length = Arc::new(QueueLength::default());
        let mut q = RequestQueue::new(Arc::clone(&length));
        q.push('a');
        q.push('b');
        assert_eq!(length.get(), 2);
        q.try_pop();
        assert_eq!(length.get(), 1);
        let reader = Arc::clone(&length);
        assert_eq!(std::thread::spawn(move || reader.get()).join().unwrap(), 1);
    }
}
