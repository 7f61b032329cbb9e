//! The meta protocol through the proxy: byte for byte what memcached answers directly
//! (one server), quiet mode included; routed by key like the text commands; writes
//! replicated.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{start_servers, Client, Memcached, Proxy};

/// Sends `request` followed by `mn` and returns everything before the `MN` that answers
/// it (no case's data contains "MN").
fn exchange(addr: SocketAddr, stream: &mut TcpStream, request: &[u8]) -> Vec<u8> {
    let mut bytes = request.to_vec();
    bytes.extend_from_slice(b"mn\r\n");
    stream.write_all(&bytes).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while !got.ends_with(b"MN\r\n") {
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "{addr} closed");
        got.extend_from_slice(&chunk[..n]);
    }
    got.truncate(got.len() - 4);
    got
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// (what it shows, request bytes): run in order on one connection, so state carries.
const CASES: &[(&str, &[u8])] = &[
    ("a miss", b"mg miss v\r\n"),
    ("a miss, quiet: nothing", b"mg miss v q\r\n"),
    ("set", b"ms k 5 T0 F7\r\nhello\r\n"),
    ("set, quiet: nothing", b"ms q1 2 q\r\nhi\r\n"),
    ("get with flags", b"mg k s v f t k O42\r\n"),
    ("hit without value", b"mg k\r\n"),
    ("hit, quiet: still answered", b"mg k q k\r\n"),
    ("cas", b"mg k c\r\n"),
    ("cas mismatch", b"ms k 1 C999999\r\nx\r\n"),
    ("add over an existing key", b"ms k 1 ME\r\nx\r\n"),
    (
        "add over an existing key, quiet: still answered",
        b"ms k 1 ME q\r\nx\r\n",
    ),
    ("append", b"ms k 3 MA\r\n!!!\r\nmg k v\r\n"),
    ("arithmetic on a missing key", b"ma counter\r\n"),
    (
        "auto-vivify then increment",
        b"ma counter N0 J10 v\r\nma counter v D5\r\n",
    ),
    (
        "increment, quiet: nothing",
        b"ma counter q v\r\nmg counter v\r\n",
    ),
    ("delete", b"md k\r\nmd k\r\n"),
    ("delete, quiet", b"md q1 q\r\nmd q1 q\r\n"),
    (
        "base64 key",
        b"ms aGVsbG8= 3 b\r\nb64\r\nmg aGVsbG8= b k v\r\nmg hello v\r\n",
    ),
    ("an invalid flag: memcached's own error", b"mg hello zz\r\n"),
    (
        "pipelined mixed with text",
        b"set t 0 0 1\r\n1\r\nmg t v\r\nget t\r\nmd t q\r\nmg t v\r\n",
    ),
    ("debug", b"me hello\r\n"),
    ("no-op alone", b""),
];

#[test]
fn meta_commands_through_the_proxy_get_the_bytes_memcached_gives() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &["-t", "4"]);
    let mut direct = connect(servers[0].addr);
    let mut proxied = connect(proxy.addr);
    for (what, request) in CASES {
        let expected = exchange(servers[0].addr, &mut direct, request);
        let got = exchange(proxy.addr, &mut proxied, request);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "{what}: {:?}",
            String::from_utf8_lossy(request)
        );
    }
}

#[test]
fn meta_keys_route_like_text_keys_and_writes_are_replicated() {
    let servers = start_servers(3);
    let dir = common::temp_dir();
    let conf = dir.path().join("shard.toml");
    let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
    std::fs::write(
        &conf,
        format!(
            "[pools.s]\nlisten = \"127.0.0.1:0\"\nmode = \"shard\"\nhash = \"md5\"\n\
             servers = [{}]\n",
            list.join(", ")
        ),
    )
    .unwrap();
    let shard = Proxy::start_args(&["--config".into(), conf.display().to_string()]);
    let mut c = connect(shard.addr);
    for i in 0..30 {
        let key = format!("m{i}");
        let reply = exchange(
            shard.addr,
            &mut c,
            format!("ms {key} 1\r\nx\r\n").as_bytes(),
        );
        assert_eq!(reply, b"HD\r\n");
        // The text protocol finds it through the proxy: the same server.
        assert_eq!(
            Client::connect(shard.addr).get(&[&key]),
            common::values_reply(&[(&key, "x")])
        );
        let holders = servers
            .iter()
            .filter(|s: &&Memcached| Client::connect(s.addr).get(&[&key]) != "END\r\n")
            .count();
        assert_eq!(holders, 1, "{key}");
    }

    let replicate = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "2"]);
    let mut c = connect(replicate.addr);
    assert_eq!(
        exchange(replicate.addr, &mut c, b"ms everywhere 2\r\nok\r\n"),
        b"HD\r\n"
    );
    for s in &servers {
        assert_eq!(
            Client::connect(s.addr).get(&["everywhere"]),
            common::values_reply(&[("everywhere", "ok")])
        );
    }
    // A quiet write that fails on a server still answers (the reply rule's failure).
    assert_eq!(
        exchange(replicate.addr, &mut c, b"ms everywhere 1 ME q\r\nx\r\n"),
        b"NS\r\n"
    );
}
