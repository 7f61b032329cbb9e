//! Where a server's reply ends, found across reads.
//!
//! A proxy reads a reply in as many pieces as the network gives it. Parsing the reply
//! from its first byte on every read costs the square of its length when it arrives in
//! small pieces (an `MGET` of ten thousand keys, a multi-get of many values), so
//! [`ReplyScan`] remembers where the last read stopped (the open arrays, the data block
//! being waited for, how far a line was searched) and looks at each byte once.
//!
//! It also lets a reader go past a reply it will not hold: [`ReplyScan::discardable`]
//! says how many leading bytes it no longer needs, [`ReplyScan::discard`] accounts for
//! their removal, and the reply's end is still found, so the replies after it stay in
//! step. A RESP reply is summarised on the way ([`ReplyScan::resp_kind`]), without the
//! depth and line limits of [`crate::parse_resp_reply`]: whatever Redis sends is framed.

use super::{error_line, parse_reply, values, Expect, Reply, ReplyError, RespKind, MAX_REPLY_LINE};
use crate::line::{parse_i64, parse_u64, tokens};
use crate::resp::MAX_BULK_LEN;

/// Arrays open at once in one RESP reply. Each level costs the scanner one counter and
/// the server at least four bytes (`*1\r\n`); past this the reply is called malformed
/// rather than letting a stream of headers grow the scanner without bound.
pub const MAX_OPEN_ARRAYS: usize = 1 << 16;

/// A RESP length line (`$<n>`, `*<n>`, `:<n>`) longer than this cannot hold a number.
const MAX_NUMBER_LINE: usize = 64;

/// The framing state of one reply (see the module's doc).
#[derive(Debug, Clone)]
pub struct ReplyScan {
    expect: Expect,
    /// Where the next line or data block starts.
    pos: usize,
    /// Where the search for the current line's end resumes.
    searched: usize,
    /// The data block being read ends (with its `\r\n`) here.
    block_end: Option<usize>,
    /// The type byte of the RESP line being read (kept when its text was discarded).
    line_kind: Option<u8>,
    /// RESP: elements still due in each open array, innermost last.
    open: Vec<usize>,
    /// RESP: the top-level reply, once its header is read.
    top: Option<RespKind>,
    /// Memcached: lines read so far (an error line answers only as the first).
    lines: u32,
    /// A retrieval reply: the values framed so far.
    values: u32,
    /// A retrieval reply whose `END` was framed: its [`Reply`] (so that
    /// [`ReplyScan::reply`] need not parse it again). Never set after a discard.
    framed: Option<Reply>,
    /// Bytes were discarded: positions no longer count from the reply's start.
    discarded: bool,
    /// Bytes looked at, over every call: the cost that stays linear.
    examined: u64,
}

impl ReplyScan {
    /// A scan of the reply to a request of kind `expect`, from its first byte.
    pub fn new(expect: Expect) -> ReplyScan {
        ReplyScan {
            expect,
            pos: 0,
            searched: 0,
            block_end: None,
            line_kind: None,
            open: Vec::new(),
            top: None,
            lines: 0,
            values: 0,
            framed: None,
            discarded: false,
            examined: 0,
        }
    }

    pub fn expect(&self) -> Expect {
        self.expect
    }

    /// Continues over `buf` (the reply's bytes held so far, the same bytes as at the last
    /// call plus what arrived since, less what was [`ReplyScan::discard`]ed): the reply's
    /// length once its end is in `buf`, `None` while more bytes are needed, or
    /// [`ReplyError::Malformed`] when the bytes cannot be this reply.
    pub fn advance(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        if self.expect == Expect::Resp {
            self.advance_resp(buf)
        } else {
            self.advance_text(buf)
        }
    }

    /// Whether nothing was discarded: positions still count from the reply's first
    /// byte, so the reply found is all of it.
    pub fn from_first_byte(&self) -> bool {
        !self.discarded
    }

    /// Bytes looked at so far (a frame read in 1-byte pieces looks at each byte once).
    pub fn examined(&self) -> u64 {
        self.examined
    }

    /// How many leading bytes of `buf` the scan will not look at again.
    pub fn discardable(&self, buf: &[u8]) -> usize {
        if let Some(end) = self.block_end {
            // The block's `\r\n` is checked when it is all there.
            return buf.len().min(end - 2).max(self.pos);
        }
        match self.line_kind {
            // A status or error line's text is not needed, only its end; the last byte
            // searched stays, to check the `\r` before the `\n`.
            Some(b'+' | b'-') => self.searched.saturating_sub(1).max(self.pos),
            _ => self.pos,
        }
    }

    /// The first `n` bytes (at most [`ReplyScan::discardable`]) were removed.
    pub fn discard(&mut self, n: usize) {
        self.framed = None;
        self.discarded |= n > 0;
        self.pos = self.pos.saturating_sub(n);
        self.searched -= n.min(self.searched);
        if let Some(end) = &mut self.block_end {
            *end -= n;
        }
    }

    /// The summary of a RESP reply whose end [`ReplyScan::advance`] found.
    pub fn resp_kind(&self) -> Option<RespKind> {
        self.top
    }

    /// The reply whose end was found: `reply` is exactly its bytes. RESP replies were
    /// summarised while scanning; a memcached reply is parsed now, once.
    pub fn reply(&self, reply: &[u8]) -> Result<Reply, ReplyError> {
        if let Some(kind) = self.top {
            return Ok(Reply::Resp(kind));
        }
        if let Some(framed @ Reply::Values { body_len, .. }) = self.framed {
            // Framed header by header with the parser's own checks, and `reply` ends
            // with the `END` line found after `body_len` bytes.
            if reply.len() == body_len + 5 {
                return Ok(framed);
            }
        }
        match parse_reply(reply, self.expect) {
            Ok((parsed, len)) if len == reply.len() => Ok(parsed),
            Ok(_) | Err(ReplyError::Incomplete) => {
                Err(ReplyError::Malformed("reply framed differently"))
            }
            Err(e) => Err(e),
        }
    }

    /// The end of the line starting at `self.pos` (the index of its `\n`), searching at
    /// most `max` bytes of it; `None` when it is not all there yet.
    fn line_end(&mut self, buf: &[u8], max: usize) -> Result<Option<usize>, ReplyError> {
        let limit = buf.len().min(self.pos.saturating_add(max));
        let from = self.searched.max(self.pos);
        if from < limit {
            self.examined += (limit - from) as u64;
            if let Some(i) = memchr::memchr(b'\n', &buf[from..limit]) {
                let newline = from + i;
                self.searched = newline;
                if newline <= self.pos || buf[newline - 1] != b'\r' {
                    return Err(ReplyError::Malformed("reply line without \\r"));
                }
                return Ok(Some(newline));
            }
            self.searched = limit;
        }
        if limit - self.pos.min(limit) >= max {
            return Err(ReplyError::Malformed("reply line too long"));
        }
        Ok(None)
    }

    /// Waits for the data block being read: `Ok(true)` once it is all there.
    fn block_done(&mut self, buf: &[u8]) -> Result<bool, ReplyError> {
        let Some(end) = self.block_end else {
            return Ok(true);
        };
        if buf.len() < end {
            return Ok(false);
        }
        if &buf[end - 2..end] != b"\r\n" {
            return Err(ReplyError::Malformed("data block not terminated by \\r\\n"));
        }
        self.block_end = None;
        self.pos = end;
        self.searched = end;
        Ok(true)
    }

    fn advance_text(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        loop {
            if self.block_end.is_some() {
                if !self.block_done(buf)? {
                    return Ok(None);
                }
                if self.expect == Expect::Meta {
                    return Ok(Some(self.pos));
                }
                continue;
            }
            let Some(newline) = self.line_end(buf, MAX_REPLY_LINE + 2)? else {
                return Ok(None);
            };
            let line = &buf[self.pos..newline - 1];
            let next = newline + 1;
            self.lines += 1;
            if self.lines == 1 && error_line(line).is_some() {
                return Ok(Some(next));
            }
            let block = match self.expect {
                Expect::Values if line == b"END" => {
                    self.framed = (!self.discarded).then_some(Reply::Values {
                        hits: self.values,
                        body_len: self.pos,
                    });
                    return Ok(Some(next));
                }
                Expect::Stats if line == b"END" => return Ok(Some(next)),
                Expect::Values => {
                    self.values += 1;
                    values::value_header(line)?.length
                }
                Expect::Stats => 0,
                Expect::Meta if line.starts_with(b"VA ") => tokens(line)
                    .nth(1)
                    .and_then(parse_u64)
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or(ReplyError::Malformed("bad length in VA line"))?,
                _ => return Ok(Some(next)),
            };
            self.pos = next;
            self.searched = next;
            if self.expect != Expect::Stats {
                let end = next
                    .checked_add(block)
                    .and_then(|e| e.checked_add(2))
                    .ok_or(ReplyError::Malformed("value length overflows"))?;
                self.block_end = Some(end);
            }
        }
    }

    fn advance_resp(&mut self, buf: &[u8]) -> Result<Option<usize>, ReplyError> {
        loop {
            if self.block_end.is_some() {
                if !self.block_done(buf)? {
                    return Ok(None);
                }
                if self.element_done() {
                    return Ok(Some(self.pos));
                }
                continue;
            }
            let kind = match self.line_kind {
                Some(kind) => kind,
                None => {
                    let Some(&kind) = buf.get(self.pos) else {
                        return Ok(None);
                    };
                    if !matches!(kind, b'+' | b'-' | b':' | b'$' | b'*') {
                        return Err(ReplyError::Malformed("unknown RESP type byte"));
                    }
                    self.line_kind = Some(kind);
                    self.searched = self.pos + 1;
                    kind
                }
            };
            let max = match kind {
                b'+' | b'-' => usize::MAX,
                _ => MAX_NUMBER_LINE,
            };
            let Some(newline) = self.line_end(buf, max)? else {
                return Ok(None);
            };
            self.line_kind = None;
            let next = newline + 1;
            let text = &buf[(self.pos + 1).min(newline - 1)..newline - 1];
            self.pos = next;
            self.searched = next;
            let null = match kind {
                b'+' => self.set_top(RespKind::Simple),
                b'-' => self.set_top(RespKind::Error),
                b':' => {
                    let n = parse_i64(text)
                        .ok_or(ReplyError::Malformed("RESP integer is not a number"))?;
                    self.set_top(RespKind::Integer(n))
                }
                b'$' => match length(text)? {
                    None => self.set_top(RespKind::Bulk { null: true }),
                    Some(len) if len > MAX_BULK_LEN => {
                        return Err(ReplyError::Malformed("bulk string longer than the limit"))
                    }
                    Some(len) => {
                        self.set_top(RespKind::Bulk { null: false });
                        self.block_end = Some(next + len + 2);
                        continue;
                    }
                },
                _ => match length(text)? {
                    None => self.set_top(RespKind::Array {
                        len: 0,
                        nulls: 0,
                        null: true,
                    }),
                    Some(len) => {
                        self.set_top(RespKind::Array {
                            len,
                            nulls: 0,
                            null: false,
                        });
                        if len > 0 {
                            if self.open.len() >= MAX_OPEN_ARRAYS {
                                return Err(ReplyError::Malformed("RESP arrays nested too deeply"));
                            }
                            self.open.push(len);
                            continue;
                        }
                        false
                    }
                },
            };
            if null && self.open.len() == 1 {
                if let Some(RespKind::Array { nulls, .. }) = &mut self.top {
                    *nulls += 1;
                }
            }
            if self.element_done() {
                return Ok(Some(self.pos));
            }
        }
    }

    /// Records the top-level reply's kind if this is its header; whether the item is null.
    fn set_top(&mut self, kind: RespKind) -> bool {
        if self.open.is_empty() && self.top.is_none() {
            self.top = Some(kind);
        }
        matches!(
            kind,
            RespKind::Bulk { null: true } | RespKind::Array { null: true, .. }
        )
    }

    /// One element ended: closes the arrays it completes; true when the reply did.
    fn element_done(&mut self) -> bool {
        while let Some(due) = self.open.last_mut() {
            *due -= 1;
            if *due > 0 {
                return false;
            }
            self.open.pop();
        }
        true
    }
}

/// A length from a `$` or `*` line: `None` for -1 (null).
fn length(text: &[u8]) -> Result<Option<usize>, ReplyError> {
    match parse_i64(text) {
        Some(-1) => Ok(None),
        Some(n) if n >= 0 => Ok(usize::try_from(n).ok()),
        _ => Err(ReplyError::Malformed("bad RESP length")),
    }
}

#[cfg(test)]
mod tests;
