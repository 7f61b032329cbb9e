//! Why a worker's connection to a server cannot be used: one type for the log, the
//! shared health registry and the client's `SERVER_ERROR` line, so each reason is
//! written once and a request's error line names it.

use std::fmt::Write;

use bytes::BytesMut;
use thiserror::Error;

use crate::endpoint::Endpoint;

/// The reason a server connection is down or was closed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Down {
    #[error("not connected yet")]
    NotConnectedYet,
    /// Ejected by the shared health registry, for the reason it gives.
    #[error("{0}")]
    Ejected(String),
    #[error("server ejected while we waited")]
    EjectedWhileWaiting,
    #[error("{0}")]
    Connect(String),
    #[error("connect timed out after {0} ms")]
    ConnectTimeout(u128),
    #[error("no reply within {0} ms")]
    NoReply(u128),
    /// A write failed on a connection used before; it is retried on a fresh one.
    #[error("write failed")]
    WriteRetried,
    #[error("write failed: {0}")]
    WriteFailed(String),
    #[error("server closed the connection")]
    Closed,
    #[error("read failed: {0}")]
    ReadFailed(String),
    #[error("{}", .0.reason())]
    Idle(IdleEnd),
    /// A reply too large for one request, or beyond the memory budget: the rest of it
    /// is not wanted, so the connection is out of step (the server itself is fine).
    #[error("reply refused (too large or out of memory)")]
    ReplyRefused,
    #[error("reply out of step ({})", .0.reason())]
    OutOfStep(OutOfStep),
}

/// Why an idle server connection must be closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleEnd {
    /// The server closed it (a restart).
    Closed,
    /// The server sent bytes while no request was out: they answer nothing we sent.
    UnaskedBytes,
    Failed,
}

impl IdleEnd {
    pub fn reason(self) -> &'static str {
        match self {
            IdleEnd::Closed => "server closed the idle connection",
            IdleEnd::UnaskedBytes => "server sent bytes on an idle connection",
            IdleEnd::Failed => "idle connection failed",
        }
    }
}

/// How a reply showed that the server and the proxy no longer agree on which reply
/// answers which request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutOfStep {
    /// `ERROR`, or `CLIENT_ERROR` to a request with a data block.
    ReadDifferently,
    /// A reply that does not answer the request (values for keys not asked for, or
    /// not a reply at all).
    Foreign,
    /// More replies than requests.
    Extra,
}

impl OutOfStep {
    pub fn reason(self) -> &'static str {
        match self {
            OutOfStep::ReadDifferently => "the server read the request differently",
            OutOfStep::Foreign => "it does not answer the request",
            OutOfStep::Extra => "more replies than requests",
        }
    }
}

impl Down {
    /// Writes `SERVER_ERROR server <addr> unavailable: <reason>\r\n`; a reason that
    /// carries a line break (an OS error text, say) cannot break the line.
    pub fn compose_reply(&self, addr: &Endpoint, out: &mut BytesMut) {
        self.compose_line("SERVER_ERROR", addr, out)
    }

    /// The same for a Redis client: `-ERR server <addr> unavailable: <reason>\r\n`.
    pub fn compose_resp_reply(&self, addr: &Endpoint, out: &mut BytesMut) {
        self.compose_line("-ERR", addr, out)
    }

    fn compose_line(&self, prefix: &str, addr: &Endpoint, out: &mut BytesMut) {
        let start = out.len();
        // Writing into a BytesMut cannot fail.
        let _ = write!(out, "{prefix} server {addr} unavailable: {self}");
        for b in &mut out[start..] {
            if *b == b'\r' || *b == b'\n' {
                *b = b' ';
            }
        }
        out.extend_from_slice(b"\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> Endpoint {
        let a: std::net::SocketAddr = "127.0.0.1:11211".parse().unwrap();
        a.into()
    }

    fn line(down: &Down) -> String {
        let mut out = BytesMut::new();
        down.compose_reply(&addr(), &mut out);
        String::from_utf8(out.to_vec()).unwrap()
    }

    #[test]
    fn the_error_line_names_the_server_and_the_reason() {
        assert_eq!(
            line(&Down::NoReply(1000)),
            "SERVER_ERROR server 127.0.0.1:11211 unavailable: no reply within 1000 ms\r\n"
        );
        assert_eq!(
            line(&Down::OutOfStep(OutOfStep::Extra)),
            "SERVER_ERROR server 127.0.0.1:11211 unavailable: reply out of step (more \
             replies than requests)\r\n"
        );
    }

    #[test]
    fn a_redis_client_gets_the_reason_as_an_error_reply() {
        let mut out = BytesMut::new();
        Down::Connect("refused\r\n+OK".into()).compose_resp_reply(&addr(), &mut out);
        assert_eq!(
            &out[..],
            b"-ERR server 127.0.0.1:11211 unavailable: refused  +OK\r\n"
        );
    }

    #[test]
    fn a_reason_with_line_breaks_stays_one_line() {
        let l = line(&Down::Connect("refused\r\nVALUE x 0 1".into()));
        assert_eq!(l.matches("\r\n").count(), 1);
        assert!(l.ends_with("refused  VALUE x 0 1\r\n"), "{l:?}");
    }
}
