//! A client connection, without its socket (the event loop's client owns that, writes
//! [`ClientConn::output`] and says how much the kernel took): the client engine
//! ([`session::ClientSession`]: decoding, local answers, admission), its deadlines
//! ([`lifecycle`]), and here its ordered outbox.
//!
//! Requests of one connection may be served by different workers and finish out of
//! order, but replies must leave in request order. Every request reserves a slot in
//! arrival order; the completion of the front slot moves it, and any later slots that
//! are already complete, to the output. Only a reply that finishes ahead of an
//! earlier one is copied aside.
//!
//! Requests must also *take effect* in order, as on a memcached connection: a pipelined
//! `set k` then `get k` must see the value. Reads of one connection may be at different
//! workers at once, but a write waits until every earlier request of its connection is
//! done, and later requests wait for the write (the write barrier, [`ClientConn::dispatch`]).

use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::admission::ClientLimits;
use crate::budget::MemoryBudget;
use crate::endpoint::Peer;
use crate::queue::RequestQueue;

pub mod lifecycle;
mod outbox;
pub mod session;

use outbox::{Outbox, Slot};

/// What a reply that does not fit in the memory budget becomes.
const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";

/// What a connection holds behind its write barrier: a request that knows whether it
/// changes data.
pub trait Ordered {
    /// Whether it changes data: it waits for everything before it on its connection,
    /// and what follows waits for it.
    fn is_write(&self) -> bool;
}

pub struct ClientConn<R> {
    pub id: u64,
    pub peer: Peer,
    outbox: Outbox<R>,
}

impl<R: Ordered> ClientConn<R> {
    pub fn new(id: u64, peer: impl Into<Peer>, budget: Arc<MemoryBudget>) -> Self {
        ClientConn {
            id,
            peer: peer.into(),
            outbox: Outbox::new(budget),
        }
    }

    /// Reserves the next reply slot, in arrival order.
    pub fn reserve(&mut self) -> u64 {
        let ob = &mut self.outbox;
        let seq = ob.next_seq;
        ob.next_seq += 1;
        ob.slots.push_back(Slot::Waiting);
        seq
    }

    /// Puts a request into the FCFS queue, or holds it behind the write barrier.
    pub fn dispatch(&mut self, job: R, replicated: bool, queue: &mut RequestQueue<R>) {
        if let Some(job) = self.outbox.admit(job, replicated) {
            queue.push(job);
        }
    }

    /// Records that a dispatched request is done and releases what the barrier held.
    pub fn finished(&mut self, replicated: bool, queue: &mut RequestQueue<R>) {
        self.outbox.release(replicated, |job| queue.push(job));
    }

    /// Replies at once, after any replies still owed (for requests answered by the net
    /// layer itself: errors, version, stats).
    pub fn reply_now(&mut self, reply: &[u8]) {
        let ob = &mut self.outbox;
        if ob.slots.is_empty() {
            if !ob.dead {
                ob.buf.extend_from_slice(reply);
            }
        } else {
            ob.next_seq += 1;
            ob.aside += reply.len();
            ob.slots
                .push_back(Slot::Ready(Bytes::copy_from_slice(reply)));
        }
        self.outbox.settle();
    }

    /// Completes slot `seq` with `reply`; a reply that does not fit in the memory budget
    /// is replaced by `SERVER_ERROR out of memory`.
    pub fn complete(&mut self, seq: u64, reply: &[u8]) {
        let ob = &mut self.outbox;
        let index = (seq - ob.base_seq) as usize;
        ob.window.observe(reply.len());
        if index == 0 {
            if !ob.dead {
                let before = ob.buf.len();
                ob.buf.extend_from_slice(reply);
                let n = ob.pending_bytes();
                if !ob.charge.resize(n) {
                    ob.buf.truncate(before);
                    ob.buf.extend_from_slice(OUT_OF_MEMORY);
                    ob.settle();
                }
            }
            ob.advance();
        } else {
            let n = ob.pending_bytes() + reply.len();
            let aside = if ob.charge.resize(n) {
                Bytes::copy_from_slice(reply)
            } else {
                Bytes::from_static(OUT_OF_MEMORY)
            };
            ob.aside += aside.len();
            ob.settle();
            ob.slots[index] = Slot::Ready(aside);
        }
        self.outbox.settle();
    }

    /// Completes slot `seq` without a reply (the client sent noreply).
    pub fn complete_silent(&mut self, seq: u64) {
        let ob = &mut self.outbox;
        ob.window.observe(0);
        let index = (seq - ob.base_seq) as usize;
        if index == 0 {
            ob.advance();
        } else {
            ob.slots[index] = Slot::Silent;
        }
        self.outbox.settle();
    }

    /// The replies due to the client now, in request order: the loop writes them and
    /// says how much the kernel took ([`ClientConn::wrote`]).
    pub fn output(&self) -> &[u8] {
        &self.outbox.buf
    }

    /// The first `n` bytes of [`ClientConn::output`] were written.
    pub fn wrote(&mut self, n: usize) {
        self.outbox.buf.advance(n);
        self.outbox.settle();
    }

    /// Writing to the client failed: what is owed and what comes later is dropped.
    pub fn write_failed(&mut self) {
        self.outbox.dead = true;
        self.outbox.buf.clear();
        self.outbox.settle();
    }

    /// Requests whose replies are not yet in the outgoing buffer.
    pub fn in_flight(&self) -> usize {
        self.outbox.slots.len()
    }

    /// Whether everything owed has been written (or can no longer be).
    pub fn is_drained(&self) -> bool {
        let ob = &self.outbox;
        ob.dead || (ob.slots.is_empty() && ob.buf.is_empty())
    }

    pub fn is_dead(&self) -> bool {
        self.outbox.dead
    }

    /// Whether the client may not have another request dispatched now
    /// ([`crate::admission::ReplyWindow::may_dispatch`]: requests in flight, and the
    /// bytes they and its unread replies come to): the caller waits for a completion.
    pub fn must_wait(&self, limits: ClientLimits) -> bool {
        let ob = &self.outbox;
        let in_flight = ob.slots.len();
        let unread = ob.pending_bytes();
        !ob.dead && !ob.window.may_dispatch(in_flight, unread, limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection with an unlimited budget; what its client receives is read from
    /// its output.
    fn conn() -> ClientConn<Req> {
        conn_with_budget(1 << 30)
    }

    fn conn_with_budget(budget: usize) -> ClientConn<Req> {
        let peer: std::net::SocketAddr = "127.0.0.1:5000".parse().unwrap();
        ClientConn::new(1, peer, Arc::new(MemoryBudget::new(budget)))
    }

    /// Takes `n` bytes of the connection's output as the kernel would.
    fn read_exactly(conn: &mut ClientConn<Req>, n: usize) -> Vec<u8> {
        let out = conn.output()[..n].to_vec();
        conn.wrote(n);
        out
    }

    /// A request as the barrier sees it: a write or a read, and which one it is.
    #[derive(Debug, PartialEq)]
    struct Req {
        write: bool,
        n: u64,
    }

    impl Ordered for Req {
        fn is_write(&self) -> bool {
            self.write
        }
    }

    fn req(conn: &mut ClientConn<Req>, write: bool, n: u64) -> Req {
        conn.reserve();
        Req { write, n }
    }

    #[test]
    fn a_reply_beyond_the_memory_budget_becomes_an_error_line() {
        let mut conn = conn_with_budget(1000);
        let first = conn.reserve();
        let second = conn.reserve();
        // completed out of order: the second waits aside, and must fit too
        conn.complete(second, &[b'x'; 5000]);
        conn.complete(first, b"END\r\n");
        let expected = [&b"END\r\n"[..], OUT_OF_MEMORY].concat();
        assert_eq!(read_exactly(&mut conn, expected.len()), expected);
        let third = conn.reserve();
        conn.complete(third, &[b'y'; 900]);
        assert_eq!(read_exactly(&mut conn, 900), vec![b'y'; 900]);
    }

    #[test]
    fn a_write_waits_for_earlier_requests_and_later_ones_wait_for_it() {
        let mut conn = conn();
        let mut queue = RequestQueue::default();
        let r = req(&mut conn, false, 0);
        conn.dispatch(r, false, &mut queue);
        let r = req(&mut conn, false, 1);
        conn.dispatch(r, false, &mut queue);
        let r = req(&mut conn, true, 2);
        conn.dispatch(r, true, &mut queue);
        let r = req(&mut conn, false, 3);
        conn.dispatch(r, false, &mut queue);
        assert_eq!(
            queue.len(),
            2,
            "the two reads run in parallel; the write waits"
        );
        conn.finished(false, &mut queue);
        assert_eq!(queue.len(), 2);
        let _ = queue.try_pop();
        let _ = queue.try_pop();
        conn.finished(false, &mut queue);
        assert_eq!(queue.len(), 1, "both reads done: the write goes");
        assert_eq!(queue.try_pop().unwrap(), Req { write: true, n: 2 });
        conn.finished(true, &mut queue);
        assert_eq!(queue.try_pop().unwrap(), Req { write: false, n: 3 });
    }

    #[test]
    fn replies_leave_in_request_order_whatever_order_they_complete_in() {
        let mut conn = conn();
        let a = conn.reserve();
        let b = conn.reserve();
        let c = conn.reserve();
        conn.complete(c, b"C");
        conn.complete(b, b"B");
        assert_eq!(conn.in_flight(), 3);
        conn.complete(a, b"A");
        assert_eq!(read_exactly(&mut conn, 3), b"ABC");
        assert!(conn.is_drained());
    }

    #[test]
    fn local_replies_wait_behind_owed_replies() {
        let mut conn = conn();
        let a = conn.reserve();
        conn.reply_now(b"ERROR\r\n");
        conn.complete(a, b"END\r\n");
        conn.reply_now(b"VERSION x\r\n");
        assert_eq!(
            read_exactly(&mut conn, 23),
            b"END\r\nERROR\r\nVERSION x\r\n"
        );
    }

    #[test]
    fn silent_slots_release_the_replies_behind_them() {
        let mut conn = conn();
        let a = conn.reserve();
        let b = conn.reserve();
        conn.complete(b, b"B");
        conn.complete_silent(a);
        assert_eq!(read_exactly(&mut conn, 1), b"B");
        assert_eq!(conn.in_flight(), 0);
    }

    #[test]
    fn what_the_kernel_did_not_take_stays_for_the_next_write() {
        let mut conn = conn();
        let seq = conn.reserve();
        conn.complete(seq, b"VALUE k 0 3\r\nabc\r\nEND\r\n");
        conn.wrote(6);
        assert!(!conn.is_drained());
        assert_eq!(conn.output(), b"k 0 3\r\nabc\r\nEND\r\n");
        conn.wrote(conn.output().len());
        assert!(conn.is_drained());
    }

    #[test]
    fn after_a_failed_write_replies_are_dropped_and_the_connection_counts_as_drained() {
        let mut conn = conn();
        let a = conn.reserve();
        let b = conn.reserve();
        conn.complete(a, b"A");
        conn.write_failed();
        conn.complete(b, b"B");
        conn.reply_now(b"ERROR\r\n");
        assert!(conn.output().is_empty());
        assert!(conn.is_dead() && conn.is_drained());
    }
}
