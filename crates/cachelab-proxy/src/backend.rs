//! One worker's connection to one memcached server, with reconnection and backoff.
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

use bytes::{Buf, BytesMut};
use tokio::io::AsyncWriteExt;
use tracing::{info, warn};

use crate::budget::{Charge, MemoryBudget};
use crate::down::{Down, IdleEnd};
use crate::endpoint::Endpoint;
use crate::health::{FailureKind, Health, BACKOFF_INITIAL};
use crate::server_stream::ServerStream;

/// Why reading a reply stopped.
#[derive(Debug)]
pub enum FillError {
    /// The connection is unusable (closed, reset, read error): the server failed.
    Connection(Down),
    /// One request's reply passed --max-reply-bytes: the request is refused.
    TooLarge,
    /// The memory budget is exhausted: the request is refused.
    OutOfMemory,
}

/// A reply buffer larger than this is replaced by a fresh one once it is empty.
const RBUF_KEEP: usize = 256 * 1024;

pub struct Backend {
    pub worker: usize,
    /// The server's index in the proxy's server list.
    pub index: usize,
    pub addr: Endpoint,
    health: Arc<Health>,
    /// `Health::restores` when this connection last failed.
    restores_seen: u64,
    stream: Option<ServerStream>,
    /// Replies read from the server; `parsed` bytes of it belong to the current request.
    pub rbuf: BytesMut,
    pub parsed: usize,
    /// Messages composed for the server and not yet sent.
    pub wbuf: BytesMut,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// Why the server is down, for the SERVER_ERROR line.
    down: Down,
    connect_timeout: Duration,
    backoff_max: Duration,
    /// `rbuf` held against the memory budget.
    charge: Charge,
    max_reply: usize,
}

impl Backend {
    pub fn new(
        worker: usize,
        index: usize,
        health: Arc<Health>,
        budget: Arc<MemoryBudget>,
        connect_timeout: Duration,
        backoff_max: Duration,
        max_reply: usize,
    ) -> Self {
        Backend {
            worker,
            index,
            addr: health.addr(index).clone(),
            health,
            restores_seen: 0,
            stream: None,
            rbuf: BytesMut::with_capacity(16 * 1024),
            parsed: 0,
            wbuf: BytesMut::with_capacity(4 * 1024),
            backoff: BACKOFF_INITIAL,
            retry_at: None,
            down: Down::NotConnectedYet,
            connect_timeout,
            backoff_max,
            charge: Charge::new(budget),
            max_reply,
        }
    }

    pub fn is_up(&self) -> bool {
        self.stream.is_some()
    }

    /// Why the server cannot be used now (or why it last could not).
    pub fn down(&self) -> &Down {
        &self.down
    }

    /// Connects if down and the retry time has come; Err says why the server cannot
    /// be used. An ejected server cannot be used, whatever the state of this connection.
    pub async fn ensure_connected(&mut self) -> Result<(), Down> {
        if self.health.is_ejected(self.index) {
            let down = Down::Ejected(self.health.reason(self.index));
            self.drop_connection(down.clone());
            return Err(down);
        }
        if self.stream.is_some() {
            return Ok(());
        }
        let restored = self.health.restores(self.index) != self.restores_seen;
        if !restored && self.retry_at.is_some_and(|at| Instant::now() < at) {
            return Err(self.down.clone());
        }
        let connector = self.health.connector(self.index);
        let attempt = tokio::time::timeout(self.connect_timeout, connector.connect());
        match attempt.await {
            Ok(Ok(stream)) => {
                if self.retry_at.is_some() {
                    info!(worker = self.worker, server = %self.addr, "reconnected to server");
                }
                self.stream = Some(stream);
                self.retry_at = None;
                self.backoff = BACKOFF_INITIAL;
                // Replies parsed before the failure still belong to requests of the
                // current batch; only the unparsed remainder of the old stream goes.
                self.rbuf.truncate(self.parsed);
                Ok(())
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
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(self.backoff_max);
        self.restores_seen = self.health.restores(self.index);
        self.health
            .report_failure(self.index, kind, &down.to_string());
        self.down = down.clone();
        down
    }

    /// Marks the server down after an error on an established connection and reports
    /// it. Replies already parsed for the current request stay readable until
    /// `finish_request`.
    pub fn fail(&mut self, kind: FailureKind, down: Down) {
        if self.stream.take().is_some() {
            warn!(worker = self.worker, server = %self.addr, reason = %down,
                  "server connection failed; reconnecting with backoff");
        }
        self.wbuf.clear();
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
        self.wbuf.clear();
        self.down = down;
    }

    /// An answer arrived: the server is alive.
    pub fn answered(&self) {
        self.health.report_success(self.index);
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

    /// Whether the connection holds reply bytes beyond those of the current requests.
    pub fn has_unasked_bytes(&self) -> bool {
        self.stream.is_some() && self.parsed < self.rbuf.len()
    }

    /// Sends the composed messages. A connection the server closed while it sat idle
    /// would swallow them, so it is checked first and replaced; a write that fails on a
    /// connection used before is retried once on a fresh one (a write error means the
    /// kernel refused the bytes: the server did not get the request).
    pub async fn send(&mut self) -> Result<(), Down> {
        if let Some(end) = self.closed_while_idle() {
            self.drop_connection(Down::Idle(end));
            self.reconnect_keeping_wbuf().await?;
        }
        let Some(stream) = self.stream.as_mut() else {
            self.wbuf.clear();
            return Err(self.down.clone());
        };
        if let Err(first) = write_flushed(stream, &self.wbuf).await {
            info!(worker = self.worker, server = %self.addr, error = %first,
                  "write failed; retrying once on a fresh connection");
            self.drop_connection(Down::WriteRetried);
            self.reconnect_keeping_wbuf().await?;
            let stream = self.stream.as_mut().expect("just connected");
            if let Err(e) = write_flushed(stream, &self.wbuf).await {
                let down = Down::WriteFailed(e.to_string());
                self.fail(FailureKind::Connection, down.clone());
                return Err(down);
            }
        }
        self.wbuf.clear();
        Ok(())
    }

    async fn reconnect_keeping_wbuf(&mut self) -> Result<(), Down> {
        let pending = std::mem::take(&mut self.wbuf);
        let connected = self.ensure_connected().await;
        self.wbuf = pending;
        if connected.is_err() {
            self.wbuf.clear();
        }
        connected
    }

    /// Why this connection must go, if the server closed (or reset) it or sent bytes
    /// while no reply was owed on it. Checked without waiting.
    fn closed_while_idle(&mut self) -> Option<IdleEnd> {
        if self.stream.is_none() || self.parsed < self.rbuf.len() {
            return None;
        }
        let mut cx = Context::from_waker(std::task::Waker::noop());
        match self.poll_idle_closed(&mut cx) {
            Poll::Ready(end) => Some(end),
            Poll::Pending => None,
        }
    }

    /// Reads more reply bytes; `Ready(Err)` says why reading stopped. A reply longer than
    /// --max-reply-bytes, or bytes the memory budget cannot hold, stop it too: a proxy's
    /// memory must not be what one request asks for.
    ///
    /// Goes through `AsyncRead`, which clears the socket's readiness after a short read,
    /// so a drained socket costs no extra `recv` returning EAGAIN.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), FillError>> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(Err(FillError::Connection(self.down.clone())));
        };
        if self.rbuf.len() - self.parsed > self.max_reply {
            return Poll::Ready(Err(FillError::TooLarge));
        }
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        match tokio_util::io::poll_read_buf(Pin::new(stream), cx, &mut self.rbuf) {
            Poll::Ready(Ok(0)) => Poll::Ready(Err(FillError::Connection(Down::Closed))),
            Poll::Ready(Ok(_)) => {
                crate::busy_poll::touch();
                // The buffer's capacity, not its length: that is what the allocator holds.
                if self.charge.resize(self.rbuf.capacity()) {
                    Poll::Ready(Ok(()))
                } else {
                    Poll::Ready(Err(FillError::OutOfMemory))
                }
            }
            Poll::Ready(Err(e)) => {
                Poll::Ready(Err(FillError::Connection(Down::ReadFailed(e.to_string()))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Drops the current request's replies from the buffer.
    pub fn finish_request(&mut self) {
        if self.stream.is_some() {
            self.rbuf.advance(self.parsed);
        } else {
            self.rbuf.clear();
        }
        self.parsed = 0;
        // A large reply's buffer goes back to the allocator, not just to the budget.
        if self.rbuf.is_empty() && self.rbuf.capacity() > RBUF_KEEP {
            self.rbuf = BytesMut::with_capacity(16 * 1024);
        }
        self.charge.force_resize(if self.rbuf.is_empty() {
            0
        } else {
            self.rbuf.capacity()
        });
    }
}

/// Writes `buf` and flushes: a TLS stream may hold records back until flushed.
async fn write_flushed(stream: &mut ServerStream, buf: &[u8]) -> std::io::Result<()> {
    stream.write_all(buf).await?;
    stream.flush().await
}
