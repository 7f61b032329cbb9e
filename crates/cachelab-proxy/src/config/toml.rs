//! cachelab's own configuration file: one TOML table per pool (the format is shown in
//! [`super::file`]).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::fields::{
    check_listeners, check_pool, parse_hash_tag, parse_listen, parse_server, twemproxy_order,
    Defaults, Resolver,
};
use super::spec::{ListenerSpec, PoolSpec};
use crate::routing::hash::Hash;
use crate::routing::plan::{Mode, ReadPolicy};
use crate::routing::ring::Distribution;
use crate::routing::Protocol;
use crate::tls::{ListenerTlsSpec, Protocols, ServerTlsSpec};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlFile {
    pools: std::collections::BTreeMap<String, TomlPool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlPool {
    listen: String,
    servers: Vec<String>,
    #[serde(default = "default_mode")]
    mode: String,
    replicas: Option<usize>,
    read_policy: Option<String>,
    hash: Option<String>,
    distribution: Option<String>,
    hash_tag: Option<String>,
    timeout_ms: Option<u64>,
    failure_limit: Option<u32>,
    auto_eject: Option<bool>,
    split_multiget: Option<bool>,
    tls: Option<TomlListenerTls>,
    server_tls: Option<TomlServerTls>,
    protocol: Option<String>,
    redis_auth: Option<String>,
    redis_db: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlListenerTls {
    cert: PathBuf,
    key: PathBuf,
    client_ca: Option<PathBuf>,
    protocols: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TomlServerTls {
    ca: Option<PathBuf>,
    sni: Option<String>,
    #[serde(default)]
    skip_verify: bool,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    protocols: Option<String>,
}

fn protocols(text: Option<&str>) -> Result<Protocols, String> {
    text.map_or(Ok(Protocols::default()), |t| {
        Protocols::parse(t).map_err(|e| e.to_string())
    })
}

fn server_tls(t: TomlServerTls) -> Result<ServerTlsSpec, String> {
    if t.ca.is_none() && !t.skip_verify {
        return Err("server_tls: needs ca (or skip_verify = true)".into());
    }
    if t.ca.is_some() && t.skip_verify {
        return Err("server_tls: ca and skip_verify = true exclude each other".into());
    }
    if t.cert.is_some() != t.key.is_some() {
        return Err("server_tls: a client certificate needs both cert and key".into());
    }
    Ok(ServerTlsSpec {
        ca: t.ca,
        sni: t.sni,
        skip_verify: t.skip_verify,
        cert: t.cert,
        key: t.key,
        protocols: protocols(t.protocols.as_deref()).map_err(|e| format!("server_tls: {e}"))?,
    })
}

fn default_mode() -> String {
    "replicate".into()
}

pub(super) fn parse_toml(text: &str, defaults: &Defaults) -> Result<Vec<ListenerSpec>, String> {
    let file: TomlFile = toml::from_str(text).map_err(|e| {
        // One line: the line number and toml's message (its own text draws the line).
        let line = e
            .span()
            .map(|span| text[..span.start.min(text.len())].matches('\n').count() + 1);
        match line {
            Some(line) => format!("line {line}: {}", e.message().trim()),
            None => e.message().trim().to_string(),
        }
    })?;
    let mut resolver = Resolver::default();
    let mut listeners = Vec::new();
    for (name, p) in file.pools {
        let ctx = |e: String| format!("pool {name}: {e}");
        let servers = p
            .servers
            .iter()
            .map(|s| parse_server(s, &mut resolver))
            .collect::<Result<Vec<_>, _>>()
            .map_err(ctx)?;
        let mode = match p.mode.as_str() {
            "replicate" => {
                if p.replicas.is_some() {
                    return Err(ctx("replicas is for mode = \"shard\"".into()));
                }
                Mode::Replicate {
                    split_multiget: p.split_multiget.unwrap_or(false),
                }
            }
            "shard" => {
                if p.split_multiget.is_some() {
                    return Err(ctx(
                        "split_multiget is for mode = \"replicate\" (shard pools split \
                         multi-GETs by key)"
                            .into(),
                    ));
                }
                Mode::Shard {
                    replicas: p.replicas.unwrap_or(1),
                }
            }
            other => {
                return Err(ctx(format!(
                    "mode {other:?}: expected \"replicate\" or \"shard\""
                )))
            }
        };
        let hash = match &p.hash {
            Some(h) => Hash::from_name(h).ok_or_else(|| ctx(format!("unknown hash {h:?}")))?,
            None => Hash::Fnv1a64,
        };
        let distribution = match &p.distribution {
            Some(d) => Distribution::from_name(d)
                .ok_or_else(|| ctx(format!("unknown distribution {d:?}")))?,
            None => Distribution::Ketama,
        };
        let read_policy = match p.read_policy.as_deref() {
            None | Some("round-robin") => ReadPolicy::RoundRobin,
            Some("primary") => ReadPolicy::Primary,
            Some(other) => {
                return Err(ctx(format!(
                    "read_policy {other:?}: expected \"round-robin\" or \"primary\""
                )))
            }
        };
        let protocol = match p.protocol.as_deref() {
            None | Some("memcached") => Protocol::Memcached,
            Some("redis") => Protocol::Redis,
            Some(other) => {
                return Err(ctx(format!(
                    "protocol {other:?}: expected \"memcached\" or \"redis\""
                )))
            }
        };
        let mut pool = PoolSpec {
            name: name.clone(),
            servers,
            mode,
            hash,
            hash_tag: p
                .hash_tag
                .as_deref()
                .map(parse_hash_tag)
                .transpose()
                .map_err(ctx)?,
            distribution,
            auto_eject: p.auto_eject.unwrap_or(true),
            read_policy,
            timeout: p
                .timeout_ms
                .map_or(defaults.timeout, Duration::from_millis)
                .max(Duration::from_millis(1)),
            failure_limit: p.failure_limit.unwrap_or(defaults.failure_limit),
            server_tls: p.server_tls.map(server_tls).transpose().map_err(ctx)?,
            protocol,
            redis_auth: p.redis_auth,
            redis_db: p.redis_db.unwrap_or(0),
        };
        twemproxy_order(&mut pool);
        check_pool(&pool)?;
        let listen = parse_listen(&p.listen, &mut resolver).map_err(ctx)?;
        let tls = match p.tls {
            Some(t) => Some(ListenerTlsSpec {
                cert: t.cert,
                key: t.key,
                client_ca: t.client_ca,
                protocols: protocols(t.protocols.as_deref())
                    .map_err(|e| ctx(format!("tls: {e}")))?,
            }),
            None => None,
        };
        if tls.is_some() && listen.is_unix() {
            return Err(ctx("tls: not served on a Unix socket listener".into()));
        }
        if pool.server_tls.is_some() && pool.servers.iter().any(|s| s.addr.is_unix()) {
            return Err(ctx(
                "server_tls: a Unix socket server cannot speak TLS".into()
            ));
        }
        listeners.push(ListenerSpec { listen, pool, tls });
    }
    check_listeners(&listeners)?;
    Ok(listeners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_redis_pool_with_its_password_and_database() {
        let toml = "[pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\n\
                    redis_auth = \"pw\"\nredis_db = 3\nservers = [\"127.0.0.1:6379\"]\n";
        let l = parse_toml(toml, &Defaults::for_tests()).unwrap();
        let p = &l[0].pool;
        assert_eq!(p.protocol, Protocol::Redis);
        assert_eq!((p.redis_auth.as_deref(), p.redis_db), (Some("pw"), 3));
        let memcached = toml.replace("protocol = \"redis\"\n", "");
        let err = parse_toml(&memcached, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("redis_auth is for a Redis pool"), "{err}");
        let bad = toml.replace("\"redis\"", "\"resp\"");
        let err = parse_toml(&bad, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("protocol \"resp\""), "{err}");
        let replicas = "[pools.r]\nlisten = \"127.0.0.1:0\"\nprotocol = \"redis\"\n\
                        mode = \"shard\"\nreplicas = 2\nservers = [\"127.0.0.1:1\", \"127.0.0.1:2\"]\n";
        let err = parse_toml(replicas, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("one replica per key"), "{err}");
    }

    #[test]
    fn a_toml_pool_with_replicas() {
        let toml = "[pools.main]\nlisten = \"127.0.0.1:0\"\nmode = \"shard\"\nreplicas = 2\n\
                    servers = [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\"]\n";
        let l = parse_toml(toml, &Defaults::for_tests()).unwrap();
        assert_eq!(l[0].pool.mode, Mode::Shard { replicas: 2 });
        assert!(l[0].pool.auto_eject);
        let too_many = toml.replace("replicas = 2", "replicas = 4");
        let err = parse_toml(&too_many, &Defaults::for_tests()).unwrap_err();
        assert!(err.contains("replicas = 4, but it has 3 servers"), "{err}");
        let unknown = toml.replace("replicas = 2", "replica = 2");
        assert!(parse_toml(&unknown, &Defaults::for_tests())
            .unwrap_err()
            .contains("replica"));
    }
}
