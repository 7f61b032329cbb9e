//! Client requests: one file per command family, each with the tests for its rules.

mod arith;
mod delete;
mod meta;
mod meta_codes;
pub mod meta_flags;
mod misc;
mod retrieval;
mod stats;
mod storage;
mod touch;

use bytes::BufMut;

use crate::error::{Discard, Invalid, ParseError, RequestError, Span, Unlink};
use crate::limits::Limits;
use crate::line::{scan_line, scan_line_to, LineScan, Words};

pub use arith::{Arith, ArithOp};
pub use delete::Delete;
pub use meta::Meta;
pub use meta_codes::{MetaCmd, MetaStatus};
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
    parse_scanned(buf, scan_line(buf, limits.max_line_len), limits)
}

/// [`parse_request`] for a caller that found the first newline of `buf` already (at
/// `newline`, which must be the first): the line is not searched again.
pub fn parse_request_to<'a>(
    buf: &'a [u8],
    newline: usize,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    parse_scanned(buf, scan_line_to(buf, newline, limits.max_line_len), limits)
}

fn parse_scanned<'a>(
    buf: &'a [u8],
    scan: LineScan<'a>,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let (line, line_len) = match scan {
        LineScan::Complete(line, len) => (line, len),
        LineScan::Incomplete => return Err(ParseError::Incomplete),
        LineScan::BareNewline(len) => {
            return Err(ParseError::invalid(RequestError::BareNewline, len))
        }
        LineScan::TooLong => {
            return Err(ParseError::Invalid(Invalid {
                then: Discard::ThroughNewline,
                ..Invalid::answered(RequestError::LineTooLong, limits.max_line_len + 2)
            }))
        }
    };
    // A quick `get` has no NUL (its key has no control byte): the search of the
    // whole line for one waits until the line is not such a `get`.
    if let Some(get) = retrieval::quick_get(line, limits) {
        return Ok((get, line_len));
    }
    if memchr::memchr(0, line).is_some() {
        return Err(ParseError::invalid(RequestError::NulInLine, line_len));
    }
    parse_line(buf, line, line_len, limits)
}

/// The request whose line (without its `\r\n`, `line_len` bytes with it) starts `buf`:
/// every command, as memcached reads it.
fn parse_line<'a>(
    buf: &'a [u8],
    line: &'a [u8],
    line_len: usize,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let words = Words::new(line);
    let command = words.get(0);
    // memcached knows no command shorter than two bytes.
    if command.len() < 2 {
        return Err(ParseError::invalid(RequestError::EmptyLine, line_len));
    }
    let args_start = command.as_ptr() as usize - line.as_ptr() as usize + command.len();
    let args = &line[args_start..];
    let at = LineAt { buf, line_len };
    let parsed = match command {
        b"get" | b"bget" => retrieval::parse(&words, args, false, limits),
        b"gets" => retrieval::parse(&words, args, true, limits),
        b"set" => return storage::parse(StoreOp::Set, &words, at, limits),
        b"add" => return storage::parse(StoreOp::Add, &words, at, limits),
        b"replace" => return storage::parse(StoreOp::Replace, &words, at, limits),
        b"append" => return storage::parse(StoreOp::Append, &words, at, limits),
        b"prepend" => return storage::parse(StoreOp::Prepend, &words, at, limits),
        b"cas" => return storage::parse(StoreOp::Cas, &words, at, limits),
        b"mg" => return meta::parse(MetaCmd::Get, args, at, limits),
        b"ms" => return meta::parse(MetaCmd::Set, args, at, limits),
        b"md" => return meta::parse(MetaCmd::Delete, args, at, limits),
        b"ma" => return meta::parse(MetaCmd::Arith, args, at, limits),
        b"me" => return meta::parse(MetaCmd::Debug, args, at, limits),
        b"mn" => return meta::parse(MetaCmd::Noop, args, at, limits),
        b"delete" => delete::parse(&words, limits),
        b"incr" => arith::parse(ArithOp::Incr, &words, limits),
        b"decr" => arith::parse(ArithOp::Decr, &words, limits),
        b"touch" => touch::parse(&words, limits),
        b"flush_all" => misc::parse_flush_all(&words),
        b"stats" => stats::parse(&words, trim_spaces(args)),
        // memcached reads no arguments of these two.
        b"version" => Ok(Request::Version),
        b"quit" => Ok(Request::Quit),
        b"verbosity" => misc::parse_verbosity(&words),
        _ if closes_as_http(&words) => {
            return Err(ParseError::Invalid(Invalid {
                then: Discard::Close,
                silent: true,
                ..Invalid::answered(RequestError::HttpRequest, line_len)
            }))
        }
        _ => Err(Refused::from(RequestError::UnknownCommand)),
    };
    parsed
        .map(|request| (request, line_len))
        .map_err(|refused| {
            ParseError::Invalid(Invalid {
                silent: refused.silent,
                ..Invalid::answered(refused.error, line_len)
            })
        })
}

/// A command line refused: the error, and whether the client's `noreply` silences it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Refused {
    error: RequestError,
    silent: bool,
}

impl Refused {
    /// memcached's classic commands read `noreply` first, and every error they find after
    /// that is silenced by it.
    fn after_noreply(error: RequestError, noreply: bool) -> Refused {
        Refused {
            error,
            silent: noreply,
        }
    }
}

impl From<RequestError> for Refused {
    fn from(error: RequestError) -> Self {
        Refused {
            error,
            silent: false,
        }
    }
}

/// memcached's tokens check as `WANT_TOKENS`: a known command with too few or too many
/// tokens is answered `ERROR`, before `noreply` is read (so never silenced).
fn want_tokens(words: &Words, allowed: &[usize]) -> Result<(), Refused> {
    if allowed.contains(&words.ntokens()) {
        Ok(())
    } else {
        Err(RequestError::UnknownCommand.into())
    }
}

/// `WANT_TOKENS_MIN`: at least `min`.
fn want_min_tokens(words: &Words, min: usize) -> Result<(), Refused> {
    if words.ntokens() >= min {
        Ok(())
    } else {
        Err(RequestError::UnknownCommand.into())
    }
}

/// memcached closes the connection, without a reply, on an unknown command whose last
/// token (as far as its tokenizer reads) starts with `HTTP/`: someone spoke HTTP to it.
/// It looks for that only after its dispatch found nothing, and its dispatch answers
/// every other command starting with g, s, a, c, i, d or t (or a two-byte one starting
/// with m) itself, with `ERROR` when unknown.
fn closes_as_http(words: &Words) -> bool {
    /// The commands memcached 1.6.18 (as Debian builds it) dispatches by full name.
    const BY_NAME: &[&[u8]] = &[
        b"replace",
        b"prepend",
        b"bget",
        b"flush_all",
        b"version",
        b"quit",
        b"lru_crawler",
        b"watch",
        b"verbosity",
        b"lru",
        b"extstore",
        b"refresh_certs",
    ];
    let command = words.get(0);
    let by_letter = matches!(command[0], b'g' | b's' | b'a' | b'c' | b'i' | b'd' | b't')
        || (command[0] == b'm' && command.len() == 2);
    !by_letter && !BY_NAME.contains(&command) && words.last().starts_with(b"HTTP/")
}

/// Where a command line ends inside the buffer (storage commands read data after it).
#[derive(Clone, Copy)]
struct LineAt<'a> {
    buf: &'a [u8],
    line_len: usize,
}

impl<'a> LineAt<'a> {
    /// Whether a value of `length` bytes is over the limit: memcached refuses it before
    /// reading it (`SERVER_ERROR object too large for cache`) and swallows its block.
    fn too_large(&self, length: u64, limits: &Limits) -> bool {
        length > limits.max_value_len as u64
    }

    /// The refusal of a value over the limit: the line answered, `length` + 2 more bytes
    /// swallowed, and the key's current value dropped.
    fn refuse_too_large(&self, length: u64, silent: bool, unlink: Option<Unlink>) -> ParseError {
        ParseError::Invalid(Invalid {
            then: Discard::Bytes(length + 2),
            silent,
            unlink,
            ..Invalid::answered(RequestError::ValueTooLarge, self.line_len)
        })
    }

    /// The `length`-byte data block announced on this line, and the bytes the whole
    /// request takes (line, block, CRLF). memcached reads exactly `length` + 2 bytes and
    /// then wants the last two to be `\r\n`; if they are not, it answers `bad data chunk`
    /// (`silent` when the client's noreply silences it) and reads the next command from
    /// the byte after them. So do we: a block longer than announced leaves its tail to be
    /// read as a command, as it is by memcached.
    fn data_block(&self, length: u64, silent: bool) -> Result<(&'a [u8], usize), ParseError> {
        let data_end = self.line_len + length as usize;
        let total = data_end + 2;
        if self.buf.len() < total {
            return Err(ParseError::Incomplete);
        }
        if &self.buf[data_end..total] != b"\r\n" {
            return Err(ParseError::Invalid(Invalid {
                silent,
                ..Invalid::answered(RequestError::BadDataChunk, total)
            }));
        }
        Ok((&self.buf[self.line_len..data_end], total))
    }

    /// Where `key` (a token of this line) lies in the buffer.
    fn span(&self, key: &[u8]) -> Span {
        Span::of(self.buf, key)
    }
}

/// memcached's one rule for a key: at most `KEY_MAX_LENGTH` (250) bytes.
fn check_key_length(key: &[u8], limits: &Limits) -> Result<(), RequestError> {
    if key.len() > limits.max_key_len {
        return Err(RequestError::KeyTooLong);
    }
    Ok(())
}

/// The proxy's own rule, checked after all of memcached's: no control characters in a
/// key (space already separates tokens).
fn check_key_bytes(key: &[u8]) -> Result<(), RequestError> {
    if key.iter().any(|&b| b < 0x21 || b == 0x7f) {
        return Err(RequestError::BadKey);
    }
    Ok(())
}

/// Both rules, memcached's first (the meta commands).
fn check_key(key: &[u8], limits: &Limits) -> Result<(), RequestError> {
    check_key_length(key, limits)?;
    check_key_bytes(key)
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
mod tests;
