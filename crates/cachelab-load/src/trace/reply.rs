//! What the reply to a replayed trace request means: a read's hit or miss, or an error.
//!
//! A write refused for a reason of the cache's data (add of a key that is there, replace,
//! delete, incr or decr of one that is not: NOT_STORED, EXISTS, NOT_FOUND, Redis's null
//! or 0) is an answer, not an error: a trace replayed against a cache in another state
//! gets such answers. An error is memcached's ERROR, CLIENT_ERROR or SERVER_ERROR, a RESP
//! error, a binary status other than those, or a reply of the wrong kind.

use cachelab_protocol::binary;
use cachelab_protocol::{parse_reply, parse_resp_reply, Reply, ReplyError, RespReply};

use super::compose::expect;
use super::TraceOp;
use crate::config::Protocol;
use crate::workload::Outcome;

const ERROR: Outcome = Outcome {
    hits: 0,
    misses: 0,
    error: true,
};

fn read(hit: bool) -> Outcome {
    Outcome {
        hits: u32::from(hit),
        misses: u32::from(!hit),
        error: false,
    }
}

/// Reads the reply to a request of `op` (composed by [`super::Composer`]) at the front of
/// `buf`: what it says and its length.
pub fn read_reply(
    protocol: Protocol,
    op: TraceOp,
    buf: &[u8],
) -> Result<(Outcome, usize), ReplyError> {
    match protocol {
        Protocol::MemcacheText => {
            let (reply, used) = parse_reply(buf, expect(op))?;
            let outcome = match reply {
                Reply::Values { hits, .. } if op.is_read() => read(hits > 0),
                Reply::Stored
                | Reply::NotStored
                | Reply::Exists
                | Reply::NotFound
                | Reply::Deleted
                | Reply::Number(_)
                    if !op.is_read() =>
                {
                    Outcome::default()
                }
                _ => ERROR,
            };
            Ok((outcome, used))
        }
        Protocol::MemcacheBinary => {
            let r = binary::parse_response(buf).map_err(|e| match e {
                binary::BinaryError::Incomplete => ReplyError::Incomplete,
                binary::BinaryError::Malformed(why) => ReplyError::Malformed(why),
            })?;
            let outcome = match (op.is_read(), r.status) {
                (true, binary::STATUS_OK) => read(true),
                (true, binary::STATUS_KEY_NOT_FOUND) => read(false),
                (
                    false,
                    binary::STATUS_OK
                    | binary::STATUS_KEY_NOT_FOUND
                    | binary::STATUS_KEY_EXISTS
                    | binary::STATUS_NOT_STORED,
                ) => Outcome::default(),
                _ => ERROR,
            };
            Ok((outcome, r.len))
        }
        Protocol::Redis => {
            let (reply, used) = parse_resp_reply(buf)?;
            let outcome = match reply {
                RespReply::Error(_) => ERROR,
                RespReply::Bulk(value) if op.is_read() => read(value.is_some()),
                // SET: +OK, or null when NX/XX did not apply; APPEND, DEL, INCR: a number.
                RespReply::Simple(_) | RespReply::Bulk(None) | RespReply::Integer(_)
                    if !op.is_read() =>
                {
                    Outcome::default()
                }
                _ => ERROR,
            };
            Ok((outcome, used))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(protocol: Protocol, op: TraceOp, reply: &[u8]) -> Outcome {
        let (outcome, used) = read_reply(protocol, op, reply).unwrap();
        assert_eq!(used, reply.len());
        outcome
    }

    #[test]
    fn reads_are_hits_or_misses_in_every_protocol() {
        let text = Protocol::MemcacheText;
        assert_eq!(
            outcome(text, TraceOp::Get, b"VALUE k 0 1\r\nx\r\nEND\r\n"),
            read(true)
        );
        assert_eq!(outcome(text, TraceOp::Gets, b"END\r\n"), read(false));
        assert_eq!(
            outcome(Protocol::Redis, TraceOp::Get, b"$-1\r\n"),
            read(false)
        );
        assert_eq!(
            outcome(Protocol::Redis, TraceOp::Gets, b"$1\r\nx\r\n"),
            read(true)
        );
        let mut miss = vec![binary::RESPONSE_MAGIC, binary::OP_GET, 0, 0, 0, 0, 0, 1];
        miss.extend([0; 16]);
        assert_eq!(
            outcome(Protocol::MemcacheBinary, TraceOp::Get, &miss),
            read(false)
        );
    }

    #[test]
    fn a_write_the_data_refuses_is_an_answer_not_an_error() {
        let text = Protocol::MemcacheText;
        for (op, reply) in [
            (TraceOp::Add, &b"NOT_STORED\r\n"[..]),
            (TraceOp::Cas, b"STORED\r\n"),
            (TraceOp::Delete, b"NOT_FOUND\r\n"),
            (TraceOp::Incr, b"NOT_FOUND\r\n"),
            (TraceOp::Decr, b"41\r\n"),
        ] {
            assert_eq!(outcome(text, op, reply), Outcome::default(), "{op:?}");
        }
        for (op, reply) in [
            (TraceOp::Add, &b"$-1\r\n"[..]),
            (TraceOp::Delete, b":0\r\n"),
            (TraceOp::Set, b"+OK\r\n"),
        ] {
            assert_eq!(outcome(Protocol::Redis, op, reply), Outcome::default());
        }
        let mut exists = vec![binary::RESPONSE_MAGIC, binary::OP_ADD, 0, 0, 0, 0, 0, 2];
        exists.extend([0; 16]);
        assert_eq!(
            outcome(Protocol::MemcacheBinary, TraceOp::Add, &exists),
            Outcome::default()
        );
    }

    #[test]
    fn error_replies_are_errors() {
        let text = Protocol::MemcacheText;
        assert!(outcome(text, TraceOp::Set, b"SERVER_ERROR out of memory\r\n").error);
        assert!(outcome(text, TraceOp::Incr, b"CLIENT_ERROR cannot increment\r\n").error);
        assert!(outcome(Protocol::Redis, TraceOp::Incr, b"-ERR not an integer\r\n").error);
        assert!(outcome(Protocol::Redis, TraceOp::Get, b":1\r\n").error);
        let mut too_large = vec![binary::RESPONSE_MAGIC, binary::OP_SET, 0, 0, 0, 0, 0, 3];
        too_large.extend([0; 16]);
        assert!(outcome(Protocol::MemcacheBinary, TraceOp::Set, &too_large).error);
        assert_eq!(
            read_reply(text, TraceOp::Get, b"VALUE k 0 1\r\n"),
            Err(ReplyError::Incomplete)
        );
    }
}
