//! `delete <key> [0] [noreply]` (the legacy time argument is accepted only as `0`, as in
//! memcached 1.6, which answers anything else there with a usage line).

use bytes::BufMut;

use super::{check_key_bytes, check_key_length, put_noreply, want_tokens, Refused, Request};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::Words;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Delete<'a> {
    pub key: &'a [u8],
    pub noreply: bool,
}

impl Delete<'_> {
    pub fn compose(&self, out: &mut impl BufMut) {
        out.put_slice(b"delete ");
        out.put_slice(self.key);
        put_noreply(out, self.noreply);
        out.put_slice(b"\r\n");
    }
}

/// As memcached's `process_delete_command`: 3 to 5 tokens (else `ERROR`); past the key,
/// only `0`, `noreply` or `0 noreply` (else the usage line); then the key's length.
/// noreply silences both errors.
pub(super) fn parse<'a>(words: &Words<'a>, limits: &Limits) -> Result<Request<'a>, Refused> {
    want_tokens(words, &[3, 4, 5])?;
    let ntokens = words.ntokens();
    // memcached reads noreply only when there is something after the key.
    let noreply = ntokens > 3 && words.noreply();
    let refuse = |error| Refused::after_noreply(error, noreply);
    if ntokens > 3 {
        let hold_is_zero = words.get(2) == b"0";
        let valid = (ntokens == 4 && (hold_is_zero || noreply))
            || (ntokens == 5 && hold_is_zero && noreply);
        if !valid {
            return Err(refuse(RequestError::DeleteUsage));
        }
    }
    let key = words.get(1);
    check_key_length(key, limits).map_err(refuse)?;
    check_key_bytes(key).map_err(refuse)?;
    Ok(Request::Delete(Delete { key, noreply }))
}

#[cfg(test)]
mod tests {
    use crate::{parse_request, Delete, Limits, ParseError, Request, RequestError};

    fn parse(input: &[u8]) -> Result<(Request<'_>, usize), ParseError> {
        parse_request(input, &Limits::default())
    }

    #[test]
    fn delete_takes_a_key_and_optional_noreply() {
        let d = |key, noreply| Ok((Request::Delete(Delete { key, noreply }), 0));
        let strip = |r: Result<(Request<'static>, usize), ParseError>| r.map(|(r, _)| (r, 0));
        assert_eq!(strip(parse(b"delete k\r\n")), d(b"k", false));
        assert_eq!(strip(parse(b"delete k noreply\r\n")), d(b"k", true));
    }

    #[test]
    fn legacy_zero_time_is_accepted_other_times_are_not() {
        assert!(matches!(
            parse(b"delete k 0\r\n"),
            Ok((Request::Delete(_), 12))
        ));
        assert!(matches!(
            parse(b"delete k 0 noreply\r\n"),
            Ok((Request::Delete(Delete { noreply: true, .. }), _))
        ));
        for (input, silent) in [
            (&b"delete k 10\r\n"[..], false),
            (b"delete k 00\r\n", false),
            (b"delete k 0 0\r\n", false),
            (b"delete k noreply 0\r\n", false),
            (b"delete k 5 noreply\r\n", true),
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error, RequestError::DeleteUsage, "{input:?}");
            assert_eq!(inv.silent, silent, "{input:?}");
        }
        assert_eq!(
            RequestError::DeleteUsage.reply_line(),
            b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
        );
    }

    fn rejected(input: &[u8]) -> crate::Invalid {
        match parse(input) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn delete_without_a_key_or_with_too_many_tokens_is_error() {
        assert_eq!(rejected(b"delete\r\n").error, RequestError::UnknownCommand);
        assert_eq!(
            rejected(b"delete k a b c\r\n").error,
            RequestError::UnknownCommand
        );
    }

    #[test]
    fn a_long_key_is_a_format_error_silenced_by_noreply() {
        let long = "k".repeat(251);
        let inv = rejected(format!("delete {long}\r\n").as_bytes());
        assert_eq!(
            inv.error.reply_line(),
            b"CLIENT_ERROR bad command line format\r\n"
        );
        assert!(rejected(format!("delete {long} 0 noreply\r\n").as_bytes()).silent);
    }
}
