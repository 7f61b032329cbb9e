//! The delay line's queue: frames in arrival order, each due a fixed delay after it arrived.
//!
//! No I/O and no clock: the caller passes every instant in, so tests decide what "now" is.
//! The delay is the same for every frame of a direction, so due times grow with arrival
//! times and a FIFO is already sorted by due time: the head is always the next frame to
//! leave, and frames leave in the order they came (as netem keeps order with a constant
//! delay and no jitter).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A frame taken from the queue, with the instant it was due to leave.
#[derive(Debug, PartialEq, Eq)]
pub struct DueFrame<F> {
    /// `arrival + delay`: where the lateness of its send starts.
    pub due: Instant,
    pub frame: F,
}

/// Frames waiting out their delay, at most `limit` of them; what arrives beyond the limit
/// is dropped and counted, like netem's `limit`.
#[derive(Debug)]
pub struct DelayQueue<F> {
    delay: Duration,
    limit: usize,
    frames: VecDeque<DueFrame<F>>,
    drops: u64,
}

impl<F> DelayQueue<F> {
    /// Room for `limit` frames is reserved up front, so pushing never allocates.
    pub fn new(delay: Duration, limit: usize) -> Self {
        DelayQueue {
            delay,
            limit,
            frames: VecDeque::with_capacity(limit),
            drops: 0,
        }
    }

    /// Queues `frame`, which arrived at `arrival`, to leave at `arrival + delay`. A full
    /// queue drops it: the frame comes back in `Err` (so its buffer can be reused) and
    /// the drop is counted. Arrivals must not go back in time.
    pub fn push(&mut self, arrival: Instant, frame: F) -> Result<(), F> {
        if self.frames.len() >= self.limit {
            self.drops += 1;
            return Err(frame);
        }
        debug_assert!(self
            .frames
            .back()
            .is_none_or(|last| last.due <= arrival + self.delay));
        self.frames.push_back(DueFrame {
            due: arrival + self.delay,
            frame,
        });
        Ok(())
    }

    /// When the head of the queue is due, the instant the caller should wake up at.
    pub fn next_due(&self) -> Option<Instant> {
        self.frames.front().map(|head| head.due)
    }

    /// The head of the queue if it is due at `now` (or earlier).
    pub fn pop_due(&mut self, now: Instant) -> Option<DueFrame<F>> {
        if self.frames.front()?.due <= now {
            self.frames.pop_front()
        } else {
            None
        }
    }

    /// Frames dropped because the queue held `limit` frames when they arrived.
    pub fn drops(&self) -> u64 {
        self.drops
    }

    pub fn len(&self) -> usize {
        self.frames.len()
    }

    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn a_frame_is_due_exactly_one_delay_after_it_arrived() {
        let t0 = Instant::now();
        let mut q = DelayQueue::new(us(1000), 10);
        q.push(t0, "a").unwrap();
        assert_eq!(q.next_due(), Some(t0 + us(1000)));
        assert_eq!(q.pop_due(t0 + us(999)), None);
        assert_eq!(
            q.pop_due(t0 + us(1000)),
            Some(DueFrame {
                due: t0 + us(1000),
                frame: "a"
            })
        );
        assert!(q.is_empty());
        assert_eq!(q.next_due(), None);
    }

    #[test]
    fn frames_leave_in_arrival_order_and_only_when_due() {
        let t0 = Instant::now();
        let mut q = DelayQueue::new(us(100), 10);
        for (i, at) in [0, 10, 10, 50].into_iter().enumerate() {
            q.push(t0 + us(at), i).unwrap();
        }
        let now = t0 + us(110);
        let mut left = Vec::new();
        while let Some(d) = q.pop_due(now) {
            left.push(d.frame);
        }
        assert_eq!(left, [0, 1, 2]);
        assert_eq!(q.next_due(), Some(t0 + us(150)));
        assert_eq!(q.pop_due(t0 + us(1_000)).map(|d| d.frame), Some(3));
    }

    #[test]
    fn a_late_pop_still_reports_the_original_due_time() {
        let t0 = Instant::now();
        let mut q = DelayQueue::new(us(100), 10);
        q.push(t0, ()).unwrap();
        let d = q.pop_due(t0 + us(5_000)).unwrap();
        assert_eq!(d.due, t0 + us(100));
    }

    #[test]
    fn beyond_the_limit_frames_are_dropped_counted_and_handed_back() {
        let t0 = Instant::now();
        let mut q = DelayQueue::new(us(100), 2);
        assert_eq!(q.push(t0, 1), Ok(()));
        assert_eq!(q.push(t0, 2), Ok(()));
        assert_eq!(q.push(t0, 3), Err(3));
        assert_eq!(q.push(t0, 4), Err(4));
        assert_eq!((q.len(), q.drops()), (2, 2));
        // Room again once the head has left.
        q.pop_due(t0 + us(100)).unwrap();
        assert_eq!(q.push(t0 + us(100), 5), Ok(()));
        assert_eq!(q.drops(), 2);
    }

    #[test]
    fn zero_delay_frames_are_due_on_arrival() {
        let t0 = Instant::now();
        let mut q = DelayQueue::new(Duration::ZERO, 1);
        q.push(t0, 'x').unwrap();
        assert_eq!(q.pop_due(t0).map(|d| d.frame), Some('x'));
    }
}
