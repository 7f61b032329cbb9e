//! `stats [<subcommand> <arguments>*]`: which arguments memcached 1.6.18 (as Debian
//! builds it, with extstore) serves and which it refuses, with its lines for each.
//!
//! A proxy that answers `stats` itself must still refuse what memcached refuses, with
//! memcached's line; what it serves for the rest is the caller's business.

use super::{Refused, Request};
use crate::error::RequestError;
use crate::line::Words;
use crate::number::strtoul32;

/// memcached's `MAX_NUMBER_OF_SLAB_CLASSES`: `stats cachedump` of a class id at or above
/// it is refused.
const SLAB_CLASSES: u32 = 64;

/// Subcommands memcached answers with a list of statistics (or `RESET`, `OK`).
const SERVED: &[&[u8]] = &[
    b"reset",
    b"settings",
    b"conns",
    b"extstore",
    b"items",
    b"slabs",
    b"sizes",
    b"sizes_enable",
    b"sizes_disable",
];

/// `args` is the text after `stats`, trimmed.
pub(super) fn parse<'a>(words: &Words<'a>, args: &'a [u8]) -> Result<Request<'a>, Refused> {
    let ntokens = words.ntokens();
    if ntokens == 2 {
        return Ok(Request::Stats(b""));
    }
    let refuse = |error: RequestError| Err(Refused::from(error));
    match words.get(1) {
        sub if SERVED.contains(&sub) => {}
        b"detail" => {
            if !matches!(words.get(2), b"on" | b"off" | b"dump") {
                return refuse(RequestError::StatsDetailUsage);
            }
        }
        b"cachedump" => {
            if ntokens < 5 {
                return refuse(RequestError::StatsMissingArgs);
            }
            let (Some(id), Some(_limit)) = (strtoul32(words.get(2)), strtoul32(words.get(3)))
            else {
                return refuse(RequestError::BadFormat);
            };
            if id >= SLAB_CLASSES {
                return refuse(RequestError::IllegalSlabId);
            }
        }
        _ => return refuse(RequestError::UnknownCommand),
    }
    Ok(Request::Stats(args))
}

#[cfg(test)]
mod tests {
    use crate::{parse_request, Limits, ParseError, Request, RequestError};

    fn parse(input: &[u8]) -> Result<Request<'_>, RequestError> {
        match parse_request(input, &Limits::default()) {
            Ok((request, _)) => Ok(request),
            Err(ParseError::Invalid(inv)) => {
                assert!(!inv.silent);
                Err(inv.error)
            }
            Err(ParseError::Incomplete) => panic!("incomplete"),
        }
    }

    #[test]
    fn plain_stats_and_the_subcommands_memcached_serves_are_requests() {
        assert_eq!(parse(b"stats\r\n"), Ok(Request::Stats(b"")));
        assert_eq!(parse(b"stats  \r\n"), Ok(Request::Stats(b"")));
        for args in [
            "settings",
            "items",
            "reset x",
            "detail on",
            "detail dump x",
            "cachedump 1 1",
            "cachedump 4294967296 1",
            "extstore",
        ] {
            let input = format!("stats {args}\r\n");
            assert_eq!(
                parse(input.as_bytes()),
                Ok(Request::Stats(args.as_bytes())),
                "{args}"
            );
        }
    }

    #[test]
    fn an_unknown_subcommand_is_error() {
        assert_eq!(parse(b"stats foo\r\n"), Err(RequestError::UnknownCommand));
        assert_eq!(parse(b"stats proxy\r\n"), Err(RequestError::UnknownCommand));
        assert_eq!(
            parse(b"stats a b c d e\r\n"),
            Err(RequestError::UnknownCommand)
        );
    }

    #[test]
    fn detail_and_cachedump_arguments_get_memcacheds_lines() {
        let line = |input: &[u8]| parse(input).unwrap_err().reply_line();
        assert_eq!(
            line(b"stats detail\r\n"),
            b"CLIENT_ERROR usage: stats detail on|off|dump\r\n"
        );
        assert_eq!(
            line(b"stats detail x\r\n"),
            b"CLIENT_ERROR usage: stats detail on|off|dump\r\n"
        );
        assert_eq!(
            line(b"stats cachedump 1\r\n"),
            b"CLIENT_ERROR bad command line\r\n"
        );
        assert_eq!(
            line(b"stats cachedump x y\r\n"),
            b"CLIENT_ERROR bad command line format\r\n"
        );
        assert_eq!(
            line(b"stats cachedump 64 1\r\n"),
            b"CLIENT_ERROR Illegal slab id\r\n"
        );
    }
}
