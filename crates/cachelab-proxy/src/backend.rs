//! One worker's connection to one server (memcached or Redis), with reconnection and
//! backoff: the socket side of a worker; its buffers and what is owed on the connection
//! are the worker's engine's.
//!
//! A failed connection is dropped (a half-read reply cannot be resynchronised) and the
//! failure is reported to the proxy's shared [`Health`], which may eject the server for
//! every worker. While the server is not ejected, this connection waits out its own
//! retry time (doubling up to the configured maximum, as with `--failure-limit 0`); when
//! a probe restores the server, the wait ends at once.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use tokio::io::AsyncWriteExt;
use tracing::{info, warn};

use crate::down::{Down, IdleEnd};
use crate::endpoint::Endpoint;
use crate::health::{FailureKind, Health};
use crate::reconnect::Reconnect;
use crate::server_stream::ServerStream;

pub struct Backend {
    pub worker: usize,
    /// The server's index in the proxy's server list.
    pub index: usize,
    pub addr: Endpoint,
    health: Arc<Health>,
    stream: Option<ServerStream>,
    /// When to try again after a failure, and why the server is down.
    retry: Reconnect,
    connect_timeout: Duration,
}

impl Backend {
    pub fn new(
        worker: usize,
        index: usize,
        health: Arc<Health>,
        connect_timeout: Duration,
        backoff_max: Duration,
    ) -> Self {
        Backend {
            worker,
            index,
            addr: health.addr(index).clone(),
            health,
            stream: None,
            retry: Reconnect::new(backoff_max),
            connect_timeout,
        }
    }

    pub fn is_up(&self) -> bool {
        self.stream.is_some()
    }

    /// Why the server cannot be used now (or why it last could not).
    pub fn down(&self) -> &Down {
        &self.retry.down
    }

    /// Connects if down and the retry time has come; Ok(true) when a new connection was
    /// opened, Err says why the server cannot be used. An ejected server cannot be
    /// used, whatever the state of this connection.
    pub async fn ensure_connected(&mut self) -> Result<bool, Down> {
        if self.health.is_ejected(self.index) {
            let down = Down::Ejected(self.health.reason(self.index));
            self.drop_connection(down.clone());
            return Err(down);
        }
        if self.stream.is_some() {
            return Ok(false);
        }
        self.retry
            .may_attempt(Instant::now(), self.health.restores(self.index))?;
        let connector = self.health.connector(self.index);
        let attempt = tokio::time::timeout(self.connect_timeout, connector.connect());
        match attempt.await {
            Ok(Ok(stream)) => {
                if self.retry.connected() {
                    info!(worker = self.worker, server = %self.addr, "reconnected to server");
                }
                self.stream = Some(stream);
                Ok(true)
            }
            Ok(Err(e)) => {
                Err(self.schedule_retry(FailureKind::Connection, Down::Connect(e.to_string())))
            }
            Err(_) => Err(self.schedule_retry(
                FailureKind::Timeout,
                Down::ConnectTimeout(self.connect_timeout.as_millis()),
            )),
        }
    }

    /// Reports the failure to the shared health and waits out the backoff; returns it.
    fn schedule_retry(&mut self, kind: FailureKind, down: Down) -> Down {
        let restores = self.health.restores(self.index);
        self.health
            .report_failure(self.index, kind, &down.to_string());
        self.retry.failed(Instant::now(), restores, down.clone());
        down
    }

    /// Marks the server down after an error on an established connection and reports
    /// it.
    pub fn fail(&mut self, kind: FailureKind, down: Down) {
        if self.stream.take().is_some() {
            warn!(worker = self.worker, server = %self.addr, reason = %down,
                  "server connection failed; reconnecting with backoff");
        }
        self.schedule_retry(kind, down);
    }

    /// Closes the connection without counting it against the server: it was ejected
    /// (replies still owed on this connection would arrive out of step), or it closed
    /// while idle (a restart), to be reopened by the next request that needs it.
    pub fn drop_connection(&mut self, down: Down) {
        if self.stream.take().is_some() {
            info!(worker = self.worker, server = %self.addr, reason = %down,
                  "server connection closed");
        }
        self.retry.down = down;
    }

    /// Ready when the idle connection must go: the server closed it (EOF or reset), or
    /// sent bytes nobody asked for. Pending while it is quiet or not connected.
    pub fn poll_idle_closed(&mut self, cx: &mut Context<'_>) -> Poll<IdleEnd> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Pending;
        };
        let mut probe = [0u8; 64];
        match stream.poll_idle(cx, &mut probe) {
            Poll::Ready(Ok(0)) => Poll::Ready(IdleEnd::Closed),
            Poll::Ready(Ok(_)) => Poll::Ready(IdleEnd::UnaskedBytes),
            Poll::Ready(Err(_)) => Poll::Ready(IdleEnd::Failed),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Sends `buf`. A connection the server closed while it sat `idle` (no reply owed on
    /// it) would swallow the bytes, so it is checked first and replaced; a write that
    /// fails on a connection used before is retried once on a fresh one (a write error
    /// means the kernel refused the bytes: the server did not get the request). Ok(true)
    /// when the bytes went on a new connection.
    pub async fn send(&mut self, buf: &[u8], idle: bool) -> Result<bool, Down> {
        let mut reconnected = false;
        if let Some(end) = self.closed_while_idle(idle) {
            self.drop_connection(Down::Idle(end));
            self.ensure_connected().await?;
            reconnected = true;
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(self.retry.down.clone());
        };
        if let Err(first) = write_flushed(stream, buf).await {
            info!(worker = self.worker, server = %self.addr, error = %first,
                  "write failed; retrying once on a fresh connection");
            self.drop_connection(Down::WriteRetried);
            self.ensure_connected().await?;
            reconnected = true;
            let stream = self.stream.as_mut().expect("just connected");
            if let Err(e) = write_flushed(stream, buf).await {
                let down = Down::WriteFailed(e.to_string());
                self.fail(FailureKind::Connection, down.clone());
                return Err(down);
            }
        }
        Ok(reconnected)
    }

    /// Why this connection must go, if the server closed (or reset) it or sent bytes
    /// while no reply was owed on it. Checked without waiting.
    fn closed_while_idle(&mut self, idle: bool) -> Option<IdleEnd> {
        if self.stream.is_none() || !idle {
            return None;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.poll_idle_closed(&mut cx) {
            Poll::Ready(end) => Some(end),
            Poll::Pending => None,
        }
    }

    /// Reads more reply bytes into `buf`; `Ready(Err)` says why reading stopped (the
    /// connection closed or failed, or there is none).
    ///
    /// Goes through `AsyncRead`, which clears the socket's readiness after a short read,
    /// so a drained socket costs no extra `recv` returning EAGAIN.
    pub fn poll_read(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut BytesMut,
    ) -> Poll<Result<(), Down>> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(Err(self.retry.down.clone()));
        };
        match tokio_util::io::poll_read_buf(Pin::new(stream), cx, buf) {
            Poll::Ready(Ok(0)) => Poll::Ready(Err(Down::Closed)),
            Poll::Ready(Ok(_)) => {
                crate::busy_poll::touch();
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Err(Down::ReadFailed(e.to_string()))),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Writes `buf` and flushes: a TLS stream may hold records back until flushed.
async fn write_flushed(stream: &mut ServerStream, buf: &[u8]) -> std::io::Result<()> {
    stream.write_all(buf).await?;
    stream.flush().await
}
