//! Live reload (SIGHUP): the configuration file reread, each listener's pool replaced,
//! certificates reread. Reading and building run on a blocking thread, so a large file
//! (a 4 MiB nutcracker.yml takes about 2 s) stalls no runtime thread; requests decoded
//! meanwhile use the old pools.

use std::sync::Arc;

use tokio::task::JoinHandle;
use tracing::{error, info, warn};

use crate::config::Config;
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
    let old: Vec<&Endpoint> = config.listeners.iter().map(|l| &l.listen).collect();
    let new: Vec<&Endpoint> = listeners.iter().map(|l| &l.listen).collect();
    let tls_changed = config
        .listeners
        .iter()
        .zip(&listeners)
        .any(|(a, b)| a.tls.is_some() != b.tls.is_some());
    if tls_changed {
        error!(
            "reload refused: TLS was turned on or off on a listener (that needs a \
                restart); the old configuration keeps serving"
        );
        return;
    }
    if old != new {
        error!(old = ?old, new = ?new,
               "reload refused: the listen addresses changed (that needs a restart); \
                the old configuration keeps serving");
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
