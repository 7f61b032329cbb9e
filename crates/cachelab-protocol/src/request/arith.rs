//! `incr <key> <delta> [noreply]` and `decr <key> <delta> [noreply]`; delta is a 64-bit
//! unsigned decimal.

use bytes::BufMut;

use super::{
    check_key_bytes, check_key_length, put_noreply, put_u64, want_tokens, Refused, Request,
};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::Words;
use crate::number::strtoull;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArithOp {
    Incr,
    Decr,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arith<'a> {
    pub op: ArithOp,
    pub key: &'a [u8],
    pub delta: u64,
    pub noreply: bool,
}

impl Arith<'_> {
    pub fn compose(&self, out: &mut impl BufMut) {
        out.put_slice(match self.op {
            ArithOp::Incr => b"incr ",
            ArithOp::Decr => b"decr ",
        });
        out.put_slice(self.key);
        out.put_u8(b' ');
        put_u64(out, self.delta);
        put_noreply(out, self.noreply);
        out.put_slice(b"\r\n");
    }
}

/// As memcached's `process_arithmetic_command`: 4 or 5 tokens (else `ERROR`; a last
/// token other than `noreply` is ignored), then the key's length and the delta, errors
/// silenced by noreply.
pub(super) fn parse<'a>(
    op: ArithOp,
    words: &Words<'a>,
    limits: &Limits,
) -> Result<Request<'a>, Refused> {
    want_tokens(words, &[4, 5])?;
    let noreply = words.noreply();
    let refuse = |error| Refused::after_noreply(error, noreply);
    let key = words.get(1);
    check_key_length(key, limits).map_err(refuse)?;
    let delta = strtoull(words.get(2)).ok_or(refuse(RequestError::BadDelta))?;
    check_key_bytes(key).map_err(refuse)?;
    Ok(Request::Arith(Arith {
        op,
        key,
        delta,
        noreply,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, Invalid, ParseError};

    fn parse(input: &[u8]) -> Result<(Request<'_>, usize), ParseError> {
        parse_request(input, &Limits::default())
    }

    #[test]
    fn incr_and_decr_carry_a_64_bit_delta() {
        assert_eq!(
            parse(b"incr n 18446744073709551615\r\n").map(|(r, _)| r),
            Ok(Request::Arith(Arith {
                op: ArithOp::Incr,
                key: b"n",
                delta: u64::MAX,
                noreply: false
            }))
        );
        assert!(matches!(
            parse(b"decr n 1 noreply\r\n"),
            Ok((
                Request::Arith(Arith {
                    op: ArithOp::Decr,
                    noreply: true,
                    ..
                }),
                18
            ))
        ));
    }

    fn rejected(input: &[u8]) -> Invalid {
        match parse(input) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn negative_or_non_numeric_delta_is_rejected() {
        for input in [
            &b"incr n -1\r\n"[..],
            b"incr n x\r\n",
            b"decr n 18446744073709551616\r\n",
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error, RequestError::BadDelta);
            assert_eq!(
                inv.error.reply_line(),
                b"CLIENT_ERROR invalid numeric delta argument\r\n"
            );
        }
    }

    #[test]
    fn the_delta_is_read_as_memcached_reads_it() {
        let delta = |input| match parse(input) {
            Ok((Request::Arith(a), _)) => a.delta,
            other => panic!("{other:?}"),
        };
        assert_eq!(delta(b"incr n +1\r\n"), 1);
        assert_eq!(delta(b"incr n -0\r\n"), 0);
        assert_eq!(delta(b"decr n 1\tx\r\n"), 1);
    }

    #[test]
    fn a_wrong_token_count_is_error() {
        for input in [&b"incr n\r\n"[..], b"incr\r\n", b"incr n 1 noreply x\r\n"] {
            assert_eq!(rejected(input).error, RequestError::UnknownCommand);
        }
    }

    #[test]
    fn a_last_token_other_than_noreply_is_ignored_and_noreply_silences_errors() {
        assert!(matches!(
            parse(b"incr n 1 foo\r\n"),
            Ok((Request::Arith(Arith { noreply: false, .. }), _))
        ));
        assert!(rejected(b"incr n noreply\r\n").silent);
        assert!(rejected(b"incr n x noreply\r\n").silent);
        let long = format!("incr {} 1\r\n", "k".repeat(251));
        assert_eq!(
            rejected(long.as_bytes()).error.reply_line(),
            b"CLIENT_ERROR bad command line format\r\n"
        );
    }
}
