//! The background probe of an ejected server: a real request after a backoff that
//! doubles, until the server answers and [`super::Health`] restores it.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use cachelab_net::backoff::Backoff;

use super::{Health, BACKOFF_INITIAL};
use crate::server_stream::Connector;

/// Probes `server` whenever it is ejected, until `stop` turns true.
pub async fn probe(
    health: Arc<Health>,
    server: usize,
    timeout: Duration,
    backoff_max: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut changes = health.subscribe();
    loop {
        while !health.is_ejected(server) {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = stop.changed() => return,
            }
        }
        let mut backoff = Backoff::new(BACKOFF_INITIAL, backoff_max);
        while health.is_ejected(server) {
            tokio::select! {
                _ = tokio::time::sleep(backoff.failed()) => {}
                _ = stop.changed() => return,
            }
            match tokio::time::timeout(timeout, ask_alive(health.connector(server))).await {
                Ok(Ok(())) => health.restore(server),
                Ok(Err(reason)) => health.state(&health.slots[server]).reason = reason,
                Err(_) => {
                    health.state(&health.slots[server]).reason =
                        format!("no answer to a probe within {} ms", timeout.as_millis())
                }
            }
        }
    }
}

/// One probe: a real request (`version`, or `PING` after a Redis server's greeting),
/// so a stopped process whose kernel still completes the handshake does not count as
/// alive.
async fn ask_alive(connector: Connector) -> Result<(), String> {
    let dialect = connector.dialect.clone();
    let mut stream = connector.connect().await.map_err(|e| e.to_string())?;
    stream
        .write_all(dialect.probe())
        .await
        .map_err(|e| format!("write failed: {e}"))?;
    let mut reply = Vec::with_capacity(64);
    let mut buf = [0u8; 256];
    loop {
        if dialect.probe_answered(&reply).map_err(|e| e.to_string())? {
            return Ok(());
        }
        let n = stream
            .read(&mut buf)
            .await
            .map_err(|e| format!("read failed: {e}"))?;
        if n == 0 {
            return Err("server closed the connection".into());
        }
        reply.extend_from_slice(&buf[..n]);
    }
}
