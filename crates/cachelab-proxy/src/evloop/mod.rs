//! An event loop, the proxy's data path: one thread that owns its clients' sockets, its
//! FCFS queue, its W workers (each an [`Engine`](crate::worker::engine::Engine) with its
//! server connections) and every timer, on one `mio::Poll`. No task per connection or
//! per worker: a request goes from its client's read to its server's write, and its
//! reply from the server's read to the client's write, inside one loop turn each,
//! without a wake-up between threads. `--loops N` runs N of them; the first accepts for
//! all (`accept.rs`).
//!
//! The control plane stays on the tokio runtime (signals, reload, the metrics endpoint,
//! the statistics writer, the health probes); it reaches each loop through [`Control`]:
//! a stop request and a [`mio::Waker`]. Health is shared by the whole process.
//!
//! Chosen over the tokio shell that was removed by measurement (docs/performance.md):
//! the same engine, decoding and reply slots, minus a task wake-up and poll per hop.

use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cachelab_net::backoff::Backoff;
use mio::{Events, Interest, Poll, Token, Waker};
use slab::Slab;
use tracing::warn;

use crate::client::session::NetContext;
use crate::job::Job;
use crate::observed::PoolSlot;
use crate::queue::{QueueLength, RequestQueue};
use crate::stats_units::Seen;
use crate::tls::ListenerTls;
use crate::worker::engine::{Engine, EngineSettings};
use crate::worker::WorkerContext;

mod accept;
mod clients;
mod control;
mod readers;
mod server_link;
mod shared;
mod shared_worker;
mod timers;
mod worker_slot;
mod writes;

use accept::Handed;
pub use accept::{Handoff, LoopListener};
use clients::Client;
pub use control::Control;
use control::{ABORT, DRAIN, RUN};
use shared::SharedConns;
use worker_slot::WorkerSlot;

const WAKER: Token = Token(0);
/// Listener `i` is `Token(LISTENER_BASE + i)`.
const LISTENER_BASE: usize = 1;
/// Client `key` is `Token(CLIENT_BASE + key)`.
const CLIENT_BASE: usize = 1 << 32;
/// The shared connection to server `s` (`--share-connections`) is `Token(SHARED_BASE + s)`.
const SHARED_BASE: usize = 1 << 40;
/// Worker `w`'s connection to server `s`: see [`worker_slot::server_token`].
const SERVER_BASE: usize = 1 << 48;

/// Each listener with the pool its clients use and its TLS configuration, if any.
pub type LoopListeners = Vec<(LoopListener, Arc<PoolSlot>, Option<Arc<ListenerTls>>)>;

/// What the loop runs with.
pub struct LoopSettings {
    pub max_connections: usize,
    pub idle_timeout: Option<Duration>,
    /// `--busy-poll-us`: keep polling without sleeping this long after a read.
    pub busy_poll: Duration,
    pub workers: usize,
    pub pipeline: usize,
    pub max_reply_bytes: usize,
    /// `--share-connections`: the workers share one connection per server.
    pub share_connections: bool,
    /// `--merge-gets`: a batch's memcached retrievals for one server go out in one line.
    pub merge_gets: bool,
}

pub struct EventLoop {
    poll: Poll,
    listeners: LoopListeners,
    clients: Slab<Client>,
    /// Client connection id to slab key, for the replies the workers complete.
    /// Client ids to their keys (ids are the proxy's own: a fast fixed hash).
    by_id: HashMap<u64, usize, foldhash::fast::FixedState>,
    workers: Vec<WorkerSlot>,
    /// Each worker's [`WorkerSlot::next_deadline`], updated after each call of it: a
    /// turn reads these words, not every worker's state.
    deadlines: Vec<Option<Instant>>,
    /// `--share-connections`: the connections the workers share.
    shared: Option<SharedConns>,
    net: Arc<NetContext>,
    ctx: WorkerContext,
    /// The loop's FCFS queue: its clients' requests, for its workers.
    queue: RequestQueue<Job>,
    settings: LoopSettings,
    state: Arc<AtomicU8>,
    health_seen: tokio::sync::watch::Receiver<u64>,
    /// Clients lingering after their close (their deadlines count without an idle
    /// timeout).
    lingering: Vec<usize>,
    /// When the next deadline is due, as of the last poll.
    next_due: Option<Instant>,
    /// Scratch list of clients whose time came.
    due_clients: Vec<usize>,
    /// When the loop last read anything (busy-polling keeps polling after it).
    last_read: Instant,
    /// When the current turn's poll returned.
    turn: Instant,
    accept_paused_until: Option<Instant>,
    /// How long the next failed accept pauses accepting.
    accept_backoff: Backoff,
    /// The first loop accepts for all: the other loops, in turn, get clients from it.
    handoff: Vec<Handoff>,
    /// Which loop gets the next client (0: this one).
    next_loop: usize,
    /// Clients the first loop accepted for this one.
    inbox: Option<std::sync::mpsc::Receiver<Handed>>,
    /// Clients with replies completed by the worker being handed out (see
    /// `after_worker`), kept for its capacity.
    replied: Vec<usize>,
    /// Its number among the loops.
    index: usize,
    /// The statistics readers' requests it answered.
    seen: Seen,
}

impl EventLoop {
    pub fn new(
        listeners: LoopListeners,
        net: Arc<NetContext>,
        ctx: WorkerContext,
        settings: LoopSettings,
        index: usize,
        queue_length: Arc<QueueLength>,
    ) -> io::Result<(EventLoop, Control)> {
        if !settings.busy_poll.is_zero() {
            crate::busy_poll::announce(settings.busy_poll);
        }
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let state = Arc::new(AtomicU8::new(RUN));
        let mut listeners = listeners;
        // Only the first loop accepts; the others keep their copies for the pools and
        // TLS of the clients handed to them.
        let accepting = if index == 0 {
            &mut listeners[..]
        } else {
            &mut []
        };
        for (i, (listener, _, _)) in accepting.iter_mut().enumerate() {
            let token = Token(LISTENER_BASE + i);
            match listener {
                LoopListener::Tcp(l) => poll.registry().register(l, token, Interest::READABLE)?,
                LoopListener::Unix(l, _) => {
                    poll.registry().register(l, token, Interest::READABLE)?
                }
            }
        }
        let engine_settings = EngineSettings {
            pipeline: settings.pipeline,
            max_reply_bytes: settings.max_reply_bytes,
            merge_gets: settings.merge_gets,
        };
        let mut workers: Vec<WorkerSlot> = (0..settings.workers)
            .map(|local| {
                let engine = Engine::new(
                    Arc::clone(&ctx.health),
                    Arc::clone(&ctx.budget),
                    engine_settings,
                );
                let id = index * settings.workers + local;
                WorkerSlot::new(id, local, engine, ctx.health.len())
            })
            .collect();
        let shared = if settings.share_connections {
            let mut shared = SharedConns::new(SHARED_BASE, index * settings.workers, &ctx);
            shared.connect_all(&ctx, poll.registry());
            Some(shared)
        } else {
            for worker in &mut workers {
                worker.connect_all(&ctx, poll.registry());
            }
            None
        };
        let deadlines = workers.iter().map(WorkerSlot::next_deadline).collect();
        let control = Control {
            waker,
            state: Arc::clone(&state),
        };
        Ok((
            EventLoop {
                poll,
                listeners,
                clients: Slab::with_capacity(1024),
                by_id: HashMap::default(),
                workers,
                deadlines,
                shared,
                health_seen: ctx.health.subscribe(),
                net,
                ctx,
                queue: RequestQueue::new(queue_length),
                settings,
                state,
                lingering: Vec::new(),
                next_due: None,
                due_clients: Vec::new(),
                last_read: Instant::now(),
                turn: Instant::now(),
                accept_paused_until: None,
                accept_backoff: Backoff::for_accept(),
                handoff: Vec::new(),
                next_loop: 0,
                inbox: None,
                replied: Vec::new(),
                index,
                seen: Seen::default(),
            },
            control,
        ))
    }

    /// Runs until drained (or aborted), then hands its workers' records over for good.
    pub fn run(mut self) {
        self.serve();
        self.hand_over_windows();
        self.publish_latencies();
        self.ctx.stats.ended(self.index);
    }

    fn serve(&mut self) {
        let mut events = Events::with_capacity(1024);
        let mut draining = false;
        loop {
            let state = self.state.load(Ordering::Acquire);
            if state == ABORT {
                return;
            }
            self.answer_readers();
            if state == DRAIN && !draining {
                draining = true;
                self.start_drain();
            }
            if draining
                && self.clients.is_empty()
                && self.queue.is_empty()
                && self.workers.iter().all(WorkerSlot::is_idle)
            {
                return;
            }
            self.take_handed(draining);
            let timeout = self.poll_timeout();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() != io::ErrorKind::Interrupted {
                    warn!(error = %e, "event loop: poll failed");
                }
                continue;
            }
            // The turn's one clock reading: when its events were found (a request's
            // arrival, a reply's answer) and what its timers compare with, passed to
            // the workers the loop calls.
            self.turn = Instant::now();
            for event in events.iter() {
                let token = event.token().0;
                if token >= SERVER_BASE {
                    let index = token - SERVER_BASE;
                    let (w, s) = (index >> 20, index & ((1 << 20) - 1));
                    let readable = event.is_readable() || event.is_error();
                    if readable {
                        self.note_read();
                    }
                    let registry = self.poll.registry();
                    let hup = event.is_read_closed();
                    self.workers[w].on_event(&self.ctx, registry, s, readable, hup, self.turn);
                    self.after_worker(w);
                } else if token >= SHARED_BASE {
                    let readable = event.is_readable() || event.is_error();
                    if readable {
                        self.note_read();
                    }
                    let hup = event.is_read_closed();
                    if let Some(shared) = &mut self.shared {
                        let registry = self.poll.registry();
                        let s = token - SHARED_BASE;
                        let workers = &mut self.workers;
                        let mut deliver = |w: usize, bytes: &[u8], framed| {
                            workers[w].engine.deliver(s, bytes, framed)
                        };
                        shared.on_event(&self.ctx, registry, s, readable, hup, &mut deliver);
                    }
                    self.deliver_pokes();
                } else if token >= CLIENT_BASE {
                    let key = token - CLIENT_BASE;
                    let readable = event.is_readable() || event.is_error();
                    let hup = event.is_read_closed();
                    if readable {
                        self.note_read();
                    }
                    let writable = event.is_writable() || event.is_write_closed();
                    if let Some(client) = self.clients.get_mut(key) {
                        let registry = self.poll.registry();
                        let (turn, queue) = (self.turn, &mut self.queue);
                        let fate = client.on_event(readable, hup, writable, registry, queue, turn);
                        self.settle_client(key, fate);
                    }
                } else if token >= LISTENER_BASE {
                    self.accept(token - LISTENER_BASE, draining);
                }
            }
            self.on_time();
            if self.health_seen.has_changed().unwrap_or(false) {
                self.health_seen.borrow_and_update();
                for w in 0..self.workers.len() {
                    let shared = self.shared.as_mut();
                    let registry = self.poll.registry();
                    self.workers[w].on_health_change(&self.ctx, registry, shared, self.turn);
                    self.after_worker(w);
                    self.deliver_pokes();
                }
            }
            self.serve_queue();
            if let Some(shared) = &mut self.shared {
                // One write per shared connection for every batch sent this turn.
                shared.flush_all(&self.ctx, self.poll.registry());
                self.deliver_pokes();
            }
        }
    }

    /// Tells the workers what their shared connections reported, until nothing is left
    /// to tell (a worker's answer may close a connection others wait on).
    fn deliver_pokes(&mut self) {
        // Swapped with the connections' list, and given back when it is done, so that
        // neither is allocated again for each read.
        let mut pokes = Vec::new();
        loop {
            let Some(shared) = &mut self.shared else {
                return;
            };
            if shared.pokes.is_empty() {
                if shared.pokes.capacity() < pokes.capacity() {
                    shared.pokes = pokes;
                }
                return;
            }
            std::mem::swap(&mut shared.pokes, &mut pokes);
            for poke in pokes.drain(..) {
                let w = poke.worker();
                let shared = self.shared.as_mut().expect("checked");
                self.workers[w].poked(&self.ctx, self.poll.registry(), shared, poke, self.turn);
                self.after_worker(w);
            }
        }
    }

    /// Hands queued requests to idle workers (requests join the queue when clients'
    /// bytes are decoded, and when a write barrier lifts).
    fn serve_queue(&mut self) {
        loop {
            if self.queue.is_empty() {
                return;
            }
            // The lowest-numbered idle worker serves: the one whose engine, buffers
            // and connections served last, still in the caches. (Taking turns meant
            // each request met a worker last used about W requests ago.) Which worker
            // serves does not change the station: one queue, W servers.
            let Some(w) = self.workers.iter().position(WorkerSlot::is_idle) else {
                return;
            };
            let shared = self.shared.as_mut();
            let registry = self.poll.registry();
            self.workers[w].serve_queue(&self.ctx, registry, shared, &mut self.queue);
            self.after_worker(w);
            self.deliver_pokes();
        }
    }

    /// Hands the replies worker `w` finished to their clients, in the order it finished
    /// them (a client that is gone no longer wants its replies).
    fn after_worker(&mut self, w: usize) {
        let mut completed = std::mem::take(&mut self.workers[w].completed);
        let mut replied = std::mem::take(&mut self.replied);
        let replies = self.workers[w].engine.replies();
        for done in completed.drain(..) {
            let Some(&key) = self.by_id.get(&done.client) else {
                continue;
            };
            let reply = done.reply.map(|span| &replies[span]);
            if self.clients[key].on_reply(done.seq, reply, done.write, &mut self.queue) {
                replied.push(key);
            }
        }
        self.workers[w].engine.clear_replies();
        self.workers[w].completed = completed;
        self.deadlines[w] = self.workers[w].next_deadline();
        // One write per client for the batch's replies.
        for key in replied.drain(..) {
            let fate =
                self.clients[key].after_replies(self.poll.registry(), &mut self.queue, self.turn);
            self.settle_client(key, fate);
        }
        self.replied = replied;
    }

    fn start_drain(&mut self) {
        for (listener, _, _) in &mut self.listeners {
            let _ = match listener {
                LoopListener::Tcp(l) => self.poll.registry().deregister(l),
                LoopListener::Unix(l, _) => self.poll.registry().deregister(l),
            };
        }
        // Dropping them closes the sockets (and removes Unix socket files).
        self.listeners.clear();
        let keys: Vec<usize> = self.clients.iter().map(|(k, _)| k).collect();
        for key in keys {
            let fate = self.clients[key].shut_down(self.poll.registry());
            self.settle_client(key, fate);
        }
    }
}
