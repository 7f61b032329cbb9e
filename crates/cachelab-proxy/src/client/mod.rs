//! A client connection's writing half: its socket and the ordered outbox, owned by the
//! event loop's client (one owner: the loop reads the socket through it too).
//!
//! Requests of one connection may be served by different workers and finish out of
//! order, but replies must leave in request order. Every request reserves a slot in
//! arrival order; the completion of the front slot writes it, and any later slots that
//! are already complete, straight to the socket. Only a reply that finishes ahead of an
//! earlier one is copied aside.
//!
//! Requests must also *take effect* in order, as on a memcached connection: a pipelined
//! `set k` then `get k` must see the value. Reads of one connection may be at different
//! workers at once, but a write waits until every earlier request of its connection is
//! done, and later requests wait for the write (the write barrier, [`ClientConn::dispatch`]).

use std::io;
use std::sync::Arc;

use bytes::{Buf, Bytes};

use crate::admission::ClientLimits;
use crate::budget::MemoryBudget;
use crate::endpoint::Peer;
use crate::loop_stream::LoopStream;
use crate::queue::RequestQueue;

pub mod lifecycle;
mod outbox;

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
    stream: LoopStream,
    outbox: Outbox<R>,
}

impl<R: Ordered> ClientConn<R> {
    pub fn new(
        id: u64,
        peer: impl Into<Peer>,
        stream: LoopStream,
        budget: Arc<MemoryBudget>,
    ) -> Self {
        ClientConn {
            id,
            peer: peer.into(),
            stream,
            outbox: Outbox::new(budget),
        }
    }

    /// The socket, for the loop's reads and its registration.
    pub fn stream(&self) -> &LoopStream {
        &self.stream
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
    pub fn dispatch(&mut self, job: R, replicated: bool, queue: &RequestQueue<R>) {
        if let Some(job) = self.outbox.admit(job, replicated) {
            queue.push(job);
        }
    }

    /// Records that a dispatched request is done and releases what the barrier held.
    pub fn finished(&mut self, replicated: bool, queue: &RequestQueue<R>) {
        self.outbox.release(replicated, |job| queue.push(job));
    }

    /// Replies at once, after any replies still owed (for requests answered by the net
    /// layer itself: errors, version, stats).
    pub fn reply_now(&mut self, reply: &[u8]) {
        let ob = &mut self.outbox;
        if ob.slots.is_empty() {
            ob.buf.extend_from_slice(reply);
            self.flush();
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
        self.after_complete();
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
        self.after_complete();
    }

    fn after_complete(&mut self) {
        self.flush();
        self.outbox.settle();
    }

    /// Writes what the kernel accepts now; on a full socket, the rest waits for the
    /// loop to see it writable ([`ClientConn::flush_blocked`]).
    fn flush(&mut self) {
        let ob = &mut self.outbox;
        if ob.blocked || ob.dead {
            return;
        }
        while !ob.buf.is_empty() {
            match self.stream.write(&ob.buf) {
                Ok(n) => ob.buf.advance(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    ob.blocked = true;
                    return;
                }
                Err(_) => {
                    ob.dead = true;
                    ob.buf.clear();
                    return;
                }
            }
        }
        // TLS records encrypted but not yet taken by the kernel: sent when writable.
        match self.stream.flush() {
            Ok(true) => {}
            Ok(false) => ob.blocked = true,
            Err(_) => ob.dead = true,
        }
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

    /// Flushes a blocked outbox now that the socket is writable; true if it is still
    /// blocked.
    pub fn flush_blocked(&mut self) -> bool {
        if self.outbox.blocked {
            self.outbox.blocked = false;
            self.flush();
            self.outbox.settle();
        }
        self.outbox.blocked
    }

    /// Sends FIN after the replies already written (the read side stays open).
    pub fn shutdown_write(&self) {
        self.stream.shutdown_write();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mio_socket::MioSocket;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};

    /// A connection over loopback and the client's (blocking) socket.
    fn pair() -> (ClientConn<Req>, TcpStream) {
        pair_with_budget(1 << 30)
    }

    fn pair_with_budget(budget: usize) -> (ClientConn<Req>, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, peer) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        let socket = MioSocket::Tcp(mio::net::TcpStream::from_std(server));
        let budget = Arc::new(MemoryBudget::new(budget));
        (
            ClientConn::new(1, peer, LoopStream::Plain(socket), budget),
            client,
        )
    }

    fn read_exactly(client: &mut TcpStream, n: usize) -> Vec<u8> {
        let mut buf = vec![0; n];
        client.read_exact(&mut buf).unwrap();
        buf
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
        let (mut conn, mut client) = pair_with_budget(1000);
        let first = conn.reserve();
        let second = conn.reserve();
        // completed out of order: the second waits aside, and must fit too
        conn.complete(second, &[b'x'; 5000]);
        conn.complete(first, b"END\r\n");
        let expected = [&b"END\r\n"[..], OUT_OF_MEMORY].concat();
        assert_eq!(read_exactly(&mut client, expected.len()), expected);
        let third = conn.reserve();
        conn.complete(third, &[b'y'; 900]);
        assert_eq!(read_exactly(&mut client, 900), vec![b'y'; 900]);
    }

    #[test]
    fn a_write_waits_for_earlier_requests_and_later_ones_wait_for_it() {
        let (mut conn, _client) = pair();
        let queue = RequestQueue::default();
        let r = req(&mut conn, false, 0);
        conn.dispatch(r, false, &queue);
        let r = req(&mut conn, false, 1);
        conn.dispatch(r, false, &queue);
        let r = req(&mut conn, true, 2);
        conn.dispatch(r, true, &queue);
        let r = req(&mut conn, false, 3);
        conn.dispatch(r, false, &queue);
        assert_eq!(
            queue.len(),
            2,
            "the two reads run in parallel; the write waits"
        );
        conn.finished(false, &queue);
        assert_eq!(queue.len(), 2);
        let _ = queue.try_pop();
        let _ = queue.try_pop();
        conn.finished(false, &queue);
        assert_eq!(queue.len(), 1, "both reads done: the write goes");
        assert_eq!(queue.try_pop().unwrap(), Req { write: true, n: 2 });
        conn.finished(true, &queue);
        assert_eq!(queue.try_pop().unwrap(), Req { write: false, n: 3 });
    }

    #[test]
    fn replies_leave_in_request_order_whatever_order_they_complete_in() {
        let (mut conn, mut client) = pair();
        let a = conn.reserve();
        let b = conn.reserve();
        let c = conn.reserve();
        conn.complete(c, b"C");
        conn.complete(b, b"B");
        assert_eq!(conn.in_flight(), 3);
        conn.complete(a, b"A");
        assert_eq!(read_exactly(&mut client, 3), b"ABC");
        assert!(conn.is_drained());
    }

    #[test]
    fn local_replies_wait_behind_owed_replies() {
        let (mut conn, mut client) = pair();
        let a = conn.reserve();
        conn.reply_now(b"ERROR\r\n");
        conn.complete(a, b"END\r\n");
        conn.reply_now(b"VERSION x\r\n");
        assert_eq!(
            read_exactly(&mut client, 23),
            b"END\r\nERROR\r\nVERSION x\r\n"
        );
    }

    #[test]
    fn silent_slots_release_the_replies_behind_them() {
        let (mut conn, mut client) = pair();
        let a = conn.reserve();
        let b = conn.reserve();
        conn.complete(b, b"B");
        conn.complete_silent(a);
        assert_eq!(read_exactly(&mut client, 1), b"B");
        assert_eq!(conn.in_flight(), 0);
    }

    #[test]
    fn a_full_socket_is_flushed_once_the_client_reads() {
        let (mut conn, mut client) = pair();
        let big = vec![b'x'; 8 << 20];
        let seq = conn.reserve();
        conn.complete(seq, &big);
        assert!(
            !conn.is_drained(),
            "8 MiB should not fit in the socket buffers"
        );
        let reader = std::thread::spawn(move || {
            let mut got = vec![0; 8 << 20];
            client.read_exact(&mut got).unwrap();
            got.iter().all(|b| *b == b'x')
        });
        // What the loop does when the socket turns writable; bounded in time.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !conn.is_drained() && std::time::Instant::now() < until {
            if conn.flush_blocked() {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        assert!(conn.is_drained());
        assert!(reader.join().unwrap());
    }
}
