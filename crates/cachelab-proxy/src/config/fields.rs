//! What both file formats share: server entries and listen addresses as nutcracker.yml
//! writes them (each host resolved once per file), hash tags, twemproxy's server
//! order, and the checks every pool and listener gets.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::Duration;

use cachelab_placement::entry::{Address, Entry};
use cachelab_placement::twemproxy_order as placement_order;

use super::spec::{ListenerSpec, PoolSpec, ServerSpec};
use crate::endpoint::{max_unix_path_len, Endpoint};
use crate::routing::plan::Mode;
use crate::routing::Protocol;

/// What a pool that does not set them gets: the command line's timeout and failure
/// limit.
pub(super) struct Defaults {
    pub(super) timeout: Duration,
    pub(super) failure_limit: u32,
}

#[cfg(test)]
impl Defaults {
    pub(super) fn for_tests() -> Defaults {
        Defaults {
            timeout: Duration::from_millis(1000),
            failure_limit: 2,
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

/// `host:port[:weight] [name]`, parsed from the end as nutcracker does
/// ([`cachelab_placement::Entry`]), its host resolved.
pub fn parse_server(text: &str, resolver: &mut Resolver) -> Result<ServerSpec, String> {
    let entry = Entry::parse(text).map_err(|e| e.to_string())?;
    let (addr, host) = match entry.address {
        Address::Unix(path) => {
            let shown = path.display().to_string();
            (Endpoint::Unix(path), shown)
        }
        Address::Tcp { host, port } => {
            let addr = resolver
                .resolve(&host, port)
                .map_err(|e| format!("server {:?}: {e}", text.trim()))?;
            (Endpoint::Tcp(addr), host)
        }
    };
    Ok(ServerSpec {
        addr,
        host,
        name: entry.name,
        weight: entry.weight,
    })
}

pub(super) fn parse_listen(text: &str, resolver: &mut Resolver) -> Result<Endpoint, String> {
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

pub(super) fn parse_hash_tag(text: &str) -> Result<[u8; 2], String> {
    match text.as_bytes() {
        [open, close] => Ok([*open, *close]),
        _ => Err(format!("hash_tag {text:?}: must be two characters")),
    }
}

/// Puts a shard pool's servers in twemproxy's order
/// ([`cachelab_placement::twemproxy_order`]).
pub fn twemproxy_order(pool: &mut PoolSpec) {
    if matches!(pool.mode, Mode::Shard { .. }) {
        pool.servers
            .sort_by(|a, b| placement_order(&a.name).cmp(&placement_order(&b.name)));
    }
}

pub(super) fn check_pool(pool: &PoolSpec) -> Result<(), String> {
    if pool.servers.is_empty() {
        return Err(format!("pool {}: no servers", pool.name));
    }
    check_protocol(pool)?;
    check_servers(pool)?;
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

/// A password and a database are a Redis pool's; and a Redis pool shards with one
/// replica per key (twemproxy's model) or replicates to every server: the multi-key
/// splits have no rule for a key held by some servers but not all.
pub(super) fn check_protocol(pool: &PoolSpec) -> Result<(), String> {
    let name = &pool.name;
    if pool.protocol != Protocol::Redis {
        if pool.redis_auth.is_some() {
            return Err(format!("pool {name}: redis_auth is for a Redis pool"));
        }
        if pool.redis_db != 0 {
            return Err(format!("pool {name}: redis_db is for a Redis pool"));
        }
        return Ok(());
    }
    if matches!(pool.mode, Mode::Shard { replicas } if replicas > 1) {
        return Err(format!(
            "pool {name}: a Redis pool shards with one replica per key (or replicates to \
             every server)"
        ));
    }
    match pool.redis_auth.as_deref() {
        Some("") => {
            return Err(format!(
                "pool {name}: redis_auth is empty: Redis takes no empty password (leave \
                 redis_auth out for a server without one)"
            ))
        }
        Some(p) if p.contains(['\r', '\n']) => {
            return Err(format!("pool {name}: redis_auth cannot hold a line break"))
        }
        _ => {}
    }
    Ok(())
}

/// Servers that could never be connected to are refused when the file is read, not
/// found out request by request: port 0 (nothing listens there), and a Unix socket path
/// longer than `sun_path` holds (the same path as a listener is refused at start).
pub(super) fn check_servers(pool: &PoolSpec) -> Result<(), String> {
    for server in &pool.servers {
        let name = &pool.name;
        let addr = &server.addr;
        if addr.port() == Some(0) {
            return Err(format!(
                "pool {name}: server {addr}: port 0 cannot be connected to"
            ));
        }
        if let Endpoint::Unix(path) = addr {
            if !addr.fits_sun_path() {
                return Err(format!(
                    "pool {name}: server {addr}: a Unix socket path is at most {} bytes \
                     (sun_path), this one is {}",
                    max_unix_path_len(),
                    path.as_os_str().len()
                ));
            }
        }
    }
    Ok(())
}

pub(super) fn check_listeners(listeners: &[ListenerSpec]) -> Result<(), String> {
    check_server_protocols(listeners)?;
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

/// One server address cannot be in a Redis pool and a memcached pool: it speaks one
/// protocol, so one of the pools would get replies it cannot read on every request.
fn check_server_protocols(listeners: &[ListenerSpec]) -> Result<(), String> {
    let mut first: HashMap<&Endpoint, &PoolSpec> = HashMap::new();
    for pool in listeners.iter().map(|l| &l.pool) {
        for server in &pool.servers {
            let other = *first.entry(&server.addr).or_insert(pool);
            if other.protocol != pool.protocol {
                return Err(format!(
                    "pools {} ({}) and {} ({}) both name server {}: a server speaks one \
                     protocol",
                    other.name,
                    other.protocol.name(),
                    pool.name,
                    pool.protocol.name(),
                    server.addr
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
