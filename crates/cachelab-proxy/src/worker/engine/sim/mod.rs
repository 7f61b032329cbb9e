//! Simulated servers and simulated time for the engine's tests: a small in-memory
//! memcached and Redis that answer the bytes the engine composes, and can be slow,
//! refuse connections, die in the middle of a batch, stay silent or answer out of step.
//! A harness carries out the engine's actions against them, as the shell does against
//! sockets, with a clock that moves only when the harness says so.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use super::{Action, Count, Engine, EngineSettings, Event, Sample};
use crate::budget::MemoryBudget;
use crate::demux::Demux;
use crate::down::Down;
use crate::health::FailureKind;
use crate::job::Request;
use crate::routing::plan::ServerId;

mod fixtures;
mod server;

pub(super) use fixtures::{pool, request, FakeHealth, TestJob};
pub(super) use server::{Behaviour, SimServer};

/// The most bytes one simulated read delivers (unless set: [`Harness::through_demux`]).
const READ_SIZE: usize = 512;

/// What a server's connection delivers at a time.
#[derive(Debug)]
enum Delivery {
    Bytes(Vec<u8>),
    Close,
}

/// A reply the harness saw, in the order replies went out.
#[derive(Debug, Clone)]
pub(super) struct SeenReply {
    pub(super) job: usize,
    pub(super) bytes: Bytes,
    pub(super) silent: bool,
    pub(super) failovers: u64,
    pub(super) expect: cachelab_protocol::Expect,
}

/// The engine and its simulated servers, connections and clock.
pub(super) struct Harness {
    pub(super) engine: Engine<TestJob, FakeHealth>,
    pub(super) health: Arc<FakeHealth>,
    /// A server the shared health ejects at a time (another worker's verdict).
    pub(super) eject_at: Option<(Instant, ServerId)>,
    pub(super) servers: Vec<SimServer>,
    pub(super) redis: bool,
    pub(super) now: Instant,
    pub(super) start: Instant,
    /// Per server: whether its connection is open, and its deliveries in time order.
    open: Vec<bool>,
    inbox: Vec<Vec<(Instant, Delivery)>>,
    read_size: usize,
    /// Replies read through a shared connection's demux (per server: it and the bytes it
    /// holds), and whether its frames reach the engine.
    shared: Option<Vec<(Demux, BytesMut)>>,
    frames: bool,
    /// The replies' buffer is cleared before every action is taken, as a shell may
    /// between any two ([`Engine::clear_replies`]).
    clear_often: bool,
    deadline: Option<Instant>,
    pub(super) replies: Vec<SeenReply>,
    pub(super) samples: Vec<Sample>,
    /// Per sample, its servers' (server, sent, answered).
    pub(super) server_times: Vec<Vec<(ServerId, Instant, Instant)>>,
    pub(super) failures: Vec<(ServerId, FailureKind)>,
    pub(super) drops: Vec<(ServerId, Down)>,
    pub(super) out_of_step: u64,
    /// Requests whose keys joined another's line.
    pub(super) merged: u64,
    pub(super) taken: usize,
}

impl Harness {
    pub(super) fn new(servers: Vec<SimServer>, redis: bool, s: EngineSettings) -> Harness {
        Harness::with_budget(servers, redis, s, usize::MAX / 2)
    }

    pub(super) fn with_budget(
        servers: Vec<SimServer>,
        redis: bool,
        s: EngineSettings,
        budget: usize,
    ) -> Harness {
        let n = servers.len();
        let health = Arc::new(FakeHealth::new(n));
        let budget = Arc::new(MemoryBudget::new(budget));
        let now = Instant::now();
        Harness {
            engine: Engine::new(Arc::clone(&health), budget, s),
            health,
            eject_at: None,
            servers,
            redis,
            now,
            start: now,
            open: vec![false; n],
            inbox: (0..n).map(|_| Vec::new()).collect(),
            read_size: READ_SIZE,
            shared: None,
            frames: false,
            clear_often: false,
            deadline: None,
            replies: Vec::new(),
            samples: Vec::new(),
            server_times: Vec::new(),
            failures: Vec::new(),
            drops: Vec::new(),
            out_of_step: 0,
            merged: 0,
            taken: 0,
        }
    }

    /// Serves `requests` as one batch (taken at the current time) until the engine is
    /// idle again.
    pub(super) fn serve(&mut self, requests: Vec<Request>) {
        for request in requests {
            let n = self.taken;
            self.taken += 1;
            self.now += Duration::from_micros(2);
            self.engine.take(TestJob { n, request }, self.now, 0);
        }
        self.now += Duration::from_micros(1);
        self.engine.start(self.now);
        self.run();
    }

    /// Replies go through a shared connection's demux, as with `--share-connections`,
    /// its frames handed to the engine if `frames`; reads of at most `read_size` bytes.
    pub(super) fn through_demux(mut self, frames: bool, read_size: usize) -> Harness {
        let n = self.servers.len();
        self.shared = Some((0..n).map(|_| Default::default()).collect());
        self.frames = frames;
        self.read_size = read_size;
        self
    }

    /// The shell clears the replies' buffer before every action it carries out.
    pub(super) fn clearing_replies_often(mut self) -> Harness {
        self.clear_often = true;
        self
    }

    /// Simulated servers of these behaviours and delays (in microseconds).
    pub(super) fn servers_of(behaviours: &[(Behaviour, u64)]) -> Vec<SimServer> {
        behaviours
            .iter()
            .map(|&(b, delay)| SimServer::new(Duration::from_micros(delay), b))
            .collect()
    }

    /// Serves each of `batches` (cut to `pipeline` requests) as one batch, 10 us apart,
    /// from a pool over every server (`replicas` None: replicated, else sharded with
    /// that many); returns the requests taken.
    pub(super) fn serve_batches(
        &mut self,
        replicas: Option<usize>,
        pipeline: usize,
        batches: &[Vec<Vec<u8>>],
    ) -> usize {
        let protocol = if self.redis {
            crate::routing::Protocol::Redis
        } else {
            crate::routing::Protocol::Memcached
        };
        let n = self.servers.len();
        let p = pool(n, replicas.map(|r| r.min(n)), protocol);
        let mut taken = 0;
        for batch in batches {
            let reqs: Vec<_> = batch
                .iter()
                .take(pipeline)
                .map(|r| request(&p, r, self.now))
                .collect();
            taken += reqs.len();
            self.serve(reqs);
            self.now += Duration::from_micros(10);
        }
        taken
    }

    fn close(&mut self, server: ServerId) {
        self.open[server] = false;
        self.inbox[server].clear();
        if let Some(shared) = &mut self.shared {
            shared[server] = Default::default();
        }
    }

    /// Bytes read from `server`: into the engine's buffer, or through the demux. What
    /// the demux cannot route ends the connection, as it does a shared one.
    fn read(&mut self, server: ServerId, bytes: &[u8], at: Instant) {
        let Some(shared) = &mut self.shared else {
            self.engine.read_buf(server).extend_from_slice(bytes);
            return;
        };
        let (demux, buf) = &mut shared[server];
        buf.extend_from_slice(bytes);
        let (engine, frames) = (&mut self.engine, self.frames);
        let routed = demux.route(buf, |_, bytes, framed| {
            engine.deliver(server, bytes, framed.filter(|_| frames))
        });
        if routed.is_err() {
            self.close(server);
            self.inbox[server].push((at, Delivery::Close));
        }
    }

    fn run(&mut self) {
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 100_000, "the engine does not finish its batch");
            while let Some(action) = self.next_action() {
                if !self.act(action) {
                    return;
                }
            }
            assert!(self.engine.is_waiting(), "the engine stalls outside a wait");
            self.deliver_or_time_out();
        }
    }

    /// The engine's next action; with `clear_often`, the replies taken so far are
    /// cleared first, as a shell may between any two actions.
    fn next_action(&mut self) -> Option<Action> {
        if self.clear_often {
            self.engine.clear_replies();
        }
        self.engine.next_action()
    }

    fn act(&mut self, action: Action) -> bool {
        match action {
            Action::Connect(server) => {
                self.now += Duration::from_micros(1);
                let event = if self.servers[server].dead() {
                    Event::Unavailable {
                        server,
                        down: Down::Connect("connection refused".into()),
                    }
                } else {
                    let fresh = !self.open[server];
                    self.open[server] = true;
                    Event::Connected { server, fresh }
                };
                self.engine.handle(event, self.now);
            }
            Action::Write { server, .. } => {
                self.now += Duration::from_micros(1);
                let event = if !self.open[server] {
                    Event::WriteFailed {
                        server,
                        down: Down::WriteFailed("not connected".into()),
                    }
                } else {
                    let bytes = self.engine.outgoing(server).to_vec();
                    let (reply, closes) = self.servers[server].answer(&bytes, self.redis);
                    let at = self.now + self.servers[server].delay;
                    // As a socket hands them over: in reads of at most a few hundred bytes.
                    if let Some(shared) = &mut self.shared {
                        for expect in self.engine.outgoing_expects(server) {
                            shared[server].0.owe(0, expect);
                        }
                    }
                    for chunk in reply.chunks(self.read_size) {
                        self.inbox[server].push((at, Delivery::Bytes(chunk.to_vec())));
                    }
                    if closes {
                        self.inbox[server].push((at, Delivery::Close));
                    }
                    Event::Written {
                        server,
                        reconnected: false,
                    }
                };
                self.engine.handle(event, self.now);
            }
            Action::Await { deadline } => self.deadline = Some(deadline),
            Action::Fail { server, kind, .. } => {
                self.failures.push((server, kind));
                self.close(server);
            }
            Action::Drop { server, down } => {
                self.drops.push((server, down));
                self.close(server);
            }
            Action::Reply {
                index,
                span,
                silent,
                failovers,
                ..
            } => {
                let bytes = Bytes::copy_from_slice(&self.engine.replies()[span]);
                self.engine.clear_replies();
                let job = self.engine.job(index);
                self.replies.push(SeenReply {
                    job: job.n,
                    expect: job.expect,
                    bytes,
                    silent,
                    failovers,
                });
                self.now += Duration::from_micros(1);
                self.engine.handle(Event::Replied, self.now);
            }
            Action::Sample => {
                let sample = self.engine.take_sample();
                self.server_times
                    .push(self.engine.server_times(sample.index).collect());
                self.samples.push(sample);
            }
            Action::Count(Count::OutOfStep) => self.out_of_step += 1,
            Action::Count(Count::Merged) => self.merged += 1,
            Action::Count(Count::Batch) | Action::Warn(_) => {}
            Action::Idle => return false,
        }
        true
    }

    /// Delivers the earliest bytes the engine waits for, or, if the deadline comes
    /// first, says so.
    fn deliver_or_time_out(&mut self) {
        let next = (0..self.servers.len())
            .filter(|&s| self.engine.wants_read(s) && !self.inbox[s].is_empty())
            .min_by_key(|&s| self.inbox[s][0].0);
        let deadline = self.deadline.expect("an Await before waiting");
        let next_at = next.map_or(deadline, |s| self.inbox[s][0].0.min(deadline));
        if let Some((at, server)) = self.eject_at.filter(|&(at, _)| at <= next_at) {
            self.eject_at = None;
            self.now = self.now.max(at);
            self.health.ejected.lock().unwrap().insert(server);
            self.engine.handle(Event::HealthChanged, self.now);
            return;
        }
        match next {
            Some(server) if self.inbox[server][0].0 <= deadline => {
                let (at, delivery) = self.inbox[server].remove(0);
                self.now = self.now.max(at);
                let result = match delivery {
                    Delivery::Bytes(bytes) => {
                        self.read(server, &bytes, at);
                        // A shared connection is read while it has bytes before its
                        // workers hear of them: what came at once is routed at once.
                        while self.shared.is_some()
                            && matches!(self.inbox[server].first(),
                                        Some((t, Delivery::Bytes(_))) if *t == at)
                        {
                            if let (_, Delivery::Bytes(more)) = self.inbox[server].remove(0) {
                                self.read(server, &more, at);
                            }
                        }
                        Ok(())
                    }
                    Delivery::Close => {
                        self.open[server] = false;
                        Err(Down::Closed)
                    }
                };
                self.engine.handle(Event::Read { server, result }, self.now);
            }
            _ => {
                self.now = self.now.max(deadline);
                self.engine.handle(Event::TimerDue, self.now);
            }
        }
    }
}
