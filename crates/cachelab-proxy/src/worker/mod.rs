//! A worker: the thin I/O shell around its [`engine::Engine`]. It takes the oldest
//! request from the FCFS queue (and with `--pipeline D` up to D-1 more that are already
//! waiting), hands them to the engine, and carries out what the engine asks for: it
//! owns the server sockets ([`Backend`]: connect with backoff, write, read), waits on
//! them, on the deadline and on health changes, completes the clients' reply slots,
//! and writes the statistics samples into the worker's statistics unit, counters and
//! latency histograms. Every decision (plans, stand-ins, the reply rules, timeouts,
//! refusals, out-of-step connections, the stage timestamps) is the engine's.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tracing::warn;

use crate::backend::Backend;
use crate::budget::MemoryBudget;
use crate::counters::Counters;
use crate::down::IdleEnd;
use crate::health::Health;
use crate::histograms::LatencyUnits;
use crate::job::Job;
use crate::metrics::WorkerStats;
use crate::queue::RequestQueue;
use crate::routing::plan::ServerId;
use crate::stats_units::StatsUnits;
use crossbeam_utils::CachePadded;
use std::sync::MutexGuard;

pub mod engine;
pub mod outputs;

use engine::{Action, Engine, EngineSettings, Event};

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

pub struct Worker {
    id: usize,
    ctx: WorkerContext,
    engine: Engine<Job, Health>,
    /// One connection per server, by server id; grown when a reload adds servers.
    backends: Vec<Backend>,
    /// Ejections and restores of servers (see `health`): a worker waiting on a server
    /// that gets ejected stops waiting.
    health_changes: watch::Receiver<u64>,
    /// The deadline of the engine's current wait.
    deadline: Instant,
}

impl Worker {
    pub fn new(id: usize, ctx: WorkerContext) -> Self {
        let settings = EngineSettings {
            pipeline: ctx.settings.pipeline,
            max_reply_bytes: ctx.settings.max_reply_bytes,
        };
        let engine = Engine::new(Arc::clone(&ctx.health), Arc::clone(&ctx.budget), settings);
        let mut worker = Worker {
            id,
            engine,
            backends: Vec::new(),
            health_changes: ctx.health.subscribe(),
            deadline: Instant::now(),
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
                settings.connect_timeout,
                settings.backoff_max,
            ));
        }
    }

    fn backend(&mut self, server: ServerId) -> &mut Backend {
        if server >= self.backends.len() {
            self.grow_backends(server + 1);
        }
        &mut self.backends[server]
    }

    /// Opens the connections to every server (a server that is down is retried later).
    pub async fn connect(&mut self) {
        for server in 0..self.backends.len() {
            let event = match self.backends[server].ensure_connected().await {
                Ok(fresh) => Event::Connected { server, fresh },
                Err(down) => {
                    warn!(worker = self.id, server = %self.backends[server].addr,
                          reason = %down, "server unavailable at start");
                    Event::Unavailable { server, down }
                }
            };
            self.engine.handle(event, Instant::now());
        }
    }

    /// Takes the oldest request, and with `--pipeline D` up to D-1 more that are already
    /// waiting, serves them together, and goes back to the queue.
    pub async fn run(mut self) {
        self.connect().await;
        loop {
            // While waiting for work, notice a server closing an idle connection (a
            // restart) now, rather than when the next request finds it dead.
            let queue = &self.ctx.queue;
            let backends = &mut self.backends;
            let job = tokio::select! {
                biased;
                job = queue.pop(self.id) => job,
                (server, end) = idle_closed(backends) => {
                    self.engine.handle(Event::IdleClosed { server, end }, Instant::now());
                    self.carry_out().await;
                    continue;
                }
            };
            let Some(job) = job else { break };
            self.take(job);
            while self.engine.has_room() {
                match self.ctx.queue.try_pop() {
                    Some(job) => self.take(job),
                    None => break,
                }
            }
            self.engine.start(Instant::now());
            self.carry_out().await;
        }
    }

    fn take(&mut self, job: Job) {
        let queue_len = self.ctx.queue.len();
        self.engine.take(job, Instant::now(), queue_len);
    }

    /// Carries out the engine's actions, feeding it what comes of them, until it has
    /// finished the batch (or, between batches, has nothing more to ask).
    async fn carry_out(&mut self) {
        loop {
            while let Some(action) = self.engine.next_action() {
                if !self.act(action).await {
                    return;
                }
            }
            if self.engine.is_idle() {
                return;
            }
            let event = self.wait().await;
            self.engine.handle(event, Instant::now());
        }
    }

    /// Carries out one action; false once the batch is done.
    async fn act(&mut self, action: Action) -> bool {
        let Some(action) = outputs::apply(self.id, &self.ctx, &mut self.engine, action) else {
            return true;
        };
        match action {
            Action::Connect(server) => {
                let event = match self.backend(server).ensure_connected().await {
                    Ok(fresh) => Event::Connected { server, fresh },
                    Err(down) => Event::Unavailable { server, down },
                };
                self.engine.handle(event, Instant::now());
            }
            Action::Write { server, idle } => {
                if server >= self.backends.len() {
                    self.grow_backends(server + 1);
                }
                let sent = self.backends[server]
                    .send(self.engine.outgoing(server), idle)
                    .await;
                let event = match sent {
                    Ok(reconnected) => Event::Written {
                        server,
                        reconnected,
                    },
                    Err(down) => Event::WriteFailed { server, down },
                };
                self.engine.handle(event, Instant::now());
            }
            Action::Await { deadline } => {
                self.deadline = deadline;
                self.health_changes.borrow_and_update();
            }
            Action::Fail { server, kind, down } => self.backend(server).fail(kind, down),
            Action::Drop { server, down } => self.backend(server).drop_connection(down),
            Action::Idle => return false,
            Action::Reply { .. } | Action::Sample(_) | Action::Count(_) | Action::Warn(_) => {
                unreachable!("carried out by outputs::apply")
            }
        }
        true
    }

    /// Waits for what the engine waits for: replies, the deadline, a health change.
    async fn wait(&mut self) -> Event {
        let deadline = tokio::time::Instant::from_std(self.deadline);
        let engine = &mut self.engine;
        let backends = &mut self.backends;
        let changes = &mut self.health_changes;
        tokio::select! {
            biased;
            (server, result) = poll_fn(|cx| {
                for (server, backend) in backends.iter_mut().enumerate() {
                    if !engine.wants_read(server) {
                        continue;
                    }
                    if let Poll::Ready(result) = backend.poll_read(cx, engine.read_buf(server)) {
                        return Poll::Ready((server, result));
                    }
                }
                Poll::Pending
            }) => Event::Read { server, result },
            _ = tokio::time::sleep_until(deadline) => Event::TimerDue,
            _ = changes.changed() => Event::HealthChanged,
        }
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
