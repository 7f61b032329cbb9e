//! Finishing a request of the batch: the reply rule of its plan's merge (every server
//! must succeed, the primary's answer, or one answer per part with stand-ins), the
//! client's reply, and the request's statistics.

use std::time::Instant;

use bytes::BytesMut;
use cachelab_protocol::{Expect, MetaStatus, Reply};
use tracing::warn;

use super::compose::{compose_unconditional, quiet_drops};
use super::exchange::{server_span, Exchange, State};
use super::{Taken, Worker};
use crate::client::Ordered;
use crate::job::Job;
use crate::metrics::{Outcome, Timestamps};
use crate::routing::merge::{
    is_success, pick_replicated_reply, values_by_key, values_concat, Outcome as Replicated,
};
use crate::routing::plan::{Merge, ServerId};
use crate::routing::redis::split::merge_resp_parts;

impl Worker {
    /// Replies to one request of the batch and records its statistics.
    pub(super) async fn finish(&mut self, index: usize, mut taken: Taken) {
        let merge = self.plans[index].merge();
        let outcome = match merge {
            Merge::AllMustSucceed => self.finish_all(index, &taken),
            Merge::Primary => self.finish_primary(index, &taken).await,
            _ => self.finish_parts(index, &mut taken, merge).await,
        };
        let Taken {
            job,
            dequeued,
            queue_len,
            failovers,
            ..
        } = taken;
        let reply_sent = Instant::now();
        job.conn.finished(job.is_write(), &self.ctx.queue);
        let (first_sent, last_answer) = server_span(&self.exchanges, index);
        let ts = Timestamps {
            arrival: job.arrival,
            enqueued: job.enqueued,
            dequeued,
            first_sent,
            last_answer,
            reply_sent,
        };
        {
            let mut latencies = self.ctx.latencies.lock(self.id);
            latencies.record_response(job.op, ts.sample().response.round() as u64);
            for ex in self.exchanges.iter().filter(|ex| ex.job == index) {
                if let State::Done { at, .. } = ex.result {
                    let us = at.saturating_duration_since(ex.sent).as_micros() as u64;
                    latencies.record_server(ex.server, us);
                }
            }
        }
        let mut stats = self.ctx.lock_stats(self.id);
        stats.queue_len.add(queue_len as f64);
        stats.failovers += failovers;
        stats.record(job.op, &ts, outcome);
        for ex in self.exchanges.iter().filter(|ex| ex.job == index) {
            if let State::Done { at, .. } = ex.result {
                stats.record_server(job.op, ex.server, ex.sent, at);
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
    async fn finish_parts(&mut self, index: usize, taken: &mut Taken, merge: Merge) -> Outcome {
        let mut outcome = Outcome {
            keys: taken.job.keys,
            ..Outcome::default()
        };
        let parts = self.plans[index].parts.len();
        self.part_answers.clear();
        self.part_answers.resize(parts, None);
        loop {
            if let Some(line) = self.refusal_of(index) {
                outcome.error = true;
                self.reply(&taken.job, &outcome, taken.failovers, |out| {
                    out.extend_from_slice(line)
                });
                return outcome;
            }
            for (at, ex) in self.exchanges.iter().enumerate() {
                if ex.job == index && matches!(ex.result, State::Done { .. }) {
                    self.part_answers[ex.part].get_or_insert(at);
                }
            }
            let mut staged = false;
            let mut exhausted = false;
            for part in 0..parts {
                if self.part_answers[part].is_none() {
                    let ok = self.stage_part(index, taken, part).await;
                    staged |= ok;
                    exhausted |= !ok;
                }
            }
            if !staged || exhausted {
                // Either every part is answered, or one can no longer be: the others
                // need not be asked again.
                break;
            }
            self.send_staged().await;
            self.await_replies(taken.job.pool.timeout).await;
        }
        let (job, failovers) = (&taken.job, taken.failovers);
        if self.part_answers.iter().any(Option::is_none) {
            outcome.error = true;
            let first = self.plans[index].candidates_of(0)[0];
            self.reply_unavailable(job, &outcome, failovers, first);
            return outcome;
        }
        let answers = self.part_answers.iter().map(|at| {
            let ex = &self.exchanges[at.expect("checked above")];
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
        let backends = &self.backends;
        let error = answers.clone().find(|a| a.1.is_error());
        if merge == Merge::Relay || error.is_some() {
            let (server, reply, offset, len) =
                error.unwrap_or_else(|| answers.clone().next().expect("one part"));
            outcome.error = reply.is_error();
            if let Reply::Meta(MetaStatus::Va | MetaStatus::Hd) = reply {
                outcome.hits = 1;
            }
            let bytes = &backends[server].rbuf[offset..offset + len];
            let silent = quiet_drops(job, reply);
            self.reply_unless(silent, job, &outcome, failovers, |out| {
                out.extend_from_slice(bytes)
            });
            return outcome;
        }
        if let Merge::Resp(rule) = merge {
            let parts: Vec<&[u8]> = answers
                .map(|(server, _, offset, len)| &backends[server].rbuf[offset..offset + len])
                .collect();
            let mut merged = BytesMut::new();
            let key_parts = &self.plans[index].key_parts;
            if let Err(e) = merge_resp_parts(rule, &parts, key_parts, &mut merged) {
                outcome.error = true;
                merged.clear();
                merged.extend_from_slice(format!("-ERR cachelab-proxy: {e}\r\n").as_bytes());
            }
            self.reply(job, &outcome, failovers, |out| {
                out.extend_from_slice(&merged)
            });
            return outcome;
        }
        let body = |(server, reply, offset, _): (ServerId, Reply, usize, usize)| match reply {
            Reply::Values { body_len, .. } => &backends[server].rbuf[offset..offset + body_len],
            _ => &[][..],
        };
        if merge == Merge::Concat {
            self.reply(job, &outcome, failovers, |out| {
                values_concat(answers.map(body), out)
            });
        } else {
            let bodies: Vec<&[u8]> = answers.map(body).collect();
            let key_parts = &self.plans[index].key_parts;
            self.reply(job, &outcome, failovers, |out| {
                values_by_key(job.spans.keys(&job.frame), key_parts, &bodies, out)
            });
        }
        outcome
    }

    /// Every part must succeed (a write to every server, or to a key's replicas): the
    /// client gets the success reply only if every server succeeded, otherwise the
    /// failure that arrived last.
    fn finish_all(&mut self, index: usize, taken: &Taken) -> Outcome {
        let job = &taken.job;
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
                    success: is_success(job.expect, reply),
                    at,
                },
                State::Failed { at } | State::Refused { at, .. } => {
                    Replicated { success: false, at }
                }
                // await_replies settles every exchange; count a straggler as failed now.
                State::Pending => Replicated {
                    success: false,
                    at: Instant::now(),
                },
            }));
        let chosen = pick_replicated_reply(&self.replicated).expect("at least one server");
        let all_succeeded = self.replicated.iter().all(|o| o.success);
        if !all_succeeded {
            outcome.error = true;
            self.warn_replication(job, begin..end);
        } else if job.expect == Expect::Arith {
            self.check_replicas_agree(job, begin..end);
        }
        let ex = self.exchanges[begin + chosen];
        match ex.result {
            State::Done {
                offset, len, reply, ..
            } => {
                let bytes = &self.backends[ex.server].rbuf[offset..offset + len];
                let silent = quiet_drops(job, reply);
                self.reply_unless(silent, job, &outcome, taken.failovers, |out| {
                    out.extend_from_slice(bytes)
                });
            }
            State::Refused { line, .. } => self.reply(job, &outcome, taken.failovers, |out| {
                out.extend_from_slice(line)
            }),
            _ => self.reply_unavailable(job, &outcome, taken.failovers, ex.server),
        }
        outcome
    }

    /// A compare-and-swap at the key's primary: the client gets the primary's reply; if
    /// it succeeded, the key's other replicas get the same write without its compare
    /// (and the worker waits for them, so the request's service time includes them).
    async fn finish_primary(&mut self, index: usize, taken: &Taken) -> Outcome {
        let job = &taken.job;
        let mut outcome = Outcome {
            keys: job.keys,
            ..Outcome::default()
        };
        let Some(at) = self.exchanges.iter().position(|ex| ex.job == index) else {
            // The primary could not be used: nothing was sent anywhere.
            outcome.error = true;
            let primary = self.plans[index].candidates_of(0)[0];
            self.reply_unavailable(job, &outcome, taken.failovers, primary);
            return outcome;
        };
        let primary = self.exchanges[at];
        let succeeded = matches!(primary.result, State::Done { reply, .. }
            if is_success(job.expect, reply));
        if succeeded && !self.plans[index].follow_ups.is_empty() {
            self.replicate_to_followers(index, taken).await;
        }
        match primary.result {
            State::Done {
                offset, len, reply, ..
            } => {
                outcome.error = !succeeded && reply.is_error();
                let bytes = &self.backends[primary.server].rbuf[offset..offset + len];
                let silent = quiet_drops(job, reply);
                self.reply_unless(silent, job, &outcome, taken.failovers, |out| {
                    out.extend_from_slice(bytes)
                });
            }
            State::Refused { line, .. } => {
                outcome.error = true;
                self.reply(job, &outcome, taken.failovers, |out| {
                    out.extend_from_slice(line)
                })
            }
            _ => {
                outcome.error = true;
                self.reply_unavailable(job, &outcome, taken.failovers, primary.server)
            }
        }
        outcome
    }

    /// Writes what the primary applied to the key's other replicas and waits for them;
    /// a replica that does not store it is logged (rate-limited), as for any write.
    async fn replicate_to_followers(&mut self, index: usize, taken: &Taken) {
        let follow_ups = std::mem::take(&mut self.plans[index].follow_ups);
        let begin = self.exchanges.len();
        for &server in &follow_ups {
            if server >= self.backends.len() {
                self.grow_backends(server + 1);
            }
            if self.backends[server].ensure_connected().await.is_err() {
                continue;
            }
            let Some(expect) =
                compose_unconditional(&taken.job.frame, &mut self.backends[server].wbuf)
            else {
                continue;
            };
            self.exchanges.push(Exchange {
                job: index,
                server,
                part: 0,
                expect,
                carries_data: true,
                sent: Instant::now(),
                result: State::Pending,
            });
        }
        self.plans[index].follow_ups = follow_ups;
        if self.exchanges.len() == begin {
            return;
        }
        self.send_staged().await;
        self.await_replies(taken.job.pool.timeout).await;
        let all_stored = self.exchanges[begin..].iter().all(
            |ex| matches!(ex.result, State::Done { reply, .. } if is_success(ex.expect, reply)),
        );
        if !all_stored {
            self.warn_replication(&taken.job, begin..self.exchanges.len());
        }
    }

    /// Counts the request, then sends its reply (or, for noreply, releases its slot).
    /// Counting first means a client that has its reply already sees it in `stats`.
    pub(super) fn reply(
        &self,
        job: &Job,
        outcome: &Outcome,
        failovers: u64,
        write: impl FnOnce(&mut BytesMut),
    ) {
        self.reply_unless(false, job, outcome, failovers, write);
    }

    /// `reply`, or with `silent` only the release of its slot (quiet mode).
    pub(super) fn reply_unless(
        &self,
        silent: bool,
        job: &Job,
        outcome: &Outcome,
        failovers: u64,
        write: impl FnOnce(&mut BytesMut),
    ) {
        self.ctx.counters[self.id].record(job.op, outcome, failovers);
        if job.noreply || silent {
            job.conn.complete_silent(job.seq);
        } else {
            job.conn.complete(job.seq, write);
        }
    }

    pub(super) fn reply_unavailable(
        &self,
        job: &Job,
        outcome: &Outcome,
        failovers: u64,
        server: ServerId,
    ) {
        let backend = &self.backends[server];
        let resp = job.expect == Expect::Resp;
        self.reply(job, outcome, failovers, |out| {
            if resp {
                backend.down().compose_resp_reply(&backend.addr, out)
            } else {
                backend.down().compose_reply(&backend.addr, out)
            }
        });
    }

    pub(super) fn warn_replication(&mut self, job: &Job, range: std::ops::Range<usize>) {
        let (allowed, suppressed) = self.warnings.allow(Instant::now());
        if !allowed {
            return;
        }
        let answers: Vec<String> = self.exchanges[range]
            .iter()
            .map(|ex| {
                let backend = &self.backends[ex.server];
                match ex.result {
                    State::Done { offset, len, .. } => format!(
                        "{}: {}",
                        backend.addr,
                        String::from_utf8_lossy(&backend.rbuf[offset..offset + len]).trim_end()
                    ),
                    _ => format!("{}: {}", backend.addr, backend.down()),
                }
            })
            .collect();
        warn!(worker = self.id, op = job.op.name(), answers = %answers.join("; "),
              suppressed, "replicated request did not succeed on every server");
    }

    fn check_replicas_agree(&mut self, job: &Job, range: std::ops::Range<usize>) {
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
            warn!(
                worker = self.id,
                op = job.op.name(),
                "incr/decr results differ between replicas"
            );
        }
    }
}
