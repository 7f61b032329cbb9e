//! A trace refused: the line and what is wrong with it, in one line.

use std::fmt;

/// What is wrong with a trace, at `line` (1-based; 0 when no line was read).
#[derive(Debug)]
pub struct TraceError {
    pub line: u64,
    pub kind: TraceErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceErrorKind {
    #[error("the file ends inside a line (truncated?)")]
    TruncatedLine,
    #[error("cannot decompress: {0} (a truncated or damaged zstd frame?)")]
    Zstd(String),
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    #[error("a line longer than {max} bytes")]
    LineTooLong { max: usize },
    #[error("time {time} is {behind_ms:.3} ms before an earlier line's (more than {tolerance_ms} ms backwards)")]
    Backwards {
        time: String,
        behind_ms: f64,
        tolerance_ms: f64,
    },
    #[error("unknown operation '{0}'")]
    UnknownOp(String),
    #[error("{field} '{value}' is not a number")]
    NotANumber { field: &'static str, value: String },
    #[error("{field} {value} is over the bound of {max}")]
    TooLarge {
        field: &'static str,
        value: u64,
        max: u64,
    },
    #[error("{0}")]
    Malformed(String),
    #[error("key of {size} bytes: memcached takes keys of at most 250")]
    KeyTooLong { size: usize },
    #[error("key has byte 0x{0:02x}, which memcached's text protocol cannot carry in a key")]
    KeyByte(u8),
}

impl TraceError {
    pub fn new(line: u64, kind: TraceErrorKind) -> TraceError {
        TraceError { line, kind }
    }
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "trace: {}", self.kind)
        } else {
            write!(f, "trace line {}: {}", self.line, self.kind)
        }
    }
}

impl std::error::Error for TraceError {}
