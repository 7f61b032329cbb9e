//! The floor client sends what it is told to: closed loop, the set:get mix, every
//! request answered before the next on its connection.

use std::process::Command;

use cachelab_testkit::Memcached;

#[test]
fn it_sends_the_mix_and_counts_what_was_answered() {
    let server = Memcached::start();
    let out = Command::new(env!("CARGO_BIN_EXE_cachelab-floor-load"))
        .args(["-s", &server.addr.to_string(), "-c", "4", "-t", "0.5"])
        .args(["-d", "100", "--ratio", "1:3", "--keys", "50"])
        .output()
        .expect("cannot run cachelab-floor-load");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let answered: u64 = stdout
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected output {stdout:?}"));
    let (sets, gets) = (server.stat("cmd_set"), server.stat("cmd_get"));
    assert!(answered > 100, "{answered}");
    // Every answered request reached the server; at most one per connection was still
    // in flight at the end.
    assert!(
        (answered..=answered + 4).contains(&(sets + gets)),
        "{answered} {sets} {gets}"
    );
    // runs of 1 set then 3 gets on each connection
    assert!(
        sets * 3 <= gets + 12 && gets <= sets * 3 + 12,
        "{sets} {gets}"
    );
    assert!(server.stat("curr_items") <= 50);
}

#[test]
fn a_bad_ratio_is_refused_by_name() {
    let out = Command::new(env!("CARGO_BIN_EXE_cachelab-floor-load"))
        .args(["-s", "127.0.0.1:1", "--ratio", "0:0"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--ratio"));
}
