//! A connection to a server: TCP, a Unix socket, or TLS over TCP, one type for the
//! workers' backends and the health probes.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpStream, UnixStream};
use tokio_rustls::client::TlsStream;

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
                let stream = TcpStream::connect(addr)
                    .await
                    .map_err(ConnectError::Connect)?;
                let _ = stream.set_nodelay(true);
                match tls {
                    None => Ok(ServerStream::Tcp(stream)),
                    Some(tls) => {
                        let connector = tokio_rustls::TlsConnector::from(Arc::clone(&tls.config));
                        let stream = connector
                            .connect(tls.name.clone(), stream)
                            .await
                            .map_err(ConnectError::Handshake)?;
                        Ok(ServerStream::Tls(Box::new(stream)))
                    }
                }
            }
            (Endpoint::Unix(_), Some(_)) => Err(ConnectError::UnixTls),
            (Endpoint::Unix(path), None) => Ok(ServerStream::Unix(
                UnixStream::connect(path)
                    .await
                    .map_err(ConnectError::Connect)?,
            )),
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
    stream.flush().await.map_err(ConnectError::GreetingIo)?;
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

pub enum ServerStream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl ServerStream {
    /// For a connection with no request out: `Ready(Ok(0))` if the server closed it,
    /// `Ready(Ok(n))` if it sent `n` bytes nobody asked for (read into `probe`, the
    /// connection is to be dropped), `Ready(Err)` if it failed, `Pending` while it is
    /// quiet. Readiness is checked on the socket without reading; with TLS, records
    /// that carry no data (a TLS 1.3 session ticket) are consumed and do not count.
    pub fn poll_idle(&mut self, cx: &mut Context<'_>, probe: &mut [u8]) -> Poll<io::Result<usize>> {
        match self {
            ServerStream::Tcp(s) => {
                poll_idle_plain(|cx| s.poll_read_ready(cx), |b| s.try_read(b), cx, probe)
            }
            ServerStream::Unix(s) => {
                poll_idle_plain(|cx| s.poll_read_ready(cx), |b| s.try_read(b), cx, probe)
            }
            ServerStream::Tls(tls) => {
                let (socket, session) = tls.get_ref();
                // Plaintext already decrypted, or the end seen, is ready without the
                // socket.
                if session.wants_read() {
                    match socket.poll_read_ready(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                        Poll::Ready(Ok(())) => {}
                    }
                }
                let mut buf = ReadBuf::new(probe);
                match Pin::new(tls.as_mut()).poll_read(cx, &mut buf) {
                    Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
                    Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

fn poll_idle_plain(
    mut ready: impl FnMut(&mut Context<'_>) -> Poll<io::Result<()>>,
    try_read: impl Fn(&mut [u8]) -> io::Result<usize>,
    cx: &mut Context<'_>,
    probe: &mut [u8],
) -> Poll<io::Result<usize>> {
    match ready(cx) {
        Poll::Ready(Ok(())) => match try_read(probe) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                // Readiness was stale; poll again to register for the next event.
                match ready(cx) {
                    Poll::Ready(_) => Poll::Ready(Err(e)),
                    Poll::Pending => Poll::Pending,
                }
            }
            Err(e) => Poll::Ready(Err(e)),
        },
        Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
        Poll::Pending => Poll::Pending,
    }
}

impl AsyncRead for ServerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            ServerStream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for ServerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            ServerStream::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            ServerStream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Tcp(s) => Pin::new(s).poll_flush(cx),
            ServerStream::Unix(s) => Pin::new(s).poll_flush(cx),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            ServerStream::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            ServerStream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            ServerStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    //! An idle connection's end, as the workers see it through [`ServerStream::poll_idle`]
    //! (`backend::poll_idle_closed`): the same three outcomes for TCP, a Unix socket and
    //! TLS, so a server that closes or answers out of step is noticed on each.

    use std::future::poll_fn;
    use std::path::Path;
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::{TcpListener, UnixListener};

    use super::*;
    use crate::tls::{server_config, ListenerTlsSpec, Protocols, ServerTls, ServerTlsSpec};

    /// Quiet means no outcome within this long (a peer's bytes are local: they arrive in
    /// microseconds).
    const QUIET: Duration = Duration::from_millis(200);
    /// How long an expected outcome may take on a loaded machine.
    const EXPECTED: Duration = Duration::from_secs(5);

    /// What `poll_idle` says within `within`: None while the connection is quiet.
    async fn idle_outcome(
        stream: &mut ServerStream,
        within: Duration,
    ) -> Option<io::Result<usize>> {
        let mut probe = [0u8; 64];
        tokio::time::timeout(within, poll_fn(|cx| stream.poll_idle(cx, &mut probe)))
            .await
            .ok()
    }

    /// A server's side of a connection, written to like a server would.
    type Peer = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

    fn temp_dir() -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap()
    }

    async fn tcp_pair() -> (ServerStream, Peer) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let connector = Connector {
            endpoint: Endpoint::Tcp(listener.local_addr().unwrap()),
            tls: None,
            dialect: Dialect::Memcached,
        };
        let (ours, theirs) = tokio::join!(connector.connect(), listener.accept());
        (ours.unwrap(), Box::new(theirs.unwrap().0))
    }

    async fn unix_pair(dir: &Path) -> (ServerStream, Peer) {
        let path = dir.join("server.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let connector = Connector {
            endpoint: Endpoint::Unix(path),
            tls: None,
            dialect: Dialect::Memcached,
        };
        let (ours, theirs) = tokio::join!(connector.connect(), listener.accept());
        (ours.unwrap(), Box::new(theirs.unwrap().0))
    }

    /// TLS 1.3 (its server sends session tickets after the handshake: records with no
    /// data, which must not count as bytes nobody asked for).
    async fn tls_pair(dir: &Path) -> (ServerStream, Peer) {
        let certified = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let (cert, key) = (dir.join("server.pem"), dir.join("server.key"));
        std::fs::write(&cert, certified.cert.pem()).unwrap();
        std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(
            server_config(&ListenerTlsSpec {
                cert,
                key,
                client_ca: None,
                protocols: Protocols::default(),
            })
            .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let verified = ServerTlsSpec {
            ca: Some(dir.join("server.pem")),
            sni: Some("localhost".into()),
            ..ServerTlsSpec::default()
        };
        let connector = Connector {
            endpoint: Endpoint::Tcp(listener.local_addr().unwrap()),
            tls: Some(Arc::new(ServerTls::build(&verified, "127.0.0.1").unwrap())),
            dialect: Dialect::Memcached,
        };
        let accept = async {
            let (socket, _) = listener.accept().await.unwrap();
            acceptor.accept(socket).await.unwrap()
        };
        let (ours, theirs) = tokio::join!(connector.connect(), accept);
        (ours.unwrap(), Box::new(theirs))
    }

    async fn pair(kind: &str, dir: &Path) -> (ServerStream, Peer) {
        match kind {
            "tcp" => tcp_pair().await,
            "unix" => unix_pair(dir).await,
            "tls" => tls_pair(dir).await,
            _ => unreachable!(),
        }
    }

    #[tokio::test]
    async fn a_quiet_server_keeps_its_idle_connection_on_every_transport() {
        for kind in ["tcp", "unix", "tls"] {
            let dir = temp_dir();
            let (mut ours, _theirs) = pair(kind, dir.path()).await;
            assert!(idle_outcome(&mut ours, QUIET).await.is_none(), "{kind}");
        }
    }

    #[tokio::test]
    async fn bytes_nobody_asked_for_are_seen_on_every_transport() {
        for kind in ["tcp", "unix", "tls"] {
            let dir = temp_dir();
            let (mut ours, mut theirs) = pair(kind, dir.path()).await;
            theirs.write_all(b"END\r\n").await.unwrap();
            theirs.flush().await.unwrap();
            match idle_outcome(&mut ours, EXPECTED).await {
                Some(Ok(n)) => assert!(n > 0, "{kind}: {n} bytes"),
                other => panic!("{kind}: {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn a_server_closing_an_idle_connection_is_seen_on_every_transport() {
        for kind in ["tcp", "unix", "tls"] {
            let dir = temp_dir();
            let (mut ours, mut theirs) = pair(kind, dir.path()).await;
            theirs.shutdown().await.unwrap();
            drop(theirs);
            match idle_outcome(&mut ours, EXPECTED).await {
                Some(Ok(0)) => {}
                other => panic!("{kind}: {other:?}"),
            }
        }
    }
}
