//! `touch <key> <exptime> [noreply]`.

use bytes::BufMut;

use super::{
    check_key_bytes, check_key_length, put_i64, put_noreply, want_tokens, Refused, Request,
};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::Words;
use crate::number::strtol32;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch<'a> {
    pub key: &'a [u8],
    /// As memcached reads it: a 32-bit number, widened.
    pub exptime: i64,
    pub noreply: bool,
}

impl Touch<'_> {
    pub fn compose(&self, out: &mut impl BufMut) {
        out.put_slice(b"touch ");
        out.put_slice(self.key);
        out.put_u8(b' ');
        put_i64(out, self.exptime);
        put_noreply(out, self.noreply);
        out.put_slice(b"\r\n");
    }
}

/// As memcached's `process_touch_command`: 4 or 5 tokens (else `ERROR`), then the key's
/// length and the expiration time, errors silenced by noreply.
pub(super) fn parse<'a>(words: &Words<'a>, limits: &Limits) -> Result<Request<'a>, Refused> {
    want_tokens(words, &[4, 5])?;
    let noreply = words.noreply();
    let refuse = |error| Refused::after_noreply(error, noreply);
    let key = words.get(1);
    check_key_length(key, limits).map_err(refuse)?;
    let exptime = strtol32(words.get(2)).ok_or(refuse(RequestError::InvalidExptime))?;
    check_key_bytes(key).map_err(refuse)?;
    Ok(Request::Touch(Touch {
        key,
        exptime: i64::from(exptime),
        noreply,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, ParseError};

    #[test]
    fn touch_takes_a_key_and_a_signed_exptime() {
        assert_eq!(
            parse_request(b"touch k -5 noreply\r\n", &Limits::default()),
            Ok((
                Request::Touch(Touch {
                    key: b"k",
                    exptime: -5,
                    noreply: true
                }),
                20
            ))
        );
    }

    fn rejected(input: &[u8]) -> crate::Invalid {
        match parse_request(input, &Limits::default()) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn touch_with_a_bad_exptime_is_rejected_with_memcacheds_line() {
        let inv = rejected(b"touch k soon\r\n");
        assert_eq!(
            inv.error.reply_line(),
            b"CLIENT_ERROR invalid exptime argument\r\n"
        );
        assert!(!inv.silent);
        assert!(rejected(b"touch k soon noreply\r\n").silent);
        assert!(
            rejected(b"touch k 99999999999999999999\r\n").error == RequestError::InvalidExptime
        );
    }

    #[test]
    fn touch_takes_4_or_5_tokens_and_ignores_a_last_one_other_than_noreply() {
        assert_eq!(rejected(b"touch k\r\n").error, RequestError::UnknownCommand);
        assert_eq!(
            rejected(b"touch k 1 2 3\r\n").error,
            RequestError::UnknownCommand
        );
        assert!(matches!(
            parse_request(b"touch k 1 foo\r\n", &Limits::default()),
            Ok((
                Request::Touch(Touch {
                    noreply: false,
                    exptime: 1,
                    ..
                }),
                _
            ))
        ));
    }
}
