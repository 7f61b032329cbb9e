//! A connection's outbox as state without I/O: the reply slots in request order, the
//! in-order bytes not yet written, the replies completed ahead of an earlier one, and
//! the write barrier's count of dispatched requests and the requests it holds.

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};

use super::Ordered;
use crate::admission::ReplyWindow;
use crate::budget::{Charge, MemoryBudget};

/// An outbox buffer larger than this is replaced by a fresh one once it is empty.
const OUTBOX_KEEP: usize = 256 * 1024;

pub(super) enum Slot {
    Waiting,
    Ready(Bytes),
    /// The request asked for no reply (noreply).
    Silent,
}

pub(super) struct Outbox<R> {
    pub(super) next_seq: u64,
    /// Sequence number of `slots[0]`.
    pub(super) base_seq: u64,
    pub(super) slots: VecDeque<Slot>,
    /// In-order bytes not yet accepted by the kernel.
    pub(super) buf: BytesMut,
    /// The socket failed; replies are dropped.
    pub(super) dead: bool,
    /// Requests of this connection in the FCFS queue or at a worker.
    pub(super) dispatched: usize,
    /// One of them is a write: nothing else may be dispatched until it is done.
    pub(super) write_dispatched: bool,
    /// Requests held back by the write barrier, in arrival order.
    pub(super) held: VecDeque<R>,
    /// Bytes of the replies completed ahead of an earlier one (in `slots`).
    pub(super) aside: usize,
    /// `buf` and `aside` held against the memory budget.
    pub(super) charge: Charge,
    /// The replies handed to the client so far: how much its requests will bring.
    pub(super) window: ReplyWindow,
}

impl<R> Outbox<R> {
    pub(super) fn new(budget: Arc<MemoryBudget>) -> Self {
        Outbox {
            next_seq: 0,
            base_seq: 0,
            slots: VecDeque::new(),
            buf: BytesMut::with_capacity(16 * 1024),
            dead: false,
            dispatched: 0,
            write_dispatched: false,
            held: VecDeque::new(),
            aside: 0,
            charge: Charge::new(budget),
            window: ReplyWindow::default(),
        }
    }

    fn may_dispatch(&self, replicated: bool) -> bool {
        self.held.is_empty() && !self.write_dispatched && !(replicated && self.dispatched > 0)
    }

    fn note_dispatch(&mut self, replicated: bool) {
        self.dispatched += 1;
        self.write_dispatched |= replicated;
    }

    pub(super) fn pending_bytes(&self) -> usize {
        self.buf.len() + self.aside
    }

    /// The charge follows what is held (shrinking always succeeds); a large buffer that
    /// has been written out goes back to the allocator.
    pub(super) fn settle(&mut self) {
        if self.buf.is_empty() && self.buf.capacity() > OUTBOX_KEEP {
            self.buf = BytesMut::with_capacity(16 * 1024);
        }
        let n = self.pending_bytes();
        self.charge.force_resize(n);
    }

    /// Takes `job` for dispatch now (returned), or holds it behind the write barrier.
    pub(super) fn admit(&mut self, job: R, replicated: bool) -> Option<R> {
        if self.may_dispatch(replicated) {
            self.note_dispatch(replicated);
            Some(job)
        } else {
            self.held.push_back(job);
            None
        }
    }

    /// Pops the completed front slot and every ready slot behind it into the buffer.
    pub(super) fn advance(&mut self) {
        self.slots.pop_front();
        self.base_seq += 1;
        while matches!(self.slots.front(), Some(Slot::Ready(_) | Slot::Silent)) {
            if let Some(Slot::Ready(bytes)) = self.slots.pop_front() {
                self.aside -= bytes.len();
                if !self.dead {
                    self.buf.extend_from_slice(&bytes);
                }
            }
            self.base_seq += 1;
        }
    }
}

impl<R: Ordered> Outbox<R> {
    /// Records that a dispatched request is done and hands what the barrier held, and may
    /// now go, to `dispatch`.
    pub(super) fn release(&mut self, replicated: bool, mut dispatch: impl FnMut(R)) {
        self.dispatched -= 1;
        if replicated {
            self.write_dispatched = false;
        }
        while let Some(front) = self.held.front() {
            let front_replicated = front.is_write();
            if self.write_dispatched || (front_replicated && self.dispatched > 0) {
                break;
            }
            let job = self.held.pop_front().expect("front exists");
            self.note_dispatch(front_replicated);
            dispatch(job);
        }
    }
}
