//! RESP2 replies: `+simple`, `-error`, `:integer`, `$bulk` (or `$-1`, null) and `*array`
//! (or `*-1`, null), each line terminated by `\r\n`.

use bytes::BufMut;

use super::compose::{put_array_header, put_bulk};
use crate::error::ReplyError;
use crate::line::{parse_i64, scan_line, LineScan};

/// Redis's own default `proto-max-bulk-len`: a longer announced bulk string is garbage,
/// not something to wait for.
pub const MAX_BULK_LEN: usize = 512 * 1024 * 1024;
/// Arrays nested deeper than this are rejected, so hostile input cannot exhaust the stack.
pub const MAX_DEPTH: usize = 32;
/// Longest simple string, error or header line we accept (Redis error messages are short).
const MAX_LINE: usize = 64 * 1024;

/// One reply, borrowing its bytes from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RespReply<'a> {
    /// `+OK`: the text after `+`.
    Simple(&'a [u8]),
    /// `-ERR ...`: the text after `-`.
    Error(&'a [u8]),
    Integer(i64),
    /// The data, or `None` for the null bulk string (a GET miss).
    Bulk(Option<&'a [u8]>),
    /// The elements, or `None` for the null array.
    Array(Option<RespElements<'a>>),
}

impl RespReply<'_> {
    /// Whether this is the null bulk string or the null array (how Redis says "no value").
    pub fn is_null(&self) -> bool {
        matches!(self, RespReply::Bulk(None) | RespReply::Array(None))
    }

    /// An owned copy, for tests and tools that keep replies around.
    pub fn to_value(&self) -> RespValue {
        match self {
            RespReply::Simple(s) => RespValue::Simple(s.to_vec()),
            RespReply::Error(s) => RespValue::Error(s.to_vec()),
            RespReply::Integer(n) => RespValue::Integer(*n),
            RespReply::Bulk(b) => RespValue::Bulk(b.map(<[u8]>::to_vec)),
            RespReply::Array(a) => {
                RespValue::Array(a.map(|elements| elements.iter().map(|e| e.to_value()).collect()))
            }
        }
    }
}

/// The elements of a non-null array: already validated, counted, and iterable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespElements<'a> {
    body: &'a [u8],
    len: usize,
    nulls: usize,
}

impl<'a> RespElements<'a> {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Elements that are null (an MGET's misses), counted while parsing so that a load
    /// generator gets its hit count without walking the array again.
    pub fn nulls(&self) -> usize {
        self.nulls
    }

    pub fn iter(&self) -> impl Iterator<Item = RespReply<'a>> + 'a {
        let mut rest = self.body;
        std::iter::from_fn(move || {
            // The body was validated when the array was parsed, so this cannot fail.
            let (element, used) = parse_at(rest, 1).ok()?;
            rest = &rest[used..];
            Some(element)
        })
    }
}

/// An owned reply, for composing arbitrary replies (a test server, a property test).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RespValue {
    Simple(Vec<u8>),
    Error(Vec<u8>),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<RespValue>>),
}

/// Writes a reply. Simple strings and errors must not contain `\r` or `\n`.
pub fn compose_resp_value(out: &mut impl BufMut, value: &RespValue) {
    match value {
        RespValue::Simple(s) => put_line(out, b'+', s),
        RespValue::Error(s) => put_line(out, b'-', s),
        RespValue::Integer(n) => put_line(out, b':', itoa::Buffer::new().format(*n).as_bytes()),
        RespValue::Bulk(None) => out.put_slice(b"$-1\r\n"),
        RespValue::Bulk(Some(data)) => put_bulk(out, data),
        RespValue::Array(None) => out.put_slice(b"*-1\r\n"),
        RespValue::Array(Some(elements)) => {
            put_array_header(out, elements.len());
            for element in elements {
                compose_resp_value(out, element);
            }
        }
    }
}

fn put_line(out: &mut impl BufMut, kind: u8, text: &[u8]) {
    out.put_u8(kind);
    out.put_slice(text);
    out.put_slice(b"\r\n");
}

/// Parses the reply at the front of `buf`: the reply and the bytes it occupies,
/// [`ReplyError::Incomplete`] if more bytes are needed, or [`ReplyError::Malformed`].
pub fn parse_resp_reply(buf: &[u8]) -> Result<(RespReply<'_>, usize), ReplyError> {
    parse_at(buf, 0)
}

fn parse_at(buf: &[u8], depth: usize) -> Result<(RespReply<'_>, usize), ReplyError> {
    let Some((&kind, rest)) = buf.split_first() else {
        return Err(ReplyError::Incomplete);
    };
    let (line, line_len) = match scan_line(rest, MAX_LINE) {
        LineScan::Complete(line, len) => (line, len + 1),
        LineScan::Incomplete => return Err(ReplyError::Incomplete),
        LineScan::TooLong => return Err(ReplyError::Malformed("RESP line too long")),
        LineScan::BareNewline(_) => {
            return Err(ReplyError::Malformed("RESP line without \\r"));
        }
    };
    match kind {
        b'+' => Ok((RespReply::Simple(line), line_len)),
        b'-' => Ok((RespReply::Error(line), line_len)),
        b':' => parse_i64(line)
            .map(|n| (RespReply::Integer(n), line_len))
            .ok_or(ReplyError::Malformed("RESP integer is not a number")),
        b'$' => parse_bulk(buf, line, line_len),
        b'*' => parse_array(buf, line, line_len, depth),
        _ => Err(ReplyError::Malformed("unknown RESP type byte")),
    }
}

/// A length from a `$` or `*` header: `Ok(None)` for -1 (null).
fn header_length(line: &[u8]) -> Result<Option<usize>, ReplyError> {
    match parse_i64(line) {
        Some(-1) => Ok(None),
        Some(n) if n >= 0 => Ok(usize::try_from(n).ok()),
        _ => Err(ReplyError::Malformed("bad RESP length")),
    }
}

fn parse_bulk<'a>(
    buf: &'a [u8],
    line: &[u8],
    line_len: usize,
) -> Result<(RespReply<'a>, usize), ReplyError> {
    let Some(len) = header_length(line)? else {
        return Ok((RespReply::Bulk(None), line_len));
    };
    if len > MAX_BULK_LEN {
        return Err(ReplyError::Malformed("bulk string longer than the limit"));
    }
    let end = line_len + len + 2;
    if buf.len() < end {
        return Err(ReplyError::Incomplete);
    }
    if &buf[end - 2..end] != b"\r\n" {
        return Err(ReplyError::Malformed(
            "bulk string not terminated by \\r\\n",
        ));
    }
    Ok((RespReply::Bulk(Some(&buf[line_len..end - 2])), end))
}

fn parse_array<'a>(
    buf: &'a [u8],
    line: &[u8],
    line_len: usize,
    depth: usize,
) -> Result<(RespReply<'a>, usize), ReplyError> {
    let Some(len) = header_length(line)? else {
        return Ok((RespReply::Array(None), line_len));
    };
    if depth >= MAX_DEPTH {
        return Err(ReplyError::Malformed("RESP arrays nested too deeply"));
    }
    let mut pos = line_len;
    let mut nulls = 0;
    for _ in 0..len {
        let (element, used) = parse_at(&buf[pos..], depth + 1)?;
        nulls += usize::from(element.is_null());
        pos += used;
    }
    let elements = RespElements {
        body: &buf[line_len..pos],
        len,
        nulls,
    };
    Ok((RespReply::Array(Some(elements)), pos))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(input: &[u8]) -> RespReply<'_> {
        let (reply, used) = parse_resp_reply(input).unwrap();
        assert_eq!(used, input.len(), "{input:?}");
        reply
    }

    #[test]
    fn simple_string_is_the_text_after_plus() {
        assert_eq!(parsed(b"+OK\r\n"), RespReply::Simple(b"OK"));
        assert_eq!(parsed(b"+\r\n"), RespReply::Simple(b""));
    }

    #[test]
    fn error_is_the_text_after_minus() {
        assert_eq!(
            parsed(b"-ERR unknown command\r\n"),
            RespReply::Error(b"ERR unknown command")
        );
    }

    #[test]
    fn integers_are_signed_64_bit() {
        assert_eq!(parsed(b":0\r\n"), RespReply::Integer(0));
        assert_eq!(parsed(b":-42\r\n"), RespReply::Integer(-42));
        assert_eq!(
            parsed(b":9223372036854775807\r\n"),
            RespReply::Integer(i64::MAX)
        );
        assert!(matches!(
            parse_resp_reply(b":9223372036854775808\r\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_resp_reply(b":x\r\n"),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn bulk_string_is_length_prefixed_and_binary_safe() {
        assert_eq!(
            parsed(b"$7\r\na\r\nb\r\nc\r\n"),
            RespReply::Bulk(Some(b"a\r\nb\r\nc"))
        );
        assert_eq!(parsed(b"$0\r\n\r\n"), RespReply::Bulk(Some(b"")));
    }

    #[test]
    fn null_bulk_string_is_a_miss() {
        let reply = parsed(b"$-1\r\n");
        assert_eq!(reply, RespReply::Bulk(None));
        assert!(reply.is_null());
    }

    #[test]
    fn bulk_string_with_a_wrong_terminator_is_malformed() {
        assert!(matches!(
            parse_resp_reply(b"$2\r\nabc\r\n"),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_resp_reply(b"$-2\r\n"),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn bulk_string_over_the_limit_is_malformed_not_awaited() {
        let header = format!("${}\r\n", MAX_BULK_LEN + 1);
        assert!(matches!(
            parse_resp_reply(header.as_bytes()),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn mget_reply_counts_its_null_elements() {
        let input = b"*3\r\n$1\r\na\r\n$-1\r\n$2\r\nbc\r\n";
        let RespReply::Array(Some(elements)) = parsed(input) else {
            panic!("expected an array");
        };
        assert_eq!((elements.len(), elements.nulls()), (3, 1));
        let all: Vec<RespReply> = elements.iter().collect();
        assert_eq!(
            all,
            vec![
                RespReply::Bulk(Some(b"a")),
                RespReply::Bulk(None),
                RespReply::Bulk(Some(b"bc"))
            ]
        );
    }

    #[test]
    fn null_and_empty_arrays_differ() {
        assert_eq!(parsed(b"*-1\r\n"), RespReply::Array(None));
        let RespReply::Array(Some(empty)) = parsed(b"*0\r\n") else {
            panic!("expected an empty array");
        };
        assert!(empty.is_empty());
        assert_eq!(empty.iter().count(), 0);
    }

    #[test]
    fn arrays_nest_up_to_the_depth_limit() {
        let nested = |depth: usize| {
            let mut v = b"*1\r\n".repeat(depth);
            v.extend_from_slice(b":1\r\n");
            v
        };
        assert!(parse_resp_reply(&nested(MAX_DEPTH)).is_ok());
        assert!(matches!(
            parse_resp_reply(&nested(MAX_DEPTH + 1)),
            Err(ReplyError::Malformed(_))
        ));
    }

    #[test]
    fn unknown_type_byte_and_bare_newline_are_malformed() {
        for input in [&b"?x\r\n"[..], b"+OK\n", b"STORED\r\n"] {
            assert!(
                matches!(parse_resp_reply(input), Err(ReplyError::Malformed(_))),
                "{input:?}"
            );
        }
    }

    #[test]
    fn a_reply_followed_by_more_bytes_consumes_only_itself() {
        assert_eq!(
            parse_resp_reply(b"+OK\r\n$-1\r\n"),
            Ok((RespReply::Simple(b"OK"), 5))
        );
    }

    #[test]
    fn partial_replies_are_incomplete() {
        for input in [
            &b""[..],
            b"+OK",
            b"+OK\r",
            b"$3\r\nab",
            b"*2\r\n:1\r\n",
            b"$",
        ] {
            assert_eq!(
                parse_resp_reply(input),
                Err(ReplyError::Incomplete),
                "{input:?}"
            );
        }
    }

    #[test]
    fn composed_values_read_back() {
        let value = RespValue::Array(Some(vec![
            RespValue::Simple(b"OK".to_vec()),
            RespValue::Error(b"ERR x".to_vec()),
            RespValue::Integer(-7),
            RespValue::Bulk(None),
            RespValue::Bulk(Some(b"\r\n".to_vec())),
            RespValue::Array(None),
        ]));
        let mut out = Vec::new();
        compose_resp_value(&mut out, &value);
        assert_eq!(parsed(&out).to_value(), value);
    }
}
