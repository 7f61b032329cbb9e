//! The meta commands: `mg <key> <flags>*`, `ms <key> <datalen> <flags>*` followed by a
//! data block, `md <key> <flags>*`, `ma <key> <flags>*`, `me <key>`, `mn`.
//!
//! Flags are kept as the client's text and passed through: the server validates them
//! and answers `CLIENT_ERROR invalid flag` itself. Two flags matter to a proxy: `q`
//! (quiet: the server leaves out the uninteresting replies, which a proxy must know to
//! stay in step) and `b` (the key is base64: route on the decoded key).

use bytes::BufMut;

use super::{check_key, put_u64, LineAt, Request};
use crate::error::{Discard, Invalid, ParseError, RequestError};
use crate::limits::Limits;
use crate::line::{parse_u64, tokens};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaCmd {
    Get,
    Set,
    Delete,
    Arith,
    Debug,
    Noop,
}

impl MetaCmd {
    /// Whether quiet mode (`q`) leaves out a reply with this status, as memcached does:
    /// a miss for mg, success for ms, md and ma (whatever the flags asked for).
    pub fn quiet_drops(self, status: MetaStatus) -> bool {
        use MetaStatus::*;
        matches!(
            (self, status),
            (MetaCmd::Get, En)
                | (MetaCmd::Set, Hd)
                | (MetaCmd::Delete, Hd)
                | (MetaCmd::Arith, Hd | Va)
        )
    }

    pub fn name(self) -> &'static str {
        match self {
            MetaCmd::Get => "mg",
            MetaCmd::Set => "ms",
            MetaCmd::Delete => "md",
            MetaCmd::Arith => "ma",
            MetaCmd::Debug => "me",
            MetaCmd::Noop => "mn",
        }
    }
}

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

    /// Writes the request in canonical form (single spaces).
    pub fn compose(&self, out: &mut impl BufMut) {
        self.compose_with(out, true);
    }

    /// Writes the request without its `q` flag: a proxy that needs every reply to stay
    /// in step sends this, and applies quiet mode towards the client itself.
    pub fn compose_loud(&self, out: &mut impl BufMut) {
        self.compose_with(out, false);
    }

    fn compose_with(&self, out: &mut impl BufMut, keep_quiet: bool) {
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
            if flag == b"q" && !keep_quiet {
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

/// A meta reply's two-letter code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetaStatus {
    /// Success without a value.
    Hd,
    /// A value follows.
    Va,
    /// Miss (mg, me).
    En,
    /// Not found (md, ma).
    Nf,
    /// Not stored (ms).
    Ns,
    /// The cas did not match.
    Ex,
    /// The no-op's answer.
    Mn,
    /// Debug information.
    Me,
}

impl MetaStatus {
    pub fn from_code(code: &[u8]) -> Option<MetaStatus> {
        Some(match code {
            b"HD" => MetaStatus::Hd,
            b"VA" => MetaStatus::Va,
            b"EN" => MetaStatus::En,
            b"NF" => MetaStatus::Nf,
            b"NS" => MetaStatus::Ns,
            b"EX" => MetaStatus::Ex,
            b"MN" => MetaStatus::Mn,
            b"ME" => MetaStatus::Me,
            _ => return None,
        })
    }
}

/// Longest base64 text of a 250-byte key.
const MAX_BASE64_KEY: usize = 4 * 250_usize.div_ceil(3);

pub(super) fn parse<'a>(
    cmd: MetaCmd,
    args: &'a [u8],
    at: LineAt<'a>,
    limits: &Limits,
) -> Result<(Request<'a>, usize), ParseError> {
    let line = |error| ParseError::invalid(error, at.line_len);
    if cmd == MetaCmd::Noop {
        // memcached ignores anything after mn.
        let meta = Meta {
            cmd,
            key: b"",
            flags: b"",
            data: None,
            quiet: false,
            base64: false,
        };
        return Ok((Request::Meta(meta), at.line_len));
    }
    let mut toks = tokens(args);
    // memcached answers a meta command without its key with ERROR.
    let key = toks.next().ok_or(line(RequestError::UnknownCommand))?;
    let length = if cmd == MetaCmd::Set {
        let token = toks.next().ok_or(line(RequestError::BadFormat))?;
        Some(
            parse_u64(token)
                .filter(|n| *n <= i32::MAX as u64)
                .ok_or(line(RequestError::BadLength))?,
        )
    } else {
        None
    };
    let flags_start = toks
        .clone()
        .next()
        .map_or(args.len(), |t| t.as_ptr() as usize - args.as_ptr() as usize);
    let flags = &args[flags_start..];
    let (mut quiet, mut base64) = (false, false);
    for flag in tokens(flags) {
        quiet |= flag == b"q";
        base64 |= flag == b"b";
    }
    let key_limits = if base64 {
        Limits {
            max_key_len: MAX_BASE64_KEY,
            ..*limits
        }
    } else {
        *limits
    };
    let bad_key = check_key(key, &key_limits).err();
    let Some(length) = length else {
        if let Some(error) = bad_key {
            return Err(line(error));
        }
        let meta = Meta {
            cmd,
            key,
            flags,
            data: None,
            quiet,
            base64,
        };
        return Ok((Request::Meta(meta), at.line_len));
    };
    if let Some(error) = bad_key {
        // The client did send the data block: swallow it too.
        return Err(ParseError::Invalid(Invalid {
            error,
            consumed: at.line_len,
            then: Discard::Bytes(length + 2),
        }));
    }
    let (data, total) = at.data_block(length, limits)?;
    let meta = Meta {
        cmd,
        key,
        flags,
        data: Some(data),
        quiet,
        base64,
    };
    Ok((Request::Meta(meta), total))
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

    #[test]
    fn the_key_rules_are_the_text_protocols() {
        let mut long = b"mg ".to_vec();
        long.extend([b'k'; 251]);
        long.extend(b" v\r\n");
        assert_eq!(error_of(&long), RequestError::KeyTooLong);
        assert_eq!(error_of(b"mg\r\n"), RequestError::UnknownCommand);
        assert_eq!(error_of(b"ms k\r\n"), RequestError::BadFormat);
        assert_eq!(error_of(b"ms k x\r\n"), RequestError::BadLength);
        assert!(meta(b"mg aGVsbG8= b v\r\n").0.base64);
    }

    #[test]
    fn a_value_over_the_limit_is_refused_and_its_block_skipped() {
        let limits = Limits {
            max_value_len: 4,
            ..Limits::default()
        };
        let Err(ParseError::Invalid(inv)) = parse_request(b"ms k 10\r\n", &limits) else {
            panic!()
        };
        assert_eq!(inv.error, RequestError::ValueTooLarge);
        assert_eq!(inv.then, Discard::Bytes(12));
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
    fn mn_ignores_what_follows() {
        assert_eq!(meta(b"mn x\r\n").0.cmd, MetaCmd::Noop);
    }
}
