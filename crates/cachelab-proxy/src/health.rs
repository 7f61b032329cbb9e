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
//!   within the server timeout) after 10 ms, doubling up to `--backoff-max`; the first
//!   answer restores it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::BACKOFF_INITIAL;

/// What went wrong with a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// No answer within the server timeout.
    Timeout,
    /// Refused, reset, closed, or a reply that could not be parsed.
    Connection,
}

/// One server's health, without I/O or clocks.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HealthState {
    /// Failures since the last answer.
    pub failures: u32,
    pub ejected: bool,
    /// Why it failed last (for the SERVER_ERROR line and the log).
    pub reason: String,
    pub ejections: u64,
}

impl HealthState {
    /// Counts a failure; true if this ejects the server.
    pub fn failure(&mut self, kind: FailureKind, reason: &str, limit: u32) -> bool {
        self.failures = self.failures.saturating_add(1);
        self.reason.clear();
        self.reason.push_str(reason);
        if limit == 0 || self.ejected {
            return false;
        }
        if kind == FailureKind::Timeout || self.failures >= limit {
            self.ejected = true;
            self.ejections += 1;
            return true;
        }
        false
    }

    /// An answer from the server: the failure count starts again.
    pub fn success(&mut self) {
        self.failures = 0;
    }

    /// The probe got an answer; true if the server was ejected.
    pub fn restore(&mut self) -> bool {
        let was = self.ejected;
        self.ejected = false;
        self.failures = 0;
        was
    }
}

struct Slot {
    addr: SocketAddr,
    /// Mirrors `state.ejected` for the hot path.
    ejected: AtomicBool,
    /// Mirrors `state.failures != 0`, so an answer costs one load when all is well.
    failing: AtomicBool,
    /// Bumped on every restore: a worker's own backoff ends when it changes.
    restores: AtomicU64,
    state: Mutex<HealthState>,
}

/// The health of every server, shared by the workers and the probes.
pub struct Health {
    slots: Box<[Slot]>,
    failure_limit: u32,
    /// Bumped on every ejection and restore; workers waiting on a server watch it.
    changes: watch::Sender<u64>,
    ejected_now: AtomicU32,
}

impl Health {
    pub fn new(servers: &[SocketAddr], failure_limit: u32) -> Self {
        Health {
            slots: servers
                .iter()
                .map(|&addr| Slot {
                    addr,
                    ejected: AtomicBool::new(false),
                    failing: AtomicBool::new(false),
                    restores: AtomicU64::new(0),
                    state: Mutex::new(HealthState::default()),
                })
                .collect(),
            failure_limit,
            changes: watch::channel(0).0,
            ejected_now: AtomicU32::new(0),
        }
    }

    pub fn addr(&self, server: usize) -> SocketAddr {
        self.slots[server].addr
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
        self.slots.iter().map(|s| self.state(s).ejections).sum()
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
            let ejected = state.failure(kind, reason, self.failure_limit);
            slot.failing.store(true, Ordering::Release);
            slot.ejected.store(state.ejected, Ordering::Release);
            ejected
        };
        if ejected {
            self.ejected_now.fetch_add(1, Ordering::Relaxed);
            warn!(server = %slot.addr, %reason, "server ejected: reads go to the others, \
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
            info!(server = %slot.addr, "server answered the probe: restored");
            self.changes.send_modify(|n| *n += 1);
        }
    }
}

/// Probes `server` whenever it is ejected, until `stop` turns true.
pub async fn probe(
    health: Arc<Health>,
    server: usize,
    timeout: Duration,
    backoff_max: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut changes = health.subscribe();
    let addr = health.slots[server].addr;
    loop {
        while !health.is_ejected(server) {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
        }
        let mut wait = BACKOFF_INITIAL;
        while health.is_ejected(server) {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => return,
            }
            match tokio::time::timeout(timeout, ask_version(addr)).await {
                Ok(Ok(())) => health.restore(server),
                Ok(Err(reason)) => health.state(&health.slots[server]).reason = reason,
                Err(_) => {
                    health.state(&health.slots[server]).reason =
                        format!("no answer to a probe within {} ms", timeout.as_millis())
                }
            }
            wait = (wait * 2).min(backoff_max);
        }
    }
}

/// One probe: a real request, so a stopped process whose kernel still completes the
/// handshake does not count as alive.
async fn ask_version(addr: SocketAddr) -> Result<(), String> {
    let mut stream = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect failed: {e}"))?;
    stream
        .write_all(b"version\r\n")
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    let mut reply = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    while !reply.ends_with(b"\r\n") {
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        reply.extend_from_slice(&buf[..n]);
        if reply.len() > 1024 {
            break;
        }
    }
    if reply.starts_with(b"VERSION ") {
        Ok(())
    } else {
        Err(format!(
            "unexpected answer to version: {}",
            String::from_utf8_lossy(&reply).trim_end()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_ejects_at_once() {
        let mut s = HealthState::default();
        assert!(s.failure(FailureKind::Timeout, "no reply", 3));
        assert!(s.ejected);
        assert_eq!(s.ejections, 1);
    }

    #[test]
    fn connection_failures_eject_at_the_limit_and_an_answer_resets_the_count() {
        let mut s = HealthState::default();
        assert!(!s.failure(FailureKind::Connection, "refused", 2));
        s.success();
        assert!(!s.failure(FailureKind::Connection, "refused", 2));
        assert!(s.failure(FailureKind::Connection, "refused", 2));
        assert_eq!(s.reason, "refused");
    }

    #[test]
    fn limit_zero_never_ejects() {
        let mut s = HealthState::default();
        for _ in 0..10 {
            assert!(!s.failure(FailureKind::Timeout, "x", 0));
        }
        assert!(!s.ejected);
    }

    #[test]
    fn an_ejected_server_is_ejected_once_and_restored_once() {
        let mut s = HealthState::default();
        assert!(s.failure(FailureKind::Timeout, "a", 2));
        assert!(!s.failure(FailureKind::Timeout, "b", 2));
        assert_eq!(s.ejections, 1);
        assert!(s.restore());
        assert!(!s.restore());
        assert_eq!(s.failures, 0);
    }

    #[test]
    fn the_shared_registry_tells_everyone() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let health = Health::new(&[addr, addr], 2);
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
}
