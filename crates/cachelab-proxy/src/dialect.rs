//! What a server speaks, as a connection to it needs to know: what to send before the
//! first request, how to tell that it was accepted, and how the health probe asks
//! whether the server is alive. Pure: `server_stream` and `health` do the I/O.
//!
//! A memcached server needs nothing before its first request and is probed with
//! `version`. A Redis server of a pool with `redis_auth` or a `redis_db` other than 0
//! gets `AUTH` and `SELECT` on every new connection (as twemproxy sends them), and the
//! connection is used only once both answered `+OK`: a wrong password must fail the
//! connection, not every request sent over it. It is probed with `PING` (after the
//! same greeting), expecting `+PONG`.

use cachelab_protocol::resp::compose_command;
use cachelab_protocol::{parse_resp_reply, ReplyError, RespReply};
use thiserror::Error;

/// A server's protocol and, for Redis, the pool's password and database.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub enum Dialect {
    #[default]
    Memcached,
    Redis {
        auth: Option<String>,
        db: u32,
    },
}

/// Without the password: a dialect is part of what is logged about a server.
impl std::fmt::Debug for Dialect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dialect::Memcached => f.write_str("Memcached"),
            Dialect::Redis { auth, db } => f
                .debug_struct("Redis")
                .field("auth", &auth.as_ref().map(|_| "<set>"))
                .field("db", db)
                .finish(),
        }
    }
}

/// Why a new connection's greeting was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GreetingError {
    /// The server refused `AUTH` or `SELECT`: its error text.
    #[error("{command} refused: {reply}")]
    Refused {
        command: &'static str,
        reply: String,
    },
    #[error("{0} answered with something other than +OK or an error")]
    Unexpected(&'static str),
}

/// Why a probe's answer does not show the server alive.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ProbeError {
    #[error("unexpected answer to {probe}: {answer}")]
    Unexpected { probe: &'static str, answer: String },
}

impl Dialect {
    /// The commands a new connection sends before any request, in order.
    fn greeting_commands(&self) -> Vec<(&'static str, Vec<Vec<u8>>)> {
        let Dialect::Redis { auth, db } = self else {
            return Vec::new();
        };
        let mut commands = Vec::new();
        if let Some(password) = auth {
            commands.push(("AUTH", vec![b"AUTH".to_vec(), password.as_bytes().to_vec()]));
        }
        if *db != 0 {
            commands.push((
                "SELECT",
                vec![b"SELECT".to_vec(), db.to_string().into_bytes()],
            ));
        }
        commands
    }

    /// The bytes a new connection sends before its first request (empty: none).
    pub fn greeting(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for (_, args) in self.greeting_commands() {
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            compose_command(&mut out, &args);
        }
        out
    }

    /// Whether `buf` holds the whole answer to [`Dialect::greeting`]: `Ok(Some(len))`
    /// when every command was accepted (`len` bytes answer them), `Ok(None)` when more
    /// bytes are needed, or why the connection must not be used.
    pub fn check_greeting(&self, buf: &[u8]) -> Result<Option<usize>, GreetingError> {
        let mut pos = 0;
        for (command, _) in self.greeting_commands() {
            match parse_resp_reply(&buf[pos..]) {
                Ok((RespReply::Simple(b"OK"), len)) => pos += len,
                Ok((RespReply::Error(text), _)) => {
                    return Err(GreetingError::Refused {
                        command,
                        reply: String::from_utf8_lossy(text).into_owned(),
                    })
                }
                Ok(_) | Err(ReplyError::Malformed(_)) => {
                    return Err(GreetingError::Unexpected(command))
                }
                Err(ReplyError::Incomplete) => return Ok(None),
            }
        }
        Ok(Some(pos))
    }

    /// The probe's request (sent after the greeting on a fresh connection).
    pub fn probe(&self) -> &'static [u8] {
        match self {
            Dialect::Memcached => b"version\r\n",
            Dialect::Redis { .. } => b"*1\r\n$4\r\nPING\r\n",
        }
    }

    /// Whether `answer` (everything read so far) shows the server alive: `Ok(true)`
    /// yes, `Ok(false)` read more, or why not.
    pub fn probe_answered(&self, answer: &[u8]) -> Result<bool, ProbeError> {
        if !answer.ends_with(b"\r\n") && answer.len() <= 1024 {
            return Ok(false);
        }
        let (probe, good): (&'static str, &[u8]) = match self {
            Dialect::Memcached => ("version", b"VERSION "),
            Dialect::Redis { .. } => ("PING", b"+PONG\r\n"),
        };
        if answer.starts_with(good) {
            Ok(true)
        } else {
            Err(ProbeError::Unexpected {
                probe,
                answer: String::from_utf8_lossy(answer).trim_end().to_owned(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redis(auth: Option<&str>, db: u32) -> Dialect {
        Dialect::Redis {
            auth: auth.map(str::to_owned),
            db,
        }
    }

    #[test]
    fn memcached_and_a_plain_redis_pool_send_nothing_first() {
        assert!(Dialect::Memcached.greeting().is_empty());
        assert!(redis(None, 0).greeting().is_empty());
        assert_eq!(redis(None, 0).check_greeting(b""), Ok(Some(0)));
    }

    #[test]
    fn a_redis_pool_with_a_password_and_a_database_sends_auth_then_select() {
        let d = redis(Some("s3cret"), 2);
        assert_eq!(
            d.greeting(),
            b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n*2\r\n$6\r\nSELECT\r\n$1\r\n2\r\n"
        );
        assert_eq!(d.check_greeting(b"+OK\r\n"), Ok(None));
        assert_eq!(d.check_greeting(b"+OK\r\n+OK\r\n"), Ok(Some(10)));
    }

    #[test]
    fn a_refused_password_fails_the_connection_with_the_server_s_text() {
        let d = redis(Some("wrong"), 0);
        assert_eq!(
            d.check_greeting(b"-WRONGPASS invalid username-password pair\r\n"),
            Err(GreetingError::Refused {
                command: "AUTH",
                reply: "WRONGPASS invalid username-password pair".into()
            })
        );
        let select = redis(None, 99);
        assert!(matches!(
            select.check_greeting(b"-ERR DB index is out of range\r\n"),
            Err(GreetingError::Refused {
                command: "SELECT",
                ..
            })
        ));
        assert_eq!(
            select.check_greeting(b":1\r\n"),
            Err(GreetingError::Unexpected("SELECT"))
        );
    }

    #[test]
    fn probes_ask_each_protocol_its_own_way() {
        assert_eq!(Dialect::Memcached.probe_answered(b"VERSION 1.6"), Ok(false));
        assert_eq!(
            Dialect::Memcached.probe_answered(b"VERSION 1.6\r\n"),
            Ok(true)
        );
        let r = redis(None, 0);
        assert_eq!(r.probe(), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(r.probe_answered(b"+PONG\r\n"), Ok(true));
        assert!(r
            .probe_answered(b"-NOAUTH Authentication required.\r\n")
            .is_err());
        assert!(Dialect::Memcached.probe_answered(b"+PONG\r\n").is_err());
    }
}
