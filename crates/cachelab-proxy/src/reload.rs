//! Live reload (SIGHUP): the configuration file reread, each listener's pool replaced,
//! certificates reread. Reading and building run on a blocking thread, so a large file
//! (a 4 MiB nutcracker.yml takes about 2 s) stalls no runtime thread; requests decoded
//! meanwhile use the old pools.

use std::sync::Arc;

use thiserror::Error;
use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::config::{Config, ListenerSpec};
use crate::endpoint::Endpoint;
use crate::health::Health;
use crate::observed::PoolSlot;
use crate::pool_build::build_pool;
use crate::tls::ListenerTls;

/// Starts [`reload`] on a blocking thread; the handle resolves when it is done.
pub fn reload_off_thread(
    config: Config,
    slots: Vec<Arc<PoolSlot>>,
    tls: Vec<Option<Arc<ListenerTls>>>,
    health: Arc<Health>,
) -> JoinHandle<()> {
    tokio::task::spawn_blocking(move || reload(&config, &slots, &tls, &health))
}

/// Rereads `--config` and gives each listener its new pool: requests decoded from now on
/// use it, requests already decoded finish on the old one, and no connection is
/// touched. A file that cannot be read, does not parse, or changes the listeners is
/// refused with its reason logged, and the old configuration keeps serving.
///
/// Certificates are reread too (with the command line's pool as well): a listener's
/// from the file names of the new configuration (or the old ones), a pool's server side
/// when its pool is rebuilt. A file that cannot be read leaves the old one in use.
pub fn reload(
    config: &Config,
    slots: &[Arc<PoolSlot>],
    tls: &[Option<Arc<ListenerTls>>],
    health: &Health,
) {
    let Some(path) = &config.config_file else {
        reload_listener_tls(config, tls, None);
        if config.listeners.iter().any(|l| l.pool.server_tls.is_some()) {
            // The command line's pool: rebuilt only to reread its server-side files.
            let pools = config
                .listeners
                .iter()
                .map(|l| build_pool(&l.pool, health))
                .collect::<Result<Vec<_>, _>>();
            match pools {
                Ok(pools) => {
                    for (slot, pool) in slots.iter().zip(pools) {
                        slot.replace(pool);
                    }
                    info!("server TLS files reread");
                }
                Err(e) => error!(error = %e, "server TLS files not reread; the old ones stay"),
            }
        } else if tls.iter().all(Option::is_none) {
            warn!("SIGHUP: no --config file to reload (the command line's pool stays)");
        }
        return;
    };
    let listeners =
        match crate::config::file::load(path, config.server_timeout, config.failure_limit) {
            Ok(listeners) => listeners,
            Err(e) => {
                error!(error = %e, "reload refused; the old configuration keeps serving");
                return;
            }
        };
    if let Err(e) = check_restart(&config.listeners, &listeners) {
        error!(
            "reload refused: {e} (that needs a restart); the old configuration keeps \
                serving"
        );
        return;
    }
    let pools = match listeners
        .iter()
        .map(|l| build_pool(&l.pool, health))
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(pools) => pools,
        Err(e) => {
            error!(error = %e, "reload refused; the old configuration keeps serving");
            return;
        }
    };
    for (slot, pool) in slots.iter().zip(pools) {
        info!(pool = %pool.name, servers = ?pool.servers.iter().map(|s| s.addr.to_string()).collect::<Vec<_>>(),
              mode = ?pool.mode, protocol = pool.protocol.name(), "reloaded pool");
        slot.replace(pool);
    }
    reload_listener_tls(config, tls, Some(&listeners));
    info!(path = %path.display(), "configuration reloaded");
}

/// What a reload cannot change: a running listener keeps its address, its TLS on or off,
/// and the protocol its clients speak.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum NeedsRestart {
    #[error("the listen addresses changed from {old} to {new}")]
    Listeners { old: String, new: String },
    #[error("TLS was turned {} on the listener {listen}", if *.on { "on" } else { "off" })]
    Tls { listen: Endpoint, on: bool },
    /// Its connected clients speak the old protocol, and its servers may not speak the
    /// new one.
    #[error("pool {pool} changed its protocol from {from} to {to}")]
    Protocol {
        pool: String,
        from: &'static str,
        to: &'static str,
    },
}

/// Whether the listeners of a reloaded file (`new`) can replace `old` without a
/// restart.
pub fn check_restart(old: &[ListenerSpec], new: &[ListenerSpec]) -> Result<(), NeedsRestart> {
    let addrs = |l: &[ListenerSpec]| {
        l.iter()
            .map(|l| l.listen.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if old.len() != new.len() || old.iter().zip(new).any(|(a, b)| a.listen != b.listen) {
        return Err(NeedsRestart::Listeners {
            old: addrs(old),
            new: addrs(new),
        });
    }
    for (a, b) in old.iter().zip(new) {
        if a.tls.is_some() != b.tls.is_some() {
            return Err(NeedsRestart::Tls {
                listen: a.listen.clone(),
                on: b.tls.is_some(),
            });
        }
        if a.pool.protocol != b.pool.protocol {
            return Err(NeedsRestart::Protocol {
                pool: b.pool.name.clone(),
                from: a.pool.protocol.name(),
                to: b.pool.protocol.name(),
            });
        }
    }
    Ok(())
}

/// Rereads each TLS listener's certificate and key (and client CA), from `new`'s file
/// names if given; a listener whose files fail keeps its old configuration.
fn reload_listener_tls(
    config: &Config,
    tls: &[Option<Arc<ListenerTls>>],
    new: Option<&[crate::config::ListenerSpec]>,
) {
    for (i, (spec, tls)) in config.listeners.iter().zip(tls).enumerate() {
        let Some(tls) = tls else { continue };
        let new_spec = new.and_then(|n| n.get(i)).and_then(|l| l.tls.as_ref());
        match tls.reload(new_spec) {
            Ok(()) => info!(listen = %spec.listen, "TLS certificate reread"),
            Err(e) => error!(listen = %spec.listen, error = %e,
                             "TLS certificate not reread; the old one keeps serving"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{PoolSpec, ServerSpec};
    use crate::routing::Protocol;
    use std::time::Duration;

    fn listener(listen: &str, protocol: Protocol) -> ListenerSpec {
        let server = ServerSpec {
            addr: Endpoint::Tcp("127.0.0.1:6379".parse().unwrap()),
            host: "127.0.0.1".into(),
            name: "127.0.0.1:6379".into(),
            weight: 1,
        };
        let mut pool = PoolSpec::replicate(vec![server], false, Duration::from_secs(1), 2);
        pool.name = "r".into();
        pool.protocol = protocol;
        ListenerSpec {
            listen: Endpoint::Tcp(listen.parse().unwrap()),
            pool,
            tls: None,
        }
    }

    #[test]
    fn a_reload_may_change_a_pool_but_not_what_its_clients_speak() {
        let old = [listener("127.0.0.1:7000", Protocol::Redis)];
        let mut db = old.clone();
        db[0].pool.redis_db = 5;
        db[0].pool.redis_auth = Some("pw".into());
        assert_eq!(check_restart(&old, &db), Ok(()));
        let memcached = [listener("127.0.0.1:7000", Protocol::Memcached)];
        let err = check_restart(&old, &memcached).unwrap_err();
        assert_eq!(
            err.to_string(),
            "pool r changed its protocol from redis to memcached"
        );
        assert!(check_restart(&memcached, &old).is_err());
        let moved = [listener("127.0.0.1:7001", Protocol::Redis)];
        assert_eq!(
            check_restart(&old, &moved).unwrap_err().to_string(),
            "the listen addresses changed from 127.0.0.1:7000 to 127.0.0.1:7001"
        );
    }
}
