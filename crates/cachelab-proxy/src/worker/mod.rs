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
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;
use tracing::warn;

use crate::backend::Backend;
use crate::budget::MemoryBudget;
use crate::counters::Counters;
use crate::down::{Down, IdleEnd, OutOfStep};
use crate::health::FailureKind;
use crate::health::Health;
use crate::histograms::LatencyUnits;
use crate::job::Job;

mod compose;
mod exchange;
mod finish;
mod replies;

use crate::log_limit::Window;
use crate::metrics::OpKind;
use crate::metrics::WorkerStats;
use crate::queue::RequestQueue;
use crate::routing::merge::Outcome as Replicated;
use crate::routing::plan::{Merge, Plan};
use crate::routing::redis::plan::plan as redis_plan;
use crate::stats_units::StatsUnits;
use compose::compose;
use crossbeam_utils::CachePadded;
use exchange::{fail_pending, Exchange, State};
use replies::{idle_closed, poll_replies};
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
        match job.redis {
            Some(route) => redis_plan(
                &job.pool,
                route,
                &job.frame,
                &job.spans,
                job.rr,
                &*self.ctx.health,
                plan,
            ),
            None => job.pool.plan(
                job.access,
                &job.frame,
                &job.spans,
                job.rr,
                &*self.ctx.health,
                plan,
            ),
        }
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
}
