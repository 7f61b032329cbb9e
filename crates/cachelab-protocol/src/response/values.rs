//! `VALUE <key> <flags> <bytes> [<cas unique>]\r\n<data>\r\n` ... `END\r\n`.

use bytes::BufMut;

use super::{next_line, Reply, ReplyError};
use crate::line::{parse_u32, parse_u64, tokens};

pub(super) fn parse(buf: &[u8]) -> Result<(Reply, usize), ReplyError> {
    let mut pos = 0;
    let mut hits = 0u32;
    loop {
        let (line, len) = next_line(&buf[pos..])?;
        if line == b"END" {
            return Ok((
                Reply::Values {
                    hits,
                    body_len: pos,
                },
                pos + len,
            ));
        }
        let header = value_header(line)?;
        let data_start = pos + len;
        let end = data_start
            .checked_add(header.length)
            .and_then(|e| e.checked_add(2))
            .ok_or(ReplyError::Malformed("value length overflows"))?;
        if buf.len() < end {
            return Err(ReplyError::Incomplete);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(ReplyError::Malformed("value data not terminated by \\r\\n"));
        }
        hits += 1;
        pos = end;
    }
}

pub(super) struct ValueHeader<'a> {
    key: &'a [u8],
    flags: u32,
    pub(super) length: usize,
    cas: Option<u64>,
}

pub(super) fn value_header(line: &[u8]) -> Result<ValueHeader<'_>, ReplyError> {
    match value_header_as_memcached_writes_it(line) {
        Some(header) => Ok(header),
        None => value_header_by_tokens(line),
    }
}

/// The header in memcached's own spelling (`VALUE <key> <flags> <bytes>[ <cas>]`, one
/// space apart, nothing else), read without splitting the line into tokens; None for
/// any other spelling, which [`value_header_by_tokens`] reads (this is the common case
/// made cheap, with the same result).
fn value_header_as_memcached_writes_it(line: &[u8]) -> Option<ValueHeader<'_>> {
    let rest = line.strip_prefix(b"VALUE ")?;
    let key_end = space(rest)?;
    let (key, rest) = (&rest[..key_end], &rest[key_end + 1..]);
    let flags_end = space(rest)?;
    let flags = parse_u32(&rest[..flags_end])?;
    let rest = &rest[flags_end + 1..];
    let (length, cas) = match space(rest) {
        None => (rest, None),
        Some(i) => (&rest[..i], Some(parse_u64(&rest[i + 1..])?)),
    };
    if key.is_empty() {
        return None;
    }
    Some(ValueHeader {
        key,
        flags,
        length: usize::try_from(parse_u64(length)?).ok()?,
        cas,
    })
}

/// The first space in a header's rest: a plain loop, cheaper than `memchr`'s set-up on
/// words this short.
fn space(rest: &[u8]) -> Option<usize> {
    rest.iter().position(|&b| b == b' ')
}

fn value_header_by_tokens(line: &[u8]) -> Result<ValueHeader<'_>, ReplyError> {
    let mut toks = tokens(line);
    if toks.next() != Some(b"VALUE") {
        return Err(ReplyError::Malformed("expected VALUE or END"));
    }
    let (Some(key), Some(flags), Some(length)) = (toks.next(), toks.next(), toks.next()) else {
        return Err(ReplyError::Malformed("short VALUE line"));
    };
    let flags = parse_u32(flags).ok_or(ReplyError::Malformed("bad flags in VALUE line"))?;
    let length = parse_u64(length)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(ReplyError::Malformed("bad length in VALUE line"))?;
    let cas = match toks.next() {
        Some(t) => Some(parse_u64(t).ok_or(ReplyError::Malformed("bad cas in VALUE line"))?),
        None => None,
    };
    Ok(ValueHeader {
        key,
        flags,
        length,
        cas,
    })
}

/// One value of a retrieval reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    pub key: &'a [u8],
    pub flags: u32,
    pub data: &'a [u8],
    pub cas: Option<u64>,
}

/// Iterates over the values in the body of a [`Reply::Values`] (the bytes before `END`).
/// The body must have been validated by [`super::parse_reply`].
pub struct ValueIter<'a> {
    body: &'a [u8],
}

impl<'a> ValueIter<'a> {
    pub fn new(body: &'a [u8]) -> Self {
        ValueIter { body }
    }

    /// The body after the values returned so far: its length says where the next one
    /// starts.
    pub fn rest(&self) -> &'a [u8] {
        self.body
    }
}

impl<'a> Iterator for ValueIter<'a> {
    type Item = Value<'a>;

    fn next(&mut self) -> Option<Value<'a>> {
        let (line, len) = next_line(self.body).ok()?;
        let header = value_header(line).ok()?;
        let data = self.body.get(len..len + header.length)?;
        self.body = self.body.get(len + header.length + 2..)?;
        Some(Value {
            key: header.key,
            flags: header.flags,
            data,
            cas: header.cas,
        })
    }
}

/// Writes one VALUE block (a server's half of a retrieval reply).
pub fn compose_value(out: &mut impl BufMut, key: &[u8], flags: u32, data: &[u8], cas: Option<u64>) {
    out.put_slice(b"VALUE ");
    out.put_slice(key);
    out.put_u8(b' ');
    out.put_slice(itoa::Buffer::new().format(flags).as_bytes());
    out.put_u8(b' ');
    out.put_slice(itoa::Buffer::new().format(data.len()).as_bytes());
    if let Some(cas) = cas {
        out.put_u8(b' ');
        out.put_slice(itoa::Buffer::new().format(cas).as_bytes());
    }
    out.put_slice(b"\r\n");
    out.put_slice(data);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_reply, Expect};
    use proptest::prelude::*;

    fn header_parts(h: &ValueHeader<'_>) -> (Vec<u8>, u32, usize, Option<u64>) {
        (h.key.to_vec(), h.flags, h.length, h.cas)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

        /// Whatever the line, the quick reading agrees with the tokens' (when it reads
        /// the line at all).
        #[test]
        fn the_quick_header_reading_is_the_tokens_reading(
            words in proptest::collection::vec(
                prop_oneof![
                    Just("VALUE".to_string()),
                    "[a-z]{1,5}",
                    "[0-9]{1,21}",
                    Just(String::new()),
                ],
                0..7,
            ),
        ) {
            let line = words.join(" ");
            if let Some(quick) = value_header_as_memcached_writes_it(line.as_bytes()) {
                let slow = value_header_by_tokens(line.as_bytes());
                prop_assert!(slow.is_ok(), "{line:?}");
                prop_assert_eq!(header_parts(&quick), header_parts(&slow.unwrap()));
            }
        }
    }

    #[test]
    fn memcacheds_spelling_is_read_quickly_and_others_by_tokens() {
        let quick = value_header_as_memcached_writes_it(b"VALUE k 3 10 77").unwrap();
        assert_eq!(header_parts(&quick), (b"k".to_vec(), 3, 10, Some(77)));
        assert!(value_header_as_memcached_writes_it(b"VALUE  k 3 10").is_none());
        let slow = value_header(b"VALUE  k 3 10").unwrap();
        assert_eq!(header_parts(&slow), (b"k".to_vec(), 3, 10, None));
    }

    #[test]
    fn a_miss_is_a_bare_end() {
        assert_eq!(
            parse_reply(b"END\r\n", Expect::Values),
            Ok((
                Reply::Values {
                    hits: 0,
                    body_len: 0
                },
                5
            ))
        );
    }

    #[test]
    fn hits_are_counted_and_the_body_precedes_end() {
        let mut buf = Vec::new();
        compose_value(&mut buf, b"a", 1, b"xy", None);
        compose_value(&mut buf, b"b", 2, b"\r\nEND\r\n", Some(7));
        let body_len = buf.len();
        buf.extend_from_slice(b"END\r\n");
        assert_eq!(
            parse_reply(&buf, Expect::Values),
            Ok((Reply::Values { hits: 2, body_len }, buf.len()))
        );
        let values: Vec<Value> = ValueIter::new(&buf[..body_len]).collect();
        assert_eq!(values.len(), 2);
        assert_eq!(values[1].data, b"\r\nEND\r\n");
        assert_eq!(values[1].cas, Some(7));
        assert_eq!(values[0].flags, 1);
    }

    #[test]
    fn every_strict_prefix_of_a_values_reply_is_incomplete() {
        let mut buf = Vec::new();
        compose_value(&mut buf, b"key", 0, b"value\r\nwith\r\nlines", None);
        buf.extend_from_slice(b"END\r\n");
        for cut in 0..buf.len() {
            assert_eq!(
                parse_reply(&buf[..cut], Expect::Values),
                Err(ReplyError::Incomplete),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn garbage_instead_of_value_is_malformed() {
        assert!(matches!(
            parse_reply(b"STORED\r\n", Expect::Values),
            Err(ReplyError::Malformed(_))
        ));
        assert!(matches!(
            parse_reply(b"VALUE k 0 2\r\nabc\r\nEND\r\n", Expect::Values),
            Err(ReplyError::Malformed(_))
        ));
    }
}
