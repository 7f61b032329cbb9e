//! A reply the proxy will not hold (over `--max-reply-bytes`, or beyond the memory
//! budget) fails only the request it answers: it is read past, its batch-mates get
//! their own answers, and the connection stays (issue 33).

use std::time::Duration;

use super::sim::{pool, request, Behaviour, Harness, SimServer};
use super::EngineSettings;
use crate::routing::Protocol;

fn server_with(values: &[(&[u8], usize)]) -> Vec<SimServer> {
    let mut server = SimServer::new(Duration::from_micros(50), Behaviour::Normal);
    for (key, len) in values {
        server.data.insert(key.to_vec(), vec![b'x'; *len]);
    }
    vec![server]
}

fn texts(h: &Harness) -> Vec<String> {
    h.replies
        .iter()
        .map(|r| String::from_utf8_lossy(&r.bytes).into_owned())
        .collect()
}

const SETTINGS: EngineSettings = EngineSettings {
    pipeline: 8,
    max_reply_bytes: 10_000,
    merge_gets: false,
};

#[test]
fn a_batch_mate_of_an_oversized_memcached_reply_gets_its_own_answer() {
    let mut h = Harness::new(
        server_with(&[(b"big", 50_000), (b"small", 3)]),
        false,
        SETTINGS,
    );
    let p = pool(1, None, Protocol::Memcached);
    let batch = [
        &b"get big\r\n"[..],
        b"set k 0 0 2\r\nhi\r\n",
        b"get big small\r\n",
        b"get k\r\n",
        b"delete k\r\n",
    ];
    let reqs = batch.iter().map(|r| request(&p, r, h.now)).collect();
    h.serve(reqs);
    assert_eq!(
        texts(&h),
        vec![
            "SERVER_ERROR reply too large\r\n",
            "STORED\r\n",
            "SERVER_ERROR reply too large\r\n",
            "VALUE k 0 2\r\nhi\r\nEND\r\n",
            "DELETED\r\n",
        ]
    );
    assert!(
        h.drops.is_empty() && h.failures.is_empty(),
        "{:?} {:?}",
        h.drops,
        h.failures
    );
    assert_eq!(h.out_of_step, 0);
    // And the next batch goes over the same connection.
    h.serve(vec![request(&p, b"get small\r\n", h.now)]);
    assert_eq!(
        texts(&h).last().unwrap(),
        "VALUE small 0 3\r\nxxx\r\nEND\r\n"
    );
    assert!(h.drops.is_empty());
}

#[test]
fn a_batch_mate_of_an_oversized_redis_reply_gets_its_own_answer() {
    let mut h = Harness::new(server_with(&[(b"big", 30_000)]), true, SETTINGS);
    let p = pool(1, None, Protocol::Redis);
    let batch = [
        &b"*4\r\n$4\r\nMGET\r\n$3\r\nbig\r\n$1\r\nz\r\n$3\r\nbig\r\n"[..],
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nhi\r\n",
        b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n",
        b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
    ];
    let reqs = batch.iter().map(|r| request(&p, r, h.now)).collect();
    h.serve(reqs);
    assert_eq!(
        texts(&h),
        vec![
            "-ERR reply too large (--max-reply-bytes)\r\n",
            "+OK\r\n",
            "-ERR reply too large (--max-reply-bytes)\r\n",
            "$2\r\nhi\r\n",
        ]
    );
    assert!(
        h.drops.is_empty() && h.failures.is_empty(),
        "{:?} {:?}",
        h.drops,
        h.failures
    );
    assert_eq!(h.servers[0].data.get(&b"k"[..]), Some(&b"hi".to_vec()));
}

#[test]
fn a_refused_reply_the_server_then_cuts_short_fails_what_follows_it() {
    // The end of the refused reply never comes: the connection goes, and the requests
    // after it on that connection fail (they may or may not have been applied).
    let mut servers = server_with(&[(b"big", 50_000)]);
    servers[0].behaviour = Behaviour::DiesAfter(1);
    let mut h = Harness::new(servers, false, SETTINGS);
    let p = pool(1, None, Protocol::Memcached);
    let reqs = [&b"get big\r\n"[..], b"get big\r\n"]
        .iter()
        .map(|r| request(&p, r, h.now))
        .collect();
    h.serve(reqs);
    let replies = texts(&h);
    assert_eq!(replies.len(), 2);
    assert_eq!(replies[0], "SERVER_ERROR reply too large\r\n");
    assert!(replies[1].starts_with("SERVER_ERROR"), "{replies:?}");
}
