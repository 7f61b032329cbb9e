//! A worker: the I/O shell that carries out routing plans. It takes the oldest request,
//! asks the request's pool for a plan ([`crate::routing::plan`]), sends each part to its
//! server over the worker's own connections, waits for every involved server, lets
//! another server stand in for a failed part where the plan allows, merges the replies
//! by the plan's rule ([`crate::routing::merge`]), sends the client reply, records the
//! request's statistics, and takes the next one.
//!
//! With `--pipeline D` (an extension; the default is 1) a worker takes up to D requests
//! that are already waiting, in queue order, and has them at the servers together: one
//! write and usually one read per server carry the whole batch. Everything below works
//! on a batch; by default it holds one request.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use cachelab_protocol::{
    parse_reply, parse_request, Expect, Limits, MetaStatus, Reply, ReplyError, Request,
};
use tokio::sync::watch;
use tracing::warn;

use crate::backend::{Backend, FillError};
use crate::budget::MemoryBudget;
use crate::counters::Counters;
use crate::down::{Down, IdleEnd, OutOfStep};
use crate::health::FailureKind;
use crate::health::Health;
use crate::histograms::LatencyUnits;
use crate::job::Job;
use crate::log_limit::Window;
use crate::metrics::WorkerStats;
use crate::metrics::{OpKind, Outcome, Timestamps};
use crate::queue::RequestQueue;
use crate::routing::answers::values_answer_request;
use crate::routing::merge::{
    is_success, pick_replicated_reply, values_by_key, values_concat, Outcome as Replicated,
};
use crate::routing::plan::{Merge, PartKeys, Plan, ServerId};
use crate::stats_units::StatsUnits;
use crossbeam_utils::CachePadded;
use std::sync::MutexGuard;

/// What a worker runs with besides its handles.
#[derive(Debug, Clone, Copy)]
pub struct WorkerSettings {
    pub pipeline: usize,
    /// Connection attempts give up after this long (the default server timeout).
    pub connect_timeout: Duration,
    pub backoff_max: Duration,
    pub max_reply_bytes: usize,
}

/// A worker's handles: the queue it takes from, the server health it reports to and
/// reads, the budget its reply buffers are charged to, its counters and its statistics
/// unit.
#[derive(Clone)]
pub struct WorkerContext {
    pub queue: Arc<RequestQueue<Job>>,
    pub health: Arc<Health>,
    pub budget: Arc<MemoryBudget>,
    pub counters: Arc<[CachePadded<Counters>]>,
    pub stats: Arc<StatsUnits>,
    /// Cumulative latency histograms (the metrics endpoint, `stats`).
    pub latencies: Arc<LatencyUnits>,
    pub settings: WorkerSettings,
}

impl WorkerContext {
    /// The worker's own statistics unit; contended only at window boundaries.
    pub fn lock_stats(&self, worker: usize) -> MutexGuard<'_, WorkerStats> {
        self.stats.lock(worker)
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Pending,
    Done {
        reply: Reply,
        offset: usize,
        len: usize,
        at: Instant,
    },
    Failed {
        at: Instant,
    },
    /// The server answered, but the reply could not be held (too large for one request,
    /// or beyond the memory budget): the request is refused, not failed over.
    Refused {
        at: Instant,
        line: &'static [u8],
    },
}

const REPLY_TOO_LARGE: &[u8] = b"SERVER_ERROR reply too large\r\n";
const OUT_OF_MEMORY: &[u8] = b"SERVER_ERROR out of memory\r\n";

/// Limits for re-parsing frames the decoder already accepted.
const REPARSE: Limits = Limits {
    max_key_len: usize::MAX,
    max_value_len: usize::MAX,
    max_line_len: usize::MAX / 4,
};

/// One message to one server and what came of it.
#[derive(Debug, Clone, Copy)]
struct Exchange {
    /// The request of the batch it serves.
    job: usize,
    server: ServerId,
    /// The plan's part it carries.
    part: usize,
    expect: Expect,
    /// The message carries a data block (a storage command or ms): a server that
    /// refuses its line may read the block as commands of its own.
    carries_data: bool,
    sent: Instant,
    result: State,
}

/// A request taken from the queue, with what the statistics need of that moment.
struct Taken {
    job: Job,
    dequeued: Instant,
    queue_len: usize,
    /// Stand-ins used so far (a part served by a server other than its first choice).
    failovers: u64,
}

/// Warnings about replicated requests a worker logs per second; the rest are counted
/// and the count goes with the next one logged.
const WARNINGS_PER_SECOND: u32 = 1;

pub struct Worker {
    id: usize,
    ctx: WorkerContext,
    /// One connection per server, by server id; grown when a reload adds servers.
    backends: Vec<Backend>,
    /// Requests taken together (at most `--pipeline`; one by default).
    batch: Vec<Taken>,
    /// The frame of each request of the batch, to check replies against.
    frames: Vec<Bytes>,
    /// The plan of each request of the batch (reused, not reallocated).
    plans: Vec<Plan>,
    /// Per request of the batch and part of its plan, the next candidate to try.
    cursors: Vec<Vec<usize>>,
    /// Every message of the batch, in the order it was composed: per server, this is
    /// the order of the replies on that connection.
    exchanges: Vec<Exchange>,
    blocked: Vec<bool>,
    replicated: Vec<Replicated<Instant>>,
    /// Per part of the request being finished, the exchange that answered it.
    part_answers: Vec<Option<usize>>,
    warnings: Window,
    /// Ejections and restores of servers (see `health`): a worker waiting on a server
    /// that gets ejected stops waiting.
    health_changes: watch::Receiver<u64>,
}

impl Worker {
    pub fn new(id: usize, ctx: WorkerContext) -> Self {
        let depth = ctx.settings.pipeline;
        let mut worker = Worker {
            id,
            backends: Vec::new(),
            batch: Vec::with_capacity(depth),
            frames: Vec::with_capacity(depth),
            plans: (0..depth).map(|_| Plan::default()).collect(),
            cursors: vec![Vec::new(); depth],
            exchanges: Vec::with_capacity(depth * 8),
            blocked: Vec::new(),
            replicated: Vec::with_capacity(8),
            part_answers: Vec::with_capacity(8),
            warnings: Window::new(WARNINGS_PER_SECOND),
            health_changes: ctx.health.subscribe(),
            ctx,
        };
        worker.grow_backends(worker.ctx.health.len());
        worker
    }

    /// Makes sure there is a backend for every server id below `servers`.
    fn grow_backends(&mut self, servers: usize) {
        let settings = &self.ctx.settings;
        while self.backends.len() < servers {
            self.backends.push(Backend::new(
                self.id,
                self.backends.len(),
                Arc::clone(&self.ctx.health),
                Arc::clone(&self.ctx.budget),
                settings.connect_timeout,
                settings.backoff_max,
                settings.max_reply_bytes,
            ));
        }
        self.blocked.resize(self.backends.len(), false);
    }

    /// Opens the connections to every server (a server that is down is retried later).
    pub async fn connect(&mut self) {
        for backend in &mut self.backends {
            if let Err(down) = backend.ensure_connected().await {
                warn!(worker = self.id, server = %backend.addr, reason = %down,
                      "server unavailable at start");
            }
        }
    }

    /// Takes the oldest request, and with `--pipeline D` up to D-1 more that are already
    /// waiting, serves them together, and goes back to the queue.
    pub async fn run(mut self) {
        self.connect().await;
        let depth = self.ctx.settings.pipeline;
        loop {
            // While waiting for work, notice a server closing an idle connection (a
            // restart) now, rather than when the next request finds it dead.
            let queue = &self.ctx.queue;
            let backends = &mut self.backends;
            let job = tokio::select! {
                biased;
                job = queue.pop(self.id) => job,
                (server, end) = idle_closed(backends) => {
                    backends[server].drop_connection(Down::Idle(end));
                    if end == IdleEnd::UnaskedBytes {
                        self.ctx.counters[self.id].record_out_of_step();
                    }
                    continue;
                }
            };
            let Some(job) = job else { break };
            self.take(job);
            while self.batch.len() < depth {
                match self.ctx.queue.try_pop() {
                    Some(job) => self.take(job),
                    None => break,
                }
            }
            self.serve_batch().await;
        }
    }

    fn take(&mut self, job: Job) {
        let index = self.batch.len();
        let plan = &mut self.plans[index];
        job.pool.plan(
            job.access,
            &job.frame,
            job.keys as usize,
            job.rr,
            &*self.ctx.health,
            plan,
        );
        self.cursors[index].clear();
        self.cursors[index].resize(plan.parts.len(), 0);
        let highest = plan.candidates.iter().copied().max().unwrap_or(0);
        self.frames.push(job.frame.clone());
        self.batch.push(Taken {
            job,
            dequeued: Instant::now(),
            queue_len: self.ctx.queue.len(),
            failovers: 0,
        });
        if highest >= self.backends.len() {
            self.grow_backends(self.ctx.health.len().max(highest + 1));
        }
    }

    /// Sends the first attempt of every request of the batch in one write per server,
    /// reads all the replies, then finishes the requests in order (with stand-ins one
    /// request at a time where a server failed).
    async fn serve_batch(&mut self) {
        self.ctx.counters[self.id].record_batch();
        self.exchanges.clear();
        let mut batch = std::mem::take(&mut self.batch);
        let mut timeout = Duration::ZERO;
        for (index, taken) in batch.iter_mut().enumerate() {
            timeout = timeout.max(taken.job.pool.timeout);
            for part in 0..self.plans[index].parts.len() {
                self.stage_part(index, taken, part).await;
            }
        }
        self.send_staged().await;
        self.await_replies(timeout).await;
        for (index, taken) in batch.drain(..).enumerate() {
            self.finish(index, taken).await;
        }
        self.batch = batch;
        self.frames.clear();
        for backend in &mut self.backends {
            if backend.has_unasked_bytes() {
                // Every exchange is settled: these bytes answer nothing that was sent.
                backend.drop_connection(Down::OutOfStep(OutOfStep::Extra));
                self.ctx.counters[self.id].record_out_of_step();
            }
            backend.finish_request();
        }
    }

    /// Stages part `part` of request `index` with its next candidate that can be used;
    /// false if none is left. A part of an all-must-succeed request has one candidate:
    /// when it cannot be used, a failed exchange stands for its failure.
    async fn stage_part(&mut self, index: usize, taken: &mut Taken, part: usize) -> bool {
        let all_must_succeed = self.plans[index].merge() == Merge::AllMustSucceed;
        loop {
            let cursor = self.cursors[index][part];
            let Some(&server) = self.plans[index].candidates_of(part).get(cursor) else {
                return false;
            };
            self.cursors[index][part] += 1;
            if cursor > 0 {
                taken.failovers += 1;
            }
            if self.backends[server].ensure_connected().await.is_ok() {
                compose(
                    &taken.job,
                    &self.plans[index],
                    part,
                    &mut self.backends[server].wbuf,
                );
                self.exchanges.push(Exchange {
                    job: index,
                    server,
                    part,
                    expect: taken.job.expect,
                    carries_data: taken.job.op == OpKind::Set,
                    sent: Instant::now(),
                    result: State::Pending,
                });
                return true;
            }
            if all_must_succeed {
                let now = Instant::now();
                self.exchanges.push(Exchange {
                    job: index,
                    server,
                    part,
                    expect: taken.job.expect,
                    carries_data: taken.job.op == OpKind::Set,
                    sent: now,
                    result: State::Failed { at: now },
                });
                return true;
            }
        }
    }

    /// Replies to one request of the batch and records its statistics.
    async fn finish(&mut self, index: usize, mut taken: Taken) {
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
        let mut first_sent: Option<Instant> = None;
        let mut last_answer: Option<Instant> = None;
        for ex in self.exchanges.iter().filter(|ex| ex.job == index) {
            // A message that failed the moment it was sent (or staged, for a server
            // that was down) never reached a server.
            if !matches!(ex.result, State::Failed { at } if at == ex.sent) {
                first_sent = Some(first_sent.map_or(ex.sent, |t| t.min(ex.sent)));
            }
            if let State::Done { at, .. } | State::Failed { at } | State::Refused { at, .. } =
                ex.result
            {
                last_answer = Some(last_answer.map_or(at, |t| t.max(at)));
            }
        }
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
            let Ok((Request::Get(get), _)) = parse_request(&job.frame, &REPARSE) else {
                unreachable!("a by-key merge is for a multi-GET");
            };
            let key_parts = &self.plans[index].key_parts;
            self.reply(job, &outcome, failovers, |out| {
                values_by_key(get.keys.iter(), key_parts, &bodies, out)
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

    /// Sends every backend's composed messages; a backend that fails fails its exchanges.
    async fn send_staged(&mut self) {
        for server in 0..self.backends.len() {
            if self.backends[server].wbuf.is_empty() {
                continue;
            }
            let result = self.backends[server].send().await;
            let now = Instant::now();
            for ex in self.exchanges.iter_mut().filter(|e| e.server == server) {
                if matches!(ex.result, State::Pending) {
                    ex.sent = now;
                    if result.is_err() {
                        ex.result = State::Failed { at: now };
                    }
                }
            }
        }
    }

    /// Reads replies from every server with a pending exchange, concurrently, until all
    /// are answered or failed, or `timeout` passes. Each server's replies are parsed in
    /// the order its messages were composed, which is the order it answers in. A server
    /// ejected meanwhile (another worker timed out on it) is given up on at once.
    async fn await_replies(&mut self, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        self.health_changes.borrow_and_update();
        loop {
            let backends = &mut self.backends;
            let exchanges = &mut self.exchanges;
            let blocked = &mut self.blocked;
            let changes = &mut self.health_changes;
            let counters = &self.ctx.counters[self.id];
            let frames = &self.frames;
            let all_answered =
                poll_fn(|cx| poll_replies(cx, backends, exchanges, blocked, frames, counters));
            let answered = tokio::select! {
                biased;
                done = tokio::time::timeout_at(deadline, all_answered) => Some(done.is_ok()),
                _ = changes.changed() => None,
            };
            match answered {
                Some(true) => return,
                Some(false) => break,
                None => {
                    self.give_up_on_ejected();
                    if !self
                        .exchanges
                        .iter()
                        .any(|e| matches!(e.result, State::Pending))
                    {
                        return;
                    }
                }
            }
        }
        for index in 0..self.exchanges.len() {
            if matches!(self.exchanges[index].result, State::Pending) {
                let server = self.exchanges[index].server;
                self.backends[server]
                    .fail(FailureKind::Timeout, Down::NoReply(timeout.as_millis()));
                fail_pending(&mut self.exchanges, server);
            }
        }
    }

    /// Fails the pending exchanges with servers that are now ejected; their connections
    /// close, since the replies still owed on them would arrive out of step.
    fn give_up_on_ejected(&mut self) {
        for server in 0..self.backends.len() {
            let waiting = self
                .exchanges
                .iter()
                .any(|e| e.server == server && matches!(e.result, State::Pending));
            if waiting && self.ctx.health.is_ejected(server) {
                self.backends[server].drop_connection(Down::EjectedWhileWaiting);
                fail_pending(&mut self.exchanges, server);
            }
        }
    }

    /// Counts the request, then sends its reply (or, for noreply, releases its slot).
    /// Counting first means a client that has its reply already sees it in `stats`.
    fn reply(
        &self,
        job: &Job,
        outcome: &Outcome,
        failovers: u64,
        write: impl FnOnce(&mut BytesMut),
    ) {
        self.reply_unless(false, job, outcome, failovers, write);
    }

    /// `reply`, or with `silent` only the release of its slot (quiet mode).
    fn reply_unless(
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

    fn reply_unavailable(&self, job: &Job, outcome: &Outcome, failovers: u64, server: ServerId) {
        let backend = &self.backends[server];
        self.reply(job, outcome, failovers, |out| {
            backend.down().compose_reply(&backend.addr, out)
        });
    }

    fn warn_replication(&mut self, job: &Job, range: std::ops::Range<usize>) {
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

/// Whether quiet mode leaves this reply out (a quiet meta command's miss or success).
fn quiet_drops(job: &Job, reply: Reply) -> bool {
    match (job.quiet, reply) {
        (Some(cmd), Reply::Meta(status)) => cmd.quiet_drops(status),
        _ => false,
    }
}

/// Writes the write a compare-and-swap applied at its primary, without the compare,
/// into `out` (`cas` becomes `set`; `ms`/`md`/`ma` lose their `C`), and says what reply
/// it gets; None for a frame that is not a compare-and-swap.
fn compose_unconditional(frame: &[u8], out: &mut BytesMut) -> Option<Expect> {
    match parse_request(frame, &REPARSE) {
        Ok((Request::Store(store), _)) => {
            let set = cachelab_protocol::Store {
                op: cachelab_protocol::StoreOp::Set,
                cas_unique: None,
                noreply: false,
                ..store
            };
            set.compose(out);
            Some(Expect::Store)
        }
        Ok((Request::Meta(meta), _)) => {
            meta.compose_unconditional(out);
            Some(Expect::Meta)
        }
        _ => None,
    }
}

/// Writes part `part` of `job`'s plan, as its server gets it, into `out`: the frame as
/// received, or a `get`/`gets` of the part's keys.
fn compose(job: &Job, plan: &Plan, part: usize, out: &mut BytesMut) {
    let keys = plan.parts[part].keys;
    if keys == PartKeys::Whole {
        out.extend_from_slice(&job.frame);
        return;
    }
    let Ok((Request::Get(get), _)) = parse_request(&job.frame, &REPARSE) else {
        unreachable!("split requests are multi-GETs that parsed at decode time");
    };
    out.extend_from_slice(if get.cas { b"gets" } else { b"get" });
    let mut put = |key: &[u8]| {
        out.extend_from_slice(b" ");
        out.extend_from_slice(key);
    };
    match keys {
        PartKeys::Consecutive { start, len } => {
            get.keys.iter().skip(start).take(len).for_each(&mut put)
        }
        _ => get
            .keys
            .iter()
            .zip(&plan.key_parts)
            .filter(|(_, &p)| p as usize == part)
            .for_each(|(key, _)| put(key)),
    }
    out.extend_from_slice(b"\r\n");
}

/// One pass over the pending exchanges: parses what has arrived, reads more where a reply
/// is incomplete; Ready when none is pending any more.
fn poll_replies(
    cx: &mut std::task::Context<'_>,
    backends: &mut [Backend],
    exchanges: &mut [Exchange],
    blocked: &mut [bool],
    frames: &[Bytes],
    counters: &Counters,
) -> Poll<()> {
    blocked.iter_mut().for_each(|b| *b = false);
    let mut pending = false;
    for index in 0..exchanges.len() {
        if !matches!(exchanges[index].result, State::Pending) {
            continue;
        }
        let server = exchanges[index].server;
        if blocked[server] {
            pending = true;
            continue;
        }
        let backend = &mut backends[server];
        loop {
            match parse_reply(&backend.rbuf[backend.parsed..], exchanges[index].expect) {
                Ok((reply, len)) => {
                    let ex = &exchanges[index];
                    let foreign = matches!(reply, Reply::Values { hits, body_len } if hits > 0
                    && !values_answer_request(
                        &frames[ex.job],
                        &backend.rbuf[backend.parsed..backend.parsed + body_len],
                    ));
                    let step = if foreign {
                        Some(Relay::Nothing)
                    } else {
                        out_of_step(reply, ex.carries_data)
                    };
                    if step != Some(Relay::Nothing) {
                        exchanges[index].result = State::Done {
                            reply,
                            offset: backend.parsed,
                            len,
                            at: Instant::now(),
                        };
                        backend.parsed += len;
                        backend.answered();
                    }
                    if step.is_some() {
                        // Whatever follows on this connection may answer something
                        // else: close it, and let the requests after this one fail over.
                        backend.drop_connection(Down::OutOfStep(if foreign {
                            OutOfStep::Foreign
                        } else {
                            OutOfStep::ReadDifferently
                        }));
                        counters.record_out_of_step();
                        fail_pending(exchanges, server);
                    }
                    break;
                }
                Err(ReplyError::Incomplete) => match backend.poll_fill(cx) {
                    Poll::Ready(Ok(())) => continue,
                    Poll::Ready(Err(FillError::Connection(reason))) => {
                        backend.fail(FailureKind::Connection, reason);
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Ready(Err(refusal)) => {
                        // The rest of this reply is not wanted, and the connection is out
                        // of step; the server itself is fine.
                        let line = match refusal {
                            FillError::TooLarge => REPLY_TOO_LARGE,
                            _ => OUT_OF_MEMORY,
                        };
                        exchanges[index].result = State::Refused {
                            at: Instant::now(),
                            line,
                        };
                        backend.drop_connection(Down::ReplyRefused);
                        fail_pending(exchanges, server);
                        break;
                    }
                    Poll::Pending => {
                        blocked[server] = true;
                        pending = true;
                        break;
                    }
                },
                Err(ReplyError::Malformed(_)) => {
                    // Not what was asked (a stray reply, or one read out of step): the
                    // connection goes, but a client's bytes must not eject a server.
                    backend.drop_connection(Down::OutOfStep(OutOfStep::Foreign));
                    counters.record_out_of_step();
                    fail_pending(exchanges, server);
                    break;
                }
            }
        }
    }
    if pending {
        Poll::Pending
    } else {
        Poll::Ready(())
    }
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

/// Ready with (server, why) when one of the idle connections must be closed.
async fn idle_closed(backends: &mut [Backend]) -> (usize, IdleEnd) {
    poll_fn(|cx| {
        for (server, backend) in backends.iter_mut().enumerate() {
            if let Poll::Ready(end) = backend.poll_idle_closed(cx) {
                return Poll::Ready((server, end));
            }
        }
        Poll::Pending
    })
    .await
}

fn fail_pending(exchanges: &mut [Exchange], server: usize) {
    let now = Instant::now();
    for ex in exchanges.iter_mut().filter(|e| e.server == server) {
        if matches!(ex.result, State::Pending) {
            ex.result = State::Failed { at: now };
        }
    }
}
