//! Why a request was rejected, which error line answers it, and what to discard.

use thiserror::Error;

/// The reason a request is rejected. Each maps to the memcached error line a client
/// expects (`ERROR` for an unknown command, `CLIENT_ERROR <reason>` otherwise).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum RequestError {
    #[error("unknown command")]
    UnknownCommand,
    #[error("empty command line")]
    EmptyLine,
    #[error("bad command line format")]
    BadFormat,
    #[error("key longer than the limit")]
    KeyTooLong,
    #[error("key contains a control character")]
    BadKey,
    #[error("invalid flags")]
    BadFlags,
    #[error("invalid exptime")]
    BadExptime,
    #[error("invalid data length")]
    BadLength,
    #[error("invalid numeric delta argument")]
    BadDelta,
    #[error("invalid cas unique")]
    BadCas,
    #[error("value larger than the limit")]
    ValueTooLarge,
    #[error("data block does not match its announced length")]
    BadDataChunk,
    #[error("command line longer than the limit")]
    LineTooLong,
    #[error("command line not terminated by \\r\\n")]
    BareNewline,
    /// A NUL byte in a command line: memcached reads the line only up to it, so the
    /// proxy and the server would see different requests.
    #[error("NUL byte in the command line")]
    NulInLine,
    /// The meta commands' errors, with memcached 1.6's own texts.
    #[error("duplicate meta flag")]
    DuplicateFlag,
    #[error("invalid meta flag")]
    InvalidFlag,
    #[error("invalid or duplicate meta flag")]
    InvalidOrDuplicateFlag,
    #[error("bad numeric token in a meta flag")]
    BadToken,
    #[error("meta M token of the wrong length")]
    BadModeLength,
    #[error("invalid mode for ms")]
    BadSetMode,
    #[error("invalid mode for ma")]
    BadArithMode,
    #[error("invalid numeric initial value")]
    BadInitial,
    #[error("invalid numeric delta value")]
    BadDeltaFlag,
    #[error("opaque token too long")]
    OpaqueTooLong,
    #[error("base64 key does not decode")]
    KeyDecode,
    /// More tokens on an mg line than memcached reads.
    #[error("too many meta flags (mg)")]
    GetFlagsTooLong,
    /// More tokens on an ms, md or ma line than memcached reads.
    #[error("too many meta flags")]
    FlagsTooLong,
}

impl RequestError {
    /// The complete reply line, `\r\n` included.
    pub fn reply_line(self) -> &'static [u8] {
        match self {
            RequestError::UnknownCommand | RequestError::EmptyLine => b"ERROR\r\n",
            RequestError::BadFormat => b"CLIENT_ERROR bad command line format\r\n",
            RequestError::KeyTooLong => b"CLIENT_ERROR key too long\r\n",
            RequestError::BadKey => b"CLIENT_ERROR key contains control characters\r\n",
            RequestError::BadFlags => b"CLIENT_ERROR invalid flags\r\n",
            RequestError::BadExptime => b"CLIENT_ERROR invalid exptime\r\n",
            RequestError::BadLength => b"CLIENT_ERROR invalid data length\r\n",
            RequestError::BadDelta => b"CLIENT_ERROR invalid numeric delta argument\r\n",
            RequestError::BadCas => b"CLIENT_ERROR invalid cas unique\r\n",
            RequestError::ValueTooLarge => b"CLIENT_ERROR value too large\r\n",
            RequestError::BadDataChunk => b"CLIENT_ERROR bad data chunk\r\n",
            RequestError::LineTooLong => b"CLIENT_ERROR line too long\r\n",
            RequestError::BareNewline => b"CLIENT_ERROR line not terminated by \\r\\n\r\n",
            RequestError::NulInLine => b"CLIENT_ERROR bad command line format\r\n",
            RequestError::DuplicateFlag => b"CLIENT_ERROR duplicate flag\r\n",
            RequestError::InvalidFlag => b"CLIENT_ERROR invalid flag\r\n",
            RequestError::InvalidOrDuplicateFlag => b"CLIENT_ERROR invalid or duplicate flag\r\n",
            RequestError::BadToken => b"CLIENT_ERROR bad token in command line format\r\n",
            RequestError::BadModeLength => b"CLIENT_ERROR incorrect length for M token\r\n",
            RequestError::BadSetMode => b"CLIENT_ERROR invalid mode for ms M token\r\n",
            RequestError::BadArithMode => b"CLIENT_ERROR invalid mode for ma M token\r\n",
            RequestError::BadInitial => b"CLIENT_ERROR invalid numeric initial value\r\n",
            RequestError::BadDeltaFlag => b"CLIENT_ERROR invalid numeric delta value\r\n",
            RequestError::OpaqueTooLong => b"CLIENT_ERROR opaque token too long\r\n",
            RequestError::KeyDecode => b"CLIENT_ERROR error decoding key\r\n",
            RequestError::GetFlagsTooLong => b"CLIENT_ERROR options flags are too long\r\n",
            RequestError::FlagsTooLong => b"CLIENT_ERROR options flags too long\r\n",
        }
    }
}

/// What to drop *after* the `consumed` bytes, from bytes that may not have arrived yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Discard {
    /// Nothing more: the next byte starts a new request.
    Nothing,
    /// Exactly this many more bytes (the data block of a value that was too large).
    Bytes(u64),
    /// Everything up to and including the next `\n` (resynchronise after garbage).
    ThroughNewline,
}

/// A rejected request: the error to answer with and how to get back in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub error: RequestError,
    /// Bytes at the front of the buffer that belong to the rejected request; always > 0.
    pub consumed: usize,
    pub then: Discard,
}

/// The outcome of parsing that did not produce a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ParseError {
    /// The buffer holds the start of a request; wait for more bytes.
    #[error("incomplete request")]
    Incomplete,
    #[error("invalid request: {}", .0.error)]
    Invalid(Invalid),
}

impl ParseError {
    pub(crate) fn invalid(error: RequestError, consumed: usize) -> Self {
        ParseError::Invalid(Invalid {
            error,
            consumed,
            then: Discard::Nothing,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reply_line_is_one_crlf_terminated_line() {
        use RequestError::*;
        for e in [
            UnknownCommand,
            EmptyLine,
            BadFormat,
            KeyTooLong,
            BadKey,
            BadFlags,
            BadExptime,
            BadLength,
            BadDelta,
            BadCas,
            ValueTooLarge,
            BadDataChunk,
            LineTooLong,
            BareNewline,
            NulInLine,
            DuplicateFlag,
            InvalidFlag,
            InvalidOrDuplicateFlag,
            BadToken,
            BadModeLength,
            BadSetMode,
            BadArithMode,
            BadInitial,
            BadDeltaFlag,
            OpaqueTooLong,
            KeyDecode,
            GetFlagsTooLong,
            FlagsTooLong,
        ] {
            let line = e.reply_line();
            assert!(line.ends_with(b"\r\n"), "{e:?}");
            assert_eq!(memchr::memchr(b'\n', line), Some(line.len() - 1), "{e:?}");
            assert!(line.starts_with(b"ERROR") || line.starts_with(b"CLIENT_ERROR "));
        }
    }
}
