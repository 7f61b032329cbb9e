//! `--share-connections`: the W workers of a loop share one connection per server, as
//! twemproxy's clients share its one server connection. A worker's batch is appended
//! to the connection's outgoing bytes (written once per loop turn for every worker that
//! sent), and the replies, in the order the requests went out, are handed to the
//! workers that sent them ([`Demux`]). Each worker keeps its engine, its batches and
//! its deadlines; what changes is that a request no longer waits for another worker's
//! batch to be answered before it goes out, and the server reads many workers' batches
//! in one read.
//!
//! The engine is told what it would be told on a connection of its own: `Written` once
//! its bytes are taken, `Read` as its replies arrive, a read error when the connection
//! goes (whoever's request made it go), and `fresh` when the connection it gets is not
//! the one it last used.

use std::time::Instant;

use bytes::BytesMut;
use mio::{Registry, Token};

use super::server_link::{Opened, ServerLink};
use crate::demux::{Demux, Framed, Lost};
use crate::down::{Down, OutOfStep};
use crate::health::FailureKind;
use crate::mio_socket::ReadOutcome;
use crate::routing::plan::ServerId;
use crate::worker::WorkerContext;

/// Hands a worker its bytes: `(worker, bytes, the frame when they are one whole reply)`.
pub type Deliver<'a> = dyn FnMut(usize, &[u8], Option<Framed>) + 'a;

/// Something a worker must be told about a shared connection, by the loop (one worker
/// cannot reach another).
#[derive(Debug)]
pub enum Poke {
    /// Replies for it were appended to its engine's read buffer.
    Bytes { worker: usize, server: ServerId },
    /// The connection went with replies owed to it.
    Down {
        worker: usize,
        server: ServerId,
        down: Down,
    },
    /// The connection it waits for opened (Ok) or could not be opened.
    Opened {
        worker: usize,
        server: ServerId,
        result: Result<(), Down>,
    },
}

impl Poke {
    /// The worker (by its index in the loop) to tell.
    pub fn worker(&self) -> usize {
        match *self {
            Poke::Bytes { worker, .. }
            | Poke::Down { worker, .. }
            | Poke::Opened { worker, .. } => worker,
        }
    }
}

/// One server's shared connection.
pub struct SharedConn {
    pub link: ServerLink,
    /// Bytes the workers sent, from `written` on not yet taken by the kernel.
    out: BytesMut,
    written: usize,
    /// Bytes read that are not yet handed to a worker (part of a reply's header).
    inbuf: BytesMut,
    demux: Demux,
    /// Workers (by their index in the loop) waiting for the connection to open.
    waiting: Vec<usize>,
    /// Connections ended so far: a worker that last used an older connection is told
    /// its connection is fresh, and does not close the one that replaced it.
    pub generation: u64,
}

/// The shared connections of one loop, with what its workers must be told.
pub struct SharedConns {
    pub conns: Vec<SharedConn>,
    token_base: usize,
    /// The loop's first worker (its id names the connections in logs).
    worker_id: usize,
    backoff_max: std::time::Duration,
    pub pokes: Vec<Poke>,
    /// Scratch: which workers got bytes in one read.
    got: Vec<bool>,
}

impl SharedConns {
    pub fn new(token_base: usize, worker_id: usize, ctx: &WorkerContext) -> Self {
        let mut conns = SharedConns {
            conns: Vec::new(),
            token_base,
            worker_id,
            backoff_max: ctx.settings.backoff_max,
            pokes: Vec::new(),
            got: Vec::new(),
        };
        conns.grow(ctx.health.len());
        conns
    }

    pub fn grow(&mut self, servers: usize) {
        while self.conns.len() < servers {
            let server = self.conns.len();
            self.conns.push(SharedConn {
                link: ServerLink::new(
                    self.worker_id,
                    server,
                    Token(self.token_base + server),
                    self.backoff_max,
                ),
                out: BytesMut::with_capacity(16 * 1024),
                written: 0,
                inbuf: BytesMut::with_capacity(16 * 1024),
                demux: Demux::default(),
                waiting: Vec::new(),
                generation: 0,
            });
        }
    }

    /// Opens a connection to every server at start.
    pub fn connect_all(&mut self, ctx: &WorkerContext, registry: &Registry) {
        let now = Instant::now();
        for conn in &mut self.conns {
            let _ = conn
                .link
                .open(&ctx.health, registry, now, ctx.settings.connect_timeout);
        }
    }

    /// Whether no reply is owed and nothing waits to be written on `server`'s connection.
    pub fn is_quiet(&self, server: ServerId) -> bool {
        let conn = &self.conns[server];
        conn.demux.is_empty() && conn.out.is_empty()
    }

    /// `worker` sends `bytes`, whose replies are of the kinds `expects`.
    pub fn send(
        &mut self,
        server: ServerId,
        worker: usize,
        bytes: &[u8],
        expects: impl Iterator<Item = cachelab_protocol::Expect>,
    ) {
        let conn = &mut self.conns[server];
        conn.out.extend_from_slice(bytes);
        for expect in expects {
            conn.demux.owe(worker, expect);
        }
    }

    /// `worker` waits for `server`'s connection to open.
    pub fn wait_open(&mut self, server: ServerId, worker: usize) {
        let waiting = &mut self.conns[server].waiting;
        if !waiting.contains(&worker) {
            waiting.push(worker);
        }
    }

    /// `worker` no longer wants its replies on `server`'s connection (one is too large
    /// to hold): they are read past and dropped, and the connection stays for the
    /// others.
    pub fn abandon(&mut self, server: ServerId, worker: usize) {
        self.conns[server].demux.abandon(worker);
    }

    /// Closes `server`'s connection for `worker` (a failure counted against the server
    /// when `kind` is given, and only if there still was a connection); the other
    /// workers owed replies on it are told it went.
    pub fn close(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        worker: Option<usize>,
        kind: Option<FailureKind>,
        down: Down,
    ) {
        let conn = &mut self.conns[server];
        if let Some(w) = worker {
            conn.demux.forget(w);
        }
        let open = conn.link.is_ready() || conn.link.is_opening();
        match kind {
            Some(kind) if open => {
                conn.link
                    .fail(&ctx.health, registry, Instant::now(), kind, down.clone())
            }
            _ => conn
                .link
                .drop_connection(&ctx.health, registry, down.clone()),
        }
        conn.generation += 1;
        conn.out.clear();
        conn.written = 0;
        conn.inbuf.clear();
        for w in conn.demux.clear() {
            self.pokes.push(Poke::Down {
                worker: w,
                server,
                down: down.clone(),
            });
        }
        for w in conn.waiting.drain(..) {
            self.pokes.push(Poke::Opened {
                worker: w,
                server,
                result: Err(down.clone()),
            });
        }
    }

    /// A socket event on `server`'s connection: carries on opening it, writes what
    /// waits, reads and hands out what arrived (`deliver(worker, bytes, framed)`).
    pub fn on_event(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        readable: bool,
        hup: bool,
        deliver: &mut Deliver<'_>,
    ) {
        if server >= self.conns.len() {
            return;
        }
        let link = &mut self.conns[server].link;
        link.note_event(readable, hup);
        if link.is_opening() {
            self.advance_open(ctx, registry, server, Instant::now());
            if !self.conns[server].link.is_ready() {
                return;
            }
        }
        self.flush(ctx, registry, server);
        self.read(ctx, registry, server, deliver);
    }

    /// Carries on opening `server`'s connection; tells the workers waiting for it.
    pub fn advance_open(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        now: Instant,
    ) {
        let conn = &mut self.conns[server];
        let result =
            match conn
                .link
                .advance(&ctx.health, registry, now, ctx.settings.connect_timeout)
            {
                Opened::Pending => return,
                Opened::Ready => Ok(()),
                Opened::Failed(down) => Err(down),
            };
        for worker in conn.waiting.drain(..) {
            self.pokes.push(Poke::Opened {
                worker,
                server,
                result: result.clone(),
            });
        }
    }

    /// Writes what the workers sent on `server`'s connection, as far as the kernel
    /// takes it (the rest when the socket is writable).
    pub fn flush(&mut self, ctx: &WorkerContext, registry: &Registry, server: ServerId) {
        let conn = &mut self.conns[server];
        if conn.out.is_empty() {
            return;
        }
        let Some(socket) = conn.link.socket() else {
            return;
        };
        match socket.write_from(&conn.out, &mut conn.written) {
            Ok(true) => {
                conn.out.clear();
                conn.written = 0;
            }
            Ok(false) => {}
            Err(e) => {
                let down = Down::WriteFailed(e.to_string());
                let kind = Some(FailureKind::Connection);
                self.close(ctx, registry, server, None, kind, down);
            }
        }
    }

    /// Writes every connection with bytes waiting (once per loop turn).
    pub fn flush_all(&mut self, ctx: &WorkerContext, registry: &Registry) {
        for server in 0..self.conns.len() {
            self.flush(ctx, registry, server);
        }
    }

    /// Reads `server`'s connection while it has bytes, handing each reply to its worker.
    fn read(
        &mut self,
        ctx: &WorkerContext,
        registry: &Registry,
        server: ServerId,
        deliver: &mut Deliver<'_>,
    ) {
        loop {
            let conn = &mut self.conns[server];
            if !conn.link.readable {
                break;
            }
            if conn.demux.is_empty() && conn.inbuf.is_empty() {
                // Nothing owed: a read here would only find a close or stray bytes.
                if let Some(end) = conn.link.idle_end() {
                    let down = Down::Idle(end);
                    if end == crate::down::IdleEnd::UnaskedBytes {
                        ctx.counters[self.worker_id].record_out_of_step();
                    }
                    self.close(ctx, registry, server, None, None, down);
                }
                break;
            }
            let Some(socket) = conn.link.socket() else {
                break;
            };
            if conn.inbuf.capacity() - conn.inbuf.len() < 4096 {
                conn.inbuf.reserve(16 * 1024);
            }
            let failed = match socket.read_into(&mut conn.inbuf) {
                Ok(ReadOutcome::Data { drained, .. }) => {
                    conn.link.readable = !drained || conn.link.hup;
                    None
                }
                Ok(ReadOutcome::WouldBlock) => {
                    conn.link.readable = false;
                    None
                }
                Ok(ReadOutcome::Eof) => Some((Some(FailureKind::Connection), Down::Closed)),
                Err(e) => Some((
                    Some(FailureKind::Connection),
                    Down::ReadFailed(e.to_string()),
                )),
            };
            let got = &mut self.got;
            let routed = conn.demux.route(&mut conn.inbuf, |worker, bytes, framed| {
                deliver(worker, bytes, framed);
                if got.len() <= worker {
                    got.resize(worker + 1, false);
                }
                got[worker] = true;
            });
            for (worker, got) in self.got.iter_mut().enumerate() {
                if std::mem::take(got) {
                    self.pokes.push(Poke::Bytes { worker, server });
                }
            }
            let failed = match routed {
                Ok(()) => failed,
                Err(lost) => {
                    ctx.counters[self.worker_id].record_out_of_step();
                    let why = match lost {
                        Lost::Extra => OutOfStep::Extra,
                        Lost::Malformed => OutOfStep::Foreign,
                    };
                    Some((None, Down::OutOfStep(why)))
                }
            };
            if let Some((kind, down)) = failed {
                self.close(ctx, registry, server, None, kind, down);
                break;
            }
        }
    }

    /// Time passed: connections that took too long to open give up.
    pub fn on_time(&mut self, ctx: &WorkerContext, registry: &Registry, now: Instant) {
        for server in 0..self.conns.len() {
            if self.conns[server].link.deadline().is_some_and(|d| now >= d) {
                self.advance_open(ctx, registry, server, now);
            }
        }
    }

    /// The earliest deadline of a connection being opened.
    pub fn deadline(&self) -> Option<Instant> {
        self.conns.iter().filter_map(|c| c.link.deadline()).min()
    }
}
