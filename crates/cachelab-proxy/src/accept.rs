//! The accept loop: every listener's connections, the connection limit (memcached's
//! answer past it), and one task per client connection, its TLS handshake included.

use std::future::{poll_fn, Future};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use cachelab_net::backoff::Backoff;
use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;
use tracing::{error, warn};

use crate::client::ClientConn;
use crate::client_stream;
use crate::connection::{self, NetContext};
use crate::endpoint::{Accepted, Listener};
use crate::observed::PoolSlot;
use crate::tls::ListenerTls;

/// Answers a connection past the limit and closes it (bounded in time). A TLS
/// listener's client would not understand a plain line: it is closed without one.
async fn refuse(accepted: Accepted, tls: bool) {
    use tokio::io::{AsyncWrite, AsyncWriteExt};
    async fn answer(mut stream: impl AsyncWrite + Unpin, tls: bool) {
        if !tls {
            let _ = stream
                .write_all(b"ERROR Too many open connections\r\n")
                .await;
        }
        let _ = stream.shutdown().await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        match accepted {
            Accepted::Tcp(s) => answer(s, tls).await,
            Accepted::Unix(s) => answer(s, tls).await,
        }
    })
    .await;
}

/// Accepts on every listener until `shutdown` resolves.
#[allow(clippy::too_many_arguments)]
pub async fn accept_loop(
    listeners: &[Listener],
    slots: &[Arc<PoolSlot>],
    tls: &[Option<Arc<ListenerTls>>],
    net: &Arc<NetContext>,
    max_connections: usize,
    stop_rx: &watch::Receiver<bool>,
    connections: &mut JoinSet<()>,
    shutdown: impl Future<Output = ()>,
) {
    let limit = Arc::new(Semaphore::new(max_connections));
    let mut next_id = 0u64;
    let mut backoff = Backoff::for_accept();
    tokio::pin!(shutdown);
    loop {
        let any_listener = poll_fn(|cx| {
            for (index, listener) in listeners.iter().enumerate() {
                if let Poll::Ready(accepted) = listener.poll_accept(cx) {
                    return Poll::Ready((index, accepted));
                }
            }
            Poll::Pending
        });
        let (listener, accepted) = tokio::select! {
            _ = &mut shutdown => return,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            accepted = any_listener => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(pair) => {
                backoff.succeeded();
                pair
            }
            Err(e) => {
                // Typically out of file descriptors: wait and retry rather than spin.
                error!(error = %e, "accept failed");
                tokio::time::sleep(backoff.failed()).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&limit).try_acquire_owned() else {
            // memcached's answer past its connection limit; the client learns why instead
            // of waiting in the backlog forever.
            let refused = net.net.rejected_connections.fetch_add(1, Ordering::Relaxed);
            if refused.is_multiple_of(1000) {
                warn!(%peer, limit = max_connections, refused = refused + 1,
                      "too many open connections: refusing");
            }
            tokio::spawn(refuse(stream, tls[listener].is_some()));
            continue;
        };
        if let Accepted::Tcp(s) = &stream {
            let _ = s.set_nodelay(true);
        }
        next_id += 1;
        let id = next_id;
        net.net.total_connections.fetch_add(1, Ordering::Relaxed);
        net.net.curr_connections.fetch_add(1, Ordering::Relaxed);
        let net = Arc::clone(net);
        let slot = Arc::clone(&slots[listener]);
        let tls = tls[listener].clone();
        let mut stop = stop_rx.clone();
        connections.spawn(async move {
            // The handshake runs here, not in the accept loop: a slow or failed one
            // costs only this connection.
            let established = tokio::select! {
                established = client_stream::establish(stream, tls.as_deref()) => established,
                _ = stop.changed() => {
                    net.net.curr_connections.fetch_sub(1, Ordering::Relaxed);
                    return;
                }
            };
            let (reader, writer) = match established {
                Ok(halves) => halves,
                Err(e) => {
                    net.net.tls_handshake_errors.fetch_add(1, Ordering::Relaxed);
                    net.net.curr_connections.fetch_sub(1, Ordering::Relaxed);
                    if net.log_limit.allow() {
                        warn!(conn = id, %peer, error = %e, "client connection closed");
                    }
                    return;
                }
            };
            let conn = Arc::new(ClientConn::new(id, peer, writer, Arc::clone(&net.budget)));
            connection::serve(conn, reader, net, slot, stop).await;
            drop(permit);
        });
    }
}
