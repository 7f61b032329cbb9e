//! Pools built from their specification, at start and on every reload.

use std::collections::HashMap;
use std::sync::Arc;

use thiserror::Error;

use crate::config::PoolSpec;
use crate::health::{Health, MAX_SERVERS};
use crate::routing::plan::{Pool, PoolServer};
use crate::routing::ring::Member;
use crate::tls::{ServerTls, TlsError};

/// Why a pool could not be built.
#[derive(Debug, Error)]
pub enum PoolError {
    #[error("more than {0} distinct servers")]
    TooManyServers(usize),
    #[error("pool {0}: {1}")]
    Tls(String, TlsError),
}

/// Builds a pool from its specification, registering its servers with `health` under
/// the pool's settings ([`PoolSpec::server_key`]): a pool shares another's server
/// connections only when the address, protocol, password, database and TLS settings
/// are all equal, and a reload that changes the database or password moves the pool to
/// a server id whose connections are greeted with the new ones.
///
/// A pool's server-side TLS files are read here, so a reload rereads them: connections
/// opened after it use the new files. They are read once per host, not per entry, so a
/// pool naming one host thousands of times still builds in linear time.
pub fn build_pool(spec: &PoolSpec, health: &Health) -> Result<Pool, PoolError> {
    let mut tls_by_host: HashMap<&str, Arc<ServerTls>> = HashMap::new();
    let servers = spec
        .servers
        .iter()
        .map(|s| {
            let tls = match &spec.server_tls {
                Some(tls) => Some(match tls_by_host.get(s.host.as_str()) {
                    Some(known) => Arc::clone(known),
                    None => {
                        let built = crate::tls::client_config(tls, &s.host)
                            .map(Arc::new)
                            .map_err(|e| PoolError::Tls(spec.name.clone(), e))?;
                        tls_by_host.insert(&s.host, Arc::clone(&built));
                        built
                    }
                }),
                None => None,
            };
            let id = health
                .register(&spec.server_key(s), spec.failure_limit, tls)
                .ok_or(PoolError::TooManyServers(MAX_SERVERS))?;
            Ok(PoolServer {
                id,
                addr: s.addr.clone(),
                member: Member {
                    name: s.name.clone(),
                    weight: s.weight,
                },
            })
        })
        .collect::<Result<Vec<_>, PoolError>>()?;
    let mut pool = Pool::new(
        spec.name.clone(),
        servers,
        spec.mode,
        spec.hash,
        spec.hash_tag,
        spec.distribution,
        spec.auto_eject,
        spec.read_policy,
        spec.timeout,
    );
    pool.protocol = spec.protocol;
    pool.redis_auth = spec.redis_auth.clone();
    pool.redis_db = spec.redis_db;
    Ok(pool)
}
