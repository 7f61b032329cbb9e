//! Why a request was rejected, which error line answers it, and what to discard.

use thiserror::Error;

/// The reason a request is rejected. Each maps to the line memcached 1.6.18 answers it
/// with, byte for byte (several reasons share one line: memcached gives
/// `CLIENT_ERROR bad command line format` for most malformed lines); the reason itself is
/// kept for the log. The proxy's own refusals (control characters in a key, a NUL byte,
/// a bare `\n`, a line over the limit) have lines of their own.
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
    /// A storage command's expiration time (memcached gives no reason there).
    #[error("invalid exptime")]
    BadExptime,
    #[error("invalid data length")]
    BadLength,
    #[error("invalid numeric delta argument")]
    BadDelta,
    #[error("invalid cas unique")]
    BadCas,
    /// `touch`'s and `flush_all`'s expiration time, which memcached names.
    #[error("invalid exptime argument")]
    InvalidExptime,
    #[error("value larger than the limit")]
    ValueTooLarge,
    #[error("data block not terminated by \\r\\n after its announced length")]
    BadDataChunk,
    #[error("delete with arguments other than 0 and noreply")]
    DeleteUsage,
    #[error("stats detail without on, off or dump")]
    StatsDetailUsage,
    #[error("stats cachedump without its two arguments")]
    StatsMissingArgs,
    #[error("stats cachedump of a slab class that cannot exist")]
    IllegalSlabId,
    /// An HTTP request line: memcached closes the connection without a reply.
    #[error("HTTP request")]
    HttpRequest,
    #[error("command line longer than the limit")]
    LineTooLong,
    /// A meta command line that even composed afresh is longer than memcached is sure
    /// to read ([`crate::limits::MEMCACHED_MAX_LINE`]): the connection is closed.
    #[error("meta command line longer than memcached reads in pieces")]
    LineTooLongForServer,
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
            // The lines of HttpRequest and LineTooLongForServer are never sent: the
            // connection is closed instead (see `Discard::Close`).
            RequestError::UnknownCommand
            | RequestError::EmptyLine
            | RequestError::HttpRequest
            | RequestError::LineTooLongForServer => b"ERROR\r\n",
            // memcached gives one line for every malformed storage line and long key.
            RequestError::BadFormat
            | RequestError::KeyTooLong
            | RequestError::BadFlags
            | RequestError::BadExptime
            | RequestError::BadLength
            | RequestError::BadCas
            | RequestError::NulInLine => b"CLIENT_ERROR bad command line format\r\n",
            RequestError::BadKey => b"CLIENT_ERROR key contains control characters\r\n",
            RequestError::BadDelta => b"CLIENT_ERROR invalid numeric delta argument\r\n",
            RequestError::InvalidExptime => b"CLIENT_ERROR invalid exptime argument\r\n",
            RequestError::ValueTooLarge => b"SERVER_ERROR object too large for cache\r\n",
            RequestError::BadDataChunk => b"CLIENT_ERROR bad data chunk\r\n",
            RequestError::DeleteUsage => {
                b"CLIENT_ERROR bad command line format.  Usage: delete <key> [noreply]\r\n"
            }
            RequestError::StatsDetailUsage => b"CLIENT_ERROR usage: stats detail on|off|dump\r\n",
            RequestError::StatsMissingArgs => b"CLIENT_ERROR bad command line\r\n",
            RequestError::IllegalSlabId => b"CLIENT_ERROR Illegal slab id\r\n",
            RequestError::LineTooLong => b"CLIENT_ERROR line too long\r\n",
            RequestError::BareNewline => b"CLIENT_ERROR line not terminated by \\r\\n\r\n",
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
    /// Everything: memcached closes the connection (after an HTTP request line).
    Close,
}

/// A key whose current value is to be dropped: memcached unlinks it when it refuses a
/// `set` (or an `ms`) as too large, so no stale value outlives a failed overwrite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unlink {
    /// The key as sent, in the rejected request's bytes.
    pub key: Span,
    /// The key is base64 (an `ms` with the `b` flag).
    pub base64: bool,
}

/// Where a key lies in the bytes of a rejected request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub len: usize,
}

impl Span {
    /// The span of `part`, which must lie inside `whole`.
    pub(crate) fn of(whole: &[u8], part: &[u8]) -> Span {
        Span {
            start: part.as_ptr() as usize - whole.as_ptr() as usize,
            len: part.len(),
        }
    }

    pub fn get<'a>(&self, bytes: &'a [u8]) -> &'a [u8] {
        &bytes[self.start..self.start + self.len]
    }
}

/// A rejected request: the error to answer with and how to get back in step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Invalid {
    pub error: RequestError,
    /// Bytes at the front of the buffer that belong to the rejected request; always > 0.
    pub consumed: usize,
    pub then: Discard,
    /// No reply line: memcached honours the client's `noreply` for this error (its
    /// classic commands read `noreply` before they check anything else; its meta
    /// commands always report errors), or closes the connection.
    pub silent: bool,
    /// A `set` or `ms` refused as too large: memcached also drops the key's current
    /// value, and so must whoever stands in for it.
    pub unlink: Option<Unlink>,
}

impl Invalid {
    /// A rejection of the first `consumed` bytes that is answered and drops nothing more.
    pub fn answered(error: RequestError, consumed: usize) -> Invalid {
        Invalid {
            error,
            consumed,
            then: Discard::Nothing,
            silent: false,
            unlink: None,
        }
    }

    /// The reply line to send, if any.
    pub fn reply(&self) -> Option<&'static [u8]> {
        (!self.silent).then(|| self.error.reply_line())
    }
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
        ParseError::Invalid(Invalid::answered(error, consumed))
    }
}

/// Why a server's reply (memcached or RESP) could not be read: wait for more bytes, or
/// the stream is no longer in step. Shared by both reply parsers, so it lives apart from
/// either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ReplyError {
    #[error("incomplete reply")]
    Incomplete,
    /// The server sent something that does not answer the request; the connection can no
    /// longer be trusted to be in step.
    #[error("malformed reply: {0}")]
    Malformed(&'static str),
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
            InvalidExptime,
            ValueTooLarge,
            BadDataChunk,
            DeleteUsage,
            StatsDetailUsage,
            StatsMissingArgs,
            IllegalSlabId,
            HttpRequest,
            LineTooLong,
            LineTooLongForServer,
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
            assert!(
                line == b"ERROR\r\n"
                    || line.starts_with(b"CLIENT_ERROR ")
                    || line.starts_with(b"SERVER_ERROR "),
                "{e:?}"
            );
        }
    }
}
