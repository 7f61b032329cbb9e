//! cachelab-floor-load: the least CPU a single-threaded epoll client spends per request
//! against memcached on this machine, measured beside memaslap in `make bench` (L4).
//!
//! Closed loop: every connection sends one request, waits for its reply and sends the
//! next, in runs of S sets then G gets over a key range. One thread, edge-triggered
//! epoll, one `send` and one `recv` per request. No timing, histograms, rate control or
//! checks beyond finding where a reply ends: whatever CPU it spends, any load generator
//! of its kind spends at least as much here. Prints `requests N seconds S` at the end.

use std::io::ErrorKind;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use cachelab_floor::frames::{self, ReplyShape};
use cachelab_floor::{read_available, write_some};
use clap::Parser;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

#[derive(Parser)]
#[command(
    about = "A bare closed-loop memcached client: the floor of CPU per request (benchmarks only)"
)]
struct Args {
    /// The memcached server, host:port
    #[arg(short, long)]
    server: SocketAddr,
    /// Connections
    #[arg(short, long, default_value_t = 50)]
    connections: usize,
    /// Seconds to run
    #[arg(short, long, default_value_t = 5.0)]
    time: f64,
    /// Value size in bytes
    #[arg(short = 'd', long, default_value_t = 32)]
    data_size: usize,
    /// Sets then gets, as S:G
    #[arg(long, default_value = "1:9", value_parser = parse_ratio)]
    ratio: (u32, u32),
    /// Keys are key-0 .. key-(N-1)
    #[arg(long, default_value_t = 10_000)]
    keys: u64,
}

fn parse_ratio(s: &str) -> Result<(u32, u32), String> {
    let (sets, gets) = s.split_once(':').ok_or("expected S:G, e.g. 1:9")?;
    let parse = |n: &str| n.parse::<u32>().map_err(|e| format!("{n:?}: {e}"));
    let ratio = (parse(sets)?, parse(gets)?);
    if ratio == (0, 0) {
        return Err("S:G must not be 0:0".into());
    }
    Ok(ratio)
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    shape: ReplyShape,
    sent: u64,
}

/// Builds the requests: the mix's position and the key come from one counter per
/// connection, so the load is the same from run to run.
struct Requests {
    ratio: (u32, u32),
    value: Vec<u8>,
    keys: u64,
    state: u64,
}

impl Requests {
    fn next(&mut self, sent: u64, out: &mut Vec<u8>) -> ReplyShape {
        // xorshift64: a spread of keys without a dependency
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        let key = self.state % self.keys;
        let (sets, gets) = self.ratio;
        let is_set = sent % u64::from(sets + gets) < u64::from(sets);
        if is_set {
            out.extend_from_slice(format!("set key-{key} 0 0 {}\r\n", self.value.len()).as_bytes());
            out.extend_from_slice(&self.value);
            out.extend_from_slice(b"\r\n");
            ReplyShape::Line
        } else {
            out.extend_from_slice(format!("get key-{key}\r\n").as_bytes());
            ReplyShape::Values
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let mut poll = Poll::new().context("creating the epoll instance")?;
    let mut requests = Requests {
        ratio: args.ratio,
        value: vec![b'x'; args.data_size],
        keys: args.keys.max(1),
        state: 0x9e37_79b9_7f4a_7c15,
    };
    let mut conns = Vec::with_capacity(args.connections);
    for i in 0..args.connections {
        let stream = std::net::TcpStream::connect(args.server)
            .with_context(|| format!("connecting to {}", args.server))?;
        stream.set_nodelay(true)?;
        stream.set_nonblocking(true)?;
        let mut stream = TcpStream::from_std(stream);
        poll.registry().register(
            &mut stream,
            Token(i),
            Interest::READABLE | Interest::WRITABLE,
        )?;
        let mut conn = Conn {
            stream,
            input: Vec::with_capacity(4096),
            output: Vec::with_capacity(4096),
            shape: ReplyShape::Line,
            sent: 0,
        };
        conn.shape = requests.next(0, &mut conn.output);
        send(&mut conn)?;
        conns.push(conn);
    }
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(args.time);
    let mut answered: u64 = 0;
    let mut events = Events::with_capacity(1024);
    let mut scratch = vec![0u8; 64 * 1024];
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match poll.poll(&mut events, Some(left)) {
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            other => other.context("waiting for events")?,
        }
        for event in &events {
            let conn = &mut conns[event.token().0];
            if event.is_writable() {
                send(conn)?;
            }
            if !event.is_readable() {
                continue;
            }
            if read_available(&mut conn.stream, &mut scratch, &mut conn.input)
                .context("reading a reply")?
            {
                bail!("the server closed a connection");
            }
            if let Some(len) = frames::reply(&conn.input, conn.shape) {
                conn.input.drain(..len);
                answered += 1;
                conn.sent += 1;
                conn.shape = requests.next(conn.sent, &mut conn.output);
                send(conn)?;
            }
        }
    }
    println!(
        "requests {answered} seconds {:.3}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Writes what the connection has to send, as far as the socket takes it now.
fn send(conn: &mut Conn) -> Result<()> {
    let sent = write_some(&mut conn.stream, &conn.output).context("sending a request")?;
    conn.output.drain(..sent);
    Ok(())
}
