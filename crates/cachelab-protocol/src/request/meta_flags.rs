//! The meta commands' flag rules, as memcached 1.6 applies them (`proto_text.c`:
//! `_meta_flag_preparse` and the per-command checks after it).
//!
//! A proxy must frame a meta request exactly as the server will, or the server answers
//! a different number of replies than the proxy waits for, and the extra one answers
//! the next request on that server connection, whoever sent it. So the proxy applies
//! the server's rules before forwarding, answers a request that breaks one itself with
//! the server's own error line, and never forwards it. Where memcached reads a flag by
//! its first byte (`qx` is quiet, `bZZ` is base64), so do we.

use super::meta_codes::MetaCmd;
use crate::error::RequestError;
use crate::line::tokens;
use crate::number::{strtol32, strtoul32, strtoull};

/// memcached's `MFLAG_MAX_OPT_LENGTH`: a meta line of more tokens than this (its count
/// includes the tokenizer's empty terminal token) is refused before its flags are read.
pub const MAX_META_TOKENS: usize = 20;
/// memcached's `MFLAG_MAX_OPAQUE_LENGTH`: the `O` token, its letter included.
pub const MAX_OPAQUE_LEN: usize = 32;

/// What the flags say that a proxy acts on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlagSummary {
    /// `q`: the server leaves out the uninteresting replies.
    pub quiet: bool,
    /// `b`: the key is base64-encoded.
    pub base64: bool,
}

/// Checks the flag tokens of `mg`, `ms`, `md` or `ma` (not `me` or `mn`, which have no
/// flags) as memcached does, in memcached's order, and returns memcached's error for
/// the first rule broken. `key` is the key token as sent.
pub fn check_flags(cmd: MetaCmd, key: &[u8], flags: &[u8]) -> Result<FlagSummary, RequestError> {
    let preparse_error = |specific: RequestError| match cmd {
        // memcached's md and ma answer every flag error with one line of their own.
        MetaCmd::Delete | MetaCmd::Arith => RequestError::InvalidOrDuplicateFlag,
        _ => specific,
    };
    let mut seen = [false; 128];
    let mut summary = FlagSummary::default();
    // Errors that let memcached read on through the flags: the last one is reported.
    let mut soft: Option<RequestError> = None;
    for token in tokens(flags) {
        let letter = token[0];
        if letter >= 127 || seen[letter as usize] {
            return Err(preparse_error(RequestError::DuplicateFlag));
        }
        seen[letter as usize] = true;
        let arg = &token[1..];
        match letter {
            b'b' => {
                summary.base64 = true;
                if decode_base64_key(key).is_none() {
                    soft = Some(RequestError::KeyDecode);
                }
            }
            b'N' | b'T' | b'R' if !is_i32(arg) => soft = Some(RequestError::BadToken),
            b'C' if !is_u64(arg) => soft = Some(RequestError::BadToken),
            // memcached reads F with safe_strtoul into 32 bits; its error has no
            // reason of its own: the last one stands.
            b'F' if !is_u32(arg) => soft = Some(soft.unwrap_or(RequestError::BadFormat)),
            b'M' if token.len() != 2 => soft = Some(RequestError::BadModeLength),
            b'J' if !is_u64(arg) => soft = Some(RequestError::BadInitial),
            b'D' if !is_u64(arg) => soft = Some(RequestError::BadDeltaFlag),
            b'q' => summary.quiet = true,
            b'N' | b'T' | b'R' | b'C' | b'F' | b'M' | b'J' | b'D' => {}
            b'l' | b'O' | b'P' | b'L' | b'k' | b's' | b't' | b'c' | b'f' | b'v' | b'h' | b'u'
            | b'I' => {}
            _ => return Err(preparse_error(RequestError::InvalidFlag)),
        }
    }
    if let Some(error) = soft {
        return Err(preparse_error(error));
    }
    // After the preparse: the opaque's length and the mode letter.
    for token in tokens(flags) {
        match token[0] {
            b'O' if token.len() > MAX_OPAQUE_LEN => return Err(RequestError::OpaqueTooLong),
            b'M' => {
                let valid = match cmd {
                    MetaCmd::Set => matches!(token[1], b'E' | b'A' | b'P' | b'R' | b'S'),
                    MetaCmd::Arith => matches!(token[1], b'I' | b'i' | b'+' | b'D' | b'd' | b'-'),
                    _ => true,
                };
                if !valid {
                    return Err(match cmd {
                        MetaCmd::Set => RequestError::BadSetMode,
                        _ => RequestError::BadArithMode,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(summary)
}

/// A base64 key decoded, if it is canonical base64 that memcached decodes the same way
/// (memcached's decoder also skips stray characters; such keys are refused here, since
/// the proxy routes on the decoded key).
pub fn decode_base64_key(key: &[u8]) -> Option<Vec<u8>> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(key)
        .ok()
        .filter(|decoded| !decoded.is_empty())
}

/// `safe_strtol`: a number memcached reads into an `int32_t` (wrapping, see
/// [`crate::number`]).
fn is_i32(arg: &[u8]) -> bool {
    strtol32(arg).is_some()
}

/// `safe_strtoull`.
fn is_u64(arg: &[u8]) -> bool {
    strtoull(arg).is_some()
}

/// `safe_strtoul`, the client flags.
fn is_u32(arg: &[u8]) -> bool {
    strtoul32(arg).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(cmd: MetaCmd, flags: &str) -> Result<FlagSummary, RequestError> {
        check_flags(cmd, b"key", flags.as_bytes())
    }

    #[test]
    fn flags_are_read_by_their_first_byte_as_memcached_reads_them() {
        let summary = check(MetaCmd::Get, "v qx").unwrap();
        assert!(summary.quiet, "qx is quiet to memcached");
        assert_eq!(check(MetaCmd::Get, "vxyz k").map(|s| s.quiet), Ok(false));
    }

    #[test]
    fn a_repeated_flag_is_refused_as_memcached_refuses_it() {
        assert_eq!(check(MetaCmd::Get, "v v"), Err(RequestError::DuplicateFlag));
        assert_eq!(
            check(MetaCmd::Get, "q qq"),
            Err(RequestError::DuplicateFlag)
        );
        assert_eq!(
            check(MetaCmd::Delete, "q q"),
            Err(RequestError::InvalidOrDuplicateFlag)
        );
        assert_eq!(
            check_flags(MetaCmd::Get, b"k", "v \u{e9}".as_bytes()),
            Err(RequestError::DuplicateFlag),
            "a first byte over 126 is memcached's duplicate flag"
        );
    }

    #[test]
    fn an_unknown_flag_is_refused() {
        assert_eq!(check(MetaCmd::Get, "v z"), Err(RequestError::InvalidFlag));
        assert_eq!(check(MetaCmd::Set, "E5"), Err(RequestError::InvalidFlag));
        assert_eq!(
            check(MetaCmd::Arith, "z"),
            Err(RequestError::InvalidOrDuplicateFlag)
        );
    }

    #[test]
    fn numeric_flags_must_be_numbers_and_the_last_error_is_reported() {
        assert_eq!(check(MetaCmd::Get, "Tx"), Err(RequestError::BadToken));
        assert_eq!(check(MetaCmd::Get, "T"), Err(RequestError::BadToken));
        assert!(check(MetaCmd::Get, "T-1 N+5 R0").is_ok());
        assert_eq!(
            check(MetaCmd::Get, "T99999999999999999999"),
            Err(RequestError::BadToken)
        );
        assert_eq!(check(MetaCmd::Set, "C-1"), Err(RequestError::BadToken));
        assert_eq!(check(MetaCmd::Set, "Fx"), Err(RequestError::BadFormat));
        assert_eq!(check(MetaCmd::Set, "Tx Fx"), Err(RequestError::BadToken));
        assert_eq!(
            check(MetaCmd::Arith, "Jx"),
            Err(RequestError::InvalidOrDuplicateFlag)
        );
        assert_eq!(check(MetaCmd::Get, "Jx"), Err(RequestError::BadInitial));
        assert_eq!(check(MetaCmd::Get, "Dx"), Err(RequestError::BadDeltaFlag));
        assert_eq!(check(MetaCmd::Get, "MSS"), Err(RequestError::BadModeLength));
    }

    #[test]
    fn numeric_flags_are_read_as_memcached_reads_them() {
        // 32-bit times wrap; -0 is a cas of 0; a tab ends a number.
        assert!(check(MetaCmd::Get, "T4294967296").is_ok());
        assert!(check(MetaCmd::Set, "C-0 F4294967297").is_ok());
        assert!(check(MetaCmd::Set, "T1\tx").is_ok());
        assert_eq!(check(MetaCmd::Set, "F-1"), Err(RequestError::BadFormat));
    }

    #[test]
    fn modes_and_opaques_are_checked_after_the_flags() {
        assert_eq!(check(MetaCmd::Set, "MX"), Err(RequestError::BadSetMode));
        assert!(check(MetaCmd::Set, "ME").is_ok());
        assert_eq!(check(MetaCmd::Arith, "MX"), Err(RequestError::BadArithMode));
        assert!(check(MetaCmd::Arith, "M-").is_ok());
        let opaque = format!("O{}", "9".repeat(MAX_OPAQUE_LEN));
        assert_eq!(
            check(MetaCmd::Get, &opaque),
            Err(RequestError::OpaqueTooLong)
        );
        assert!(check(MetaCmd::Get, &opaque[..MAX_OPAQUE_LEN]).is_ok());
    }

    #[test]
    fn a_base64_key_must_decode() {
        assert_eq!(
            check_flags(MetaCmd::Get, b"aGVsbG8=", b"b v"),
            Ok(FlagSummary {
                quiet: false,
                base64: true
            })
        );
        assert_eq!(
            check_flags(MetaCmd::Get, b"a!", b"b"),
            Err(RequestError::KeyDecode)
        );
        assert_eq!(
            decode_base64_key(b"aGVsbG8=").as_deref(),
            Some(&b"hello"[..])
        );
    }
}
