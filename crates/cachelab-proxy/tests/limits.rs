//! Bounds on connections: past --max-connections a client gets memcached's error line and
//! is closed; --idle-timeout closes idle clients; a file-descriptor limit too small for
//! --max-connections is refused at start, clearly.

mod common;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::thread;
use std::time::Duration;

use common::{start_servers, values_reply, Client};

#[test]
fn a_connection_past_the_limit_gets_the_error_line_and_is_closed() {
    let servers = start_servers(1);
    let proxy = common::Proxy::start(&[&servers[0]], &["--max-connections", "2"]);
    let mut first = proxy.client();
    let mut second = proxy.client();
    assert_eq!(first.set("k", "v"), "STORED\r\n");
    assert_eq!(second.get(&["k"]), values_reply(&[("k", "v")]));

    let mut third = Client::connect(proxy.addr);
    assert_eq!(third.read_line(), "ERROR Too many open connections\r\n");
    assert!(third.reads_eof());
    // the others keep working, and a place freed is a place taken
    assert_eq!(first.get(&["k"]), values_reply(&[("k", "v")]));
    drop(second);
    // The place is free once the proxy has closed its side (asked on a connection
    // that already holds one).
    let stat = common::stat_text;
    assert!(
        common::wait_until(Duration::from_secs(5), || stat(
            &mut first,
            "curr_connections"
        ) == "1"),
        "the closed connection still holds its place"
    );
    let mut fourth = proxy.client();
    assert_eq!(fourth.get(&["k"]), values_reply(&[("k", "v")]));
    let stats =
        String::from_utf8(fourth.request(b"stats\r\n", cachelab_protocol::Expect::Stats)).unwrap();
    assert!(stats.contains("STAT rejected_connections 1\r\n"), "{stats}");
}

#[test]
fn an_idle_client_is_closed_after_the_idle_timeout_and_a_busy_one_is_not() {
    let servers = start_servers(1);
    let proxy = common::Proxy::start(&[&servers[0]], &["--idle-timeout", "0.3"]);
    let mut idle = proxy.client();
    let mut busy = proxy.client();
    for _ in 0..8 {
        thread::sleep(Duration::from_millis(100));
        assert_eq!(busy.set("k", "v"), "STORED\r\n");
    }
    assert!(idle.reads_eof(), "the idle client was not closed");
    assert_eq!(busy.get(&["k"]), values_reply(&[("k", "v")]));
}

#[test]
fn a_descriptor_limit_below_max_connections_is_refused_at_start() {
    let servers = start_servers(1);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cachelab-proxy"));
    cmd.args(["-p", "0", "-m", &servers[0].addr.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setrlimit is async-signal-safe; the child only lowers its own limit.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 256,
                rlim_max: 256,
            };
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--max-connections 4096 with 16 workers x 1 servers needs about")
            && stderr.contains("the limit is 256 (ulimit -n)"),
        "{stderr}"
    );
}
