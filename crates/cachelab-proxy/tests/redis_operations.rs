//! A Redis pool in operation: AUTH and SELECT towards servers with a password and on a
//! database of the pool's, clients asked for the pool's password; a server killed
//! mid-test is ejected, routed around and restored; a reload cannot turn a memcached
//! pool into a Redis pool, but grows one; redis-cli and redis-benchmark work through
//! the proxy.

mod common;

use std::process::Command;
use std::time::Duration;

use cachelab_protocol::RespValue;
use common::resp::{bulk, redis_proxy, start_redis, RespClient};
use common::{Memcached, Proxy};

fn ok() -> RespValue {
    RespValue::Simple(b"OK".to_vec())
}

#[test]
fn servers_get_auth_and_select_and_clients_must_give_the_pool_s_password() {
    let servers = start_redis(2);
    for s in &servers {
        assert_eq!(s.command(&["CONFIG", "SET", "requirepass", "s3cret"]), ok());
    }
    let proxy = redis_proxy(&servers, &["--redis-auth", "s3cret", "--redis-db", "3"]);
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(
        client.cmd(&["GET", "k"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(client.cmd(&["AUTH", "wrong"]), "-ERR invalid password\r\n");
    assert_eq!(
        client.cmd(&["SET", "k", "v"]),
        "-NOAUTH Authentication required.\r\n"
    );
    assert_eq!(client.cmd(&["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(client.cmd(&["GET", "k"]), bulk("v"));
    assert_eq!(client.cmd(&["SELECT", "3"]), "+OK\r\n");
    assert!(client
        .cmd(&["SELECT", "0"])
        .starts_with("-ERR SELECT 0: this pool serves database 3"));
    for s in &servers {
        // the key is in database 3 of every server, not in database 0
        let replies = s.session(&[&["AUTH", "s3cret"], &["SELECT", "3"], &["GET", "k"]]);
        assert_eq!(replies[2], RespValue::Bulk(Some(b"v".to_vec())));
        let replies = s.session(&[&["AUTH", "s3cret"], &["GET", "k"]]);
        assert_eq!(replies[1], RespValue::Bulk(None));
    }
    // another client starts unauthenticated
    let mut other = RespClient::connect(proxy.addr);
    assert_eq!(other.cmd(&["PING"]), "-NOAUTH Authentication required.\r\n");

    // a pool whose password the servers refuse: the connection is not used, and the
    // client learns why
    let refused = redis_proxy(&servers, &["--redis-auth", "nope"]);
    let mut client = RespClient::connect(refused.addr);
    assert_eq!(client.cmd(&["AUTH", "nope"]), "+OK\r\n");
    let reply = client.cmd(&["SET", "k", "v"]);
    assert!(reply.starts_with("-ERR server 127.0.0.1:"), "{reply}");
    assert!(reply.contains("AUTH refused: WRONGPASS"), "{reply}");
}

#[test]
fn a_killed_server_is_ejected_routed_around_and_restored() {
    let _serial = common::serial();
    let mut servers = start_redis(2);
    let proxy = redis_proxy(
        &servers,
        &[
            "--failure-limit",
            "1",
            "--server-timeout",
            "500",
            "--backoff-max",
            "200",
        ],
    );
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    let killed = servers[1].addr;
    servers[1].stop();
    for i in 0..20 {
        assert_eq!(client.cmd(&["GET", "k"]), bulk("v"), "read {i} while down");
    }
    proxy.wait_for_log("server ejected", 1);
    let reply = client.cmd(&["SET", "k2", "v2"]);
    assert!(
        reply.starts_with(&format!("-ERR server {killed} unavailable: ")),
        "{reply}"
    );
    let info = client.cmd(&["INFO"]);
    assert!(
        info.contains(&format!("server_1:addr={killed},state=ejected")),
        "{info}"
    );

    servers[1].restart();
    proxy.wait_for_log("server answered the probe: restored", 1);
    assert!(common::wait_until(Duration::from_secs(5), || {
        client.cmd(&["SET", "k3", "v3"]) == "+OK\r\n"
    }));
    for s in &servers {
        assert_eq!(
            s.command(&["GET", "k3"]),
            RespValue::Bulk(Some(b"v3".to_vec()))
        );
    }
}

/// A pool's protocol is what its connected clients speak and its servers answer: a
/// reload that changes it is refused (a restart changes it), and a Redis pool reloads
/// with more servers.
#[test]
fn a_reload_cannot_change_a_pool_s_protocol_but_can_grow_a_redis_pool() {
    let memcached = Memcached::start();
    let redis = start_redis(2);
    let dir = common::temp_dir();
    let path = dir.path().join("proxy.toml");
    let memcached_pool = format!(
        "[pools.main]\nlisten = \"127.0.0.1:0\"\nservers = [\"{}\"]\n",
        memcached.addr
    );
    let redis_pool = |servers: &[&cachelab_testkit::Redis]| {
        let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
        format!(
            "[pools.main]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\nmode = \"shard\"\n\
             hash = \"murmur\"\nservers = [{}]\n",
            list.join(", ")
        )
    };
    std::fs::write(&path, &memcached_pool).unwrap();
    let proxy = Proxy::start_args(&["--config".into(), path.display().to_string()]);
    let mut old = proxy.client();
    assert_eq!(old.set("k", "v"), "STORED\r\n");

    std::fs::write(&path, redis_pool(&[&redis[0]])).unwrap();
    proxy.reload();
    let log = proxy.wait_for_log("reload refused", 1);
    assert!(
        log.contains(
            "reload refused: pool main changed its protocol from memcached to redis (that \
             needs a restart)"
        ),
        "{log}"
    );
    // the memcached pool keeps serving its client
    assert_eq!(old.get(&["k"]), common::values_reply(&[("k", "v")]));
    assert_eq!(redis[0].dbsize(), 0);
    drop(proxy);

    // a Redis pool reloads with more servers
    std::fs::write(&path, redis_pool(&[&redis[0]])).unwrap();
    let proxy = Proxy::start_args(&["--config".into(), path.display().to_string()]);
    let mut client = RespClient::connect(proxy.addr);
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");
    assert_eq!(
        redis[0].command(&["GET", "k"]),
        RespValue::Bulk(Some(b"v".to_vec()))
    );
    std::fs::write(&path, redis_pool(&[&redis[0], &redis[1]])).unwrap();
    proxy.reload();
    let log = proxy.wait_for_log("configuration reloaded", 1);
    assert_eq!(log.matches("configuration reloaded").count(), 1, "{log}");
    for i in 0..40 {
        assert_eq!(client.cmd(&["SET", &format!("n{i}"), "v"]), "+OK\r\n");
    }
    // (murmur spreads these keys; twemproxy's fnv1a_64 puts short keys that differ in
    // their last bytes next to each other on the ring)
    assert!(redis[1].dbsize() > 0, "the added server holds keys");
    assert!(log.contains("protocol=\"redis\""), "{log}");
}

fn installed(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

#[test]
fn redis_cli_and_redis_benchmark_work_through_the_proxy() {
    if !installed("redis-cli") || !installed("redis-benchmark") {
        eprintln!("redis-cli or redis-benchmark not installed (`make deps`): skipped");
        return;
    }
    let servers = start_redis(2);
    let mut proxy = redis_proxy(&servers, &["-s"]);
    let port = proxy.addr.port().to_string();
    let cli = |args: &[&str]| {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &port])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(cli(&["SET", "greeting", "hello"]), "OK\n");
    assert_eq!(cli(&["GET", "greeting"]), "hello\n");
    assert_eq!(cli(&["MGET", "greeting", "nothing"]), "hello\n\n");
    assert_eq!(cli(&["DEL", "greeting", "nothing"]), "1\n");
    assert!(cli(&["MULTI"]).starts_with("ERR MULTI is not supported"));
    assert!(cli(&["INFO"]).contains("# Stats"));
    let stats = cli(&["INFO", "stats"]);
    assert!(
        stats.starts_with("# Stats\r\n") && !stats.contains("# Server"),
        "{stats}"
    );

    let bench = |args: &[&str]| {
        let out = Command::new("timeout")
            .args(["120", "redis-benchmark", "-h", "127.0.0.1", "-p", &port])
            .args(["-n", "2000", "-c", "10", "-q"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let report = bench(&["-t", "get,set,mset"]);
    for test in ["SET:", "GET:", "MSET (10 keys):"] {
        let line = report.lines().rev().find(|l| l.contains(test));
        assert!(
            line.is_some_and(|l| l.contains("requests per second")),
            "{test}: {report}"
        );
    }
    let mget = bench(&["MGET", "key:1", "key:2", "key:3"]);
    assert!(mget.contains("requests per second"), "{mget}");
    let summary = proxy.stop();
    let errors: u64 = summary.totals.ops.iter().map(|o| o.errors).sum();
    assert_eq!(
        errors, 0,
        "no command the benchmark sent failed at a server"
    );
    let counted: u64 = summary.totals.ops.iter().map(|o| o.count).sum();
    assert!(counted >= 4 * 2000, "{counted} requests");
}

#[test]
fn the_memory_budget_and_the_reply_limit_bound_a_redis_pool_too() {
    let servers = start_redis(1);
    let budget = redis_proxy(
        &servers,
        &["--max-value-size", "4194304", "--memory-budget", "1"],
    );
    let mut client = RespClient::connect(budget.addr);
    let big = "x".repeat(2 << 20);
    assert_eq!(
        client.cmd(&["SET", "big", &big]),
        "-ERR cachelab-proxy is out of memory (--memory-budget)\r\n"
    );
    assert_eq!(client.cmd(&["SET", "k", "v"]), "+OK\r\n");

    let limited = redis_proxy(&servers, &["--max-reply-bytes", "65536"]);
    let mut client = RespClient::connect(limited.addr);
    let large = "y".repeat(1_000_000);
    assert_eq!(servers[0].command(&["SET", "large", &large]), ok());
    let reply = client.cmd(&["GET", "large"]);
    assert!(
        reply == "-ERR reply too large (--max-reply-bytes)\r\n",
        "{} bytes: {:?}",
        reply.len(),
        &reply[..reply.len().min(80)]
    );
    // the connection and the server go on
    assert_eq!(client.cmd(&["GET", "k"]), bulk("v"));
}

/// twemproxy's `auto_eject_hosts` in a shard pool: a dead server's keys move to the next
/// server on the ring once it is ejected, and come back when it is restored.
#[test]
fn a_shard_pool_with_auto_eject_moves_a_dead_server_s_keys_and_brings_them_back() {
    let _serial = common::serial();
    let mut servers = start_redis(3);
    let dir = common::temp_dir();
    let conf = dir.path().join("nutcracker.yml");
    let mut yml = "cache:\n  listen: 127.0.0.1:0\n  redis: true\n  hash: murmur\n  \
                   distribution: ketama\n  auto_eject_hosts: true\n  server_failure_limit: 1\n  \
                   timeout: 500\n  servers:\n"
        .to_string();
    for s in &servers {
        yml.push_str(&format!("   - {}:1\n", s.addr));
    }
    std::fs::write(&conf, yml).unwrap();
    let proxy = Proxy::start_args(&[
        "--config".into(),
        conf.display().to_string(),
        "--backoff-max".into(),
        "200".into(),
    ]);
    let mut client = RespClient::connect(proxy.addr);
    let keys: Vec<String> = (0..60).map(|i| format!("user:{i}")).collect();
    for k in &keys {
        assert_eq!(client.cmd(&["SET", k, "v"]), "+OK\r\n");
    }
    let on_dead: Vec<&String> = keys
        .iter()
        .filter(|k| servers[1].command(&["EXISTS", k]) == RespValue::Integer(1))
        .collect();
    assert!(!on_dead.is_empty());
    servers[1].stop();
    // the first request to reach it fails and ejects it; then its keys have a new home
    let _ = client.cmd(&["GET", on_dead[0]]);
    proxy.wait_for_log("server ejected", 1);
    for k in &on_dead {
        assert_eq!(client.cmd(&["GET", k]), "$-1\r\n", "{k} moved: a miss");
        assert_eq!(client.cmd(&["SET", k, "moved"]), "+OK\r\n");
        assert_eq!(client.cmd(&["GET", k]), bulk("moved"));
    }
    servers[1].restart();
    proxy.wait_for_log("server answered the probe: restored", 1);
    assert!(common::wait_until(Duration::from_secs(5), || {
        client.cmd(&["SET", on_dead[0], "home"]) == "+OK\r\n"
            && servers[1].command(&["GET", on_dead[0]]) == RespValue::Bulk(Some(b"home".to_vec()))
    }));
}
