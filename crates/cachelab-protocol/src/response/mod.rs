//! Server replies. Parsing a reply takes the kind of request it answers, because the
//! text protocol is not self-describing (`NOT_FOUND` answers a delete, an incr or a touch;
//! a number answers only incr/decr).

mod scan;
mod values;

use bytes::BufMut;

pub use crate::error::ReplyError;
use crate::line::{parse_u64, scan_line, tokens, LineScan};
use crate::request::MetaStatus;
use crate::resp::RespReply;

pub use scan::{ReplyScan, MAX_OPEN_ARRAYS};
pub use values::{compose_value, ValueIter};

/// Longest reply line we accept from a server (a VALUE line holds a 250-byte key and
/// three numbers; STAT lines are shorter still; error lines carry a short reason).
const MAX_REPLY_LINE: usize = 4096;

/// The kind of request a reply answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// get, gets: VALUE blocks then END.
    Values,
    /// set, add, replace, append, prepend, cas.
    Store,
    Delete,
    /// incr, decr: a number or NOT_FOUND.
    Arith,
    Touch,
    /// flush_all, verbosity.
    Ok,
    Version,
    /// STAT lines then END.
    Stats,
    /// A meta command: a two-letter status line, and after `VA` a data block.
    Meta,
    /// A Redis command: any RESP2 reply (RESP is self-describing, so one kind answers
    /// every command; a proxy carrying both protocols keeps one reply pipeline).
    Resp,
}

/// A reply, summarised without copying: the caller relays `buf[..consumed]` or, for
/// values, the `body_len` bytes before the final `END\r\n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Values {
        hits: u32,
        body_len: usize,
    },
    Stats {
        body_len: usize,
    },
    Stored,
    NotStored,
    Exists,
    NotFound,
    Deleted,
    Touched,
    Ok,
    Number(u64),
    Version,
    /// A meta reply: its status (`VA` includes the data block).
    Meta(MetaStatus),
    Error,
    ClientError,
    ServerError,
    /// A RESP2 reply to [`Expect::Resp`], summarised by its type.
    Resp(RespKind),
}

/// What a RESP2 reply is, without its bytes: enough to tell an error, count the hits
/// of a `GET` or `MGET`, and check a split command's parts before merging them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespKind {
    Simple,
    Error,
    Integer(i64),
    /// A bulk string, or the null bulk string (a miss).
    Bulk {
        null: bool,
    },
    /// An array of `len` elements, `nulls` of them null; `len` 0 and null for `*-1`.
    Array {
        len: usize,
        nulls: usize,
        null: bool,
    },
}

impl RespKind {
    /// The summary of a parsed reply.
    pub fn of(reply: &RespReply<'_>) -> RespKind {
        match reply {
            RespReply::Simple(_) => RespKind::Simple,
            RespReply::Error(_) => RespKind::Error,
            RespReply::Integer(n) => RespKind::Integer(*n),
            RespReply::Bulk(b) => RespKind::Bulk { null: b.is_none() },
            RespReply::Array(None) => RespKind::Array {
                len: 0,
                nulls: 0,
                null: true,
            },
            RespReply::Array(Some(e)) => RespKind::Array {
                len: e.len(),
                nulls: e.nulls(),
                null: false,
            },
        }
    }

    /// Values found: 1 for a non-null bulk string, the non-null elements of an array.
    pub fn hits(self) -> u32 {
        match self {
            RespKind::Bulk { null } => u32::from(!null),
            RespKind::Array { len, nulls, .. } => (len - nulls) as u32,
            _ => 0,
        }
    }
}

impl Reply {
    /// The protocol's error lines (as opposed to negative answers such as NOT_FOUND).
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Reply::Error | Reply::ClientError | Reply::ServerError | Reply::Resp(RespKind::Error)
        )
    }
}

/// Parses the reply at the front of `buf` to a request of kind `expect`.
pub fn parse_reply(buf: &[u8], expect: Expect) -> Result<(Reply, usize), ReplyError> {
    if expect == Expect::Resp {
        // Framed, not parsed into a tree: whatever depth or line length Redis sends.
        let mut scan = ReplyScan::new(Expect::Resp);
        return match (scan.advance(buf)?, scan.resp_kind()) {
            (Some(len), Some(kind)) => Ok((Reply::Resp(kind), len)),
            _ => Err(ReplyError::Incomplete),
        };
    }
    let (line, len) = next_line(buf)?;
    if let Some(reply) = error_line(line) {
        return Ok((reply, len));
    }
    let simple = |reply| Ok((reply, len));
    match (expect, line) {
        (Expect::Values, _) => values::parse(buf),
        (Expect::Stats, _) => parse_stats(buf),
        (Expect::Meta, _) => parse_meta(buf, line, len),
        (Expect::Store, b"STORED") => simple(Reply::Stored),
        (Expect::Store, b"NOT_STORED") => simple(Reply::NotStored),
        (Expect::Store, b"EXISTS") => simple(Reply::Exists),
        (Expect::Store | Expect::Delete | Expect::Arith | Expect::Touch, b"NOT_FOUND") => {
            simple(Reply::NotFound)
        }
        (Expect::Delete, b"DELETED") => simple(Reply::Deleted),
        (Expect::Touch, b"TOUCHED") => simple(Reply::Touched),
        (Expect::Ok, b"OK") => simple(Reply::Ok),
        (Expect::Version, _) if line.starts_with(b"VERSION ") => simple(Reply::Version),
        (Expect::Arith, _) => match parse_u64(line) {
            Some(n) => simple(Reply::Number(n)),
            None => Err(ReplyError::Malformed("incr/decr reply is not a number")),
        },
        _ => Err(ReplyError::Malformed("unexpected reply line")),
    }
}

fn next_line(buf: &[u8]) -> Result<(&[u8], usize), ReplyError> {
    match scan_line(buf, MAX_REPLY_LINE) {
        LineScan::Complete(line, len) => Ok((line, len)),
        LineScan::Incomplete => Err(ReplyError::Incomplete),
        LineScan::TooLong => Err(ReplyError::Malformed("reply line too long")),
        LineScan::BareNewline(_) => Err(ReplyError::Malformed("reply line without \\r")),
    }
}

fn error_line(line: &[u8]) -> Option<Reply> {
    if line == b"ERROR" {
        Some(Reply::Error)
    } else if line.starts_with(b"CLIENT_ERROR") {
        Some(Reply::ClientError)
    } else if line.starts_with(b"SERVER_ERROR") {
        Some(Reply::ServerError)
    } else {
        None
    }
}

fn parse_meta(buf: &[u8], line: &[u8], len: usize) -> Result<(Reply, usize), ReplyError> {
    let mut toks = tokens(line);
    let status = toks
        .next()
        .and_then(MetaStatus::from_code)
        .ok_or(ReplyError::Malformed("not a meta reply"))?;
    if status != MetaStatus::Va {
        return Ok((Reply::Meta(status), len));
    }
    let size = toks
        .next()
        .and_then(parse_u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(ReplyError::Malformed("bad length in VA line"))?;
    let end = len
        .checked_add(size)
        .and_then(|e| e.checked_add(2))
        .ok_or(ReplyError::Malformed("value length overflows"))?;
    if buf.len() < end {
        return Err(ReplyError::Incomplete);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(ReplyError::Malformed("value data not terminated by \\r\\n"));
    }
    Ok((Reply::Meta(status), end))
}

fn parse_stats(buf: &[u8]) -> Result<(Reply, usize), ReplyError> {
    let mut pos = 0;
    loop {
        let (line, len) = next_line(&buf[pos..])?;
        if line == b"END" {
            return Ok((Reply::Stats { body_len: pos }, pos + len));
        }
        if !line.starts_with(b"STAT ") {
            return Err(ReplyError::Malformed("stats line without STAT"));
        }
        pos += len;
    }
}

/// Writes one `STAT <name> <value>` line.
pub fn compose_stat(out: &mut impl BufMut, name: &str, value: impl std::fmt::Display) {
    out.put_slice(format!("STAT {name} {value}\r\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_means_different_things_by_request_kind() {
        for expect in [Expect::Store, Expect::Delete, Expect::Arith, Expect::Touch] {
            assert_eq!(
                parse_reply(b"NOT_FOUND\r\n", expect),
                Ok((Reply::NotFound, 11))
            );
        }
        assert!(parse_reply(b"NOT_FOUND\r\n", Expect::Ok).is_err());
    }

    #[test]
    fn storage_replies() {
        for (line, reply) in [
            (&b"STORED\r\n"[..], Reply::Stored),
            (b"NOT_STORED\r\n", Reply::NotStored),
            (b"EXISTS\r\n", Reply::Exists),
        ] {
            assert_eq!(parse_reply(line, Expect::Store), Ok((reply, line.len())));
        }
    }

    #[test]
    fn error_lines_answer_any_request() {
        for expect in [Expect::Values, Expect::Store, Expect::Stats, Expect::Arith] {
            assert_eq!(parse_reply(b"ERROR\r\n", expect), Ok((Reply::Error, 7)));
            assert_eq!(
                parse_reply(b"SERVER_ERROR out of memory\r\n", expect),
                Ok((Reply::ServerError, 28))
            );
            assert_eq!(
                parse_reply(b"CLIENT_ERROR bad data chunk\r\n", expect),
                Ok((Reply::ClientError, 29))
            );
        }
    }

    #[test]
    fn incr_reply_is_a_number() {
        assert_eq!(
            parse_reply(b"43\r\n", Expect::Arith),
            Ok((Reply::Number(43), 4))
        );
        assert!(matches!(
            parse_reply(b"STORED\r\n", Expect::Arith),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn version_and_stats_replies() {
        assert_eq!(
            parse_reply(b"VERSION 1.6.18\r\n", Expect::Version),
            Ok((Reply::Version, 16))
        );
        let stats = b"STAT pid 1\r\nSTAT uptime 2\r\nEND\r\n";
        assert_eq!(
            parse_reply(stats, Expect::Stats),
            Ok((Reply::Stats { body_len: 27 }, stats.len()))
        );
        assert_eq!(
            parse_reply(b"STAT pid 1\r\n", Expect::Stats),
            Err(ReplyError::Incomplete)
        );
    }

    #[test]
    fn meta_replies_are_one_line_or_a_value_block() {
        assert_eq!(
            parse_reply(b"HD O12 kfoo\r\n", Expect::Meta),
            Ok((Reply::Meta(MetaStatus::Hd), 13))
        );
        assert_eq!(
            parse_reply(b"VA 2 f5\r\nhi\r\n", Expect::Meta),
            Ok((Reply::Meta(MetaStatus::Va), 13))
        );
        assert_eq!(
            parse_reply(b"VA 2 f5\r\nh", Expect::Meta),
            Err(ReplyError::Incomplete)
        );
        assert_eq!(
            parse_reply(b"EN\r\n", Expect::Meta),
            Ok((Reply::Meta(MetaStatus::En), 4))
        );
        assert!(parse_reply(b"STORED\r\n", Expect::Meta).is_err());
        assert_eq!(
            parse_reply(b"CLIENT_ERROR invalid flag\r\n", Expect::Meta),
            Ok((Reply::ClientError, 27))
        );
    }

    #[test]
    fn a_resp_reply_is_summarised_by_its_type_and_hits() {
        let cases: [(&[u8], RespKind); 6] = [
            (b"+OK\r\n", RespKind::Simple),
            (b"-ERR x\r\n", RespKind::Error),
            (b":-3\r\n", RespKind::Integer(-3)),
            (b"$-1\r\n", RespKind::Bulk { null: true }),
            (b"$2\r\nhi\r\n", RespKind::Bulk { null: false }),
            (
                b"*3\r\n$1\r\na\r\n$-1\r\n*1\r\n:1\r\n",
                RespKind::Array {
                    len: 3,
                    nulls: 1,
                    null: false,
                },
            ),
        ];
        for (bytes, kind) in cases {
            assert_eq!(
                parse_reply(bytes, Expect::Resp),
                Ok((Reply::Resp(kind), bytes.len()))
            );
        }
        assert_eq!(RespKind::Bulk { null: false }.hits(), 1);
        assert_eq!(cases[5].1.hits(), 2);
        assert!(Reply::Resp(RespKind::Error).is_error());
        assert!(!Reply::Resp(RespKind::Bulk { null: true }).is_error());
        // memcached's error lines are not RESP: a server speaking the wrong protocol
        assert!(parse_reply(b"ERROR\r\n", Expect::Resp).is_err());
        assert_eq!(
            parse_reply(b"$5\r\nab", Expect::Resp),
            Err(ReplyError::Incomplete)
        );
    }

    #[test]
    fn partial_reply_is_incomplete() {
        assert_eq!(
            parse_reply(b"STOR", Expect::Store),
            Err(ReplyError::Incomplete)
        );
        assert_eq!(
            parse_reply(b"", Expect::Values),
            Err(ReplyError::Incomplete)
        );
    }
}
