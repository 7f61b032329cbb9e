//! Bad input: each case gets the protocol's error line (or a clean close), is logged, and
//! the same connection then serves a valid GET correctly.

mod common;

use std::thread;
use std::time::Duration;

use common::{start_servers, values_reply, Proxy};

/// (case, bytes sent, the error lines expected): memcached 1.6.18's, which reads the data
/// block of a storage line it refused as a command, and a block whose announced length
/// runs past its end as that many bytes, leaving the rest to be read as a command.
const CASES: &[(&str, &[u8], &str)] = &[
    ("unknown command", b"frobnicate a b\r\n", "ERROR\r\n"),
    ("empty line", b"\r\n", "ERROR\r\n"),
    ("set line missing its length", b"set k 0 0\r\n", "ERROR\r\n"),
    (
        "set with bad flags: its block read as a command",
        b"set k x 0 1\r\nv\r\n",
        "CLIENT_ERROR bad command line format\r\nERROR\r\n",
    ),
    (
        "negative length",
        b"set k 0 0 -5\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    (
        "bad incr delta",
        b"incr k -1\r\n",
        "CLIENT_ERROR invalid numeric delta argument\r\n",
    ),
    (
        "data block longer than announced",
        b"set k 0 0 3\r\nabcdef\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    ),
    // 8 announced, 3 sent plus the start of the next command: the block takes 10 bytes
    // ("abc\r\nget z"), its terminator is wrong, and "z" is read as a command.
    (
        "data block shorter than announced",
        b"set k 0 0 8\r\nabc\r\nget zz\r\n",
        "CLIENT_ERROR bad data chunk\r\nERROR\r\n",
    ),
    (
        "control character in key",
        b"get a\x01b\r\n",
        "CLIENT_ERROR key contains control characters\r\n",
    ),
    (
        "bare newline line ending",
        b"get a\n",
        "CLIENT_ERROR line not terminated by \\r\\n\r\n",
    ),
];

#[test]
fn each_bad_request_gets_its_error_and_the_connection_stays_usable() {
    let servers = start_servers(3);
    let proxy = Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "4", "--max-value-size", "1024"],
    );
    proxy.client().set("good", "value");
    let mut long_key = b"get ".to_vec();
    long_key.extend([b'k'; 251]);
    long_key.extend(b"\r\n");
    let mut too_large = b"set big 0 0 2000\r\n".to_vec();
    too_large.extend([b'x'; 2000]);
    too_large.extend(b"\r\n");
    let extra: [(&str, &[u8], &str); 2] = [
        (
            "251-byte key",
            &long_key,
            "CLIENT_ERROR bad command line format\r\n",
        ),
        (
            "value over the limit",
            &too_large,
            "SERVER_ERROR object too large for cache\r\n",
        ),
    ];
    let mut rejections = 0;
    for (case, bytes, errors) in CASES.iter().copied().chain(extra) {
        let mut client = proxy.client();
        client.send(bytes);
        let lines = errors.matches("\r\n").count();
        let got: String = (0..lines).map(|_| client.read_line()).collect();
        assert_eq!(got, errors, "{case}");
        rejections += lines;
        assert_eq!(
            client.get(&["good"]),
            values_reply(&[("good", "value")]),
            "after {case}"
        );
    }
    assert_eq!(
        proxy.client().get(&["big"]),
        "END\r\n",
        "the rejected value was not stored"
    );
    // Every rejection is in the log.
    let log = proxy.wait_for_log("bad request", rejections);
    assert_eq!(log.matches("bad request").count(), rejections, "{log}");
    assert!(log.contains("value larger than the limit"), "{log}");
}

#[test]
fn a_value_at_the_limit_is_accepted() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["--max-value-size", "1024"]);
    let mut client = proxy.client();
    let value = "v".repeat(1024);
    assert_eq!(client.set("edge", &value), "STORED\r\n");
    assert_eq!(client.get(&["edge"]), values_reply(&[("edge", &value)]));
}

#[test]
fn garbage_without_newlines_is_dropped_and_the_connection_recovers() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["--max-line-length", "65536"]);
    let mut client = proxy.client();
    client.set("good", "value");
    client.send(&vec![b'z'; 200 * 1024]);
    client.send(b"\r\n");
    assert_eq!(client.read_line(), "CLIENT_ERROR line too long\r\n");
    assert_eq!(client.get(&["good"]), values_reply(&[("good", "value")]));
}

#[test]
fn a_client_that_sends_half_a_request_and_disconnects_is_closed_cleanly() {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    {
        let mut half = proxy.client();
        half.send(b"set k 0 0 10\r\nabc");
        half.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert!(half.reads_eof(), "the proxy closes its side too");
    }
    {
        // A complete request followed by half of one: the first is still answered.
        let mut half = proxy.client();
        half.send(b"get nothing\r\nget no");
        half.stream.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(half.read_line(), "END\r\n");
        assert!(half.reads_eof());
    }
    let mut client = proxy.client();
    assert_eq!(client.set("k", "v"), "STORED\r\n");
    assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
    let log = proxy.wait_for_log("in the middle of a request", 2);
    assert_eq!(
        log.matches("in the middle of a request").count(),
        2,
        "{log}"
    );
}

#[test]
fn quit_closes_after_answering_what_came_before() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &[]);
    let mut client = proxy.client();
    client.send(b"set q 0 0 1\r\nx\r\nget q\r\nquit\r\nget q\r\n");
    assert_eq!(client.read_line(), "STORED\r\n");
    assert_eq!(
        client.read_reply(cachelab_protocol::Expect::Values),
        values_reply(&[("q", "x")]).into_bytes()
    );
    assert!(client.reads_eof());
}

/// A small deterministic generator (xorshift), so a failure can be replayed.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Random bytes mixed with protocol fragments, so the parser's deeper states are hit.
    fn chunk(&mut self) -> Vec<u8> {
        const FRAGMENTS: &[&[u8]] = &[
            b"get ",
            b"gets ",
            b"set ",
            b"cas ",
            b"incr ",
            b"delete ",
            b"touch ",
            b"\r\n",
            b"\n",
            b" ",
            b"0 ",
            b"5 ",
            b"-1 ",
            b"noreply",
            b"k",
            b"1048577 ",
            b"stats\r\n",
            b"99999999999999999999 ",
            b"flush_all ",
            b"verbosity ",
        ];
        let mut out = Vec::new();
        for _ in 0..(self.next() % 64) {
            if self.next().is_multiple_of(3) {
                out.extend((0..self.next() % 16).map(|_| self.next() as u8));
            } else {
                out.extend_from_slice(FRAGMENTS[(self.next() % FRAGMENTS.len() as u64) as usize]);
            }
        }
        out
    }
}

#[test]
fn arbitrary_bytes_from_many_clients_do_not_hurt_the_proxy() {
    let servers = start_servers(3);
    let proxy = Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "4", "-s", "--max-value-size", "4096"],
    );
    let addr = proxy.addr;
    let clients: Vec<_> = (0..8u64)
        .map(|seed| {
            thread::spawn(move || {
                let mut noise = Noise(0x9e37_79b9_7f4a_7c15 ^ (seed + 1));
                let mut stream = std::net::TcpStream::connect(addr).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_millis(5)))
                    .unwrap();
                let mut sink = [0u8; 65536];
                for _ in 0..300 {
                    if std::io::Write::write_all(&mut stream, &noise.chunk()).is_err() {
                        break; // the proxy may close a connection after quit-like input
                    }
                    let _ = std::io::Read::read(&mut stream, &mut sink);
                }
            })
        })
        .collect();
    for c in clients {
        c.join().unwrap();
    }
    // The noise may hold valid commands (flush_all, delete k, ...): write, then read back.
    let mut client = proxy.client();
    assert_eq!(client.set("good", "value"), "STORED\r\n");
    assert_eq!(client.get(&["good"]), values_reply(&[("good", "value")]));
    let stats =
        String::from_utf8(client.request(b"stats\r\n", cachelab_protocol::Expect::Stats)).unwrap();
    assert!(stats.contains("STAT bad_requests "), "{stats}");
}

#[test]
fn a_ten_thousand_key_multi_get_is_served_as_memcached_serves_it() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[0], &servers[1]], &["-s"]);
    let mut client = proxy.client();
    assert_eq!(client.set("k0", "a"), "STORED\r\n");
    let keys: Vec<String> = (0..10_000)
        .map(|i| format!("k{i}-{}", "x".repeat(200)))
        .collect();
    let mut request = String::from("get k0");
    for key in &keys {
        request.push(' ');
        request.push_str(key);
    }
    request.push_str("\r\n");
    assert!(request.len() > 2_000_000);
    let reply = client.request(request.as_bytes(), cachelab_protocol::Expect::Values);
    assert_eq!(
        String::from_utf8(reply).unwrap(),
        values_reply(&[("k0", "a")])
    );
}

#[test]
fn a_binary_protocol_request_gets_a_binary_error_and_the_connection_closes() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &[]);
    let mut client = proxy.client();
    // a binary GET of "k", opaque 0x01020304
    let mut get = vec![0x80, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 3, 4];
    get.extend_from_slice(&[0; 8]);
    get.push(b'k');
    client.send(&get);
    let mut header = [0u8; 24];
    std::io::Read::read_exact(&mut client.stream, &mut header).unwrap();
    assert_eq!(header[0], 0x81, "a binary response");
    assert_eq!(&header[6..8], &[0x00, 0x81], "status: unknown command");
    assert_eq!(&header[12..16], &[1, 2, 3, 4], "opaque echoed");
    let body = u32::from_be_bytes(header[8..12].try_into().unwrap()) as usize;
    let mut text = vec![0; body];
    std::io::Read::read_exact(&mut client.stream, &mut text).unwrap();
    assert!(String::from_utf8_lossy(&text).contains("text protocol"));
    assert!(client.reads_eof());
    // the proxy is fine
    assert_eq!(proxy.client().set("k", "v"), "STORED\r\n");
}

#[test]
fn the_whole_proxy_logs_at_most_its_rate_of_client_warnings() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["--log-lines-per-second", "5"]);
    // 40 connections x 3 bad requests: each connection alone is under its own limit
    for _ in 0..40 {
        let mut client = proxy.client();
        for _ in 0..3 {
            client.send(b"bogus\r\n");
            assert_eq!(client.read_line(), "ERROR\r\n");
        }
    }
    // The first warning of a later second reports how many were suppressed: one bad
    // request per new connection until it does (each connection is under its own limit).
    let reported = common::wait_until(Duration::from_secs(5), || {
        let mut client = proxy.client();
        client.send(b"bogus\r\n");
        assert_eq!(client.read_line(), "ERROR\r\n");
        proxy.log().contains("log lines suppressed")
    });
    let log = proxy.log();
    assert!(reported, "{log}");
    assert!(log.matches("bad request").count() < 40, "{log}");
}
