//! One worker as a synchronous state machine: no sockets, no clock, no async. The shell
//! ([`super::Worker`]) feeds it the requests it takes from the queue and what happened on
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

use crate::budget::{Charge, MemoryBudget};
use crate::down::{Down, IdleEnd, OutOfStep};
use crate::endpoint::Endpoint;
use crate::health::FailureKind;
use crate::job::Request;
use crate::log_limit::Window;
use crate::metrics::{OpKind, Outcome, Timestamps};
use crate::routing::merge::Outcome as Replicated;
use crate::routing::plan::{Alive, Merge, Plan, ServerId};
use crate::routing::redis::plan::plan as redis_plan;

mod compose;
mod exchange;
mod finish;
mod replies;
#[cfg(test)]
mod sim;
#[cfg(test)]
mod tests;

use compose::{compose, compose_unconditional};
use exchange::{fail_pending, server_span, Exchange, State};

/// The whole-process view of the servers the engine needs: which are ejected (also
/// what plans read), how many there are, their addresses for error lines, and where to
/// report an answer (a failing server that answers is counted as recovering).
pub trait ServerHealth: Alive {
    fn servers(&self) -> usize;
    fn addr(&self, server: ServerId) -> &Endpoint;
    fn report_success(&self, server: ServerId);
}

impl ServerHealth for crate::health::Health {
    fn servers(&self) -> usize {
        self.len()
    }
    fn addr(&self, server: ServerId) -> &Endpoint {
        crate::health::Health::addr(self, server)
    }
    fn report_success(&self, server: ServerId) {
        crate::health::Health::report_success(self, server)
    }
}

/// What the engine runs with.
#[derive(Debug, Clone, Copy)]
pub struct EngineSettings {
    /// Requests served together (`--pipeline`).
    pub pipeline: usize,
    /// One request's reply may not grow past this (`--max-reply-bytes`).
    pub max_reply_bytes: usize,
}

/// Something that happened, told to [`Engine::handle`] with the time it happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The answer to [`Action::Connect`]: the server can be used; `fresh` when a new
    /// connection was opened (bytes left unparsed from the old one are dropped).
    Connected { server: ServerId, fresh: bool },
    /// The answer to [`Action::Connect`]: the server cannot be used now, and why.
    Unavailable { server: ServerId, down: Down },
    /// The answer to [`Action::Write`]: the kernel took the bytes (on a new connection
    /// if `reconnected`).
    Written { server: ServerId, reconnected: bool },
    /// The answer to [`Action::Write`]: the bytes could not be sent; no connection is left.
    WriteFailed { server: ServerId, down: Down },
    /// Bytes were appended to [`Engine::read_buf`] of `server` (Ok), or reading
    /// stopped: the connection closed or failed (Err says how).
    Read {
        server: ServerId,
        result: Result<(), Down>,
    },
    /// The deadline of the last [`Action::Await`] passed.
    TimerDue,
    /// Some server was ejected or restored.
    HealthChanged,
    /// An idle connection must go (between batches).
    IdleClosed { server: ServerId, end: IdleEnd },
    /// The last [`Action::Reply`] was handed to the client's connection (and the
    /// connection told the request is done).
    Replied,
}

/// A statistics counter to add one to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    /// A batch was served.
    Batch,
    /// A connection was found out of step.
    OutOfStep,
}

/// What a request's statistics need, with its stage timestamps (docs/stats-file.md);
/// its servers' answer times are [`Engine::server_times`] of `index`.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub index: usize,
    pub op: OpKind,
    pub ts: Timestamps,
    pub outcome: Outcome,
    pub queue_len: usize,
    pub failovers: u64,
}

/// A warning the engine lets through its rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Warning {
    /// A replicated request did not succeed on every server; each server's answer.
    Replication {
        op: &'static str,
        answers: String,
        suppressed: u64,
    },
    /// incr/decr results differ between replicas.
    ReplicasDisagree { op: &'static str },
}

/// What the engine asks the shell to do.
#[derive(Debug, Clone)]
pub enum Action {
    /// Make the server usable (connect if it has no connection and may be retried);
    /// answer with [`Event::Connected`] or [`Event::Unavailable`].
    Connect(ServerId),
    /// Send [`Engine::outgoing`] of the server; answer with [`Event::Written`] or
    /// [`Event::WriteFailed`]. `idle` when no reply is owed on the connection, so a
    /// connection the server closed meanwhile can be noticed and replaced first.
    Write {
        server: ServerId,
        idle: bool,
    },
    /// Wait for replies from the servers [`Engine::wants_read`] until `deadline`; tell
    /// what arrives ([`Event::Read`]), [`Event::TimerDue`] or [`Event::HealthChanged`]
    /// (changes before this action are not news).
    Await {
        deadline: Instant,
    },
    /// Close the connection and count the failure against the server.
    Fail {
        server: ServerId,
        kind: FailureKind,
        down: Down,
    },
    /// Close the connection without counting it against the server.
    Drop {
        server: ServerId,
        down: Down,
    },
    /// Count the request, then complete reply slot of request `index` with `bytes`
    /// (or, when `silent`, without a reply); answer with [`Event::Replied`].
    Reply {
        index: usize,
        bytes: Bytes,
        silent: bool,
        outcome: Outcome,
        failovers: u64,
    },
    Sample(Sample),
    Count(Count),
    Warn(Warning),
    /// The batch is done: take the next.
    Idle,
}

/// A request taken from the queue, with what the statistics need of that moment.
pub(super) struct Taken<J> {
    pub(super) job: J,
    pub(super) dequeued: Instant,
    pub(super) queue_len: usize,
    /// Stand-ins used so far (a part served by a server other than its first choice).
    pub(super) failovers: u64,
}

/// What the engine knows of one server connection, and its buffers.
struct Conn {
    /// Replies read from the server; `parsed` bytes of it belong to the current batch.
    rbuf: BytesMut,
    parsed: usize,
    /// Messages composed for the server and not yet sent.
    wbuf: BytesMut,
    /// `rbuf` held against the memory budget.
    charge: Charge,
    connected: bool,
    /// Why the server is down, for the error line.
    down: Down,
}

/// A reply buffer larger than this is replaced by a fresh one once it is empty.
const RBUF_KEEP: usize = 256 * 1024;

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
    /// The reply being written.
    out: BytesMut,
    /// The reply of the request being finished, until it is sent.
    reply: Option<(bool, u64)>,
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
            self.conns.push(Conn {
                rbuf: BytesMut::with_capacity(16 * 1024),
                parsed: 0,
                wbuf: BytesMut::with_capacity(4 * 1024),
                charge: Charge::new(Arc::clone(&self.budget)),
                connected: false,
                down: Down::NotConnectedYet,
            });
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

    /// Whether the engine waits for bytes from `server`.
    pub fn wants_read(&self, server: ServerId) -> bool {
        matches!(self.phase, Phase::Wait { .. }) && self.blocked[server]
    }

    /// Where bytes read from `server` go (room for a read is made).
    pub fn read_buf(&mut self, server: ServerId) -> &mut BytesMut {
        let rbuf = &mut self.conns[server].rbuf;
        if rbuf.capacity() - rbuf.len() < 4096 {
            rbuf.reserve(16 * 1024);
        }
        rbuf
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
        let mut items = VecDeque::new();
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

    fn fail(&mut self, server: ServerId, kind: FailureKind, down: Down) {
        let conn = &mut self.conns[server];
        conn.connected = false;
        conn.wbuf.clear();
        conn.down = down.clone();
        self.actions.push_back(Action::Fail { server, kind, down });
    }

    fn drop_connection(&mut self, server: ServerId, down: Down) {
        let conn = &mut self.conns[server];
        conn.connected = false;
        conn.wbuf.clear();
        conn.down = down.clone();
        self.actions.push_back(Action::Drop { server, down });
    }

    /// Stages `items` (asking for connections as needed), then sends and waits.
    fn stage(&mut self, items: VecDeque<(usize, Target)>, round: Round, now: Instant) {
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
    fn stage_more(&mut self, now: Instant) {
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
            staged,
            exhausted,
            round,
            ..
        } = self.phase
        else {
            unreachable!("staging");
        };
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
    fn connect_answered(&mut self, server: ServerId, ok: bool, now: Instant) {
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
                if ok || all_must_succeed {
                    if ok {
                        compose(job, &self.plans[index], part, &mut self.conns[server].wbuf);
                    }
                    self.exchanges.push(Exchange {
                        job: index,
                        server,
                        part,
                        expect: job.expect,
                        carries_data: job.op == OpKind::Set,
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
                    if let Some(expect) =
                        compose_unconditional(&job.frame, &mut self.conns[server].wbuf)
                    {
                        self.exchanges.push(Exchange {
                            job: index,
                            server,
                            part: 0,
                            expect,
                            carries_data: true,
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
    fn send_more(&mut self, now: Instant) {
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

    fn batch_timeout(&self) -> Duration {
        self.batch
            .iter()
            .flatten()
            .map(|t| t.job.pool.timeout)
            .max()
            .unwrap_or(Duration::ZERO)
    }

    fn written(&mut self, server: ServerId, now: Instant) {
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
    fn settle(&mut self, now: Instant) {
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
    fn give_up_on_ejected(&mut self, now: Instant) {
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
    fn finish_from(&mut self, index: usize, now: Instant) {
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
    fn send_reply(&mut self, index: usize, outcome: Outcome) {
        let (silent, failovers) = self.reply.take().expect("a reply was written");
        let bytes = self.out.split().freeze();
        self.phase = Phase::Reply { index, outcome };
        self.actions.push_back(Action::Reply {
            index,
            bytes,
            silent,
            outcome,
            failovers,
        });
    }

    /// The request's statistics sample; the request is dropped.
    fn record(&mut self, index: usize, outcome: Outcome, reply_sent: Instant) {
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
        self.actions.push_back(Action::Sample(Sample {
            index,
            op: taken.job.op,
            ts,
            outcome,
            queue_len: taken.queue_len,
            failovers: taken.failovers,
        }));
    }
}

impl Conn {
    /// Drops the batch's replies from the buffer.
    fn finish_batch(&mut self) {
        if self.connected {
            bytes::Buf::advance(&mut self.rbuf, self.parsed);
        } else {
            self.rbuf.clear();
        }
        self.parsed = 0;
        // A large reply's buffer goes back to the allocator, not just to the budget.
        if self.rbuf.is_empty() && self.rbuf.capacity() > RBUF_KEEP {
            self.rbuf = BytesMut::with_capacity(16 * 1024);
        }
        self.charge.force_resize(if self.rbuf.is_empty() {
            0
        } else {
            self.rbuf.capacity()
        });
    }
}
