//! A batch's rounds: staging messages (asking for connections), sending them server by
//! server, waiting until every one is settled, then finishing the requests in order;
//! and what the engine keeps of each connection as it fails or closes.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::compose::{compose_into, compose_unconditional};
use super::exchange::{fail_pending, server_span, Exchange, State};
use super::{Action, Count, Engine, Phase, Round, Sample, ServerHealth, Target};
use crate::down::{Down, OutOfStep};
use crate::health::FailureKind;
use crate::job::Request;
use crate::metrics::{OpKind, Outcome, Timestamps};
use crate::routing::plan::{Merge, ServerId};

impl<J: std::ops::Deref<Target = Request>, H: ServerHealth> Engine<J, H> {
    pub(super) fn fail(&mut self, server: ServerId, kind: FailureKind, down: Down) {
        let conn = &mut self.conns[server];
        conn.connected = false;
        conn.wbuf.clear();
        conn.forget_partial_reply();
        conn.down = down.clone();
        self.actions.push_back(Action::Fail { server, kind, down });
    }

    pub(super) fn drop_connection(&mut self, server: ServerId, down: Down) {
        let conn = &mut self.conns[server];
        conn.connected = false;
        conn.wbuf.clear();
        conn.down = down.clone();
        self.actions.push_back(Action::Drop { server, down });
    }

    /// An empty staging list (the last one's memory, if it was given back).
    pub(super) fn staging_list(&mut self) -> VecDeque<(usize, Target)> {
        let mut items = std::mem::take(&mut self.spare_items);
        items.clear();
        items
    }

    /// Stages `items` (asking for connections as needed), then sends and waits.
    pub(super) fn stage(&mut self, items: VecDeque<(usize, Target)>, round: Round, now: Instant) {
        self.phase = Phase::Stage {
            items,
            connecting: None,
            staged: false,
            exhausted: false,
            round,
        };
        self.stage_more(now);
    }

    /// Continues staging until a connection is asked for or nothing is left.
    pub(super) fn stage_more(&mut self, now: Instant) {
        loop {
            let Phase::Stage {
                ref mut items,
                ref mut connecting,
                ref mut exhausted,
                ..
            } = self.phase
            else {
                unreachable!("staging");
            };
            let Some(&(index, target)) = items.front() else {
                break;
            };
            let server = match target {
                Target::FollowUp(server) => server,
                Target::Part(part) => {
                    let taken = self.batch[index].as_mut().expect("served");
                    let cursor = self.cursors[index][part];
                    let Some(&server) = self.plans[index].candidates_of(part).get(cursor) else {
                        *exhausted = true;
                        items.pop_front();
                        continue;
                    };
                    self.cursors[index][part] += 1;
                    if cursor > 0 {
                        taken.failovers += 1;
                    }
                    server
                }
            };
            if server >= self.conns.len() {
                *connecting = Some(server);
                self.grow(server + 1);
            } else {
                *connecting = Some(server);
            }
            self.actions.push_back(Action::Connect(server));
            return;
        }
        let Phase::Stage {
            ref mut items,
            staged,
            exhausted,
            round,
            ..
        } = self.phase
        else {
            unreachable!("staging");
        };
        // Every item is staged: the list's memory serves the next round.
        self.spare_items = std::mem::take(items);
        match round {
            // Either every part is answered, or one can no longer be: the others need
            // not be asked again.
            Round::Parts(index) if !staged || exhausted => self.conclude_parts(index, now),
            Round::FollowUps { index, begin } if self.exchanges.len() == begin => {
                self.conclude_primary(index, now)
            }
            _ => {
                self.phase = Phase::Send {
                    next: 0,
                    writing: false,
                    round,
                };
                self.send_more(now);
            }
        }
    }

    /// The answer to the connection asked for the front item.
    pub(super) fn connect_answered(&mut self, server: ServerId, ok: bool, now: Instant) {
        let Phase::Stage {
            ref mut items,
            ref mut connecting,
            ref mut staged,
            ..
        } = self.phase
        else {
            return; // at start, or an answer the shell gave unasked
        };
        if connecting.take() != Some(server) {
            return;
        }
        let &(index, target) = items.front().expect("the item connected for");
        let job = &self.batch[index].as_ref().expect("served").job;
        match target {
            Target::Part(part) => {
                let all_must_succeed = self.plans[index].merge() == Merge::AllMustSucceed;
                if !ok {
                    // Nothing goes out for it: a line may not be joined across it.
                    self.conns[server].open_get = None;
                }
                if ok || all_must_succeed {
                    let merge = self.settings.merge_gets;
                    let (plan, conn) = (&self.plans[index], &mut self.conns[server]);
                    let joined = ok && compose_into(conn, job, plan, part, merge);
                    if joined {
                        self.actions.push_back(Action::Count(Count::Merged));
                    }
                    self.exchanges.push(Exchange {
                        job: index,
                        server,
                        part,
                        expect: job.expect,
                        carries_data: job.op == OpKind::Set,
                        joined,
                        sent: now,
                        result: if ok {
                            State::Pending
                        } else {
                            // A part of an all-must-succeed request has one candidate:
                            // a failed exchange stands for its failure.
                            State::Failed { at: now }
                        },
                    });
                    *staged = true;
                    items.pop_front();
                }
                // Otherwise the part moves on to its next candidate.
            }
            Target::FollowUp(_) => {
                items.pop_front();
                if ok {
                    let conn = &mut self.conns[server];
                    conn.open_get = None;
                    if let Some(expect) = compose_unconditional(&job.frame, &mut conn.wbuf) {
                        self.exchanges.push(Exchange {
                            job: index,
                            server,
                            part: 0,
                            expect,
                            carries_data: true,
                            joined: false,
                            sent: now,
                            result: State::Pending,
                        });
                    }
                }
            }
        }
        self.stage_more(now);
    }

    /// Asks for the next write, or waits for the replies once all are out.
    pub(super) fn send_more(&mut self, now: Instant) {
        let Phase::Send {
            next,
            ref mut writing,
            round,
        } = self.phase
        else {
            unreachable!("sending");
        };
        if let Some(server) = (next..self.conns.len()).find(|&s| !self.conns[s].wbuf.is_empty()) {
            *writing = true;
            self.phase = Phase::Send {
                next: server,
                writing: true,
                round,
            };
            let conn = &self.conns[server];
            self.actions.push_back(Action::Write {
                server,
                idle: conn.parsed == conn.rbuf.len(),
            });
            return;
        }
        let timeout = match round {
            Round::First => self.batch_timeout(),
            Round::Parts(index) | Round::FollowUps { index, .. } => {
                self.batch[index].as_ref().expect("served").job.pool.timeout
            }
        };
        self.phase = Phase::Wait { timeout, round };
        self.actions.push_back(Action::Await {
            deadline: now + timeout,
        });
        self.settle(now);
    }

    pub(super) fn batch_timeout(&self) -> Duration {
        self.batch
            .iter()
            .flatten()
            .map(|t| t.job.pool.timeout)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    pub(super) fn written(&mut self, server: ServerId, now: Instant) {
        let Phase::Send {
            next,
            writing: true,
            round,
        } = self.phase
        else {
            return;
        };
        debug_assert_eq!(next, server);
        self.phase = Phase::Send {
            next: server + 1,
            writing: false,
            round,
        };
        self.send_more(now);
    }

    /// Parses what has arrived; once no message is pending, goes on with the round.
    pub(super) fn settle(&mut self, now: Instant) {
        let Phase::Wait { round, .. } = self.phase else {
            return;
        };
        if self.parse_replies(now) {
            return;
        }
        match round {
            Round::First => self.finish_from(0, now),
            Round::Parts(index) => self.parts_round(index, now),
            Round::FollowUps { index, begin } => {
                let all_stored = self.exchanges[begin..].iter().all(|ex| {
                    matches!(ex.result, State::Done { reply, .. }
                        if crate::routing::merge::is_success(ex.expect, reply))
                });
                if !all_stored {
                    let job = &self.batch[index].as_ref().expect("served").job;
                    let op = job.op;
                    self.warn_replication(op, begin..self.exchanges.len(), now);
                }
                self.conclude_primary(index, now)
            }
        }
    }

    /// Fails the pending exchanges with servers that are now ejected; their connections
    /// close, since the replies still owed on them would arrive out of step.
    pub(super) fn give_up_on_ejected(&mut self, now: Instant) {
        for server in 0..self.conns.len() {
            let waiting = self
                .exchanges
                .iter()
                .any(|e| e.server == server && matches!(e.result, State::Pending));
            if waiting && self.health.is_ejected(server) {
                self.drop_connection(server, Down::EjectedWhileWaiting);
                fail_pending(&mut self.exchanges, server, now);
            }
        }
    }

    /// Finishes the requests of the batch from `index` on, in order; at the end, the
    /// batch's buffers are released.
    pub(super) fn finish_from(&mut self, index: usize, now: Instant) {
        if index < self.batch.len() {
            self.finish(index, now);
            return;
        }
        self.batch.clear();
        self.frames.clear();
        for server in 0..self.conns.len() {
            let conn = &mut self.conns[server];
            if conn.connected && conn.parsed < conn.rbuf.len() {
                // Every exchange is settled: these bytes answer nothing that was sent.
                self.drop_connection(server, Down::OutOfStep(OutOfStep::Extra));
                self.actions.push_back(Action::Count(Count::OutOfStep));
            }
            self.conns[server].finish_batch();
        }
        self.phase = Phase::Idle;
        self.actions.push_back(Action::Idle);
    }

    /// Sends the reply written into `out` for request `index` and waits for
    /// [`Event::Replied`].
    pub(super) fn send_reply(&mut self, index: usize, outcome: Outcome) {
        let (silent, failovers, start) = self.reply.take().expect("a reply was written");
        self.phase = Phase::Reply { index, outcome };
        self.actions.push_back(Action::Reply {
            index,
            span: start..self.out.len(),
            silent,
            outcome,
            failovers,
        });
    }

    /// The request's statistics sample; the request is dropped.
    pub(super) fn record(&mut self, index: usize, outcome: Outcome, reply_sent: Instant) {
        let taken = self.batch[index].take().expect("served");
        let (first_sent, last_answer) = server_span(&self.exchanges, index);
        let ts = Timestamps {
            arrival: taken.job.arrival,
            enqueued: taken.job.enqueued,
            dequeued: taken.dequeued,
            first_sent,
            last_answer,
            reply_sent,
        };
        self.samples.push_back(Sample {
            index,
            op: taken.job.op,
            ts,
            outcome,
            queue_len: taken.queue_len,
            failovers: taken.failovers,
        });
        self.actions.push_back(Action::Sample);
    }
}
