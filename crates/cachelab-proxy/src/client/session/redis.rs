//! A Redis pool's client connection: RESP2 commands decoded ([`RespDecoder`]), local
//! answers and errors sent at once (in order behind the replies still owed), routed
//! commands queued for the workers exactly as memcached requests are: the same
//! admission, memory budget, round-robin position, reply slot and FCFS queue.

use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use cachelab_protocol::Expect;
use tracing::warn;

use super::{ClientSession, Decoded, LOGGED_ERRORS};
use crate::admission::ClientLimits;
use crate::decode::Forward;
use crate::job::Job;
use crate::queue::RequestQueue;
use crate::redis_info::compose_info;
use crate::resp_decode::{RespForward, RespStep};

/// The reply when the memory budget cannot take a command.
const OUT_OF_MEMORY: &[u8] = b"-ERR cachelab-proxy is out of memory (--memory-budget)\r\n";

impl ClientSession {
    /// Handles every complete command in the buffer, stopping before one to forward
    /// while the client may not have more dispatched.
    pub(super) fn decode_all_resp(
        &mut self,
        arrival: Instant,
        limits: ClientLimits,
        queue: &mut RequestQueue<Job>,
    ) -> Decoded {
        let parse_limits = self.net.settings.limits;
        loop {
            match self.resp.step(&self.rbuf, &parse_limits, &self.pool) {
                RespStep::Incomplete => return Decoded::All,
                RespStep::Skipped(n) => self.rbuf.advance(n),
                RespStep::Fatal { reply } => {
                    self.count_error(&reply);
                    self.conn.reply_now(&reply);
                    self.rbuf.clear();
                    return Decoded::Quit;
                }
                RespStep::Answer {
                    len,
                    reply,
                    close,
                    error,
                } => {
                    self.net.net.arrivals.fetch_add(1, Ordering::Relaxed);
                    if error {
                        self.count_error(&reply);
                    }
                    self.rbuf.advance(len);
                    self.conn.reply_now(&reply);
                    if close {
                        return Decoded::Quit;
                    }
                }
                RespStep::Info { len, section } => {
                    self.net.net.arrivals.fetch_add(1, Ordering::Relaxed);
                    self.rbuf.advance(len);
                    let mut out = BytesMut::with_capacity(2048);
                    compose_info(&self.net.observed, section.as_deref(), &mut out);
                    self.conn.reply_now(&out);
                }
                RespStep::Forward { len, forward } => {
                    if self.conn.must_wait(limits) {
                        // Decoded again when the client may have it dispatched.
                        self.paused = true;
                        return Decoded::Paused;
                    }
                    self.net.net.arrivals.fetch_add(1, Ordering::Relaxed);
                    self.enqueue_resp(len, forward, arrival, queue);
                }
            }
        }
    }

    fn enqueue_resp(
        &mut self,
        len: usize,
        forward: RespForward,
        arrival: Instant,
        queue: &mut RequestQueue<Job>,
    ) {
        let frame = match forward.composed {
            Some(composed) => {
                self.rbuf.advance(len);
                Bytes::from(composed)
            }
            None => self.rbuf.split_to(len).freeze(),
        };
        let route = forward.route;
        let counted = Forward {
            op: forward.op,
            expect: Expect::Resp,
            keys: forward.keys,
            access: route.access(),
            noreply: false,
            quiet: None,
        };
        if !self.dispatch(frame, counted, forward.args, arrival, Some(route), queue) {
            self.conn.reply_now(OUT_OF_MEMORY);
        }
    }

    /// Counts (and, rate-limited, logs) a command answered with an error here.
    fn count_error(&mut self, reply: &[u8]) {
        self.errors += 1;
        self.net.net.bad_requests.fetch_add(1, Ordering::Relaxed);
        let per_connection = self.errors <= LOGGED_ERRORS || self.errors.is_multiple_of(1000);
        if per_connection && self.net.log_limit.allow() {
            warn!(conn = self.conn.id, peer = %self.conn.peer,
                  reply = %String::from_utf8_lossy(reply).trim_end().escape_debug(),
                  count = self.errors, "bad request");
        }
    }
}
