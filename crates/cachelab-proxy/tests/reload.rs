//! Live reload (SIGHUP) under a closed-loop load: the pool changes twice, no client
//! sees an error or loses its connection, new requests use the new pool; a broken file
//! is refused with its reason logged and the old pool keeps serving.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use common::{start_servers, Memcached};

fn pool(servers: &[&Memcached], mode: &str) -> String {
    let list: Vec<String> = servers.iter().map(|s| format!("\"{}\"", s.addr)).collect();
    format!(
        "[pools.main]\nlisten = \"127.0.0.1:0\"\nmode = \"{mode}\"\nhash = \"md5\"\n\
         servers = [{}]\n",
        list.join(", ")
    )
}

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    errors: AtomicU64,
    dropped: AtomicU64,
}

#[test]
fn the_pool_changes_twice_under_load_without_an_error_or_a_dropped_connection() {
    let servers = start_servers(3);
    let dir = common::temp_dir();
    let path = dir.path().join("proxy.toml");
    std::fs::write(&path, pool(&[&servers[0]], "replicate")).unwrap();
    // The binary: SIGHUP is part of the subject.
    let proxy = common::Spawned::start_args(&[
        "--config".into(),
        path.display().to_string(),
        "-t".into(),
        "4".into(),
    ]);
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let mut client = proxy.client();
            let (stop, tally) = (stop.clone(), tally.clone());
            thread::spawn(move || {
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let key = format!("k{t}:{}", i % 50);
                    // A dropped connection would fail the read or write (the client has
                    // a timeout): count it rather than panic.
                    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let set = client.set(&key, "v");
                        let get = client.get(&[&key]);
                        (set, get)
                    }));
                    match outcome {
                        Ok((set, get)) => {
                            // A miss is fine (the key may live on a server of the
                            // previous pool); an error line is not.
                            if set != "STORED\r\n"
                                || !(get.starts_with("VALUE ") || get == "END\r\n")
                            {
                                tally.errors.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Err(_) => {
                            tally.dropped.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                    }
                    tally.requests.fetch_add(2, Ordering::Relaxed);
                    i += 1;
                }
            })
        })
        .collect();
    let requests = || tally.requests.load(Ordering::Relaxed);
    let sets = |s: &Memcached| s.stat("cmd_set");
    // Each phase is measured in requests, not time: it lasts until `done` holds.
    let until = |done: &dyn Fn() -> bool| {
        assert!(
            common::wait_until(Duration::from_secs(20), done),
            "the load stalled at {} requests",
            requests()
        );
    };
    until(&|| requests() >= 100);

    // 1: one server, replicated -> three servers, sharded.
    std::fs::write(
        &path,
        pool(&[&servers[0], &servers[1], &servers[2]], "shard"),
    )
    .unwrap();
    proxy.signal(libc::SIGHUP);
    proxy.wait_for_log("configuration reloaded", 1);
    let (before1, before2) = (sets(&servers[1]), sets(&servers[2]));
    let at = requests();
    until(&|| requests() > at + 100 && sets(&servers[1]) > before1 && sets(&servers[2]) > before2);
    assert!(requests() > at + 100, "load went on");
    assert!(
        sets(&servers[1]) > before1 && sets(&servers[2]) > before2,
        "new servers used"
    );

    // 2: -> servers 1 and 2 replicated; server 0 gets nothing new.
    std::fs::write(&path, pool(&[&servers[1], &servers[2]], "replicate")).unwrap();
    proxy.signal(libc::SIGHUP);
    proxy.wait_for_log("configuration reloaded", 2);
    let at = requests();
    until(&|| requests() > at + 100); // requests decoded before the reload finish
    let before0 = sets(&servers[0]);
    let at = requests();
    until(&|| requests() > at + 300);
    assert_eq!(sets(&servers[0]), before0, "server 0 left the pool");

    // 3: a broken file is refused; the last good pool keeps serving.
    std::fs::write(&path, pool(&[&servers[0]], "sharded")).unwrap();
    proxy.signal(libc::SIGHUP);
    let log = proxy.wait_for_log("reload refused", 1);
    assert!(log.contains("reload refused"), "{log}");
    let at = requests();
    let before1 = sets(&servers[1]);
    until(&|| requests() > at + 100 && sets(&servers[1]) > before1);
    assert!(requests() > at + 100);
    assert!(sets(&servers[1]) > before1, "the old pool still serves");

    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(tally.errors.load(Ordering::Relaxed), 0, "error replies");
    assert_eq!(
        tally.dropped.load(Ordering::Relaxed),
        0,
        "dropped connections"
    );
    let refused = log
        .lines()
        .find(|l| l.contains("reload refused"))
        .unwrap()
        .to_string();
    assert!(
        refused.contains("mode"),
        "the reason names the field: {refused}"
    );
}
