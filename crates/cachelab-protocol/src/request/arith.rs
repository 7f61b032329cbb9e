//! `incr <key> <delta> [noreply]` and `decr <key> <delta> [noreply]`; delta is a 64-bit
//! unsigned decimal.

use bytes::BufMut;

use super::{check_key, put_noreply, put_u64, trailing_noreply, Request};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::{parse_u64, tokens};

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

pub(super) fn parse<'a>(
    op: ArithOp,
    args: &'a [u8],
    limits: &Limits,
) -> Result<Request<'a>, RequestError> {
    let mut toks = tokens(args);
    let (Some(key), Some(delta)) = (toks.next(), toks.next()) else {
        return Err(RequestError::BadFormat);
    };
    check_key(key, limits)?;
    let delta = parse_u64(delta).ok_or(RequestError::BadDelta)?;
    let noreply = trailing_noreply(toks)?;
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
    use crate::{parse_request, ParseError};

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

    #[test]
    fn negative_or_non_numeric_delta_is_rejected() {
        for input in [
            &b"incr n -1\r\n"[..],
            b"incr n x\r\n",
            b"decr n 18446744073709551616\r\n",
        ] {
            assert!(matches!(
                parse(input),
                Err(ParseError::Invalid(i)) if i.error == RequestError::BadDelta
            ));
        }
    }

    #[test]
    fn incr_without_delta_is_a_format_error() {
        assert!(matches!(
            parse(b"incr n\r\n"),
            Err(ParseError::Invalid(i)) if i.error == RequestError::BadFormat
        ));
    }
}
