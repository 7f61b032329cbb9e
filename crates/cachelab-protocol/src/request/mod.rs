//! Client requests: one file per command family, each with the tests for its rules.

mod arith;
mod delete;
mod meta;
pub mod meta_flags;
mod misc;
mod retrieval;
mod storage;
mod touch;

use bytes::BufMut;

use crate::error::{Discard, Invalid, ParseError, RequestError};
use crate::limits::Limits;
use crate::line::{scan_line, tokens, LineScan};

pub use arith::{Arith, ArithOp};
pub use delete::Delete;
pub use meta::{Meta, MetaCmd, MetaStatus};
pub use misc::FlushAll;
pub use retrieval::{Get, Keys};
pub use storage::{Store, StoreOp};
pub use touch::Touch;

/// A parsed request, borrowing keys and data from the input buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// `get` (`cas == false`) or `gets` (`cas == true`), with one or more keys.
    Get(Get<'a>),
    /// set, add, replace, append, prepend, cas.
    Store(Store<'a>),
    Delete(Delete<'a>),
    /// incr, decr.
    Arith(Arith<'a>),
    Touch(Touch<'a>),
    FlushAll(FlushAll),
    /// The meta commands: mg, ms, md, ma, me, mn.
    Meta(Meta<'a>),
    /// `stats` with its (possibly empty) argument text.
    Stats(&'a [u8]),
    Version,
    Verbosity {
        noreply: bool,
    },
    Quit,
}

impl Request<'_> {
    /// Whether the client asked for no reply.
    pub fn noreply(&self) -> bool {
        match self {
            Request::Store(s) => s.noreply,
            Request::Delete(d) => d.noreply,
            Request::Arith(a) => a.noreply,
            Request::Touch(t) => t.noreply,
            Request::FlushAll(f) => f.noreply,
            Request::Verbosity { noreply } => *noreply,
            Request::Get(_)
            | Request::Meta(_)
            | Request::Stats(_)
            | Request::Version
            | Request::Quit => false,
        }
    }

    /// Writes the request in canonical form (single spaces, `\r\n` terminators).
    pub fn compose(&self, out: &mut impl BufMut) {
        match self {
            Request::Get(g) => g.compose(out),
            Request::Store(s) => s.compose(out),
            Request::Delete(d) => d.compose(out),
            Request::Arith(a) => a.compose(out),
            Request::Touch(t) => t.compose(out),
            Request::FlushAll(f) => f.compose(out),
            Request::Meta(m) => m.compose(out),
            Request::Stats(args) => {
                out.put_slice(b"stats");
                if !args.is_empty() {
                    out.put_u8(b' ');
                    out.put_slice(args);
                }
                out.put_slice(b"\r\n");
            }
            Request::Version => out.put_slice(b"version\r\n"),
            Request::Verbosity { noreply } => {
                out.put_slice(b"verbosity 1");
                put_noreply(out, *noreply);
                out.put_slice(b"\r\n");
            }
            Request::Quit => out.put_slice(b"quit\r\n"),
        }
    }
}

/// Parses the request at the front of `buf`.
///
/// Returns the request and the number of bytes it occupies, [`ParseError::Incomplete`] if
/// more bytes are needed, or [`ParseError::Invalid`] with the error to answer and the bytes
/// to discard. Every `Invalid` consumes at least one byte, so a caller that loops on this
/// function always makes progress.
pub fn parse_request<'a>(
    buf: &'a [u8],
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let (line, line_len) = match scan_line(buf, limits.max_line_len) {
        LineScan::Complete(line, len) => (line, len),
        LineScan::Incomplete => return Err(ParseError::Incomplete),
        LineScan::BareNewline(len) => {
            return Err(ParseError::invalid(RequestError::BareNewline, len))
        }
        LineScan::TooLong => {
            return Err(ParseError::Invalid(Invalid {
                error: RequestError::LineTooLong,
                consumed: limits.max_line_len + 2,
                then: Discard::ThroughNewline,
            }))
        }
    };
    if memchr::memchr(0, line).is_some() {
        return Err(ParseError::invalid(RequestError::NulInLine, line_len));
    }
    let Some(command) = tokens(line).next() else {
        return Err(ParseError::invalid(RequestError::EmptyLine, line_len));
    };
    let args_start = command.as_ptr() as usize - line.as_ptr() as usize + command.len();
    let args = &line[args_start..];
    let at = LineAt { buf, line_len };
    let parsed = match command {
        b"get" => retrieval::parse(args, false, limits),
        b"gets" => retrieval::parse(args, true, limits),
        b"set" => return storage::parse(StoreOp::Set, args, at, limits),
        b"add" => return storage::parse(StoreOp::Add, args, at, limits),
        b"replace" => return storage::parse(StoreOp::Replace, args, at, limits),
        b"append" => return storage::parse(StoreOp::Append, args, at, limits),
        b"prepend" => return storage::parse(StoreOp::Prepend, args, at, limits),
        b"cas" => return storage::parse(StoreOp::Cas, args, at, limits),
        b"mg" => return meta::parse(MetaCmd::Get, args, at, limits),
        b"ms" => return meta::parse(MetaCmd::Set, args, at, limits),
        b"md" => return meta::parse(MetaCmd::Delete, args, at, limits),
        b"ma" => return meta::parse(MetaCmd::Arith, args, at, limits),
        b"me" => return meta::parse(MetaCmd::Debug, args, at, limits),
        b"mn" => return meta::parse(MetaCmd::Noop, args, at, limits),
        b"delete" => delete::parse(args, limits),
        b"incr" => arith::parse(ArithOp::Incr, args, limits),
        b"decr" => arith::parse(ArithOp::Decr, args, limits),
        b"touch" => touch::parse(args, limits),
        b"flush_all" => misc::parse_flush_all(args),
        b"stats" => Ok(Request::Stats(trim_spaces(args))),
        b"version" => Ok(Request::Version),
        b"verbosity" => misc::parse_verbosity(args),
        b"quit" => Ok(Request::Quit),
        _ => Err(RequestError::UnknownCommand),
    };
    parsed
        .map(|request| (request, line_len))
        .map_err(|error| ParseError::invalid(error, line_len))
}

/// Where a command line ends inside the buffer (storage commands read data after it).
#[derive(Clone, Copy)]
struct LineAt<'a> {
    buf: &'a [u8],
    line_len: usize,
}

impl<'a> LineAt<'a> {
    /// The `length`-byte data block announced on this line, and the bytes the whole
    /// request takes (line, block, CRLF). A block over the value limit is swallowed, as
    /// memcached does, so the connection stays in step; a block longer or shorter than
    /// announced is dropped and the stream resynchronises at the next newline after it.
    fn data_block(&self, length: u64, limits: &Limits) -> Result<(&'a [u8], usize), ParseError> {
        if length > limits.max_value_len as u64 {
            return Err(ParseError::Invalid(Invalid {
                error: RequestError::ValueTooLarge,
                consumed: self.line_len,
                then: Discard::Bytes(length + 2),
            }));
        }
        let data_end = self.line_len + length as usize;
        let total = data_end + 2;
        if self.buf.len() < total {
            return Err(ParseError::Incomplete);
        }
        if &self.buf[data_end..total] != b"\r\n" {
            return Err(match memchr::memchr(b'\n', &self.buf[data_end..]) {
                Some(i) => ParseError::invalid(RequestError::BadDataChunk, data_end + i + 1),
                None => ParseError::Invalid(Invalid {
                    error: RequestError::BadDataChunk,
                    consumed: self.buf.len(),
                    then: Discard::ThroughNewline,
                }),
            });
        }
        Ok((&self.buf[self.line_len..data_end], total))
    }
}

/// Checks a key against the protocol's rules: not empty, within the limit, and free of
/// control characters (space already separates tokens).
fn check_key(key: &[u8], limits: &Limits) -> Result<(), RequestError> {
    if key.len() > limits.max_key_len {
        return Err(RequestError::KeyTooLong);
    }
    if key.iter().any(|&b| b < 0x21 || b == 0x7f) {
        return Err(RequestError::BadKey);
    }
    Ok(())
}

/// Reads the optional trailing `noreply`; anything else there is a format error.
fn trailing_noreply<'a>(mut rest: impl Iterator<Item = &'a [u8]>) -> Result<bool, RequestError> {
    let noreply = match rest.next() {
        None => false,
        Some(b"noreply") => true,
        Some(_) => return Err(RequestError::BadFormat),
    };
    if rest.next().is_some() {
        return Err(RequestError::BadFormat);
    }
    Ok(noreply)
}

fn trim_spaces(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| *b != b' ').unwrap_or(s.len());
    let end = s.iter().rposition(|b| *b != b' ').map_or(start, |i| i + 1);
    &s[start..end]
}

fn put_noreply(out: &mut impl BufMut, noreply: bool) {
    if noreply {
        out.put_slice(b" noreply");
    }
}

fn put_u64(out: &mut impl BufMut, value: u64) {
    out.put_slice(itoa::Buffer::new().format(value).as_bytes());
}

fn put_i64(out: &mut impl BufMut, value: i64) {
    out.put_slice(itoa::Buffer::new().format(value).as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<(Request<'_>, usize), ParseError> {
        parse_request(input, &Limits::default())
    }

    fn rejected(input: &[u8]) -> Invalid {
        match parse(input) {
            Err(ParseError::Invalid(invalid)) => invalid,
            other => panic!("expected a rejection for {input:?}, got {other:?}"),
        }
    }

    #[test]
    fn unknown_command_is_answered_with_error_and_the_line_is_dropped() {
        let inv = rejected(b"bogus a b\r\nget a\r\n");
        assert_eq!(inv.error.reply_line(), b"ERROR\r\n");
        assert_eq!(inv.consumed, 11);
        assert_eq!(inv.then, Discard::Nothing);
    }

    #[test]
    fn commands_are_case_sensitive_like_memcached() {
        assert_eq!(rejected(b"GET a\r\n").error, RequestError::UnknownCommand);
    }

    #[test]
    fn empty_line_is_an_error() {
        assert_eq!(rejected(b"\r\n").error, RequestError::EmptyLine);
        assert_eq!(rejected(b"   \r\n").error, RequestError::EmptyLine);
    }

    #[test]
    fn bare_newline_is_rejected_and_only_that_line_is_dropped() {
        let inv = rejected(b"get a\nget b\r\n");
        assert_eq!(inv.error, RequestError::BareNewline);
        assert_eq!(inv.consumed, 6);
    }

    #[test]
    fn line_without_newline_over_the_limit_is_dropped_through_the_next_newline() {
        let limits = Limits {
            max_line_len: 16,
            ..Limits::default()
        };
        let input = [b'x'; 40];
        let Err(ParseError::Invalid(inv)) = parse_request(&input, &limits) else {
            panic!("expected rejection");
        };
        assert_eq!(inv.error, RequestError::LineTooLong);
        assert_eq!(inv.consumed, 18);
        assert_eq!(inv.then, Discard::ThroughNewline);
    }

    #[test]
    fn incomplete_line_waits_for_more() {
        assert_eq!(parse(b"get a"), Err(ParseError::Incomplete));
        assert_eq!(parse(b""), Err(ParseError::Incomplete));
    }

    #[test]
    fn stats_version_quit_verbosity_parse() {
        assert_eq!(parse(b"stats\r\n"), Ok((Request::Stats(b""), 7)));
        assert_eq!(
            parse(b"stats  settings \r\n"),
            Ok((Request::Stats(b"settings"), 18))
        );
        assert_eq!(parse(b"version\r\n"), Ok((Request::Version, 9)));
        assert_eq!(parse(b"quit\r\n"), Ok((Request::Quit, 6)));
        assert_eq!(
            parse(b"verbosity 1 noreply\r\n"),
            Ok((Request::Verbosity { noreply: true }, 21))
        );
    }

    #[test]
    fn keys_with_control_characters_are_rejected() {
        assert_eq!(rejected(b"get a\tb\r\n").error, RequestError::BadKey);
        assert_eq!(rejected(b"get a\x7fb\r\n").error, RequestError::BadKey);
        assert_eq!(rejected(b"delete a\x01\r\n").error, RequestError::BadKey);
    }
}
