//! `touch <key> <exptime> [noreply]`.

use bytes::BufMut;

use super::{check_key, put_i64, put_noreply, trailing_noreply, Request};
use crate::error::RequestError;
use crate::limits::Limits;
use crate::line::{parse_i64, tokens};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Touch<'a> {
    pub key: &'a [u8],
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

pub(super) fn parse<'a>(args: &'a [u8], limits: &Limits) -> Result<Request<'a>, RequestError> {
    let mut toks = tokens(args);
    let (Some(key), Some(exptime)) = (toks.next(), toks.next()) else {
        return Err(RequestError::BadFormat);
    };
    check_key(key, limits)?;
    let exptime = parse_i64(exptime).ok_or(RequestError::BadExptime)?;
    let noreply = trailing_noreply(toks)?;
    Ok(Request::Touch(Touch {
        key,
        exptime,
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

    #[test]
    fn touch_with_a_bad_exptime_is_rejected() {
        assert!(matches!(
            parse_request(b"touch k soon\r\n", &Limits::default()),
            Err(ParseError::Invalid(i)) if i.error == RequestError::BadExptime
        ));
    }
}
