//! `cachelab-delay` between two network namespaces, as cachelab's multi-host topologies
//! use it:
//!
//! ```text
//!   ns A0                    ns M                          ns B0
//!   eth0 <--veth--> da0 ==[cachelab-delay]== db0 <--veth--> eth0
//!   198.18.0.1/24           (one process,                 198.18.0.2/24
//!   ns A1 ...  da1 ========= every link) ==== db1 ...  ns B1
//! ```
//!
//! The test's sockets are created in a thread that has entered A's or B's namespace
//! (`setns`); a socket stays in the namespace it was created in, so the rest of the test
//! uses them from any thread. Needs root, `ip` and `nsenter`: without them each test
//! prints why and returns.

use std::fs::File;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_cachelab-delay");
/// Namespaces are named `cachelab-dt<pid>-<n><a|m|b>`: the pid tells whose they are, so
/// the leftovers of a killed run can be found and removed.
const PREFIX: &str = "cachelab-dt";
const ADDR_A: &str = "198.18.0.1";
const ADDR_B: &str = "198.18.0.2";
const DELAY_US: u64 = 1000;
/// Everything that waits on the network gives up after this.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The tests measure time on a 2-core machine: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());
static TOPOLOGIES: AtomicUsize = AtomicUsize::new(0);

/// A timing test on a shared 2-core machine: one measurement can be thrown off by other
/// work, but a delay line that is really off is off every time. So each setting gets up
/// to this many measurements, and one within the tolerance passes.
const ATTEMPTS: usize = 3;

#[test]
fn round_trips_take_the_base_rtt_plus_both_delays() {
    let Some(_serial) = prerequisites() else {
        return;
    };
    let mut topo = Topology::create(1);
    // Without spinning each send is late by the timer's wake-up latency (tens of µs on
    // a VM); with it, by about nothing.
    for spin_us in [0, 50] {
        let mut misses = Vec::new();
        for attempt in 1..=ATTEMPTS {
            let m = RttCheck::measure(&mut topo, spin_us);
            eprintln!("spin {spin_us} us, attempt {attempt}: {m}");
            if m.passes() {
                break;
            }
            misses.push(m.to_string());
            assert!(
                attempt < ATTEMPTS,
                "spin {spin_us} us, every attempt missed:\n{}",
                misses.join("\n")
            );
        }
    }
}

/// The median RTT through the delay line with `DELAY_US` each way, against the median RTT
/// through the same line with no delay (measured just before) plus both delays.
struct RttCheck {
    base: f64,
    rtt: f64,
    lateness: (Value, Value),
}

impl RttCheck {
    fn measure(topo: &mut Topology, spin_us: u64) -> RttCheck {
        topo.start_delay(0, spin_us);
        let base = median(&rtts_us(&topo.pairs[0]));
        topo.stop_delay();
        topo.start_delay(DELAY_US, spin_us);
        let rtt = median(&rtts_us(&topo.pairs[0]));
        let stats = topo.stop_delay()["links"][0].clone();
        for dir in ["ab", "ba"] {
            assert!(
                stats[dir]["packets"].as_u64().unwrap() >= ROUNDS as u64,
                "{stats}"
            );
            assert_eq!(stats[dir]["drops"], 0, "{stats}");
        }
        let lateness = (
            stats["ab"]["lateness_us"].clone(),
            stats["ba"]["lateness_us"].clone(),
        );
        RttCheck {
            base,
            rtt,
            lateness,
        }
    }

    fn expected(&self) -> f64 {
        self.base + 2.0 * DELAY_US as f64
    }

    fn tolerance(&self) -> f64 {
        0.05 * self.expected() + 20.0
    }

    fn passes(&self) -> bool {
        (self.rtt - self.expected()).abs() <= self.tolerance()
    }
}

impl std::fmt::Display for RttCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "median RTT {:.1} us, expected base {:.1} + 2 x {DELAY_US} = {:.1} ± {:.1} us; \
             send lateness a->b {}, b->a {}",
            self.rtt,
            self.base,
            self.expected(),
            self.tolerance(),
            self.lateness.0,
            self.lateness.1
        )
    }
}

#[test]
fn a_bulk_transfer_arrives_intact_both_ways() {
    let Some(_serial) = prerequisites() else {
        return;
    };
    let mut topo = Topology::create(1);
    topo.start_delay(DELAY_US, 0);
    const BYTES: usize = 16 << 20;
    let elapsed = bulk_exchange(&topo.pairs[0], BYTES);
    let stats = topo.stop_delay();
    let (ab, ba) = (&stats["links"][0]["ab"], &stats["links"][0]["ba"]);
    let packets = ab["packets"].as_u64().unwrap() + ba["packets"].as_u64().unwrap();
    eprintln!(
        "{} MiB each way in {:.3} s; {packets} frames forwarded (mean frame a->b {} B), \
         delay line CPU {} s in {} s",
        BYTES >> 20,
        elapsed.as_secs_f64(),
        ab["bytes"].as_u64().unwrap() / ab["packets"].as_u64().unwrap().max(1),
        stats["cpu_s"],
        stats["elapsed_s"],
    );
    for dir in [ab, ba] {
        // Payload plus the Ethernet, IP and TCP headers of every frame.
        assert!(dir["bytes"].as_u64().unwrap() > BYTES as u64, "{stats}");
        for counter in ["drops", "truncated", "send_errors", "recv_errors"] {
            assert_eq!(dir[counter], 0, "{counter}: {stats}");
        }
    }
}

/// One process serves three links: round trips on two of them while a bulk transfer
/// crosses the third. Every round trip takes at least both delays (a frame never leaves
/// early, whatever the other links do), each link is counted apart, and the median stays
/// within the tolerance plus the lateness the line reports in one of ATTEMPTS tries.
#[test]
fn one_process_serves_several_links_never_early() {
    let Some(_serial) = prerequisites() else {
        return;
    };
    let mut topo = Topology::create(3);
    let mut misses = Vec::new();
    for attempt in 1..=ATTEMPTS {
        topo.start_delay(0, 0);
        let base = median(&rtts_us(&topo.pairs[0]));
        topo.stop_delay();
        topo.start_delay(DELAY_US, 0);
        const BYTES: usize = 4 << 20;
        let (rtts, _) = thread::scope(|s| {
            let bulk = s.spawn(|| bulk_exchange(&topo.pairs[2], BYTES));
            let rtts: Vec<Vec<f64>> = topo.pairs[..2].iter().map(rtts_us).collect();
            (rtts, bulk.join().expect("the bulk transfer failed"))
        });
        let stats = topo.stop_delay();
        let links = stats["links"].as_array().unwrap();
        assert_eq!(links.len(), 3, "{stats}");
        for (i, link) in links.iter().enumerate() {
            assert_eq!(link["name"], format!("l{i}"), "{stats}");
            for dir in ["ab", "ba"] {
                assert_eq!(link[dir]["drops"], 0, "{stats}");
                assert_eq!(link[dir]["send_errors"], 0, "{stats}");
            }
        }
        assert!(
            links[2]["ab"]["bytes"].as_u64().unwrap() > BYTES as u64,
            "{stats}"
        );
        for (i, r) in rtts.iter().enumerate() {
            assert!(
                links[i]["ab"]["packets"].as_u64().unwrap() >= ROUNDS as u64,
                "{stats}"
            );
            // Never early: even the fastest round trip holds both delays.
            assert!(
                r[0] >= 2.0 * DELAY_US as f64,
                "link {i}: a round trip of {:.1} us beat the {} us of delay",
                r[0],
                2 * DELAY_US
            );
        }
        let late: f64 = links[..2]
            .iter()
            .flat_map(|l| [&l["ab"], &l["ba"]])
            .map(|d| d["lateness_us"]["p50"].as_f64().unwrap())
            .fold(0.0, f64::max);
        let expected = base + 2.0 * DELAY_US as f64;
        let tolerance = 0.05 * expected + 20.0 + 2.0 * late;
        let medians: Vec<f64> = rtts.iter().map(|r| median(r)).collect();
        eprintln!(
            "attempt {attempt}: medians {medians:?} us, expected {expected:.1} ± {tolerance:.1},              cpu {} s over {} frames",
            stats["cpu_s"], stats["packets"]
        );
        if medians.iter().all(|m| (m - expected).abs() <= tolerance) {
            return;
        }
        misses.push(format!("{medians:?} vs {expected:.1} ± {tolerance:.1}"));
    }
    panic!("every attempt missed: {}", misses.join("; "));
}

/// None (after saying why) when the tests cannot run here; otherwise the serial lock.
fn prerequisites() -> Option<std::sync::MutexGuard<'static, ()>> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: creating network namespaces needs root");
        return None;
    }
    for tool in ["ip", "nsenter"] {
        if Command::new(tool).arg("-V").output().is_err() {
            eprintln!("skipped: `{tool}` is not installed");
            return None;
        }
    }
    Some(
        SERIAL
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()),
    )
}

/// Namespace M and, per link, two namespaces A and B and two veth pairs; removed, with
/// the delay line killed, when dropped (also when an assertion fails).
struct Topology {
    m: String,
    pairs: Vec<Pair>,
    delay: Option<DelayLine>,
}

/// The two ends of one link: A's eth0 is `da<i>` in M, B's is `db<i>`.
struct Pair {
    a: String,
    b: String,
}

struct DelayLine {
    child: Child,
    stats_file: PathBuf,
}

impl Topology {
    fn create(links: usize) -> Topology {
        remove_stale_namespaces();
        let n = TOPOLOGIES.fetch_add(1, Ordering::Relaxed);
        let base = format!("{PREFIX}{}-{n}", std::process::id());
        // The guard exists before the first namespace does.
        let mut topo = Topology {
            m: format!("{base}m"),
            pairs: Vec::new(),
            delay: None,
        };
        ip(&["netns", "add", &topo.m]);
        for i in 0..links {
            let pair = Pair {
                a: format!("{base}a{i}"),
                b: format!("{base}b{i}"),
            };
            for ns in [&pair.a, &pair.b] {
                ip(&["netns", "add", ns]);
            }
            let (a, b, m) = (pair.a.as_str(), pair.b.as_str(), topo.m.as_str());
            topo.pairs.push(Pair {
                a: a.to_owned(),
                b: b.to_owned(),
            });
            let (da, db) = (format!("da{i}"), format!("db{i}"));
            for (ns, dev) in [(a, &da), (b, &db)] {
                ip(&[
                    "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", dev,
                    "netns", m,
                ]);
            }
            for (ns, addr) in [(a, ADDR_A), (b, ADDR_B)] {
                ip(&[
                    "-n",
                    ns,
                    "addr",
                    "add",
                    &format!("{addr}/24"),
                    "dev",
                    "eth0",
                ]);
            }
            for (ns, dev) in [
                (a, "lo"),
                (a, "eth0"),
                (b, "lo"),
                (b, "eth0"),
                (m, da.as_str()),
                (m, db.as_str()),
            ] {
                // `dev`: without it, `ip link set a up` reads `a` as an address.
                ip(&["-n", ns, "link", "set", "dev", dev, "up"]);
            }
        }
        topo
    }

    /// Starts `cachelab-delay` in M and waits for its `ready` line.
    fn start_delay(&mut self, delay_us: u64, spin_us: u64) {
        assert!(self.delay.is_none(), "a delay line is already running");
        let stats_file = std::env::temp_dir().join(format!("{}-stats.json", self.m));
        let _ = std::fs::remove_file(&stats_file);
        let links = (0..self.pairs.len())
            .flat_map(|i| ["--link".to_owned(), format!("l{i}:da{i}:db{i}:{delay_us}")]);
        let child = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.m))
            .arg(BIN)
            .args(links)
            .args(["--spin-us", &spin_us.to_string()])
            .arg("--stats-file")
            .arg(&stats_file)
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawning nsenter");
        let delay = self.delay.insert(DelayLine { child, stats_file });
        let stdout = delay.child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(IO_TIMEOUT)
            .expect("no `ready` line within the timeout");
        assert_eq!(line, "ready\n", "the delay line's first line");
    }

    /// Stops the delay line with SIGTERM and returns its statistics line.
    fn stop_delay(&mut self) -> Value {
        let mut delay = self.delay.take().expect("no delay line running");
        let status =
            terminate(&mut delay.child).expect("the delay line did not exit after SIGTERM");
        assert!(status.success(), "the delay line exited with {status}");
        let text = std::fs::read_to_string(&delay.stats_file).expect("reading the stats file");
        assert_eq!(text.lines().count(), 1, "one JSON line: {text}");
        serde_json::from_str(&text).expect("the stats line is JSON")
    }
}

impl Drop for DelayLine {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) && terminate(&mut self.child).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.stats_file);
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // The delay line first: it holds sockets on M's interfaces.
        drop(self.delay.take());
        let names = self.pairs.iter().flat_map(|p| [&p.a, &p.b]);
        for ns in names.chain([&self.m]) {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// SIGTERM to `child` (by its pid: nsenter execs the delay line), then waits for it.
fn terminate(child: &mut Child) -> Option<std::process::ExitStatus> {
    // SAFETY: signalling our own child, not yet reaped, so its pid is still its own.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + IO_TIMEOUT;
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        thread::sleep(Duration::from_millis(10));
    }
    None
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("running ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

/// Removes namespaces left by test processes that no longer exist (killed mid-test).
fn remove_stale_namespaces() {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

/// Runs `f` in a thread that has entered namespace `ns`.
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{ns}");
    thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(&path).expect("opening the namespace");
            // SAFETY: a valid namespace fd; only this thread changes namespace.
            let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("the thread in the namespace panicked")
    })
}

/// A listener in B and a connection to it from A, with timeouts on both ends.
fn connect(topo: &Pair) -> (TcpStream, TcpStream) {
    let listener = in_netns(&topo.b, || {
        TcpListener::bind((ADDR_B, 0)).expect("bind in B")
    });
    let addr: SocketAddr = listener.local_addr().unwrap();
    let client = in_netns(&topo.a, || {
        TcpStream::connect_timeout(&addr, IO_TIMEOUT).expect("connect from A")
    });
    listener.set_nonblocking(true).unwrap();
    let deadline = Instant::now() + IO_TIMEOUT;
    let server = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock && Instant::now() < deadline => {
                thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("accept in B: {e}"),
        }
    };
    for s in [&client, &server] {
        s.set_nonblocking(false).unwrap();
        s.set_nodelay(true).unwrap();
        s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        s.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
    }
    (client, server)
}

const WARMUP: usize = 20;
const ROUNDS: usize = 200;
/// Round trips start this far apart, with or without the delay, so that the hosts' CPUs
/// sit idle for about as long between them in both runs. (Waking an idle vCPU costs tens
/// of microseconds here; with back-to-back round trips the base would not pay it, but
/// the delayed round trips would, and the difference would be blamed on the delay line.)
const PERIOD: Duration = Duration::from_millis(3);

fn median(sorted: &[f64]) -> f64 {
    sorted[sorted.len() / 2]
}

/// ROUNDS round trips of a 32-byte message, A to B's echo and back, one every PERIOD,
/// sorted; the timer starts before the write and stops when the whole echo has been read.
fn rtts_us(topo: &Pair) -> Vec<f64> {
    let (mut client, mut server) = connect(topo);
    let echo = thread::spawn(move || {
        let mut buf = [0; 64];
        loop {
            match server.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => server.write_all(&buf[..n]).expect("echo write"),
            }
        }
    });
    let msg = [0x5a; 32];
    let mut reply = [0; 32];
    let mut rtts = Vec::with_capacity(ROUNDS);
    let start = Instant::now();
    for i in 0..WARMUP + ROUNDS {
        let next = start + PERIOD * i as u32;
        thread::sleep(next.saturating_duration_since(Instant::now()));
        let t = Instant::now();
        client.write_all(&msg).expect("write");
        client.read_exact(&mut reply).expect("read the echo");
        if i >= WARMUP {
            rtts.push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    assert_eq!(reply, msg);
    drop(client);
    echo.join().unwrap();
    rtts.sort_by(f64::total_cmp);
    rtts
}

/// A sends `bytes` of a pattern to B, which checks every byte and then sends `bytes` of
/// another pattern back, which A checks. Returns how long the exchange took.
fn bulk_exchange(topo: &Pair, bytes: usize) -> Duration {
    let (mut client, mut server) = connect(topo);
    let started = Instant::now();
    let b_side = thread::spawn(move || {
        receive_pattern(&mut server, 1, bytes);
        send_pattern(&mut server, 2, bytes);
    });
    send_pattern(&mut client, 1, bytes);
    receive_pattern(&mut client, 2, bytes);
    b_side.join().expect("B's side failed");
    started.elapsed()
}

const CHUNK: usize = 64 << 10;

fn send_pattern(stream: &mut TcpStream, seed: u64, bytes: usize) {
    let mut pattern = Pattern(seed);
    let mut chunk = vec![0; CHUNK];
    for start in (0..bytes).step_by(CHUNK) {
        let n = CHUNK.min(bytes - start);
        pattern.fill(&mut chunk[..n]);
        stream.write_all(&chunk[..n]).expect("bulk write");
    }
}

fn receive_pattern(stream: &mut TcpStream, seed: u64, bytes: usize) {
    let mut pattern = Pattern(seed);
    let (mut got, mut want) = (vec![0; CHUNK], vec![0; CHUNK]);
    let mut offset = 0;
    while offset < bytes {
        let n = stream
            .read(&mut got[..CHUNK.min(bytes - offset)])
            .expect("bulk read");
        assert!(n > 0, "connection closed after {offset} of {bytes} bytes");
        pattern.fill(&mut want[..n]);
        if let Some(i) = (0..n).find(|&i| got[i] != want[i]) {
            panic!(
                "byte {} differs: sent {:#04x}, received {:#04x}",
                offset + i,
                want[i],
                got[i]
            );
        }
        offset += n;
    }
}

/// A reproducible byte stream (xorshift64), so both ends can check every byte without
/// keeping megabytes around. Reads may end anywhere, so it is generated byte by byte.
struct Pattern(u64);

impl Pattern {
    fn fill(&mut self, buf: &mut [u8]) {
        for b in buf {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            *b = (self.0 >> 32) as u8;
        }
    }
}
