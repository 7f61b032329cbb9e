//! One worker as a synchronous state machine: no sockets, no clock, no async. The event
//! loop's `WorkerSlot` feeds it the requests it takes from the queue and what happened on
//! the server connections ([`Event`], each with the time it happened), and carries out
//! what it asks for ([`Action`]): connect, write, wait for replies until a deadline,
//! close, reply to a client, record a request's statistics, log a warning.
//!
//! A batch (one request by default, up to `--pipeline D`) goes through four steps:
//! staging (each part of each request's plan at its first usable candidate, composed
//! into that server's outgoing buffer), sending (one write per server), waiting (replies
//! parsed per server in the order its messages went out, until all are settled or the
//! deadline passes), and finishing the requests in order by their plan's reply rule,
//! with rounds of stand-ins where a part's server failed.
//!
//! The engine owns the reply buffers (and their memory-budget charge), the outgoing
//! buffers and what it knows of each connection; the shell owns the sockets and the
//! per-connection reconnect backoff. Whole-process server health stays in
//! [`crate::health::Health`], seen through [`ServerHealth`]: the engine reads ejections
//! and reports answers through it, and reports failures as [`Action::Fail`].

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use cachelab_protocol::Expect;

use crate::budget::MemoryBudget;
use crate::down::{Down, IdleEnd};
use crate::health::FailureKind;
use crate::job::Request;
use crate::log_limit::Window;
use crate::metrics::Outcome;
use crate::routing::merge::Outcome as Replicated;
use crate::routing::plan::{Plan, ServerId};
use crate::routing::redis::plan::plan as redis_plan;

mod compose;
mod conn;
mod events;
mod exchange;
mod finish;
#[cfg(test)]
mod frame_tests;
mod hints;
#[cfg(test)]
mod merge_tests;
mod merged;
#[cfg(test)]
mod refusal_tests;
mod replies;
mod rounds;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

use conn::{Conn, RBUF_KEEP};
pub use events::{Action, Count, EngineSettings, Event, Sample, ServerHealth, Warning};
use exchange::{fail_pending, Exchange, State};

/// A request taken from the queue, with what the statistics need of that moment.
pub(super) struct Taken<J> {
    pub(super) job: J,
    pub(super) dequeued: Instant,
    pub(super) queue_len: usize,
    /// Stand-ins used so far (a part served by a server other than its first choice).
    pub(super) failovers: u64,
}

/// Warnings about replicated requests a worker logs per second; the rest are counted
/// and the count goes with the next one logged.
const WARNINGS_PER_SECOND: u32 = 1;

/// What the next message to stage is for.
#[derive(Debug, Clone, Copy)]
enum Target {
    Part(usize),
    FollowUp(ServerId),
}

/// What comes after a round of messages is settled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// The first attempt of every request of the batch: finish them in order.
    First,
    /// Stand-ins for the unanswered parts of request `index`.
    Parts(usize),
    /// A compare-and-swap's write to the key's other replicas (request `index`).
    FollowUps { index: usize, begin: usize },
}

#[derive(Debug)]
enum Phase {
    Idle,
    /// Staging `items`; `connecting` while a [`Action::Connect`] is out.
    Stage {
        items: VecDeque<(usize, Target)>,
        connecting: Option<ServerId>,
        staged: bool,
        exhausted: bool,
        round: Round,
    },
    /// Sending the composed messages, server by server from `next`.
    Send {
        next: ServerId,
        writing: bool,
        round: Round,
    },
    Wait {
        timeout: Duration,
        round: Round,
    },
    /// Request `index`'s reply is out; its statistics follow [`Event::Replied`].
    Reply {
        index: usize,
        outcome: Outcome,
    },
}

pub struct Engine<J, H> {
    health: Arc<H>,
    budget: Arc<MemoryBudget>,
    settings: EngineSettings,
    conns: Vec<Conn>,
    /// Requests taken together; a finished one is dropped (its charge given back).
    batch: Vec<Option<Taken<J>>>,
    /// The frame of each request of the batch, to check replies against.
    frames: Vec<Bytes>,
    /// The plan of each request of the batch (reused, not reallocated).
    plans: Vec<Plan>,
    /// Per request of the batch and part of its plan, the next candidate to try.
    cursors: Vec<Vec<usize>>,
    /// Every message of the batch, in the order it was composed: per server, this is
    /// the order of the replies on that connection.
    exchanges: Vec<Exchange>,
    /// Per server: a reply is incomplete and more bytes are wanted.
    blocked: Vec<bool>,
    replicated: Vec<Replicated<Instant>>,
    /// Per part of the request being finished, the exchange that answered it.
    part_answers: Vec<Option<usize>>,
    warnings: Window,
    phase: Phase,
    actions: VecDeque<Action>,
    /// Samples announced by [`Action::Sample`], oldest first.
    samples: VecDeque<Sample>,
    /// The last staging list, kept for its capacity ([`Engine::staging_list`]).
    spare_items: VecDeque<(usize, Target)>,
    /// The replies written since the loop last took them ([`Engine::clear_replies`]).
    out: BytesMut,
    /// The reply of the request being finished, until it is sent: silent, stand-ins,
    /// where it starts in `out`.
    reply: Option<(bool, u64, usize)>,
}

impl<J: std::ops::Deref<Target = Request>, H: ServerHealth> Engine<J, H> {
    pub fn new(health: Arc<H>, budget: Arc<MemoryBudget>, s: EngineSettings) -> Self {
        let depth = s.pipeline.max(1);
        let mut engine = Engine {
            conns: Vec::new(),
            batch: Vec::with_capacity(depth),
            frames: Vec::with_capacity(depth),
            plans: (0..depth).map(|_| Plan::default()).collect(),
            cursors: vec![Vec::new(); depth],
            exchanges: Vec::with_capacity(depth * 8),
            blocked: Vec::new(),
            replicated: Vec::with_capacity(8),
            part_answers: Vec::with_capacity(8),
            warnings: Window::new(WARNINGS_PER_SECOND),
            phase: Phase::Idle,
            actions: VecDeque::with_capacity(16),
            samples: VecDeque::with_capacity(depth),
            spare_items: VecDeque::with_capacity(depth),
            out: BytesMut::with_capacity(16 * 1024),
            reply: None,
            settings: s,
            budget,
            health,
        };
        engine.grow(engine.health.servers());
        engine
    }

    /// Servers the engine has state for (grown when a reload adds servers).
    pub fn servers(&self) -> usize {
        self.conns.len()
    }

    fn grow(&mut self, servers: usize) {
        while self.conns.len() < servers {
            self.conns.push(Conn::new(Arc::clone(&self.budget)));
        }
        self.blocked.resize(self.conns.len(), false);
    }

    /// Whether another request may join the batch.
    pub fn has_room(&self) -> bool {
        self.batch.len() < self.settings.pipeline.max(1)
    }

    /// Whether no batch is being served.
    pub fn is_idle(&self) -> bool {
        matches!(self.phase, Phase::Idle)
    }

    /// Whether the engine waits for replies (and has nothing else to ask).
    pub fn is_waiting(&self) -> bool {
        matches!(self.phase, Phase::Wait { .. }) && self.actions.is_empty()
    }

    /// The request `index` of the batch, while it is being served.
    pub fn job(&self, index: usize) -> &J {
        &self.batch[index]
            .as_ref()
            .expect("request still served")
            .job
    }

    /// The bytes to send to `server` ([`Action::Write`]).
    pub fn outgoing(&self, server: ServerId) -> &[u8] {
        &self.conns[server].wbuf
    }

    /// The kind of reply each message in [`Engine::outgoing`] of `server` gets, in order
    /// (at an [`Action::Write`], the messages pending with the server are those).
    pub fn outgoing_expects(&self, server: ServerId) -> impl Iterator<Item = Expect> + '_ {
        self.exchanges
            .iter()
            .filter(move |ex| ex.server == server && matches!(ex.result, State::Pending))
            .filter(|ex| !ex.joined)
            .map(|ex| ex.expect)
    }

    /// Whether the engine waits for bytes from `server`.
    pub fn wants_read(&self, server: ServerId) -> bool {
        matches!(self.phase, Phase::Wait { .. }) && self.blocked[server]
    }

    /// When each server that answered request `index` was sent to and answered.
    pub fn server_times(
        &self,
        index: usize,
    ) -> impl Iterator<Item = (ServerId, Instant, Instant)> + '_ {
        self.exchanges
            .iter()
            .filter(move |ex| ex.job == index)
            .filter_map(|ex| match ex.result {
                State::Done { at, .. } => Some((ex.server, ex.sent, at)),
                _ => None,
            })
    }

    /// The next thing to do, if any; None while the engine waits for an event.
    pub fn next_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The sample an [`Action::Sample`] announced (once per action).
    pub fn take_sample(&mut self) -> Sample {
        self.samples
            .pop_front()
            .expect("an Action::Sample announced it")
    }

    /// Adds a request taken from the queue at `dequeued` (with `queue_len` left
    /// behind it) to the batch; [`Engine::start`] serves the batch.
    pub fn take(&mut self, job: J, dequeued: Instant, queue_len: usize) {
        let index = self.batch.len();
        let plan = &mut self.plans[index];
        match job.redis {
            Some(route) => redis_plan(
                &job.pool,
                route,
                &job.frame,
                &job.spans,
                job.rr,
                &*self.health,
                plan,
            ),
            None => job.pool.plan(
                job.access,
                &job.frame,
                &job.spans,
                job.rr,
                &*self.health,
                plan,
            ),
        }
        self.cursors[index].clear();
        self.cursors[index].resize(plan.parts.len(), 0);
        let highest = plan.candidates.iter().copied().max().unwrap_or(0);
        self.frames.push(job.frame.clone());
        self.batch.push(Some(Taken {
            job,
            dequeued,
            queue_len,
            failovers: 0,
        }));
        if highest >= self.conns.len() {
            self.grow(self.health.servers().max(highest + 1));
        }
    }

    /// Starts serving the batch taken: the first attempt of every part of every
    /// request, in one write per server.
    pub fn start(&mut self, now: Instant) {
        assert!(self.is_idle() && !self.batch.is_empty(), "a batch to start");
        self.actions.push_back(Action::Count(Count::Batch));
        self.exchanges.clear();
        let mut items = self.staging_list();
        for (index, plan) in self.plans[..self.batch.len()].iter().enumerate() {
            items.extend((0..plan.parts.len()).map(|part| (index, Target::Part(part))));
        }
        self.stage(items, Round::First, now);
    }

    /// Tells the engine what happened at `now`.
    pub fn handle(&mut self, event: Event, now: Instant) {
        match event {
            Event::Connected { server, fresh } => {
                let conn = &mut self.conns[server];
                if fresh {
                    // Replies parsed before a failure still belong to requests of the
                    // current batch; only the unparsed remainder of the old stream goes.
                    conn.rbuf.truncate(conn.parsed);
                    conn.forget_partial_reply();
                }
                conn.connected = true;
                self.connect_answered(server, true, now);
            }
            Event::Unavailable { server, down } => {
                let conn = &mut self.conns[server];
                conn.connected = false;
                conn.wbuf.clear();
                conn.down = down;
                self.connect_answered(server, false, now);
            }
            Event::Written {
                server,
                reconnected,
            } => {
                let conn = &mut self.conns[server];
                if reconnected {
                    conn.rbuf.truncate(conn.parsed);
                    conn.forget_partial_reply();
                }
                conn.connected = true;
                conn.wbuf.clear();
                for ex in self.exchanges.iter_mut().filter(|e| e.server == server) {
                    if matches!(ex.result, State::Pending) {
                        ex.sent = now;
                    }
                }
                self.written(server, now);
            }
            Event::WriteFailed { server, down } => {
                let conn = &mut self.conns[server];
                conn.connected = false;
                conn.wbuf.clear();
                conn.down = down;
                for ex in self.exchanges.iter_mut().filter(|e| e.server == server) {
                    if matches!(ex.result, State::Pending) {
                        ex.sent = now;
                        ex.result = State::Failed { at: now };
                    }
                }
                self.written(server, now);
            }
            Event::Read { server, result } => {
                if !matches!(self.phase, Phase::Wait { .. }) {
                    return;
                }
                match result {
                    Ok(()) => self.bytes_read(server, now),
                    Err(down) => {
                        self.fail(server, FailureKind::Connection, down);
                        fail_pending(&mut self.exchanges, server, now);
                    }
                }
                self.settle(now);
            }
            Event::TimerDue => {
                let Phase::Wait { timeout, .. } = self.phase else {
                    return;
                };
                for index in 0..self.exchanges.len() {
                    if matches!(self.exchanges[index].result, State::Pending) {
                        let server = self.exchanges[index].server;
                        self.fail(
                            server,
                            FailureKind::Timeout,
                            Down::NoReply(timeout.as_millis()),
                        );
                        fail_pending(&mut self.exchanges, server, now);
                    }
                }
                self.settle(now);
            }
            Event::HealthChanged => {
                if !matches!(self.phase, Phase::Wait { .. }) {
                    return;
                }
                self.give_up_on_ejected(now);
                self.settle(now);
            }
            Event::IdleClosed { server, end } => {
                self.drop_connection(server, Down::Idle(end));
                if end == IdleEnd::UnaskedBytes {
                    self.actions.push_back(Action::Count(Count::OutOfStep));
                }
            }
            Event::Replied => {
                let Phase::Reply { index, outcome } = self.phase else {
                    panic!("Replied without a reply out");
                };
                self.record(index, outcome, now);
                self.finish_from(index + 1, now);
            }
        }
    }
}
