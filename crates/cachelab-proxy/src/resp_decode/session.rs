//! The commands a Redis client's session answers here, as twemproxy answers them:
//! `AUTH` against the pool's password, `PING`, `ECHO` and `SELECT` of the pool's
//! database, and the error lines of these answers.

use cachelab_protocol::resp::{put_bulk, Command};
use thiserror::Error;

use super::{RespDecoder, RespStep};
use crate::routing::plan::Pool;
use crate::routing::redis::commands::Local;

/// Replies of the proxy's own that are not about a command's routing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SessionError {
    /// twemproxy's text, before a pool's password was given.
    #[error("NOAUTH Authentication required.")]
    NoAuth,
    #[error("ERR invalid password")]
    InvalidPassword,
    /// Redis's text when a client authenticates to a server without a password.
    #[error("ERR Client sent AUTH, but no password is set")]
    NoPasswordSet,
    #[error("ERR invalid DB index")]
    InvalidDb,
    /// The servers are on the pool's database; another one would need a connection of
    /// its own on every server.
    #[error("ERR SELECT {asked}: this pool serves database {served} only")]
    OtherDb { asked: String, served: u32 },
    #[error("ERR Protocol error: command larger than {0} bytes")]
    TooLarge(usize),
}

impl SessionError {
    /// The reply line, CR and LF in the text turned into spaces.
    pub fn reply_line(&self) -> Vec<u8> {
        let mut line = b"-".to_vec();
        line.extend(self.to_string().bytes().map(|b| match b {
            b'\r' | b'\n' => b' ',
            other => other,
        }));
        line.extend_from_slice(b"\r\n");
        line
    }
}

impl RespDecoder {
    /// `AUTH [user] password` against the pool's password; a wrong one leaves the client
    /// unauthenticated (it may have been authenticated before).
    pub(super) fn auth(&mut self, command: &Command<'_>, pool: &Pool, len: usize) -> RespStep {
        let given = command.args().last().map(|a| &a[..]).unwrap_or_default();
        let user_ok = command.args().len() == 2 || command.arg(1) == Some(b"default");
        let result = match &pool.redis_auth {
            None => Err(SessionError::NoPasswordSet),
            Some(password) if user_ok && password.as_bytes() == given => Ok(()),
            Some(_) => Err(SessionError::InvalidPassword),
        };
        self.authenticated = result.as_ref().ok().and(pool.redis_auth.clone());
        match result {
            Ok(()) => RespStep::Answer {
                len,
                reply: b"+OK\r\n".to_vec(),
                close: false,
                error: false,
            },
            Err(e) => RespStep::Answer {
                len,
                reply: e.reply_line(),
                close: false,
                error: true,
            },
        }
    }
}

/// `PING`, `ECHO` and `SELECT`, answered as twemproxy answers them.
pub(super) fn answer_local(
    local: Local,
    command: &Command<'_>,
    pool: &Pool,
) -> Result<Vec<u8>, SessionError> {
    let mut out = Vec::new();
    match local {
        Local::Ping => match command.arg(1) {
            None => out.extend_from_slice(b"+PONG\r\n"),
            Some(message) => put_bulk(&mut out, message),
        },
        Local::Echo => put_bulk(&mut out, command.arg(1).unwrap_or_default()),
        Local::Select => {
            let asked = command.arg(1).unwrap_or_default();
            let db: u32 = std::str::from_utf8(asked)
                .ok()
                .and_then(|t| t.parse().ok())
                .ok_or(SessionError::InvalidDb)?;
            if db != pool.redis_db {
                return Err(SessionError::OtherDb {
                    asked: db.to_string(),
                    served: pool.redis_db,
                });
            }
            out.extend_from_slice(b"+OK\r\n");
        }
        Local::Quit | Local::Auth | Local::Info => {
            unreachable!("answered by the decoder's step")
        }
    }
    Ok(out)
}
