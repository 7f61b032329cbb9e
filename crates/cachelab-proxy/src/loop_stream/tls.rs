//! TLS over one of the event loop's nonblocking sockets, with rustls's sans-I/O API:
//! records are read from the socket only when the loop says it is readable, decrypted
//! into the caller's buffer, and encrypted records are handed to the kernel as far as it
//! takes them; the rest stay in the session until the socket is writable again. The
//! rustls driving is `cachelab-net`'s ([`session`]); this type adds the mio socket and
//! the session's cell.
//!
//! One type for both ends: a client's connection to a TLS listener (a
//! `ServerConnection`) and a worker's connection to a TLS server (a
//! `ClientConnection`). Each has one owner in one loop; the session sits in a
//! `RefCell` so that reads and writes share the plain socket's `&self` calls.

use std::cell::{RefCell, RefMut};
use std::io::{self, Read, Write};

use bytes::BytesMut;
use cachelab_net::stream::session;
use rustls::Connection;

use crate::mio_socket::{MioSocket, ReadOutcome};

/// The most plaintext one TLS record carries.
const MAX_RECORD_PLAINTEXT: usize = 16 * 1024;

pub struct TlsSocket {
    socket: MioSocket,
    session: RefCell<Connection>,
}

/// The socket as rustls's `read_tls`/`write_tls` want it.
struct Wire<'a>(&'a MioSocket);

impl Read for Wire<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.read_scratch(buf)
    }
}

impl Write for Wire<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl TlsSocket {
    pub fn new(socket: MioSocket, session: impl Into<Connection>) -> Self {
        TlsSocket {
            socket,
            session: RefCell::new(session.into()),
        }
    }

    pub fn socket(&self) -> &MioSocket {
        &self.socket
    }

    pub fn socket_mut(&mut self) -> &mut MioSocket {
        &mut self.socket
    }

    fn session(&self) -> RefMut<'_, Connection> {
        self.session.borrow_mut()
    }

    /// Carries the handshake on as far as the socket allows: true once it is done and
    /// its last records are out. Call on every event until then.
    pub fn handshake(&self) -> io::Result<bool> {
        session::handshake(&mut self.session(), &mut Wire(&self.socket))
    }

    /// Decrypted bytes into `scratch`: `Ok(0)` at the end of the stream (with or
    /// without close_notify), `WouldBlock` when neither the session nor the socket has
    /// any now.
    pub fn read_plain(&self, scratch: &mut [u8]) -> io::Result<usize> {
        session::read(&mut self.session(), &mut Wire(&self.socket), scratch)
    }

    /// Decrypted bytes into `buf`'s spare room (which the caller made non-empty). Never
    /// reports the socket drained with data: the session may hold more plaintext than
    /// there was room for, so the caller reads until `WouldBlock`.
    pub fn read_into(&self, buf: &mut BytesMut) -> io::Result<ReadOutcome> {
        let start = buf.len();
        // rustls's reader wants initialised bytes: zero no more than a record holds.
        let room = (buf.capacity() - start).min(MAX_RECORD_PLAINTEXT);
        debug_assert!(room > 0);
        buf.resize(start + room, 0);
        let read = self.read_plain(&mut buf[start..]);
        buf.truncate(start + *read.as_ref().unwrap_or(&0));
        match read {
            Ok(0) => Ok(ReadOutcome::Eof),
            Ok(n) => Ok(ReadOutcome::Data { n, drained: false }),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(ReadOutcome::WouldBlock),
            Err(e) => Err(e),
        }
    }

    /// Encrypts what the session takes of `buf` and sends what the kernel takes of the
    /// records (`WouldBlock` while older records wait: no more plaintext until they
    /// are out).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        session::write(&mut self.session(), &mut Wire(&self.socket), buf)
    }

    /// Sends records already encrypted but not yet taken by the kernel; true if none
    /// are left.
    pub fn flush(&self) -> io::Result<bool> {
        session::flush(&mut self.session(), &mut Wire(&self.socket))
    }

    /// close_notify (as far as the kernel takes it), then FIN.
    pub fn shutdown_write(&self) {
        session::close_notify(&mut self.session(), &mut Wire(&self.socket));
        self.socket.shutdown_write();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use mio::net::UnixStream;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

    use super::*;

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A client and a server session over a nonblocking socket pair (a self-signed
    /// certificate for `localhost`).
    fn pair() -> (TlsSocket, TlsSocket) {
        let issued = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        let cert = CertificateDer::from(issued.cert.der().to_vec());
        let key =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(issued.signing_key.serialize_der()));
        let server = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let client = rustls::ClientConnection::new(Arc::new(client), name).unwrap();
        let server = rustls::ServerConnection::new(Arc::new(server)).unwrap();
        (
            TlsSocket::new(MioSocket::Unix(UnixStream::from_std(a)), client),
            TlsSocket::new(MioSocket::Unix(UnixStream::from_std(b)), server),
        )
    }

    fn handshake(client: &TlsSocket, server: &TlsSocket) {
        for _ in 0..100 {
            let c = client.handshake().unwrap();
            let s = server.handshake().unwrap();
            if c && s {
                return;
            }
        }
        panic!("the handshake did not finish");
    }

    #[test]
    fn more_than_the_kernel_takes_arrives_whole_once_the_backlog_is_flushed() {
        let (client, server) = pair();
        handshake(&client, &server);
        let sent: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        let mut offset = 0;
        let mut got = BytesMut::with_capacity(64 * 1024);
        let mut backlog_seen = false;
        while got.len() < sent.len() {
            if offset < sent.len() {
                match client.write(&sent[offset..]) {
                    Ok(n) => offset += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => backlog_seen = true,
                    Err(e) => panic!("{e}"),
                }
            } else if !client.flush().unwrap() {
                backlog_seen = true;
            }
            if got.capacity() == got.len() {
                got.reserve(64 * 1024);
            }
            match server.read_into(&mut got).unwrap() {
                ReadOutcome::Data { drained, .. } => assert!(!drained),
                ReadOutcome::WouldBlock => {}
                ReadOutcome::Eof => panic!("early end"),
            }
        }
        assert!(backlog_seen, "the socket pair's buffer never filled");
        assert_eq!(&got[..], &sent[..]);
        client.shutdown_write();
        let mut scratch = [0u8; 16];
        assert_eq!(server.read_plain(&mut scratch).unwrap(), 0, "close_notify");
    }

    #[test]
    fn a_peer_closing_during_the_handshake_is_an_error_not_a_wait() {
        let (client, server) = pair();
        assert!(!client.handshake().unwrap());
        client.socket().shutdown_write();
        drop(client);
        let e = loop {
            match server.handshake() {
                Ok(true) => panic!("a handshake with nobody"),
                Ok(false) => {}
                Err(e) => break e,
            }
        };
        assert!(
            matches!(
                e.kind(),
                io::ErrorKind::UnexpectedEof
                    | io::ErrorKind::BrokenPipe
                    | io::ErrorKind::ConnectionReset
            ),
            "{e}"
        );
    }
}
