//! One server's share of a connection: its byte stream's offsets and the requests sent
//! on it, answered in the order they were sent. A connection to one server has one
//! lane; a sharded one (`--shard`) has one per server, and its pipeline counts the
//! requests outstanding on all of them.

use std::collections::VecDeque;

use cachelab_protocol::ReplyScan;

use super::Pending;

#[derive(Debug, Default)]
pub(super) struct Lane {
    pub(super) pending: VecDeque<Pending>,
    /// Bytes composed on this session (the transmit stamps' keys count them).
    pub(super) composed: u64,
    /// Bytes written on this session.
    pub(super) written: u64,
    /// The framing of the reply at the front of the read buffer, across reads.
    pub(super) scan: Option<ReplyScan>,
    /// Requests that were pending before the issue under way: those after are new.
    pub(super) fresh_from: usize,
}

impl Lane {
    /// A new socket: its stream offsets start again.
    pub(super) fn restart(&mut self) {
        self.composed = 0;
        self.written = 0;
        self.scan = None;
    }

    /// `n` more bytes went to the socket in one write: the requests whose last byte it
    /// holds were carried by it (its transmit stamp is theirs).
    pub(super) fn wrote(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        self.written += n as u64;
        let end = self.written - 1;
        for p in self.pending.iter_mut().rev() {
            if p.write_end.is_some() {
                break;
            }
            if p.last_byte <= end {
                p.write_end = Some(end);
            }
        }
    }
}
