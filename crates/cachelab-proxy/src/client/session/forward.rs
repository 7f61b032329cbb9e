//! Forwarding a decoded request: the frame the servers get (noreply and quiet mode
//! handled here, over-long lines composed afresh), its charge against the memory
//! budget, its round-robin position, its reply slot, and its place in the FCFS queue
//! or behind its connection's write barrier.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::{Buf, BytesMut};
use cachelab_protocol::limits::MEMCACHED_MAX_LINE;
use cachelab_protocol::{parse_request, Expect, Request, Unlink};
use tracing::{debug, warn};

use super::ClientSession;
use crate::budget::Charge;
use crate::decode::Forward;
use crate::job::{Job, Request as Served};
use crate::metrics::OpKind;
use crate::queue::RequestQueue;
use crate::routing::plan::Access;
use crate::routing::redis::plan::Route;
use crate::routing::spans::KeySpans;

impl ClientSession {
    /// Drops a key's value on its servers, as memcached does when it refuses a `set` or
    /// `ms` as too large: an `md` whose reply nobody gets, ordered behind the refusal.
    pub(super) fn unlink(
        &mut self,
        unlink: Unlink,
        arrival: Instant,
        queue: &mut RequestQueue<Job>,
    ) {
        let key = unlink.key.get(&self.rbuf);
        let mut frame = BytesMut::with_capacity(key.len() + 8);
        frame.extend_from_slice(b"md ");
        frame.extend_from_slice(key);
        if unlink.base64 {
            frame.extend_from_slice(b" b");
        }
        frame.extend_from_slice(b"\r\n");
        let forward = Forward {
            op: OpKind::Other,
            expect: Expect::Meta,
            keys: 1,
            access: Access::Write,
            noreply: true,
            quiet: None,
        };
        // A request of its own on the servers: counted like one.
        self.net.net.arrivals.fetch_add(1, Ordering::Relaxed);
        let frame = frame.freeze();
        if !self.dispatch(frame, forward, KeySpans::default(), arrival, None, queue) {
            debug!(
                conn = self.conn.id,
                "memory budget exhausted: a too-large set's key not unlinked"
            );
        }
    }

    pub(super) fn enqueue(
        &mut self,
        len: usize,
        forward: Forward,
        mut spans: KeySpans,
        arrival: Instant,
        queue: &mut RequestQueue<Job>,
    ) {
        let frame = if forward.quiet.is_some() {
            // The servers answer everything (so replies stay in step and the reply rule
            // applies); quiet mode is applied towards the client by the worker.
            let mut loud = BytesMut::with_capacity(len);
            match parse_request(&self.rbuf[..len], &self.net.settings.limits) {
                Ok((Request::Meta(meta), _)) => meta.compose_loud(&mut loud),
                _ => unreachable!("the decoder already parsed this meta request"),
            }
            self.rbuf.advance(len);
            loud.freeze()
        } else if forward.noreply || self.line_too_long_for_server(len) {
            // The servers must answer so the worker can apply the reply rule and measure
            // the request; the client's noreply is honoured when replying. And a line
            // longer than memcached is sure to read is sent composed afresh (single
            // spaces, canonical numbers), so a client's spacing cannot make a server
            // close our connection.
            let mut stripped = BytesMut::with_capacity(len);
            match parse_request(&self.rbuf[..len], &self.net.settings.limits) {
                Ok((Request::Store(store), _)) => {
                    store.compose_header(&mut stripped, false);
                    stripped.extend_from_slice(store.data);
                    stripped.extend_from_slice(b"\r\n");
                }
                Ok((mut request, _)) => {
                    clear_noreply(&mut request);
                    request.compose(&mut stripped);
                }
                Err(_) => unreachable!("the decoder already parsed this request"),
            }
            self.rbuf.advance(len);
            let stripped = stripped.freeze();
            if !spans.is_empty() {
                // Composed afresh: the keys moved (the slow path of over-long lines).
                spans = match parse_request(&stripped, &self.net.settings.limits) {
                    Ok((Request::Get(get), _)) => KeySpans::of(&stripped, get.keys.iter()),
                    _ => unreachable!("a multi-key request is a get, and composes as one"),
                };
            }
            stripped
        } else {
            self.rbuf.split_to(len).freeze()
        };
        if !self.dispatch(frame, forward, spans, arrival, None, queue) {
            self.conn.reply_now(b"SERVER_ERROR out of memory\r\n");
        }
    }

    /// Whether the command line of the `len`-byte request at the front of the buffer is
    /// longer than memcached reads without risk of closing the connection.
    fn line_too_long_for_server(&self, len: usize) -> bool {
        len > MEMCACHED_MAX_LINE
            && memchr::memchr(b'\n', &self.rbuf[..len]).map_or(len, |i| i + 1) > MEMCACHED_MAX_LINE
    }

    /// Queues a request frame for the workers, with its read targets assigned; false if
    /// the memory budget refused it. `redis` routes a Redis command (its `spans` are
    /// all its arguments').
    pub(super) fn dispatch(
        &mut self,
        frame: bytes::Bytes,
        forward: Forward,
        spans: KeySpans,
        arrival: Instant,
        redis: Option<Route>,
        queue: &mut RequestQueue<Job>,
    ) -> bool {
        let Some(charge) = Charge::take(&self.net.budget, frame.len()) else {
            if self.net.budget.refusals().is_multiple_of(1000) {
                warn!(
                    conn = self.conn.id,
                    bytes = frame.len(),
                    budget = self.net.budget.limit(),
                    "memory budget exhausted: refusing requests (SERVER_ERROR out of memory)"
                );
            }
            return false;
        };
        // Read targets are assigned here, in arrival order (see `Pool::assign`).
        let assigned = redis.map_or(forward.keys as usize, Route::assigned_keys);
        let rr = self.pool.assign(forward.access, assigned);
        let seq = self.conn.reserve();
        let request = Served {
            frame,
            spans,
            pool: Arc::clone(&self.pool),
            access: forward.access,
            rr,
            op: forward.op,
            expect: forward.expect,
            keys: forward.keys,
            noreply: forward.noreply,
            quiet: forward.quiet,
            arrival,
            enqueued: Instant::now(),
            redis,
        };
        let job = Job {
            client: self.conn.id,
            seq,
            charge,
            request,
        };
        self.conn.dispatch(job, !forward.access.is_read(), queue);
        true
    }
}

fn clear_noreply(request: &mut Request<'_>) {
    match request {
        Request::Delete(d) => d.noreply = false,
        Request::Arith(a) => a.noreply = false,
        Request::Touch(t) => t.noreply = false,
        Request::FlushAll(f) => f.noreply = false,
        Request::Store(s) => s.noreply = false,
        Request::Verbosity { noreply } => *noreply = false,
        Request::Get(_)
        | Request::Meta(_)
        | Request::Stats(_)
        | Request::Version
        | Request::Quit => {}
    }
}
