//! Listeners, pools and servers as configured: what the command line and both file
//! formats produce, and what pools are built from.

use std::time::Duration;

use crate::dialect::Dialect;
use crate::endpoint::Endpoint;
use crate::health::{ServerKey, TlsKey};
use crate::routing::hash::Hash;
use crate::routing::plan::{Mode, ReadPolicy};
use crate::routing::ring::Distribution;
use crate::routing::Protocol;
use crate::tls::{ListenerTlsSpec, ServerTlsSpec};

/// One server of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerSpec {
    pub addr: Endpoint,
    /// The host as written (the default TLS server name).
    pub host: String,
    /// The name hashed onto the ketama ring (twemproxy's rule: the configured name, or
    /// `host:port`, or `host` alone when the port is 11211).
    pub name: String,
    pub weight: u32,
}

/// A pool: its servers and how it routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolSpec {
    pub name: String,
    pub servers: Vec<ServerSpec>,
    pub mode: Mode,
    pub hash: Hash,
    pub hash_tag: Option<[u8; 2]>,
    pub distribution: Distribution,
    /// Shard pools: keys of an ejected server go to the next one on the ring.
    pub auto_eject: bool,
    pub read_policy: ReadPolicy,
    /// How long a server may take to answer.
    pub timeout: Duration,
    /// Failures in a row that eject a server (0: never).
    pub failure_limit: u32,
    /// TLS towards the servers.
    pub server_tls: Option<ServerTlsSpec>,
    /// What its clients and servers speak.
    pub protocol: Protocol,
    /// A Redis pool's password (`redis_auth`): sent to its servers, asked of its clients.
    pub redis_auth: Option<String>,
    /// A Redis pool's database (`redis_db`): selected on every server connection.
    pub redis_db: u32,
}

/// A listening address and the pool behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerSpec {
    pub listen: Endpoint,
    pub pool: PoolSpec,
    /// TLS served to its clients.
    pub tls: Option<ListenerTlsSpec>,
}

impl PoolSpec {
    /// What its servers' connections speak: a Redis pool's password and database go
    /// into every new connection's greeting.
    pub fn dialect(&self) -> Dialect {
        match self.protocol {
            Protocol::Memcached => Dialect::Memcached,
            Protocol::Redis => Dialect::Redis {
                auth: self.redis_auth.clone(),
                db: self.redis_db,
            },
        }
    }

    /// `server`'s identity as this pool uses it: pools share a server's connections only
    /// when these are equal (see [`ServerKey`]).
    pub fn server_key(&self, server: &ServerSpec) -> ServerKey {
        ServerKey {
            addr: server.addr.clone(),
            dialect: self.dialect(),
            tls: self.server_tls.as_ref().map(|spec| TlsKey {
                spec: spec.clone(),
                name: spec.sni.clone().unwrap_or_else(|| server.host.clone()),
            }),
        }
    }

    /// The command line's pool: `-m` servers, replicated, `-s` splitting multi-GETs.
    pub fn replicate(
        servers: Vec<ServerSpec>,
        split_multiget: bool,
        timeout: Duration,
        failure_limit: u32,
    ) -> PoolSpec {
        PoolSpec {
            name: "default".into(),
            servers,
            mode: Mode::Replicate { split_multiget },
            hash: Hash::Fnv1a64,
            hash_tag: None,
            distribution: Distribution::Ketama,
            auto_eject: true,
            read_policy: ReadPolicy::RoundRobin,
            timeout,
            failure_limit,
            server_tls: None,
            protocol: Protocol::Memcached,
            redis_auth: None,
            redis_db: 0,
        }
    }
}

pub use cachelab_placement::ketama_name;
