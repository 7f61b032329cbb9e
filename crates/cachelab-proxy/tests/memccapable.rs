//! libmemcached's conformance checker, `memccapable -a` (libmemcached-tools, which
//! `make` installs), against the proxy with one server and with three replicated ones:
//! every ascii test must pass, as it does against memcached itself.

mod common;

use std::process::Command;

use common::{start_servers, Proxy};

/// Runs `memccapable -a` against `addr`; returns its exit status and output.
fn memccapable(addr: std::net::SocketAddr) -> (bool, String) {
    let out = Command::new("memccapable")
        .args(["-a", "-t", "5", "-h", &addr.ip().to_string()])
        .args(["-p", &addr.port().to_string()])
        .output()
        .expect("memccapable not found: `make deps` installs libmemcached-tools");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn every_ascii_test_passes_against_memcached_itself() {
    let servers = start_servers(1);
    let (ok, text) = memccapable(servers[0].addr);
    assert!(ok && text.contains("All tests passed"), "{text}");
}

#[test]
fn every_ascii_test_passes_through_the_proxy_with_one_server() {
    let servers = start_servers(1);
    let proxy = Proxy::start(&[&servers[0]], &["-t", "4"]);
    let (ok, text) = memccapable(proxy.addr);
    assert!(ok && text.contains("All tests passed"), "{text}");
}

#[test]
fn every_ascii_test_passes_through_the_proxy_with_three_replicated_servers() {
    let servers = start_servers(3);
    let proxy = Proxy::start(&servers.iter().collect::<Vec<_>>(), &["-t", "4"]);
    let (ok, text) = memccapable(proxy.addr);
    assert!(ok && text.contains("All tests passed"), "{text}");
}
