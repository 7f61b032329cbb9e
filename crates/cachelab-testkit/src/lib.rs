//! Test harness shared by the workspace's integration tests: real memcached and Redis
//! servers and the proxy binary on free loopback ports, and blocking clients that read
//! replies with the protocol crate's parsers. Every process is killed on drop.

pub mod capture;
pub mod module_shape;
pub mod nutcracker;
pub mod pki;
pub mod server_commands;
pub mod wire;

pub use nutcracker::Nutcracker;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use cachelab_protocol::resp::compose_command;
use cachelab_protocol::{parse_reply, parse_resp_reply, Expect, ReplyError, RespValue};

const START_TIMEOUT: Duration = Duration::from_secs(10);
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A temporary directory named `cachelab...`, removed on drop.
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap()
}

/// A port that was free a moment ago on 127.0.0.1.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Sends `request` on a fresh connection and returns the reply once `reply_len` finds it
/// whole; None on any failure (refused, reset, closed early, malformed). For start-up
/// probes, which may reach nothing yet, or a listener that is not the server: another
/// test's `free_port` can hold the port for a moment, and while nothing listens a connect
/// can be given the target port as its source and connect to itself.
fn try_exchange(
    addr: SocketAddr,
    request: &[u8],
    reply_len: impl Fn(&[u8]) -> Result<usize, ReplyError>,
) -> Option<Vec<u8>> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    if stream.local_addr().ok()? == addr {
        return None;
    }
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream.write_all(request).ok()?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    loop {
        match reply_len(&buf) {
            Ok(len) => return Some(buf[..len].to_vec()),
            Err(ReplyError::Incomplete) => {}
            Err(_) => return None,
        }
        match stream.read(&mut chunk).ok()? {
            0 => return None,
            n => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Waits until the server on `addr` reports the pid of `child` (`pid_at` asks it); false
/// if `child` exits, another process answers there, or the start-up time passes.
fn wait_for_own_server(
    child: &mut Child,
    addr: SocketAddr,
    pid_at: impl Fn(SocketAddr) -> Option<u32>,
) -> bool {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return false;
        }
        match pid_at(addr) {
            Some(pid) => return pid == child.id(),
            None => thread::sleep(Duration::from_millis(20)),
        }
    }
    false
}

/// The value of `name` in `name<sep>value` lines.
fn field<'a>(text: &'a str, name: &str, sep: char) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(sep))
}

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs the tests that hold it one at a time. A test that kills a server and restarts it
/// on the same port needs that port to stay free meanwhile, and a parallel test's
/// `free_port` could hand it out (its memcached would then answer for the dead one):
/// every test of a binary with such a test takes this first.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A memcached process on a loopback port, killed on drop.
pub struct Memcached {
    pub addr: SocketAddr,
    child: Option<Child>,
}

impl Memcached {
    pub fn start() -> Memcached {
        for _ in 0..5 {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let mut m = Memcached { addr, child: None };
            if m.spawn() {
                return m;
            }
        }
        panic!("memcached did not start (is it installed? `make deps` installs it)");
    }

    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new("memcached");
        cmd.args(["-l", "127.0.0.1", "-p", &self.addr.port().to_string()])
            .args(["-U", "0", "-t", "1", "-m", "64"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // memcached refuses to run as root unless told which user to be.
        if unsafe { libc::geteuid() } == 0 {
            cmd.args(["-u", "root"]);
        }
        let mut child = cmd.spawn().expect("cannot run memcached");
        // Another test may have been handed the same free port a moment earlier: then our
        // memcached could not bind and the one accepting is not ours. Its pid tells.
        let ours = wait_for_own_server(&mut child, self.addr, |addr| {
            let reply = try_exchange(addr, b"stats\r\n", |buf| {
                parse_reply(buf, Expect::Stats).map(|(_, len)| len)
            })?;
            field(&String::from_utf8(reply).ok()?, "STAT pid", ' ')?
                .trim_end()
                .parse()
                .ok()
        });
        self.child = Some(child);
        if !ours {
            self.stop();
        }
        ours
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The memcached process's PID (to stop it with SIGSTOP, say).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("memcached is running").id()
    }

    /// Sends a signal to the memcached process (SIGSTOP and SIGCONT for a stall).
    pub fn signal(&self, signal: i32) {
        let pid = self.pid() as libc::pid_t;
        assert_eq!(
            unsafe { libc::kill(pid, signal) },
            0,
            "kill({pid}, {signal})"
        );
    }

    /// Starts a fresh memcached on the same port (empty, statistics reset).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.spawn() {
            assert!(Instant::now() < deadline, "memcached did not restart");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// One counter from memcached's own `stats`.
    pub fn stat(&self, name: &str) -> u64 {
        let mut client = Client::connect(self.addr);
        let reply = client.request(b"stats\r\n", Expect::Stats);
        let text = String::from_utf8(reply).unwrap();
        field(&text, &format!("STAT {name}"), ' ')
            .unwrap_or_else(|| panic!("memcached has no stat {name}"))
            .parse()
            .unwrap()
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A redis-server process on a loopback port, without persistence, killed on drop.
pub struct Redis {
    pub addr: SocketAddr,
    child: Option<Child>,
}

impl Redis {
    pub fn start() -> Redis {
        for _ in 0..5 {
            let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
            let mut r = Redis { addr, child: None };
            if r.spawn() {
                return r;
            }
        }
        panic!("redis-server did not start (is it installed? `make deps` installs it)");
    }

    fn spawn(&mut self) -> bool {
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &self.addr.port().to_string(),
                "--bind",
                "127.0.0.1",
            ])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot run redis-server");
        // As for memcached: make sure the server accepting on the port is ours.
        let ours = wait_for_own_server(&mut child, self.addr, |addr| {
            let mut request = Vec::new();
            compose_command(&mut request, &[b"INFO", b"server"]);
            let reply = try_exchange(addr, &request, |buf| {
                parse_resp_reply(buf).map(|(_, len)| len)
            })?;
            let (reply, _) = parse_resp_reply(&reply).ok()?;
            let RespValue::Bulk(Some(text)) = reply.to_value() else {
                return None;
            };
            field(&String::from_utf8(text).ok()?, "process_id", ':')?
                .trim_end()
                .parse()
                .ok()
        });
        self.child = Some(child);
        if !ours {
            self.stop();
        }
        ours
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The redis-server process's PID.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("redis-server is running").id()
    }

    /// Starts a fresh redis-server on the same port (empty, statistics reset).
    pub fn restart(&mut self) {
        self.stop();
        let deadline = Instant::now() + START_TIMEOUT;
        while !self.spawn() {
            assert!(Instant::now() < deadline, "redis-server did not restart");
            thread::sleep(Duration::from_millis(100));
        }
    }

    /// Sends one command on a fresh connection and returns the reply.
    pub fn command(&self, args: &[&str]) -> RespValue {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        let mut out = Vec::new();
        compose_command(&mut out, &args);
        stream.write_all(&out).unwrap();
        let mut buf = Vec::new();
        loop {
            match parse_resp_reply(&buf) {
                Ok((reply, _)) => return reply.to_value(),
                Err(ReplyError::Incomplete) => {}
                Err(e) => panic!("bad reply {e}: {:?}", String::from_utf8_lossy(&buf)),
            }
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).expect("reply timed out");
            assert!(n > 0, "redis closed the connection");
            buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends the commands on one connection (`SELECT` then a read, say) and returns
    /// every reply, in order.
    pub fn session(&self, commands: &[&[&str]]) -> Vec<RespValue> {
        let mut stream = TcpStream::connect(self.addr).unwrap();
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        let mut out = Vec::new();
        for args in commands {
            let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
            compose_command(&mut out, &args);
        }
        stream.write_all(&out).unwrap();
        let mut buf = Vec::new();
        let mut replies = Vec::new();
        while replies.len() < commands.len() {
            match parse_resp_reply(&buf) {
                Ok((reply, len)) => {
                    replies.push(reply.to_value());
                    buf.drain(..len);
                    continue;
                }
                Err(ReplyError::Incomplete) => {}
                Err(e) => panic!("bad reply {e}: {:?}", String::from_utf8_lossy(&buf)),
            }
            let mut chunk = [0u8; 65536];
            let n = stream.read(&mut chunk).expect("reply timed out");
            assert!(n > 0, "redis closed the connection");
            buf.extend_from_slice(&chunk[..n]);
        }
        replies
    }

    /// One `name:value` field of `INFO <section>` (e.g. `keyspace_hits` in `stats`, or
    /// `cmdstat_get` in `commandstats`, whose value is `calls=N,...`).
    pub fn info(&self, section: &str, name: &str) -> String {
        let RespValue::Bulk(Some(text)) = self.command(&["INFO", section]) else {
            panic!("INFO did not answer with a bulk string");
        };
        let text = String::from_utf8(text).unwrap();
        field(&text, name, ':').unwrap_or_default().to_owned()
    }

    /// How many times a command ran, from `INFO commandstats` (0 if never).
    pub fn calls(&self, command: &str) -> u64 {
        let field = self.info("commandstats", &format!("cmdstat_{command}"));
        field
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .map_or(0, |n| n.parse().unwrap())
    }

    pub fn dbsize(&self) -> i64 {
        match self.command(&["DBSIZE"]) {
            RespValue::Integer(n) => n,
            other => panic!("DBSIZE answered {other:?}"),
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.stop();
    }
}

pub fn start_servers(n: usize) -> Vec<Memcached> {
    (0..n).map(|_| Memcached::start()).collect()
}

/// The cachelab-proxy binary, killed on drop unless stopped.
pub struct Proxy {
    pub addr: SocketAddr,
    pub child: Child,
    pub dir: tempfile::TempDir,
    stdout: Option<BufReader<std::process::ChildStdout>>,
}

impl Proxy {
    /// Starts `binary` (a cachelab-proxy) in front of `servers`, listening on a free port,
    /// with its stats file and log in a temporary directory.
    pub fn start(binary: &str, servers: &[&Memcached], extra: &[&str]) -> Proxy {
        let mut args: Vec<String> = vec!["-l".into(), "127.0.0.1".into(), "-p".into(), "0".into()];
        args.push("-m".into());
        args.extend(servers.iter().map(|s| s.addr.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        Proxy::start_args(binary, &args)
    }

    /// Starts `binary` with exactly `args` (plus its stats file and log in a temporary
    /// directory), e.g. `--config FILE`; `addr` is the first listener's address.
    pub fn start_args(binary: &str, args: &[String]) -> Proxy {
        let dir = temp_dir();
        let mut cmd = Command::new(binary);
        cmd.args(args);
        cmd.arg("--stats-file").arg(dir.path().join("stats.jsonl"));
        cmd.arg("--log-file").arg(dir.path().join("proxy.log"));
        cmd.stdout(Stdio::piped()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("cannot run cachelab-proxy");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .parse()
            .unwrap();
        Proxy {
            addr,
            child,
            dir,
            stdout: Some(stdout),
        }
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    pub fn stats_path(&self) -> PathBuf {
        self.dir.path().join("stats.jsonl")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("proxy.log")).unwrap_or_default()
    }

    /// Waits until the log holds `pattern` at least `count` times (the log is written by
    /// a background appender, so lines appear shortly after the event); returns the log.
    pub fn wait_for_log(&self, pattern: &str, count: usize) -> String {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let log = self.log();
            if log.matches(pattern).count() >= count || Instant::now() >= deadline {
                return log;
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn sigterm(&self) {
        self.signal(libc::SIGTERM);
    }

    pub fn signal(&self, signal: i32) {
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, signal);
        }
    }

    /// The next listener's address (one stdout line per listener, in the
    /// configuration's order; the first is `addr`).
    pub fn next_listener(&mut self) -> SocketAddr {
        let mut line = String::new();
        self.stdout.as_mut().unwrap().read_line(&mut line).unwrap();
        line.trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected line {line:?}"))
            .parse()
            .unwrap()
    }

    /// Sends SIGTERM and waits for the exit; returns the exit code and what it printed.
    pub fn terminate(&mut self) -> (Option<i32>, String) {
        self.sigterm();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                let mut rest = String::new();
                if let Some(mut out) = self.stdout.take() {
                    let _ = out.read_to_string(&mut rest);
                }
                return (status.code(), rest);
            }
            assert!(
                Instant::now() < deadline,
                "proxy did not exit after SIGTERM"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// The stats file as JSON values, one per line.
    pub fn stats_lines(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.stats_path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking memcached client that reads exactly one reply per request, using the
/// protocol crate's reply parser.
pub struct Client {
    pub stream: TcpStream,
    buf: Vec<u8>,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    /// A client on a connection opened elsewhere (to send before reading, say).
    pub fn from_stream(stream: TcpStream) -> Client {
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        Client {
            stream,
            buf: Vec::new(),
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// Reads one reply of the given kind; panics on timeout.
    pub fn read_reply(&mut self, expect: Expect) -> Vec<u8> {
        loop {
            match parse_reply(&self.buf, expect) {
                Ok((_, len)) => return self.buf.drain(..len).collect(),
                Err(ReplyError::Incomplete) => {}
                Err(e) => panic!("bad reply {e}: {:?}", String::from_utf8_lossy(&self.buf)),
            }
            let mut chunk = [0u8; 65536];
            let n = self.stream.read(&mut chunk).expect("reply timed out");
            assert!(
                n > 0,
                "connection closed; have {:?}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads one line, whatever it is (for error lines).
    pub fn read_line(&mut self) -> String {
        loop {
            if let Some(i) = self.buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                return String::from_utf8_lossy(&line).into_owned();
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk).expect("line timed out");
            assert!(n > 0, "connection closed");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// True if the server closes the connection (reads EOF) within the timeout.
    pub fn reads_eof(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        matches!(self.stream.read(&mut chunk), Ok(0))
    }

    pub fn request(&mut self, bytes: &[u8], expect: Expect) -> Vec<u8> {
        self.send(bytes);
        self.read_reply(expect)
    }

    pub fn set(&mut self, key: &str, value: &str) -> String {
        let req = format!("set {key} 0 0 {}\r\n{value}\r\n", value.len());
        String::from_utf8(self.request(req.as_bytes(), Expect::Store)).unwrap()
    }

    pub fn get(&mut self, keys: &[&str]) -> String {
        let req = format!("get {}\r\n", keys.join(" "));
        String::from_utf8(self.request(req.as_bytes(), Expect::Values)).unwrap()
    }
}

/// The reply memcached gives for these (key, value) hits, flags 0.
pub fn values_reply(hits: &[(&str, &str)]) -> String {
    let mut s = String::new();
    for (k, v) in hits {
        s.push_str(&format!("VALUE {k} 0 {}\r\n{v}\r\n", v.len()));
    }
    s.push_str("END\r\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_starts_answers_and_counts_commands() {
        let redis = Redis::start();
        assert_eq!(
            redis.command(&["SET", "k", "v"]),
            RespValue::Simple(b"OK".to_vec())
        );
        assert_eq!(
            redis.command(&["GET", "k"]),
            RespValue::Bulk(Some(b"v".to_vec()))
        );
        assert_eq!(redis.calls("set"), 1);
        assert_eq!(redis.calls("mget"), 0);
        assert_eq!(redis.dbsize(), 1);
    }
}
