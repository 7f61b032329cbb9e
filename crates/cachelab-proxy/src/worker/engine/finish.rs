//! Finishing a request of the batch: the reply rule of its plan's merge (every server
//! must succeed, the primary's answer, or one answer per part with stand-ins) and the
//! client's reply.

use std::ops::Range;
use std::time::Instant;

use bytes::BytesMut;
use cachelab_protocol::{Expect, MetaStatus, Reply};

use super::compose::quiet_drops;
use super::exchange::State;
use super::{Action, Engine, Round, ServerHealth, Target, Warning, RBUF_KEEP};
use crate::job::Request;
use crate::metrics::{OpKind, Outcome};
use crate::routing::merge::{
    is_success, pick_replicated_reply, values_by_key, values_concat, Outcome as Replicated,
};
use crate::routing::plan::{Merge, ServerId};
use crate::routing::redis::split::merge_resp_parts;

/// Writes a reply with `write` into `out` unless it is silent (the client sent
/// noreply, or quiet mode leaves it out), and notes how it is to be sent.
fn put(
    out: &mut BytesMut,
    reply: &mut Option<(bool, u64, usize)>,
    job: &Request,
    silent: bool,
    failovers: u64,
    write: impl FnOnce(&mut BytesMut),
) {
    let silent = silent || job.noreply;
    let start = out.len();
    if !silent {
        write(out);
    }
    *reply = Some((silent, failovers, start));
}

/// Request `index` of the batch and its stand-ins so far (a macro, so that only the
/// batch is borrowed).
macro_rules! taken {
    ($engine:expr, $index:expr) => {{
        let taken = $engine.batch[$index].as_ref().expect("served");
        (&taken.job, taken.failovers)
    }};
}

impl<J, H> Engine<J, H> {
    /// The bytes of the replies sent ([`Action::Reply`]'s `span`) since the last
    /// [`Engine::clear_replies`]: the shell copies each into its client's output, so a
    /// reply is neither split off nor reference-counted on its way.
    pub fn replies(&self) -> &[u8] {
        &self.out
    }

    /// The shell has taken every reply it was given ([`Action::Reply`] carried out).
    /// Replies written whose action still waits in the queue (behind an action the shell
    /// waits on, such as a connection being opened) keep their bytes, and so does the
    /// buffer until they have been taken.
    pub fn clear_replies(&mut self) {
        let waiting = self
            .actions
            .iter()
            .any(|a| matches!(a, Action::Reply { .. }));
        if waiting || self.reply.is_some() {
            return;
        }
        self.out.clear();
        if self.out.capacity() > RBUF_KEEP {
            self.out = BytesMut::with_capacity(16 * 1024);
        }
    }
}

impl<J: std::ops::Deref<Target = Request>, H: ServerHealth> Engine<J, H> {
    /// Finishes request `index` by its plan's rule; its reply goes out as an action.
    pub(super) fn finish(&mut self, index: usize, now: Instant) {
        match self.plans[index].merge() {
            Merge::AllMustSucceed => {
                let outcome = self.finish_all(index, now);
                self.send_reply(index, outcome);
            }
            Merge::Primary => self.finish_primary(index, now),
            _ => {
                let parts = self.plans[index].parts.len();
                self.part_answers.clear();
                self.part_answers.resize(parts, None);
                self.parts_round(index, now);
            }
        }
    }

    /// The error line of a refused reply to request `index`, if one was refused (a
    /// refusal is about the request, so it is not failed over).
    fn refusal_of(&self, index: usize) -> Option<&'static [u8]> {
        self.exchanges.iter().find_map(|ex| match ex.result {
            State::Refused { line, .. } if ex.job == index => Some(line),
            _ => None,
        })
    }

    /// Parts that each need one answer (relayed, or values merged): a part whose server
    /// is down or failed moves on to its next candidate, round by round, until every
    /// part has an answer or a part has no candidate left.
    pub(super) fn parts_round(&mut self, index: usize, now: Instant) {
        if let Some(line) = self.refusal_of(index) {
            let (job, failovers) = taken!(self, index);
            let outcome = Outcome {
                keys: job.keys,
                error: true,
                ..Outcome::default()
            };
            put(
                &mut self.out,
                &mut self.reply,
                job,
                false,
                failovers,
                |out| out.extend_from_slice(line),
            );
            self.send_reply(index, outcome);
            return;
        }
        for (at, ex) in self.exchanges.iter().enumerate() {
            if ex.job == index && matches!(ex.result, State::Done { .. }) {
                self.part_answers[ex.part].get_or_insert(at);
            }
        }
        let mut items = self.staging_list();
        items.extend(
            (0..self.part_answers.len())
                .filter(|&part| self.part_answers[part].is_none())
                .map(|part| (index, Target::Part(part))),
        );
        self.stage(items, Round::Parts(index), now);
    }

    /// The reply of a request whose parts each have an answer, or one of which has none.
    pub(super) fn conclude_parts(&mut self, index: usize, _now: Instant) {
        let merge = self.plans[index].merge();
        let taken = self.batch[index].as_ref().expect("served");
        let (job, failovers) = (&taken.job, taken.failovers);
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        if self.part_answers.iter().any(Option::is_none) {
            outcome.error = true;
            let first = self.plans[index].candidates_of(0)[0];
            self.reply_unavailable(index, first);
            self.send_reply(index, outcome);
            return;
        }
        let conns = &self.conns;
        let exchanges = &self.exchanges;
        let answers = self.part_answers.iter().map(|at| {
            let ex = &exchanges[at.expect("checked above")];
            match ex.result {
                State::Done {
                    reply, offset, len, ..
                } => (ex.server, reply, offset, len),
                _ => unreachable!("part_answers only holds answered exchanges"),
            }
        });
        outcome.hits = answers
            .clone()
            .map(|a| match a.1 {
                Reply::Values { hits, .. } => hits,
                Reply::Resp(kind) => kind.hits(),
                _ => 0,
            })
            .sum();
        let (out, reply) = (&mut self.out, &mut self.reply);
        let error = answers.clone().find(|a| a.1.is_error());
        if merge == Merge::Relay || error.is_some() {
            let (server, answer, offset, len) =
                error.unwrap_or_else(|| answers.clone().next().expect("one part"));
            outcome.error = answer.is_error();
            if let Reply::Meta(MetaStatus::Va | MetaStatus::Hd) = answer {
                outcome.hits = 1;
            }
            let silent = quiet_drops(job, answer);
            put(out, reply, job, silent, failovers, |o| match answer {
                // The values and an END of its own: a reply to a merged line
                // (`--merge-gets`) holds only the request's values.
                Reply::Values { body_len, .. } => {
                    o.extend_from_slice(&conns[server].rbuf[offset..offset + body_len]);
                    o.extend_from_slice(b"END\r\n");
                }
                _ => o.extend_from_slice(&conns[server].rbuf[offset..offset + len]),
            });
        } else if let Merge::Resp(rule) = merge {
            let parts: Vec<&[u8]> = answers
                .map(|(server, _, offset, len)| &conns[server].rbuf[offset..offset + len])
                .collect();
            let mut merged = BytesMut::new();
            let key_parts = &self.plans[index].key_parts;
            if let Err(e) = merge_resp_parts(rule, &parts, key_parts, &mut merged) {
                outcome.error = true;
                merged.clear();
                merged.extend_from_slice(format!("-ERR cachelab-proxy: {e}\r\n").as_bytes());
            }
            put(out, reply, job, false, failovers, |o| {
                o.extend_from_slice(&merged)
            });
        } else {
            let body = |(server, answer, offset, _): (ServerId, Reply, usize, usize)| match answer {
                Reply::Values { body_len, .. } => &conns[server].rbuf[offset..offset + body_len],
                _ => &[][..],
            };
            if merge == Merge::Concat {
                put(out, reply, job, false, failovers, |o| {
                    values_concat(answers.map(body), o)
                });
            } else {
                let bodies: Vec<&[u8]> = answers.map(body).collect();
                let key_parts = &self.plans[index].key_parts;
                put(out, reply, job, false, failovers, |o| {
                    values_by_key(job.spans.keys(&job.frame), key_parts, &bodies, o)
                });
            }
        }
        self.send_reply(index, outcome);
    }

    /// Every part must succeed (a write to every server, or to a key's replicas): the
    /// client gets the success reply only if every server succeeded, otherwise the
    /// failure that arrived last.
    fn finish_all(&mut self, index: usize, now: Instant) -> Outcome {
        let (job, failovers) = taken!(self, index);
        let (expect, op) = (job.expect, job.op);
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        // Staged together for this request only, so its exchanges are contiguous.
        let begin = self
            .exchanges
            .iter()
            .position(|ex| ex.job == index)
            .expect("a replicated request has an exchange per server");
        let end = begin + self.plans[index].parts.len();
        self.replicated.clear();
        self.replicated
            .extend(self.exchanges[begin..end].iter().map(|ex| match ex.result {
                State::Done { reply, at, .. } => Replicated {
                    success: is_success(expect, reply),
                    at,
                },
                State::Failed { at } | State::Refused { at, .. } => {
                    Replicated { success: false, at }
                }
                // Waiting settles every exchange; count a straggler as failed now.
                State::Pending => Replicated {
                    success: false,
                    at: now,
                },
            }));
        let chosen = pick_replicated_reply(&self.replicated).expect("at least one server");
        let all_succeeded = self.replicated.iter().all(|o| o.success);
        if !all_succeeded {
            outcome.error = true;
            self.warn_replication(op, begin..end, now);
        } else if expect == Expect::Arith {
            self.check_replicas_agree(op, begin..end);
        }
        let ex = self.exchanges[begin + chosen];
        let (job, _) = taken!(self, index);
        match ex.result {
            State::Done {
                offset, len, reply, ..
            } => {
                let bytes = &self.conns[ex.server].rbuf[offset..offset + len];
                let silent = quiet_drops(job, reply);
                put(
                    &mut self.out,
                    &mut self.reply,
                    job,
                    silent,
                    failovers,
                    |o| o.extend_from_slice(bytes),
                );
            }
            State::Refused { line, .. } => {
                put(&mut self.out, &mut self.reply, job, false, failovers, |o| {
                    o.extend_from_slice(line)
                })
            }
            _ => self.reply_unavailable(index, ex.server),
        }
        outcome
    }

    /// A compare-and-swap at the key's primary: the client gets the primary's reply; if
    /// it succeeded, the key's other replicas get the same write without its compare
    /// (and the worker waits for them, so the request's service time includes them).
    fn finish_primary(&mut self, index: usize, now: Instant) {
        let (job, _) = taken!(self, index);
        let expect = job.expect;
        let Some(at) = self.exchanges.iter().position(|ex| ex.job == index) else {
            self.conclude_primary(index, now);
            return;
        };
        let succeeded = matches!(self.exchanges[at].result, State::Done { reply, .. }
            if is_success(expect, reply));
        if succeeded && !self.plans[index].follow_ups.is_empty() {
            // Written to the other replicas, and waited for; a replica that does not
            // store it is logged (rate-limited), as for any write.
            let mut items = self.staging_list();
            let follow_ups = &self.plans[index].follow_ups;
            items.extend(follow_ups.iter().map(|&s| (index, Target::FollowUp(s))));
            let begin = self.exchanges.len();
            self.stage(items, Round::FollowUps { index, begin }, now);
            return;
        }
        self.conclude_primary(index, now);
    }

    /// The reply of a compare-and-swap: its primary's.
    pub(super) fn conclude_primary(&mut self, index: usize, _now: Instant) {
        let (job, failovers) = taken!(self, index);
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        let Some(at) = self.exchanges.iter().position(|ex| ex.job == index) else {
            // The primary could not be used: nothing was sent anywhere.
            outcome.error = true;
            let primary = self.plans[index].candidates_of(0)[0];
            self.reply_unavailable(index, primary);
            self.send_reply(index, outcome);
            return;
        };
        let primary = self.exchanges[at];
        let succeeded = matches!(primary.result, State::Done { reply, .. }
            if is_success(job.expect, reply));
        match primary.result {
            State::Done {
                offset, len, reply, ..
            } => {
                outcome.error = !succeeded && reply.is_error();
                let bytes = &self.conns[primary.server].rbuf[offset..offset + len];
                let silent = quiet_drops(job, reply);
                put(
                    &mut self.out,
                    &mut self.reply,
                    job,
                    silent,
                    failovers,
                    |o| o.extend_from_slice(bytes),
                );
            }
            State::Refused { line, .. } => {
                outcome.error = true;
                put(&mut self.out, &mut self.reply, job, false, failovers, |o| {
                    o.extend_from_slice(line)
                });
            }
            _ => {
                outcome.error = true;
                self.reply_unavailable(index, primary.server);
            }
        }
        self.send_reply(index, outcome);
    }

    /// `SERVER_ERROR server <addr> unavailable: <why>` (for Redis, `-ERR ...`).
    fn reply_unavailable(&mut self, index: usize, server: ServerId) {
        let taken = self.batch[index].as_ref().expect("served");
        let (job, failovers) = (&taken.job, taken.failovers);
        let down = &self.conns[server].down;
        let addr = self.health.addr(server);
        let resp = job.expect == Expect::Resp;
        put(
            &mut self.out,
            &mut self.reply,
            job,
            false,
            failovers,
            |out| {
                if resp {
                    down.compose_resp_reply(addr, out)
                } else {
                    down.compose_reply(addr, out)
                }
            },
        );
    }

    pub(super) fn warn_replication(&mut self, op: OpKind, range: Range<usize>, now: Instant) {
        let (allowed, suppressed) = self.warnings.allow(now);
        if !allowed {
            return;
        }
        let answers: Vec<String> = self.exchanges[range]
            .iter()
            .map(|ex| {
                let addr = self.health.addr(ex.server);
                let conn = &self.conns[ex.server];
                match ex.result {
                    State::Done { offset, len, .. } => format!(
                        "{addr}: {}",
                        String::from_utf8_lossy(&conn.rbuf[offset..offset + len]).trim_end()
                    ),
                    _ => format!("{addr}: {}", conn.down),
                }
            })
            .collect();
        self.actions.push_back(Action::Warn(Warning::Replication {
            op: op.name(),
            answers: answers.join("; "),
            suppressed,
        }));
    }

    fn check_replicas_agree(&mut self, op: OpKind, range: Range<usize>) {
        let mut numbers = self.exchanges[range]
            .iter()
            .filter_map(|ex| match ex.result {
                State::Done {
                    reply: Reply::Number(n),
                    ..
                } => Some(n),
                _ => None,
            });
        let first = numbers.next();
        if numbers.any(|n| Some(n) != first) {
            self.actions
                .push_back(Action::Warn(Warning::ReplicasDisagree { op: op.name() }));
        }
    }
}
