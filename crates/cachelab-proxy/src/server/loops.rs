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
use crate::evloop::{Control, EventLoop, Handoff, LoopListener, LoopListeners, LoopSettings};
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

/// The event loops ([`crate::evloop`], `--loops` of them): each thread owns its clients,
/// its queue, its workers and their server sockets until `shutdown`; then each answers
/// what it received within the drain timeout.
pub(super) async fn serve_loop(
    listeners: Vec<Listener>,
    parts: &Parts,
    config: &Config,
    shutdown: impl Future<Output = ()>,
    mut reloads: mpsc::Receiver<()>,
    mut reloading: Reloading<'_>,
) {
    let (done_tx, mut done_rx) = tokio::sync::mpsc::channel::<()>(config.loops);
    let mut controls = Vec::new();
    let mut threads = Vec::new();
    match start_loops(listeners, parts, config, &reloading, done_tx) {
        Ok(started) => {
            for (control, thread) in started {
                controls.push(control);
                threads.push(thread);
            }
        }
        Err(e) => {
            error!(error = %e, "cannot start the event loop");
            return;
        }
    }
    // A probe that ejects or restores a server wakes the loops, so that a worker waiting
    // on an ejected server stops waiting.
    let mut changes = reloading.health.subscribe();
    let wakers = controls.clone();
    let watcher = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            wakers.iter().for_each(Control::wake);
        }
    });
    reloading.alongside(shutdown, &mut reloads).await;
    info!("shutting down: no new connections; answering requests already received");
    controls.iter().for_each(Control::drain);
    let drain_timeout = config.drain_timeout;
    let all_done = async {
        for _ in 0..threads.len() {
            let _ = done_rx.recv().await;
        }
    };
    if tokio::time::timeout(drain_timeout, all_done).await.is_err() {
        warn!(
            queued = parts.observed.queue_len(),
            timeout_s = drain_timeout.as_secs_f64(),
            "drain timeout: closing with requests unanswered"
        );
        controls.iter().for_each(Control::abort);
    }
    watcher.abort();
    let _ =
        tokio::task::spawn_blocking(move || threads.into_iter().for_each(|t| drop(t.join()))).await;
}

/// Builds `config.loops` event loops over clones of the listeners, each with its own
/// queue and its range of workers, and starts each on a thread of its own; each sends
/// on `done` when it ends.
fn start_loops(
    listeners: Vec<Listener>,
    parts: &Parts,
    config: &Config,
    reloading: &Reloading<'_>,
    done: tokio::sync::mpsc::Sender<()>,
) -> std::io::Result<Vec<(Control, std::thread::JoinHandle<()>)>> {
    let first: LoopListeners = listeners
        .into_iter()
        .zip(reloading.slots.iter().cloned())
        .zip(reloading.tls.iter().cloned())
        .map(|((listener, slot), tls)| Ok((LoopListener::from_listener(listener)?, slot, tls)))
        .collect::<std::io::Result<_>>()?;
    let mut per_loop = Vec::with_capacity(config.loops);
    for _ in 1..config.loops {
        let copy = first
            .iter()
            .map(|(l, slot, tls)| Ok((l.try_clone()?, Arc::clone(slot), tls.clone())))
            .collect::<std::io::Result<LoopListeners>>()?;
        per_loop.push(copy);
    }
    per_loop.insert(0, first);
    // The caller's log subscriber, also when it is not the global one (an embedding
    // such as the in-process tests sets it per thread).
    let dispatch = tracing::dispatcher::get_default(Clone::clone);
    // Every loop is built before any starts, so that a failure leaves none running.
    let mut built = Vec::with_capacity(config.loops);
    for (index, listeners) in per_loop.into_iter().enumerate() {
        let settings = LoopSettings {
            max_connections: config.max_connections,
            idle_timeout: config.idle_timeout,
            busy_poll: config.busy_poll,
            workers: config.workers,
            pipeline: config.pipeline,
            max_reply_bytes: config.max_reply_bytes,
            share_connections: config.share_connections,
            merge_gets: config.merge_gets,
        };
        let (event_loop, control) = EventLoop::new(
            listeners,
            Arc::clone(&parts.net),
            parts.worker.clone(),
            settings,
            index,
            Arc::clone(&parts.observed.queues[index]),
        )?;
        built.push((index, event_loop, control));
    }
    parts.stats.set_wakers(
        built
            .iter()
            .map(|(_, _, control)| control.waker())
            .collect(),
    );
    // The first loop accepts and hands every other client, in turn, to the others.
    let mut handoffs = Vec::new();
    for (_, event_loop, control) in built.iter_mut().skip(1) {
        let (to, inbox) = std::sync::mpsc::channel();
        event_loop.take_from(inbox);
        handoffs.push(Handoff {
            to,
            control: control.clone(),
        });
    }
    built[0].1.hand_to(handoffs);
    let mut started = Vec::with_capacity(config.loops);
    for (index, event_loop, control) in built {
        let dispatch = dispatch.clone();
        let done = done.clone();
        let name = if config.loops == 1 {
            "cachelab-loop".to_string()
        } else {
            format!("cachelab-loop-{index}")
        };
        let thread = std::thread::Builder::new().name(name).spawn(move || {
            tracing::dispatcher::with_default(&dispatch, || event_loop.run());
            let _ = done.try_send(());
        })?;
        started.push((control, thread));
    }
    Ok(started)
}
