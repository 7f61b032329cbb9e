//! The meta commands: `mg <key> <flags>*`, `ms <key> <datalen> <flags>*` followed by a
//! data block, `md <key> <flags>*`, `ma <key> <flags>*`, `me <key>`, `mn`.
//!
//! Flags are kept as the client's text, but checked first by memcached's own rules
//! ([`super::meta_flags`]): a request the server would frame differently is answered
//! with the server's error line and never forwarded. Two flags matter to a proxy: `q`
//! (quiet: the server leaves out the uninteresting replies, which a proxy must know to
//! stay in step) and `b` (the key is base64: route on the decoded key).

use bytes::BufMut;

use super::meta_codes::{MetaCmd, MetaStatus};
use super::meta_flags::{check_flags, decode_base64_key, FlagSummary, MAX_META_TOKENS};
use super::{check_key, put_u64, LineAt, Request};
use crate::error::{Discard, Invalid, ParseError, RequestError, Unlink};
use crate::limits::{Limits, MAX_KEY_LEN, MEMCACHED_MAX_LINE};
use crate::line::tokens;
use crate::number::strtol32;

#[derive(Debug, Clone, Copy)]
pub struct Meta<'a> {
    pub cmd: MetaCmd,
    /// As sent (base64 text when `base64`); empty for `mn`.
    pub key: &'a [u8],
    /// The flag tokens after the key (and after `ms`'s length), as sent.
    pub flags: &'a [u8],
    /// `ms`: the data block.
    pub data: Option<&'a [u8]>,
    /// The `q` flag.
    pub quiet: bool,
    /// The `b` flag: the key is base64-encoded.
    pub base64: bool,
}

/// Equal when they say the same: the flags token by token, whatever the spacing.
impl PartialEq for Meta<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmd == other.cmd
            && self.key == other.key
            && self.data == other.data
            && self.quiet == other.quiet
            && self.base64 == other.base64
            && self.flag_tokens().eq(other.flag_tokens())
    }
}

impl Eq for Meta<'_> {}

impl Meta<'_> {
    /// The flag tokens, in order.
    pub fn flag_tokens(&self) -> impl Iterator<Item = &[u8]> + '_ {
        tokens(self.flags)
    }

    /// Whether a flag with this letter was given (memcached reads flags by first byte).
    pub fn has_flag(&self, letter: u8) -> bool {
        self.flag_tokens().any(|t| t[0] == letter)
    }

    /// Writes the request in canonical form (single spaces).
    pub fn compose(&self, out: &mut impl BufMut) {
        self.compose_with(out, |_| true);
    }

    /// Writes the request without its `q` and its compare (`C`): what a key's other
    /// replicas get once its primary applied it, so they converge on the same value.
    pub fn compose_unconditional(&self, out: &mut impl BufMut) {
        self.compose_with(out, |flag| flag[0] != b'q' && flag[0] != b'C');
    }

    /// Writes the request without its `q` flag: a proxy that needs every reply to stay
    /// in step sends this, and applies quiet mode towards the client itself.
    pub fn compose_loud(&self, out: &mut impl BufMut) {
        // memcached reads a flag by its first byte: `qx` is quiet too.
        self.compose_with(out, |flag| flag[0] != b'q');
    }

    fn compose_with(&self, out: &mut impl BufMut, keep: impl Fn(&[u8]) -> bool) {
        out.put_slice(self.cmd.name().as_bytes());
        if self.cmd != MetaCmd::Noop {
            out.put_u8(b' ');
            out.put_slice(self.key);
        }
        if let Some(data) = self.data {
            out.put_u8(b' ');
            put_u64(out, data.len() as u64);
        }
        for flag in self.flag_tokens() {
            if !keep(flag) {
                continue;
            }
            out.put_u8(b' ');
            out.put_slice(flag);
        }
        out.put_slice(b"\r\n");
        if let Some(data) = self.data {
            out.put_slice(data);
            out.put_slice(b"\r\n");
        }
    }

    /// Whether a reply with this status is left out in quiet mode.
    pub fn quiet_drops(&self, status: MetaStatus) -> bool {
        self.quiet && self.cmd.quiet_drops(status)
    }
}

pub(super) fn parse<'a>(
    cmd: MetaCmd,
    args: &'a [u8],
    at: LineAt<'a>,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let line = |error| ParseError::invalid(error, at.line_len);
    let mut toks = tokens(args);
    let key = match (cmd, toks.next()) {
        (MetaCmd::Noop, _) => b"".as_slice(),
        (MetaCmd::Debug, None) => return Err(line(RequestError::BadFormat)),
        // memcached answers the other meta commands without their key with ERROR.
        (_, None) => return Err(line(RequestError::UnknownCommand)),
        (_, Some(key)) => key,
    };
    let summary = match cmd {
        // memcached ignores anything after mn.
        MetaCmd::Noop => FlagSummary::default(),
        MetaCmd::Debug => debug_flags(key, toks.clone()).map_err(line)?,
        _ => {
            // memcached's checks before it reads the flags; for ms none of them
            // swallows the data block, so it is read as a command (as memcached does).
            if key.len() > MAX_KEY_LEN {
                return Err(line(RequestError::BadFormat));
            }
            if cmd == MetaCmd::Set && toks.clone().next().is_none() {
                return Err(line(RequestError::BadFormat));
            }
            if 1 + tokens(args).count() + 1 > MAX_META_TOKENS {
                return Err(line(match cmd {
                    MetaCmd::Get => RequestError::GetFlagsTooLong,
                    _ => RequestError::FlagsTooLong,
                }));
            }
            FlagSummary::default()
        }
    };
    let length = if cmd == MetaCmd::Set {
        let token = toks.next().expect("checked above");
        Some(set_length(token).ok_or(line(RequestError::BadFormat))?)
    } else {
        None
    };
    let flags_start = toks
        .clone()
        .next()
        .map_or(args.len(), |t| t.as_ptr() as usize - args.as_ptr() as usize);
    let flags = if cmd == MetaCmd::Noop {
        b"".as_slice()
    } else {
        &args[flags_start..]
    };
    let checked = match cmd {
        MetaCmd::Noop | MetaCmd::Debug => Ok(summary),
        _ => check_flags(cmd, key, flags),
    }
    .and_then(|summary| {
        if summary.base64 {
            Ok(summary)
        } else {
            check_key(key, limits).map(|()| summary)
        }
    });
    let summary = match (checked, length) {
        (Ok(summary), _) => summary,
        (Err(error), None) => return Err(line(error)),
        // memcached read the length before this rule: it swallows the data block.
        (Err(error), Some(length)) => {
            return Err(ParseError::Invalid(Invalid {
                then: Discard::Bytes(length + 2),
                ..Invalid::answered(error, at.line_len)
            }))
        }
    };
    let data = match length {
        Some(length) if at.too_large(length, limits) => {
            // memcached drops the key's current value, whatever the mode.
            let unlink = Unlink {
                key: at.span(key),
                base64: summary.base64,
            };
            return Err(at.refuse_too_large(length, false, Some(unlink)));
        }
        // An ms reports a bad data chunk whatever its q flag says.
        Some(length) => Some(at.data_block(length, false)?),
        None => None,
    };
    if at.line_len > MEMCACHED_MAX_LINE
        && forwarded_line_len(cmd, key, length, flags) > MEMCACHED_MAX_LINE
    {
        // Even with single spaces (and without q) the line is longer than memcached is
        // sure to read: it would close the server connection. memcached closes the
        // client's connection on such a line when it comes in pieces; so do we.
        return Err(ParseError::Invalid(Invalid {
            then: Discard::Close,
            silent: true,
            ..Invalid::answered(RequestError::LineTooLongForServer, at.line_len)
        }));
    }
    let meta = Meta {
        cmd,
        key,
        flags,
        data: data.map(|(block, _)| block),
        quiet: summary.quiet,
        base64: summary.base64,
    };
    Ok((
        Request::Meta(meta),
        data.map_or(at.line_len, |(_, total)| total),
    ))
}

/// The length of the line a proxy forwards for this request: composed with single
/// spaces and without its q flags ([`Meta::compose_loud`]), CRLF included.
fn forwarded_line_len(cmd: MetaCmd, key: &[u8], length: Option<u64>, flags: &[u8]) -> usize {
    let key_len = if cmd == MetaCmd::Noop {
        0
    } else {
        1 + key.len()
    };
    let length_len = length.map_or(0, |n| 1 + itoa::Buffer::new().format(n).len());
    let flags_len: usize = tokens(flags)
        .filter(|flag| flag[0] != b'q')
        .map(|flag| 1 + flag.len())
        .sum();
    cmd.name().len() + key_len + length_len + flags_len + 2
}

/// `me <key> [b]`: memcached reads no flags, only whether the token after the key is
/// exactly `b`, and refuses a key it cannot use with `bad command line format`.
fn debug_flags<'a>(
    key: &[u8],
    mut rest: impl Iterator<Item = &'a [u8]>,
) -> Result<FlagSummary, RequestError> {
    let base64 = rest.next() == Some(b"b");
    if key.len() > MAX_KEY_LEN || (base64 && decode_base64_key(key).is_none()) {
        return Err(RequestError::BadFormat);
    }
    Ok(FlagSummary {
        quiet: false,
        base64,
    })
}

/// An ms data length as memcached's `safe_strtol` reads it (`4294967298` is 2), refused
/// when negative or so large that memcached's length plus its CRLF overflows.
fn set_length(token: &[u8]) -> Option<u64> {
    let n = strtol32(token)?;
    (0..=i32::MAX - 2).contains(&n).then_some(n as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_request, Limits};

    fn meta(input: &[u8]) -> (Meta<'_>, usize) {
        match parse_request(input, &Limits::default()) {
            Ok((Request::Meta(m), n)) => (m, n),
            other => panic!("{other:?}"),
        }
    }

    fn error_of(input: &[u8]) -> RequestError {
        match parse_request(input, &Limits::default()) {
            Err(ParseError::Invalid(inv)) => inv.error,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn flags_pass_through_as_sent() {
        let (m, n) = meta(b"mg foo s v  O123 k\r\n");
        assert_eq!((m.cmd, m.key, n), (MetaCmd::Get, &b"foo"[..], 20));
        assert_eq!(
            m.flag_tokens().collect::<Vec<_>>(),
            vec![&b"s"[..], b"v", b"O123", b"k"]
        );
        assert!(!m.quiet);
    }

    #[test]
    fn ms_carries_its_data_block() {
        let (m, n) = meta(b"ms k 2 T90 F1\r\nhi\r\nmn\r\n");
        assert_eq!((m.cmd, m.data, n), (MetaCmd::Set, Some(&b"hi"[..]), 19));
        assert_eq!(
            parse_request(b"ms k 2 T90\r\nh", &Limits::default()),
            Err(ParseError::Incomplete)
        );
    }

    #[test]
    fn quiet_is_stripped_for_the_servers_and_the_rest_kept() {
        let (m, _) = meta(b"ms k 2 q T9\r\nhi\r\n");
        assert!(m.quiet);
        let mut loud = Vec::new();
        m.compose_loud(&mut loud);
        assert_eq!(loud, b"ms k 2 T9\r\nhi\r\n");
        let mut same = Vec::new();
        m.compose(&mut same);
        assert_eq!(same, b"ms k 2 q T9\r\nhi\r\n");
    }

    #[test]
    fn quiet_mode_drops_what_memcached_drops() {
        let q = |input: &'static [u8]| meta(input).0;
        assert!(q(b"mg k q\r\n").quiet_drops(MetaStatus::En));
        assert!(!q(b"mg k q\r\n").quiet_drops(MetaStatus::Hd));
        assert!(q(b"md k q\r\n").quiet_drops(MetaStatus::Hd));
        assert!(!q(b"md k q\r\n").quiet_drops(MetaStatus::Nf));
        assert!(q(b"ma k q v\r\n").quiet_drops(MetaStatus::Va));
        assert!(!q(b"mg k\r\n").quiet_drops(MetaStatus::En));
    }

    fn rejection(input: &[u8]) -> Invalid {
        match parse_request(input, &Limits::default()) {
            Err(ParseError::Invalid(inv)) => inv,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_key_rules_are_memcacheds() {
        let mut long = b"mg ".to_vec();
        long.extend([b'k'; 251]);
        long.extend(b" v\r\n");
        assert_eq!(error_of(&long), RequestError::BadFormat);
        assert_eq!(error_of(b"mg\r\n"), RequestError::UnknownCommand);
        assert_eq!(error_of(b"me\r\n"), RequestError::BadFormat);
        assert_eq!(error_of(b"ms k\r\n"), RequestError::BadFormat);
        assert_eq!(error_of(b"ms k x\r\n"), RequestError::BadFormat);
        assert_eq!(error_of(b"ms k -1\r\n"), RequestError::BadFormat);
        assert!(meta(b"mg aGVsbG8= b v\r\n").0.base64);
        assert_eq!(meta(b"ms k +2\r\nhi\r\n").0.data, Some(&b"hi"[..]));
    }

    #[test]
    fn a_base64_key_is_limited_as_sent_like_any_key() {
        // 200 bytes decode from 268 characters: memcached refuses the token as sent.
        let mut line = b"ms ".to_vec();
        line.extend(std::iter::repeat_n(b"eHh4", 67).flatten());
        line.extend(b" 2 b\r\nhi\r\n");
        let inv = rejection(&line);
        assert_eq!(inv.error, RequestError::BadFormat);
        assert_eq!(
            inv.then,
            Discard::Nothing,
            "memcached reads the block as a command"
        );
        assert_eq!(&line[inv.consumed..], b"hi\r\n");
    }

    #[test]
    fn an_ms_refused_before_its_length_is_read_leaves_the_block_to_be_read_as_a_command() {
        let mut line = b"ms k 2".to_vec();
        for _ in 0..18 {
            line.extend(b" T1");
        }
        line.extend(b"\r\nhi\r\n");
        let inv = rejection(&line);
        assert_eq!(inv.error, RequestError::FlagsTooLong);
        assert_eq!(inv.then, Discard::Nothing);
        let many = b"mg k a b c d e f g h i j k l m n o p q r\r\n";
        assert_eq!(error_of(many), RequestError::GetFlagsTooLong);
    }

    #[test]
    fn an_ms_refused_after_its_length_is_read_swallows_the_block() {
        let inv = rejection(b"ms k 2 v v\r\nhi\r\n");
        assert_eq!(inv.error, RequestError::DuplicateFlag);
        assert_eq!(inv.then, Discard::Bytes(4));
        assert_eq!(
            rejection(b"ms k 2 MX\r\nhi\r\n").error,
            RequestError::BadSetMode
        );
    }

    #[test]
    fn a_flag_is_read_by_its_first_byte_so_qx_is_quiet_and_stripped() {
        let (m, _) = meta(b"mg k v qx\r\n");
        assert!(m.quiet);
        let mut loud = Vec::new();
        m.compose_loud(&mut loud);
        assert_eq!(loud, b"mg k v\r\n");
    }

    #[test]
    fn md_and_ma_answer_every_flag_error_alike() {
        assert_eq!(
            error_of(b"md k q q\r\n"),
            RequestError::InvalidOrDuplicateFlag
        );
        assert_eq!(
            error_of(b"ma k Dx\r\n"),
            RequestError::InvalidOrDuplicateFlag
        );
        assert_eq!(error_of(b"ma k MX\r\n"), RequestError::BadArithMode);
    }

    #[test]
    fn the_replicas_of_a_compare_and_swap_get_it_without_the_compare() {
        let (m, _) = meta(b"ms k 2 C17 q T9 c\r\nhi\r\n");
        assert!(m.has_flag(b'C') && m.has_flag(b'c') && !m.has_flag(b'v'));
        let mut out = Vec::new();
        m.compose_unconditional(&mut out);
        assert_eq!(out, b"ms k 2 T9 c\r\nhi\r\n");
    }

    #[test]
    fn me_reads_no_flags() {
        let (m, _) = meta(b"me k q v\r\n");
        assert!(!m.quiet);
        assert!(meta(b"me aGVsbG8= b\r\n").0.base64);
        assert_eq!(error_of(b"me a! b\r\n"), RequestError::BadFormat);
    }

    #[test]
    fn a_value_over_the_limit_is_refused_its_block_skipped_and_its_key_unlinked() {
        let limits = Limits {
            max_value_len: 4,
            ..Limits::default()
        };
        let input = b"ms aGVsbG8= 10 b MA q\r\n";
        let Err(ParseError::Invalid(inv)) = parse_request(input, &limits) else {
            panic!()
        };
        assert_eq!(inv.error, RequestError::ValueTooLarge);
        assert_eq!((inv.then, inv.silent), (Discard::Bytes(12), false));
        let unlink = inv.unlink.expect("memcached unlinks in every mode");
        assert_eq!(
            (unlink.key.get(input), unlink.base64),
            (&b"aGVsbG8="[..], true)
        );
    }

    #[test]
    fn an_ms_length_is_read_as_memcached_reads_it() {
        assert_eq!(meta(b"ms k 4294967298\r\nhi\r\n").0.data, Some(&b"hi"[..]));
        let inv = rejection(b"ms k 1 q\r\nxyz\r\n");
        assert_eq!(inv.error, RequestError::BadDataChunk);
        assert!(!inv.silent, "an ms reports a bad chunk even when quiet");
    }

    #[test]
    fn a_composed_request_parses_back_to_itself_whatever_the_spacing() {
        for input in [
            &b"mg k  v   O1 \r\n"[..],
            b"ms k 2  q T9\r\nhi\r\n",
            b"md k q\r\n",
            b"mn  x\r\n",
            b"me k\r\n",
        ] {
            let (m, _) = meta(input);
            let mut out = Vec::new();
            m.compose(&mut out);
            let (again, used) = meta(&out);
            assert_eq!(
                (again, used),
                (m, out.len()),
                "{:?}",
                String::from_utf8_lossy(input)
            );
        }
    }

    #[test]
    fn a_line_memcached_may_close_on_is_refused_by_closing_even_after_compaction() {
        let spaced = format!("mg k v{}\r\n", " ".repeat(3000));
        assert_eq!(
            meta(spaced.as_bytes()).0.key,
            b"k",
            "spaces collapse when composed"
        );
        let junk = format!("mg k v{}\r\n", "x".repeat(3000));
        let inv = rejection(junk.as_bytes());
        assert_eq!(inv.error, RequestError::LineTooLongForServer);
        assert_eq!((inv.then, inv.reply()), (Discard::Close, None));
    }

    #[test]
    fn a_forwarded_line_is_measured_as_composed() {
        for input in [
            &b"ms k 2  q T9\r\nhi\r\n"[..],
            b"mg k  v   O1 qq\r\n",
            b"mn\r\n",
        ] {
            let (m, _) = meta(input);
            let mut loud = Vec::new();
            m.compose_loud(&mut loud);
            let line = loud.iter().position(|b| *b == b'\n').unwrap() + 1;
            let length = m.data.map(|d| d.len() as u64);
            assert_eq!(forwarded_line_len(m.cmd, m.key, length, m.flags), line);
        }
    }

    #[test]
    fn mn_ignores_what_follows() {
        assert_eq!(meta(b"mn x\r\n").0.cmd, MetaCmd::Noop);
    }
}
