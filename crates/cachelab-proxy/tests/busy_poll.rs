//! `--busy-poll-us`: spinning changes when the proxy reads, never what it answers; and it
//! stops spinning once traffic stops.

mod common;

use std::thread;
use std::time::Duration;

use cachelab_protocol::Expect;
use common::{start_servers, values_reply, Spawned};

/// The proxy's CPU time so far (user + system), in clock ticks.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

fn answers_right_then_goes_quiet(extra: &[&str]) {
    let servers = start_servers(2);
    let mut args = vec!["--busy-poll-us", "200"];
    args.extend_from_slice(extra);
    let mut proxy = Spawned::start(&servers.iter().collect::<Vec<_>>(), &args);
    let addr = proxy.addr;
    let clients: Vec<_> = (0..4)
        .map(|c| {
            thread::spawn(move || {
                let mut client = common::Client::connect(addr);
                for i in 0..200 {
                    let (key, value) = (format!("bp{c}-{}", i % 7), format!("v{c}-{i}"));
                    let set = format!("set {key} 0 0 {}\r\n{value}\r\n", value.len());
                    assert_eq!(client.request(set.as_bytes(), Expect::Store), b"STORED\r\n");
                    let got = client.request(format!("get {key}\r\n").as_bytes(), Expect::Values);
                    assert_eq!(
                        String::from_utf8(got).unwrap(),
                        values_reply(&[(&key, &value)])
                    );
                }
            })
        })
        .collect();
    for client in clients {
        client.join().unwrap();
    }
    // Replicated to both servers, as without busy-polling.
    for server in &servers {
        assert_eq!(server.stat("cmd_set"), 800);
    }
    // Quiet: the spinner sleeps, so a second of idleness costs next to no CPU (a spinning
    // thread would use all of it: 100 ticks).
    thread::sleep(Duration::from_millis(200));
    let before = cpu_ticks(proxy.child.id());
    thread::sleep(Duration::from_secs(1));
    let idle = cpu_ticks(proxy.child.id()) - before;
    assert!(idle < 30, "{idle} ticks of CPU in one idle second");
    // The spinner does not hold up a clean exit, and the summary counts every request.
    let (code, summary) = proxy.terminate();
    assert_eq!(code, Some(0), "{summary}");
    assert!(summary.contains(", 1600 requests received"), "{summary}");
}

#[test]
fn a_busy_polling_pipelined_proxy_answers_right_and_idles() {
    answers_right_then_goes_quiet(&["--pipeline", "4", "-t", "2"]);
}

#[test]
fn a_busy_polling_proxy_in_default_mode_answers_right_and_idles() {
    answers_right_then_goes_quiet(&["-t", "4"]);
}
