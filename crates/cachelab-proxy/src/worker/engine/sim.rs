//! Simulated servers and simulated time for the engine's tests: a small in-memory
//! memcached and Redis that answer the bytes the engine composes, and can be slow,
//! refuse connections, die in the middle of a batch, stay silent or answer out of step.
//! A harness carries out the engine's actions against them, as the shell does against
//! sockets, with a clock that moves only when the harness says so.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use cachelab_protocol::resp::{parse_command, RespLimits};
use cachelab_protocol::{parse_request, Limits, Request as Parsed, StoreOp};

use super::{Action, Count, Engine, EngineSettings, Event, Sample, ServerHealth};
use crate::budget::MemoryBudget;
use crate::decode::{Class, Decoder, Step};
use crate::down::Down;
use crate::endpoint::Endpoint;
use crate::health::FailureKind;
use crate::job::Request;
use crate::resp_decode::{RespDecoder, RespStep};
use crate::routing::hash::Hash;
use crate::routing::plan::{Alive, Mode, Pool, PoolServer, ReadPolicy, ServerId};
use crate::routing::ring::{Distribution, Member};
use crate::routing::Protocol;

/// The ejections a test sets.
pub(super) struct FakeHealth {
    addrs: Vec<Endpoint>,
    pub(super) ejected: Mutex<HashSet<ServerId>>,
}

impl FakeHealth {
    pub(super) fn new(servers: usize) -> FakeHealth {
        FakeHealth {
            addrs: (0..servers).map(addr).collect(),
            ejected: Mutex::new(HashSet::new()),
        }
    }
}

fn addr(server: ServerId) -> Endpoint {
    let a: std::net::SocketAddr = format!("127.0.0.1:{}", 21000 + server).parse().unwrap();
    a.into()
}

impl Alive for FakeHealth {
    fn is_ejected(&self, server: ServerId) -> bool {
        self.ejected.lock().unwrap().contains(&server)
    }
}

impl ServerHealth for FakeHealth {
    fn servers(&self) -> usize {
        self.addrs.len()
    }
    fn addr(&self, server: ServerId) -> &Endpoint {
        &self.addrs[server]
    }
    fn report_success(&self, _: ServerId) {}
}

/// A request of a test, numbered in the order it was taken.
pub(super) struct TestJob {
    pub(super) n: usize,
    pub(super) request: Request,
}

impl std::ops::Deref for TestJob {
    type Target = Request;
    fn deref(&self) -> &Request {
        &self.request
    }
}

/// A pool over servers 0..n: `replicas` None for replicate (every server), else shard.
pub(super) fn pool(n: usize, replicas: Option<usize>, protocol: Protocol) -> Arc<Pool> {
    let servers = (0..n)
        .map(|i| PoolServer {
            id: i,
            addr: addr(i),
            member: Member {
                name: addr(i).to_string(),
                weight: 1,
            },
        })
        .collect();
    let mode = match replicas {
        None => Mode::Replicate {
            split_multiget: false,
        },
        Some(replicas) => Mode::Shard { replicas },
    };
    let mut pool = Pool::new(
        "sim".into(),
        servers,
        mode,
        Hash::Fnv1a64,
        None,
        Distribution::Ketama,
        false,
        ReadPolicy::RoundRobin,
        Duration::from_millis(100),
    );
    pool.protocol = protocol;
    Arc::new(pool)
}

/// A request as the net layer decodes `bytes` for `pool` (one whole request).
pub(super) fn request(pool: &Arc<Pool>, bytes: &[u8], arrival: Instant) -> Request {
    let frame = Bytes::copy_from_slice(bytes);
    if pool.protocol == Protocol::Redis {
        let step = RespDecoder::default().step(bytes, &Limits::default(), pool);
        let RespStep::Forward { len, forward } = step else {
            panic!("not a forwarded command: {step:?}");
        };
        assert_eq!(len, bytes.len());
        let access = forward.route.access();
        return Request {
            frame,
            spans: forward.args,
            rr: pool.assign(access, forward.route.assigned_keys()),
            pool: Arc::clone(pool),
            access,
            op: forward.op,
            expect: cachelab_protocol::Expect::Resp,
            keys: forward.keys,
            noreply: false,
            quiet: None,
            arrival,
            enqueued: arrival + Duration::from_micros(1),
            redis: Some(forward.route),
        };
    }
    let Step::Request {
        len,
        class: Class::Forward(f),
        spans,
    } = Decoder::default().step(bytes, &Limits::default())
    else {
        panic!("not a forwarded request");
    };
    assert_eq!(len, bytes.len());
    assert!(
        !f.noreply && f.quiet.is_none(),
        "the net layer strips these"
    );
    Request {
        frame,
        spans,
        rr: pool.assign(f.access, f.keys as usize),
        pool: Arc::clone(pool),
        access: f.access,
        op: f.op,
        expect: f.expect,
        keys: f.keys,
        noreply: false,
        quiet: None,
        arrival,
        enqueued: arrival + Duration::from_micros(1),
        redis: None,
    }
}

/// How a simulated server misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Behaviour {
    Normal,
    /// Refuses connections.
    Refuses,
    /// Answers this many requests, then closes its connection (and refuses new ones).
    DiesAfter(usize),
    /// Never answers.
    Silent,
    /// Answers `ERROR` to everything (a server that reads the requests differently).
    Garbage,
    /// Answers every request twice.
    Twice,
    /// Answers stores with NOT_STORED (and Redis SET with an error).
    RefusesWrites,
}

/// One simulated server: its data, its delay and its behaviour.
pub(super) struct SimServer {
    pub(super) data: HashMap<Vec<u8>, Vec<u8>>,
    pub(super) delay: Duration,
    pub(super) behaviour: Behaviour,
    pub(super) answered: usize,
    /// Every request it received, as its command name and first key.
    pub(super) log: Vec<(String, Vec<u8>)>,
    /// Bytes of a request not complete yet.
    pending: Vec<u8>,
}

impl SimServer {
    pub(super) fn new(delay: Duration, behaviour: Behaviour) -> SimServer {
        SimServer {
            data: HashMap::new(),
            delay,
            behaviour,
            answered: 0,
            log: Vec::new(),
            pending: Vec::new(),
        }
    }

    fn dead(&self) -> bool {
        match self.behaviour {
            Behaviour::Refuses => true,
            Behaviour::DiesAfter(n) => self.answered >= n,
            _ => false,
        }
    }

    /// Answers the complete requests of `bytes`; None once it closed the connection.
    fn answer(&mut self, bytes: &[u8], redis: bool) -> (Vec<u8>, bool) {
        self.pending.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            if self.dead() {
                self.pending.clear();
                return (out, true);
            }
            let used = if redis {
                self.answer_resp(&mut out)
            } else {
                self.answer_memcached(&mut out)
            };
            let Some(used) = used else { break };
            self.pending.drain(..used);
            self.answered += 1;
        }
        (out, false)
    }

    fn answer_memcached(&mut self, out: &mut Vec<u8>) -> Option<usize> {
        let (request, used) = parse_request(&self.pending, &Limits::default()).ok()?;
        let mut reply = Vec::new();
        match request {
            Parsed::Get(get) => {
                let keys: Vec<&[u8]> = get.keys.iter().collect();
                self.log.push(("get".into(), keys[0].to_vec()));
                for key in keys {
                    if let Some(v) = self.data.get(key) {
                        reply.extend_from_slice(b"VALUE ");
                        reply.extend_from_slice(key);
                        reply.extend_from_slice(format!(" 0 {}\r\n", v.len()).as_bytes());
                        reply.extend_from_slice(v);
                        reply.extend_from_slice(b"\r\n");
                    }
                }
                reply.extend_from_slice(b"END\r\n");
            }
            Parsed::Store(store) => {
                self.log.push(("set".into(), store.key.to_vec()));
                if self.behaviour == Behaviour::RefusesWrites || store.op != StoreOp::Set {
                    reply.extend_from_slice(b"NOT_STORED\r\n");
                } else {
                    self.data.insert(store.key.to_vec(), store.data.to_vec());
                    reply.extend_from_slice(b"STORED\r\n");
                }
            }
            Parsed::Delete(delete) => {
                self.log.push(("delete".into(), delete.key.to_vec()));
                let found = self.data.remove(delete.key).is_some();
                reply.extend_from_slice(if found {
                    b"DELETED\r\n"
                } else {
                    b"NOT_FOUND\r\n"
                });
            }
            _ => reply.extend_from_slice(b"ERROR\r\n"),
        }
        self.put(out, &reply, b"ERROR\r\n");
        Some(used)
    }

    fn answer_resp(&mut self, out: &mut Vec<u8>) -> Option<usize> {
        let (command, used) = parse_command(&self.pending, &RespLimits::default()).ok()?;
        let name = String::from_utf8_lossy(command.name().unwrap_or(b"")).to_ascii_uppercase();
        let key = command.arg(1).unwrap_or(b"").to_vec();
        self.log.push((name.to_ascii_lowercase(), key.clone()));
        let bulk = |v: Option<&Vec<u8>>| match v {
            Some(v) => {
                let mut b = format!("${}\r\n", v.len()).into_bytes();
                b.extend_from_slice(v);
                b.extend_from_slice(b"\r\n");
                b
            }
            None => b"$-1\r\n".to_vec(),
        };
        let reply = match name.as_str() {
            "GET" => bulk(self.data.get(&key)),
            "SET" if self.behaviour == Behaviour::RefusesWrites => b"-ERR read only\r\n".to_vec(),
            "SET" => {
                let value = command.arg(2).unwrap_or(b"").to_vec();
                self.data.insert(key, value);
                b"+OK\r\n".to_vec()
            }
            "MGET" => {
                let args = &command.args()[1..];
                let mut r = format!("*{}\r\n", args.len()).into_bytes();
                for k in args {
                    r.extend(bulk(self.data.get(&k[..])));
                }
                r
            }
            "DEL" => {
                let n = command.args()[1..]
                    .iter()
                    .filter(|k| self.data.remove(&k[..]).is_some())
                    .count();
                format!(":{n}\r\n").into_bytes()
            }
            _ => b"-ERR unknown command\r\n".to_vec(),
        };
        self.put(out, &reply, b"-ERR garbage\r\n");
        Some(used)
    }

    fn put(&self, out: &mut Vec<u8>, reply: &[u8], garbage: &[u8]) {
        match self.behaviour {
            Behaviour::Garbage => out.extend_from_slice(garbage),
            Behaviour::Silent => {}
            Behaviour::Twice => {
                out.extend_from_slice(reply);
                out.extend_from_slice(reply);
            }
            _ => out.extend_from_slice(reply),
        }
    }
}

/// The most bytes one simulated read delivers.
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
    deadline: Option<Instant>,
    pub(super) replies: Vec<SeenReply>,
    pub(super) samples: Vec<Sample>,
    /// Per sample, its servers' (server, sent, answered).
    pub(super) server_times: Vec<Vec<(ServerId, Instant, Instant)>>,
    pub(super) failures: Vec<(ServerId, FailureKind)>,
    pub(super) drops: Vec<(ServerId, Down)>,
    pub(super) out_of_step: u64,
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
            deadline: None,
            replies: Vec::new(),
            samples: Vec::new(),
            server_times: Vec::new(),
            failures: Vec::new(),
            drops: Vec::new(),
            out_of_step: 0,
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

    fn close(&mut self, server: ServerId) {
        self.open[server] = false;
        self.inbox[server].clear();
    }

    fn run(&mut self) {
        let mut steps = 0;
        loop {
            steps += 1;
            assert!(steps < 100_000, "the engine does not finish its batch");
            while let Some(action) = self.engine.next_action() {
                if !self.act(action) {
                    return;
                }
            }
            assert!(self.engine.is_waiting(), "the engine stalls outside a wait");
            self.deliver_or_time_out();
        }
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
                    for chunk in reply.chunks(READ_SIZE) {
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
                bytes,
                silent,
                failovers,
                ..
            } => {
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
            Action::Sample(sample) => {
                self.server_times
                    .push(self.engine.server_times(sample.index).collect());
                self.samples.push(sample);
            }
            Action::Count(Count::OutOfStep) => self.out_of_step += 1,
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
                        self.engine.read_buf(server).extend_from_slice(&bytes);
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
