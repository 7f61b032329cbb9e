//! Replies framed already: on a shared connection the demux frames every reply to find
//! whose it is ([`crate::demux`]), and a reply it handed over whole comes with
//! what that framing found ([`Framed`]), so the engine does not scan it a second time.
//!
//! The engine trusts a frame only where it would have scanned the same bytes the same
//! way: the frame must start exactly where the engine's next reply starts, counted in
//! bytes delivered on the connection, and be of the kind the engine expects there. A
//! frame that does not line up (its bytes were refused, read past or dropped with the
//! connection) is stale and is thrown away; bytes put into the buffer by any other way
//! than [`Engine::deliver`] make every frame held stale. The scan is a function of the
//! bytes and the expected kind only, so a frame used is the scan's own answer.

use std::collections::VecDeque;

use bytes::BytesMut;
use cachelab_protocol::{Expect, Reply};

use super::Engine;
use crate::demux::Framed;
use crate::job::Request;
use crate::routing::plan::ServerId;

/// The frames held for one connection's buffer.
#[derive(Debug, Default)]
pub(super) struct Hints {
    /// The position of the buffer's end in the bytes delivered. Its origin is arbitrary
    /// and is set again whenever no frame is held.
    tail: u64,
    held: VecDeque<(u64, usize, Framed)>,
}

impl Hints {
    /// `len` bytes were appended to a buffer that held `before` bytes, `framed` if they
    /// are exactly one reply.
    fn delivered(&mut self, before: usize, len: usize, framed: Option<Framed>) {
        if self.held.is_empty() {
            self.tail = before as u64;
        }
        if let Some(framed) = framed {
            self.held.push_back((self.tail, len, framed));
        }
        self.tail += len as u64;
    }

    /// Bytes reached the buffer another way: no position is known any more.
    pub(super) fn forget(&mut self) {
        self.held.clear();
    }

    /// The reply at `parsed` in a buffer of `len` bytes, if it was framed as a reply of
    /// kind `expect`: its summary and length.
    pub(super) fn take(
        &mut self,
        parsed: usize,
        len: usize,
        expect: Expect,
    ) -> Option<(Reply, usize)> {
        let at = self.tail.checked_sub((len - parsed) as u64)?;
        while let Some(&(start, n, framed)) = self.held.front() {
            if start < at {
                self.held.pop_front();
                continue;
            }
            if start == at && framed.expect == expect && n <= len - parsed {
                self.held.pop_front();
                return Some((framed.reply, n));
            }
            return None;
        }
        None
    }
}

impl<J: std::ops::Deref<Target = Request>, H> Engine<J, H> {
    /// Where bytes read from `server`'s own connection go (room for a read is made).
    pub fn read_buf(&mut self, server: ServerId) -> &mut BytesMut {
        self.conns[server].hints.forget();
        make_room(&mut self.conns[server].rbuf)
    }

    /// Bytes from `server`'s shared connection ([`Engine::read_buf`]'s peer), with their
    /// frame when they are exactly one reply the demux framed from its first byte.
    pub fn deliver(&mut self, server: ServerId, bytes: &[u8], framed: Option<Framed>) {
        let conn = &mut self.conns[server];
        let before = conn.rbuf.len();
        make_room(&mut conn.rbuf).extend_from_slice(bytes);
        conn.hints.delivered(before, bytes.len(), framed);
    }
}

/// Room for a read in a reply buffer.
fn make_room(rbuf: &mut BytesMut) -> &mut BytesMut {
    if rbuf.capacity() - rbuf.len() < 4096 {
        rbuf.reserve(16 * 1024);
    }
    rbuf
}

#[cfg(test)]
mod tests {
    use super::*;

    fn end() -> Framed {
        Framed {
            expect: Expect::Values,
            reply: Reply::Values {
                hits: 0,
                body_len: 0,
            },
        }
    }

    #[test]
    fn a_frame_is_used_only_where_it_starts() {
        let mut h = Hints::default();
        h.delivered(0, 5, Some(end()));
        h.delivered(5, 5, Some(end()));
        // The first reply's bytes were read past (removed): its frame is stale.
        assert_eq!(h.take(0, 5, Expect::Values), Some((end().reply, 5)));
        assert_eq!(h.take(0, 0, Expect::Values), None);
    }

    #[test]
    fn a_frame_of_another_kind_or_after_other_bytes_is_not_used() {
        let mut h = Hints::default();
        h.delivered(0, 5, Some(end()));
        assert_eq!(h.take(0, 5, Expect::Store), None);
        let mut h = Hints::default();
        h.delivered(0, 3, None);
        h.delivered(3, 5, Some(end()));
        assert_eq!(h.take(0, 8, Expect::Values), None, "the frame starts at 3");
        assert_eq!(h.take(3, 8, Expect::Values), Some((end().reply, 5)));
        let mut h = Hints::default();
        h.delivered(0, 5, Some(end()));
        h.forget();
        assert_eq!(h.take(0, 5, Expect::Values), None);
    }
}
