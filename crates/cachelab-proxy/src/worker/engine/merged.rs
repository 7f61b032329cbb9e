//! `--merge-gets`: the reply to a retrieval line that carried several requests' keys
//! (memcached answers a `get` line with one write, a write per line in 1.6.18), split
//! into each request's own values.

use std::time::Instant;

use cachelab_protocol::{Expect, Reply, ValueIter};

use super::compose::part_keys;
use super::exchange::{next_joined, refusal_line, settle_group, State};
use super::{Engine, ServerHealth};
use crate::job::Request;

impl<J: std::ops::Deref<Target = Request>, H: ServerHealth> Engine<J, H> {
    /// Settles exchange `head` and those joined to its line from their reply, whose
    /// values (`body_len` bytes at the connection's parse position) come in the order
    /// of the line's keys, a miss leaving its key out: each exchange gets the values of
    /// its own keys, which follow one another. False, and nothing settled, when a value
    /// answers no key of the line: the connection is out of step.
    pub(super) fn split_values(&mut self, head: usize, body_len: usize, now: Instant) -> bool {
        let server = self.exchanges[head].server;
        let conn = &self.conns[server];
        let base = conn.parsed;
        let body = &conn.rbuf[base..base + body_len];
        let max = self.settings.max_reply_bytes;
        let mut values = ValueIter::new(body);
        let mut next = values.next();
        let mut pos = 0;
        let mut at = Some(head);
        while let Some(i) = at {
            at = next_joined(&self.exchanges, i);
            let ex = &mut self.exchanges[i];
            let job = &self.batch[ex.job].as_ref().expect("served").job;
            let (start, mut hits) = (pos, 0);
            part_keys(job, &self.plans[ex.job], ex.part, |key| {
                if next.as_ref().is_some_and(|v| v.key == key) {
                    hits += 1;
                    pos = body.len() - values.rest().len();
                    next = values.next();
                }
            });
            let len = pos - start;
            ex.result = if len > max {
                let line = refusal_line(Expect::Values, true);
                State::Refused { at: now, line }
            } else {
                let reply = Reply::Values {
                    hits,
                    body_len: len,
                };
                // `len` is the values only: the request's END is its reply's own.
                let offset = base + start;
                State::Done {
                    reply,
                    offset,
                    len,
                    at: now,
                }
            };
        }
        if next.is_none() {
            return true;
        }
        settle_group(&mut self.exchanges, head, State::Pending);
        false
    }
}
