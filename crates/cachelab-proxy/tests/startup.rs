//! Start-up failures, as a script sees them: each is printed once on stderr, the process
//! exits non-zero, and stdout never says `listening on` (a script waiting for that line
//! would take the proxy for started). The process is the subject, so each case runs the
//! binary.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Long enough for any start-up failure on a loaded machine; a proxy still running then
/// has started when it should not have.
const EXIT_DEADLINE: Duration = Duration::from_secs(30);

fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap()
}

/// Runs the proxy with `args` until it exits; kills it (by its pid) and fails the test
/// if it is still running at the deadline.
fn run_to_exit(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_cachelab-proxy"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot run cachelab-proxy");
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(child.wait_with_output()));
    match rx.recv_timeout(EXIT_DEADLINE) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: kill only signals the child we spawned, which has not been reaped.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            panic!("cachelab-proxy {args:?} was still running after {EXIT_DEADLINE:?}");
        }
    }
}

/// The refusal a script sees: `expected` once on stderr, in the only stderr line, no
/// `listening on`, exit code `code`.
fn assert_refused(output: &Output, code: i32, expected: &str) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        !stdout.contains("listening on"),
        "stdout announced a listener: {stdout}"
    );
    assert_eq!(output.status.code(), Some(code), "{stderr}");
    assert_eq!(stderr.matches(expected).count(), 1, "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    stderr
}

/// A port taken by a listener held for the test's length.
fn taken_port() -> (TcpListener, String) {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = holder.local_addr().unwrap().port().to_string();
    (holder, port)
}

#[test]
fn a_listen_port_in_use_is_refused_once_without_listening() {
    let (_holder, port) = taken_port();
    let output = run_to_exit(&["-p", &port, "-t", "1", "-m", "127.0.0.1:9"]);
    assert_refused(&output, 1, &format!("cannot listen on 127.0.0.1:{port}"));
}

#[test]
fn a_second_listener_in_use_is_refused_before_the_first_is_announced() {
    let (_holder, port) = taken_port();
    let dir = temp_dir();
    let conf = dir.path().join("two.toml");
    std::fs::write(
        &conf,
        format!(
            "[pools.a]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:9\"]\n\
             [pools.b]\nlisten = \"127.0.0.1:{port}\"\nservers = [\"127.0.0.1:9\"]\n"
        ),
    )
    .unwrap();
    let output = run_to_exit(&["--config", conf.to_str().unwrap(), "-t", "1"]);
    assert_refused(&output, 1, &format!("cannot listen on 127.0.0.1:{port}"));
}

#[test]
fn a_metrics_port_in_use_is_refused_once_without_listening() {
    let (_holder, port) = taken_port();
    let metrics = format!("127.0.0.1:{port}");
    let output = run_to_exit(&[
        "-p",
        "0",
        "-t",
        "1",
        "-m",
        "127.0.0.1:9",
        "--metrics-addr",
        &metrics,
    ]);
    assert_refused(
        &output,
        1,
        &format!("cannot listen for metrics on {metrics}"),
    );
}

#[test]
fn a_stats_file_that_cannot_be_created_is_refused_once_without_listening() {
    let dir = temp_dir();
    let stats = dir.path().join("missing").join("stats.jsonl");
    let output = run_to_exit(&[
        "-p",
        "0",
        "-t",
        "1",
        "-m",
        "127.0.0.1:9",
        "--stats-file",
        stats.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        1,
        &format!("cannot create the stats file {}: ", stats.display()),
    );
}

#[test]
fn with_a_log_file_the_error_is_on_stderr_once_and_in_the_log() {
    let (_holder, port) = taken_port();
    let dir = temp_dir();
    let log = dir.path().join("proxy.log");
    let output = run_to_exit(&[
        "-p",
        &port,
        "-t",
        "1",
        "-m",
        "127.0.0.1:9",
        "--log-file",
        log.to_str().unwrap(),
    ]);
    let expected = format!("cannot listen on 127.0.0.1:{port}");
    assert_refused(&output, 1, &expected);
    let log = std::fs::read_to_string(&log).unwrap();
    assert_eq!(log.matches(&expected).count(), 1, "{log}");
}

fn write_config(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_yaml_alias_bomb_is_refused_once_naming_aliases() {
    let dir = temp_dir();
    // Nine levels of nine aliases: 9^9 scalars if expanded.
    let mut text = String::from("a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n");
    for (prev, name) in "abcdefgh".chars().zip("bcdefghi".chars()) {
        let refs = vec![format!("*{prev}"); 9].join(",");
        text.push_str(&format!("{name}: &{name} [{refs}]\n"));
    }
    let conf = write_config(dir.path(), "bomb.yml", &text);
    let output = run_to_exit(&["--config", &conf]);
    assert_refused(
        &output,
        2,
        &format!("{conf}: line 2 column 8: YAML aliases (*name) are not supported"),
    );
}

#[test]
fn an_oversized_config_is_refused_once_by_name_and_limit() {
    let dir = temp_dir();
    let limit = cachelab_proxy::config::file::MAX_CONFIG_BYTES as usize;
    let mut text = String::from("alpha:\n  listen: 127.0.0.1:0\n  servers:\n");
    let mut i = 0;
    while text.len() <= limit {
        text.push_str(&format!("   - 127.0.0.1:11211:1 server{i}\n"));
        i += 1;
    }
    let conf = write_config(dir.path(), "big.yml", &text);
    let output = run_to_exit(&["--config", &conf]);
    assert_refused(
        &output,
        2,
        &format!("{conf}: larger than 4 MiB, the limit for a config file"),
    );
}

#[test]
fn an_unreadable_tls_certificate_is_refused_once_without_listening() {
    let dir = temp_dir();
    let cert = dir.path().join("missing.pem");
    let key = dir.path().join("missing.key");
    let output = run_to_exit(&[
        "-p",
        "0",
        "-t",
        "1",
        "-m",
        "127.0.0.1:9",
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        1,
        &format!(
            "pool default: cannot read certificates {}: ",
            cert.display()
        ),
    );
}

#[test]
fn a_unix_socket_listener_is_not_announced_and_its_file_goes_when_start_up_fails() {
    let dir = temp_dir();
    let socket = dir.path().join("proxy.sock");
    let stats = dir.path().join("missing").join("stats.jsonl");
    let output = run_to_exit(&[
        "--unix-socket",
        socket.to_str().unwrap(),
        "-t",
        "1",
        "-m",
        "127.0.0.1:9",
        "--stats-file",
        stats.to_str().unwrap(),
    ]);
    assert_refused(
        &output,
        1,
        &format!("cannot create the stats file {}: ", stats.display()),
    );
    assert!(!socket.exists(), "the socket file was left behind");
}

/// Every command-line error is one line on stderr (clap's usage paragraph is not
/// printed), and so is a configuration that could never serve, naming pool and server.
#[test]
fn command_line_and_configuration_errors_are_one_line() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["-p", "0", "-m", "127.0.0.1:9", "--redis-db", "-1"],
            "cachelab-proxy: invalid value '-1' for '--redis-db <N>': expected a database \
             number, 0 or more (see --help)",
        ),
        (
            &["-p", "0", "-m", "127.0.0.1:9", "--tls-cert", "cachelab.pem"],
            "cachelab-proxy: the following required arguments were not provided: --tls-key \
             <FILE> (see --help)",
        ),
        (
            &["-p", "0", "-m", "127.0.0.1:0"],
            "cachelab-proxy: pool default: server 127.0.0.1:0: port 0 cannot be connected to",
        ),
    ];
    for (args, line) in cases {
        assert_refused(&run_to_exit(args), 2, line);
    }
    let dir = temp_dir();
    let conf = dir.path().join("mixed.yml");
    std::fs::write(
        &conf,
        "m:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:9:1\n\
         r:\n  listen: 127.0.0.1:0\n  redis: true\n  servers:\n   - 127.0.0.1:9:1\n",
    )
    .unwrap();
    let output = run_to_exit(&["--config", conf.to_str().unwrap()]);
    assert_refused(
        &output,
        2,
        "pools m (memcached) and r (redis) both name server 127.0.0.1:9: a server speaks \
         one protocol",
    );
}
