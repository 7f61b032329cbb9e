//! Reading the servers' replies to a batch: each server's replies are parsed in the
//! order its messages went out, and a reply that shows the connection out of step
//! closes it so that nobody gets a reply meant for another request.

use std::time::Instant;

use cachelab_protocol::{Expect, Reply, ReplyError, ReplyScan};

use super::exchange::{fail_pending, group, refusal_line, settle_group, State};
use super::{Action, Conn, Count, Engine, ServerHealth};
use crate::down::{Down, OutOfStep};
use crate::job::Request;
use crate::routing::answers::values_answer_request;
use crate::routing::plan::ServerId;

impl<J: std::ops::Deref<Target = Request>, H: ServerHealth> Engine<J, H> {
    /// One pass over the pending exchanges: parses what has arrived, notes the servers
    /// more bytes are wanted from. True while an exchange is pending.
    pub(super) fn parse_replies(&mut self, now: Instant) -> bool {
        self.blocked.iter_mut().for_each(|b| *b = false);
        let mut pending = false;
        for index in 0..self.exchanges.len() {
            if !matches!(self.exchanges[index].result, State::Pending) {
                continue;
            }
            let server = self.exchanges[index].server;
            if self.blocked[server] {
                pending = true;
                continue;
            }
            match self.read_past_refused(server) {
                Past::Done => {}
                Past::More => {
                    self.blocked[server] = true;
                    pending = true;
                    continue;
                }
                Past::Lost => {
                    self.out_of_step(server, OutOfStep::Foreign, now);
                    continue;
                }
            }
            let expect = self.exchanges[index].expect;
            let members = if self.settings.merge_gets {
                group(&self.exchanges, index).count()
            } else {
                1
            };
            // A merged line's reply answers each of its requests: each its bound.
            let limit = self.settings.max_reply_bytes.saturating_mul(members);
            let conn = &mut self.conns[server];
            let framed = match conn.scan {
                None => conn.hints.take(conn.parsed, conn.rbuf.len(), expect),
                Some(_) => None,
            };
            let parsed = match framed {
                // The demux framed these very bytes from the same start.
                Some(found) => Ok(found),
                None => scan(conn, expect),
            };
            match parsed {
                Ok((_, len)) if len > limit => {
                    // Over the bound though it arrived whole in one read: refused all
                    // the same, and its end is known, so the connection stays.
                    conn.remove(conn.parsed, len);
                    let line = refusal_line(expect, true);
                    settle_group(&mut self.exchanges, index, State::Refused { at: now, line });
                    self.health.report_success(server);
                }
                Ok((Reply::Values { body_len, .. }, len)) if members > 1 => {
                    if self.split_values(index, body_len, now) {
                        self.conns[server].parsed += len;
                        self.health.report_success(server);
                    } else {
                        self.out_of_step(server, OutOfStep::Foreign, now);
                    }
                }
                Ok((reply, len)) => {
                    let ex = &self.exchanges[index];
                    let foreign = matches!(reply, Reply::Values { hits, body_len } if hits > 0
                    && !values_answer_request(
                        &self.frames[ex.job],
                        &conn.rbuf[conn.parsed..conn.parsed + body_len],
                        hits,
                    ));
                    let step = if foreign {
                        Some(Relay::Nothing)
                    } else {
                        out_of_step(reply, ex.carries_data)
                    };
                    if step != Some(Relay::Nothing) {
                        let done = State::Done {
                            reply,
                            offset: conn.parsed,
                            len,
                            at: now,
                        };
                        settle_group(&mut self.exchanges, index, done);
                        conn.parsed += len;
                        self.health.report_success(server);
                    }
                    if step.is_some() {
                        // Whatever follows on this connection may answer something
                        // else: close it, and let the requests after this one fail over.
                        let why = if foreign {
                            OutOfStep::Foreign
                        } else {
                            OutOfStep::ReadDifferently
                        };
                        self.out_of_step(server, why, now);
                    }
                }
                Err(ReplyError::Incomplete) => {
                    if conn.rbuf.len() - conn.parsed > limit {
                        // A proxy's memory must not be what one request asks for.
                        // The requests after it on this connection, if any, are
                        // reached by reading past it (next in this loop).
                        self.refuse(index, true, now);
                    } else {
                        self.blocked[server] = true;
                        pending = true;
                    }
                }
                Err(ReplyError::Malformed(_)) => {
                    // Not what was asked (a stray reply, or one read out of step): the
                    // connection goes, but a client's bytes must not eject a server.
                    self.out_of_step(server, OutOfStep::Foreign, now);
                }
            }
        }
        pending
    }

    /// `server`'s connection is out of step: it goes (without blaming the server), and
    /// the requests still waiting on it fail.
    pub(super) fn out_of_step(&mut self, server: ServerId, why: OutOfStep, now: Instant) {
        self.drop_connection(server, Down::OutOfStep(why));
        self.actions.push_back(Action::Count(Count::OutOfStep));
        fail_pending(&mut self.exchanges, server, now);
    }

    /// Reads on past a refused reply on `server`'s connection, if one is being read
    /// past: its bytes are dropped as they come (only what a line needs is held), until
    /// its end is found and the reply after it can be read.
    fn read_past_refused(&mut self, server: ServerId) -> Past {
        let conn = &mut self.conns[server];
        let Some(expect) = conn.skipping else {
            return Past::Done;
        };
        let from = conn.parsed;
        let scan = conn.scan.get_or_insert_with(|| ReplyScan::new(expect));
        match scan.advance(&conn.rbuf[from..]) {
            Ok(Some(len)) => {
                conn.remove(from, len);
                conn.forget_partial_reply();
                self.health.report_success(server);
                Past::Done
            }
            Ok(None) => {
                let n = scan.discardable(&conn.rbuf[from..]);
                scan.discard(n);
                conn.remove(from, n);
                Past::More
            }
            Err(_) => Past::Lost,
        }
    }

    /// Bytes arrived from `server`: the buffer's capacity (what the allocator holds) is
    /// charged to the memory budget; past it, the reply being read is refused.
    pub(super) fn bytes_read(&mut self, server: ServerId, now: Instant) {
        let conn = &mut self.conns[server];
        let capacity = conn.rbuf.capacity();
        if conn.charge.resize(capacity) || conn.skipping.is_some() {
            return;
        }
        let first = self
            .exchanges
            .iter()
            .position(|ex| ex.server == server && matches!(ex.result, State::Pending));
        if let Some(index) = first {
            self.refuse(index, false, now);
        }
    }

    /// The reply to exchange `index` cannot be held (too large, or out of memory): its
    /// request is refused now, and only it. If requests after it wait on the same
    /// connection, the reply is read past ([`Engine::read_past_refused`]) so they get
    /// their own answers; otherwise the connection goes (cheaper than reading a
    /// gigabyte to throw it away). The server itself is fine either way.
    fn refuse(&mut self, index: usize, too_large: bool, now: Instant) {
        let ex = &self.exchanges[index];
        let (server, expect) = (ex.server, ex.expect);
        let line = refusal_line(expect, too_large);
        settle_group(&mut self.exchanges, index, State::Refused { at: now, line });
        let waiting = self
            .exchanges
            .iter()
            .any(|ex| ex.server == server && matches!(ex.result, State::Pending));
        if waiting {
            self.conns[server].skipping = Some(expect);
        } else {
            self.drop_connection(server, Down::ReplyRefused);
        }
    }
}

/// Where reading past a refused reply stands.
enum Past {
    /// Nothing (left) to read past.
    Done,
    /// Its end has not arrived yet.
    More,
    /// The bytes cannot be that reply: the connection is out of step.
    Lost,
}

/// What to do with a reply that shows the server framed the request differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Relay {
    /// The reply is the request's own (the first line the server wrote for it).
    Reply,
    /// The reply may belong to an earlier request: nobody gets it.
    Nothing,
}

/// Whether `reply` shows the connection is out of step, and whose it is. The proxy
/// forwards only commands the server knows, framed as the server frames them, so
/// `ERROR` means the server read something other than what was sent (it may even be
/// left over from an earlier request); a `CLIENT_ERROR` to a request with a data block
/// means the server may read that block as commands, each with a reply of its own.
fn out_of_step(reply: Reply, carries_data: bool) -> Option<Relay> {
    match reply {
        Reply::Error => Some(Relay::Nothing),
        Reply::ClientError if carries_data => Some(Relay::Reply),
        _ => None,
    }
}

/// Frames the reply at `conn.parsed`. The scan resumes where the last read stopped: a
/// reply arriving in many pieces is looked at once, not again from its start on every
/// read.
fn scan(conn: &mut Conn, expect: Expect) -> Result<(Reply, usize), ReplyError> {
    if conn.scan.is_none() && conn.parsed == conn.rbuf.len() {
        // Nothing of it yet: no scan is begun, so a frame may still come with it.
        return Err(ReplyError::Incomplete);
    }
    let scan = conn.scan.get_or_insert_with(|| ReplyScan::new(expect));
    match scan.advance(&conn.rbuf[conn.parsed..]) {
        Ok(Some(len)) => {
            let reply = scan.reply(&conn.rbuf[conn.parsed..conn.parsed + len]);
            conn.scan = None;
            reply.map(|reply| (reply, len))
        }
        Ok(None) => Err(ReplyError::Incomplete),
        Err(e) => Err(e),
    }
}
