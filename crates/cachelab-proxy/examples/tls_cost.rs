//! What TLS costs through the proxy, on loopback, in one short bounded run.
//!
//! Starts memcached (plain, and `-Z` with a throw-away certificate), then the proxy
//! binary (`--proxy PATH`, a release build) in four set-ups: plain, TLS from clients,
//! TLS to memcached, both; and memcached alone, plain and TLS. For each, CLIENTS
//! closed-loop connections (tokio-rustls for TLS, written before the load generator spoke
//! it) send `get` of a 100-byte value for SECONDS, and we print requests per second,
//! latency (mean, p50, p99, from write to the last reply byte) and the CPU the proxy
//! (or memcached alone) used per request, from its /proc/PID/stat user + system time.
//! Connection set-up, handshakes included, is outside the measured window.
//!
//! `cargo run --release --example tls_cost -- --proxy target/release/cachelab-proxy`

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cachelab_testkit::pki::Pki;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const CLIENTS: usize = 4;
const SECONDS: f64 = 3.0;
const WORKERS: &str = "4";

struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// User + system CPU seconds of `pid` so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    let ticks: f64 = fields[11].parse::<f64>().unwrap() + fields[12].parse::<f64>().unwrap();
    ticks / unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64
}

fn memcached(port: u16, tls: Option<(&Path, &Path)>) -> Killed {
    let mut cmd = Command::new("memcached");
    cmd.args([
        "-l",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-U",
        "0",
        "-t",
        "1",
    ]);
    if let Some((cert, key)) = tls {
        cmd.arg("-Z").arg("-o").arg(format!(
            "ssl_chain_cert={},ssl_key={}",
            cert.display(),
            key.display()
        ));
    }
    if unsafe { libc::geteuid() } == 0 {
        cmd.args(["-u", "root"]);
    }
    cmd.stdout(Stdio::null()).stderr(Stdio::null());
    Killed(cmd.spawn().expect("memcached"))
}

fn proxy(binary: &Path, args: &[String]) -> (Killed, SocketAddr) {
    use std::io::BufRead;
    let mut child = Command::new(binary)
        .args(["-l", "127.0.0.1", "-p", "0", "-t", WORKERS])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("cachelab-proxy");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap()
        .parse()
        .unwrap();
    (Killed(child), addr)
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

async fn connect(addr: SocketAddr, tls: Option<&Arc<rustls::ClientConfig>>) -> Box<dyn Stream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(tcp) = TcpStream::connect(addr).await {
            tcp.set_nodelay(true).unwrap();
            match tls {
                None => return Box::new(tcp),
                Some(config) => {
                    let name = ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into());
                    if let Ok(s) = tokio_rustls::TlsConnector::from(Arc::clone(config))
                        .connect(name, tcp)
                        .await
                    {
                        return Box::new(s);
                    }
                }
            }
        }
        assert!(Instant::now() < deadline, "cannot connect to {addr}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn request(s: &mut Box<dyn Stream>, req: &[u8], buf: &mut Vec<u8>) {
    s.write_all(req).await.unwrap();
    s.flush().await.unwrap();
    buf.clear();
    let mut chunk = [0u8; 4096];
    while !buf.ends_with(b"END\r\n") && !buf.ends_with(b"STORED\r\n") {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}

struct Figures {
    ops: usize,
    latencies: Vec<Duration>,
}

async fn run_load(addr: SocketAddr, tls: Option<Arc<rustls::ClientConfig>>, pid: u32) -> String {
    let value = vec![b'x'; 100];
    let mut set = b"set bench 0 0 100\r\n".to_vec();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    let mut warm = connect(addr, tls.as_ref()).await;
    request(&mut warm, &set, &mut Vec::new()).await;
    let mut conns = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = connect(addr, tls.as_ref()).await;
        request(&mut c, b"get bench\r\n", &mut Vec::new()).await;
        conns.push(c);
    }
    let cpu0 = cpu_seconds(pid);
    let until = Instant::now() + Duration::from_secs_f64(SECONDS);
    let tasks: Vec<_> = conns
        .into_iter()
        .map(|mut c| {
            tokio::spawn(async move {
                let mut f = Figures {
                    ops: 0,
                    latencies: Vec::with_capacity(100_000),
                };
                let mut buf = Vec::new();
                while Instant::now() < until {
                    let t = Instant::now();
                    request(&mut c, b"get bench\r\n", &mut buf).await;
                    f.latencies.push(t.elapsed());
                    f.ops += 1;
                }
                f
            })
        })
        .collect();
    let mut all = Figures {
        ops: 0,
        latencies: Vec::new(),
    };
    for t in tasks {
        let f = t.await.unwrap();
        all.ops += f.ops;
        all.latencies.extend(f.latencies);
    }
    let cpu = cpu_seconds(pid) - cpu0;
    all.latencies.sort();
    let pct = |p: f64| all.latencies[((all.latencies.len() - 1) as f64 * p) as usize];
    let mean: Duration = all.latencies.iter().sum::<Duration>() / all.latencies.len() as u32;
    format!(
        "{:>9.0} {:>9.1} {:>8.1} {:>8.1} {:>10.2}",
        all.ops as f64 / SECONDS,
        mean.as_secs_f64() * 1e6,
        pct(0.5).as_secs_f64() * 1e6,
        pct(0.99).as_secs_f64() * 1e6,
        cpu / all.ops as f64 * 1e6,
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let binary = match args.iter().position(|a| a == "--proxy") {
        Some(i) => PathBuf::from(&args[i + 1]),
        None => PathBuf::from("target/release/cachelab-proxy"),
    };
    let pki = Pki::new("cachelab tls_cost CA");
    let server = pki.issue("server", false);
    let (ca, crt, k) = (pki.ca.clone(), server.cert, server.key);

    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(&ca).unwrap())
        .unwrap();
    let client = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );

    let (plain_port, tls_port) = (free_port(), free_port());
    let m_plain = memcached(plain_port, None);
    let m_tls = memcached(tls_port, Some((&crt, &k)));
    let plain_addr: SocketAddr = format!("127.0.0.1:{plain_port}").parse().unwrap();
    let tls_addr: SocketAddr = format!("127.0.0.1:{tls_port}").parse().unwrap();
    let listener_tls: Vec<String> = [
        "--tls-cert",
        crt.to_str().unwrap(),
        "--tls-key",
        k.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec();
    let server_tls: Vec<String> = ["--server-tls", "--server-tls-ca", ca.to_str().unwrap()]
        .map(String::from)
        .to_vec();

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    println!(
        "{CLIENTS} closed-loop clients, get of 100 B, {SECONDS} s each, proxy -t {WORKERS}, loopback"
    );
    println!(
        "{:<34} {:>9} {:>9} {:>8} {:>8} {:>10}",
        "set-up", "req/s", "mean_us", "p50_us", "p99_us", "cpu_us/req"
    );
    rt.block_on(async {
        let direct = [
            ("memcached, plain", plain_addr, None, m_plain.0.id()),
            (
                "memcached, TLS",
                tls_addr,
                Some(Arc::clone(&client)),
                m_tls.0.id(),
            ),
        ];
        for (name, addr, tls, pid) in direct {
            println!(
                "{name:<34} {}  (memcached's CPU)",
                run_load(addr, tls, pid).await
            );
        }
        let setups: [(&str, bool, bool); 4] = [
            ("proxy, plain both sides", false, false),
            ("proxy, TLS from clients", true, false),
            ("proxy, TLS to memcached", false, true),
            ("proxy, TLS both sides", true, true),
        ];
        for (name, tls_in, tls_out) in setups {
            let mut args = vec!["-m".to_string()];
            args.push(if tls_out { tls_addr } else { plain_addr }.to_string());
            if tls_in {
                args.extend(listener_tls.iter().cloned());
            }
            if tls_out {
                args.extend(server_tls.iter().cloned());
            }
            let (p, addr) = proxy(&binary, &args);
            let tls = tls_in.then(|| Arc::clone(&client));
            println!(
                "{name:<34} {}  (proxy's CPU)",
                run_load(addr, tls, p.0.id()).await
            );
        }
    });
}
