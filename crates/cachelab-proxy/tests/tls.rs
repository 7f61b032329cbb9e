//! TLS and Unix sockets against real memcached (Debian's is built with TLS: `-Z`):
//! the proxy terminating TLS, speaking TLS to a `-Z` memcached (and refusing one whose
//! certificate its CA did not sign), mutual TLS, a certificate rotated by SIGHUP, a bad
//! handshake that costs only its own connection, and Unix sockets on both sides; TLS on
//! both hops, and a Redis pool over TLS when redis-server has it.
//! Certificates come from the testkit's throw-away CA (`cachelab_testkit::pki`).

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cachelab_proxy::config::Config;
use cachelab_proxy::endpoint::{Endpoint, Listener};
use cachelab_proxy::tls::{ListenerTlsSpec, Protocols, ServerTlsSpec};
use cachelab_testkit::pki::{Issued, Pki, LOCALHOST};
use cachelab_testkit::server_commands::{self, memcached_command, TlsListen};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls_pki_types::pem::PemObject;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

/// A memcached on a loopback port or a Unix socket, killed (by pid) on drop.
struct Memcached {
    child: Child,
    _dir: Option<tempfile::TempDir>,
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn memcached(args: &[String]) -> Child {
    memcached_command()
        .args(args)
        .spawn()
        .expect("cannot run memcached")
}

/// memcached with TLS on a free port; returns once a TLS client gets an answer.
async fn memcached_tls(server: &Issued, ca: &Path) -> (Memcached, SocketAddr) {
    let port = common::free_port();
    let addr = SocketAddr::new(LOCALHOST, port);
    let tls = TlsListen {
        cert: server,
        ca,
        require_client_cert: false,
    };
    let child = server_commands::memcached_tls(port, tls)
        .spawn()
        .expect("cannot run memcached");
    let m = Memcached { child, _dir: None };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut s) = tls_connect(addr, ca, None, Protocols::default()).await {
            if exchange(&mut s, b"version\r\n")
                .await
                .starts_with("VERSION")
            {
                return (m, addr);
            }
        }
        assert!(Instant::now() < deadline, "memcached -Z did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn client_config(
    ca: &Path,
    cert: Option<&Issued>,
    protocols: Protocols,
) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let mut versions = Vec::new();
    if protocols.tls13 {
        versions.push(&rustls::version::TLS13);
    }
    if protocols.tls12 {
        versions.push(&rustls::version::TLS12);
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&versions)
    .unwrap()
    .with_root_certificates(roots);
    let config = match cert {
        Some(c) => builder
            .with_client_auth_cert(
                CertificateDer::pem_file_iter(&c.cert)
                    .unwrap()
                    .map(Result::unwrap)
                    .collect(),
                PrivateKeyDer::from_pem_file(&c.key).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

type TlsStream = tokio_rustls::client::TlsStream<TcpStream>;

async fn tls_connect(
    addr: SocketAddr,
    ca: &Path,
    cert: Option<&Issued>,
    protocols: Protocols,
) -> std::io::Result<TlsStream> {
    let tcp = TcpStream::connect(addr).await?;
    TlsConnector::from(client_config(ca, cert, protocols))
        .connect(ServerName::IpAddress(LOCALHOST.into()), tcp)
        .await
}

/// Sends `request` and reads one reply (up to its last line: END, STORED, VERSION...).
async fn exchange(stream: &mut (impl AsyncRead + AsyncWrite + Unpin), request: &[u8]) -> String {
    stream.write_all(request).await.unwrap();
    stream.flush().await.unwrap();
    read_reply(stream).await.unwrap()
}

async fn read_reply(stream: &mut (impl AsyncRead + Unpin)) -> std::io::Result<String> {
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    let done = |r: &[u8]| {
        let text = String::from_utf8_lossy(r);
        text.ends_with("END\r\n")
            || (text.ends_with("\r\n") && !text.starts_with("VALUE") && !text.starts_with("STAT"))
    };
    while !done(&reply) {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .map_err(|_| std::io::Error::other("no reply within 5 s"))??;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        reply.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8(reply).unwrap())
}

/// A proxy served in this process (`server::run`), stopped on drop.
struct Proxy {
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Proxy {
    async fn start(config: Config, listener: Listener) -> Proxy {
        let (stop, stopped) = oneshot::channel::<()>();
        let (_reload_tx, reloads) = tokio::sync::mpsc::channel(1);
        let task = tokio::spawn(async move {
            let _keep = _reload_tx;
            cachelab_proxy::server::run(
                vec![listener],
                config,
                async {
                    let _ = stopped.await;
                },
                reloads,
            )
            .await
            .unwrap();
        });
        Proxy {
            stop: Some(stop),
            task: Some(task),
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap();
    }
}

fn proxy_config(servers: Vec<SocketAddr>) -> Config {
    let mut config = Config::new("127.0.0.1:0".parse().unwrap(), servers, 2);
    config.drain_timeout = Duration::from_secs(1);
    config
}

async fn tcp_listener() -> (Listener, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    (l.into(), addr)
}

fn listener_tls(pki: &Pki, server: &Issued, client_ca: bool) -> ListenerTlsSpec {
    ListenerTlsSpec {
        cert: server.cert.clone(),
        key: server.key.clone(),
        client_ca: client_ca.then(|| pki.ca.clone()),
        protocols: Protocols::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_terminates_tls_and_speaks_plain_to_memcached() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("proxy", false);
    let m = common::Memcached::start();
    let mut config = proxy_config(vec![m.addr]);
    config.listeners[0].tls = Some(listener_tls(&pki, &cert, false));
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;

    for (protocols, version) in [
        (
            Protocols {
                tls12: true,
                tls13: false,
            },
            rustls::ProtocolVersion::TLSv1_2,
        ),
        (
            Protocols {
                tls12: false,
                tls13: true,
            },
            rustls::ProtocolVersion::TLSv1_3,
        ),
    ] {
        let mut s = tls_connect(addr, &pki.ca, None, protocols).await.unwrap();
        assert_eq!(s.get_ref().1.protocol_version(), Some(version));
        assert_eq!(
            exchange(&mut s, b"set k 0 0 2\r\nhi\r\n").await,
            "STORED\r\n"
        );
        assert_eq!(
            exchange(&mut s, b"get k\r\n").await,
            "VALUE k 0 2\r\nhi\r\nEND\r\n"
        );
    }
    // memcached got it in plain text.
    let mut plain = TcpStream::connect(m.addr).await.unwrap();
    assert_eq!(
        exchange(&mut plain, b"get k\r\n").await,
        "VALUE k 0 2\r\nhi\r\nEND\r\n"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_speaks_tls_to_memcached_and_verifies_its_certificate() {
    let pki = Pki::new("cachelab servers CA");
    let server_cert = pki.issue("memcached", false);
    let (_m, maddr) = memcached_tls(&server_cert, &pki.ca).await;

    let mut config = proxy_config(vec![maddr]);
    config.listeners[0].pool.server_tls = Some(ServerTlsSpec {
        ca: Some(pki.ca.clone()),
        ..ServerTlsSpec::default()
    });
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        exchange(&mut c, b"set t 0 0 3\r\ntls\r\n").await,
        "STORED\r\n"
    );
    assert_eq!(
        exchange(&mut c, b"get t\r\n").await,
        "VALUE t 0 3\r\ntls\r\nEND\r\n"
    );
    proxy.stop().await;

    // A proxy trusting another CA does not talk to this memcached.
    let other = Pki::new("cachelab other CA");
    let mut config = proxy_config(vec![maddr]);
    config.listeners[0].pool.server_tls = Some(ServerTlsSpec {
        ca: Some(other.ca.clone()),
        ..ServerTlsSpec::default()
    });
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    let reply = exchange(&mut c, b"get t\r\n").await;
    assert!(
        reply.starts_with("SERVER_ERROR") && reply.contains("TLS handshake failed"),
        "{reply}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_refuses_a_client_without_a_certificate_and_serves_one_with() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("proxy", false);
    let client = pki.issue("client", true);
    let stranger_ca = Pki::new("cachelab stranger CA");
    let stranger = stranger_ca.issue("stranger", true);
    let m = common::Memcached::start();
    let mut config = proxy_config(vec![m.addr]);
    config.listeners[0].tls = Some(listener_tls(&pki, &cert, true));
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;

    for (who, cert) in [("no certificate", None), ("another CA's", Some(&stranger))] {
        // With TLS 1.3 the client may finish its side before the proxy refuses: then
        // the refusal arrives as the first read. Either way, no reply.
        let refused = match tls_connect(addr, &pki.ca, cert, Protocols::default()).await {
            Err(_) => true,
            Ok(mut s) => {
                let _ = s.write_all(b"version\r\n").await;
                let _ = s.flush().await;
                read_reply(&mut s).await.is_err()
            }
        };
        assert!(refused, "a client with {who} was served");
    }
    let mut s = tls_connect(addr, &pki.ca, Some(&client), Protocols::default())
        .await
        .unwrap();
    assert_eq!(
        exchange(&mut s, b"set m 0 0 1\r\n1\r\n").await,
        "STORED\r\n"
    );
    let stats = exchange(&mut s, b"stats\r\n").await;
    assert!(stats.contains("STAT ssl_handshake_errors 2\r\n"), "{stats}");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_handshake_costs_only_its_own_connection() {
    let pki = Pki::new("cachelab test CA");
    let cert = pki.issue("proxy", false);
    let m = common::Memcached::start();
    let mut config = proxy_config(vec![m.addr]);
    config.listeners[0].tls = Some(listener_tls(&pki, &cert, false));
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;

    let mut good = tls_connect(addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    assert_eq!(
        exchange(&mut good, b"set g 0 0 1\r\ng\r\n").await,
        "STORED\r\n"
    );
    // A plain-text client on the TLS port: its connection is closed.
    let mut bad = TcpStream::connect(addr).await.unwrap();
    bad.write_all(b"get g\r\n\x16\x03\x01garbage\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            match bad.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {} // the TLS alert
            }
        }
    })
    .await;
    assert!(closed.is_ok(), "the bad connection was not closed");
    // The good client, already connected, and a new one, are served as before.
    assert_eq!(
        exchange(&mut good, b"get g\r\n").await,
        "VALUE g 0 1\r\ng\r\nEND\r\n"
    );
    let mut fresh = tls_connect(addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    let stats = exchange(&mut fresh, b"stats\r\n").await;
    assert!(stats.contains("STAT ssl_handshake_errors 1\r\n"), "{stats}");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unix_socket_listener_in_front_of_a_unix_socket_memcached() {
    let dir = tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap();
    let msock = dir.path().join("memcached.sock");
    let psock = dir.path().join("proxy.sock");
    let child = memcached(&[
        "-s".into(),
        msock.display().to_string(),
        "-a".into(),
        "700".into(),
    ]);
    let _m = Memcached { child, _dir: None };
    let deadline = Instant::now() + Duration::from_secs(10);
    while UnixStream::connect(&msock).await.is_err() {
        assert!(Instant::now() < deadline, "memcached -s did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut config = proxy_config(Vec::new());
    let server = Endpoint::Unix(msock.clone());
    config.listeners[0].pool.servers = vec![cachelab_proxy::config::ServerSpec {
        addr: server.clone(),
        host: msock.display().to_string(),
        name: msock.display().to_string(),
        weight: 1,
    }];
    config.servers = vec![server];
    config.listeners[0].listen = Endpoint::Unix(psock.clone());
    let listener = Listener::bind(&Endpoint::Unix(psock.clone()), 0o700)
        .await
        .unwrap();
    let proxy = Proxy::start(config, listener).await;
    let mut c = UnixStream::connect(&psock).await.unwrap();
    assert_eq!(
        exchange(&mut c, b"set u 0 0 4\r\nunix\r\n").await,
        "STORED\r\n"
    );
    assert_eq!(
        exchange(&mut c, b"get u\r\n").await,
        "VALUE u 0 4\r\nunix\r\nEND\r\n"
    );
    // It is memcached's: read there directly.
    let mut direct = UnixStream::connect(&msock).await.unwrap();
    assert_eq!(
        exchange(&mut direct, b"get u\r\n").await,
        "VALUE u 0 4\r\nunix\r\nEND\r\n"
    );
    drop(c);
    proxy.stop().await;
    assert!(!psock.exists(), "the proxy removes its socket file");
}

/// The process is the subject: the binary serves a certificate, the files are replaced,
/// SIGHUP, and new connections get the new certificate while an old one keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_certificate_is_served_after_sighup() {
    let pki = Pki::new("cachelab test CA");
    let first = pki.issue("first", false);
    let second = pki.issue("second", false);
    let live = Issued {
        cert: pki.dir().join("live.pem"),
        key: pki.dir().join("live.key"),
    };
    std::fs::copy(&first.cert, &live.cert).unwrap();
    std::fs::copy(&first.key, &live.key).unwrap();
    let m = common::Memcached::start();
    let proxy = cachelab_testkit::Proxy::start_args(
        env!("CARGO_BIN_EXE_cachelab-proxy"),
        &[
            "-l".into(),
            "127.0.0.1".into(),
            "-p".into(),
            "0".into(),
            "-m".into(),
            m.addr.to_string(),
            "--tls-cert".into(),
            live.cert.display().to_string(),
            "--tls-key".into(),
            live.key.display().to_string(),
        ],
    );
    let served = |s: &TlsStream| s.get_ref().1.peer_certificates().unwrap()[0].clone();
    let der = |path: &Path| {
        CertificateDer::pem_file_iter(path)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
    };

    let mut old = tls_connect(proxy.addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    assert_eq!(served(&old), der(&first.cert));
    std::fs::copy(&second.cert, &live.cert).unwrap();
    std::fs::copy(&second.key, &live.key).unwrap();
    proxy.signal(libc::SIGHUP);
    let log = proxy.wait_for_log("TLS certificate reread", 1);
    assert!(log.contains("TLS certificate reread"), "{log}");
    let new = tls_connect(proxy.addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    assert_eq!(served(&new), der(&second.cert));
    assert_eq!(
        exchange(&mut old, b"set r 0 0 1\r\nr\r\n").await,
        "STORED\r\n"
    );

    // A broken file is refused: the second certificate keeps serving.
    std::fs::write(&live.key, "not a key").unwrap();
    proxy.signal(libc::SIGHUP);
    let log = proxy.wait_for_log("TLS certificate not reread", 1);
    assert!(log.contains("TLS certificate not reread"), "{log}");
    let after = tls_connect(proxy.addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    assert_eq!(served(&after), der(&second.cert));

    // A truncated certificate (a copy caught half-written) is named in one line, not as
    // the file's bytes in decimal.
    let pem = std::fs::read_to_string(&second.cert).unwrap();
    std::fs::write(&live.cert, &pem[..pem.len() / 2]).unwrap();
    proxy.signal(libc::SIGHUP);
    let log = proxy.wait_for_log("TLS certificate not reread", 2);
    let line = log
        .lines()
        .filter(|l| l.contains("TLS certificate not reread"))
        .nth(1)
        .unwrap_or_else(|| panic!("{log}"));
    assert!(
        line.contains("truncated: no -----END CERTIFICATE----- line"),
        "{line}"
    );
    assert!(!line.contains("[67, 69, 82"), "{line}");
}

/// TLS on both hops at once, with a value large enough that records wait for the socket
/// on each hop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_serves_tls_to_clients_and_speaks_it_to_memcached() {
    let pki = Pki::new("cachelab test CA");
    let proxy_cert = pki.issue("proxy", false);
    let server_cert = pki.issue("memcached", false);
    let (_m, maddr) = memcached_tls(&server_cert, &pki.ca).await;
    let value = vec![b'v'; 300 * 1024];
    let mut config = proxy_config(vec![maddr]);
    config.listeners[0].tls = Some(listener_tls(&pki, &proxy_cert, false));
    config.listeners[0].pool.server_tls = Some(ServerTlsSpec {
        ca: Some(pki.ca.clone()),
        ..ServerTlsSpec::default()
    });
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;
    let mut s = tls_connect(addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    let mut set = format!("set big 0 0 {}\r\n", value.len()).into_bytes();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n");
    assert_eq!(exchange(&mut s, &set).await, "STORED\r\n");
    let got = exchange(&mut s, b"get big\r\n").await;
    let header = format!("VALUE big 0 {}\r\n", value.len());
    assert!(got.starts_with(&header));
    assert_eq!(got.len(), header.len() + value.len() + 7);
    proxy.stop().await;
}

/// A redis-server child, killed on drop (also when an assertion fails).
struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// redis-server with TLS only and a password, on a free port; None without a
/// redis-server built with TLS.
async fn redis_tls(server: &Issued, ca: &Path, password: &str) -> Option<(Redis, SocketAddr)> {
    let port = common::free_port();
    let addr = SocketAddr::new(LOCALHOST, port);
    let tls = TlsListen {
        cert: server,
        ca,
        require_client_cert: false,
    };
    let child = server_commands::redis_tls(port, tls)
        .args(["--requirepass", password])
        .spawn()
        .ok()?;
    let mut child = Redis(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if child.0.try_wait().ok()?.is_some() {
            return None;
        }
        if tls_connect(addr, ca, None, Protocols::default())
            .await
            .is_ok()
        {
            return Some((child, addr));
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads until the reply bytes end as `expected` does.
async fn resp_exchange(stream: &mut TlsStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).await.unwrap();
    let mut reply = Vec::new();
    let mut buf = [0u8; 4096];
    while reply.len() < expected.len() {
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .expect("no reply within 5 s")
            .unwrap();
        assert!(n > 0, "closed after {:?}", String::from_utf8_lossy(&reply));
        reply.extend_from_slice(&buf[..n]);
    }
    assert_eq!(
        String::from_utf8_lossy(&reply),
        String::from_utf8_lossy(expected)
    );
}

/// A Redis pool over TLS with a password: the handshake, then the greeting (`AUTH`)
/// through it, then the clients' commands, from a TLS client, on the default shell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_pool_speaks_tls_and_greets_through_it() {
    let pki = Pki::new("cachelab test CA");
    let proxy_cert = pki.issue("proxy", false);
    let server_cert = pki.issue("redis", false);
    let Some((_redis, raddr)) = redis_tls(&server_cert, &pki.ca, "cachelab-pw").await else {
        eprintln!("skipped: no redis-server with TLS");
        return;
    };
    let mut config = proxy_config(vec![raddr]);
    let pool = &mut config.listeners[0].pool;
    pool.protocol = cachelab_proxy::routing::Protocol::Redis;
    pool.redis_auth = Some("cachelab-pw".into());
    pool.server_tls = Some(ServerTlsSpec {
        ca: Some(pki.ca.clone()),
        ..ServerTlsSpec::default()
    });
    config.listeners[0].tls = Some(listener_tls(&pki, &proxy_cert, false));
    let (listener, addr) = tcp_listener().await;
    let proxy = Proxy::start(config, listener).await;
    let mut s = tls_connect(addr, &pki.ca, None, Protocols::default())
        .await
        .unwrap();
    let auth = b"*2\r\n$4\r\nAUTH\r\n$11\r\ncachelab-pw\r\n";
    resp_exchange(&mut s, auth, b"+OK\r\n").await;
    let set = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\ntls\r\n";
    resp_exchange(&mut s, set, b"+OK\r\n").await;
    resp_exchange(&mut s, b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", b"$3\r\ntls\r\n").await;
    proxy.stop().await;
}
