//! `flush_all [delay] [noreply]` and `verbosity <level> [noreply]`.

use bytes::BufMut;

use super::{put_i64, put_noreply, want_tokens, Refused, Request};
use crate::error::RequestError;
use crate::line::Words;
use crate::number::{strtol32, strtoul32};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushAll {
    /// As memcached reads it: a 32-bit number, widened.
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

/// As memcached's `process_flush_all_command`: 2 to 4 tokens (else `ERROR`); a delay is
/// read from the first argument whenever there is more than a lone `noreply` (so
/// `flush_all 10 20` waits 10 and `flush_all noreply 10` is a bad delay); noreply
/// silences the error.
pub(super) fn parse_flush_all<'a>(words: &Words<'a>) -> Result<Request<'a>, Refused> {
    want_tokens(words, &[2, 3, 4])?;
    let noreply = words.noreply();
    let bare = if noreply { 3 } else { 2 };
    let delay = if words.ntokens() == bare {
        None
    } else {
        let delay = strtol32(words.get(1)).ok_or(Refused::after_noreply(
            RequestError::InvalidExptime,
            noreply,
        ))?;
        Some(i64::from(delay))
    };
    Ok(Request::FlushAll(FlushAll { delay, noreply }))
}

/// As memcached's `process_verbosity_command`: 3 or 4 tokens (else `ERROR`, so a bare
/// `verbosity` is `ERROR`), then the level, a 32-bit unsigned number (else
/// `CLIENT_ERROR bad command line format`, silenced by noreply: `verbosity noreply`
/// gets no reply at all). A second argument other than `noreply` is ignored.
pub(super) fn parse_verbosity<'a>(words: &Words<'a>) -> Result<Request<'a>, Refused> {
    want_tokens(words, &[3, 4])?;
    let noreply = words.noreply();
    strtoul32(words.get(1)).ok_or(Refused::after_noreply(RequestError::BadFormat, noreply))?;
    Ok(Request::Verbosity { noreply })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, Invalid, Limits, ParseError};

    fn parse(input: &[u8]) -> Result<Request<'_>, ParseError> {
        parse_request(input, &Limits::default()).map(|(r, _)| r)
    }

    fn rejected(input: &[u8]) -> Invalid {
        match parse(input) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flush_all_takes_an_optional_delay_and_noreply() {
        let f = |delay, noreply| Ok(Request::FlushAll(FlushAll { delay, noreply }));
        assert_eq!(parse(b"flush_all\r\n"), f(None, false));
        assert_eq!(parse(b"flush_all 10\r\n"), f(Some(10), false));
        assert_eq!(parse(b"flush_all noreply\r\n"), f(None, true));
        assert_eq!(parse(b"flush_all 0 noreply\r\n"), f(Some(0), true));
        assert_eq!(parse(b"flush_all -1\r\n"), f(Some(-1), false));
    }

    #[test]
    fn flush_all_reads_its_first_argument_whenever_more_than_noreply_follows() {
        let f = |delay, noreply| Ok(Request::FlushAll(FlushAll { delay, noreply }));
        assert_eq!(parse(b"flush_all 10 20\r\n"), f(Some(10), false));
        let inv = rejected(b"flush_all noreply 10\r\n");
        assert_eq!(
            inv.error.reply_line(),
            b"CLIENT_ERROR invalid exptime argument\r\n"
        );
        assert!(!inv.silent);
        assert!(rejected(b"flush_all x noreply\r\n").silent);
        assert!(rejected(b"flush_all noreply noreply\r\n").silent);
        assert_eq!(
            rejected(b"flush_all 1 2 3\r\n").error,
            RequestError::UnknownCommand
        );
    }

    #[test]
    fn verbosity_is_error_without_a_level_or_with_more_than_two_arguments() {
        for input in [
            &b"verbosity\r\n"[..],
            b"verbosity foo bar my\r\n",
            b"verbosity 1 2 3 4\r\n",
        ] {
            let inv = rejected(input);
            assert_eq!(inv.error.reply_line(), b"ERROR\r\n", "{input:?}");
            assert!(!inv.silent);
        }
    }

    #[test]
    fn verbosity_noreply_gets_nothing_at_all() {
        let inv = rejected(b"verbosity noreply\r\n");
        assert_eq!(inv.error, RequestError::BadFormat);
        assert!(inv.silent);
        assert_eq!(inv.reply(), None);
        assert_eq!(
            parse(b"verbosity 1 noreply\r\n"),
            Ok(Request::Verbosity { noreply: true })
        );
    }

    #[test]
    fn verbosity_levels_are_memcacheds_numbers_and_a_second_argument_is_ignored() {
        for input in [
            &b"verbosity 1 2\r\n"[..],
            b"verbosity +3\r\n",
            b"verbosity 4294967296\r\n",
        ] {
            assert_eq!(
                parse(input),
                Ok(Request::Verbosity { noreply: false }),
                "{input:?}"
            );
        }
        for input in [&b"verbosity x\r\n"[..], b"verbosity -1\r\n"] {
            let inv = rejected(input);
            assert_eq!(
                inv.error.reply_line(),
                b"CLIENT_ERROR bad command line format\r\n"
            );
            assert!(!inv.silent);
        }
    }
}
