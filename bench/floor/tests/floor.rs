//! The floor forwards like a proxy: every client gets its own replies, in order, whole,
//! however the bytes are split, while other clients come and go.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::thread;

use cachelab_protocol::Expect;
use cachelab_testkit::{Client, Memcached};

struct Floor {
    child: Child,
    addr: SocketAddr,
}

impl Floor {
    fn start(server: &Memcached) -> Floor {
        Floor::start_with(server, &[])
    }

    fn start_with(server: &Memcached, extra: &[&str]) -> Floor {
        let mut child = Command::new(env!("CARGO_BIN_EXE_cachelab-floor"))
            .args(["-p", "0", "-s", &server.addr.to_string()])
            .args(extra)
            .stdout(Stdio::piped())
            .spawn()
            .expect("cannot run cachelab-floor");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let addr = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .parse()
            .unwrap();
        Floor { child, addr }
    }
}

impl Drop for Floor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `--exit-after` ends the floor with status 0 (a profile-guided build's training run
/// needs a normal exit to write its profile), while clients were served until then.
#[test]
fn exit_after_ends_the_floor_normally_after_serving() {
    let server = Memcached::start();
    let mut floor = Floor::start_with(&server, &["--exit-after", "1"]);
    let started = std::time::Instant::now();
    let mut client = Client::connect(floor.addr);
    assert_eq!(client.set("floor-exit", "v"), "STORED\r\n");
    let status = floor.child.wait().unwrap();
    assert!(status.success(), "{status}");
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
}

#[test]
fn concurrent_clients_get_their_own_values_whole() {
    let server = Memcached::start();
    let floor = Floor::start(&server);
    let addr = floor.addr;
    let clients: Vec<_> = (0..4)
        .map(|c| {
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                for i in 0..150 {
                    // up to 200 KiB: a value spans many reads on both sides
                    let len = [3, 4096, 200 * 1024][i % 3];
                    let key = format!("floor{c}-{}", i % 5);
                    let value = format!("{c}{i}").repeat(len)[..len].to_string();
                    assert_eq!(client.set(&key, &value), "STORED\r\n");
                    let expected = format!("VALUE {key} 0 {}\r\n{value}\r\nEND\r\n", value.len());
                    assert_eq!(client.get(&[&key]), expected);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
}

#[test]
fn pipelined_requests_and_a_bad_one_are_answered_in_order() {
    let server = Memcached::start();
    let floor = Floor::start(&server);
    let mut client = Client::connect(floor.addr);
    client.send(b"set p1 0 0 2\r\nab\r\nset p2 0 0 x\r\nget p1 p2 nope\r\ndelete p1\r\nget p1\r\n");
    assert_eq!(client.read_reply(Expect::Store), b"STORED\r\n");
    assert_eq!(client.read_line(), "CLIENT_ERROR bad data chunk\r\n");
    assert_eq!(
        client.read_reply(Expect::Values),
        b"VALUE p1 0 2\r\nab\r\nEND\r\n"
    );
    assert_eq!(client.read_line(), "DELETED\r\n");
    assert_eq!(client.read_reply(Expect::Values), b"END\r\n");
}

#[test]
fn a_client_gone_with_replies_owed_leaves_the_others_served() {
    let server = Memcached::start();
    let floor = Floor::start(&server);
    for round in 0..20 {
        let mut gone = Client::connect(floor.addr);
        gone.send(b"get a b c\r\nset g 0 0 1\r\nx\r\nget g\r\n");
        drop(gone);
        let mut client = Client::connect(floor.addr);
        let key = format!("stay{round}");
        assert_eq!(client.set(&key, "v"), "STORED\r\n");
        assert_eq!(
            client.get(&[&key]),
            format!("VALUE {key} 0 1\r\nv\r\nEND\r\n")
        );
    }
}
