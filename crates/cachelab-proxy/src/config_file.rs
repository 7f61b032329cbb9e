//! `--config FILE`: listeners and their pools, from cachelab's TOML or from twemproxy's
//! `nutcracker.yml` as it is (chosen by the extension: `.yml`/`.yaml` is nutcracker's).
//!
//! cachelab's format, one table per pool:
//!
//! ```toml
//! [pools.main]
//! listen = "127.0.0.1:22121"
//! mode = "shard"              # or "replicate" (every server holds every key)
//! replicas = 2                # shard: each key on 2 consecutive ring servers
//! read_policy = "round-robin" # or "primary": which replica a read goes to
//! hash = "fnv1a_64"           # any twemproxy hash
//! distribution = "ketama"     # ketama, modula, random
//! hash_tag = "{}"
//! timeout_ms = 1000
//! failure_limit = 2           # failures in a row that eject a server (0: never)
//! auto_eject = true           # shard: an ejected server's keys go to the next one
//! split_multiget = false      # replicate: `-s`
//! servers = ["127.0.0.1:11211:1 alpha", "127.0.0.1:11311:1 beta"]
//! ```
//!
//! Servers are written as in nutcracker.yml: `host:port[:weight] [name]`, or a Unix
//! socket `/path[:weight] [name]`; `listen` may be a Unix socket path too.
//!
//! A file is read only up to [`MAX_CONFIG_BYTES`], YAML aliases are refused (see
//! [`crate::config_yaml`]), and everything after the read is linear in the number of
//! servers (each host name is resolved once), so no file can make start-up or a reload
//! take minutes or gigabytes.
//!
//! TLS (TOML only: no twemproxy fork defines TLS keys for nutcracker.yml), per pool;
//! relative paths are taken from the file's directory (see docs/tls.md):
//!
//! ```toml
//! [pools.main.tls]            # served to clients
//! cert = "proxy.pem"
//! key = "proxy.key"
//! client_ca = "clients-ca.pem"  # mutual TLS (optional)
//! protocols = "1.2,1.3"
//! [pools.main.server_tls]     # towards the pool's servers
//! ca = "servers-ca.pem"       # or skip_verify = true
//! sni = "cache.example"       # default: each server's host
//! cert = "proxy-client.pem"   # optional client certificate
//! key = "proxy-client.key"
//! ```

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use thiserror::Error;
use yaml_rust2::Yaml;

use crate::config::{ketama_name, ListenerSpec, PoolSpec, ServerSpec};
use crate::endpoint::Endpoint;
use crate::routing::hash::Hash;
use crate::routing::plan::{Mode, ReadPolicy};
use crate::routing::ring::Distribution;
use crate::tls::{ListenerTlsSpec, Protocols, ServerTlsSpec};

/// Why a configuration file was refused: the file and the reason, naming the pool and
/// the field.
#[derive(Debug, Error)]
pub enum FileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
    #[error("{path}: larger than {} MiB, the limit for a config file", MAX_CONFIG_BYTES >> 20)]
    TooLarge { path: String },
}

/// Largest config file read. A nutcracker.yml is a few KiB (1,000 servers are about
/// 40 KiB); 4 MiB holds some 100,000 server lines while bounding what a file can cost:
/// the parsed tree, and a ketama ring of 160 points per server.
pub const MAX_CONFIG_BYTES: u64 = 4 << 20;

/// The text of `path`, refused past [`MAX_CONFIG_BYTES`] without reading further (the
/// length is checked on what is read, not on the metadata, so a FIFO or a file growing
/// under us is bounded too).
fn read_bounded(path: &Path) -> Result<String, FileError> {
    let display = || path.display().to_string();
    let read_error = |source| FileError::Read {
        path: display(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(FileError::TooLarge { path: display() });
    }
    String::from_utf8(bytes).map_err(|e| FileError::Invalid {
        path: display(),
        message: format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to()),
    })
}

/// Reads the listeners and pools of `path`. `timeout` and `failure_limit` are the
/// defaults for pools that do not set them.
pub fn load(
    path: &Path,
    timeout: Duration,
    failure_limit: u32,
) -> Result<Vec<ListenerSpec>, FileError> {
    let text = read_bounded(path)?;
    let defaults = Defaults {
        timeout,
        failure_limit,
    };
    let yaml = matches!(
        path.extension().and_then(|e| e.to_str()),
        Some("yml" | "yaml")
    );
    let parsed = if yaml {
        parse_nutcracker(&text, &defaults)
    } else {
        parse_toml(&text, &defaults)
    };
    let mut listeners = parsed.map_err(|message| FileError::Invalid {
        path: path.display().to_string(),
        message,
    })?;
    if let Some(dir) = path.parent() {
        relative_to(dir, &mut listeners);
    }
    if listeners.is_empty() {
        return Err(FileError::Invalid {
            path: path.display().to_string(),
            message: "no pools".into(),
        });
    }
    Ok(listeners)
}

struct Defaults {
    timeout: Duration,
    failure_limit: u32,
}

/// TLS file names that are relative are taken from the configuration file's directory.
fn relative_to(dir: &Path, listeners: &mut [ListenerSpec]) {
    let fix = |p: &mut PathBuf| {
        if p.is_relative() {
            *p = dir.join(&*p);
        }
    };
    for l in listeners {
        if let Some(tls) = &mut l.tls {
            fix(&mut tls.cert);
            fix(&mut tls.key);
            tls.client_ca.iter_mut().for_each(fix);
        }
        if let Some(tls) = &mut l.pool.server_tls {
            tls.ca.iter_mut().for_each(fix);
            tls.cert.iter_mut().for_each(fix);
            tls.key.iter_mut().for_each(fix);
        }
    }
}

/// Host names resolved while reading one file: each is looked up once, since a lookup
/// costs tens of microseconds (`/etc/hosts`, NSS) and a pool may name the same host
/// thousands of times.
#[derive(Debug, Default)]
pub struct Resolver {
    hosts: HashMap<String, IpAddr>,
}

impl Resolver {
    /// The first address `host` resolves to, with `port`.
    fn resolve(&mut self, host: &str, port: u16) -> Result<SocketAddr, String> {
        if let Some(ip) = self.hosts.get(host) {
            return Ok(SocketAddr::new(*ip, port));
        }
        let addr = (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("{host} did not resolve: {e}"))?
            .next()
            .ok_or_else(|| format!("{host} did not resolve"))?;
        self.hosts.insert(host.to_string(), addr.ip());
        Ok(addr)
    }
}

/// `host:port[:weight] [name]`, parsed from the end as nutcracker does.
pub fn parse_server(text: &str, resolver: &mut Resolver) -> Result<ServerSpec, String> {
    let text = text.trim();
    let (address, name) = match text.split_once(' ') {
        Some((a, n)) if !n.trim().is_empty() => (a, Some(n.trim().to_string())),
        _ => (text, None),
    };
    if let Some(path) = Endpoint::unix_path(address) {
        // twemproxy's `/path:weight`: the weight is what follows the last colon.
        let (path, weight) = match path.to_str().and_then(|p| p.rsplit_once(':')) {
            Some((p, w)) if w.parse::<u32>().is_ok() => (PathBuf::from(p), w.parse().unwrap_or(1)),
            _ => (path, 1),
        };
        if weight == 0 {
            return Err(format!("server {text:?}: weight must be at least 1"));
        }
        let shown = path.display().to_string();
        return Ok(ServerSpec {
            addr: Endpoint::Unix(path),
            host: shown.clone(),
            name: name.unwrap_or(shown),
            weight,
        });
    }
    let parts: Vec<&str> = address.rsplitn(3, ':').collect();
    let (host, port, weight) = match parts.as_slice() {
        [weight, port, host] if weight.parse::<u32>().is_ok() && port.parse::<u16>().is_ok() => {
            (*host, *port, *weight)
        }
        [port, host] => (*host, *port, "1"),
        [weight, port, host] => {
            // `host:port` where host has a colon (IPv6) is not supported; say which part
            // is wrong.
            return Err(format!(
                "server {text:?}: expected host:port[:weight], got port {port:?} and weight \
                 {weight:?} after {host:?}"
            ));
        }
        _ => {
            return Err(format!(
                "server {text:?}: expected host:port[:weight] [name]"
            ))
        }
    };
    let port: u16 = port
        .parse()
        .map_err(|_| format!("server {text:?}: invalid port {port:?}"))?;
    let weight: u32 = weight
        .parse()
        .map_err(|_| format!("server {text:?}: invalid weight {weight:?}"))?;
    if weight == 0 {
        return Err(format!("server {text:?}: weight must be at least 1"));
    }
    let addr = resolver
        .resolve(host, port)
        .map_err(|e| format!("server {text:?}: {e}"))?;
    Ok(ServerSpec {
        addr: Endpoint::Tcp(addr),
        host: host.to_string(),
        name: name.unwrap_or_else(|| ketama_name(host, port)),
        weight,
    })
}

fn parse_listen(text: &str, resolver: &mut Resolver) -> Result<Endpoint, String> {
    let text = text.trim();
    if let Some(path) = Endpoint::unix_path(text) {
        if path.to_string_lossy().contains(' ') {
            return Err(format!(
                "listen {text:?}: a socket file's permissions are set by --unix-socket-mode"
            ));
        }
        return Ok(Endpoint::Unix(path));
    }
    let (host, port) = text
        .rsplit_once(':')
        .ok_or_else(|| format!("listen {text:?}: expected host:port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("listen {text:?}: invalid port"))?;
    resolver.resolve(host, port).map(Endpoint::Tcp)
}

fn parse_hash_tag(text: &str) -> Result<[u8; 2], String> {
    match text.as_bytes() {
        [open, close] => Ok([*open, *close]),
        _ => Err(format!("hash_tag {text:?}: must be two characters")),
    }
}

/// Puts a shard pool's servers in twemproxy's order: it sorts them by name (shorter
/// names first, then bytewise) when it checks for duplicates, and keeps that order, which
/// is what modula and random index (ketama does not depend on it).
pub fn twemproxy_order(pool: &mut PoolSpec) {
    if matches!(pool.mode, Mode::Shard { .. }) {
        pool.servers.sort_by(|a, b| {
            (a.name.len(), a.name.as_bytes()).cmp(&(b.name.len(), b.name.as_bytes()))
        });
    }
}

fn check_pool(pool: &PoolSpec) -> Result<(), String> {
    if pool.servers.is_empty() {
        return Err(format!("pool {}: no servers", pool.name));
    }
    let mut names = HashSet::with_capacity(pool.servers.len());
    if let Some(twice) = pool.servers.iter().find(|s| !names.insert(s.name.as_str())) {
        return Err(format!(
            "pool {}: two servers named {:?}",
            pool.name, twice.name
        ));
    }
    if let Mode::Shard { replicas } = pool.mode {
        if replicas == 0 || replicas > pool.servers.len() {
            return Err(format!(
                "pool {}: replicas = {replicas}, but it has {} servers",
                pool.name,
                pool.servers.len()
            ));
        }
    }
    Ok(())
}

fn check_listeners(listeners: &[ListenerSpec]) -> Result<(), String> {
    let mut first = HashMap::with_capacity(listeners.len());
    for a in listeners {
        // Port 0 picks a free port for each (tests, scripts): not a clash.
        if a.listen.port() == Some(0) {
            continue;
        }
        if let Some(b) = first.insert(&a.listen, a) {
            return Err(format!(
                "pools {} and {} listen on the same address {}",
                b.pool.name, a.pool.name, a.listen
            ));
        }
    }
    Ok(())
}

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

fn parse_toml(text: &str, defaults: &Defaults) -> Result<Vec<ListenerSpec>, String> {
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

/// nutcracker.yml keys that change nothing here (connection counts and socket options
/// that cachelab sets itself): accepted so the file works as it is.
const NUTCRACKER_IGNORED: &[&str] = &[
    "backlog",
    "client_connections",
    "tcpkeepalive",
    "server_connections",
    "preconnect",
    "server_retry_timeout",
    "reuseport",
];

fn parse_nutcracker(text: &str, defaults: &Defaults) -> Result<Vec<ListenerSpec>, String> {
    let docs = crate::config_yaml::load(text).map_err(|e| e.to_string())?;
    let [root] = docs.as_slice() else {
        return Err(format!("expected one YAML document, found {}", docs.len()));
    };
    let pools = root
        .as_hash()
        .ok_or("expected a mapping of pool names to pools")?;
    let mut resolver = Resolver::default();
    let mut listeners = Vec::new();
    for (name, pool) in pools {
        let name = scalar(name).ok_or("a pool name must be a string")?;
        let ctx = |e: String| format!("pool {name}: {e}");
        let fields = pool
            .as_hash()
            .ok_or_else(|| ctx("expected a mapping".into()))?;
        let mut listen = None;
        let mut servers = None;
        let mut pool = PoolSpec {
            name: name.clone(),
            servers: Vec::new(),
            mode: Mode::Shard { replicas: 1 },
            hash: Hash::Fnv1a64,
            hash_tag: None,
            distribution: Distribution::Ketama,
            auto_eject: false,
            read_policy: ReadPolicy::Primary,
            timeout: defaults.timeout,
            failure_limit: defaults.failure_limit,
            server_tls: None,
        };
        for (key, value) in fields {
            let key = scalar(key).ok_or_else(|| ctx("a key must be a string".into()))?;
            let text = || scalar(value).ok_or_else(|| ctx(format!("{key}: expected a value")));
            match key.as_str() {
                "listen" => listen = Some(parse_listen(&text()?, &mut resolver).map_err(ctx)?),
                "hash" => {
                    let h = text()?;
                    pool.hash =
                        Hash::from_name(&h).ok_or_else(|| ctx(format!("unknown hash {h:?}")))?;
                }
                "hash_tag" => pool.hash_tag = Some(parse_hash_tag(&text()?).map_err(ctx)?),
                "distribution" => {
                    let d = text()?;
                    pool.distribution = Distribution::from_name(&d)
                        .ok_or_else(|| ctx(format!("unknown distribution {d:?}")))?;
                }
                "timeout" => {
                    let ms: u64 = text()?
                        .parse()
                        .map_err(|_| ctx("timeout: expected milliseconds".into()))?;
                    pool.timeout = Duration::from_millis(ms.max(1));
                }
                "auto_eject_hosts" => pool.auto_eject = boolean(value).map_err(ctx)?,
                "server_failure_limit" => {
                    pool.failure_limit = text()?
                        .parse()
                        .map_err(|_| ctx("server_failure_limit: expected a number".into()))?;
                }
                "redis" => {
                    if boolean(value).map_err(ctx)? {
                        return Err(ctx(
                            "redis pools are not supported: cachelab-proxy speaks the \
                             memcached protocol"
                                .into(),
                        ));
                    }
                }
                "redis_auth" | "redis_db" => {
                    return Err(ctx(format!("{key}: redis pools are not supported")))
                }
                "servers" => {
                    let list = value
                        .as_vec()
                        .ok_or_else(|| ctx("servers: expected a list".into()))?;
                    servers = Some(
                        list.iter()
                            .map(|s| {
                                scalar(s)
                                    .ok_or_else(|| "servers: expected strings".to_string())
                                    .and_then(|s| parse_server(&s, &mut resolver))
                            })
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(ctx)?,
                    );
                }
                k if NUTCRACKER_IGNORED.contains(&k) => {}
                other => return Err(ctx(format!("unknown key {other:?}"))),
            }
        }
        if !pool.auto_eject {
            // Without auto_eject_hosts twemproxy never takes a server out: neither do we.
            pool.failure_limit = 0;
        }
        pool.servers = servers.ok_or_else(|| ctx("no servers".into()))?;
        twemproxy_order(&mut pool);
        check_pool(&pool)?;
        listeners.push(ListenerSpec {
            listen: listen.ok_or_else(|| ctx("no listen address".into()))?,
            pool,
            tls: None,
        });
    }
    check_listeners(&listeners)?;
    Ok(listeners)
}

fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(r.clone()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn boolean(y: &Yaml) -> Result<bool, String> {
    match y {
        Yaml::Boolean(b) => Ok(*b),
        Yaml::String(s) if s == "true" => Ok(true),
        Yaml::String(s) if s == "false" => Ok(false),
        other => Err(format!("expected true or false, got {other:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> Defaults {
        Defaults {
            timeout: Duration::from_millis(1000),
            failure_limit: 2,
        }
    }

    fn parse_server_alone(text: &str) -> Result<ServerSpec, String> {
        parse_server(text, &mut Resolver::default())
    }

    #[test]
    fn servers_read_like_nutcrackers_with_its_default_names() {
        let s = parse_server_alone("127.0.0.1:11311:2 beta").unwrap();
        assert_eq!((s.name.as_str(), s.weight), ("beta", 2));
        assert_eq!(
            parse_server_alone("127.0.0.1:11311:1").unwrap().name,
            "127.0.0.1:11311"
        );
        assert_eq!(
            parse_server_alone("127.0.0.1:11211:1").unwrap().name,
            "127.0.0.1"
        );
        assert_eq!(parse_server_alone("127.0.0.1:11311").unwrap().weight, 1);
        let err = parse_server_alone("127.0.0.1:11311:0").unwrap_err();
        assert!(err.contains("weight"), "{err}");
        let unix = parse_server_alone("/tmp/mc.sock:3").unwrap();
        assert_eq!(
            (unix.addr, unix.weight),
            (Endpoint::Unix("/tmp/mc.sock".into()), 3)
        );
        assert_eq!(unix.name, "/tmp/mc.sock");
    }

    #[test]
    fn a_nutcracker_yml_reads_as_it_is() {
        let yml = "alpha:\n  listen: 127.0.0.1:22121\n  hash: murmur\n  hash_tag: \"{}\"\n  \
                   distribution: modula\n  auto_eject_hosts: true\n  server_retry_timeout: 2000\n  \
                   server_failure_limit: 3\n  timeout: 400\n  preconnect: true\n  servers:\n   \
                   - 127.0.0.1:11311:1 one\n   - 127.0.0.1:11411:1 two\n";
        let l = parse_nutcracker(yml, &defaults()).unwrap();
        assert_eq!(l.len(), 1);
        let p = &l[0].pool;
        assert_eq!(l[0].listen.port(), Some(22121));
        assert_eq!(
            (p.hash, p.distribution),
            (Hash::Murmur, Distribution::Modula)
        );
        assert_eq!(p.hash_tag, Some(*b"{}"));
        assert_eq!((p.auto_eject, p.failure_limit), (true, 3));
        assert_eq!(p.timeout, Duration::from_millis(400));
        assert_eq!(p.mode, Mode::Shard { replicas: 1 });
        assert_eq!(p.servers[1].name, "two");
    }

    #[test]
    fn shard_servers_take_twemproxys_order_shorter_names_first() {
        let yml = "a:\n  listen: 127.0.0.1:22121\n  servers:\n   - 127.0.0.1:11311:1\n   \
                   - 127.0.0.1:11411:1 gamma\n   - 127.0.0.1:11511:1 beta\n";
        let l = parse_nutcracker(yml, &defaults()).unwrap();
        let names: Vec<&str> = l[0].pool.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, vec!["beta", "gamma", "127.0.0.1:11311"]);
    }

    #[test]
    fn redis_pools_and_unknown_keys_are_refused_with_the_pool_named() {
        let redis =
            "r:\n  listen: 127.0.0.1:22121\n  redis: true\n  servers:\n   - 127.0.0.1:6379:1\n";
        let err = parse_nutcracker(redis, &defaults()).unwrap_err();
        assert!(
            err.starts_with("pool r: redis pools are not supported"),
            "{err}"
        );
        let typo = "a:\n  listen: 127.0.0.1:22121\n  hsah: md5\n  servers:\n   - 127.0.0.1:1:1\n";
        let err = parse_nutcracker(typo, &defaults()).unwrap_err();
        assert_eq!(err, "pool a: unknown key \"hsah\"");
    }

    fn temp_file(name: &str, text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::Builder::new()
            .prefix("cachelab")
            .tempdir()
            .unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    fn load_file(path: &Path) -> Result<Vec<ListenerSpec>, FileError> {
        load(path, Duration::from_millis(1000), 2)
    }

    /// A nutcracker.yml of `n` servers, all on one address under their own names (the
    /// shortest lines: the most servers a file of a given size can hold).
    fn many_servers(n: usize) -> String {
        let mut text = String::from("alpha:\n  listen: 127.0.0.1:0\n  servers:\n");
        for i in 0..n {
            text.push_str(&format!("  - 127.0.0.1:11211:1 s{i}\n"));
        }
        text
    }

    #[test]
    fn a_file_past_the_size_limit_is_refused_by_name() {
        let mut text = many_servers(1);
        text.push_str(&"#".repeat(MAX_CONFIG_BYTES as usize + 1 - text.len()));
        let (_dir, path) = temp_file("big.yml", &text);
        let err = load_file(&path).unwrap_err();
        assert!(matches!(err, FileError::TooLarge { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: larger than 4 MiB, the limit for a config file",
                path.display()
            )
        );
        // One byte less is read (a comment): the limit is the size, not a rounding.
        text.pop();
        let (_dir, path) = temp_file("fits.yml", &text);
        assert_eq!(load_file(&path).unwrap()[0].pool.servers.len(), 1);
    }

    #[test]
    fn a_hundred_thousand_servers_load_and_build_a_pool() {
        let n = 100_000;
        let text = many_servers(n);
        assert!(text.len() as u64 <= MAX_CONFIG_BYTES, "{}", text.len());
        let (_dir, path) = temp_file("many.yml", &text);
        let listeners = load_file(&path).unwrap();
        let spec = &listeners[0].pool;
        assert_eq!(spec.servers.len(), n);
        let health = crate::health::Health::new(&[], 2);
        let pool = crate::pool_build::build_pool(spec, &health).unwrap();
        // One address under many names: one server to the health registry, every name
        // on the ring.
        assert_eq!(health.len(), 1);
        assert_eq!(pool.servers.len(), n);
        assert!(pool.servers.iter().all(|s| s.id == 0));
    }

    #[test]
    fn a_duplicate_server_name_is_refused_naming_it() {
        let yml = "a:\n  listen: 127.0.0.1:0\n  servers:\n   - 127.0.0.1:1:1 x\n   \
                   - 127.0.0.1:2:1 y\n   - 127.0.0.1:3:1 x\n";
        let err = parse_nutcracker(yml, &defaults()).unwrap_err();
        assert_eq!(err, "pool a: two servers named \"x\"");
    }

    #[test]
    fn two_pools_on_one_address_are_refused_but_port_zero_is_no_clash() {
        let pool = |name: &str, listen: &str| {
            format!("{name}:\n  listen: {listen}\n  servers:\n   - 127.0.0.1:1:1\n")
        };
        let clash = pool("a", "127.0.0.1:22121")
            + &pool("b", "127.0.0.1:22122")
            + &pool("c", "127.0.0.1:22121");
        let err = parse_nutcracker(&clash, &defaults()).unwrap_err();
        assert_eq!(
            err,
            "pools a and c listen on the same address 127.0.0.1:22121"
        );
        let zeros = pool("a", "127.0.0.1:0") + &pool("b", "127.0.0.1:0");
        assert_eq!(parse_nutcracker(&zeros, &defaults()).unwrap().len(), 2);
    }

    #[test]
    fn an_alias_in_a_nutcracker_yml_is_refused() {
        let yml = "a:\n  listen: &l 127.0.0.1:22121\nb:\n  listen: *l\n";
        let err = parse_nutcracker(yml, &defaults()).unwrap_err();
        assert!(err.starts_with("line 4 column 11: YAML aliases"), "{err}");
    }

    #[test]
    fn a_host_resolves_once_per_file_for_every_port() {
        let mut resolver = Resolver::default();
        let a = parse_server("localhost:11311:1 a", &mut resolver).unwrap();
        let b = parse_server("localhost:11411:1 b", &mut resolver).unwrap();
        assert_eq!(resolver.hosts.len(), 1);
        let (Endpoint::Tcp(a), Endpoint::Tcp(b)) = (a.addr, b.addr) else {
            panic!("host:port servers are TCP");
        };
        assert_eq!(a.ip(), b.ip());
        assert_eq!((a.port(), b.port()), (11311, 11411));
    }

    #[test]
    fn tls_tables_and_unix_sockets_in_toml() {
        let toml = "[pools.main]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:1\"]\n\
                    [pools.main.tls]\ncert = \"c.pem\"\nkey = \"/k/k.pem\"\nclient_ca = \"ca.pem\"\n\
                    [pools.main.server_tls]\nca = \"s.pem\"\nsni = \"cache\"\n\
                    [pools.local]\nlisten = \"/tmp/cachelab-p.sock\"\n\
                    servers = [\"/tmp/cachelab-m.sock:2 m\"]\n";
        let mut l = parse_toml(toml, &defaults()).unwrap();
        relative_to(Path::new("/etc/cachelab"), &mut l);
        let (local, main) = (&l[0], &l[1]);
        assert_eq!(local.listen, Endpoint::Unix("/tmp/cachelab-p.sock".into()));
        assert_eq!(
            local.pool.servers[0].addr,
            Endpoint::Unix("/tmp/cachelab-m.sock".into())
        );
        assert_eq!(
            (
                local.pool.servers[0].weight,
                local.pool.servers[0].name.as_str()
            ),
            (2, "m")
        );
        let tls = main.tls.as_ref().unwrap();
        assert_eq!(tls.cert, Path::new("/etc/cachelab/c.pem"));
        assert_eq!(tls.key, Path::new("/k/k.pem"));
        let server = main.pool.server_tls.as_ref().unwrap();
        assert_eq!(server.ca.as_deref(), Some(Path::new("/etc/cachelab/s.pem")));
        let no_ca = "[pools.a]\nlisten = \"127.0.0.1:0\"\nservers = [\"127.0.0.1:1\"]\n\
                     [pools.a.server_tls]\nsni = \"x\"\n";
        let err = parse_toml(no_ca, &defaults()).unwrap_err();
        assert!(err.contains("needs ca"), "{err}");
        let unix_tls =
            "[pools.a]\nlisten = \"/tmp/cachelab-a.sock\"\nservers = [\"127.0.0.1:1\"]\n\
                        [pools.a.tls]\ncert = \"c\"\nkey = \"k\"\n";
        let err = parse_toml(unix_tls, &defaults()).unwrap_err();
        assert!(err.contains("Unix socket listener"), "{err}");
    }

    #[test]
    fn nutcracker_unix_sockets_read_as_twemproxy_writes_them() {
        let yml =
            "a:\n  listen: /tmp/cachelab-a.sock\n  servers:\n   - /tmp/cachelab-m.sock:1 one\n";
        let l = parse_nutcracker(yml, &defaults()).unwrap();
        assert_eq!(l[0].listen, Endpoint::Unix("/tmp/cachelab-a.sock".into()));
        assert_eq!(l[0].pool.servers[0].name, "one");
        let tls = "a:\n  listen: 127.0.0.1:1\n  tls: true\n  servers:\n   - 127.0.0.1:2:1\n";
        let err = parse_nutcracker(tls, &defaults()).unwrap_err();
        assert!(err.contains("unknown key \"tls\""), "{err}");
    }

    #[test]
    fn a_toml_pool_with_replicas() {
        let toml = "[pools.main]\nlisten = \"127.0.0.1:0\"\nmode = \"shard\"\nreplicas = 2\n\
                    servers = [\"127.0.0.1:1\", \"127.0.0.1:2\", \"127.0.0.1:3\"]\n";
        let l = parse_toml(toml, &defaults()).unwrap();
        assert_eq!(l[0].pool.mode, Mode::Shard { replicas: 2 });
        assert!(l[0].pool.auto_eject);
        let too_many = toml.replace("replicas = 2", "replicas = 4");
        let err = parse_toml(&too_many, &defaults()).unwrap_err();
        assert!(err.contains("replicas = 4, but it has 3 servers"), "{err}");
        let unknown = toml.replace("replicas = 2", "replica = 2");
        assert!(parse_toml(&unknown, &defaults())
            .unwrap_err()
            .contains("replica"));
    }
}
