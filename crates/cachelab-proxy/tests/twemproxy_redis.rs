//! Redis pools place keys as twemproxy does: with the same nutcracker.yml (`redis: true`),
//! every key that Debian's nutcracker stores lands on the server that cachelab's routing
//! chooses, for every hash, with ketama and modula, with and without `hash_tag`
//! (10,000 keys each, found on each redis-server directly). Checked twice: the routing
//! function on a pool built from the same server lines by the config file's own parser
//! and ordering, and end to end, the keys stored through cachelab-proxy started with
//! `--config` on the same nutcracker.yml.

mod common;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::thread;
use std::time::Duration;

use cachelab_protocol::resp::compose_command;
use cachelab_protocol::{parse_resp_reply, ReplyError, RespValue};
use cachelab_proxy::config::fields::{parse_server, twemproxy_order, Resolver};
use cachelab_proxy::config::PoolSpec;
use cachelab_proxy::routing::hash::Hash;
use cachelab_proxy::routing::plan::{Alive, Mode, Pool, PoolServer, ReadPolicy, ServerId};
use cachelab_proxy::routing::redis::split::key_server;
use cachelab_proxy::routing::ring::{Distribution, Member};
use cachelab_proxy::routing::Protocol;
use common::{free_port, Nutcracker, Proxy, Redis};

const KEYS: usize = 10_000;

const HASHES: [&str; 12] = [
    "one_at_a_time",
    "md5",
    "crc16",
    "crc32",
    "crc32a",
    "fnv1_64",
    "fnv1a_64",
    "fnv1_32",
    "fnv1a_32",
    "hsieh",
    "murmur",
    "jenkins",
];

struct NoneEjected;

impl Alive for NoneEjected {
    fn is_ejected(&self, _: ServerId) -> bool {
        false
    }
}

/// Keys of several shapes: plain, tagged (`{...}`), with bytes above 0x7F, long.
fn keys() -> Vec<String> {
    (0..KEYS)
        .map(|i| match i % 4 {
            0 => format!("key:{i}"),
            1 => format!("user:{{{}}}:profile:{i}", i % 97),
            2 => format!("clé-été-{i}"),
            _ => format!("{i:08x}{}", "x".repeat(i % 40)),
        })
        .collect()
}

/// The server lines, with one heavier server and one named one (both matter to ketama).
fn server_lines(servers: &[Redis]) -> Vec<String> {
    servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let weight = if i == 1 { 2 } else { 1 };
            let name = if i == 2 { " gamma" } else { "" };
            format!("{}:{weight}{name}", s.addr)
        })
        .collect()
}

fn nutcracker_yml(
    listen: u16,
    hash: &str,
    distribution: &str,
    tag: bool,
    lines: &[String],
) -> String {
    let tag = if tag { "  hash_tag: \"{}\"\n" } else { "" };
    let mut yml = format!(
        "pool:\n  listen: 127.0.0.1:{listen}\n  redis: true\n  hash: {hash}\n{tag}  \
         distribution: {distribution}\n  timeout: 2000\n  auto_eject_hosts: false\n  \
         server_connections: 1\n  preconnect: true\n  servers:\n"
    );
    for line in lines {
        yml.push_str(&format!("   - {line}\n"));
    }
    yml
}

/// cachelab's pool for the same settings: its servers read by the config file's parser
/// and put in twemproxy's order, as `--config` does.
fn our_pool(hash: &str, distribution: &str, tag: bool, lines: &[String]) -> Pool {
    let mut resolver = Resolver::default();
    let mut spec = PoolSpec {
        name: "pool".into(),
        servers: lines
            .iter()
            .map(|line| parse_server(line, &mut resolver).unwrap())
            .collect(),
        mode: Mode::Shard { replicas: 1 },
        hash: Hash::from_name(hash).unwrap(),
        hash_tag: tag.then_some(*b"{}"),
        distribution: Distribution::from_name(distribution).unwrap(),
        auto_eject: false,
        read_policy: ReadPolicy::Primary,
        timeout: Duration::from_secs(2),
        failure_limit: 0,
        server_tls: None,
        protocol: Protocol::Redis,
        redis_auth: None,
        redis_db: 0,
    };
    twemproxy_order(&mut spec);
    let servers = spec
        .servers
        .iter()
        .map(|s| PoolServer {
            id: lines
                .iter()
                .position(|l| l.starts_with(&s.addr.to_string()))
                .unwrap(),
            addr: s.addr.clone(),
            member: Member {
                name: s.name.clone(),
                weight: s.weight,
            },
        })
        .collect();
    Pool::new(
        spec.name,
        servers,
        spec.mode,
        spec.hash,
        spec.hash_tag,
        spec.distribution,
        spec.auto_eject,
        spec.read_policy,
        spec.timeout,
    )
}

/// Sends `request` and reads `replies` RESP replies; returns them.
fn pipeline(addr: SocketAddr, request: Vec<u8>, replies: usize) -> Vec<RespValue> {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let sender = thread::spawn(move || writer.write_all(&request).unwrap());
    let (mut buf, mut parsed, mut out) = (Vec::new(), 0, Vec::new());
    let mut chunk = [0u8; 65536];
    while out.len() < replies {
        match parse_resp_reply(&buf[parsed..]) {
            Ok((reply, len)) => {
                out.push(reply.to_value());
                parsed += len;
                continue;
            }
            Err(ReplyError::Incomplete) => {}
            Err(e) => panic!("{e}"),
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {} of {replies} replies", out.len());
        buf.extend_from_slice(&chunk[..n]);
    }
    sender.join().unwrap();
    out
}

fn set_all(addr: SocketAddr, keys: &[String]) {
    let mut request = Vec::new();
    for k in keys {
        compose_command(&mut request, &[b"SET", k.as_bytes(), b"v"]);
    }
    for reply in pipeline(addr, request, keys.len()) {
        assert_eq!(reply, RespValue::Simple(b"OK".to_vec()));
    }
}

/// Which server holds each key, asking every server directly.
fn placement(servers: &[Redis]) -> HashMap<String, usize> {
    let mut found = HashMap::new();
    for (index, server) in servers.iter().enumerate() {
        let RespValue::Array(Some(keys)) = server.command(&["KEYS", "*"]) else {
            panic!("KEYS did not answer with an array");
        };
        for key in keys {
            let RespValue::Bulk(Some(key)) = key else {
                panic!("a key that is not a bulk string")
            };
            let key = String::from_utf8(key).unwrap();
            assert!(found.insert(key, index).is_none(), "a key on two servers");
        }
    }
    found
}

fn same_placement(distribution: &str, tag: bool) {
    let servers: Vec<Redis> = (0..3).map(|_| Redis::start()).collect();
    let lines = server_lines(&servers);
    let keys = keys();
    let dir = tempfile::Builder::new()
        .prefix("cachelab")
        .tempdir()
        .unwrap();
    for hash in HASHES {
        for s in &servers {
            assert_eq!(s.command(&["FLUSHALL"]), RespValue::Simple(b"OK".to_vec()));
        }
        let conf = dir.path().join(format!("{hash}-{distribution}-{tag}.yml"));
        let yml = nutcracker_yml(free_port(), hash, distribution, tag, &lines);
        std::fs::write(&conf, yml).unwrap();
        let nutcracker = Nutcracker::start(&conf);
        set_all(nutcracker.addr, &keys);
        drop(nutcracker);
        let theirs = placement(&servers);
        assert_eq!(
            theirs.len(),
            KEYS,
            "{hash}/{distribution}: nutcracker lost keys"
        );

        let pool = our_pool(hash, distribution, tag, &lines);
        let differ: Vec<&String> = keys
            .iter()
            .filter(|k| key_server(&pool, k.as_bytes(), &NoneEjected) != theirs[*k])
            .collect();
        assert!(
            differ.is_empty(),
            "{hash}/{distribution}/hash_tag {tag}: {} of {KEYS} keys on another server than \
             under nutcracker, e.g. {:?}",
            differ.len(),
            &differ[..differ.len().min(5)]
        );
        // End to end: the proxy reading the same file stores every key where nutcracker did.
        for s in &servers {
            assert_eq!(s.command(&["FLUSHALL"]), RespValue::Simple(b"OK".to_vec()));
        }
        let ours_conf = dir
            .path()
            .join(format!("{hash}-{distribution}-{tag}-ours.yml"));
        std::fs::write(
            &ours_conf,
            nutcracker_yml(0, hash, distribution, tag, &lines),
        )
        .unwrap();
        let proxy = Proxy::start_args(&["--config".into(), ours_conf.display().to_string()]);
        set_all(proxy.addr, &keys);
        drop(proxy);
        let through_proxy = placement(&servers);
        assert!(
            through_proxy == theirs,
            "{hash}/{distribution}/hash_tag {tag}: the proxy placed {} of {KEYS} keys \
             elsewhere",
            keys.iter()
                .filter(|k| through_proxy.get(*k) != theirs.get(*k))
                .count()
        );
        if tag {
            // Every key with one tag is on one server.
            let homes: std::collections::HashSet<usize> = keys
                .iter()
                .filter(|k| k.starts_with("user:{5}:"))
                .map(|k| theirs[k])
                .collect();
            assert_eq!(homes.len(), 1, "{hash}/{distribution}");
        }
    }
}

#[test]
fn redis_pools_with_ketama_place_keys_as_nutcracker_does() {
    same_placement("ketama", false);
}

#[test]
fn redis_pools_with_ketama_and_hash_tag_place_keys_as_nutcracker_does() {
    same_placement("ketama", true);
}

#[test]
fn redis_pools_with_modula_place_keys_as_nutcracker_does() {
    same_placement("modula", false);
}

#[test]
fn redis_pools_with_modula_and_hash_tag_place_keys_as_nutcracker_does() {
    same_placement("modula", true);
}
