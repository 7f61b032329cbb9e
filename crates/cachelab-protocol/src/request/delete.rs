//! `delete <key> [0] [noreply]` (the legacy time argument is accepted only as `0`, as in
//! memcached 1.6).

use bytes::BufMut;

use super::{check_key, put_noreply, trailing_noreply, Request};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::tokens;

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

pub(super) fn parse<'a>(args: &'a [u8], limits: &Limits) -> Result<Request<'a>, RequestError> {
    let mut toks = tokens(args).peekable();
    let key = toks.next().ok_or(RequestError::BadFormat)?;
    check_key(key, limits)?;
    if toks.peek() == Some(&&b"0"[..]) {
        toks.next();
    }
    let noreply = trailing_noreply(toks)?;
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
        assert!(matches!(
            parse(b"delete k 10\r\n"),
            Err(ParseError::Invalid(i)) if i.error == RequestError::BadFormat
        ));
    }

    #[test]
    fn delete_without_key_is_a_format_error() {
        assert!(matches!(
            parse(b"delete\r\n"),
            Err(ParseError::Invalid(i)) if i.error == RequestError::BadFormat
        ));
    }
}
