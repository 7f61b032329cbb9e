//! No client can read another client's reply: neither through a request that the
//! proxy and memcached would frame differently (the proxy refuses it itself), nor
//! through a server that answers out of step (the proxy closes that connection and
//! delivers the stray reply to nobody). And a client's bytes never eject a server.

mod common;
#[allow(dead_code)] // the differential fuzz uses the rest
mod diff;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Memcached, Proxy};
use diff::stat;

/// Reads from `stream` until `expected` bytes arrived or 2 s passed.
fn read_for(stream: &mut TcpStream, expected: usize) -> Vec<u8> {
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut got = Vec::new();
    while got.len() < expected && Instant::now() < deadline {
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(_) => {}
        }
    }
    got
}

/// A client that reads one reply line at a time.
fn line_client(addr: std::net::SocketAddr) -> (TcpStream, BufReader<TcpStream>) {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    (stream.try_clone().unwrap(), BufReader::new(stream))
}

/// The reproduction from issue 26: an `ms` whose base64 key is 268 characters as sent
/// (200 bytes decoded), which memcached refuses without swallowing its data block.
fn hostile_request() -> Vec<u8> {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD.encode([b'x'; 200]);
    assert_eq!(key.len(), 268);
    format!("ms {key} 2 b\r\nhi\r\nmg zsentinel v\r\n").into_bytes()
}

#[test]
fn a_request_memcached_frames_differently_never_answers_another_client() {
    let direct = Memcached::start();
    let behind = Memcached::start();
    let proxy = Proxy::start(&[&behind], &["-t", "1"]);
    // What memcached itself answers the hostile client.
    let mut reference = TcpStream::connect(direct.addr).unwrap();
    reference.write_all(&hostile_request()).unwrap();
    let expected = b"CLIENT_ERROR bad command line format\r\nERROR\r\nEN\r\n";
    assert_eq!(read_for(&mut reference, expected.len()), expected);

    for round in 0..30 {
        let mut hostile = TcpStream::connect(proxy.addr).unwrap();
        let mut other = TcpStream::connect(proxy.addr).unwrap();
        let sender = thread::spawn(move || {
            hostile.write_all(&hostile_request()).unwrap();
            read_for(&mut hostile, expected.len())
        });
        other.write_all(b"mg zother v\r\n").unwrap();
        let others = read_for(&mut other, 4);
        assert_eq!(
            others, b"EN\r\n",
            "round {round}: the other client got someone's reply"
        );
        assert_eq!(sender.join().unwrap(), expected, "round {round}");
    }
    assert_eq!(stat(proxy.addr, "server_ejections"), 0);
    assert_eq!(
        stat(proxy.addr, "out_of_step"),
        0,
        "the proxy refused it itself"
    );
}

/// A server that answers `get evil` with its END and then one reply too many (at once,
/// or a moment later), and every other get with END: a parser bug's consequence,
/// re-created on purpose.
fn start_lying_server() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    thread::spawn(move || {
        for (n, conn) in listener.incoming().enumerate() {
            let Ok(mut conn) = conn else { return };
            thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut line = String::new();
                let mut lies = 0usize;
                while reader.read_line(&mut line).unwrap_or(0) > 0 {
                    let reply: &[u8] = if line.starts_with("get evil") {
                        lies += 1;
                        let stray = b"VALUE evil 0 4\r\nleak\r\nEND\r\n";
                        if (n + lies).is_multiple_of(2) {
                            let _ = conn.write_all(&[&b"END\r\n"[..], stray].concat());
                        } else {
                            let _ = conn.write_all(b"END\r\n");
                            thread::sleep(Duration::from_millis(30));
                            let _ = conn.write_all(stray);
                        }
                        line.clear();
                        continue;
                    } else if line.starts_with("get ") {
                        b"END\r\n"
                    } else if let Some(opaque) = line
                        .strip_prefix("mg ")
                        .and_then(|rest| rest.split_whitespace().find(|t| t.starts_with('O')))
                    {
                        let _ = conn.write_all(format!("EN {opaque}\r\n").as_bytes());
                        line.clear();
                        continue;
                    } else if line.starts_with("version") {
                        b"VERSION 1.6.18\r\n"
                    } else {
                        b"ERROR\r\n"
                    };
                    if conn.write_all(reply).is_err() {
                        return;
                    }
                    line.clear();
                }
            });
        }
    });
    addr
}

#[test]
fn a_reply_read_out_of_step_reaches_nobody_and_the_connection_is_replaced() {
    let server = start_lying_server();
    let proxy = Proxy::start_args(&[
        "-l".into(),
        "127.0.0.1".into(),
        "-p".into(),
        "0".into(),
        "-t".into(),
        "1".into(),
        "-m".into(),
        server.to_string(),
    ]);
    // Until both clients have been served a few times (bounded): on a busy machine a
    // fixed window may hold too few exchanges to say anything.
    let deadline = Instant::now() + Duration::from_secs(30);
    let done = Arc::new(AtomicBool::new(false));
    let asked = Arc::new(AtomicUsize::new(0));
    let liar = thread::spawn({
        let addr = proxy.addr;
        let (done, asked) = (Arc::clone(&done), Arc::clone(&asked));
        move || {
            let (mut writer, mut reader) = line_client(addr);
            while !done.load(Ordering::Relaxed) && Instant::now() < deadline {
                writer.write_all(b"get evil\r\n").unwrap();
                // The whole reply (its own value may come back): reading one line per
                // request would let this client's requests pile up in the one worker's
                // queue, ahead of the other client's, until those wait for seconds.
                let mut line = String::new();
                while line != "END\r\n" && !line.contains("ERROR") {
                    line.clear();
                    reader.read_line(&mut line).unwrap();
                }
                asked.fetch_add(1, Ordering::Relaxed);
            }
            asked.load(Ordering::Relaxed)
        }
    });
    let (mut writer, mut reader) = line_client(proxy.addr);
    let (mut clean, mut refused) = (0, 0);
    while (clean <= 10 || asked.load(Ordering::Relaxed) <= 10) && Instant::now() < deadline {
        writer.write_all(b"get good\r\n").unwrap();
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        assert!(
            !line.contains("evil"),
            "another client's reply arrived: {line:?}"
        );
        if line == "END\r\n" {
            clean += 1;
        } else if line.starts_with("SERVER_ERROR") && line.contains("out of step") {
            // The stray reply was read for this request: refused, not relayed.
            refused += 1;
        } else {
            panic!("unexpected reply {line:?}");
        }
    }
    done.store(true, Ordering::Relaxed);
    assert!(liar.join().unwrap() > 10);
    assert!(clean > 10, "{clean} clean replies, {refused} refused");
    assert!(
        stat(proxy.addr, "out_of_step") > 0,
        "the stray replies were noticed"
    );
    assert_eq!(stat(proxy.addr, "server_ejections"), 0);
}
