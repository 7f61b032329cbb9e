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
                        let built = ServerTls::build(tls, &s.host)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerSpec;
    use crate::endpoint::Endpoint;
    use crate::routing::Protocol;
    use crate::tls::ServerTlsSpec;
    use std::time::Duration;

    fn redis_pool(name: &str, db: u32, auth: Option<&str>) -> PoolSpec {
        let server = ServerSpec {
            addr: Endpoint::Tcp("127.0.0.1:6379".parse().unwrap()),
            host: "127.0.0.1".into(),
            name: "127.0.0.1:6379".into(),
            weight: 1,
        };
        let mut spec = PoolSpec::replicate(vec![server], false, Duration::from_secs(1), 2);
        spec.name = name.into();
        spec.protocol = Protocol::Redis;
        spec.redis_db = db;
        spec.redis_auth = auth.map(str::to_owned);
        spec
    }

    fn ids(pool: &Pool) -> Vec<usize> {
        pool.servers.iter().map(|s| s.id).collect()
    }

    #[test]
    fn pools_on_one_address_share_a_server_only_with_equal_settings() {
        let health = Health::new(&[], 2);
        let a = build_pool(&redis_pool("a", 0, None), &health).unwrap();
        let b = build_pool(&redis_pool("b", 5, None), &health).unwrap();
        let c = build_pool(&redis_pool("c", 0, Some("pw")), &health).unwrap();
        let twin = build_pool(&redis_pool("twin", 0, None), &health).unwrap();
        assert_eq!(
            [ids(&a), ids(&b), ids(&c), ids(&twin)],
            [[0], [1], [2], [0]]
        );
        // What each id's connections are greeted with is its own pool's.
        assert!(health.connector(0).dialect.greeting().is_empty());
        assert!(health
            .connector(1)
            .dialect
            .greeting()
            .ends_with(b"SELECT\r\n$1\r\n5\r\n"));
    }

    #[test]
    fn a_reload_with_the_same_tls_settings_keeps_the_id_and_rereads_the_files() {
        let health = Health::new(&[], 2);
        let mut spec = redis_pool("a", 0, None);
        spec.server_tls = Some(ServerTlsSpec {
            skip_verify: true,
            ..ServerTlsSpec::default()
        });
        build_pool(&spec, &health).unwrap();
        let first = health.connector(0).tls.unwrap();
        let again = build_pool(&spec, &health).unwrap();
        assert_eq!(ids(&again), [0]);
        let reread = health.connector(0).tls.unwrap();
        assert!(!Arc::ptr_eq(&first, &reread), "the files are read again");
        // Without TLS it is another server.
        spec.server_tls = None;
        assert_eq!(ids(&build_pool(&spec, &health).unwrap()), [1]);
    }
}
