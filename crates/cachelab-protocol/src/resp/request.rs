//! RESP2 requests read as Redis reads them (`processMultibulkBuffer` and
//! `processInlineBuffer` in Redis 7's `networking.c`), so that a proxy and the server
//! behind it agree on where every command starts and ends.
//!
//! - A request starting with `*` is an array of bulk strings: `*<n>\r\n` then
//!   `$<len>\r\n<bytes>\r\n` per argument. Arguments borrow from the buffer.
//! - Anything else is an inline command: one line, split on blanks, with Redis's
//!   quoting rules (`"..."` with `\n`, `\xHH`... escapes; `'...'` with `\'`).
//!
//! Where Redis is lenient, this parser is lenient the same way, because rejecting what
//! Redis accepts would break clients that work against Redis: a header line ends at its
//! `\r` whatever byte follows it, the two bytes after a bulk string are skipped without
//! being checked, an inline line may end in a bare `\n`, and an inline line stops at a
//! NUL byte. An empty array (`*0`, `*-1`) and a blank inline line are empty commands,
//! which Redis skips without a reply.
//!
//! Every rejection is a protocol error after which Redis answers one `-ERR Protocol
//! error: ...` line and closes the connection: nothing after a torn frame can be trusted
//! to be in step.

use std::borrow::Cow;

use bytes::BufMut;
use thiserror::Error;

use super::compose::{put_array_header, put_bulk};

/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest inline line, and the longest header line
/// (`*<n>`, `$<len>`) Redis waits for before calling the client broken.
pub const MAX_INLINE_LEN: usize = 64 * 1024;
/// Arguments in one command. Redis allows up to `INT_MAX`; a proxy buffering a command
/// before it routes it wants a bound that a client cannot make it allocate past.
pub const DEFAULT_MAX_ARGS: usize = 1024 * 1024;

/// The limits a request parser enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespLimits {
    /// Most arguments in one array (the command name included).
    pub max_args: usize,
    /// Longest bulk string (Redis's `proto-max-bulk-len`, 512 MiB by default).
    pub max_bulk_len: usize,
    /// Longest inline line and header line.
    pub max_inline_len: usize,
}

impl Default for RespLimits {
    fn default() -> Self {
        RespLimits {
            max_args: DEFAULT_MAX_ARGS,
            max_bulk_len: super::MAX_BULK_LEN,
            max_inline_len: MAX_INLINE_LEN,
        }
    }
}

/// Why a request is a protocol error, with Redis's own texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RespRequestError {
    #[error("Protocol error: too big inline request")]
    TooBigInline,
    #[error("Protocol error: unbalanced quotes in request")]
    UnbalancedQuotes,
    #[error("Protocol error: too big mbulk count string")]
    TooBigMbulkCount,
    #[error("Protocol error: invalid multibulk length")]
    InvalidMultibulkLength,
    #[error("Protocol error: too big bulk count string")]
    TooBigBulkCount,
    /// An argument did not start with `$`; Redis names the byte it found.
    #[error("Protocol error: expected '$', got '{}'", printable(*.0))]
    ExpectedDollar(u8),
    #[error("Protocol error: invalid bulk length")]
    InvalidBulkLength,
}

/// Redis writes error replies on one line: a CR or LF it would print becomes a space.
fn printable(byte: u8) -> char {
    match byte {
        b'\r' | b'\n' => ' ',
        other => char::from(other),
    }
}

impl RespRequestError {
    /// Writes the error reply, `-ERR <text>\r\n`, as Redis sends it before closing.
    pub fn put_reply(self, out: &mut impl BufMut) {
        out.put_slice(b"-ERR ");
        match self {
            // The byte goes out as it came (Display would widen it to UTF-8).
            RespRequestError::ExpectedDollar(byte) => {
                out.put_slice(b"Protocol error: expected '$', got '");
                out.put_u8(match byte {
                    b'\r' | b'\n' => b' ',
                    other => other,
                });
                out.put_u8(b'\'');
            }
            _ => out.put_slice(self.to_string().as_bytes()),
        }
        out.put_slice(b"\r\n");
    }
}

/// A request that is a protocol error: the reply to send before closing, and the bytes
/// read up to the point where it went wrong (at least one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RespInvalid {
    pub error: RespRequestError,
    pub consumed: usize,
}

/// The outcome of parsing that did not produce a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RespParseError {
    /// The buffer holds the start of a request; wait for more bytes.
    #[error("incomplete request")]
    Incomplete,
    #[error("invalid request: {}", .0.error)]
    Invalid(RespInvalid),
}

/// One command: its name and arguments, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command<'a> {
    args: Vec<Cow<'a, [u8]>>,
    inline: bool,
}

impl<'a> Command<'a> {
    /// A command from its arguments, as a client composing an array would send it.
    pub fn new(args: Vec<Cow<'a, [u8]>>) -> Command<'a> {
        Command {
            args,
            inline: false,
        }
    }

    /// The name and the arguments; empty for an empty command.
    pub fn args(&self) -> &[Cow<'a, [u8]>] {
        &self.args
    }

    pub fn arg(&self, index: usize) -> Option<&[u8]> {
        self.args.get(index).map(|a| &a[..])
    }

    /// The command name as sent (Redis matches it case-insensitively).
    pub fn name(&self) -> Option<&[u8]> {
        self.arg(0)
    }

    /// An empty array or a blank inline line: Redis skips it and answers nothing.
    pub fn is_empty(&self) -> bool {
        self.args.is_empty()
    }

    /// Whether the client sent it inline; servers get it as an array either way.
    pub fn is_inline(&self) -> bool {
        self.inline
    }

    /// Writes the command as an array of bulk strings (how it goes to a server).
    pub fn compose(&self, out: &mut impl BufMut) {
        put_array_header(out, self.args.len());
        for arg in &self.args {
            put_bulk(out, arg);
        }
    }

    /// An owned copy, to keep beyond the buffer it was parsed from.
    pub fn into_owned(self) -> Command<'static> {
        Command {
            args: self
                .args
                .into_iter()
                .map(|a| Cow::Owned(a.into_owned()))
                .collect(),
            inline: self.inline,
        }
    }
}

/// Parses the request at the front of `buf`: the command and the bytes it occupies,
/// [`RespParseError::Incomplete`] if more bytes are needed, or
/// [`RespParseError::Invalid`] with the error to answer before closing the connection.
pub fn parse_command<'a>(
    buf: &'a [u8],
    limits: &RespLimits,
) -> Result<(Command<'a>, usize), RespParseError> {
    match buf.first() {
        None => Err(RespParseError::Incomplete),
        Some(b'*') => parse_multibulk(buf, limits),
        Some(_) => parse_inline(buf, limits),
    }
}

fn invalid(error: RespRequestError, consumed: usize) -> RespParseError {
    RespParseError::Invalid(RespInvalid {
        error,
        consumed: consumed.max(1),
    })
}

/// The header line starting at `start` (`*<n>` or `$<len>`): its digits, and where the
/// next element starts. Redis looks for the `\r` and skips it and the byte after it.
enum Header<'a> {
    Line(&'a [u8], usize),
    Incomplete,
    TooLong,
}

fn header(buf: &[u8], start: usize, max_len: usize) -> Header<'_> {
    let rest = &buf[start..];
    let window = &rest[..rest.len().min(max_len)];
    // Redis looks for the `\r` with `strchr`, which stops at a NUL byte: a NUL before
    // it hides the line's end, as for an inline line.
    match memchr::memchr2(b'\r', 0, window).filter(|&i| window[i] == b'\r') {
        // A line of nothing but its `\r` (`*1\r\n\r\n`) has no digits: Redis then
        // finds no `$` and says which byte it found.
        Some(cr) if cr + 1 < rest.len() => Header::Line(&rest[1.min(cr)..cr], start + cr + 2),
        Some(_) => Header::Incomplete,
        None if rest.len() > max_len => Header::TooLong,
        None => Header::Incomplete,
    }
}

fn parse_multibulk<'a>(
    buf: &'a [u8],
    limits: &RespLimits,
) -> Result<(Command<'a>, usize), RespParseError> {
    let (digits, mut pos) = match header(buf, 0, limits.max_inline_len) {
        Header::Line(digits, next) => (digits, next),
        Header::Incomplete => return Err(RespParseError::Incomplete),
        Header::TooLong => return Err(invalid(RespRequestError::TooBigMbulkCount, buf.len())),
    };
    let count = match string2ll(digits) {
        Some(n) if n <= 0 => return Ok((Command::new(Vec::new()), pos)),
        Some(n) if n as u64 <= limits.max_args as u64 => n as usize,
        _ => return Err(invalid(RespRequestError::InvalidMultibulkLength, pos)),
    };
    // Only what the buffer can hold is reserved up front (4 bytes per `$0\r\n\r\n`-less
    // argument at least), so a header alone cannot make us allocate `count` slots.
    let mut args = Vec::with_capacity(count.min(buf.len() / 4 + 1));
    for _ in 0..count {
        if pos >= buf.len() {
            return Err(RespParseError::Incomplete);
        }
        let (digits, next) = match header(buf, pos, limits.max_inline_len) {
            Header::Line(digits, next) => (digits, next),
            Header::Incomplete => return Err(RespParseError::Incomplete),
            Header::TooLong => return Err(invalid(RespRequestError::TooBigBulkCount, buf.len())),
        };
        if buf[pos] != b'$' {
            return Err(invalid(RespRequestError::ExpectedDollar(buf[pos]), pos));
        }
        let len = match string2ll(digits) {
            Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => n as usize,
            _ => return Err(invalid(RespRequestError::InvalidBulkLength, next)),
        };
        let end = next + len;
        if buf.len() < end + 2 {
            return Err(RespParseError::Incomplete);
        }
        args.push(Cow::Borrowed(&buf[next..end]));
        pos = end + 2;
    }
    Ok((
        Command {
            args,
            inline: false,
        },
        pos,
    ))
}

fn parse_inline<'a>(
    buf: &'a [u8],
    limits: &RespLimits,
) -> Result<(Command<'a>, usize), RespParseError> {
    let window = &buf[..buf.len().min(limits.max_inline_len + 1)];
    // Redis looks for the newline with `strchr`, which stops at a NUL byte: a NUL
    // before the newline hides it, and the line waits for the inline limit.
    let newline = memchr::memchr2(b'\n', 0, window).filter(|&i| window[i] == b'\n');
    let Some(newline) = newline else {
        return if buf.len() > limits.max_inline_len {
            Err(invalid(RespRequestError::TooBigInline, buf.len()))
        } else {
            Err(RespParseError::Incomplete)
        };
    };
    let mut line = &buf[..newline];
    if let Some(stripped) = line.strip_suffix(b"\r") {
        line = stripped;
    }
    let args =
        split_args(line).ok_or_else(|| invalid(RespRequestError::UnbalancedQuotes, newline + 1))?;
    Ok((
        Command {
            args: args.into_iter().map(Cow::Owned).collect(),
            inline: true,
        },
        newline + 1,
    ))
}

/// Redis's `string2ll`: an optional `-`, then digits without a leading zero (`0`
/// alone excepted), no `+`, no spaces, no overflow.
pub fn string2ll(s: &[u8]) -> Option<i64> {
    let (negative, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, s),
    };
    match digits {
        [] => return None,
        [b'0'] if !negative => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut value: u64 = 0;
    for &b in digits {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    if negative {
        if value == 1 << 63 {
            Some(i64::MIN)
        } else {
            i64::try_from(value).ok().map(|v| -v)
        }
    } else {
        i64::try_from(value).ok()
    }
}

/// C's `isspace` in the "C" locale, which `sdssplitargs` skips between arguments.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Redis's `sdssplitargs`, on a byte slice that it reads as a C string (it stops at a
/// NUL). `None` for unbalanced quotes or a closing quote followed by a non-blank.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let at = |i: usize| line.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while at(i) != 0 && is_space(at(i)) {
            i += 1;
        }
        if at(i) == 0 {
            return Some(args);
        }
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        let mut current = Vec::new();
        while !done {
            let c = at(i);
            if in_double {
                let escaped_hex = (at(i + 1) == b'x')
                    .then(|| Some(hex_value(at(i + 2))? * 16 + hex_value(at(i + 3))?))
                    .flatten();
                match (c, escaped_hex) {
                    (b'\\', Some(byte)) => {
                        current.push(byte);
                        i += 3;
                    }
                    (b'\\', None) if at(i + 1) != 0 => {
                        i += 1;
                        current.push(match at(i) {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        });
                    }
                    (b'"', _) => {
                        if at(i + 1) != 0 && !is_space(at(i + 1)) {
                            return None;
                        }
                        done = true;
                    }
                    (0, _) => return None,
                    _ => current.push(c),
                }
            } else if in_single {
                match c {
                    b'\\' if at(i + 1) == b'\'' => {
                        i += 1;
                        current.push(b'\'');
                    }
                    b'\'' => {
                        if at(i + 1) != 0 && !is_space(at(i + 1)) {
                            return None;
                        }
                        done = true;
                    }
                    0 => return None,
                    _ => current.push(c),
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => current.push(c),
                }
            }
            if at(i) != 0 {
                i += 1;
            }
        }
        args.push(current);
    }
}

/// Writes `args` as an inline command line, each argument double-quoted with every
/// byte that is not a plain printable character escaped as `\xHH` (the form
/// `redis-cli` understands), so that any bytes survive the round trip.
pub fn compose_inline(out: &mut impl BufMut, args: &[&[u8]]) {
    for (i, arg) in args.iter().enumerate() {
        if i > 0 {
            out.put_u8(b' ');
        }
        out.put_u8(b'"');
        for &b in *arg {
            if b.is_ascii_graphic() && b != b'"' && b != b'\\' || b == b' ' {
                out.put_u8(b);
            } else {
                out.put_slice(format!("\\x{b:02x}").as_bytes());
            }
        }
        out.put_u8(b'"');
    }
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<(Vec<Vec<u8>>, usize), RespParseError> {
        parse_command(input, &RespLimits::default())
            .map(|(c, used)| (c.args().iter().map(|a| a.to_vec()).collect(), used))
    }

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    fn error_of(input: &[u8], limits: &RespLimits) -> RespRequestError {
        match parse_command(input, limits) {
            Err(RespParseError::Invalid(invalid)) => invalid.error,
            other => panic!("{input:?} parsed as {other:?}"),
        }
    }

    fn reply_of(error: RespRequestError) -> String {
        let mut out = Vec::new();
        error.put_reply(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn array_of_bulk_strings_is_a_command() {
        let input = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n";
        assert_eq!(
            parse(input),
            Ok((args(&["SET", "k", "hello"]), input.len()))
        );
    }

    #[test]
    fn bulk_arguments_are_binary_safe_and_borrowed() {
        let input = b"*2\r\n$3\r\nGET\r\n$4\r\na\r\nb\r\n";
        let (command, _) = parse_command(input, &RespLimits::default()).unwrap();
        assert_eq!(command.arg(1), Some(&b"a\r\nb"[..]));
        assert!(matches!(command.args()[1], Cow::Borrowed(_)));
        assert!(!command.is_inline());
    }

    #[test]
    fn inline_command_is_split_on_blanks() {
        assert_eq!(
            parse(b"  SET  k\tv \r\nrest"),
            Ok((args(&["SET", "k", "v"]), 13))
        );
        let (command, _) = parse_command(b"PING\r\n", &RespLimits::default()).unwrap();
        assert!(command.is_inline());
    }

    #[test]
    fn inline_line_may_end_in_a_bare_newline() {
        assert_eq!(parse(b"PING\n"), Ok((args(&["PING"]), 5)));
    }

    #[test]
    fn inline_quotes_follow_redis_escapes() {
        assert_eq!(
            parse(b"SET \"a b\" \"\\x41\\n\\\"\" 'it\\'s'\r\n"),
            Ok((
                vec![
                    b"SET".to_vec(),
                    b"a b".to_vec(),
                    b"A\n\"".to_vec(),
                    b"it's".to_vec()
                ],
                30
            ))
        );
        // A backslash before anything else in double quotes is that character.
        assert_eq!(parse(b"\"\\q\\x4\"\r\n").unwrap().0, vec![b"qx4".to_vec()]);
    }

    #[test]
    fn unbalanced_or_glued_quotes_are_a_protocol_error() {
        for input in [
            &b"GET \"a\r\n"[..],
            b"GET 'a\r\n",
            b"GET \"a\"b\r\n",
            b"GET 'a'b\r\n",
        ] {
            assert_eq!(
                error_of(input, &RespLimits::default()),
                RespRequestError::UnbalancedQuotes,
                "{input:?}"
            );
        }
        assert_eq!(
            reply_of(RespRequestError::UnbalancedQuotes),
            "-ERR Protocol error: unbalanced quotes in request\r\n"
        );
    }

    #[test]
    fn a_nul_byte_hides_an_inline_line_s_end_as_in_redis() {
        // Redis finds the newline with strchr: past a NUL it never does, and the line
        // waits until it is too big.
        assert_eq!(parse(b"GET a\0b c\r\n"), Err(RespParseError::Incomplete));
        let mut long = b"GET a\0".to_vec();
        long.extend(std::iter::repeat_n(b'x', MAX_INLINE_LEN));
        long.extend_from_slice(b"\r\n");
        assert!(matches!(
            parse(&long),
            Err(RespParseError::Invalid(RespInvalid {
                error: RespRequestError::TooBigInline,
                ..
            }))
        ));
    }

    #[test]
    fn a_nul_byte_hides_a_header_line_s_end_as_in_redis() {
        assert_eq!(
            parse(b"*2\r\n$3\r\nGET\r\n\0\r\n$1\r\nk\r\n"),
            Err(RespParseError::Incomplete)
        );
        assert_eq!(parse(b"*\x002\r\n"), Err(RespParseError::Incomplete));
    }

    #[test]
    fn a_bulk_header_of_nothing_but_its_cr_names_the_byte_found() {
        // Redis: "expected '$', got ' '" (the CR printed as a space), then it closes.
        let error = error_of(b"*1\r\n\r\n", &RespLimits::default());
        assert_eq!(error, RespRequestError::ExpectedDollar(b'\r'));
        assert_eq!(
            reply_of(error),
            "-ERR Protocol error: expected '$', got ' '\r\n"
        );
    }

    #[test]
    fn empty_arrays_and_blank_lines_are_empty_commands() {
        for input in [&b"*0\r\n"[..], b"*-1\r\n", b"\r\n", b"   \r\n"] {
            let (command, used) = parse_command(input, &RespLimits::default()).unwrap();
            assert!(command.is_empty(), "{input:?}");
            assert_eq!(used, input.len());
        }
    }

    #[test]
    fn redis_skips_the_two_bytes_after_a_bulk_without_checking_them() {
        assert_eq!(parse(b"*1\r\n$4\r\nPINGxy*1"), Ok((args(&["PING"]), 14)));
    }

    #[test]
    fn header_line_ends_at_its_cr_whatever_follows() {
        assert_eq!(parse(b"*1\rX$4\r\nPING\r\n"), Ok((args(&["PING"]), 14)));
    }

    #[test]
    fn multibulk_count_must_be_a_strict_integer_within_the_limit() {
        let limits = RespLimits {
            max_args: 3,
            ..RespLimits::default()
        };
        for input in [
            &b"*x\r\n"[..],
            b"*01\r\n",
            b"*+1\r\n",
            b"*4\r\n",
            b"* 1\r\n",
        ] {
            assert_eq!(
                error_of(input, &limits),
                RespRequestError::InvalidMultibulkLength,
                "{input:?}"
            );
        }
        assert_eq!(
            reply_of(RespRequestError::InvalidMultibulkLength),
            "-ERR Protocol error: invalid multibulk length\r\n"
        );
    }

    #[test]
    fn bulk_length_must_be_a_strict_integer_within_the_limit() {
        let limits = RespLimits {
            max_bulk_len: 10,
            ..RespLimits::default()
        };
        for input in [&b"*1\r\n$-1\r\n"[..], b"*1\r\n$11\r\n", b"*1\r\n$1a\r\n"] {
            assert_eq!(
                error_of(input, &limits),
                RespRequestError::InvalidBulkLength,
                "{input:?}"
            );
        }
        assert_eq!(
            reply_of(RespRequestError::InvalidBulkLength),
            "-ERR Protocol error: invalid bulk length\r\n"
        );
    }

    #[test]
    fn an_argument_not_starting_with_dollar_names_the_byte() {
        let error = error_of(b"*1\r\n:4\r\n", &RespLimits::default());
        assert_eq!(error, RespRequestError::ExpectedDollar(b':'));
        assert_eq!(
            reply_of(error),
            "-ERR Protocol error: expected '$', got ':'\r\n"
        );
        assert_eq!(
            reply_of(RespRequestError::ExpectedDollar(b'\n')),
            "-ERR Protocol error: expected '$', got ' '\r\n"
        );
    }

    #[test]
    fn lines_past_the_inline_limit_are_refused_before_their_end_arrives() {
        let limits = RespLimits {
            max_inline_len: 8,
            ..RespLimits::default()
        };
        assert_eq!(
            error_of(b"GET aaaaaa", &limits),
            RespRequestError::TooBigInline
        );
        assert_eq!(
            parse_command(b"GET aaaa", &limits),
            Err(RespParseError::Incomplete)
        );
        assert_eq!(
            error_of(b"*111111111", &limits),
            RespRequestError::TooBigMbulkCount
        );
        assert_eq!(
            error_of(b"*1\r\n$111111111", &limits),
            RespRequestError::TooBigBulkCount
        );
        assert_eq!(
            reply_of(RespRequestError::TooBigInline),
            "-ERR Protocol error: too big inline request\r\n"
        );
    }

    #[test]
    fn a_count_within_the_limit_waits_for_its_arguments() {
        let limits = RespLimits {
            max_args: 1 << 20,
            ..RespLimits::default()
        };
        assert_eq!(
            parse_command(b"*1048576\r\n", &limits),
            Err(RespParseError::Incomplete)
        );
        assert_eq!(
            error_of(b"*1048577\r\n", &limits),
            RespRequestError::InvalidMultibulkLength
        );
    }

    #[test]
    fn partial_requests_are_incomplete() {
        for input in [
            &b""[..],
            b"*",
            b"*2\r",
            b"*2\r\n$3\r\nGET\r\n",
            b"*2\r\n$3\r\nGET\r\n$1\r\na\r",
            b"*1\r\n$4\r\nPI",
            b"PING",
            b"PING\r",
        ] {
            assert_eq!(
                parse_command(input, &RespLimits::default()),
                Err(RespParseError::Incomplete),
                "{input:?}"
            );
        }
    }

    #[test]
    fn string2ll_is_as_strict_as_redis() {
        assert_eq!(string2ll(b"0"), Some(0));
        assert_eq!(string2ll(b"-1"), Some(-1));
        assert_eq!(string2ll(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(string2ll(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"-0",
            b"00",
            b"+1",
            b"1 ",
            b"9223372036854775808",
        ] {
            assert_eq!(string2ll(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn compose_writes_an_array_and_inline_reads_back() {
        let (command, _) = parse_command(b"SET k \"v w\"\r\n", &RespLimits::default()).unwrap();
        let mut out = Vec::new();
        command.compose(&mut out);
        assert_eq!(out, b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv w\r\n");
        out.clear();
        compose_inline(&mut out, &[b"SET", b"k\r\n\"\\", b""]);
        assert_eq!(
            parse(&out).unwrap().0,
            vec![b"SET".to_vec(), b"k\r\n\"\\".to_vec(), Vec::new()]
        );
    }
}
