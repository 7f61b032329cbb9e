//! Finding command lines and splitting them into tokens.

/// What the front of a buffer holds, line-wise.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum LineScan<'a> {
    /// A `\r\n`-terminated line: its content and its length including the terminator.
    Complete(&'a [u8], usize),
    /// No newline yet and still under the limit.
    Incomplete,
    /// No newline within the limit.
    TooLong,
    /// A line ending in `\n` without `\r`; the length includes the `\n`.
    BareNewline(usize),
}

/// Scans for the first line, looking at most `max_len + 2` bytes ahead so that garbage
/// without newlines is detected without scanning an ever-growing buffer.
pub(crate) fn scan_line(buf: &[u8], max_len: usize) -> LineScan<'_> {
    let window = &buf[..buf.len().min(max_len.saturating_add(2))];
    match memchr::memchr(b'\n', window) {
        Some(i) => line_at(buf, i),
        None if window.len() >= max_len.saturating_add(2) => LineScan::TooLong,
        None => LineScan::Incomplete,
    }
}

/// [`scan_line`] for a caller that found the first newline already, at `newline`.
pub(crate) fn scan_line_to(buf: &[u8], newline: usize, max_len: usize) -> LineScan<'_> {
    debug_assert_eq!(memchr::memchr(b'\n', buf), Some(newline));
    if newline < max_len.saturating_add(2) {
        line_at(buf, newline)
    } else {
        LineScan::TooLong
    }
}

fn line_at(buf: &[u8], newline: usize) -> LineScan<'_> {
    if newline > 0 && buf[newline - 1] == b'\r' {
        LineScan::Complete(&buf[..newline - 1], newline + 1)
    } else {
        LineScan::BareNewline(newline + 1)
    }
}

/// Space-separated tokens; runs of spaces count as one separator, as in memcached.
pub(crate) fn tokens(line: &[u8]) -> impl Iterator<Item = &[u8]> + Clone {
    line.split(|b| *b == b' ').filter(|t| !t.is_empty())
}

/// Parses an unsigned decimal with no sign and no leading `+`, rejecting overflow (for
/// server replies; requests are read as memcached reads them, see [`crate::number`]).
pub(crate) fn parse_u64(token: &[u8]) -> Option<u64> {
    if token.is_empty() || token.len() > 20 {
        return None;
    }
    let mut value: u64 = 0;
    for &b in token {
        if !b.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
    }
    Some(value)
}

pub(crate) fn parse_u32(token: &[u8]) -> Option<u32> {
    parse_u64(token).and_then(|v| u32::try_from(v).ok())
}

/// Parses a signed decimal.
pub(crate) fn parse_i64(token: &[u8]) -> Option<i64> {
    match token.split_first() {
        Some((b'-', rest)) => parse_u64(rest).and_then(|v| {
            if v == 1u64 << 63 {
                Some(i64::MIN)
            } else {
                i64::try_from(v).ok().map(|v| -v)
            }
        }),
        _ => parse_u64(token).and_then(|v| i64::try_from(v).ok()),
    }
}

/// memcached's `MAX_TOKENS` less its terminal token: the most tokens its tokenizer
/// splits a line into (what is left is tokenized again only by `get`).
pub(crate) const MAX_WORDS: usize = 23;

/// A command line as memcached's tokenizer sees it: the command at index 0, then at
/// most [`MAX_WORDS`] tokens in all. memcached's counts include a terminal token, so its
/// `ntokens` is [`Words::ntokens`]; its rules are written against that number, and so
/// are ours, to be read side by side with `proto_text.c`.
pub(crate) struct Words<'a> {
    items: [&'a [u8]; MAX_WORDS],
    len: usize,
}

impl<'a> Words<'a> {
    pub(crate) fn new(line: &'a [u8]) -> Self {
        let mut words = Words {
            items: [&[]; MAX_WORDS],
            len: 0,
        };
        for token in tokens(line).take(MAX_WORDS) {
            words.items[words.len] = token;
            words.len += 1;
        }
        words
    }

    /// memcached's `ntokens`: the tokens read plus the terminal one.
    pub(crate) fn ntokens(&self) -> usize {
        self.len + 1
    }

    /// Token `i` (the command is 0); empty past the end, where memcached's is too.
    pub(crate) fn get(&self, i: usize) -> &'a [u8] {
        if i < self.len {
            self.items[i]
        } else {
            &[]
        }
    }

    /// The last token read (memcached's `tokens[ntokens - 2]`).
    pub(crate) fn last(&self) -> &'a [u8] {
        self.get(self.len.wrapping_sub(1))
    }

    /// memcached's `set_noreply_maybe`: the last token is exactly `noreply`, whatever
    /// position that is (in `incr k noreply` it stands where the delta should be).
    pub(crate) fn noreply(&self) -> bool {
        self.last() == b"noreply"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_needs_cr_before_lf() {
        assert_eq!(
            scan_line(b"get a\r\nrest", 100),
            LineScan::Complete(b"get a", 7)
        );
        assert_eq!(scan_line(b"get a\nrest", 100), LineScan::BareNewline(6));
        assert_eq!(scan_line(b"\n", 100), LineScan::BareNewline(1));
        assert_eq!(scan_line(b"get a\r", 100), LineScan::Incomplete);
    }

    #[test]
    fn a_line_over_the_limit_is_too_long_even_before_its_newline_arrives() {
        assert_eq!(scan_line(b"abcdef", 4), LineScan::TooLong);
        assert_eq!(scan_line(b"abcd\r\n", 4), LineScan::Complete(b"abcd", 6));
        assert_eq!(scan_line(b"abcde\r\n", 4), LineScan::TooLong);
    }

    #[test]
    fn runs_of_spaces_are_one_separator() {
        let t: Vec<&[u8]> = tokens(b"  get  a b ").collect();
        assert_eq!(t, vec![&b"get"[..], b"a", b"b"]);
    }

    #[test]
    fn numbers_reject_signs_overflow_and_garbage() {
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b"+1"), None);
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u32(b"4294967296"), None);
        assert_eq!(parse_i64(b"-1"), Some(-1));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_i64(b"9223372036854775808"), None);
    }

    #[test]
    fn words_stop_where_memcacheds_tokenizer_stops() {
        let many: Vec<u8> = (0..30)
            .flat_map(|i| format!("t{i} ").into_bytes())
            .collect();
        let words = Words::new(&many);
        assert_eq!(words.ntokens(), MAX_WORDS + 1);
        assert_eq!(words.last(), b"t22");
        let short = Words::new(b"incr k noreply");
        assert_eq!(
            (short.ntokens(), short.get(1), short.get(5)),
            (4, &b"k"[..], &b""[..])
        );
        assert!(short.noreply());
        assert_eq!(Words::new(b"").ntokens(), 1);
        assert_eq!(Words::new(b"").last(), b"");
    }
}
