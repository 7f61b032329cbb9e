//! The streams over real socket pairs (TCP on loopback, Unix), plain and TLS with the
//! testkit's CA: the same cases for every transport.

use std::io::{self, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

use cachelab_testkit::pki::Pki;
use rustls::{ClientConnection, ServerConnection};

use super::*;
use crate::tls::{server_config, ListenerTlsSpec, Protocols, ServerTls, ServerTlsSpec};

fn tcp_pair() -> (TcpStream, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let (server, _) = listener.accept().unwrap();
    for s in [&client, &server] {
        s.set_nonblocking(true).unwrap();
    }
    (client, server)
}

fn unix_pair() -> (UnixStream, UnixStream) {
    let (client, server) = UnixStream::pair().unwrap();
    for s in [&client, &server] {
        s.set_nonblocking(true).unwrap();
    }
    (client, server)
}

/// A client and a server TLS session for 127.0.0.1, issued by `pki`.
fn sessions(pki: &Pki) -> (ClientConnection, ServerConnection) {
    let issued = pki.issue("server", false);
    let listener = ListenerTlsSpec {
        cert: issued.cert,
        key: issued.key,
        client_ca: None,
        protocols: Protocols::default(),
    };
    let spec = ServerTlsSpec {
        ca: Some(pki.ca.clone()),
        ..ServerTlsSpec::default()
    };
    let tls = ServerTls::build(&spec, "127.0.0.1").unwrap();
    (
        ClientConnection::new(Arc::clone(&tls.config), tls.name).unwrap(),
        ServerConnection::new(server_config(&listener).unwrap()).unwrap(),
    )
}

fn tls<S: Read + Write>((client, server): (S, S), pki: &Pki) -> (Stream<S>, Stream<S>) {
    let (c, s) = sessions(pki);
    (Stream::tls(client, c), Stream::tls(server, s))
}

fn plain<S: Read + Write>((client, server): (S, S)) -> (Stream<S>, Stream<S>) {
    (Stream::Plain(client), Stream::Plain(server))
}

fn handshake<S: Read + Write>(client: &mut Stream<S>, server: &mut Stream<S>) {
    for _ in 0..100 {
        let c = client.handshake().unwrap();
        let s = server.handshake().unwrap();
        if c && s {
            return;
        }
    }
    panic!("the handshake did not finish");
}

/// Sends `len` bytes from `from` to `to`, each side never blocking; true if the sender
/// was ever held back by a full socket.
fn transfer<S: Read + Write>(from: &mut Stream<S>, to: &mut Stream<S>, len: usize) -> bool {
    let sent: Vec<u8> = (0..len as u32).map(|i| (i % 251) as u8).collect();
    let mut offset = 0;
    let mut got = Vec::with_capacity(len);
    let mut scratch = vec![0u8; 64 * 1024];
    let mut held_back = false;
    // Fill the socket before reading anything, so a big transfer meets a full kernel.
    while offset < len && !held_back {
        match from.write(&sent[offset..]) {
            Ok(n) => offset += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => held_back = true,
            Err(e) => panic!("{e}"),
        }
    }
    while got.len() < len {
        if offset < len {
            match from.write(&sent[offset..]) {
                Ok(n) => offset += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => held_back = true,
                Err(e) => panic!("{e}"),
            }
        } else if !from.flush_records().unwrap() {
            held_back = true;
        }
        match to.read(&mut scratch) {
            Ok(0) => panic!("early end after {} bytes", got.len()),
            Ok(n) => got.extend_from_slice(&scratch[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
    }
    assert!(got == sent, "the bytes arrived changed");
    held_back
}

/// Nothing to read is `WouldBlock`, bytes go both ways, more than the kernel buffers
/// arrives whole, and a shutdown reads as the end of the stream.
fn carries_bytes<S: Read + Write + Shutdown>(
    (mut client, mut server): (Stream<S>, Stream<S>),
    big: usize,
) -> bool {
    handshake(&mut client, &mut server);
    let mut scratch = [0u8; 16];
    let e = server.read(&mut scratch).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    transfer(&mut client, &mut server, 5);
    transfer(&mut server, &mut client, 7);
    let held_back = transfer(&mut client, &mut server, big);
    client.shutdown_write().unwrap();
    let end = loop {
        match server.read(&mut scratch) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            other => break other.unwrap(),
        }
    };
    assert_eq!(end, 0, "the end of the stream");
    // The other direction still works after a half close.
    transfer(&mut server, &mut client, 3);
    held_back
}

const BIG: usize = 1 << 20;

#[test]
fn plain_tcp_carries_bytes_both_ways_and_ends() {
    carries_bytes(plain(tcp_pair()), BIG);
}

#[test]
fn plain_unix_carries_more_than_the_kernel_buffers() {
    assert!(carries_bytes(plain(unix_pair()), BIG), "never held back");
}

#[test]
fn tls_over_tcp_carries_bytes_both_ways_and_ends_with_close_notify() {
    let pki = Pki::new("cachelab-net test CA");
    carries_bytes(tls(tcp_pair(), &pki), BIG);
}

#[test]
fn tls_over_unix_holds_plaintext_back_while_records_wait() {
    let pki = Pki::new("cachelab-net test CA");
    assert!(
        carries_bytes(tls(unix_pair(), &pki), BIG),
        "never held back"
    );
}

#[test]
fn the_session_tells_what_was_negotiated() {
    let pki = Pki::new("cachelab-net test CA");
    let (mut client, mut server) = tls(unix_pair(), &pki);
    assert!(client.is_tls());
    handshake(&mut client, &mut server);
    let version = client.session().unwrap().protocol_version();
    assert_eq!(version, Some(rustls::ProtocolVersion::TLSv1_3));
    let (plain_client, _) = plain(unix_pair());
    assert!(plain_client.session().is_none() && !plain_client.is_tls());
}

#[test]
fn a_peer_closing_during_the_handshake_is_an_error_not_a_wait() {
    let pki = Pki::new("cachelab-net test CA");
    let (mut client, mut server) = tls(tcp_pair(), &pki);
    assert!(!client.handshake().unwrap());
    client.socket().shutdown_write().unwrap();
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

#[test]
fn a_peer_that_does_not_speak_tls_is_invalid_data() {
    let pki = Pki::new("cachelab-net test CA");
    let (c, _) = sessions(&pki);
    let (client, mut server) = unix_pair();
    let mut client = Stream::tls(client, c);
    assert!(!client.handshake().unwrap());
    server.write_all(b"VERSION 1.6.21\r\n").unwrap();
    let e = loop {
        match client.handshake() {
            Ok(done) => assert!(!done),
            Err(e) => break e,
        }
    };
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    let rustls_error = e.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>());
    assert!(
        matches!(rustls_error, Some(rustls::Error::InvalidMessage(_))),
        "{e}"
    );
}
