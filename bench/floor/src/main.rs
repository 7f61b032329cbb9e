//! cachelab-floor: the least CPU a single-threaded epoll memcached proxy spends per request
//! on this machine, measured beside twemproxy in `make bench`.
//!
//! Why it exists: issue 14's targets compare cachelab-proxy's CPU per request with
//! twemproxy's. Most of both is the kernel's loopback TCP path and the vCPU wake-ups,
//! which no proxy design avoids. This program is that floor: one thread, edge-triggered
//! epoll, one connection to one server that every client's requests share, each loop
//! turn's requests sent in one write, and nothing else. No statistics, timeouts,
//! failover, replication, limits or protocol checks beyond framing. A target that this
//! floor itself misses is out of reach for any proxy of this kind here; the gap between
//! the floor and cachelab-proxy is what our own code and tokio cost.
//!
//! Not a product: it exits when the server closes its connection, and a client that
//! never reads its replies makes its output buffer grow without bound.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use cachelab_floor::frames::{self, ReplyShape, Request};
use cachelab_floor::{read_available, write_some};

#[derive(Parser)]
#[command(about = "A bare epoll memcached proxy: the floor of CPU per request (benchmarks only)")]
struct Args {
    /// Port to listen on, on 127.0.0.1 (0 picks a free one; the address is printed)
    #[arg(short, long, default_value_t = 0)]
    port: u16,
    /// The memcached server, host:port
    #[arg(short, long)]
    server: SocketAddr,
    /// Exit (normally, with status 0) after this many seconds: lets a build instrumented
    /// for profile-guided optimization write its profile, which a signal would not
    #[arg(long, value_name = "SECS")]
    exit_after: Option<f64>,
}

const LISTENER: Token = Token(usize::MAX);
const SERVER: Token = Token(usize::MAX - 1);
const SCRATCH_BYTES: usize = 64 * 1024;
const BAD_DATA_CHUNK: &[u8] = b"CLIENT_ERROR bad data chunk\r\n";

fn main() -> Result<()> {
    let args = Args::parse();
    let mut poll = Poll::new().context("creating the epoll instance")?;
    let mut listener = TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], args.port)))
        .context("binding the listening socket")?;
    let server = std::net::TcpStream::connect(args.server)
        .with_context(|| format!("connecting to {}", args.server))?;
    server.set_nodelay(true)?;
    server.set_nonblocking(true)?;
    let mut server = TcpStream::from_std(server);
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    poll.registry()
        .register(&mut server, SERVER, Interest::READABLE | Interest::WRITABLE)?;
    println!("listening on {}", listener.local_addr()?);
    io::stdout().flush()?;
    let mut floor = Floor::new(server);
    let mut events = Events::with_capacity(1024);
    let deadline = args
        .exit_after
        .map(|secs| Instant::now() + Duration::from_secs_f64(secs));
    loop {
        let timeout = match deadline.map(|at| at.saturating_duration_since(Instant::now())) {
            Some(left) if left.is_zero() => return Ok(()),
            left => left,
        };
        match poll.poll(&mut events, timeout) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => other.context("waiting for events")?,
        }
        for event in &events {
            match event.token() {
                LISTENER => floor.accept(&listener, &poll)?,
                SERVER if event.is_readable() => floor.read_server()?,
                SERVER => {}
                Token(client) => {
                    if event.is_readable() || event.is_read_closed() {
                        floor.read_client(client, &poll);
                    }
                    if event.is_writable() {
                        floor.mark_ready(client);
                    }
                }
            }
        }
        floor.flush(&poll)?;
    }
}

struct Client {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    open: bool,
    /// Replies still owed to it: its slot is reused only when none are left.
    owed: usize,
    ready: bool,
}

/// A reply owed, in the order requests were forwarded (one server connection: FIFO).
enum Owed {
    Server {
        client: usize,
        shape: ReplyShape,
    },
    /// Answered here, delivered when every earlier reply has been.
    Local {
        client: usize,
        reply: &'static [u8],
    },
}

struct Floor {
    clients: Vec<Option<Client>>,
    free: Vec<usize>,
    owed: VecDeque<Owed>,
    server: TcpStream,
    to_server: Vec<u8>,
    from_server: Vec<u8>,
    ready: Vec<usize>,
    scratch: Vec<u8>,
}

impl Floor {
    fn new(server: TcpStream) -> Self {
        Floor {
            clients: Vec::new(),
            free: Vec::new(),
            owed: VecDeque::new(),
            server,
            to_server: Vec::new(),
            from_server: Vec::new(),
            ready: Vec::new(),
            scratch: vec![0; SCRATCH_BYTES],
        }
    }

    fn accept(&mut self, listener: &TcpListener, poll: &Poll) -> Result<()> {
        loop {
            let (mut stream, _) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // Out of descriptors or a connection reset before accept: not ours to end.
                Err(e) => {
                    eprintln!("cachelab-floor: accept: {e}");
                    return Ok(());
                }
            };
            stream.set_nodelay(true)?;
            let slot = self.free.pop().unwrap_or_else(|| {
                self.clients.push(None);
                self.clients.len() - 1
            });
            poll.registry().register(
                &mut stream,
                Token(slot),
                Interest::READABLE | Interest::WRITABLE,
            )?;
            self.clients[slot] = Some(Client {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                open: true,
                owed: 0,
                ready: false,
            });
        }
    }

    /// Reads everything the client sent and forwards each complete request.
    fn read_client(&mut self, slot: usize, poll: &Poll) {
        let Some(Some(client)) = self.clients.get_mut(slot) else {
            return;
        };
        if !client.open {
            return;
        }
        // A read error ends the connection as its close does.
        let closed = read_available(&mut client.stream, &mut self.scratch, &mut client.input)
            .unwrap_or(true);
        let mut at = 0;
        while let Some(request) = frames::request(&client.input[at..]) {
            match request {
                Request::Forward { len, shape } => {
                    self.to_server
                        .extend_from_slice(&client.input[at..at + len]);
                    self.owed.push_back(Owed::Server {
                        client: slot,
                        shape,
                    });
                    at += len;
                }
                Request::Bad { len } => {
                    self.owed.push_back(Owed::Local {
                        client: slot,
                        reply: BAD_DATA_CHUNK,
                    });
                    at += len;
                }
            }
            client.owed += 1;
        }
        client.input.drain(..at);
        if closed {
            self.close(slot, poll);
        }
        self.deliver_local();
    }

    fn close(&mut self, slot: usize, poll: &Poll) {
        if let Some(client) = self.clients[slot].as_mut() {
            if client.open {
                client.open = false;
                // Deregistering fails only for a descriptor epoll no longer holds.
                let _ = poll.registry().deregister(&mut client.stream);
                client.input = Vec::new();
                client.output = Vec::new();
            }
        }
        self.release_if_settled(slot);
    }

    /// Frees a closed client's slot once no reply is owed to it any more.
    fn release_if_settled(&mut self, slot: usize) {
        if self.clients[slot]
            .as_ref()
            .is_some_and(|c| !c.open && c.owed == 0)
        {
            self.clients[slot] = None;
            self.free.push(slot);
        }
    }

    fn mark_ready(&mut self, slot: usize) {
        if let Some(Some(client)) = self.clients.get_mut(slot) {
            if !client.ready && !client.output.is_empty() {
                client.ready = true;
                self.ready.push(slot);
            }
        }
    }

    /// Hands `reply` to the client it is owed to (dropped if that client has gone).
    fn deliver(&mut self, slot: usize, reply: &[u8]) {
        let Some(client) = self.clients[slot].as_mut() else {
            return;
        };
        client.owed -= 1;
        if client.open {
            client.output.extend_from_slice(reply);
            self.mark_ready(slot);
        } else {
            self.release_if_settled(slot);
        }
    }

    /// Delivers the local answers at the head of the queue (their turn has come).
    fn deliver_local(&mut self) {
        while let Some(&Owed::Local { client, reply }) = self.owed.front() {
            self.owed.pop_front();
            self.deliver(client, reply);
        }
    }

    /// Reads what the server sent and delivers every complete reply, in order.
    fn read_server(&mut self) -> Result<()> {
        let closed = read_available(&mut self.server, &mut self.scratch, &mut self.from_server)
            .context("reading from the server")?;
        if closed {
            bail!("the server closed its connection");
        }
        let mut at = 0;
        while let Some(&Owed::Server { client, shape }) = self.owed.front() {
            let Some(len) = frames::reply(&self.from_server[at..], shape) else {
                break;
            };
            self.owed.pop_front();
            let reply = std::mem::take(&mut self.from_server);
            self.deliver(client, &reply[at..at + len]);
            self.from_server = reply;
            at += len;
            self.deliver_local();
        }
        self.from_server.drain(..at);
        Ok(())
    }

    /// The loop turn's one write to the server, then each client's replies.
    fn flush(&mut self, poll: &Poll) -> Result<()> {
        let sent =
            write_some(&mut self.server, &self.to_server).context("writing to the server")?;
        self.to_server.drain(..sent);
        let ready = std::mem::take(&mut self.ready);
        for &slot in &ready {
            let Some(client) = self.clients[slot].as_mut() else {
                continue;
            };
            client.ready = false;
            match write_some(&mut client.stream, &client.output) {
                Ok(n) => {
                    client.output.drain(..n);
                }
                Err(_) => self.close(slot, poll),
            }
        }
        self.ready = ready;
        self.ready.clear();
        Ok(())
    }
}
