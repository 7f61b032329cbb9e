//! TLS and Unix sockets against real servers started by the test: memcached with `-Z`
//! (Debian's is built with TLS) and `-s PATH`, redis-server with `--tls-port` and
//! `--unixsocket PATH`. Certificates come from the testkit's throw-away CA, in a
//! `cachelab` temporary directory. The same table of cases runs against each protocol, in
//! both loops.

mod common;

use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use cachelab_testkit::pki::{Issued, Pki, LOCALHOST};
use cachelab_testkit::server_commands::{
    memcached_command, memcached_tls, redis_command, redis_tls, TlsListen,
};
use common::*;
use serde_json::Value;

const START_TIMEOUT: Duration = Duration::from_secs(10);

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap()
}

/// A server process, killed by its pid on drop, and where it listens.
struct Server {
    child: Child,
    addr: SocketAddr,
    socket: Option<PathBuf>,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `-s 127.0.0.1 -p PORT`, or `-S PATH`.
    fn target(&self) -> Vec<String> {
        match &self.socket {
            Some(path) => vec!["-S".into(), path.display().to_string()],
            None => vec![
                "-s".into(),
                self.addr.ip().to_string(),
                "-p".into(),
                self.addr.port().to_string(),
            ],
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Memcached,
    Redis,
}

/// How a server is reached: TLS on TCP (with its certificate, and whether it asks for
/// the client's), or a Unix socket.
enum Listen<'a> {
    Tls {
        cert: &'a Issued,
        ca: &'a Path,
        require_client_cert: bool,
    },
    Unix,
}

fn command(kind: Kind, port: u16, listen: &Listen, socket: Option<&Path>) -> Command {
    match (kind, listen) {
        (
            kind,
            Listen::Tls {
                cert,
                ca,
                require_client_cert,
            },
        ) => {
            let tls = TlsListen {
                cert,
                ca,
                require_client_cert: *require_client_cert,
            };
            match kind {
                Kind::Memcached => memcached_tls(port, tls),
                Kind::Redis => redis_tls(port, tls),
            }
        }
        (Kind::Memcached, Listen::Unix) => {
            let mut cmd = memcached_command();
            cmd.arg("-s").arg(socket.unwrap());
            cmd
        }
        (Kind::Redis, Listen::Unix) => {
            let mut cmd = redis_command();
            cmd.arg("--unixsocket").arg(socket.unwrap());
            cmd
        }
    }
}

/// Starts the server and returns once it accepts connections (on a free port: if
/// another process took the port first, ours exits and another port is tried).
fn start(kind: Kind, listen: Listen) -> Server {
    for _ in 0..5 {
        let port = free_port();
        let addr = SocketAddr::new(LOCALHOST, port);
        let dir = matches!(listen, Listen::Unix).then(temp_dir);
        let socket = dir.as_ref().map(|d| d.path().join("server.sock"));
        let child = command(kind, port, &listen, socket.as_deref())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {kind:?}: {e}"));
        let mut server = Server {
            child,
            addr,
            socket,
            _dir: dir,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        while Instant::now() < deadline {
            if server.child.try_wait().unwrap().is_some() {
                break; // the port was taken: try another
            }
            let up = match &server.socket {
                Some(path) => UnixStream::connect(path).is_ok(),
                None => TcpStream::connect(addr).is_ok(),
            };
            if up {
                return server;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    panic!("{kind:?} did not start");
}

fn protocol_of(kind: Kind, binary: bool) -> &'static str {
    match (kind, binary) {
        (Kind::Redis, _) => "redis",
        (Kind::Memcached, false) => "memcache_text",
        (Kind::Memcached, true) => "memcache_binary",
    }
}

fn run(server: &Server, protocol: &str, extra: &[&str]) -> Run {
    let target = server.target();
    let mut args: Vec<&str> = target.iter().map(String::as_str).collect();
    args.extend(["-P", protocol, "-t", "1"]);
    if !extra.contains(&"-c") {
        args.extend(["-c", "1"]);
    }
    args.extend_from_slice(extra);
    load_with(&args)
}

/// Writes keys 1..=100, then GETs keys 1..=200 once each (sequentially, closed loop or
/// open loop): exactly 100 hits and 100 misses.
fn hits_and_misses(server: &Server, protocol: &str, transport: &[&str], open_loop: bool) -> Value {
    let mut populate = vec!["--key-minimum=1", "--key-maximum=100", "--populate"];
    populate.extend_from_slice(transport);
    let written = run(server, protocol, &populate);
    assert_eq!(
        u(written.ok(), "/totals/completed"),
        100,
        "{}",
        written.stderr
    );
    let mut gets = vec![
        "--key-minimum=1",
        "--key-maximum=200",
        "--key-pattern=S:S",
        "--ratio=0:1",
        "--requests=200",
    ];
    if open_loop {
        gets.push("--rate=4000");
    }
    gets.extend_from_slice(transport);
    let report = run(server, protocol, &gets).ok().clone();
    assert_eq!(
        u(&report, "/summary/get/hits"),
        100,
        "{protocol} {transport:?}"
    );
    assert_eq!(
        u(&report, "/summary/get/misses"),
        100,
        "{protocol} {transport:?}"
    );
    assert_eq!(u(&report, "/totals/errors"), 0);
    let mut errors = Vec::new();
    validate(&schema(), &schema(), &report, "", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    report
}

fn string<'a>(report: &'a Value, pointer: &str) -> &'a str {
    report
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer}"))
}

#[test]
fn text_binary_and_redis_over_tls_count_hits_and_misses_in_both_loops() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("server", false);
    let ca = pki.ca.display().to_string();
    let tls = ["--tls", "--cacert", &ca];
    for kind in [Kind::Memcached, Kind::Redis] {
        for binary in [false, true] {
            if kind == Kind::Redis && binary {
                continue;
            }
            for open_loop in [false, true] {
                let server = start(
                    kind,
                    Listen::Tls {
                        cert: &cert,
                        ca: &pki.ca,
                        require_client_cert: false,
                    },
                );
                let protocol = protocol_of(kind, binary);
                let report = hits_and_misses(&server, protocol, &tls, open_loop);
                // One connection, one handshake, timed apart from the requests.
                assert_eq!(u(&report, "/connection_setup/connections"), 1);
                assert_eq!(u(&report, "/connection_setup/handshakes"), 1);
                assert!(f(&report, "/connection_setup/handshake_ms/max") > 0.0);
                assert!(string(&report, "/connection_setup/tls_version").starts_with("TLSv1_"));
                assert_eq!(string(&report, "/configuration/tls/verify"), "cacert");
                // The kernel's stamps would be those of encrypted records: user-space
                // timing, and the report says why.
                assert_eq!(report.pointer("/timing/kernel"), Some(&Value::Bool(false)));
                assert!(string(&report, "/timing/fallback")
                    .contains("TLS: the kernel stamps encrypted records"));
                assert_eq!(
                    string(&report, "/timing/clocks/latency"),
                    "intended->user_read"
                );
            }
        }
    }
}

#[test]
fn unix_sockets_to_memcached_and_redis_count_hits_and_misses_in_both_loops() {
    for kind in [Kind::Memcached, Kind::Redis] {
        for binary in [false, true] {
            if kind == Kind::Redis && binary {
                continue;
            }
            for open_loop in [false, true] {
                let server = start(kind, Listen::Unix);
                let report = hits_and_misses(&server, protocol_of(kind, binary), &[], open_loop);
                assert_eq!(u(&report, "/connection_setup/handshakes"), 0);
                assert!(string(&report, "/configuration/unix_socket").ends_with("server.sock"));
                assert!(string(&report, "/timing/fallback").contains("Unix socket"));
            }
        }
    }
}

#[test]
fn skip_verify_accepts_a_self_signed_server_that_a_wrong_ca_refuses_in_one_line() {
    let pki = Pki::new("cachelab test CA");
    let own = pki.self_signed("self-signed");
    let server = start(
        Kind::Memcached,
        Listen::Tls {
            cert: &own,
            ca: &pki.ca,
            require_client_cert: false,
        },
    );
    let ok = run(
        &server,
        "memcache_text",
        &["--tls", "--tls-skip-verify", "--requests=50"],
    );
    assert_eq!(u(ok.ok(), "/totals/completed"), 50);
    assert_eq!(string(ok.ok(), "/configuration/tls/verify"), "skip");

    let ca = pki.ca.display().to_string();
    let refused = run(
        &server,
        "memcache_text",
        &["--tls", "--cacert", &ca, "--requests=50"],
    );
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    let lines: Vec<&str> = refused.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{}", refused.stderr);
    assert!(
        lines[0].starts_with(&format!(
            "cachelab-load: TLS handshake with 127.0.0.1:{} failed: invalid peer certificate: UnknownIssuer",
            server.addr.port()
        )) && lines[0].contains("--cacert"),
        "{}",
        lines[0]
    );
    assert!(refused.report.is_none());
}

#[test]
fn mutual_tls_with_a_client_certificate_and_a_refusal_without_one() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("server", false);
    let client = pki.issue("client", true);
    let server = start(
        Kind::Redis,
        Listen::Tls {
            cert: &cert,
            ca: &pki.ca,
            require_client_cert: true,
        },
    );
    let ca = pki.ca.display().to_string();
    let (c, k) = (
        client.cert.display().to_string(),
        client.key.display().to_string(),
    );
    let ok = run(
        &server,
        "redis",
        &[
            "--tls",
            "--cacert",
            &ca,
            "--cert",
            &c,
            "--key",
            &k,
            "--requests=100",
        ],
    );
    let report = ok.ok();
    assert_eq!(u(report, "/totals/completed"), 100);
    assert_eq!(
        report.pointer("/configuration/tls/client_certificate"),
        Some(&Value::Bool(true))
    );
    // TLS 1.2: the client's handshake waits for the server's Finished, which a server
    // that wants a certificate never sends to a client without one.
    let refused = run(
        &server,
        "redis",
        &[
            "--tls",
            "--cacert",
            &ca,
            "--tls-protocols=TLSv1.2",
            "--requests=100",
        ],
    );
    assert_eq!(refused.code, Some(1), "{}", refused.stderr);
    assert_eq!(refused.stderr.lines().count(), 1, "{}", refused.stderr);
    // Usually the server's alert is read and explained; when the server's close wins
    // the race (our write fails before its alert can be read), the socket's error is
    // reported, still as the handshake's, on one line.
    assert!(
        refused.stderr.contains("TLS handshake with")
            && (refused.stderr.contains("client certificate")
                || refused.stderr.contains("during the TLS handshake")),
        "{}",
        refused.stderr
    );
    // The version asked for is the one negotiated.
    let tls12 = run(
        &server,
        "redis",
        &[
            "--tls",
            "--cacert",
            &ca,
            "--cert",
            &c,
            "--key",
            &k,
            "--tls-protocols=TLSv1.2",
            "--requests=10",
        ],
    );
    assert_eq!(
        string(tls12.ok(), "/connection_setup/tls_version"),
        "TLSv1_2"
    );
}

#[test]
fn reconnections_handshake_again_and_every_handshake_is_counted() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("server", false);
    let server = start(
        Kind::Memcached,
        Listen::Tls {
            cert: &cert,
            ca: &pki.ca,
            require_client_cert: false,
        },
    );
    let ca = pki.ca.display().to_string();
    let report = run(
        &server,
        "memcache_text",
        &[
            "--tls",
            "--cacert",
            &ca,
            "-c",
            "2",
            "--requests=100",
            "--reconnect-interval=25",
        ],
    );
    let report = report.ok();
    assert_eq!(u(report, "/totals/completed"), 200);
    // 2 connections x 4 sessions of 25 requests.
    assert_eq!(u(report, "/connection_setup/connections"), 8);
    assert_eq!(u(report, "/connection_setup/handshakes"), 8);
    assert_eq!(u(report, "/connection_setup/handshake_failures"), 0);
}
