//! One worker's connection to one memcached server, with reconnection and backoff.
//!
//! A failed connection is dropped (a half-read reply cannot be resynchronised) and the
//! server counts as down until its retry time; the next request that needs it after that
//! reconnects. Each failure doubles the wait, up to the configured maximum.

use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tracing::{info, warn};

use crate::config::BACKOFF_INITIAL;

pub struct Backend {
    pub worker: usize,
    pub addr: SocketAddr,
    stream: Option<TcpStream>,
    /// Replies read from the server; `parsed` bytes of it belong to the current request.
    pub rbuf: BytesMut,
    pub parsed: usize,
    /// Messages composed for the server and not yet sent.
    pub wbuf: BytesMut,
    backoff: Duration,
    retry_at: Option<Instant>,
    /// Why the server is down, for the SERVER_ERROR line.
    reason: String,
    connect_timeout: Duration,
    backoff_max: Duration,
}

impl Backend {
    pub fn new(
        worker: usize,
        addr: SocketAddr,
        connect_timeout: Duration,
        backoff_max: Duration,
    ) -> Self {
        Backend {
            worker,
            addr,
            stream: None,
            rbuf: BytesMut::with_capacity(16 * 1024),
            parsed: 0,
            wbuf: BytesMut::with_capacity(4 * 1024),
            backoff: BACKOFF_INITIAL,
            retry_at: None,
            reason: String::from("not connected yet"),
            connect_timeout,
            backoff_max,
        }
    }

    pub fn is_up(&self) -> bool {
        self.stream.is_some()
    }

    pub fn reason(&self) -> &str {
        &self.reason
    }

    /// Connects if down and the retry time has come; true if the server can be used.
    pub async fn ensure_connected(&mut self) -> bool {
        if self.stream.is_some() {
            return true;
        }
        if self.retry_at.is_some_and(|at| Instant::now() < at) {
            return false;
        }
        let attempt = tokio::time::timeout(self.connect_timeout, TcpStream::connect(self.addr));
        match attempt.await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                if self.retry_at.is_some() {
                    info!(worker = self.worker, server = %self.addr, "reconnected to server");
                }
                self.stream = Some(stream);
                self.retry_at = None;
                self.backoff = BACKOFF_INITIAL;
                // Replies parsed before the failure still belong to requests of the
                // current batch; only the unparsed remainder of the old stream goes.
                self.rbuf.truncate(self.parsed);
                true
            }
            Ok(Err(e)) => {
                self.schedule_retry(format!("connect failed: {e}"));
                false
            }
            Err(_) => {
                self.schedule_retry(format!(
                    "connect timed out after {} ms",
                    self.connect_timeout.as_millis()
                ));
                false
            }
        }
    }

    fn schedule_retry(&mut self, reason: String) {
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(self.backoff_max);
        self.reason = reason;
    }

    /// Marks the server down after an error on an established connection. Replies
    /// already parsed for the current request stay readable until `finish_request`.
    pub fn fail(&mut self, reason: impl Into<String>) {
        let reason = reason.into();
        if self.stream.take().is_some() {
            warn!(worker = self.worker, server = %self.addr, %reason,
                  "server connection failed; reconnecting with backoff");
        }
        self.wbuf.clear();
        self.schedule_retry(reason);
    }

    /// Sends the composed messages.
    pub async fn send(&mut self) -> Result<(), ()> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(());
        };
        let result = stream.write_all(&self.wbuf).await;
        self.wbuf.clear();
        result.map_err(|e| self.fail(format!("write failed: {e}")))
    }

    /// Reads more reply bytes; `Ready(Err)` carries why the connection is unusable.
    ///
    /// Goes through `AsyncRead`, which clears the socket's readiness after a short read,
    /// so a drained socket costs no extra `recv` returning EAGAIN.
    pub fn poll_fill(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), String>> {
        let Some(stream) = self.stream.as_mut() else {
            return Poll::Ready(Err(self.reason.clone()));
        };
        if self.rbuf.capacity() - self.rbuf.len() < 4096 {
            self.rbuf.reserve(16 * 1024);
        }
        match tokio_util::io::poll_read_buf(Pin::new(stream), cx, &mut self.rbuf) {
            Poll::Ready(Ok(0)) => Poll::Ready(Err("server closed the connection".into())),
            Poll::Ready(Ok(_)) => Poll::Ready(Ok(())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(format!("read failed: {e}"))),
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
    }
}
