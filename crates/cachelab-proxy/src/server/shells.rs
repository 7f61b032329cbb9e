//! The event loop ([`crate::evloop`], one thread owning every socket) started, served
//! until shutdown and drained within the drain timeout, with reload requests served
//! beside it on the control plane's runtime.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;
use tracing::{error, info, warn};

use super::{spawn_probes, Parts};
use crate::config::Config;
use crate::endpoint::Listener;
use crate::evloop::{EventLoop, LoopListener, LoopSettings};
use crate::health::Health;
use crate::observed::PoolSlot;
use crate::reload::reload_off_thread;
use crate::tls::ListenerTls;

/// What serving needs to carry out reloads: rereads `--config` off the runtime's
/// threads, and probes the servers a reload registered.
pub(super) struct Reloading<'a> {
    pub(super) config: &'a Config,
    pub(super) slots: &'a [Arc<PoolSlot>],
    pub(super) tls: &'a [Option<Arc<ListenerTls>>],
    pub(super) health: &'a Arc<Health>,
    pub(super) probed: &'a mut usize,
    pub(super) probes: &'a mut JoinSet<()>,
    pub(super) stop: &'a watch::Receiver<bool>,
}

impl Reloading<'_> {
    /// Serves reload requests until `until` resolves.
    async fn alongside(
        &mut self,
        until: impl Future<Output = ()>,
        reloads: &mut mpsc::Receiver<()>,
    ) {
        tokio::pin!(until);
        let mut reloading: Option<tokio::task::JoinHandle<()>> = None;
        loop {
            tokio::select! {
                _ = &mut until => break,
                Some(()) = reloads.recv(), if reloading.is_none() => {
                    reloading = Some(reload_off_thread(
                        self.config.clone(),
                        self.slots.to_vec(),
                        self.tls.to_vec(),
                        Arc::clone(self.health),
                    ));
                }
                done = async { reloading.as_mut().expect("guarded").await }, if reloading.is_some() => {
                    reloading = None;
                    if let Err(e) = done {
                        error!(error = %e, "reload failed; the old configuration keeps serving");
                    }
                    // a reload may have registered new servers: probe them too
                    spawn_probes(self.health, self.config, self.probed, self.probes, self.stop);
                }
            }
        }
    }
}

/// The event-loop shell ([`crate::evloop`]): one thread owns every client and server
/// socket until `shutdown`; then it answers what was received within the drain timeout.
pub(super) async fn serve_loop(
    listeners: Vec<Listener>,
    parts: &Parts,
    config: &Config,
    shutdown: impl Future<Output = ()>,
    mut reloads: mpsc::Receiver<()>,
    mut reloading: Reloading<'_>,
) {
    let loop_listeners = listeners
        .into_iter()
        .zip(reloading.slots.iter().cloned())
        .zip(reloading.tls.iter().cloned())
        .map(|((listener, slot), tls)| Ok((LoopListener::from_listener(listener)?, slot, tls)))
        .collect::<std::io::Result<Vec<_>>>();
    let settings = LoopSettings {
        max_connections: config.max_connections,
        idle_timeout: config.idle_timeout,
        busy_poll: config.busy_poll,
        workers: config.workers,
        pipeline: config.pipeline,
        max_reply_bytes: config.max_reply_bytes,
    };
    let built = loop_listeners.and_then(|listeners| {
        EventLoop::new(
            listeners,
            Arc::clone(&parts.net),
            parts.worker.clone(),
            settings,
        )
    });
    let (event_loop, control) = match built {
        Ok(pair) => pair,
        Err(e) => {
            error!(error = %e, "cannot start the event loop");
            return;
        }
    };
    let (done_tx, mut done_rx) = tokio::sync::oneshot::channel::<()>();
    // The caller's log subscriber, also when it is not the global one (an embedding
    // such as the in-process tests sets it per thread).
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    let thread = std::thread::Builder::new()
        .name("cachelab-loop".into())
        .spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || event_loop.run());
            let _ = done_tx.send(());
        });
    let thread = match thread {
        Ok(thread) => thread,
        Err(e) => {
            error!(error = %e, "cannot start the event loop's thread");
            return;
        }
    };
    // A probe that ejects or restores a server wakes the loop, so that a worker waiting
    // on an ejected server stops waiting.
    let mut changes = reloading.health.subscribe();
    let waker = control.clone();
    let watcher = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            waker.wake();
        }
    });
    reloading.alongside(shutdown, &mut reloads).await;
    info!("shutting down: no new connections; answering requests already received");
    control.drain();
    let drain_timeout = config.drain_timeout;
    if tokio::time::timeout(drain_timeout, &mut done_rx)
        .await
        .is_err()
    {
        warn!(
            queued = parts.worker.queue.len(),
            timeout_s = drain_timeout.as_secs_f64(),
            "drain timeout: closing with requests unanswered"
        );
        control.abort();
    }
    watcher.abort();
    let _ = tokio::task::spawn_blocking(move || thread.join()).await;
}
