//! `--share-connections` against real servers: the workers of a loop share one
//! connection per server, every client still gets its own replies in order, a server
//! that dies is routed around and used again, and a reply the proxy refuses fails only
//! its own request (the connection stays for the others).

mod common;

use std::thread;
use std::time::Duration;

use cachelab_protocol::RespValue;
use common::resp::{bulk, redis_proxy, start_redis, RespClient};
use common::{start_servers, values_reply, Memcached, Proxy};

const SHARED: &[&str] = &["-t", "4", "--pipeline", "4", "--share-connections"];

/// Clients of memcached `server` (our own `stats` connection included).
fn clients_of(server: &Memcached) -> u64 {
    server.stat("curr_connections")
}

#[test]
fn many_clients_share_one_connection_per_server_and_get_their_own_replies() {
    let servers = start_servers(2);
    let before: Vec<u64> = servers.iter().map(clients_of).collect();
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), SHARED);
    let handles: Vec<_> = (0..8)
        .map(|c| {
            let mut client = proxy.client();
            thread::spawn(move || {
                for i in 0..200 {
                    let (key, value) = (format!("c{c}:{i}"), format!("v{c}.{i}"));
                    assert_eq!(client.set(&key, &value), "STORED\r\n", "{key}");
                    let got = client.get(&[&key, &format!("c{c}:missing")]);
                    assert_eq!(got, values_reply(&[(&key, &value)]), "{key}");
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    // Four workers, one connection to each server.
    let after: Vec<u64> = servers.iter().map(clients_of).collect();
    assert_eq!(after, before.iter().map(|b| b + 1).collect::<Vec<_>>());
}

#[test]
fn each_loop_shares_a_connection_of_its_own() {
    let servers = start_servers(1);
    let before = clients_of(&servers[0]);
    let mut args = vec!["--loops", "2"];
    args.extend_from_slice(SHARED);
    let proxy = Proxy::start(&[&servers[0]], &args);
    // Clients are handed to the loops in turn: four clients, two per loop.
    let handles: Vec<_> = (0..4)
        .map(|c| {
            let mut client = proxy.client();
            thread::spawn(move || {
                for i in 0..100 {
                    let (key, value) = (format!("l{c}:{i}"), format!("v{c}.{i}"));
                    assert_eq!(client.set(&key, &value), "STORED\r\n", "{key}");
                    assert_eq!(client.get(&[&key]), values_reply(&[(&key, &value)]));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(clients_of(&servers[0]), before + 2);
}

#[test]
fn a_redis_pool_shares_one_authenticated_connection() {
    let redis = start_redis(1);
    let proxy = redis_proxy(&redis, SHARED);
    let handles: Vec<_> = (0..6)
        .map(|c| {
            let addr = proxy.addr;
            thread::spawn(move || {
                let mut client = RespClient::connect(addr);
                for i in 0..100 {
                    let (key, value) = (format!("r{c}:{i}"), format!("v{c}.{i}"));
                    assert_eq!(client.cmd(&["SET", &key, &value]), "+OK\r\n");
                    assert_eq!(client.cmd(&["GET", &key]), bulk(&value));
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    let RespValue::Bulk(Some(info)) = redis[0].command(&["INFO", "clients"]) else {
        panic!("INFO clients");
    };
    let info = String::from_utf8(info).unwrap();
    // The proxy's one connection and the one asking.
    assert!(info.contains("connected_clients:2\r\n"), "{info}");
}

#[test]
fn a_killed_server_is_routed_around_and_used_again() {
    let _serial = common::serial();
    let mut servers = start_servers(3);
    let mut args = vec!["--backoff-max", "200", "--server-timeout", "500"];
    args.extend_from_slice(SHARED);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
    let mut client = proxy.client();
    assert_eq!(client.set("k", "v"), "STORED\r\n");

    servers[1].stop();
    for i in 0..30 {
        let got = client.get(&["k"]);
        assert_eq!(got, values_reply(&[("k", "v")]), "get {i} while down");
    }
    let reply = client.set("k2", "v2");
    assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
    assert!(reply.contains(&servers[1].addr.to_string()), "{reply}");

    servers[1].restart();
    let stored = common::wait_until(Duration::from_secs(20), || {
        client.set("k", "v") == "STORED\r\n"
    });
    assert!(stored, "the restarted server is used again");
    let before: Vec<u64> = servers.iter().map(|s| s.stat("cmd_get")).collect();
    for _ in 0..300 {
        assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
    }
    let after: Vec<u64> = servers.iter().map(|s| s.stat("cmd_get")).collect();
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(delta, vec![100, 100, 100]);
}

#[test]
fn a_refused_reply_fails_only_its_request_and_the_connection_stays() {
    let servers = start_servers(1);
    let big = "b".repeat(400_000);
    let mut args = vec!["--max-reply-bytes", "1048576"];
    args.extend_from_slice(SHARED);
    let proxy = Proxy::start(&[&servers[0]], &args);
    let mut setup = proxy.client();
    for key in ["big1", "big2", "big3"] {
        assert_eq!(setup.set(key, &big), "STORED\r\n");
    }
    let connections = servers[0].stat("total_connections");
    let addr = proxy.addr;
    let greedy = thread::spawn(move || {
        let mut client = common::Client::connect(addr);
        for _ in 0..10 {
            // 1.2 MB: over the bound, refused; the bytes after it are read past.
            let reply = client.get(&["big1", "big2", "big3"]);
            assert_eq!(reply, "SERVER_ERROR reply too large\r\n");
        }
    });
    let mut modest = proxy.client();
    for i in 0..200 {
        let key = format!("m{i}");
        assert_eq!(modest.set(&key, "x"), "STORED\r\n", "{key}");
        assert_eq!(modest.get(&[&key]), values_reply(&[(&key, "x")]), "{key}");
    }
    greedy.join().unwrap();
    // No connection was replaced: the one opened since is our `stats` query's.
    assert_eq!(servers[0].stat("total_connections"), connections + 1);
    assert_eq!(common::stat_number(&mut setup, "out_of_step"), 0);
}
