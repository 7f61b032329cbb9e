//! The command line turned into a `Config`: what is accepted, what is refused and why.

use super::*;
use clap::Parser;

fn parse(argv: &[&str]) -> Result<Config, String> {
    let args = Args::try_parse_from(argv).map_err(|e| e.to_string())?;
    Config::try_from(&args).map_err(|e| e.to_string())
}

#[test]
fn the_original_flags_are_accepted() {
    let c = parse(&[
        "p",
        "-l",
        "127.0.0.1",
        "-p",
        "0",
        "-t",
        "8",
        "-m",
        "127.0.0.1:1",
        "127.0.0.1:2",
        "-s",
    ])
    .unwrap();
    assert_eq!(c.workers, 8);
    assert_eq!(c.servers.len(), 2);
    assert!(c.sharded);
    assert_eq!(c.listen.port(), Some(0));
}

#[test]
fn servers_are_required_and_must_be_host_port() {
    assert!(parse(&["p"]).is_err());
    let err = parse(&["p", "-m", "localhost"]).unwrap_err();
    assert!(err.contains("not host:port"), "{err}");
}

#[test]
fn descriptors_count_clients_server_connections_and_spares() {
    let c = parse(&[
        "p",
        "-t",
        "10",
        "--max-connections",
        "100",
        "-m",
        "127.0.0.1:1",
        "127.0.0.1:2",
    ])
    .unwrap();
    assert_eq!(c.descriptors_needed(), 100 + 10 * 2 + SPARE_DESCRIPTORS);
}

#[test]
fn tls_and_unix_sockets_on_the_command_line() {
    let c = parse(&[
        "p",
        "--unix-socket",
        "/tmp/cachelab-p.sock",
        "--unix-socket-mode",
        "660",
        "-m",
        "/tmp/cachelab-m.sock",
        "127.0.0.1:2",
    ])
    .unwrap();
    assert_eq!(c.listen, Endpoint::Unix("/tmp/cachelab-p.sock".into()));
    assert_eq!(c.unix_socket_mode, 0o660);
    assert_eq!(c.servers[0], Endpoint::Unix("/tmp/cachelab-m.sock".into()));
    let c = parse(&[
        "p",
        "--tls-cert",
        "c.pem",
        "--tls-key",
        "k.pem",
        "--tls-client-ca",
        "ca.pem",
        "--tls-protocols",
        "TLSv1.3",
        "--server-tls",
        "--server-tls-ca",
        "s.pem",
        "--server-tls-sni",
        "cache",
        "-m",
        "127.0.0.1:1",
    ])
    .unwrap();
    let tls = c.listeners[0].tls.as_ref().unwrap();
    assert_eq!(
        tls.client_ca.as_deref(),
        Some(std::path::Path::new("ca.pem"))
    );
    assert!(!tls.protocols.tls12 && tls.protocols.tls13);
    let server = c.listeners[0].pool.server_tls.as_ref().unwrap();
    assert_eq!(server.sni.as_deref(), Some("cache"));
    // Sub-options need their switch; a key needs its certificate.
    assert!(parse(&["p", "--server-tls-ca", "s.pem", "-m", "127.0.0.1:1"]).is_err());
    assert!(parse(&["p", "--tls-cert", "c.pem", "-m", "127.0.0.1:1"]).is_err());
    let err = parse(&[
        "p",
        "--server-tls",
        "--server-tls-skip-verify",
        "-m",
        "/tmp/m.sock",
    ])
    .unwrap_err();
    assert!(err.contains("Unix socket server"), "{err}");
    assert!(parse(&["p", "--unix-socket-mode", "999", "-m", "127.0.0.1:1"]).is_err());
}

#[test]
fn more_distinct_servers_than_the_registry_holds_are_refused_by_count() {
    let servers: Vec<String> = (1..=MAX_SERVERS + 1)
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let mut argv = vec!["p", "-m"];
    argv.extend(servers.iter().map(String::as_str));
    let err = parse(&argv).unwrap_err();
    assert_eq!(
        err,
        format!(
            "{} distinct servers (address, protocol, database, password, TLS); at most \
             {MAX_SERVERS} are supported",
            MAX_SERVERS + 1
        )
    );
    assert!(parse(&argv[..argv.len() - 1]).is_ok());
}

#[test]
fn zero_workers_and_bad_windows_are_rejected() {
    assert!(parse(&["p", "-t", "0", "-m", "127.0.0.1:1"]).is_err());
    assert!(parse(&["p", "--stats-window", "0", "-m", "127.0.0.1:1"]).is_err());
    assert!(parse(&["p", "--stats-window", "-1", "-m", "127.0.0.1:1"]).is_err());
    let err = parse(&["p", "--pipeline", "0", "-m", "127.0.0.1:1"]).unwrap_err();
    assert!(err.contains("--pipeline"), "{err}");
}

/// The tokio shell's flags are refused in one line that says what replaced them, so a
/// script written for it fails loudly rather than measuring something else.
#[test]
fn the_removed_shell_flags_are_refused_saying_what_replaced_them() {
    for (flag, value) in [
        ("--shell", "tokio"),
        ("--shell", "loop"),
        ("--threads", "4"),
    ] {
        let err = parse(&["p", "-m", "127.0.0.1:11211", flag, value]).unwrap_err();
        assert!(err.contains(flag), "{err}");
        assert!(err.contains("removed with the tokio shell"), "{err}");
        assert!(
            err.contains("event loop") || err.contains("event-loop"),
            "{err}"
        );
    }
}

/// A configuration that could never serve, in both file formats: refused when read, in
/// one line that names the pool and the server.
#[test]
fn configs_that_cannot_serve_are_refused_in_one_line_naming_pool_and_server() {
    let long = format!("/tmp/cachelab-{}.sock", "s".repeat(100));
    // (nutcracker.yml pools, the same in TOML, the refusal)
    let cases: Vec<(String, String, String)> = vec![
        (
            "a:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:0:1\n".into(),
            "[pools.a]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:0:1\"]\n".into(),
            "pool a: server 127.0.0.1:0: port 0 cannot be connected to".into(),
        ),
        (
            format!("a:\n  listen: 127.0.0.1:0\n  servers:\n   - {long}:1\n"),
            format!("[pools.a]\nlisten = \"127.0.0.1:0\"\nservers = [\"{long}:1\"]\n"),
            format!(
                "pool a: server {long}: a Unix socket path is at most 107 bytes (sun_path), \
                 this one is 119"
            ),
        ),
        (
            "r:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_auth: \"\"\n  servers:\n   \
             - 127.0.0.1:6379:1\n"
                .into(),
            "[pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\nredis_auth = \"\"\n\
             servers = [\"127.0.0.1:6379\"]\n"
                .into(),
            "pool r: redis_auth is empty: Redis takes no empty password (leave redis_auth out \
             for a server without one)"
                .into(),
        ),
        (
            "m:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:6379:1\n\
             r:\n  listen: 127.0.0.1:0\n  redis: true\n  servers:\n   - 127.0.0.1:6380:1\n   \
             - 127.0.0.1:6379:1\n"
                .into(),
            "[pools.m]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:6379\"]\n\
             [pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\n\
             servers = [\"127.0.0.1:6380\", \"127.0.0.1:6379\"]\n"
                .into(),
            "pools m (memcached) and r (redis) both name server 127.0.0.1:6379: a server \
             speaks one protocol"
                .into(),
        ),
    ];
    let defaults = fields::Defaults::for_tests();
    for (yml, toml, refusal) in &cases {
        let from_yml = super::nutcracker::parse_nutcracker(yml, &defaults).unwrap_err();
        let from_toml = super::toml::parse_toml(toml, &defaults).unwrap_err();
        assert_eq!(&from_yml, refusal, "nutcracker.yml");
        assert_eq!(&from_toml, refusal, "TOML");
        assert_eq!(refusal.lines().count(), 1);
    }
    // The same pools with servers that can serve are accepted.
    let fine = "m:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:11211:1\n\
                r:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_auth: pw\n  servers:\n   \
                - 127.0.0.1:6379:1\n   - /tmp/cachelab-r.sock:1\n";
    assert_eq!(
        nutcracker::parse_nutcracker(fine, &defaults).unwrap().len(),
        2
    );
}

#[test]
fn the_command_line_refuses_the_same_servers_naming_its_pool() {
    let long = format!("/tmp/cachelab-{}.sock", "s".repeat(100));
    let cases: &[(&[&str], String)] = &[
        (
            &["p", "-m", "127.0.0.1:1", "127.0.0.1:0"],
            "pool default: server 127.0.0.1:0: port 0 cannot be connected to".into(),
        ),
        (
            &["p", "-m", &long],
            format!(
                "pool default: server {long}: a Unix socket path is at most 107 bytes \
                 (sun_path), this one is 119"
            ),
        ),
        (
            &[
                "p",
                "--protocol",
                "redis",
                "--redis-auth",
                "",
                "-m",
                "127.0.0.1:1",
            ],
            "pool default: redis_auth is empty: Redis takes no empty password (leave \
             redis_auth out for a server without one)"
                .into(),
        ),
    ];
    for (argv, refusal) in cases {
        assert_eq!(&parse(argv).unwrap_err(), refusal, "{argv:?}");
    }
}

#[test]
fn pools_sharing_an_address_count_once_per_distinct_setting() {
    let dir = tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap();
    let path = dir.path().join("two.yml");
    let pool = |name: &str, db: u32| {
        format!(
            "{name}:\n  listen: 127.0.0.1:0\n  redis: true\n  redis_db: {db}\n  servers:\n   \
             - 127.0.0.1:6379:1\n"
        )
    };
    std::fs::write(&path, pool("a", 0) + &pool("b", 5) + &pool("c", 5)).unwrap();
    let c = parse(&["p", "--config", path.to_str().unwrap(), "-t", "4"]).unwrap();
    assert_eq!(c.servers.len(), 1, "one address");
    let keys: Vec<String> = c.server_keys().iter().map(ToString::to_string).collect();
    assert_eq!(keys, ["127.0.0.1:6379", "127.0.0.1:6379/db5"]);
    assert_eq!(
        c.descriptors_needed(),
        c.max_connections as u64 + 4 * 2 + SPARE_DESCRIPTORS
    );
}
