//! The `--pipeline` extension: a worker takes several waiting requests and has them at
//! the servers together. Every reply must still be the right one, in order, and the
//! worker must really go to the servers fewer times than there are requests.

mod common;

use std::thread;

use cachelab_protocol::Expect;
use common::{start_servers, values_reply, Client, Proxy};

const CLIENTS: usize = 8;
const PER_CLIENT: usize = 200;

use common::stat_number as stat;

/// Each client pipelines, on its own keys, a set then a get of the value just set, and
/// a get of a key nobody set; returns the number of requests the proxy forwarded.
fn concurrent_clients_get_their_own_answers(proxy: &common::Proxy) -> u64 {
    let addr = proxy.addr;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            thread::spawn(move || {
                let mut client = Client::connect(addr);
                let mut batch = Vec::new();
                let mut expected = Vec::new();
                for i in 0..PER_CLIENT {
                    let key = format!("c{c}-k{}", i % 10);
                    let value = format!("value-{c}-{i}");
                    batch.extend(format!("set {key} 0 0 {}\r\n{value}\r\n", value.len()).bytes());
                    expected.push("STORED\r\n".to_string());
                    batch.extend(format!("get {key} c{c}-never\r\n").bytes());
                    expected.push(values_reply(&[(&key, &value)]));
                }
                client.send(&batch);
                for (i, want) in expected.iter().enumerate() {
                    let expect = if i % 2 == 0 {
                        Expect::Store
                    } else {
                        Expect::Values
                    };
                    let got = String::from_utf8(client.read_reply(expect)).unwrap();
                    assert_eq!(&got, want, "client {c}, reply {i}");
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    (CLIENTS * PER_CLIENT * 2) as u64
}

#[test]
fn batches_carry_several_requests_and_every_reply_is_right() {
    let servers = start_servers(3);
    let proxy = Proxy::start(
        &servers.iter().collect::<Vec<_>>(),
        &["-t", "1", "--pipeline", "16"],
    );
    let forwarded = concurrent_clients_get_their_own_answers(&proxy);
    let mut client = proxy.client();
    assert_eq!(stat(&mut client, "pipeline"), 16);
    let batches = stat(&mut client, "worker_batches");
    assert!(
        batches < forwarded,
        "{batches} batches for {forwarded} requests: nothing was batched"
    );
    assert!(batches * 16 >= forwarded, "a batch above the depth");
    // Replicated sets reached every server; the reads were balanced over them.
    let sets: Vec<u64> = servers.iter().map(|s| s.stat("cmd_set")).collect();
    assert_eq!(sets, vec![(CLIENTS * PER_CLIENT) as u64; 3]);
    let gets: u64 = servers.iter().map(|s| s.stat("cmd_get")).sum();
    assert_eq!(gets, (CLIENTS * PER_CLIENT * 2) as u64, "two keys per get");
}

#[test]
fn by_default_every_request_goes_to_the_servers_on_its_own() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["-t", "1"]);
    let forwarded = concurrent_clients_get_their_own_answers(&proxy);
    let mut client = proxy.client();
    assert_eq!(stat(&mut client, "pipeline"), 1);
    assert_eq!(stat(&mut client, "worker_batches"), forwarded);
}

#[test]
fn a_batch_of_gets_returns_each_clients_value_byte_for_byte() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["-t", "2", "--pipeline", "32"]);
    common::large_values_come_back_whole(&proxy, 5, "");
}
