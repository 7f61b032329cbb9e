//! Server health shared by the whole proxy: failures counted across workers, a server
//! ejected after the limit (at once after a timeout), probed in the background with a
//! real request, and restored when it answers.
//!
//! Why shared: each worker has its own connection to every server, so without it a
//! stalled server is discovered W times, each costing a full `--server-timeout`, and
//! round-robin keeps sending reads to it. With it, the first timeout ejects the server
//! for everyone: reads go to the other servers at once, workers already waiting on it
//! give up (their reads fail over), and a stall costs at most one timeout for the
//! requests that were already sent.
//!
//! The rules ([`HealthState`], pure):
//! - a timeout ejects at once (a stalled server holds every request sent to it);
//! - other failures (refused, reset, closed, malformed reply) eject after
//!   `--failure-limit` in a row (counted over all workers; any answer resets the count);
//! - `--failure-limit 0` never ejects: each worker then backs off on its own, as before;
//! - an ejected server is probed with `version` (connect, send, read `VERSION ...`
//!   within the server timeout; a Redis server: greet it, send `PING`, read `+PONG`) after 10 ms, doubling up to `--backoff-max`; the first
//!   answer restores it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::endpoint::Endpoint;
use crate::server_stream::Connector;
use crate::tls::ServerTls;

mod key;
mod probe;
mod state;

pub use key::{ServerKey, TlsKey};
pub use probe::probe;
pub use state::{FailureKind, HealthState};

/// The first reconnection attempt waits this long; each failure doubles it.
pub const BACKOFF_INITIAL: Duration = Duration::from_millis(10);

/// Servers the proxy can know over its life (every pool, every reload); a slot is never
/// reused, so a server keeps its id (and its connections) across reloads. A server is an
/// address with its pool's settings ([`ServerKey`]): each distinct set counts.
pub const MAX_SERVERS: usize = 1024;

/// One server's state as `stats` and the metrics show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    pub addr: Endpoint,
    /// What reports call it: the address, and where two servers share that address,
    /// the settings that tell them apart (`127.0.0.1:6379/db5`; see
    /// [`ServerKey::settings`]), unique among the servers.
    pub label: String,
    pub ejected: bool,
    /// Failures since the last answer.
    pub failures: u32,
    pub ejections: u64,
    pub reason: String,
}

struct Slot {
    /// Its address and settings, what it speaks among them; set once, when registered.
    key: OnceLock<ServerKey>,
    /// TLS towards this server, built from the files its key names; replaced by a
    /// reload, which rereads them (new connections use the new one).
    tls: RwLock<Option<Arc<ServerTls>>>,
    /// This server's `--failure-limit` (its pool's `server_failure_limit`).
    failure_limit: AtomicU32,
    /// Mirrors `state.ejected` for the hot path.
    ejected: AtomicBool,
    /// Mirrors `state.failures != 0`, so an answer costs one load when all is well.
    failing: AtomicBool,
    /// Bumped on every restore: a worker's own backoff ends when it changes.
    restores: AtomicU64,
    state: Mutex<HealthState>,
}

/// The health of every server, shared by the workers and the probes. Servers are
/// registered by address and settings ([`Health::register`]); the hot path reads plain
/// atomics.
pub struct Health {
    slots: Box<[Slot]>,
    registered: AtomicUsize,
    /// Each registered server's id: registering is a lookup, not a scan, so a pool of
    /// many entries over the same servers builds in linear time.
    ids: Mutex<HashMap<ServerKey, usize>>,
    /// Bumped on every ejection and restore; workers waiting on a server watch it.
    changes: watch::Sender<u64>,
    ejected_now: AtomicU32,
}

impl Health {
    /// A registry holding `servers` (memcached, no TLS) as ids 0, 1, ... in order.
    pub fn new(servers: &[Endpoint], failure_limit: u32) -> Self {
        let health = Health {
            slots: (0..MAX_SERVERS)
                .map(|_| Slot {
                    key: OnceLock::new(),
                    tls: RwLock::new(None),
                    failure_limit: AtomicU32::new(0),
                    ejected: AtomicBool::new(false),
                    failing: AtomicBool::new(false),
                    restores: AtomicU64::new(0),
                    state: Mutex::new(HealthState::default()),
                })
                .collect(),
            registered: AtomicUsize::new(0),
            ids: Mutex::new(HashMap::new()),
            changes: watch::channel(0).0,
            ejected_now: AtomicU32::new(0),
        };
        for addr in servers {
            health
                .register(&ServerKey::plain(addr.clone()), failure_limit, None)
                .expect("fewer servers than MAX_SERVERS");
        }
        health
    }

    /// The id of the server `key` names, registering it if it is new; its failure
    /// limit and TLS configuration (`tls`, built from the files `key.tls` names) are
    /// set either way (a reload may change the limit and reread the files). None when
    /// [`MAX_SERVERS`] are already known.
    pub fn register(
        &self,
        key: &ServerKey,
        failure_limit: u32,
        tls: Option<Arc<ServerTls>>,
    ) -> Option<usize> {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let known = self.registered.load(Ordering::Acquire);
        let id = match ids.get(key) {
            Some(&id) => id,
            None if known < MAX_SERVERS => {
                let _ = self.slots[known].key.set(key.clone());
                ids.insert(key.clone(), known);
                self.registered.store(known + 1, Ordering::Release);
                known
            }
            None => return None,
        };
        self.slots[id]
            .failure_limit
            .store(failure_limit, Ordering::Relaxed);
        *self.slots[id]
            .tls
            .write()
            .unwrap_or_else(|p| p.into_inner()) = tls;
        Some(id)
    }

    /// Servers registered so far (ids `0..len`).
    pub fn len(&self) -> usize {
        self.registered.load(Ordering::Acquire)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn addr(&self, server: usize) -> &Endpoint {
        &self.key(server).addr
    }

    /// The address and settings `server` was registered with.
    pub fn key(&self, server: usize) -> &ServerKey {
        self.slots[server].key.get().expect("a registered server")
    }

    /// How to connect to `server` now (its TLS files as of the last reload).
    pub fn connector(&self, server: usize) -> Connector {
        let key = self.key(server);
        Connector {
            endpoint: key.addr.clone(),
            tls: self.slots[server]
                .tls
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .clone(),
            dialect: key.dialect.clone(),
        }
    }

    /// Every registered server's state, in id order.
    pub fn report(&self) -> Vec<ServerReport> {
        let labels = labels((0..self.len()).map(|id| self.key(id)));
        (0..self.len())
            .zip(labels)
            .map(|(id, label)| {
                let state = self.state(&self.slots[id]);
                ServerReport {
                    addr: self.addr(id).clone(),
                    label,
                    ejected: state.ejected,
                    failures: state.failures,
                    ejections: state.ejections,
                    reason: state.reason.clone(),
                }
            })
            .collect()
    }

    pub fn is_ejected(&self, server: usize) -> bool {
        self.slots[server].ejected.load(Ordering::Acquire)
    }

    /// How many times `server` has been restored (see `Slot::restores`).
    pub fn restores(&self, server: usize) -> u64 {
        self.slots[server].restores.load(Ordering::Acquire)
    }

    pub fn ejected_servers(&self) -> u32 {
        self.ejected_now.load(Ordering::Relaxed)
    }

    pub fn ejections(&self) -> u64 {
        self.slots[..self.len()]
            .iter()
            .map(|s| self.state(s).ejections)
            .sum()
    }

    pub fn reason(&self, server: usize) -> String {
        self.state(&self.slots[server]).reason.clone()
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn state<'a>(&self, slot: &'a Slot) -> std::sync::MutexGuard<'a, HealthState> {
        slot.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn report_failure(&self, server: usize, kind: FailureKind, reason: &str) {
        let slot = &self.slots[server];
        let ejected = {
            let mut state = self.state(slot);
            let limit = slot.failure_limit.load(Ordering::Relaxed);
            let ejected = state.failure(kind, reason, limit);
            tracing::debug!(server = %self.addr(server), failures = state.failures, limit,
                            ?kind, %reason, "server failure counted");
            slot.failing.store(true, Ordering::Release);
            slot.ejected.store(state.ejected, Ordering::Release);
            ejected
        };
        if ejected {
            self.ejected_now.fetch_add(1, Ordering::Relaxed);
            warn!(server = %self.addr(server), %reason, "server ejected: reads go to the others, \
                  writes answer SERVER_ERROR until a probe gets an answer");
            self.changes.send_modify(|n| *n += 1);
        }
    }

    pub fn report_success(&self, server: usize) {
        let slot = &self.slots[server];
        if slot.failing.load(Ordering::Acquire) {
            self.state(slot).success();
            slot.failing.store(false, Ordering::Release);
        }
    }

    fn restore(&self, server: usize) {
        let slot = &self.slots[server];
        let was = {
            let mut state = self.state(slot);
            let was = state.restore();
            slot.failing.store(false, Ordering::Release);
            slot.ejected.store(false, Ordering::Release);
            was
        };
        if was {
            slot.restores.fetch_add(1, Ordering::AcqRel);
            self.ejected_now.fetch_sub(1, Ordering::Relaxed);
            info!(server = %self.addr(server), "server answered the probe: restored");
            self.changes.send_modify(|n| *n += 1);
        }
    }
}

/// Each server's name in reports, in id order: its address, unless another server has
/// the same one; then the address with its settings (`127.0.0.1:6379/db5`), and where
/// even those repeat (two passwords, two TLS files), its id too.
fn labels<'a>(keys: impl Iterator<Item = &'a ServerKey> + Clone) -> Vec<String> {
    let mut per_addr: HashMap<&Endpoint, usize> = HashMap::new();
    for key in keys.clone() {
        *per_addr.entry(&key.addr).or_default() += 1;
    }
    let named: Vec<String> = keys
        .clone()
        .map(|key| {
            if per_addr[&key.addr] > 1 {
                key.to_string()
            } else {
                key.addr.to_string()
            }
        })
        .collect();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for name in &named {
        *seen.entry(name).or_default() += 1;
    }
    named
        .iter()
        .enumerate()
        .map(|(id, name)| {
            if seen[name.as_str()] > 1 {
                format!("{name}/id{id}")
            } else {
                name.clone()
            }
        })
        .collect()
}

impl crate::routing::plan::Alive for Health {
    fn is_ejected(&self, server: usize) -> bool {
        Health::is_ejected(self, server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;

    #[test]
    fn the_shared_registry_tells_everyone() {
        let a = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let b = Endpoint::Tcp("127.0.0.1:2".parse().unwrap());
        let health = Health::new(&[a, b], 2);
        let mut rx = health.subscribe();
        rx.borrow_and_update();
        health.report_failure(1, FailureKind::Timeout, "no reply within 1000 ms");
        assert!(health.is_ejected(1) && !health.is_ejected(0));
        assert!(rx.has_changed().unwrap());
        assert_eq!(health.ejected_servers(), 1);
        assert_eq!(health.reason(1), "no reply within 1000 ms");
        health.restore(1);
        assert!(!health.is_ejected(1));
        assert_eq!(health.restores(1), 1);
        assert_eq!(health.ejected_servers(), 0);
    }

    #[test]
    fn a_server_keeps_its_id_and_a_new_one_gets_the_next() {
        let a = Endpoint::Tcp("127.0.0.1:1".parse().unwrap());
        let b = Endpoint::Unix("/tmp/cachelab-m.sock".into());
        let health = Health::new(std::slice::from_ref(&a), 2);
        assert_eq!(
            health.register(&ServerKey::plain(b.clone()), 3, None),
            Some(1)
        );
        assert_eq!(health.register(&ServerKey::plain(a), 5, None), Some(0));
        assert_eq!(health.len(), 2);
        health.report_failure(0, FailureKind::Connection, "refused");
        let report = health.report();
        assert_eq!((report[0].failures, report[0].ejected), (1, false));
        assert_eq!(report[1].addr, b);
    }

    fn redis(addr: &Endpoint, auth: Option<&str>, db: u32) -> ServerKey {
        ServerKey {
            addr: addr.clone(),
            dialect: Dialect::Redis {
                auth: auth.map(str::to_owned),
                db,
            },
            tls: None,
        }
    }

    #[test]
    fn pools_share_a_server_only_with_equal_settings_and_flipping_back_reuses_its_id() {
        let addr = Endpoint::Tcp("127.0.0.1:6379".parse().unwrap());
        let health = Health::new(&[], 2);
        let db0 = health.register(&redis(&addr, None, 0), 2, None).unwrap();
        let db5 = health.register(&redis(&addr, None, 5), 2, None).unwrap();
        let auth = health
            .register(&redis(&addr, Some("pw"), 0), 2, None)
            .unwrap();
        assert_eq!((db0, db5, auth), (0, 1, 2));
        // Each greets with its own settings.
        assert_eq!(health.connector(db5).dialect, redis(&addr, None, 5).dialect);
        assert_eq!(health.connector(db0).dialect.greeting(), b"");
        // A reload to db 5 and back, again and again: no new slot.
        for _ in 0..3 {
            assert_eq!(health.register(&redis(&addr, None, 5), 2, None), Some(db5));
            assert_eq!(health.register(&redis(&addr, None, 0), 2, None), Some(db0));
        }
        assert_eq!(health.len(), 3);
    }

    #[test]
    fn servers_sharing_an_address_are_told_apart_in_reports() {
        let addr = Endpoint::Tcp("127.0.0.1:6379".parse().unwrap());
        let other = Endpoint::Tcp("127.0.0.1:6380".parse().unwrap());
        let health = Health::new(&[], 2);
        for key in [
            redis(&addr, None, 0),
            redis(&addr, None, 5),
            redis(&addr, Some("a"), 5),
            redis(&addr, Some("b"), 5),
            redis(&other, None, 5),
        ] {
            health.register(&key, 2, None).unwrap();
        }
        let labels: Vec<String> = health.report().into_iter().map(|r| r.label).collect();
        assert_eq!(
            labels,
            [
                "127.0.0.1:6379",
                "127.0.0.1:6379/db5",
                "127.0.0.1:6379/db5/auth/id2",
                "127.0.0.1:6379/db5/auth/id3",
                "127.0.0.1:6380",
            ]
        );
    }
}
