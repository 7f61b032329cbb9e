//! The commands a Redis client's session answers here, as twemproxy answers them:
//! `AUTH` against the pool's password, `PING`, `ECHO` and `SELECT` of the pool's
//! database, and the error lines of these answers.

use cachelab_protocol::resp::{put_bulk, string2ll, Command};
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
    /// Redis 7's text when a client gives a password to a server without one.
    #[error(
        "ERR AUTH <password> called without any password configured for the default \
         user. Are you sure your configuration is correct?"
    )]
    NoPasswordSet,
    /// Redis 7's text for a user other than `default` where none is configured.
    #[error("WRONGPASS invalid username-password pair or user is disabled.")]
    WrongPass,
    #[error("ERR syntax error")]
    Syntax,
    /// Redis's `getIntFromObjectOrReply` texts, then `selectDb`'s.
    #[error("ERR value is not an integer or out of range")]
    NotAnInteger,
    #[error("ERR value is out of range, value must between -2147483648 and 2147483647")]
    NotAnInt,
    #[error("ERR DB index is out of range")]
    DbOutOfRange,
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
            _ if command.args().len() > 3 => Err(SessionError::Syntax),
            // As Redis 7 without a password: its `default` user takes any password.
            None if command.args().len() == 2 => Err(SessionError::NoPasswordSet),
            None if user_ok => Ok(()),
            None => Err(SessionError::WrongPass),
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
            let db = string2ll(asked).ok_or(SessionError::NotAnInteger)?;
            let db = i32::try_from(db).map_err(|_| SessionError::NotAnInt)?;
            let db = u32::try_from(db).map_err(|_| SessionError::DbOutOfRange)?;
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
