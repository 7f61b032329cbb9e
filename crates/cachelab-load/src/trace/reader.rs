//! The trace reader: bytes in (plain or zstd), checked records out, one at a time, in
//! memory bounded by the line bound (and a zstd frame's window), never by the trace.
//!
//! The rules a trace must keep, each refused in one line naming the line:
//! - every line ends with a newline (a last line without one is a truncated file);
//! - no line is longer than [`ReadOptions::max_line`] (1 MiB by default);
//! - times never go backwards by more than [`BACKWARDS_TOLERANCE_NS`]; a time less far
//!   back (clocks of several capture threads) is read as the latest time so far, so
//!   record times never decrease;
//! - operations, sizes and ids are as the format says; a value size is at most
//!   [`ReadOptions::max_value_size`], a key size at most [`MAX_KEY_SIZE`];
//! - for memcached ([`ReadOptions::for_protocol`]), a key (padded to its recorded size)
//!   is at most 250 bytes, and for the text protocol has no space or control byte.

use std::io::{BufRead, BufReader, Cursor, Read};

use super::error::{TraceError, TraceErrorKind};
use super::lines::{read_line, Line, ZstdFrames, ZSTD_MAGIC};
use super::{csv, monitor, Record};
use crate::config::Protocol;

/// How far back a time may go before the trace is refused: 10 ms.
pub const BACKWARDS_TOLERANCE_NS: u64 = 10_000_000;
/// The longest line read by default: 1 MiB.
pub const DEFAULT_MAX_LINE: usize = 1 << 20;
/// The largest value size read by default: 64 MiB.
pub const DEFAULT_MAX_VALUE_SIZE: u32 = 64 << 20;
/// The largest recorded key size (a key is padded to it, so it is memory): 1 MiB.
pub const MAX_KEY_SIZE: u32 = 1 << 20;

/// The two formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Monitor,
}

impl Format {
    /// The format of a trace whose first non-empty line is `line`: MONITOR output has
    /// `[db client]` after its time (or is redis-cli's `OK`), CSV has none.
    pub fn detect(line: &[u8]) -> Format {
        let after_time = line.iter().position(|b| *b == b' ').map(|i| &line[i..]);
        if line == b"OK"
            || line.starts_with(b"+")
            || after_time.is_some_and(|t| t.starts_with(b" ["))
        {
            Format::Monitor
        } else {
            Format::Csv
        }
    }
}

/// What the reader accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOptions {
    pub max_line: usize,
    pub max_value_size: u32,
    /// The protocol the records will be sent in: memcached's key rules apply to its two.
    pub target: Option<Protocol>,
    /// The format, or `None` to tell it from the first line.
    pub format: Option<Format>,
}

impl Default for ReadOptions {
    fn default() -> ReadOptions {
        ReadOptions {
            max_line: DEFAULT_MAX_LINE,
            max_value_size: DEFAULT_MAX_VALUE_SIZE,
            target: None,
            format: None,
        }
    }
}

impl ReadOptions {
    /// The defaults, with the key rules of `protocol`.
    pub fn for_protocol(protocol: Protocol) -> ReadOptions {
        ReadOptions {
            target: Some(protocol),
            ..ReadOptions::default()
        }
    }
}

/// Records read one by one from a trace.
pub struct TraceReader<R> {
    input: R,
    options: ReadOptions,
    compressed: bool,
    line: u64,
    buf: Vec<u8>,
    /// The records of the current line not yet returned (a MONITOR MGET has several),
    /// in reverse order.
    pending: Vec<Record>,
    /// The first record's time, and the latest so far (both as in the file).
    start: Option<u64>,
    latest: u64,
    failed: bool,
}

/// The reader of `input` as it is on disk: zstd-compressed when it opens with a zstd
/// frame's magic number, plain text otherwise.
pub fn open<R: Read + Send + 'static>(
    mut input: R,
    options: ReadOptions,
) -> Result<TraceReader<Box<dyn BufRead + Send>>, TraceError> {
    let io = |e| TraceError::new(0, TraceErrorKind::Io(e));
    let mut head = [0u8; 4];
    let mut got = 0;
    while got < head.len() {
        match input.read(&mut head[got..]).map_err(io)? {
            0 => break,
            n => got += n,
        }
    }
    let whole = Cursor::new(head[..got].to_vec()).chain(input);
    let compressed = head[..got] == ZSTD_MAGIC;
    let reader: Box<dyn BufRead + Send> = if compressed {
        let frames = ZstdFrames::new(BufReader::with_capacity(1 << 16, whole));
        Box::new(BufReader::with_capacity(1 << 16, frames))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, whole))
    };
    Ok(TraceReader::new(reader, options, compressed))
}

impl<R: BufRead> TraceReader<R> {
    /// A reader of plain text (see [`open`] for compressed input).
    pub fn new(input: R, options: ReadOptions, compressed: bool) -> TraceReader<R> {
        TraceReader {
            input,
            options,
            compressed,
            line: 0,
            buf: Vec::new(),
            pending: Vec::new(),
            start: None,
            latest: 0,
            failed: false,
        }
    }

    /// The format, once the first line told it.
    pub fn format(&self) -> Option<Format> {
        self.options.format
    }

    /// The next record, `None` at the end of the trace.
    pub fn next_record(&mut self) -> Result<Option<Record>, TraceError> {
        loop {
            if let Some(record) = self.pending.pop() {
                return Ok(Some(record));
            }
            if !self.read_line()? {
                return Ok(None);
            }
            let fail = |kind| TraceError::new(self.line, kind);
            let format = *self
                .options
                .format
                .get_or_insert_with(|| Format::detect(&self.buf));
            match format {
                Format::Csv => {
                    let mut record = Record::default();
                    csv::parse_line(&self.buf, &mut record).map_err(fail)?;
                    self.pending.push(record);
                }
                Format::Monitor => {
                    monitor::parse_line(&self.buf, &mut self.pending).map_err(fail)?;
                    self.pending.reverse();
                }
            }
            let mut records = std::mem::take(&mut self.pending);
            for record in &mut records {
                self.check(record)
                    .map_err(|kind| TraceError::new(self.line, kind))?;
            }
            self.pending = records;
        }
    }

    /// Reads the next non-empty line into `buf`: false at the end.
    fn read_line(&mut self) -> Result<bool, TraceError> {
        loop {
            let got = read_line(&mut self.input, &mut self.buf, self.options.max_line);
            self.line += 1;
            let kind = match got {
                Ok(Line::Read) if self.buf.iter().all(u8::is_ascii_whitespace) => continue,
                Ok(Line::Read) => return Ok(true),
                Ok(Line::End) => return Ok(false),
                Ok(Line::Truncated) => TraceErrorKind::TruncatedLine,
                Ok(Line::TooLong) => TraceErrorKind::LineTooLong {
                    max: self.options.max_line,
                },
                Err(e) if self.compressed => TraceErrorKind::Zstd(e.to_string()),
                Err(e) => TraceErrorKind::Io(e),
            };
            return Err(TraceError::new(self.line, kind));
        }
    }

    /// The record with its line and its time from the trace's start, once it keeps the
    /// rules.
    fn check(&mut self, record: &mut Record) -> Result<(), TraceErrorKind> {
        record.line = self.line;
        let time = record.time_ns;
        let start = *self.start.get_or_insert(time);
        self.latest = self.latest.max(start);
        if time.saturating_add(BACKWARDS_TOLERANCE_NS) < self.latest {
            return Err(TraceErrorKind::Backwards {
                time: format!("{}.{:09}", time / 1_000_000_000, time % 1_000_000_000),
                behind_ms: (self.latest - time) as f64 / 1e6,
                tolerance_ms: BACKWARDS_TOLERANCE_NS as f64 / 1e6,
            });
        }
        self.latest = self.latest.max(time);
        record.time_ns = self.latest - start;
        let too_large = |field, value: u32, max: u32| TraceErrorKind::TooLarge {
            field,
            value: u64::from(value),
            max: u64::from(max),
        };
        if record.value_size > self.options.max_value_size {
            let max = self.options.max_value_size;
            return Err(too_large("value size", record.value_size, max));
        }
        if record.key_size > MAX_KEY_SIZE {
            return Err(too_large("key size", record.key_size, MAX_KEY_SIZE));
        }
        if let Some(Protocol::MemcacheText | Protocol::MemcacheBinary) = self.options.target {
            let size = record.key.len().max(record.key_size as usize);
            if size > cachelab_protocol::limits::MAX_KEY_LEN {
                return Err(TraceErrorKind::KeyTooLong { size });
            }
        }
        if self.options.target == Some(Protocol::MemcacheText) {
            if let Some(b) = record.key.iter().find(|b| **b <= b' ' || **b == 0x7f) {
                return Err(TraceErrorKind::KeyByte(*b));
            }
        }
        Ok(())
    }
}

impl<R: BufRead> Iterator for TraceReader<R> {
    type Item = Result<Record, TraceError>;

    /// The next record; after an error, nothing more.
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let next = self.next_record().transpose();
        self.failed = matches!(next, Some(Err(_)));
        next
    }
}

#[cfg(test)]
#[path = "reader_tests.rs"]
mod tests;
