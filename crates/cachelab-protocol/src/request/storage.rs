//! `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]` and
//! `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]`, each followed by a data
//! block of exactly `<bytes>` bytes and `\r\n`.

use bytes::BufMut;

use super::{check_key, put_i64, put_noreply, put_u64, trailing_noreply, LineAt, Request};
use crate::error::{Discard, Invalid, ParseError, RequestError};
use crate::limits::Limits;
use crate::line::{parse_i64, parse_u32, parse_u64, tokens};

/// memcached refuses a data length whose length plus its CRLF overflows an i32 (and
/// then reads the block as a command), so the proxy refuses it too.
const MAX_DATA_LEN: u64 = i32::MAX as u64 - 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StoreOp {
    Set,
    Add,
    Replace,
    Append,
    Prepend,
    Cas,
}

impl StoreOp {
    pub fn name(self) -> &'static str {
        match self {
            StoreOp::Set => "set",
            StoreOp::Add => "add",
            StoreOp::Replace => "replace",
            StoreOp::Append => "append",
            StoreOp::Prepend => "prepend",
            StoreOp::Cas => "cas",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Store<'a> {
    pub op: StoreOp,
    pub key: &'a [u8],
    pub flags: u32,
    pub exptime: i64,
    pub data: &'a [u8],
    /// Present exactly when `op` is [`StoreOp::Cas`].
    pub cas_unique: Option<u64>,
    pub noreply: bool,
}

impl Store<'_> {
    pub fn compose(&self, out: &mut impl BufMut) {
        self.compose_header(out, self.noreply);
        out.put_slice(self.data);
        out.put_slice(b"\r\n");
    }

    /// Writes the command line only, with the given noreply choice (a proxy that must see
    /// every server's answer forwards a noreply request without it).
    pub fn compose_header(&self, out: &mut impl BufMut, noreply: bool) {
        out.put_slice(self.op.name().as_bytes());
        out.put_u8(b' ');
        out.put_slice(self.key);
        out.put_u8(b' ');
        put_u64(out, u64::from(self.flags));
        out.put_u8(b' ');
        put_i64(out, self.exptime);
        out.put_u8(b' ');
        put_u64(out, self.data.len() as u64);
        if let Some(unique) = self.cas_unique {
            out.put_u8(b' ');
            put_u64(out, unique);
        }
        put_noreply(out, noreply);
        out.put_slice(b"\r\n");
    }
}

pub(super) fn parse<'a>(
    op: StoreOp,
    args: &'a [u8],
    at: LineAt<'a>,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let header = parse_header(op, args, limits).map_err(|error| {
        // If the length is readable, the client did send that data block: swallow it too,
        // so it is not read as a command (memcached answers it with a second ERROR).
        let then = announced_length(args).map_or(Discard::Nothing, |n| Discard::Bytes(n + 2));
        ParseError::Invalid(Invalid {
            error,
            consumed: at.line_len,
            then,
        })
    })?;
    let (data, total) = at.data_block(header.length, limits)?;
    Ok((
        Request::Store(Store {
            op,
            key: header.key,
            flags: header.flags,
            exptime: header.exptime,
            data,
            cas_unique: header.cas_unique,
            noreply: header.noreply,
        }),
        total,
    ))
}

/// The `<bytes>` token of a storage command line, if it is a valid length.
fn announced_length(args: &[u8]) -> Option<u64> {
    tokens(args)
        .nth(3)
        .and_then(parse_u64)
        .filter(|n| *n <= MAX_DATA_LEN)
}

struct Header<'a> {
    key: &'a [u8],
    flags: u32,
    exptime: i64,
    length: u64,
    cas_unique: Option<u64>,
    noreply: bool,
}

fn parse_header<'a>(
    op: StoreOp,
    args: &'a [u8],
    limits: &Limits,
) -> Result<Header<'a>, RequestError> {
    let mut toks = tokens(args);
    let (Some(key), Some(flags), Some(exptime), Some(length)) =
        (toks.next(), toks.next(), toks.next(), toks.next())
    else {
        return Err(RequestError::BadFormat);
    };
    check_key(key, limits)?;
    let flags = parse_u32(flags).ok_or(RequestError::BadFlags)?;
    let exptime = parse_i64(exptime).ok_or(RequestError::BadExptime)?;
    let length = parse_u64(length)
        .filter(|n| *n <= MAX_DATA_LEN)
        .ok_or(RequestError::BadLength)?;
    let cas_unique = if op == StoreOp::Cas {
        let token = toks.next().ok_or(RequestError::BadFormat)?;
        Some(parse_u64(token).ok_or(RequestError::BadCas)?)
    } else {
        None
    };
    let noreply = trailing_noreply(toks)?;
    Ok(Header {
        key,
        flags,
        exptime,
        length,
        cas_unique,
        noreply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_request;

    fn parse(input: &[u8]) -> Result<(Request<'_>, usize), ParseError> {
        parse_request(input, &Limits::default())
    }

    fn store_of(input: &[u8]) -> Store<'_> {
        match parse(input) {
            Ok((Request::Store(s), n)) => {
                assert_eq!(n, input.len());
                s
            }
            other => panic!("{other:?}"),
        }
    }

    fn rejected(input: &[u8]) -> Invalid {
        match parse(input) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("expected rejection, got {other:?}"),
        }
    }

    #[test]
    fn set_carries_key_flags_exptime_and_data() {
        let s = store_of(b"set k 42 -1 5\r\nhello\r\n");
        assert_eq!(
            (s.op, s.key, s.flags, s.exptime, s.data, s.noreply),
            (StoreOp::Set, &b"k"[..], 42, -1, &b"hello"[..], false)
        );
        assert_eq!(s.cas_unique, None);
    }

    #[test]
    fn data_is_binary_and_may_contain_crlf() {
        assert_eq!(store_of(b"set k 0 0 4\r\n\r\n\r\n\r\n").data, b"\r\n\r\n");
    }

    #[test]
    fn every_storage_verb_parses() {
        for (verb, op) in [
            ("set", StoreOp::Set),
            ("add", StoreOp::Add),
            ("replace", StoreOp::Replace),
            ("append", StoreOp::Append),
            ("prepend", StoreOp::Prepend),
        ] {
            let input = format!("{verb} k 0 0 1 noreply\r\nx\r\n");
            let s = store_of(input.as_bytes());
            assert_eq!(s.op, op);
            assert!(s.noreply);
        }
    }

    #[test]
    fn cas_requires_its_unique() {
        assert_eq!(store_of(b"cas k 0 0 1 99\r\nx\r\n").cas_unique, Some(99));
        assert_eq!(rejected(b"cas k 0 0 1\r\n").error, RequestError::BadFormat);
        assert_eq!(rejected(b"cas k 0 0 1 x\r\n").error, RequestError::BadCas);
    }

    #[test]
    fn zero_length_value_is_allowed() {
        assert_eq!(store_of(b"set k 0 0 0\r\n\r\n").data, b"");
    }

    #[test]
    fn set_waits_for_the_whole_data_block() {
        assert_eq!(parse(b"set k 0 0 5\r\nhel"), Err(ParseError::Incomplete));
        assert_eq!(
            parse(b"set k 0 0 5\r\nhello\r"),
            Err(ParseError::Incomplete)
        );
    }

    #[test]
    fn malformed_set_line_without_a_readable_length_drops_only_the_line() {
        for (input, error) in [
            (&b"set k 0 0\r\n"[..], RequestError::BadFormat),
            (b"set k 0 0 -1\r\n", RequestError::BadLength),
            (b"set k 0 0 x\r\n", RequestError::BadLength),
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error, error, "{input:?}");
            assert_eq!(inv.consumed, input.len());
            assert_eq!(inv.then, Discard::Nothing);
        }
    }

    #[test]
    fn malformed_set_line_with_a_readable_length_also_swallows_its_data_block() {
        for (input, error) in [
            (&b"set k x 0 1\r\n"[..], RequestError::BadFlags),
            (b"set k 4294967296 0 1\r\n", RequestError::BadFlags),
            (b"set k 0 x 1\r\n", RequestError::BadExptime),
            (b"set k 0 0 1 maybe\r\n", RequestError::BadFormat),
            (b"set k 0 0 1 noreply extra\r\n", RequestError::BadFormat),
            (b"cas k 0 0 1 x\r\n", RequestError::BadCas),
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error, error, "{input:?}");
            assert_eq!(inv.consumed, input.len());
            assert_eq!(inv.then, Discard::Bytes(3));
        }
    }

    #[test]
    fn data_block_longer_than_announced_is_dropped_through_the_next_newline() {
        let input = b"set k 0 0 3\r\nabcdef\r\nget k\r\n";
        let inv = rejected(input);
        assert_eq!(inv.error, RequestError::BadDataChunk);
        assert_eq!(&input[inv.consumed..], b"get k\r\n");
    }

    #[test]
    fn data_block_shorter_than_announced_resyncs_at_the_newline_after_the_block() {
        // 5 announced, "ab\r\n" sent, then the next command: the block swallows
        // "ab\r\nq", the terminator is wrong, and we drop through the next newline.
        let input = b"set k 0 0 5\r\nab\r\nquit\r\nget k\r\n";
        let inv = rejected(input);
        assert_eq!(inv.error, RequestError::BadDataChunk);
        assert_eq!(&input[inv.consumed..], b"get k\r\n");
    }

    #[test]
    fn bad_terminator_without_newline_yet_discards_until_one_arrives() {
        let inv = rejected(b"set k 0 0 1\r\nabc");
        assert_eq!(inv.error, RequestError::BadDataChunk);
        assert_eq!(inv.consumed, 16);
        assert_eq!(inv.then, Discard::ThroughNewline);
    }

    #[test]
    fn value_over_the_limit_is_rejected_and_its_block_swallowed() {
        let limits = Limits {
            max_value_len: 10,
            ..Limits::default()
        };
        let input = b"set k 0 0 11\r\n";
        let Err(ParseError::Invalid(inv)) = parse_request(input, &limits) else {
            panic!()
        };
        assert_eq!(inv.error, RequestError::ValueTooLarge);
        assert_eq!(inv.consumed, input.len());
        assert_eq!(inv.then, Discard::Bytes(13));
        assert!(matches!(
            parse_request(b"set k 0 0 10\r\n0123456789\r\n", &limits),
            Ok((Request::Store(_), 26))
        ));
    }

    #[test]
    fn compose_header_can_drop_noreply() {
        let s = store_of(b"set k 1 2 3 noreply\r\nabc\r\n");
        let mut out = Vec::new();
        s.compose_header(&mut out, false);
        assert_eq!(out, b"set k 1 2 3\r\n");
    }
}
