//! What the engine knows of one server connection: its reply and outgoing buffers, the
//! reply being read, and whether it is up.

use std::sync::Arc;

use bytes::BytesMut;
use cachelab_protocol::{Expect, ReplyScan};

use super::hints::Hints;
use crate::budget::{Charge, MemoryBudget};
use crate::down::Down;

/// A read or reply buffer larger than this is replaced by a fresh one once empty.
pub(super) const RBUF_KEEP: usize = 256 * 1024;

/// What the engine knows of one server connection, and its buffers.
pub(super) struct Conn {
    /// Replies read from the server; `parsed` bytes of it belong to the current batch.
    pub(super) rbuf: BytesMut,
    pub(super) parsed: usize,
    /// Messages composed for the server and not yet sent.
    pub(super) wbuf: BytesMut,
    /// `rbuf` held against the memory budget.
    pub(super) charge: Charge,
    /// How far the reply being read was framed (see [`ReplyScan`]); None between replies.
    pub(super) scan: Option<ReplyScan>,
    /// Replies in `rbuf` a shared connection's demux framed already.
    pub(super) hints: Hints,
    /// The reply being read answers a request already refused (its kind given): its
    /// bytes are dropped as they come, to reach the replies after it.
    pub(super) skipping: Option<Expect>,
    pub(super) connected: bool,
    /// Why the server is down, for the error line.
    pub(super) down: Down,
    /// The retrieval line `wbuf` ends with, which other requests' keys may join
    /// (`--merge-gets`).
    pub(super) open_get: Option<OpenGet>,
}

/// A `get` or `gets` line at the end of a connection's outgoing buffer.
#[derive(Debug, Clone, Copy)]
pub(super) struct OpenGet {
    /// Where the line starts in `wbuf`, and where it ends: once `wbuf` is not that long,
    /// the line was sent or dropped and nothing may join it.
    pub(super) start: usize,
    pub(super) end: usize,
    /// A `gets`: only `gets` join it.
    pub(super) cas: bool,
}

impl Conn {
    pub(super) fn new(budget: Arc<MemoryBudget>) -> Conn {
        Conn {
            rbuf: BytesMut::with_capacity(16 * 1024),
            parsed: 0,
            wbuf: BytesMut::with_capacity(4 * 1024),
            charge: Charge::new(budget),
            scan: None,
            hints: Hints::default(),
            skipping: None,
            connected: false,
            down: Down::NotConnectedYet,
            open_get: None,
        }
    }

    /// The retrieval line of kind `cas` (`gets` or `get`) other keys may join, if any.
    pub(super) fn joinable(&self, cas: bool) -> Option<OpenGet> {
        self.open_get
            .filter(|open| open.end == self.wbuf.len() && open.cas == cas)
    }

    /// Drops the batch's replies from the buffer.
    pub(super) fn finish_batch(&mut self) {
        self.forget_partial_reply();
        if self.connected {
            bytes::Buf::advance(&mut self.rbuf, self.parsed);
        } else {
            self.rbuf.clear();
        }
        self.parsed = 0;
        // A large reply's buffer goes back to the allocator, not just to the budget.
        if self.rbuf.is_empty() && self.rbuf.capacity() > RBUF_KEEP {
            self.rbuf = BytesMut::with_capacity(16 * 1024);
        }
        self.charge.force_resize(if self.rbuf.is_empty() {
            0
        } else {
            self.rbuf.capacity()
        });
    }

    /// The reply being read is no longer wanted (its connection is gone or reset).
    pub(super) fn forget_partial_reply(&mut self) {
        self.scan = None;
        self.skipping = None;
    }

    /// Removes `n` bytes of `rbuf` from `from` on (a refused reply's, read past).
    pub(super) fn remove(&mut self, from: usize, n: usize) {
        if n == 0 {
            return;
        }
        let len = self.rbuf.len();
        self.rbuf.copy_within(from + n..len, from);
        self.rbuf.truncate(len - n);
    }
}
