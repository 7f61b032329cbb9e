//! `set|add|replace|append|prepend <key> <flags> <exptime> <bytes> [noreply]` and
//! `cas <key> <flags> <exptime> <bytes> <cas unique> [noreply]`, each followed by a data
//! block of exactly `<bytes>` bytes and `\r\n`.

use bytes::BufMut;

use super::{
    check_key_bytes, check_key_length, put_i64, put_noreply, put_u64, want_tokens, LineAt, Refused,
    Request,
};
use crate::error::{Invalid, ParseError, RequestError, Unlink};
use crate::limits::Limits;
use crate::line::Words;
use crate::number::{strtol32, strtoul32, strtoull};

/// memcached refuses a data length whose length plus its CRLF overflows an `int`.
const MAX_DATA_LEN: i32 = i32::MAX - 2;

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
    /// As memcached reads it: a 32-bit number (`4294967306` is 10), widened.
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

/// Parses a storage command as memcached 1.6.18's `process_update_command` does, in its
/// order: the token count (`ERROR`), then `noreply`, the key's length, the numbers and
/// the length's range (each `CLIENT_ERROR bad command line format`); none of these
/// swallows the data block, which memcached then reads as a command, and so do we. A
/// value over the limit is refused with its block swallowed; a block not followed by
/// `\r\n` is refused after exactly its announced bytes. The client's noreply silences
/// every error after the token count. Last, the proxy's own key rule.
pub(super) fn parse<'a>(
    op: StoreOp,
    words: &Words<'a>,
    at: LineAt<'a>,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let header = parse_header(op, words, limits).map_err(|refused| {
        ParseError::Invalid(Invalid {
            silent: refused.silent,
            ..Invalid::answered(refused.error, at.line_len)
        })
    })?;
    let noreply = header.noreply;
    if at.too_large(header.length, limits) {
        let unlink = (op == StoreOp::Set && check_key_bytes(header.key).is_ok()).then(|| Unlink {
            key: at.span(header.key),
            base64: false,
        });
        return Err(at.refuse_too_large(header.length, noreply, unlink));
    }
    let (data, total) = at.data_block(header.length, noreply)?;
    if let Err(error) = check_key_bytes(header.key) {
        return Err(ParseError::Invalid(Invalid {
            silent: noreply,
            ..Invalid::answered(error, total)
        }));
    }
    Ok((
        Request::Store(Store {
            op,
            key: header.key,
            flags: header.flags,
            exptime: header.exptime,
            data,
            cas_unique: header.cas_unique,
            noreply,
        }),
        total,
    ))
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
    words: &Words<'a>,
    limits: &Limits,
) -> Result<Header<'a>, Refused> {
    let cas = op == StoreOp::Cas;
    // A last token other than noreply is ignored, as memcached ignores it.
    want_tokens(words, if cas { &[7, 8] } else { &[6, 7] })?;
    let noreply = words.noreply();
    let refuse = |error| Refused::after_noreply(error, noreply);
    let key = words.get(1);
    check_key_length(key, limits).map_err(refuse)?;
    let flags = strtoul32(words.get(2)).ok_or(refuse(RequestError::BadFlags))?;
    let exptime = strtol32(words.get(3)).ok_or(refuse(RequestError::BadExptime))?;
    let length = strtol32(words.get(4)).ok_or(refuse(RequestError::BadLength))?;
    let cas_unique = if cas {
        Some(strtoull(words.get(5)).ok_or(refuse(RequestError::BadCas))?)
    } else {
        None
    };
    if !(0..=MAX_DATA_LEN).contains(&length) {
        return Err(refuse(RequestError::BadLength));
    }
    Ok(Header {
        key,
        flags,
        exptime: i64::from(exptime),
        length: length as u64,
        cas_unique,
        noreply,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_request;
    use crate::Discard;

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
        assert_eq!(
            rejected(b"cas k 0 0 1\r\n").error,
            RequestError::UnknownCommand
        );
        assert_eq!(rejected(b"cas k 0 0 1 x\r\n").error, RequestError::BadCas);
        assert_eq!(rejected(b"cas k 0 0 1 -1\r\n").error, RequestError::BadCas);
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
    fn a_wrong_token_count_is_error_and_the_block_is_read_as_a_command() {
        for input in [
            &b"set k 0 0\r\n"[..],
            b"set k 0 0 1 noreply extra\r\n",
            b"cas k 0 0 1 2 noreply extra\r\n",
            b"append k 0\r\n",
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error.reply_line(), b"ERROR\r\n", "{input:?}");
            assert_eq!(
                (inv.consumed, inv.then, inv.silent),
                (input.len(), Discard::Nothing, false)
            );
        }
    }

    #[test]
    fn a_malformed_line_is_refused_without_swallowing_its_block() {
        let long_key = format!("set {} 0 0 1\r\n", "k".repeat(251));
        for (input, error) in [
            (long_key.as_bytes(), RequestError::KeyTooLong),
            (b"set k x 0 1\r\n", RequestError::BadFlags),
            (b"set k -1 0 1\r\n", RequestError::BadFlags),
            (b"set k 0 x 1\r\n", RequestError::BadExptime),
            (b"set k 0 0 x\r\n", RequestError::BadLength),
            (b"set k 0 0 -1\r\n", RequestError::BadLength),
            (b"set k 0 0 2147483646\r\n", RequestError::BadLength),
            (b"cas k 0 0 1 x\r\n", RequestError::BadCas),
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error, error, "{input:?}");
            assert_eq!(
                inv.error.reply_line(),
                b"CLIENT_ERROR bad command line format\r\n"
            );
            assert_eq!((inv.consumed, inv.then), (input.len(), Discard::Nothing));
        }
    }

    #[test]
    fn noreply_silences_the_errors_memcached_finds_after_reading_it() {
        assert!(rejected(b"set k x 0 1 noreply\r\n").silent);
        assert!(
            rejected(b"set k 0 0 noreply\r\n").silent,
            "noreply as the length"
        );
        assert!(rejected(b"set k 0 0 1 noreply\r\nxyz\r\n").silent);
        assert!(
            !rejected(b"set k 0 0 1 noreply x\r\n").silent,
            "ERROR is never silenced"
        );
    }

    #[test]
    fn a_token_after_the_length_other_than_noreply_is_ignored() {
        let s = store_of(b"set k 0 0 1 norepl\r\nx\r\n");
        assert!(!s.noreply);
        assert_eq!(store_of(b"cas k 0 0 1 5 foo\r\nx\r\n").cas_unique, Some(5));
    }

    #[test]
    fn numbers_are_read_as_memcached_reads_them() {
        let s = store_of(b"set k 4294967297 4294967306 +1\r\nx\r\n");
        assert_eq!((s.flags, s.exptime), (1, 10));
        let s = store_of(b"set k 1\tz 0 4294967298\r\nxy\r\n");
        assert_eq!((s.flags, s.data), (1, &b"xy"[..]));
        assert_eq!(store_of(b"set k -0 -5 1\r\nx\r\n").exptime, -5);
    }

    #[test]
    fn a_block_not_ending_in_crlf_is_refused_after_exactly_its_announced_bytes() {
        let input = b"set k 0 0 3\r\nabcdef\r\nget k\r\n";
        let inv = rejected(input);
        assert_eq!(inv.error, RequestError::BadDataChunk);
        assert_eq!(&input[inv.consumed..], b"f\r\nget k\r\n");
        assert_eq!(inv.then, Discard::Nothing);
        let short = b"set k 0 0 5\r\nab\r\nquit\r\n";
        assert_eq!(&short[rejected(short).consumed..], b"t\r\n");
    }

    #[test]
    fn a_bad_block_waits_until_its_announced_bytes_are_in() {
        assert_eq!(parse(b"set k 0 0 1\r\nab"), Err(ParseError::Incomplete));
    }

    #[test]
    fn value_over_the_limit_is_refused_its_block_swallowed_and_a_sets_key_unlinked() {
        let limits = Limits {
            max_value_len: 10,
            ..Limits::default()
        };
        let input = b"set key 0 0 11\r\n";
        let Err(ParseError::Invalid(inv)) = parse_request(input, &limits) else {
            panic!()
        };
        assert_eq!(inv.error, RequestError::ValueTooLarge);
        assert_eq!(
            inv.error.reply_line(),
            b"SERVER_ERROR object too large for cache\r\n"
        );
        assert_eq!(inv.consumed, input.len());
        assert_eq!(inv.then, Discard::Bytes(13));
        assert_eq!(inv.unlink.map(|u| u.key.get(input)), Some(&b"key"[..]));
        let Err(ParseError::Invalid(add)) = parse_request(b"add k 0 0 11 noreply\r\n", &limits)
        else {
            panic!()
        };
        assert_eq!((add.unlink, add.silent), (None, true), "only set unlinks");
        assert!(matches!(
            parse_request(b"set k 0 0 10\r\n0123456789\r\n", &limits),
            Ok((Request::Store(_), 26))
        ));
    }

    #[test]
    fn a_key_with_a_control_character_is_refused_after_its_block() {
        let input = b"set a\x01b 0 0 1\r\nx\r\nget k\r\n";
        let inv = rejected(input);
        assert_eq!(inv.error, RequestError::BadKey);
        assert_eq!(&input[inv.consumed..], b"get k\r\n");
    }

    #[test]
    fn compose_header_can_drop_noreply() {
        let s = store_of(b"set k 1 2 3 noreply\r\nabc\r\n");
        let mut out = Vec::new();
        s.compose_header(&mut out, false);
        assert_eq!(out, b"set k 1 2 3\r\n");
    }
}
