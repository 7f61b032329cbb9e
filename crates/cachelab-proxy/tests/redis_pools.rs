//! Redis pools against real redis-servers: every routed command class answers as one
//! Redis does (the same commands sent to a Redis directly and through replicate, split
//! and shard pools give the same replies, byte for byte); writes reach every server of
//! a replicate pool and reads rotate; multi-key commands split over shards and merge in
//! key order; refused commands leave the connection usable; a protocol error closes it;
//! many commands in one write come back in order.

mod common;

use std::io::Read;

use cachelab_protocol::RespValue;
use cachelab_testkit::Redis;
use common::resp::{bulk, redis_proxy, redis_shard_pool, start_redis, RespClient};
use common::Proxy;

/// Commands of every routed class, in an order whose replies depend on what came before.
/// Keys that must be on one server of a shard pool share the hash tag `{t}`.
const SESSION: &[&[&str]] = &[
    &["SET", "a", "1"],
    &["GET", "a"],
    &["GET", "missing"],
    &["SETNX", "a", "2"],
    &["SET", "e", "x", "EX", "100"],
    &["INCR", "n"],
    &["INCRBY", "n", "5"],
    &["DECR", "n"],
    &["APPEND", "a", "xy"],
    &["STRLEN", "a"],
    &["GETRANGE", "a", "0", "1"],
    &["MSET", "a", "10", "b", "20", "c", "30", "d", "40"],
    &["MGET", "a", "b", "nope", "c", "d", "a"],
    &["EXISTS", "a", "b", "nope", "a"],
    &["TOUCH", "a", "b", "nope"],
    &["DEL", "a", "nope"],
    &["UNLINK", "b", "c"],
    &["MGET", "a", "b", "c", "d"],
    &["EXPIRE", "d", "100"],
    &["PERSIST", "d"],
    &["TTL", "d"],
    &["TYPE", "d"],
    &["HSET", "h", "f1", "v1", "f2", "v2"],
    &["HGET", "h", "f1"],
    &["HGETALL", "h"],
    &["HINCRBY", "h", "n", "3"],
    &["HDEL", "h", "f2"],
    &["LPUSH", "l", "x", "y", "z"],
    &["LRANGE", "l", "0", "-1"],
    &["RPOP", "l"],
    &["LLEN", "l"],
    &["SADD", "{t}s1", "a", "b", "c"],
    &["SADD", "{t}s2", "b", "c", "d"],
    &["SINTERSTORE", "{t}both", "{t}s1", "{t}s2"],
    &["SISMEMBER", "{t}both", "c"],
    &["SCARD", "{t}both"],
    &["RENAME", "{t}s1", "{t}s3"],
    &["EXISTS", "{t}s1", "{t}s3"],
    &["LPUSH", "{t}l1", "q"],
    &["RPOPLPUSH", "{t}l1", "{t}l2"],
    &["LRANGE", "{t}l2", "0", "-1"],
    &["ZADD", "z", "1", "a", "2", "b"],
    &["ZRANGE", "z", "0", "-1", "WITHSCORES"],
    &["ZSCORE", "z", "b"],
    &["ZINCRBY", "z", "5", "a"],
    &["EVAL", "return redis.call('GET', KEYS[1])", "1", "n"],
    &["GETDEL", "n"],
    &["GET", "n"],
    &["PING"],
    &["ECHO", "hi"],
    &["INCR", "h"],
];

/// The replies `SESSION` gets from one Redis.
fn reference() -> Vec<String> {
    let redis = Redis::start();
    let mut client = RespClient::connect(redis.addr);
    SESSION.iter().map(|args| client.cmd(args)).collect()
}

fn shard_pool(servers: &[Redis]) -> (tempfile::TempDir, Proxy) {
    redis_shard_pool(servers, &[])
}

fn assert_same_as_redis(proxy: &Proxy, expected: &[String], pool: &str) {
    let mut client = RespClient::connect(proxy.addr);
    for (args, want) in SESSION.iter().zip(expected) {
        assert_eq!(&client.cmd(args), want, "{pool}: {args:?}");
    }
}

#[test]
fn every_routed_command_class_answers_as_one_redis_does_in_every_pool_mode() {
    let expected = reference();
    let two = start_redis(2);
    assert_same_as_redis(&redis_proxy(&two, &[]), &expected, "replicate");
    let three = start_redis(3);
    assert_same_as_redis(&redis_proxy(&three, &["-s"]), &expected, "replicate -s");
    let shards = start_redis(3);
    let (_dir, proxy) = shard_pool(&shards);
    assert_same_as_redis(&proxy, &expected, "shard");
    // the shard pool really spread the keys
    let holding = shards.iter().filter(|s| s.dbsize() > 0).count();
    assert!(holding >= 2, "keys on {holding} server(s)");
}

#[test]
fn replicate_writes_reach_every_server_and_reads_rotate_over_them() {
    let servers = start_redis(3);
    let proxy = redis_proxy(&servers, &[]);
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(client.cmd(&["DEL", "gone"]), ":0\r\n");
    for s in &servers {
        assert_eq!(
            s.command(&["GET", "k"]),
            RespValue::Bulk(Some(b"v".to_vec()))
        );
        assert_eq!(s.calls("set"), 1);
    }
    let before: Vec<u64> = servers.iter().map(|s| s.calls("get")).collect();
    for _ in 0..30 {
        assert_eq!(client.cmd(&["GET", "k"]), bulk("v"));
    }
    let gets: Vec<u64> = servers
        .iter()
        .zip(&before)
        .map(|(s, b)| s.calls("get") - b)
        .collect();
    assert_eq!(gets, vec![10, 10, 10], "one client's reads rotate exactly");
}

#[test]
fn a_sharded_mget_is_split_over_the_servers_and_merged_in_key_order() {
    let servers = start_redis(3);
    let proxy = redis_proxy(&servers, &["-s"]);
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(
        client.cmd(&["MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"]),
        "+OK\r\n"
    );
    let reply = client.cmd(&["MGET", "a", "b", "x", "c", "d", "e", "a"]);
    let expected: String = ["1", "2", "", "3", "4", "5", "1"]
        .iter()
        .map(|v| {
            if v.is_empty() {
                "$-1\r\n".into()
            } else {
                bulk(v)
            }
        })
        .collect();
    assert_eq!(reply, format!("*7\r\n{expected}"));
    // 7 keys over 3 servers: 3, 2 and 2 keys, one MGET on each
    let mgets: Vec<u64> = servers.iter().map(|s| s.calls("mget")).collect();
    assert_eq!(mgets, vec![1, 1, 1]);
}

#[test]
fn shard_multi_key_commands_split_by_server_and_merge_as_twemproxy_does() {
    let servers = start_redis(3);
    let (_dir, proxy) = shard_pool(&servers);
    let mut client = RespClient::connect(proxy.addr);
    let keys: Vec<String> = (0..30).map(|i| format!("key:{i}")).collect();
    let mut mset = vec!["MSET".to_string()];
    for (i, k) in keys.iter().enumerate() {
        mset.push(k.clone());
        mset.push(i.to_string());
    }
    let mset: Vec<&str> = mset.iter().map(String::as_str).collect();
    assert_eq!(client.cmd(&mset), "+OK\r\n");
    // every key on exactly one server, and every server holds some
    let on: Vec<i64> = servers.iter().map(Redis::dbsize).collect();
    assert_eq!(on.iter().sum::<i64>(), 30, "{on:?}");
    assert!(on.iter().all(|&n| n > 0), "{on:?}");
    let mut mget = vec!["MGET"];
    mget.extend(keys.iter().rev().map(String::as_str));
    mget.push("absent");
    let expected: String = (0..30).rev().map(|i| bulk(&i.to_string())).collect();
    assert_eq!(client.cmd(&mget), format!("*31\r\n{expected}$-1\r\n"));
    let mut exists = vec!["EXISTS"];
    exists.extend(keys.iter().map(String::as_str));
    exists.push("absent");
    assert_eq!(client.cmd(&exists), ":30\r\n");
    let mut touch = exists.clone();
    touch[0] = "TOUCH";
    assert_eq!(client.cmd(&touch), ":30\r\n");
    let mut del = vec!["DEL"];
    del.extend(keys[..20].iter().map(String::as_str));
    assert_eq!(client.cmd(&del), ":20\r\n");
    let mut unlink = vec!["UNLINK"];
    unlink.extend(keys.iter().map(String::as_str));
    assert_eq!(client.cmd(&unlink), ":10\r\n");
    assert_eq!(servers.iter().map(Redis::dbsize).sum::<i64>(), 0);
    // an error from one part is the client's reply
    assert_eq!(client.cmd(&["LPUSH", "key:3", "x"]), ":1\r\n");
    assert_eq!(client.cmd(&["SET", "key:4", "v"]), "+OK\r\n");
    let wrong = client.cmd(&["MGET", "key:4", "key:3"]);
    assert_eq!(
        wrong,
        format!("*2\r\n{}$-1\r\n", bulk("v")),
        "MGET of a list is nil"
    );
    // a command that cannot split is refused when its keys are apart. The servers'
    // names (random ports) place the keys, so 20 keys: all on one of 3 servers by chance
    // about once in 10^9 runs (5 keys were together about once in 80).
    let mut sunion = vec!["SUNION"];
    sunion.extend(keys[..20].iter().map(String::as_str));
    let apart = client.cmd(&sunion);
    assert!(
        apart.starts_with("-ERR SUNION keys are on different servers of the pool"),
        "{apart}"
    );
    assert_eq!(client.cmd(&["PING"]), "+PONG\r\n");
}

#[test]
fn refused_commands_name_themselves_and_the_connection_stays_usable() {
    let servers = start_redis(2);
    let proxy = redis_proxy(&servers, &[]);
    let mut client = RespClient::connect(proxy.addr);
    let cases: &[(&[&str], &str)] = &[
        (
            &["MULTI"],
            "-ERR MULTI is not supported by cachelab-proxy: transactions",
        ),
        (&["EXEC"], "-ERR EXEC is not supported"),
        (&["WATCH", "k"], "-ERR WATCH is not supported"),
        (
            &["SUBSCRIBE", "c"],
            "-ERR SUBSCRIBE is not supported by cachelab-proxy: pub/sub",
        ),
        (&["PUBLISH", "c", "m"], "-ERR PUBLISH is not supported"),
        (
            &["BLPOP", "l", "0"],
            "-ERR BLPOP is not supported by cachelab-proxy: blocking",
        ),
        (&["KEYS", "*"], "-ERR KEYS is not supported"),
        (&["SCAN", "0"], "-ERR SCAN is not supported"),
        (&["FLUSHALL"], "-ERR FLUSHALL is not supported"),
        (&["CONFIG", "GET", "save"], "-ERR CONFIG is not supported"),
        (
            &["EVAL", "return 1", "0"],
            "-ERR EVAL without keys cannot be routed",
        ),
        (
            &["SELECT", "1"],
            "-ERR SELECT 1: this pool serves database 0 only",
        ),
        (
            &["NOSUCH", "x"],
            "-ERR unknown command 'NOSUCH', with args beginning with: 'x'",
        ),
        (&["GET"], "-ERR wrong number of arguments for 'get' command"),
        (
            &["AUTH", "pw"],
            "-ERR AUTH <password> called without any password configured",
        ),
    ];
    for (args, start) in cases {
        let reply = client.cmd(args);
        assert!(reply.starts_with(start), "{args:?}: {reply}");
        assert!(reply.ends_with("\r\n") && reply.matches("\r\n").count() == 1);
        assert_eq!(client.cmd(&["PING"]), "+PONG\r\n", "after {args:?}");
    }
    assert_eq!(client.cmd(&["SELECT", "0"]), "+OK\r\n");
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(client.cmd(&["GET", "k"]), bulk("v"));
    // nothing refused reached a server
    assert!(servers
        .iter()
        .all(|s| s.calls("multi") == 0 && s.calls("keys") == 0));
    // the local answers and refusals are requests like the others
    let mut info = client.cmd(&["INFO"]);
    info = info.split_once("\r\n").unwrap().1.to_owned();
    assert!(info.contains("# Stats\r\n"), "{info}");
    let processed: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(processed, 2 * cases.len() as u64 + 4);
    assert!(info.contains("server_1:addr="), "{info}");
    assert!(info.contains(",protocol=redis,mode=replicate"), "{info}");
}

#[test]
fn inline_commands_are_served_and_quit_closes_after_its_ok() {
    let servers = start_redis(2);
    let proxy = redis_proxy(&servers, &[]);
    let mut client = RespClient::connect(proxy.addr);
    client
        .client
        .send(b"SET k \"two words\"\r\nGET k\r\nPING\r\nQUIT\r\n");
    assert_eq!(client.reply(), "+OK\r\n");
    assert_eq!(client.reply(), bulk("two words"));
    assert_eq!(client.reply(), "+PONG\r\n");
    assert_eq!(client.reply(), "+OK\r\n");
    assert!(client.client.reads_eof());
}

#[test]
fn a_protocol_error_is_answered_then_the_connection_closes_as_redis_closes_it() {
    let servers = start_redis(1);
    let proxy = redis_proxy(&servers, &[]);
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    client.client.send(b"*2\r\n$3\r\nGET\r\n:1\r\n");
    assert_eq!(
        client.client.read_line(),
        "-ERR Protocol error: expected '$', got ':'\r\n"
    );
    let mut rest = Vec::new();
    client.client.stream.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{rest:?}");
    // a bulk string over --max-value-size is one too
    let limited = redis_proxy(&servers, &["--max-value-size", "100"]);
    let mut client = RespClient::connect(limited.addr);
    let big = "x".repeat(101);
    client
        .client
        .send(format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$101\r\n{big}\r\n").as_bytes());
    assert_eq!(
        client.client.read_line(),
        "-ERR Protocol error: invalid bulk length\r\n"
    );
    assert!(client.client.reads_eof());
}

/// Many commands in one write: every reply comes back, in order, with the default
/// worker and with `--pipeline`.
#[test]
fn many_commands_in_one_write_are_answered_in_order() {
    let servers = start_redis(2);
    for extra in [&[][..], &["--pipeline", "8"]] {
        let proxy = redis_proxy(&servers, extra);
        let mut client = RespClient::connect(proxy.addr);
        let mut batch = Vec::new();
        for i in 0..400 {
            let (k, v) = (format!("p{i}"), format!("v{i}"));
            cachelab_protocol::resp::compose_command(
                &mut batch,
                &[b"SET", k.as_bytes(), v.as_bytes()],
            );
            cachelab_protocol::resp::compose_command(&mut batch, &[b"GET", k.as_bytes()]);
            if i % 50 == 0 {
                batch.extend_from_slice(b"PING\r\n");
            }
        }
        client.client.send(&batch);
        for i in 0..400 {
            assert_eq!(client.reply(), "+OK\r\n", "{extra:?} set {i}");
            assert_eq!(client.reply(), bulk(&format!("v{i}")), "{extra:?} get {i}");
            if i % 50 == 0 {
                assert_eq!(client.reply(), "+PONG\r\n");
            }
        }
    }
}

#[test]
fn the_stats_file_and_the_summary_count_one_request_per_command() {
    let servers = start_redis(2);
    let mut proxy = redis_proxy(&servers, &["--stats-window", "0.2"]);
    let mut client = RespClient::connect(proxy.addr);
    for i in 0..20 {
        assert_eq!(client.cmd(&["SET", &format!("k{i}"), "v"]), "+OK\r\n");
        assert_eq!(client.cmd(&["GET", &format!("k{i}")]), bulk("v"));
    }
    assert_eq!(
        client.cmd(&["MGET", "k1", "k2", "none"]),
        format!("*3\r\n{}{}$-1\r\n", bulk("v"), bulk("v"))
    );
    drop(client);
    let summary = proxy.stop();
    assert_eq!(summary.arrivals, 41);
    let lines = proxy.stats_lines();
    let windows: Vec<&serde_json::Value> =
        lines.iter().filter(|l| l.get("ops").is_some()).collect();
    assert!(!windows.is_empty(), "{lines:?}");
}
