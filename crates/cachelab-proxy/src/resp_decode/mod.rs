//! The net layer's decoding step for a Redis pool's clients: bytes in, one of a routed
//! command (with its route and its arguments' spans), a local answer, or a protocol
//! error out. Pure: the connection task owns the buffer and does the I/O.
//!
//! Bounds are the memcached side's: a bulk string longer than `--max-value-size`, or a
//! command longer than `--max-line-length` plus `--max-value-size`, is a protocol error.
//! A protocol error is answered `-ERR Protocol error: ...` and the connection closes, as
//! Redis closes it: after a torn frame nothing can be trusted to be in step. Every other
//! error (an unknown or refused command, a wrong argument count, keys on two servers,
//! `AUTH` failures) answers one `-ERR` (or `-NOAUTH`) line and leaves the connection
//! usable.

use cachelab_protocol::resp::{
    RequestScan, RespLimits, RespParseError, DEFAULT_MAX_ARGS, MAX_INLINE_LEN,
};
use cachelab_protocol::Limits;

use crate::metrics::OpKind;
use crate::routing::plan::Pool;
use crate::routing::redis::commands::{classify, Kind, Local};
use crate::routing::redis::plan::Route;
use crate::routing::redis::split::Groups;
use crate::routing::spans::KeySpans;

mod forward;
mod session;

use forward::forward;
use session::answer_local;
pub use session::SessionError;

/// One decoding step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespStep {
    /// Not enough bytes for a command; read more.
    Incomplete,
    /// An empty command of `len` bytes: Redis skips it without a reply.
    Skipped(usize),
    /// A protocol error: send `reply`, then close the connection.
    Fatal { reply: Vec<u8> },
    /// A command of `len` bytes answered here with `reply`; with `close`, the connection
    /// closes after it (`QUIT`).
    Answer {
        len: usize,
        reply: Vec<u8>,
        close: bool,
        /// The answer is an error line (counted as a bad request).
        error: bool,
    },
    /// `INFO [section]` of `len` bytes: answered with the proxy's own counters.
    Info { len: usize, section: Option<String> },
    /// A command of `len` bytes for the servers.
    Forward { len: usize, forward: RespForward },
}

/// A command to forward: how it is routed and counted, and where its arguments are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RespForward {
    pub route: Route,
    pub op: OpKind,
    /// Keys, for the statistics (an `MGET`'s hits and misses).
    pub keys: u32,
    /// The spans of every argument (the name first) in the frame the servers get.
    pub args: KeySpans,
    /// An inline command, composed as the array of bulk strings servers are sent; None
    /// when the client sent an array, which goes on as it came.
    pub composed: Option<Vec<u8>>,
}

/// The per-connection decoder: whether the client has given the pool's password, and
/// how far the request at the front of the buffer was checked (so an array arriving
/// one argument per read is not read again from its start on every read).
#[derive(Debug, Default)]
pub struct RespDecoder {
    /// The pool password the client gave (a reload that changes the password asks
    /// for the new one: the client is no longer authenticated).
    authenticated: Option<String>,
    groups: Groups,
    scan: RequestScan,
}

impl RespDecoder {
    /// The parser's limits from the proxy's (`--max-value-size` bounds a bulk string).
    pub fn limits(limits: &Limits) -> RespLimits {
        RespLimits {
            max_args: DEFAULT_MAX_ARGS,
            max_bulk_len: limits.max_value_len,
            max_inline_len: MAX_INLINE_LEN,
        }
    }

    /// Decodes the request at the front of `buf`. Until a step other than
    /// [`RespStep::Incomplete`] is returned, every call must get the same bytes as the
    /// last one plus what arrived since.
    pub fn step(&mut self, buf: &[u8], limits: &Limits, pool: &Pool) -> RespStep {
        let (command, len) = match self.scan.parse(buf, &Self::limits(limits)) {
            Ok(parsed) => parsed,
            Err(RespParseError::Incomplete) => {
                let most = limits.max_line_len.saturating_add(limits.max_value_len);
                if buf.len() > most {
                    return RespStep::Fatal {
                        reply: SessionError::TooLarge(most).reply_line(),
                    };
                }
                return RespStep::Incomplete;
            }
            Err(RespParseError::Invalid(invalid)) => {
                let mut reply = Vec::new();
                invalid.error.put_reply(&mut reply);
                return RespStep::Fatal { reply };
            }
        };
        if command.is_empty() {
            return RespStep::Skipped(len);
        }
        let error = |e: Vec<u8>| RespStep::Answer {
            len,
            reply: e,
            close: false,
            error: true,
        };
        let kind = match classify(&command) {
            Ok(kind) => kind,
            Err(e) => return error(e.reply_line()),
        };
        let locked = pool.redis_auth.is_some() && self.authenticated != pool.redis_auth;
        match kind {
            Kind::Local(Local::Auth) => self.auth(&command, pool, len),
            Kind::Local(Local::Quit) => RespStep::Answer {
                len,
                reply: b"+OK\r\n".to_vec(),
                close: true,
                error: false,
            },
            _ if locked => error(SessionError::NoAuth.reply_line()),
            Kind::Local(Local::Info) => RespStep::Info {
                len,
                section: command
                    .arg(1)
                    .map(|s| String::from_utf8_lossy(s).to_ascii_lowercase()),
            },
            Kind::Local(local) => match answer_local(local, &command, pool) {
                Ok(reply) => RespStep::Answer {
                    len,
                    reply,
                    close: false,
                    error: false,
                },
                Err(e) => error(e.reply_line()),
            },
            Kind::Routed(spec) => match forward(spec, &command, buf, pool, &mut self.groups) {
                Ok(forward) => RespStep::Forward { len, forward },
                Err(e) => error(e.reply_line()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forward::NoneEjected;
    use super::*;
    use crate::routing::hash::Hash;
    use crate::routing::plan::{Mode, ReadPolicy};
    use crate::routing::redis::split::key_server;
    use crate::routing::ring::Distribution;
    use crate::routing::test_support::servers_with_ids;
    use crate::routing::Protocol;
    use std::time::Duration;

    fn pool(mode: Mode, auth: Option<&str>, db: u32) -> Pool {
        let mut pool = Pool::new(
            "r".into(),
            servers_with_ids(3, 7000, 0),
            mode,
            Hash::Fnv1a64,
            None,
            Distribution::Ketama,
            false,
            ReadPolicy::Primary,
            Duration::from_secs(1),
        );
        pool.protocol = Protocol::Redis;
        pool.redis_auth = auth.map(str::to_owned);
        pool.redis_db = db;
        pool
    }

    fn replicate() -> Pool {
        pool(
            Mode::Replicate {
                split_multiget: false,
            },
            None,
            0,
        )
    }

    /// Every step over `input`, as the connection would take them.
    fn steps(decoder: &mut RespDecoder, input: &[u8], pool: &Pool) -> Vec<RespStep> {
        let limits = Limits {
            max_value_len: 16,
            max_line_len: 64,
            ..Limits::default()
        };
        let mut pos = 0;
        let mut out = Vec::new();
        loop {
            let step = decoder.step(&input[pos..], &limits, pool);
            let advance = match &step {
                RespStep::Incomplete | RespStep::Fatal { .. } => None,
                RespStep::Skipped(len)
                | RespStep::Info { len, .. }
                | RespStep::Answer { len, .. }
                | RespStep::Forward { len, .. } => Some(*len),
            };
            out.push(step);
            match advance {
                Some(n) => pos += n,
                None => return out,
            }
        }
    }

    fn answer(step: &RespStep) -> String {
        match step {
            RespStep::Answer { reply, .. } | RespStep::Fatal { reply } => {
                String::from_utf8(reply.clone()).unwrap()
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_array_command_goes_on_as_it_came_with_its_arguments_found() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2\r\nvv\r\n";
        let s = steps(&mut RespDecoder::default(), input, &replicate());
        let RespStep::Forward { len, forward } = &s[0] else {
            panic!("{s:?}")
        };
        assert_eq!(*len, input.len());
        assert_eq!(forward.composed, None);
        assert_eq!(forward.op, OpKind::Set);
        assert_eq!(forward.args.get(input, 1), Some(&b"k"[..]));
        assert_eq!(forward.args.get(input, 2), Some(&b"vv"[..]));
        assert_eq!(s[1], RespStep::Incomplete);
    }

    #[test]
    fn an_inline_command_is_sent_on_as_an_array() {
        let s = steps(&mut RespDecoder::default(), b"mget a b\r\n", &replicate());
        let RespStep::Forward { forward, .. } = &s[0] else {
            panic!("{s:?}")
        };
        let frame = forward.composed.as_ref().unwrap();
        assert_eq!(frame, b"*3\r\n$4\r\nmget\r\n$1\r\na\r\n$1\r\nb\r\n");
        assert_eq!(forward.args.get(frame, 2), Some(&b"b"[..]));
        assert_eq!((forward.op, forward.keys), (OpKind::MultiGet, 2));
    }

    #[test]
    fn ping_echo_select_and_quit_are_answered_here() {
        let p = pool(Mode::Shard { replicas: 1 }, None, 2);
        let s = steps(
            &mut RespDecoder::default(),
            b"PING\r\nPING hi\r\nECHO yo\r\nSELECT 2\r\nSELECT 0\r\nSELECT x\r\nQUIT\r\n",
            &p,
        );
        let answers: Vec<String> = s[..7].iter().map(answer).collect();
        assert_eq!(
            answers,
            [
                "+PONG\r\n",
                "$2\r\nhi\r\n",
                "$2\r\nyo\r\n",
                "+OK\r\n",
                "-ERR SELECT 0: this pool serves database 2 only\r\n",
                "-ERR value is not an integer or out of range\r\n",
                "+OK\r\n"
            ]
        );
        assert!(matches!(s[6], RespStep::Answer { close: true, .. }));
        // Redis's texts: a strict integer, within an int, not negative.
        let bad = steps(
            &mut RespDecoder::default(),
            b"SELECT 02\r\nSELECT +2\r\nSELECT -1\r\nSELECT 99999999999\r\n",
            &p,
        );
        let answers: Vec<String> = bad[..4].iter().map(answer).collect();
        assert_eq!(
            answers,
            [
                "-ERR value is not an integer or out of range\r\n",
                "-ERR value is not an integer or out of range\r\n",
                "-ERR DB index is out of range\r\n",
                "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
            ]
        );
        assert!(matches!(
            s[4],
            RespStep::Answer {
                close: false,
                error: true,
                ..
            }
        ));
    }

    #[test]
    fn refused_and_unknown_commands_answer_an_error_and_decoding_goes_on() {
        let s = steps(
            &mut RespDecoder::default(),
            b"MULTI\r\nFOO\r\nGET\r\nGET k\r\n",
            &replicate(),
        );
        assert!(answer(&s[0]).starts_with("-ERR MULTI is not supported by cachelab-proxy"));
        assert!(answer(&s[1]).starts_with("-ERR unknown command 'FOO'"));
        assert_eq!(
            answer(&s[2]),
            "-ERR wrong number of arguments for 'get' command\r\n"
        );
        assert!(matches!(s[3], RespStep::Forward { .. }));
    }

    #[test]
    fn a_protocol_error_answers_redis_s_text_and_ends_the_connection() {
        let s = steps(&mut RespDecoder::default(), b"*1\r\n:3\r\n", &replicate());
        assert_eq!(
            s,
            [RespStep::Fatal {
                reply: b"-ERR Protocol error: expected '$', got ':'\r\n".to_vec()
            }]
        );
    }

    #[test]
    fn bulk_strings_and_commands_are_bounded_by_the_proxy_s_limits() {
        // --max-value-size 16: a 17-byte bulk string is refused as Redis refuses one
        let s = steps(
            &mut RespDecoder::default(),
            b"*2\r\n$3\r\nGET\r\n$17\r\n",
            &replicate(),
        );
        assert_eq!(
            answer(&s[0]),
            "-ERR Protocol error: invalid bulk length\r\n"
        );
        // a command still incomplete past 64 + 16 bytes
        let mut big = b"*100\r\n".to_vec();
        for _ in 0..20 {
            big.extend_from_slice(b"$1\r\na\r\n");
        }
        let s = steps(&mut RespDecoder::default(), &big, &replicate());
        assert_eq!(
            answer(&s[0]),
            "-ERR Protocol error: command larger than 80 bytes\r\n"
        );
    }

    #[test]
    fn a_pool_with_a_password_asks_for_it_first() {
        let p = pool(
            Mode::Replicate {
                split_multiget: false,
            },
            Some("pw"),
            0,
        );
        let mut d = RespDecoder::default();
        let s = steps(
            &mut d,
            b"GET k\r\nPING\r\nAUTH nope\r\nAUTH pw\r\nGET k\r\nAUTH default pw\r\n",
            &p,
        );
        assert_eq!(answer(&s[0]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(answer(&s[1]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(answer(&s[2]), "-ERR invalid password\r\n");
        assert_eq!(answer(&s[3]), "+OK\r\n");
        assert!(matches!(s[4], RespStep::Forward { .. }));
        assert_eq!(answer(&s[5]), "+OK\r\n");
        let open = steps(&mut RespDecoder::default(), b"AUTH pw\r\n", &replicate());
        assert_eq!(
            answer(&open[0]),
            "-ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?\r\n"
        );
        let open = steps(
            &mut RespDecoder::default(),
            b"AUTH default x\r\nAUTH bob x\r\nAUTH a b c\r\n",
            &replicate(),
        );
        let answers: Vec<String> = open[..3].iter().map(answer).collect();
        assert_eq!(
            answers,
            [
                "+OK\r\n",
                "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
                "-ERR syntax error\r\n"
            ]
        );
    }

    #[test]
    fn a_reload_that_changes_the_password_asks_for_the_new_one() {
        let mode = Mode::Replicate {
            split_multiget: false,
        };
        let mut d = RespDecoder::default();
        let s = steps(
            &mut d,
            b"AUTH old\r\nGET k\r\n",
            &pool(mode, Some("old"), 0),
        );
        assert!(matches!(s[1], RespStep::Forward { .. }));
        // The same connection after a reload to another password, then to none.
        let s = steps(
            &mut d,
            b"GET k\r\nAUTH new\r\nGET k\r\n",
            &pool(mode, Some("new"), 0),
        );
        assert_eq!(answer(&s[0]), "-NOAUTH Authentication required.\r\n");
        assert_eq!(answer(&s[1]), "+OK\r\n");
        assert!(matches!(s[2], RespStep::Forward { .. }));
        let s = steps(&mut d, b"GET k\r\n", &pool(mode, None, 0));
        assert!(matches!(s[0], RespStep::Forward { .. }));
    }

    #[test]
    fn a_shard_command_that_cannot_split_is_refused_when_its_keys_are_apart() {
        let p = pool(Mode::Shard { replicas: 1 }, None, 0);
        let home = key_server(&p, b"k0", &NoneEjected);
        let other = (1..)
            .map(|i| format!("k{i}"))
            .find(|k| key_server(&p, k.as_bytes(), &NoneEjected) != home)
            .unwrap();
        let input = format!("SUNION k0 {other}\r\nMGET k0 {other}\r\n");
        let s = steps(&mut RespDecoder::default(), input.as_bytes(), &p);
        assert_eq!(
            answer(&s[0]),
            "-ERR SUNION keys are on different servers of the pool: give them one hash tag\r\n"
        );
        assert!(matches!(s[1], RespStep::Forward { .. }), "MGET splits");
        // in a replicate pool every server has every key
        let s = steps(&mut RespDecoder::default(), input.as_bytes(), &replicate());
        assert!(matches!(s[0], RespStep::Forward { .. }));
    }

    #[test]
    fn info_is_left_to_the_connection_and_empty_commands_are_skipped() {
        let s = steps(
            &mut RespDecoder::default(),
            b"*0\r\nINFO\r\nINFO Stats\r\n",
            &replicate(),
        );
        assert_eq!(s[0], RespStep::Skipped(4));
        assert_eq!(
            s[1],
            RespStep::Info {
                len: 6,
                section: None
            }
        );
        assert_eq!(
            s[2],
            RespStep::Info {
                len: 12,
                section: Some("stats".into())
            }
        );
    }
}
