//! `--loops N`: N event loops serve one port. The first accepts and hands the clients to
//! the loops in turn, each loop serves its clients with its own queue and workers, and
//! every client gets exactly its own answers; the connection limit is the whole proxy's.

mod common;

use std::thread;

use common::{start_servers, stat_text as stat, values_reply, Client};

const LOOPS: usize = 3;
const WORKERS: usize = 2;
const CLIENTS: usize = 12;
const ROUNDS: usize = 200;

#[test]
fn n_loops_serve_one_port_and_every_client_gets_its_own_answers() {
    let servers = start_servers(2);
    let (loops, workers) = (LOOPS.to_string(), WORKERS.to_string());
    let mut proxy = common::Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["--loops", &loops, "-t", &workers, "--pipeline", "4"],
    );
    // Connected one after the other, so the hand-out order is the connection order.
    let clients: Vec<Client> = (0..CLIENTS).map(|_| proxy.client()).collect();
    let done: Vec<usize> = clients
        .into_iter()
        .enumerate()
        .map(|(c, mut client)| {
            thread::spawn(move || {
                for round in 0..ROUNDS {
                    let key = format!("c{c}-k{}", round % 7);
                    let value = format!("v{c}-{round}");
                    assert_eq!(client.set(&key, &value), "STORED\r\n", "client {c}");
                    assert_eq!(
                        client.get(&[&key]),
                        values_reply(&[(&key, &value)]),
                        "client {c} round {round}"
                    );
                }
                ROUNDS
            })
        })
        .map(|t| t.join().expect("a client thread failed"))
        .collect();
    assert_eq!(done, vec![ROUNDS; CLIENTS]);
    let mut probe = proxy.client();
    assert_eq!(stat(&mut probe, "loops"), LOOPS.to_string());
    assert_eq!(stat(&mut probe, "workers"), WORKERS.to_string());
    assert_eq!(
        stat(&mut probe, "total_connections"),
        (CLIENTS + 1).to_string()
    );
    drop(probe);
    proxy.stop();

    // Every loop served its share: worker i is in loop i / WORKERS.
    let lines = proxy.stats_lines();
    assert_eq!(lines[0]["loops"], LOOPS);
    assert_eq!(lines[0]["workers"], WORKERS);
    let mut per_loop = [0u64; LOOPS];
    for line in &lines {
        if line["type"] == "window" && line["scope"] == "worker" {
            let worker = line["worker"].as_u64().unwrap() as usize;
            assert!(worker < LOOPS * WORKERS, "worker {worker}");
            let ops = line["ops"].as_object().unwrap();
            per_loop[worker / WORKERS] += ops
                .values()
                .map(|op| op["count"].as_u64().unwrap_or(0))
                .sum::<u64>();
        }
    }
    let per_client = 2 * ROUNDS as u64;
    let share = (CLIENTS / LOOPS) as u64 * per_client;
    for (l, served) in per_loop.iter().enumerate() {
        // Its clients' requests (the stats probe is answered by the loop itself).
        assert_eq!(*served, share, "loop {l}: {per_loop:?}");
    }
}

#[test]
fn the_connection_limit_is_the_whole_proxys_over_every_loop() {
    let servers = start_servers(1);
    let proxy = common::Proxy::start(&[&servers[0]], &["--loops", "2", "--max-connections", "3"]);
    let mut open: Vec<Client> = (0..3).map(|_| proxy.client()).collect();
    for client in &mut open {
        assert_eq!(client.set("k", "v"), "STORED\r\n");
    }
    let mut fourth = Client::connect(proxy.addr);
    assert_eq!(fourth.read_line(), "ERROR Too many open connections\r\n");
    assert!(fourth.reads_eof());
    for client in &mut open {
        assert_eq!(client.get(&["k"]), values_reply(&[("k", "v")]));
    }
}

#[test]
fn loops_of_zero_is_refused() {
    let args = ["cachelab-proxy", "-m", "127.0.0.1:11211", "--loops", "0"];
    let parsed = <cachelab_proxy::config::Args as clap::Parser>::try_parse_from(args).unwrap();
    let err = cachelab_proxy::config::Config::try_from(&parsed).unwrap_err();
    assert_eq!(err.to_string(), "--loops must be at least 1");
}
