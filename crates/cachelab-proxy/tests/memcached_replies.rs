//! The proxy answers as memcached 1.6.18 answers: every command it answers itself or
//! refuses, sent to a memcached directly and through the proxy (one server), gets the
//! same bytes back, and the same bytes after it are read as the next command (a data
//! block memcached swallows is swallowed, one it reads as a command is read as one).
//!
//! Each case is followed by a sync request, `mg __cachelab_sync O<n>` (answered
//! `EN O<n>`), so a case answered by several replies or by none is compared whole. The
//! cases run in order on one connection each way, so state carries (and is compared:
//! `gets` shows the cas uniques). Where the proxy differs by design (docs/proxy.md's table
//! of deliberate differences), a second table holds both answers, so the table stays
//! true.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{start_servers, Proxy};

fn connect(addr: SocketAddr) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends `request` and the sync request `n`, and returns everything before the sync's
/// reply.
fn exchange(stream: &mut TcpStream, request: &[u8], n: usize) -> Vec<u8> {
    let marker = format!("EN O{n}\r\n");
    let mut bytes = request.to_vec();
    bytes.extend(format!("mg __cachelab_sync O{n}\r\n").bytes());
    stream.write_all(&bytes).unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 65536];
    while !got.ends_with(marker.as_bytes()) {
        let read = stream.read(&mut chunk).unwrap();
        assert!(
            read > 0,
            "closed before the sync: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&chunk[..read]);
    }
    got.truncate(got.len() - marker.len());
    got
}

/// Sends `request` on a fresh connection and returns everything until the peer closes.
fn until_closed(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut stream = connect(addr);
    stream.write_all(request).unwrap();
    let mut got = Vec::new();
    stream.read_to_end(&mut got).unwrap();
    got
}

fn key(len: usize) -> String {
    "k".repeat(len)
}

/// A storage command with a `len`-byte value.
fn with_value(line: &str, len: usize, after: &str) -> Vec<u8> {
    let mut bytes = line.as_bytes().to_vec();
    bytes.extend(std::iter::repeat_n(b'v', len));
    bytes.extend(b"\r\n");
    bytes.extend(after.as_bytes());
    bytes
}

/// (what it shows, bytes sent), in order on one connection.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let long = key(251);
    let max = key(250);
    let many_keys: String = (0..30).map(|i| format!(" m{i}")).collect();
    let text: &[(&str, &str)] = &[
        // verbosity in all its forms (memccapable's first three)
        (
            "verbosity with bad words: ERROR",
            "verbosity foo bar my\r\n",
        ),
        ("verbosity noreply: nothing at all", "verbosity noreply\r\n"),
        ("verbosity 0 noreply: nothing", "verbosity 0 noreply\r\n"),
        ("bare verbosity: ERROR", "verbosity\r\n"),
        ("verbosity with 4 arguments: ERROR", "verbosity 1 2 3 4\r\n"),
        ("verbosity", "verbosity 1\r\n"),
        (
            "verbosity's second argument is ignored",
            "verbosity 1 2\r\n",
        ),
        ("verbosity with a bad level", "verbosity x\r\n"),
        (
            "verbosity with a bad level, noreply",
            "verbosity x noreply\r\n",
        ),
        ("verbosity with a negative level", "verbosity -1\r\n"),
        (
            "verbosity level wraps at 32 bits",
            "verbosity 4294967296\r\n",
        ),
        (
            "verbosity level past 64 bits",
            "verbosity 18446744073709551616\r\n",
        ),
        ("verbosity back to 0", "verbosity 0\r\n"),
        // empty lines and unknown commands
        ("empty line", "\r\n"),
        ("blank line", "   \r\n"),
        ("a one-byte command", "x\r\n"),
        ("unknown command", "bogus a b\r\n"),
        ("commands are case-sensitive", "GET a\r\n"),
        ("HTTP/ after a g command is not HTTP", "gxx HTTP/1.1\r\n"),
        ("HTTP/ not last", "GET / HTTP/1.1 x\r\n"),
        ("unknown meta command", "mz\r\n"),
        ("mg without a key", "mg\r\n"),
        ("me without a key", "me\r\n"),
        ("mn ignores what follows", "mn x\r\n"),
        // get, gets
        ("a value to read", "set a 0 0 1\r\n1\r\n"),
        ("get without a key", "get\r\n"),
        ("gets without a key", "gets\r\n"),
        ("get with spaces only", "get   \r\n"),
        ("get", "get a\r\n"),
        ("multi-get with a repeat and a miss", "get a b a\r\n"),
        ("gets", "gets a\r\n"),
        ("bget is get", "bget a\r\n"),
        ("noreply is a key to get", "get a noreply\r\n"),
        // storage commands: token counts, numbers, noreply
        (
            "a misspelt noreply is ignored",
            "set k 0 0 1 norepl\r\nx\r\n",
        ),
        ("set noreply", "set k 0 0 1 noreply\r\ny\r\nget k\r\n"),
        ("set without its length", "set k 0 0\r\nx\r\n"),
        (
            "set with a token after noreply",
            "set k 0 0 1 noreply extra\r\nx\r\n",
        ),
        ("bad flags: the block is a command", "set k x 0 1\r\nx\r\n"),
        ("bad flags, noreply", "set k x 0 1 noreply\r\nx\r\n"),
        ("negative flags", "set k -1 0 1\r\nx\r\n"),
        ("bad exptime", "set k 0 x 1\r\nx\r\n"),
        ("bad length", "set k 0 0 x\r\nx\r\n"),
        ("negative length", "set k 0 0 -1\r\nx\r\n"),
        ("length past int", "set k 0 0 2147483646\r\nx\r\n"),
        ("noreply read as the length", "set k 0 0 noreply\r\nx\r\n"),
        (
            "numbers wrap at 32 bits",
            "set k 4294967297 0 4294967298\r\nxy\r\ngets k\r\n",
        ),
        ("signs", "set k -0 +0 +1\r\nx\r\nget k\r\n"),
        ("a tab ends a number", "set k 1\tz 0 1\r\nx\r\nget k\r\n"),
        ("a block run on", "set k 0 0 1\r\nxyz\r\nget k\r\n"),
        ("a block run on, noreply", "set k 0 0 1 noreply\r\nxyz\r\n"),
        ("a block cut short", "set k 0 0 3\r\nab\r\nget k\r\n"),
        (
            "a refused line's block that is a command",
            "set k x 0 9\r\ndelete a\r\nget a\r\n",
        ),
        ("cas without its unique", "cas k 0 0 1\r\nx\r\n"),
        ("cas with a bad unique", "cas k 0 0 1 x\r\nx\r\n"),
        ("cas with a negative unique", "cas k 0 0 1 -1\r\nx\r\n"),
        ("cas with -0", "cas k 0 0 1 -0\r\nx\r\n"),
        ("cas ignores a last token", "cas k 0 0 1 1 foo\r\nx\r\n"),
        ("cas noreply", "cas k 0 0 1 1 noreply\r\nx\r\n"),
        ("add with too many tokens", "add k 0 0 1 2 3\r\nx\r\n"),
        ("replace with too few", "replace k 0\r\n"),
        ("append noreply", "append k 0 0 1 noreply\r\n!\r\nget k\r\n"),
        ("prepend with a bad length", "prepend k 0 0 z\r\n"),
        // incr, decr
        ("incr without a delta", "incr n\r\n"),
        ("bare incr", "incr\r\n"),
        ("incr with too many tokens", "incr n 1 2 3\r\n"),
        ("a number", "set n 0 0 1\r\n5\r\n"),
        ("incr ignores a last token", "incr n 1 foo\r\n"),
        ("incr +1", "incr n +1\r\n"),
        ("incr -0", "incr n -0\r\n"),
        ("incr -1", "incr n -1\r\n"),
        ("incr with a bad delta, noreply", "incr n x noreply\r\n"),
        ("incr noreply as the delta", "incr n noreply\r\n"),
        ("incr past 64 bits", "incr n 18446744073709551616\r\n"),
        ("decr with a tab", "decr n 1\tx\r\n"),
        ("incr of a non-number", "incr a 1\r\n"),
        // delete
        ("bare delete", "delete\r\n"),
        ("delete k 0", "delete k 0\r\n"),
        (
            "delete 0 noreply",
            "set k 0 0 1\r\nx\r\ndelete k 0 noreply\r\nget k\r\n",
        ),
        ("delete noreply", "delete k noreply\r\n"),
        ("delete with a time", "delete k 5\r\n"),
        ("delete with a time, noreply", "delete k 5 noreply\r\n"),
        ("delete noreply 0", "delete k noreply 0\r\n"),
        ("delete 0 0", "delete k 0 0\r\n"),
        ("delete 00", "delete k 00\r\n"),
        ("delete with too many tokens", "delete k a b c\r\n"),
        ("a key named noreply", "delete noreply\r\n"),
        // touch
        ("touch without an exptime", "touch t\r\n"),
        ("touch with a bad exptime", "touch t x\r\n"),
        ("touch with a bad exptime, noreply", "touch t x noreply\r\n"),
        (
            "touch ignores a last token",
            "set t 0 0 1\r\nx\r\ntouch t 0 foo\r\n",
        ),
        ("touch with too many tokens", "touch t 1 2 3\r\n"),
        ("touch past 64 bits", "touch t 99999999999999999999\r\n"),
        // stats arguments memcached refuses
        ("stats of an unknown kind", "stats foo\r\n"),
        ("stats proxy (not built in)", "stats proxy\r\n"),
        ("stats with many arguments", "stats a b c d e\r\n"),
        ("stats detail without on/off", "stats detail\r\n"),
        ("stats detail x", "stats detail x\r\n"),
        ("stats cachedump without arguments", "stats cachedump\r\n"),
        ("stats cachedump with one", "stats cachedump 1\r\n"),
        (
            "stats cachedump with bad numbers",
            "stats cachedump x y\r\n",
        ),
        ("stats cachedump of slab 64", "stats cachedump 64 1\r\n"),
        // meta numbers, as memcached reads them
        (
            "ms length wraps at 32 bits",
            "ms m 4294967298\r\nxy\r\nmg m v\r\n",
        ),
        ("mg T wraps at 32 bits", "mg m T4294967296 v\r\n"),
        ("ms C-0", "ms m 1 C-0\r\nx\r\n"),
        ("ms bad chunk, quiet", "ms m 1 q\r\nxyz\r\n"),
        // flush_all (last: it empties the cache)
        ("flush_all with too many tokens", "flush_all 1 2 3\r\n"),
        ("flush_all with a bad delay", "flush_all x\r\n"),
        (
            "flush_all with a bad delay, noreply",
            "flush_all x noreply\r\n",
        ),
        ("flush_all noreply 10", "flush_all noreply 10\r\n"),
        ("flush_all noreply noreply", "flush_all noreply noreply\r\n"),
        ("flush_all ignores a second argument", "flush_all 0 x\r\n"),
        ("flush_all -1", "flush_all -1\r\n"),
        (
            "flush_all noreply",
            "set a 0 0 1\r\n1\r\nflush_all noreply\r\nget a\r\n",
        ),
        ("flush_all", "flush_all\r\n"),
    ];
    let mut cases: Vec<(&str, Vec<u8>)> = text
        .iter()
        .map(|(what, bytes)| (*what, bytes.as_bytes().to_vec()))
        .collect();
    let at = |what| cases.iter().position(|(w, _)| *w == what).unwrap();
    let mut built: Vec<(usize, &str, Vec<u8>)> = vec![
        (
            at("gets"),
            "a 250-byte key",
            format!("get {max}\r\n").into_bytes(),
        ),
        (
            at("gets"),
            "a long key in a multi-get",
            format!("get a {long} b\r\n").into_bytes(),
        ),
        (
            at("gets"),
            "a long key past memcached's 24 tokens",
            format!("gets a{many_keys} {long}\r\n").into_bytes(),
        ),
        (
            at("bad flags: the block is a command"),
            "set with a long key",
            format!("set {long} 0 0 1\r\nx\r\n").into_bytes(),
        ),
        (
            at("bad flags: the block is a command"),
            "set with a long key, noreply",
            format!("set {long} 0 0 1 noreply\r\nx\r\n").into_bytes(),
        ),
        (
            at("bad flags: the block is a command"),
            "a 250-byte key stored",
            format!("set {max} 0 0 1\r\nx\r\n").into_bytes(),
        ),
        (
            at("incr of a non-number"),
            "incr of a long key",
            format!("incr {long} 1\r\n").into_bytes(),
        ),
        (
            at("incr of a non-number"),
            "incr of a long key, noreply",
            format!("incr {long} 1 noreply\r\n").into_bytes(),
        ),
        (
            at("a key named noreply"),
            "delete of a long key",
            format!("delete {long}\r\n").into_bytes(),
        ),
        (
            at("a key named noreply"),
            "delete of a long key, noreply",
            format!("delete {long} 0 noreply\r\n").into_bytes(),
        ),
        (
            at("a key named noreply"),
            "delete of a long key with a time",
            format!("delete {long} 5\r\n").into_bytes(),
        ),
        (
            at("touch past 64 bits"),
            "touch of a long key",
            format!("touch {long} 1\r\n").into_bytes(),
        ),
        // Lines longer than memcached reads in pieces (2048 bytes) but sent whole, as
        // memcached serves them when they arrive in one read; the proxy sends the
        // server the line composed afresh, so the server connection survives.
        (
            at("a number"),
            "a set line long with spaces",
            format!("set s 0 0 1{}\r\nx\r\nget s\r\n", " ".repeat(3000)).into_bytes(),
        ),
        (
            at("a number"),
            "a set line long with leading zeros",
            format!("set s 0 0 {}2\r\nxy\r\nget s\r\n", "0".repeat(3000)).into_bytes(),
        ),
        (
            at("a number"),
            "a long multi-get after leading spaces",
            format!("{}bget s{}\r\n", " ".repeat(150), " a".repeat(1500)).into_bytes(),
        ),
        (
            at("flush_all with too many tokens"),
            "an mg line long with spaces",
            format!("mg m v{}k\r\n", " ".repeat(3000)).into_bytes(),
        ),
        // Values too large for any server: refused with the block swallowed, and a
        // set (or ms) drops the key's current value.
        (
            at("cas without its unique"),
            "a set too large unlinks its key",
            with_value(
                "set big 0 0 1\r\nx\r\nset big 0 0 2000000\r\n",
                2_000_000,
                "get big\r\n",
            ),
        ),
        (
            at("cas without its unique"),
            "a set too large, noreply",
            with_value(
                "set big 0 0 1\r\nx\r\nset big 0 0 2000000 noreply\r\n",
                2_000_000,
                "get big\r\n",
            ),
        ),
        (
            at("cas without its unique"),
            "an add too large keeps the value",
            with_value(
                "set big 0 0 1\r\nx\r\nadd big 0 0 2000000 noreply\r\n",
                2_000_000,
                "get big\r\n",
            ),
        ),
        (
            at("cas without its unique"),
            "an ms too large unlinks its key",
            with_value(
                "set big 0 0 1\r\nx\r\nms big 2000000 MA\r\n",
                2_000_000,
                "get big\r\n",
            ),
        ),
        (
            at("cas without its unique"),
            "a base64 ms too large unlinks the decoded key",
            with_value(
                "set hello 0 0 1\r\nx\r\nms aGVsbG8= 2000000 b\r\n",
                2_000_000,
                "get hello\r\n",
            ),
        ),
        // Under the proxy's limit but over memcached's (its item header counts): the
        // server refuses it, through the proxy too.
        (
            at("cas without its unique"),
            "a value just under 1 MiB",
            with_value("set mid 0 0 1048560\r\n", 1_048_560, "get mid\r\n"),
        ),
    ];
    built.sort_by_key(|(before, _, _)| *before);
    for (i, (before, what, bytes)) in built.into_iter().enumerate() {
        cases.insert(before + i, (what, bytes));
    }
    cases
}

#[test]
fn every_reply_and_refusal_is_memcacheds_byte_for_byte() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &["-t", "2"]);
    let mut direct = connect(servers[0].addr);
    let mut proxied = connect(proxy.addr);
    for (n, (what, request)) in cases().iter().enumerate() {
        let expected = exchange(&mut direct, request, n);
        let got = exchange(&mut proxied, request, n);
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&expected),
            "{what}: {:?}",
            String::from_utf8_lossy(&request[..request.len().min(200)])
        );
    }
}

#[test]
fn memcached_closes_on_these_and_so_does_the_proxy() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &[]);
    for (what, request) in [
        ("an HTTP request", &b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"[..]),
        ("HTTP/ alone", b"HTTP/1.0\r\n"),
        ("HTTP/ after an unknown m command", b"mxx HTTP/1.1\r\n"),
        ("quit with an argument", b"quit x\r\nversion\r\n"),
        ("quit after a reply", b"verbosity 1\r\nquit\r\nversion\r\n"),
    ] {
        assert_eq!(
            String::from_utf8_lossy(&until_closed(proxy.addr, request)),
            String::from_utf8_lossy(&until_closed(servers[0].addr, request)),
            "{what}"
        );
    }
}

/// docs/proxy.md's deliberate differences: (input, memcached's reply, the proxy's reply).
const DIFFERENCES: &[(&[u8], &str, &str)] = &[
    (
        b"get c\x01d\r\n",
        "END\r\n",
        "CLIENT_ERROR key contains control characters\r\n",
    ),
    (
        b"set c\x01d 0 0 1\r\nx\r\n",
        "STORED\r\n",
        "CLIENT_ERROR key contains control characters\r\n",
    ),
    (
        b"get c\0d\r\n",
        "END\r\n",
        "CLIENT_ERROR bad command line format\r\n",
    ),
    (
        b"get c\n",
        "END\r\n",
        "CLIENT_ERROR line not terminated by \\r\\n\r\n",
    ),
];

#[test]
fn the_deliberate_differences_are_the_ones_the_readme_lists() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &[]);
    let mut direct = connect(servers[0].addr);
    let mut proxied = connect(proxy.addr);
    for (n, (request, memcached, ours)) in DIFFERENCES.iter().enumerate() {
        let shown = String::from_utf8_lossy(request);
        assert_eq!(
            String::from_utf8_lossy(&exchange(&mut direct, request, n)),
            *memcached,
            "memcached, {shown:?}"
        );
        assert_eq!(
            String::from_utf8_lossy(&exchange(&mut proxied, request, n)),
            *ours,
            "proxy, {shown:?}"
        );
    }
    // version and stats answer with the proxy's own figures, in memcached's shape.
    for (n, request) in ["version\r\n", "version foo bar\r\n", "version noreply\r\n"]
        .iter()
        .enumerate()
    {
        let n = n + DIFFERENCES.len();
        let memcached = exchange(&mut direct, request.as_bytes(), n);
        let ours = String::from_utf8(exchange(&mut proxied, request.as_bytes(), n)).unwrap();
        assert!(memcached.starts_with(b"VERSION 1.6"), "{request}");
        assert!(
            ours.starts_with("VERSION cachelab-proxy-"),
            "{request}: {ours}"
        );
        assert_eq!(ours.matches("\r\n").count(), 1, "{request}: {ours}");
    }
    let n = DIFFERENCES.len() + 3;
    let memcached = String::from_utf8(exchange(&mut direct, b"stats settings\r\n", n)).unwrap();
    assert!(memcached.ends_with("END\r\n"), "{memcached}");
    assert_eq!(
        exchange(&mut proxied, b"stats settings\r\n", n),
        b"CLIENT_ERROR only the general stats are served by the proxy\r\n"
    );
}

/// docs/proxy.md's row for a pipelined `get` of an over-long key: memcached 1.6.18 drops
/// the reply of the command read with it (which it applied); the proxy answers both.
#[test]
fn the_reply_before_a_pipelined_over_long_key_is_kept() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &[]);
    let request = format!("set x 0 0 1\r\n1\r\nget {}\r\n", key(251));
    let mut direct = connect(servers[0].addr);
    let mut proxied = connect(proxy.addr);
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut direct, request.as_bytes(), 0)),
        "CLIENT_ERROR bad command line format\r\n",
        "memcached"
    );
    assert_eq!(
        String::from_utf8_lossy(&exchange(&mut proxied, request.as_bytes(), 0)),
        "STORED\r\nCLIENT_ERROR bad command line format\r\n",
        "proxy"
    );
    // Both applied the set.
    for stream in [&mut direct, &mut proxied] {
        assert_eq!(
            String::from_utf8_lossy(&exchange(stream, b"get x\r\n", 1)),
            "VALUE x 0 1\r\n1\r\nEND\r\n"
        );
    }
}

/// Whether the peer closed (or reset) the connection instead of answering.
fn closes(addr: SocketAddr, request: &[u8]) -> bool {
    let mut stream = connect(addr);
    stream.write_all(request).unwrap();
    let mut byte = [0u8; 1];
    matches!(stream.read(&mut byte), Ok(0) | Err(_))
}

#[test]
fn a_long_line_never_reaches_a_server_as_sent() {
    let servers = start_servers(2);
    let proxy = Proxy::start(&[&servers[1]], &[]);
    // Past memcached's read buffer: memcached closes; the proxy serves it, composed
    // afresh for the server, and the server connection stays.
    let spaced = format!("set k 0 0 1{}\r\nx\r\n", " ".repeat(20_000));
    assert!(closes(servers[0].addr, spaced.as_bytes()));
    let mut client = connect(proxy.addr);
    assert_eq!(exchange(&mut client, spaced.as_bytes(), 0), b"STORED\r\n");
    // A meta line that stays long however it is composed: memcached serves it when it
    // comes in one read and closes when it comes in pieces; the proxy closes.
    let junk = format!("mg k v{}\r\n", "x".repeat(3000));
    assert!(closes(proxy.addr, junk.as_bytes()));
    assert_eq!(
        exchange(&mut client, b"get k\r\n", 1),
        b"VALUE k 0 1\r\nx\r\nEND\r\n",
        "the server was never sent a line it closes on"
    );
    let stats = exchange(&mut client, b"stats\r\n", 2);
    assert!(
        String::from_utf8_lossy(&stats).contains("STAT server_ejections 0\r\n"),
        "{}",
        String::from_utf8_lossy(&stats)
    );
}
