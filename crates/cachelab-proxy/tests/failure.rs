//! A server dies and comes back: reads keep being served by the others, writes answer
//! with the server error, nothing crashes, and the proxy uses the server again.

mod common;

use common::{start_servers, values_reply, Memcached};

fn cmd_gets(servers: &[Memcached]) -> Vec<u64> {
    servers.iter().map(|s| s.stat("cmd_get")).collect()
}

/// The extension `--pipeline` must fail over exactly like the default mode.
const PIPELINED: &[&str] = &["--pipeline", "8"];

#[test]
fn a_killed_server_is_routed_around_and_used_again_after_restart() {
    let _serial = common::serial();
    killed_server_is_routed_around(&[]);
}

#[test]
fn with_pipelining_a_killed_server_is_routed_around_and_used_again_after_restart() {
    let _serial = common::serial();
    killed_server_is_routed_around(PIPELINED);
}

/// The production mode: one connection per server, shared by the workers. Its one
/// failed connection is followed by requests that meet it backing off; they count, so
/// the server is ejected (and restored) as in the other modes.
#[test]
fn with_shared_connections_a_killed_server_is_routed_around_and_used_again_after_restart() {
    let _serial = common::serial();
    killed_server_is_routed_around(&["--pipeline", "16", "--share-connections", "--merge-gets"]);
}

fn killed_server_is_routed_around(mode: &[&str]) {
    let mut servers = start_servers(3);
    let mut args = vec!["-t", "4", "--backoff-max", "200", "--server-timeout", "500"];
    args.extend_from_slice(mode);
    let proxy = common::Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
    let mut client = proxy.client();
    assert_eq!(client.set("k", "v"), "STORED\r\n");

    servers[1].stop();
    for i in 0..30 {
        assert_eq!(
            client.get(&["k"]),
            values_reply(&[("k", "v")]),
            "get {i} while down"
        );
    }
    let reply = client.set("k2", "v2");
    assert!(reply.starts_with("SERVER_ERROR "), "{reply}");
    assert!(reply.contains(&servers[1].addr.to_string()), "{reply}");
    // Sharded multi-GETs also route around it.
    drop(client);

    servers[1].restart();
    // Once the probe has restored it, every worker reconnects whatever its retry time.
    proxy.wait_for_log("server answered the probe: restored", 1);
    let mut client = proxy.client();
    for i in 0..10 {
        assert_eq!(client.set("k", "v"), "STORED\r\n", "set {i} after restart");
    }
    let before = cmd_gets(&servers);
    for _ in 0..300 {
        assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
    }
    let after = cmd_gets(&servers);
    let delta: Vec<u64> = after.iter().zip(&before).map(|(a, b)| a - b).collect();
    assert_eq!(delta, vec![100, 100, 100]);
    // The whole proxy ejected it once and restored it once (shared health).
    proxy.wait_for_log("server ejected", 1);
    let log = proxy.wait_for_log("server answered the probe: restored", 1);
    assert_eq!(log.matches("server ejected:").count(), 1, "{log}");
}

#[test]
fn sharded_multi_gets_move_a_dead_servers_part_to_another_server() {
    let _serial = common::serial();
    dead_servers_part_moves(&[]);
}

#[test]
fn with_pipelining_sharded_multi_gets_move_a_dead_servers_part_to_another_server() {
    let _serial = common::serial();
    dead_servers_part_moves(PIPELINED);
}

fn dead_servers_part_moves(mode: &[&str]) {
    let mut servers = start_servers(3);
    let mut args = vec!["-t", "2", "-s", "--backoff-max", "200"];
    args.extend_from_slice(mode);
    let proxy = common::Proxy::start(&servers.iter().collect::<Vec<_>>(), &args);
    let mut client = proxy.client();
    for k in ["a", "b", "c", "d", "e", "f"] {
        client.set(k, k);
    }
    servers[2].stop();
    for _ in 0..6 {
        assert_eq!(
            client.get(&["f", "e", "d", "c", "b", "a"]),
            values_reply(&[
                ("f", "f"),
                ("e", "e"),
                ("d", "d"),
                ("c", "c"),
                ("b", "b"),
                ("a", "a")
            ])
        );
    }
}

#[test]
fn with_every_server_down_requests_get_server_errors_and_the_proxy_survives() {
    let _serial = common::serial();
    let mut servers = start_servers(1);
    let proxy = common::Proxy::start(&[&servers[0]], &["-t", "2", "--backoff-max", "100"]);
    let mut client = proxy.client();
    servers[0].stop();
    for _ in 0..5 {
        assert!(client.get(&["k"]).starts_with("SERVER_ERROR "));
        assert!(client.set("k", "v").starts_with("SERVER_ERROR "));
    }
    servers[0].restart();
    proxy.wait_for_log("server answered the probe: restored", 1);
    assert_eq!(client.set("k", "v"), "STORED\r\n");
    assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
}
