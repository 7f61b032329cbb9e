//! Request traces, without I/O of their own: read from any `BufRead` in bounded memory,
//! and each record composed into a request for memcached (text or binary) or Redis.
//!
//! Two formats, told apart by their first line ([`Format::detect`]):
//! - [`csv`]: twitter/cache-trace's CSV, `timestamp,key,key size,value size,client id,
//!   operation,TTL`, one request a line; the timestamp in seconds, whole (as Twitter's
//!   traces) or fractional (as our own traces and captures, which need sub-second timing);
//! - [`monitor`]: Redis `MONITOR` output, `1339518083.107412 [0 127.0.0.1:60866] "SET" "k"
//!   "v"`, with the quoting of Redis's `sdscatrepr`.
//!
//! [`open`] takes the bytes as they are on disk, plain or zstd-compressed (told by the
//! frame's magic bytes), and gives a [`TraceReader`] of [`Record`]s; [`Composer`] turns a
//! record into a request, and [`read_reply`] says what its reply means. Every refusal is one
//! [`TraceError`] line that names the line.

pub mod compose;
pub mod csv;
mod error;
mod lines;
pub mod monitor;
mod reader;
pub mod reply;

pub use compose::Composer;
pub use error::{TraceError, TraceErrorKind};
pub use reader::{open, Format, ReadOptions, TraceReader, BACKWARDS_TOLERANCE_NS};
pub use reply::read_reply;

/// One request of a trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Record {
    /// When it was sent, in nanoseconds from the trace's first request.
    pub time_ns: u64,
    /// The key as recorded (anonymized in Twitter's traces).
    pub key: Vec<u8>,
    /// The key's size as recorded; a shorter `key` is padded to it when sent.
    pub key_size: u32,
    /// The value's size: what a write sends, or what a read got back (0: a miss or
    /// unknown).
    pub value_size: u32,
    /// Who sent it: Twitter's client id, a capture's connection, a hash of MONITOR's
    /// client address.
    pub client: u64,
    pub op: TraceOp,
    /// Time to live in seconds (0: none, and always 0 for a request that is not a write).
    pub ttl: u32,
    /// The trace line it came from (1-based), for messages.
    pub line: u64,
}

/// The operations of twitter/cache-trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum TraceOp {
    #[default]
    Get,
    Gets,
    Set,
    Add,
    Replace,
    Cas,
    Append,
    Prepend,
    Delete,
    Incr,
    Decr,
}

impl TraceOp {
    pub const ALL: [TraceOp; 11] = [
        TraceOp::Get,
        TraceOp::Gets,
        TraceOp::Set,
        TraceOp::Add,
        TraceOp::Replace,
        TraceOp::Cas,
        TraceOp::Append,
        TraceOp::Prepend,
        TraceOp::Delete,
        TraceOp::Incr,
        TraceOp::Decr,
    ];

    /// The name in the CSV format.
    pub fn name(self) -> &'static str {
        match self {
            TraceOp::Get => "get",
            TraceOp::Gets => "gets",
            TraceOp::Set => "set",
            TraceOp::Add => "add",
            TraceOp::Replace => "replace",
            TraceOp::Cas => "cas",
            TraceOp::Append => "append",
            TraceOp::Prepend => "prepend",
            TraceOp::Delete => "delete",
            TraceOp::Incr => "incr",
            TraceOp::Decr => "decr",
        }
    }

    pub fn from_name(name: &[u8]) -> Option<TraceOp> {
        TraceOp::ALL
            .into_iter()
            .find(|op| op.name().as_bytes() == name)
    }

    /// A read (get, gets): its answer is a hit or a miss.
    pub fn is_read(self) -> bool {
        matches!(self, TraceOp::Get | TraceOp::Gets)
    }

    /// A write that carries a value of the record's value size.
    pub fn carries_value(self) -> bool {
        matches!(
            self,
            TraceOp::Set
                | TraceOp::Add
                | TraceOp::Replace
                | TraceOp::Cas
                | TraceOp::Append
                | TraceOp::Prepend
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_reads_back_from_its_name() {
        for op in TraceOp::ALL {
            assert_eq!(TraceOp::from_name(op.name().as_bytes()), Some(op));
        }
        assert_eq!(TraceOp::from_name(b"GET"), None);
        assert_eq!(TraceOp::from_name(b"touch"), None);
    }
}
