//! The memcached binary protocol against real memcached: a populate writes every key, a
//! get-only run then has no misses, multi-gets count hits and misses per key, and an
//! empty server's misses are misses, not errors.

mod common;

use common::{load, Memcached};
use serde_json::Value;

const KEYS: &str = "--key-maximum=999";

fn u(report: &Value, pointer: &str) -> u64 {
    report
        .pointer(pointer)
        .and_then(Value::as_u64)
        .unwrap_or_else(|| panic!("no {pointer} in the report"))
}

fn binary(server: &Memcached, extra: &[&str]) -> Value {
    let mut args = vec!["-P", "memcache_binary", "-t", "1", "-c", "2", KEYS];
    args.extend_from_slice(extra);
    load(server.addr, &args).ok().clone()
}

#[test]
fn after_a_binary_populate_binary_gets_never_miss() {
    let server = Memcached::start();
    let populate = binary(&server, &["--populate"]);
    assert_eq!(u(&populate, "/summary/set/ops"), 1000);
    assert_eq!(u(&populate, "/totals/errors"), 0);
    assert_eq!(server.stat("curr_items"), 1000);

    let gets = binary(&server, &["--ratio=0:1", "--requests=300"]);
    assert_eq!(u(&gets, "/summary/get/ops"), 600);
    assert_eq!(u(&gets, "/summary/get/hits"), 600);
    assert_eq!(u(&gets, "/summary/get/misses"), 0);
    assert_eq!(u(&gets, "/totals/errors"), 0);

    let multi = binary(
        &server,
        &["--ratio=0:1", "--requests=50", "--multiget-keys=6"],
    );
    assert_eq!(u(&multi, "/summary/multiget/ops"), 100);
    assert_eq!(u(&multi, "/summary/multiget/hits"), 600);
    assert_eq!(u(&multi, "/summary/multiget/misses"), 0);
    assert_eq!(server.stat("cmd_get"), 600 + 600);
}

#[test]
fn an_empty_server_answers_binary_gets_with_misses_not_errors() {
    let server = Memcached::start();
    let gets = binary(
        &server,
        &["--ratio=0:1", "--requests=20", "--multiget-keys=3"],
    );
    assert_eq!(u(&gets, "/summary/multiget/hits"), 0);
    assert_eq!(u(&gets, "/summary/multiget/misses"), 120);
    let single = binary(&server, &["--ratio=0:1", "--requests=20"]);
    assert_eq!(u(&single, "/summary/get/misses"), 40);
    assert_eq!(u(&single, "/totals/errors"), 0);
    let mixed = binary(&server, &["--ratio=1:1", "--requests=20"]);
    assert_eq!(u(&mixed, "/summary/set/ops"), 20);
    assert_eq!(u(&mixed, "/totals/errors"), 0);
}
