//! One worker of the event loop: its engine ([`Engine`]) and its connections to every
//! server ([`ServerLink`]). The loop hands it requests and socket events; it carries out
//! the engine's actions without waiting, and remembers what it waits for.

use std::time::Instant;

use mio::{Registry, Token};

use super::server_link::{Opened, ServerLink};
use super::shared::SharedConns;
use crate::down::Down;
use crate::health::Health;
use crate::job::Job;
use crate::mio_socket::ReadOutcome;
use crate::queue::RequestQueue;
use crate::routing::plan::ServerId;
use crate::worker::engine::{Action, Engine, Event};
use crate::worker::outputs::{self, Completion, Records};
use crate::worker::WorkerContext;

/// What the worker waits for besides replies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Blocked {
    Nothing,
    /// [`Action::Connect`] of this server is being carried out.
    Connect(ServerId),
    /// [`Action::Write`] of this server: `offset` bytes are out; a connection is being
    /// opened first if the link is opening.
    Write {
        server: ServerId,
        offset: usize,
        reconnected: bool,
        retried: bool,
    },
    /// Replies, until the engine's deadline.
    Await,
}

pub struct WorkerSlot {
    /// Its number in the whole proxy (counters, statistics, logs).
    pub id: usize,
    /// Its number in its loop (its sockets' tokens).
    pub(super) local: usize,
    pub engine: Engine<Job, Health>,
    pub(super) links: Vec<ServerLink>,
    pub(super) blocked: Blocked,
    deadline: Instant,
    /// When what the worker handles happened: the time the loop's call passed (its
    /// turn's clock reading), or when the worker took its batch.
    pub(super) clock: Instant,
    /// Replies finished since the loop last took them, for their clients.
    pub completed: Vec<Completion>,
    /// `--share-connections`: per server, the generation of the shared connection it
    /// last used, and what arrived for it while it was not waiting (replies, an end).
    pub(super) seen: Vec<u64>,
    pub(super) inbox: Vec<(bool, Option<Down>)>,
    /// Its statistics and latencies, handed over when asked.
    pub records: Records,
}

/// Where a worker's connection to a server is registered.
pub fn server_token(base: usize, worker: usize, server: usize) -> Token {
    Token(base + (worker << 20) + server)
}

impl WorkerSlot {
    /// A worker with no server connections yet: [`WorkerSlot::connect_all`] opens its
    /// own; with `--share-connections` it has none and uses the loop's.
    pub fn new(id: usize, local: usize, engine: Engine<Job, Health>, servers: usize) -> Self {
        let now = Instant::now();
        WorkerSlot {
            id,
            local,
            engine,
            links: Vec::new(),
            blocked: Blocked::Nothing,
            deadline: now,
            clock: now,
            completed: Vec::new(),
            seen: Vec::new(),
            inbox: Vec::new(),
            records: Records::new(servers, now),
        }
    }

    pub(super) fn grow(&mut self, ctx: &WorkerContext, servers: usize) {
        while self.links.len() < servers {
            let server = self.links.len();
            self.links.push(ServerLink::new(
                self.id,
                server,
                server_token(super::SERVER_BASE, self.local, server),
                ctx.settings.backoff_max,
            ));
        }
    }

    pub fn is_idle(&self) -> bool {
        self.engine.is_idle() && self.blocked == Blocked::Nothing
    }

    /// When the worker must be told that time passed: its engine's deadline, or a
    /// connection attempt's.
    fn deadline(&self) -> Option<Instant> {
        match self.blocked {
            Blocked::Await => Some(self.deadline),
            Blocked::Connect(s) | Blocked::Write { server: s, .. } => {
                self.links.get(s).and_then(ServerLink::deadline)
            }
            Blocked::Nothing => None,
        }
    }

    /// Takes a batch from the queue (the oldest request, and with `--pipeline D` up to
    /// D-1 more already waiting) and serves it until it is done or the worker must
    /// wait. One batch: the loop hands its replies to their clients before any worker
    /// takes more.
    pub fn serve_queue(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: Option<&mut SharedConns>,
        queue: &mut RequestQueue<Job>,
    ) {
        if self.is_idle() {
            let Some(job) = queue.try_pop() else {
                return;
            };
            // One clock reading for the batch: its requests leave the queue together.
            let now = Instant::now();
            self.clock = now;
            self.engine.take(job, now, queue.len());
            while self.engine.has_room() {
                match queue.try_pop() {
                    Some(job) => self.engine.take(job, now, queue.len()),
                    None => break,
                }
            }
            self.engine.start(now);
            self.step(ctx, registry, shared);
        }
    }

    /// Opens a connection to every server at start (a server that is down is retried
    /// when a request needs it).
    pub fn connect_all(&mut self, ctx: &WorkerContext, registry: &Registry) {
        self.grow(ctx, ctx.health.len());
        let now = Instant::now();
        for link in &mut self.links {
            let _ = link.open(&ctx.health, registry, now, ctx.settings.connect_timeout);
        }
    }

    /// Feeds an event to the engine and carries out what follows.
    pub(super) fn handle(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: Option<&mut SharedConns>,
        event: Event,
    ) {
        self.blocked = Blocked::Nothing;
        self.engine.handle(event, self.clock);
        self.step(ctx, registry, shared);
        if self.blocked == Blocked::Nothing && self.engine.is_waiting() {
            // Still waiting for other replies, under the deadline already set.
            self.blocked = Blocked::Await;
        }
    }

    /// Carries out the engine's actions until it waits.
    pub(super) fn step(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        mut shared: Option<&mut SharedConns>,
    ) {
        while let Some(action) = self.engine.next_action() {
            match action {
                Action::Connect(server) => {
                    let ready = match shared.as_deref_mut() {
                        Some(shared) => self.connect_shared(ctx, registry, shared, server),
                        None => self.connect(ctx, registry, server),
                    };
                    if !ready {
                        return;
                    }
                }
                Action::Write { server, idle } => {
                    let written = match shared.as_deref_mut() {
                        Some(shared) => self.write_shared(ctx, registry, shared, server, idle),
                        None => self.write(ctx, registry, server, idle),
                    };
                    if !written {
                        return;
                    }
                }
                Action::Await { deadline } => {
                    self.deadline = deadline;
                    self.blocked = Blocked::Await;
                    // Replies that arrived before the engine waited for them.
                    match shared {
                        Some(shared) => self.read_inbox(ctx, registry, shared),
                        None => self.read_pending(ctx, registry),
                    }
                    return;
                }
                Action::Fail { server, kind, down } => match shared.as_deref_mut() {
                    Some(shared) => {
                        self.close_shared(ctx, registry, shared, server, Some(kind), down)
                    }
                    None => {
                        self.grow(ctx, server + 1);
                        self.links[server].fail(&ctx.health, registry, Instant::now(), kind, down)
                    }
                },
                Action::Drop { server, down } => match shared.as_deref_mut() {
                    Some(shared) => self.close_shared(ctx, registry, shared, server, None, down),
                    None => {
                        self.grow(ctx, server + 1);
                        self.links[server].drop_connection(&ctx.health, registry, down)
                    }
                },
                Action::Idle => {
                    self.blocked = Blocked::Nothing;
                    return;
                }
                Action::Reply { .. } | Action::Sample | Action::Count(_) | Action::Warn(_) => {
                    let (completed, records) = (&mut self.completed, &mut self.records);
                    outputs::apply(self.id, ctx, &mut self.engine, action, completed, records);
                }
            }
        }
    }

    /// [`Action::Connect`]; false if the worker now waits for the connection.
    fn connect(&mut self, ctx: &WorkerContext, registry: &Registry, server: ServerId) -> bool {
        self.grow(ctx, server + 1);
        let health = &ctx.health;
        let link = &mut self.links[server];
        let event = if health.is_ejected(server) {
            let down = Down::Ejected(health.reason(server));
            link.drop_connection(health, registry, down.clone());
            Event::Unavailable { server, down }
        } else if link.is_ready() {
            Event::Connected {
                server,
                fresh: false,
            }
        } else if link.is_opening() {
            // A connection opened at start (or by a reload) is still on its way.
            self.blocked = Blocked::Connect(server);
            return false;
        } else {
            match link.open(
                health,
                registry,
                Instant::now(),
                ctx.settings.connect_timeout,
            ) {
                Ok(_) => {
                    self.blocked = Blocked::Connect(server);
                    return false;
                }
                Err(down) => Event::Unavailable { server, down },
            }
        };
        self.engine.handle(event, Instant::now());
        true
    }

    /// A socket event on the connection to `server`.
    pub fn on_event(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        readable: bool,
        hup: bool,
        now: Instant,
    ) {
        self.clock = now;
        if server >= self.links.len() {
            return;
        }
        self.links[server].note_event(readable, hup);
        if self.links[server].is_opening() {
            self.advance_open(ctx, registry, server);
            return;
        }
        match self.blocked {
            Blocked::Write { server: s, .. } if s == server => self.resume_write(ctx, registry),
            Blocked::Await => self.read_pending(ctx, registry),
            Blocked::Nothing if self.engine.is_idle() => {
                // Between batches: a server closing an idle connection (a restart) is
                // noticed now, rather than when the next request finds it dead.
                if let Some(end) = self.links[server].idle_end() {
                    self.handle(ctx, registry, None, Event::IdleClosed { server, end });
                }
            }
            _ => {}
        }
    }

    fn advance_open(&mut self, ctx: &WorkerContext, registry: &Registry, server: ServerId) {
        let opened = self.links[server].advance(
            &ctx.health,
            registry,
            Instant::now(),
            ctx.settings.connect_timeout,
        );
        let event = match (opened, self.blocked) {
            (Opened::Pending, _) => return,
            (Opened::Ready, Blocked::Connect(s)) if s == server => {
                self.blocked = Blocked::Nothing;
                Event::Connected {
                    server,
                    fresh: true,
                }
            }
            (Opened::Failed(down), Blocked::Connect(s)) if s == server => {
                self.blocked = Blocked::Nothing;
                Event::Unavailable { server, down }
            }
            (Opened::Ready, Blocked::Write { server: s, .. }) if s == server => {
                self.resume_write(ctx, registry);
                return;
            }
            (Opened::Failed(down), Blocked::Write { server: s, .. }) if s == server => {
                self.blocked = Blocked::Nothing;
                Event::WriteFailed { server, down }
            }
            // A connection opened at start, nobody waiting for it.
            _ => return,
        };
        self.handle(ctx, registry, None, event);
    }

    /// Reads every server the engine waits for that has bytes pending.
    fn read_pending(&mut self, ctx: &WorkerContext, registry: &Registry) {
        loop {
            if self.blocked != Blocked::Await {
                return;
            }
            let Some(server) = (0..self.links.len())
                .find(|&s| self.links[s].readable && self.engine.wants_read(s))
            else {
                return;
            };
            let link = &mut self.links[server];
            let result = match link.socket() {
                None => Err(link.retry.down.clone()),
                Some(socket) => match socket.read_into(self.engine.read_buf(server)) {
                    Ok(ReadOutcome::Data { drained, .. }) => {
                        link.readable = !drained || link.hup;
                        Ok(())
                    }
                    Ok(ReadOutcome::WouldBlock) => {
                        link.readable = false;
                        continue;
                    }
                    Ok(ReadOutcome::Eof) => Err(Down::Closed),
                    Err(e) => Err(Down::ReadFailed(e.to_string())),
                },
            };
            if result.is_err() {
                link.readable = false;
            }
            self.handle(ctx, registry, None, Event::Read { server, result });
        }
    }

    /// Time passed: a deadline of the engine or of a connection attempt.
    pub fn on_time(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: Option<&mut SharedConns>,
        now: Instant,
    ) {
        self.clock = now;
        match self.blocked {
            Blocked::Await if now >= self.deadline => {
                self.handle(ctx, registry, shared, Event::TimerDue);
            }
            Blocked::Connect(s) | Blocked::Write { server: s, .. }
                if self
                    .links
                    .get(s)
                    .and_then(ServerLink::deadline)
                    .is_some_and(|d| now >= d) =>
            {
                self.advance_open(ctx, registry, s)
            }
            _ => {}
        }
        // Connections opened at start that nobody waits for.
        for s in 0..self.links.len() {
            if self
                .links
                .get(s)
                .and_then(ServerLink::deadline)
                .is_some_and(|d| now >= d)
            {
                let _ =
                    self.links[s].advance(&ctx.health, registry, now, ctx.settings.connect_timeout);
            }
        }
    }

    /// Some server was ejected or restored: a waiting engine re-checks.
    pub fn on_health_change(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        shared: Option<&mut SharedConns>,
        now: Instant,
    ) {
        self.clock = now;
        if self.blocked == Blocked::Await {
            self.handle(ctx, registry, shared, Event::HealthChanged);
        }
    }

    /// The earliest deadline of a connection opened at start that nobody waits for.
    fn open_deadline(&self) -> Option<Instant> {
        self.links.iter().filter_map(ServerLink::deadline).min()
    }

    /// The earlier of [`WorkerSlot::deadline`] and [`WorkerSlot::open_deadline`]: when
    /// the loop must call [`WorkerSlot::on_time`].
    pub fn next_deadline(&self) -> Option<Instant> {
        self.deadline()
            .into_iter()
            .chain(self.open_deadline())
            .min()
    }
}
