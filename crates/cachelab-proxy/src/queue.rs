//! The FCFS request queue between the net layer and the W workers: the event loop pushes
//! a request when it is decoded (or when its connection's write barrier lifts) and hands
//! the oldest to an idle worker in the same turn, so nothing here waits or wakes.
//! Its length is read by `stats`, the metrics and the statistics writer from other
//! threads.

use crossbeam_queue::SegQueue;

pub struct RequestQueue<T> {
    jobs: SegQueue<T>,
}

impl<T> Default for RequestQueue<T> {
    fn default() -> Self {
        RequestQueue {
            jobs: SegQueue::new(),
        }
    }
}

impl<T> RequestQueue<T> {
    /// Appends a job.
    pub fn push(&self, job: T) {
        self.jobs.push(job);
    }

    /// The oldest job if one is waiting.
    pub fn try_pop(&self) -> Option<T> {
        self.jobs.pop()
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
        let q = RequestQueue::default();
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
}
