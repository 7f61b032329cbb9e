//! A failure belongs to the request that caused it (issue 33), against real servers:
//! with `--pipeline 8`, a reply the proxy refuses (over `--max-reply-bytes`) fails only
//! its own request: another client's write in the same batch gets its own answer, and
//! it was applied exactly when it says so. Replies past the RESP tree parser's old
//! limits (a status line over 64 KiB, arrays nested deeper than 32) are relayed as Redis
//! sent them, at any pipeline depth.

mod common;

use std::thread;

use cachelab_protocol::resp::compose_command;
use cachelab_protocol::Expect;
use common::resp::{redis_proxy, start_redis, RespClient};
use common::{Client, Memcached, Proxy};

const TRIALS: usize = 5;
/// Values of 200 KB: an MGET of 40 of them (8 MB) is over the 4 MB reply bound.
const BIG: usize = 200_000;
const MAX_REPLY: &str = "4194304";

fn command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = Vec::new();
    compose_command(&mut out, args);
    out
}

#[test]
fn with_pipelining_a_redis_batch_mate_of_an_oversized_reply_gets_its_own_answer() {
    let redis = start_redis(1);
    let value = "v".repeat(BIG);
    let keys: Vec<String> = (0..40).map(|i| format!("big:{i}")).collect();
    for key in &keys {
        redis[0].command(&["SET", key, &value]);
    }
    let proxy = redis_proxy(
        &redis,
        &["-t", "1", "--pipeline", "8", "--max-reply-bytes", MAX_REPLY],
    );
    let mut mget: Vec<&[u8]> = vec![b"MGET"];
    mget.extend(keys.iter().map(|k| k.as_bytes()));
    let mget = command(&mget);
    for trial in 0..TRIALS {
        // Client A asks for 8 MB three times while client B writes: the one worker
        // takes them in batches of up to 8, A's and B's requests together.
        let addr = proxy.addr;
        let a_mget = mget.clone();
        let a = thread::spawn(move || {
            let mut a = RespClient::connect(addr);
            a.client
                .send(&[a_mget.clone(), a_mget.clone(), a_mget].concat());
            (0..3).map(|_| a.reply()).collect::<Vec<_>>()
        });
        let mut b = RespClient::connect(proxy.addr);
        let sets: Vec<Vec<u8>> = (0..20)
            .map(|i| command(&[b"SET", format!("b:{trial}:{i}").as_bytes(), b"mine"]))
            .collect();
        b.client.send(&sets.concat());
        for i in 0..20 {
            assert_eq!(b.reply(), "+OK\r\n", "trial {trial}, B's SET {i}");
        }
        for reply in a.join().unwrap() {
            assert_eq!(reply, "-ERR reply too large (--max-reply-bytes)\r\n");
        }
        for i in 0..20 {
            let stored = redis[0].command(&["GET", &format!("b:{trial}:{i}")]);
            assert_eq!(
                stored,
                cachelab_protocol::RespValue::Bulk(Some(b"mine".to_vec()))
            );
        }
        // Still one connection's worth of in-step replies: a plain GET works.
        assert_eq!(b.cmd(&["GET", &format!("b:{trial}:0")]), "$4\r\nmine\r\n");
    }
}

#[test]
fn redis_replies_past_the_old_parser_limits_are_relayed_as_redis_sent_them() {
    let redis = start_redis(1);
    let long_status = "return {ok=string.rep('x', 70000)}";
    let long_error = "return {err=string.rep('e', 70000)}";
    let deep = "local t = {} local c = t for i = 1, 40 do local n = {} c[1] = n c = n end \
                c[1] = 7 return t";
    for pipeline in ["1", "8"] {
        let proxy = redis_proxy(&redis, &["-t", "1", "--pipeline", pipeline]);
        let mut direct = RespClient::connect(redis[0].addr);
        let mut proxied = RespClient::connect(proxy.addr);
        for script in [long_status, long_error, deep] {
            let expected = direct.cmd(&["EVAL", script, "1", "k"]);
            assert!(expected.len() > 100, "{expected:?}");
            let got = proxied.cmd(&["EVAL", script, "1", "k"]);
            assert!(
                got == expected,
                "pipeline {pipeline}: {} bytes vs {}",
                got.len(),
                expected.len()
            );
            // The connection is still in step.
            assert_eq!(proxied.cmd(&["SET", "after", "1"]), "+OK\r\n");
        }
    }
}

#[test]
fn with_pipelining_a_memcached_batch_mate_of_an_oversized_reply_gets_its_own_answer() {
    let memcached = Memcached::start();
    let proxy = Proxy::start(
        &[&memcached],
        &["-t", "1", "--pipeline", "8", "--max-reply-bytes", MAX_REPLY],
    );
    let mut direct = Client::connect(memcached.addr);
    let value = "v".repeat(BIG);
    let mut get = String::from("get");
    for i in 0..40 {
        direct.set(&format!("big:{i}"), &value);
        get.push_str(&format!(" big:{i}"));
    }
    get.push_str("\r\n");
    for trial in 0..TRIALS {
        let addr = proxy.addr;
        let gets = get.repeat(3);
        let a = thread::spawn(move || {
            let mut a = Client::connect(addr);
            a.send(gets.as_bytes());
            (0..3)
                .map(|_| String::from_utf8_lossy(&a.read_reply(Expect::Values)).into_owned())
                .collect::<Vec<_>>()
        });
        let mut b = Client::connect(proxy.addr);
        let sets: String = (0..20)
            .map(|i| format!("set b:{trial}:{i} 0 0 4\r\nmine\r\n"))
            .collect();
        b.send(sets.as_bytes());
        for i in 0..20 {
            let reply = String::from_utf8_lossy(&b.read_reply(Expect::Store)).into_owned();
            assert_eq!(reply, "STORED\r\n", "trial {trial}, B's set {i}");
        }
        for reply in a.join().unwrap() {
            assert_eq!(reply, "SERVER_ERROR reply too large\r\n");
        }
        for i in 0..20 {
            let key = format!("b:{trial}:{i}");
            assert_eq!(direct.get(&[&key]), common::values_reply(&[(&key, "mine")]));
        }
    }
}
