//! How to reach a server (`Connector`: where, with which TLS settings, what it speaks),
//! and the health probe's connection to it: TCP, a Unix socket, or TLS over TCP. The
//! workers' connections are the event loop's (`evloop/server_link.rs`); the probe runs
//! on the control plane's runtime, and its TLS is driven by the same sans-I/O functions
//! (`cachelab_net::stream::session`) on the socket's readiness.

use std::io::{self, Read, Write};
use std::sync::Arc;

use cachelab_net::stream::session;
use rustls::{ClientConnection, Connection};
use tokio::net::{TcpStream, UnixStream};

use crate::dialect::{Dialect, GreetingError};
use crate::endpoint::Endpoint;
use crate::tls::ServerTls;

/// How to reach one server: where, with which TLS settings, and what it speaks (a
/// Redis server may need `AUTH` and `SELECT` before it is used).
#[derive(Debug, Clone)]
pub struct Connector {
    pub endpoint: Endpoint,
    pub tls: Option<Arc<ServerTls>>,
    pub dialect: Dialect,
}

/// Why a connection to a server could not be made; the text is the `SERVER_ERROR`
/// reason and the log's.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect failed: {0}")]
    Connect(io::Error),
    #[error("TLS handshake failed: {0}")]
    Handshake(io::Error),
    #[error("TLS to a Unix socket server is not supported")]
    UnixTls,
    #[error("{0}")]
    Greeting(#[from] GreetingError),
    #[error("greeting failed: {0}")]
    GreetingIo(io::Error),
}

impl Connector {
    /// Connects (and handshakes, and greets); the caller bounds the time it may take.
    pub async fn connect(&self) -> Result<ServerStream, ConnectError> {
        let mut stream = self.open().await?;
        let greeting = self.dialect.greeting();
        if !greeting.is_empty() {
            greet(&mut stream, &self.dialect, &greeting).await?;
        }
        Ok(stream)
    }

    async fn open(&self) -> Result<ServerStream, ConnectError> {
        match (&self.endpoint, &self.tls) {
            (Endpoint::Tcp(addr), tls) => {
                let socket = TcpStream::connect(addr)
                    .await
                    .map_err(ConnectError::Connect)?;
                let _ = socket.set_nodelay(true);
                let mut stream = ServerStream {
                    socket: Socket::Tcp(socket),
                    tls: None,
                };
                if let Some(tls) = tls {
                    let session = ClientConnection::new(Arc::clone(&tls.config), tls.name.clone())
                        .map_err(|e| ConnectError::Handshake(io::Error::other(e)))?;
                    stream.tls = Some(session.into());
                    stream.handshake().await.map_err(ConnectError::Handshake)?;
                }
                Ok(stream)
            }
            (Endpoint::Unix(_), Some(_)) => Err(ConnectError::UnixTls),
            (Endpoint::Unix(path), None) => Ok(ServerStream {
                socket: Socket::Unix(
                    UnixStream::connect(path)
                        .await
                        .map_err(ConnectError::Connect)?,
                ),
                tls: None,
            }),
        }
    }
}

/// Sends `greeting` and reads its answer; only an accepted greeting makes the
/// connection usable (its replies are not left for the first request to read).
async fn greet(
    stream: &mut ServerStream,
    dialect: &Dialect,
    greeting: &[u8],
) -> Result<(), ConnectError> {
    stream
        .write_all(greeting)
        .await
        .map_err(ConnectError::GreetingIo)?;
    let mut answer = Vec::with_capacity(64);
    let mut chunk = [0u8; 512];
    loop {
        if dialect.check_greeting(&answer)?.is_some() {
            return Ok(());
        }
        let n = stream
            .read(&mut chunk)
            .await
            .map_err(ConnectError::GreetingIo)?;
        if n == 0 {
            return Err(ConnectError::GreetingIo(
                io::ErrorKind::UnexpectedEof.into(),
            ));
        }
        answer.extend_from_slice(&chunk[..n]);
    }
}

enum Socket {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Socket {
    async fn readable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.readable().await,
            Socket::Unix(s) => s.readable().await,
        }
    }

    async fn writable(&self) -> io::Result<()> {
        match self {
            Socket::Tcp(s) => s.writable().await,
            Socket::Unix(s) => s.writable().await,
        }
    }
}

/// `io::Read`/`io::Write` on the nonblocking socket for the session functions (a
/// `WouldBlock` clears tokio's readiness, so the next wait is a real one).
struct Io<'a>(&'a Socket);

impl Read for Io<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0 {
            Socket::Tcp(s) => s.try_read(buf),
            Socket::Unix(s) => s.try_read(buf),
        }
    }
}

impl Write for Io<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self.0 {
            Socket::Tcp(s) => s.try_write(buf),
            Socket::Unix(s) => s.try_write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The probe's connection to a server, plain or TLS.
pub struct ServerStream {
    socket: Socket,
    tls: Option<Connection>,
}

impl ServerStream {
    async fn handshake(&mut self) -> io::Result<()> {
        let tls = self.tls.as_mut().expect("a TLS connection");
        while !session::handshake(tls, &mut Io(&self.socket))? {
            if tls.wants_write() {
                self.socket.writable().await?;
            } else {
                self.socket.readable().await?;
            }
        }
        Ok(())
    }

    /// Sends all of `buf` (with TLS, encrypted and out of the session).
    pub async fn write_all(&mut self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let written = match self.tls.as_mut() {
                None => Io(&self.socket).write(buf),
                Some(tls) => session::write(tls, &mut Io(&self.socket), buf),
            };
            match written {
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.socket.writable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(tls) = self.tls.as_mut() {
            while !session::flush(tls, &mut Io(&self.socket))? {
                self.socket.writable().await?;
            }
        }
        Ok(())
    }

    /// Reads what the server sent (decrypted): `Ok(0)` at its end.
    pub async fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let read = match self.tls.as_mut() {
                None => Io(&self.socket).read(buf),
                Some(tls) => session::read(tls, &mut Io(&self.socket), buf),
            };
            match read {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.socket.readable().await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The probe's connection over each transport, against a server thread that answers
    //! `version` as memcached does (its TLS side is `cachelab-net`'s stream too).

    use std::net::TcpListener;
    use std::os::unix::net::UnixListener;
    use std::path::Path;
    use std::time::Duration;

    use cachelab_net::stream::Stream;
    use cachelab_testkit::pki::Pki;

    use super::*;
    use crate::tls::{server_config, ListenerTlsSpec, Protocols, ServerTls, ServerTlsSpec};

    fn temp_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap()
    }

    /// Reads one request line and answers it; the connection then closes.
    fn answer_version<S: Read + Write>(mut stream: Stream<S>) {
        while !stream.handshake().unwrap() {}
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while !line.ends_with(b"\r\n") {
            if stream.read(&mut byte).unwrap() == 0 {
                return;
            }
            line.push(byte[0]);
        }
        assert_eq!(line, b"version\r\n");
        stream.write_all(b"VERSION 1.6.0\r\n").unwrap();
        while stream.flush().is_err() {}
    }

    /// A server certificate from `issuer` (the testkit's CA), and a connector to `addr`
    /// that trusts the CA `trusted`.
    fn certified(
        issuer: &Pki,
        addr: std::net::SocketAddr,
        trusted: &Path,
    ) -> (ListenerTlsSpec, Connector) {
        let issued = issuer.issue("server", false);
        let trusted = ServerTlsSpec {
            ca: Some(trusted.to_path_buf()),
            sni: Some("localhost".into()),
            ..ServerTlsSpec::default()
        };
        let spec = ListenerTlsSpec {
            cert: issued.cert,
            key: issued.key,
            client_ca: None,
            protocols: Protocols::default(),
        };
        let connector = Connector {
            endpoint: Endpoint::Tcp(addr),
            tls: Some(Arc::new(ServerTls::build(&trusted, "127.0.0.1").unwrap())),
            dialect: Dialect::Memcached,
        };
        (spec, connector)
    }

    async fn ask_version(connector: &Connector) -> Result<Vec<u8>, ConnectError> {
        let mut stream = connector.connect().await?;
        stream.write_all(b"version\r\n").await.unwrap();
        let mut reply = Vec::new();
        let mut buf = [0u8; 64];
        while !reply.ends_with(b"\r\n") {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the server closed before answering");
            reply.extend_from_slice(&buf[..n]);
        }
        Ok(reply)
    }

    /// Asks `connector` for the version while `serve` answers on a thread.
    async fn probed(connector: Connector, serve: impl FnOnce() + Send + 'static) {
        let server = std::thread::spawn(serve);
        assert_eq!(ask_version(&connector).await.unwrap(), b"VERSION 1.6.0\r\n");
        server.join().unwrap();
    }

    #[tokio::test]
    async fn a_probe_is_answered_over_tcp_a_unix_socket_and_tls() {
        let dir = temp_dir();
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = Endpoint::Tcp(tcp.local_addr().unwrap());
        let plain = |endpoint| Connector {
            endpoint,
            tls: None,
            dialect: Dialect::Memcached,
        };
        probed(plain(endpoint), move || {
            answer_version(Stream::Plain(tcp.accept().unwrap().0))
        })
        .await;

        let path = dir.path().join("server.sock");
        let unix = UnixListener::bind(&path).unwrap();
        probed(plain(Endpoint::Unix(path)), move || {
            answer_version(Stream::Plain(unix.accept().unwrap().0))
        })
        .await;

        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let pki = Pki::new("cachelab probe test CA");
        let (spec, connector) = certified(&pki, listener.local_addr().unwrap(), &pki.ca);
        let config = server_config(&spec).unwrap();
        probed(connector, move || {
            let (socket, _) = listener.accept().unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            answer_version(Stream::tls(
                socket,
                rustls::ServerConnection::new(config).unwrap(),
            ));
        })
        .await;
    }

    #[tokio::test]
    async fn a_server_certificate_nobody_trusts_fails_the_handshake_in_one_line() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // The connector trusts another CA than the one that signed the server.
        let (pki, stranger) = (
            Pki::new("cachelab server CA"),
            Pki::new("cachelab other CA"),
        );
        let (spec, connector) = certified(&pki, listener.local_addr().unwrap(), &stranger.ca);
        let config = server_config(&spec).unwrap();
        let server = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            socket
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut stream = Stream::tls(socket, rustls::ServerConnection::new(config).unwrap());
            // Until the client's alert ends it.
            while let Ok(false) = stream.handshake() {}
        });
        let error = ask_version(&connector).await.unwrap_err();
        assert!(matches!(error, ConnectError::Handshake(_)), "{error}");
        let text = error.to_string();
        assert!(
            text.starts_with("TLS handshake failed: ") && !text.contains('\n'),
            "{text}"
        );
        server.join().unwrap();
    }
}
