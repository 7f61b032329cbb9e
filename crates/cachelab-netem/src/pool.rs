//! Reusable frame buffers, so that forwarding allocates nothing once the pool has grown to
//! the deepest queue seen.
//!
//! A frame is received into a *landing* buffer large enough for any frame (a GSO
//! super-packet of 64 KiB with its virtio-net header). Most frames are far smaller (ACKs,
//! single segments), and a queue of them should not pin 64 KiB each, so a frame that fits
//! a *small* buffer is copied into one (a copy of at most a few KiB) and the landing buffer
//! goes back to the pool at once; a large frame keeps its landing buffer, without a copy.
//! Both free lists are stacks: the buffer used last is reused first, still in the cache.

/// A received frame: the first `len` bytes of a pooled buffer.
#[derive(Debug)]
pub struct Frame {
    buf: Box<[u8]>,
    len: usize,
}

impl Frame {
    pub fn bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[derive(Debug)]
pub struct BufferPool {
    large: usize,
    small: usize,
    free_large: Vec<Box<[u8]>>,
    free_small: Vec<Box<[u8]>>,
    allocated: usize,
}

impl BufferPool {
    /// Landing buffers of `large` bytes; frames of at most `small` bytes are kept in small
    /// buffers.
    pub fn new(large: usize, small: usize) -> Self {
        assert!(
            small <= large,
            "small buffers ({small}) must not exceed large ({large})"
        );
        BufferPool {
            large,
            small,
            free_large: Vec::new(),
            free_small: Vec::new(),
            allocated: 0,
        }
    }

    /// A buffer to receive into, large enough for any frame. Give it back with
    /// [`BufferPool::keep`] (it held a frame) or [`BufferPool::give_back`] (it did not).
    pub fn landing(&mut self) -> Box<[u8]> {
        match self.free_large.pop() {
            Some(buf) => buf,
            None => self.allocate(self.large),
        }
    }

    /// Returns a landing buffer that received nothing.
    pub fn give_back(&mut self, landing: Box<[u8]>) {
        debug_assert_eq!(landing.len(), self.large);
        self.free_large.push(landing);
    }

    /// Keeps the first `len` bytes of `landing` as a frame, in a small buffer when they fit.
    pub fn keep(&mut self, landing: Box<[u8]>, len: usize) -> Frame {
        assert!(
            len <= landing.len(),
            "frame of {len} bytes in a {}-byte buffer",
            landing.len()
        );
        if len > self.small {
            return Frame { buf: landing, len };
        }
        let mut buf = match self.free_small.pop() {
            Some(buf) => buf,
            None => self.allocate(self.small),
        };
        buf[..len].copy_from_slice(&landing[..len]);
        self.free_large.push(landing);
        Frame { buf, len }
    }

    /// Returns a frame's buffer to the pool once the frame has been sent or dropped.
    pub fn recycle(&mut self, frame: Frame) {
        if frame.buf.len() == self.large {
            self.free_large.push(frame.buf);
        } else {
            self.free_small.push(frame.buf);
        }
    }

    /// Buffers allocated so far: the pool's high-water mark, not a per-frame count.
    pub fn allocated(&self) -> usize {
        self.allocated
    }

    fn allocate(&mut self, size: usize) -> Box<[u8]> {
        self.allocated += 1;
        vec![0; size].into_boxed_slice()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receive(pool: &mut BufferPool, payload: &[u8]) -> Frame {
        let mut landing = pool.landing();
        landing[..payload.len()].copy_from_slice(payload);
        pool.keep(landing, payload.len())
    }

    #[test]
    fn a_frame_keeps_exactly_the_received_bytes() {
        let mut pool = BufferPool::new(64, 8);
        let small = receive(&mut pool, b"ack");
        let large = receive(&mut pool, &[7; 40]);
        assert_eq!(small.bytes(), b"ack");
        assert_eq!(large.bytes(), &[7; 40][..]);
        assert_eq!((small.len(), large.len()), (3, 40));
    }

    #[test]
    fn steady_forwarding_allocates_nothing_after_the_first_round() {
        let mut pool = BufferPool::new(64, 8);
        for _ in 0..1000 {
            let a = receive(&mut pool, b"small");
            let b = receive(&mut pool, &[1; 50]);
            pool.recycle(a);
            pool.recycle(b);
            let unused = pool.landing();
            pool.give_back(unused);
        }
        // One large buffer, landing and large frame in turn, and one small.
        assert_eq!(pool.allocated(), 2);
    }

    #[test]
    fn queued_small_frames_do_not_pin_large_buffers() {
        let mut pool = BufferPool::new(64, 8);
        let frames: Vec<Frame> = (0..100).map(|_| receive(&mut pool, b"x")).collect();
        // 100 small buffers and a single landing buffer, reused for every receive.
        assert_eq!(pool.allocated(), 101);
        for f in frames {
            pool.recycle(f);
        }
        let again: Vec<Frame> = (0..100).map(|_| receive(&mut pool, b"y")).collect();
        assert_eq!(pool.allocated(), 101);
        assert!(again.iter().all(|f| f.bytes() == b"y"));
    }

    #[test]
    fn a_frame_of_exactly_the_small_size_is_copied() {
        let mut pool = BufferPool::new(64, 8);
        let f = receive(&mut pool, &[3; 8]);
        assert_eq!(f.buf.len(), 8);
        let g = receive(&mut pool, &[4; 9]);
        assert_eq!(g.buf.len(), 64);
    }
}
