//! `flush_all [delay] [noreply]` and `verbosity <level> [noreply]`.

use bytes::BufMut;

use super::{put_i64, put_noreply, trailing_noreply, Request};
use crate::error::RequestError;
use crate::line::{parse_i64, parse_u32, tokens};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushAll {
    pub delay: Option<i64>,
    pub noreply: bool,
}

impl FlushAll {
    pub fn compose(&self, out: &mut impl BufMut) {
        out.put_slice(b"flush_all");
        if let Some(delay) = self.delay {
            out.put_u8(b' ');
            put_i64(out, delay);
        }
        put_noreply(out, self.noreply);
        out.put_slice(b"\r\n");
    }
}

pub(super) fn parse_flush_all(args: &[u8]) -> Result<Request<'_>, RequestError> {
    let mut toks = tokens(args).peekable();
    let delay = match toks.peek() {
        Some(t) if *t != b"noreply" => {
            let delay = parse_i64(t).ok_or(RequestError::BadExptime)?;
            toks.next();
            Some(delay)
        }
        _ => None,
    };
    let noreply = trailing_noreply(toks)?;
    Ok(Request::FlushAll(FlushAll { delay, noreply }))
}

pub(super) fn parse_verbosity(args: &[u8]) -> Result<Request<'_>, RequestError> {
    let mut toks = tokens(args);
    toks.next()
        .and_then(parse_u32)
        .ok_or(RequestError::BadFormat)?;
    let noreply = trailing_noreply(toks)?;
    Ok(Request::Verbosity { noreply })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, Limits};

    #[test]
    fn flush_all_takes_an_optional_delay_and_noreply() {
        let parse = |s: &'static [u8]| parse_request(s, &Limits::default()).map(|(r, _)| r);
        let f = |delay, noreply| Ok(Request::FlushAll(FlushAll { delay, noreply }));
        assert_eq!(parse(b"flush_all\r\n"), f(None, false));
        assert_eq!(parse(b"flush_all 10\r\n"), f(Some(10), false));
        assert_eq!(parse(b"flush_all noreply\r\n"), f(None, true));
        assert_eq!(parse(b"flush_all 0 noreply\r\n"), f(Some(0), true));
    }
}
