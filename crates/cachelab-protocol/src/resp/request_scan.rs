//! Where a client's RESP request ends, found across reads.
//!
//! [`parse_command`] reads a whole request from its first byte. Called on every read of
//! an unfinished array, it would walk every argument received so far again (and build
//! their list again), so a client sending `*700000` and then one argument at a time
//! costs the proxy the square of what it sends. [`RequestScan`] remembers how far the
//! request was checked (the arguments still due, the argument being read, how far a
//! line was searched), so each byte is looked at once; [`parse_command`] runs when the
//! request is all there, once, and its argument list is sized by the bytes received.
//!
//! The scan follows [`parse_command`]'s rules exactly: it reports
//! [`RequestScan::advance`] `Ready` exactly when [`parse_command`] on the same bytes
//! would return a command or a protocol error rather than ask for more.

use super::request::{parse_command, string2ll, Command, RespLimits, RespParseError};

/// The scan's verdict on the bytes held so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scan {
    /// The request is not all there; read more.
    Incomplete,
    /// [`parse_command`] now gives a command or a protocol error.
    Ready,
}

/// The framing state of the request at the front of a client's buffer.
#[derive(Debug, Clone, Default)]
pub struct RequestScan {
    /// Where the next header line starts.
    pos: usize,
    /// Where the search for the current line's end resumes.
    searched: usize,
    /// Arguments still due once the array's header is read.
    due: Option<usize>,
    /// The argument being read ends (with its `\r\n`) here.
    arg_end: Option<usize>,
    /// The line being read (inline, or a header) holds a NUL before its end: Redis's
    /// `strchr` never finds that end, so only the inline limit ends the request.
    nul: bool,
    /// Bytes looked at, over every call.
    examined: u64,
}

impl RequestScan {
    /// Continues over `buf`: the bytes of the request held so far (the same bytes as at
    /// the last call, plus what arrived since). Start again with [`RequestScan::reset`]
    /// once the request is consumed.
    pub fn advance(&mut self, buf: &[u8], limits: &RespLimits) -> Scan {
        match buf.first() {
            None => Scan::Incomplete,
            Some(b'*') => self.multibulk(buf, limits),
            Some(_) => self.inline(buf, limits),
        }
    }

    /// Scans, then parses the request once it is all there.
    pub fn parse<'a>(
        &mut self,
        buf: &'a [u8],
        limits: &RespLimits,
    ) -> Result<(Command<'a>, usize), RespParseError> {
        match self.advance(buf, limits) {
            Scan::Incomplete => Err(RespParseError::Incomplete),
            Scan::Ready => {
                self.reset();
                parse_command(buf, limits)
            }
        }
    }

    pub fn reset(&mut self) {
        *self = RequestScan::default();
    }

    /// Bytes looked at since the last reset (each once, however the request arrived).
    pub fn examined(&self) -> u64 {
        self.examined
    }

    /// An inline command ends at its `\n`, within the inline limit.
    fn inline(&mut self, buf: &[u8], limits: &RespLimits) -> Scan {
        let limit = buf.len().min(limits.max_inline_len + 1);
        if self.searched < limit && !self.nul {
            self.examined += (limit - self.searched) as u64;
            match memchr::memchr2(b'\n', 0, &buf[self.searched..limit]) {
                Some(i) if buf[self.searched + i] == b'\n' => return Scan::Ready,
                Some(_) => self.nul = true,
                None => {}
            }
            self.searched = limit;
        }
        if buf.len() > limits.max_inline_len {
            Scan::Ready
        } else {
            Scan::Incomplete
        }
    }

    fn multibulk(&mut self, buf: &[u8], limits: &RespLimits) -> Scan {
        loop {
            if let Some(end) = self.arg_end {
                if buf.len() < end {
                    return Scan::Incomplete;
                }
                self.arg_end = None;
                self.pos = end;
                self.searched = end;
                self.due = self.due.map(|n| n - 1);
            }
            if self.due == Some(0) {
                return Scan::Ready;
            }
            if self.due.is_some() && self.pos >= buf.len() {
                return Scan::Incomplete;
            }
            // A header line (`*<n>` or `$<len>`) ends at its `\r`, and the byte after it
            // must have arrived, as `parse_command`'s `header` reads it.
            let window_end = buf.len().min(self.pos + limits.max_inline_len);
            let from = self.searched.max(self.pos);
            let cr = if from < window_end && !self.nul {
                self.examined += (window_end - from) as u64;
                // A NUL hides the `\r` from Redis's `strchr`: the header then never ends.
                match memchr::memchr2(b'\r', 0, &buf[from..window_end]) {
                    Some(i) if buf[from + i] == b'\r' => Some(from + i),
                    Some(_) => {
                        self.nul = true;
                        None
                    }
                    None => None,
                }
            } else {
                None
            };
            let Some(cr) = cr else {
                self.searched = window_end.max(from);
                return if buf.len() - self.pos > limits.max_inline_len {
                    Scan::Ready
                } else {
                    Scan::Incomplete
                };
            };
            self.searched = cr;
            if cr + 1 >= buf.len() {
                return Scan::Incomplete;
            }
            let digits = &buf[(self.pos + 1).min(cr)..cr];
            let next = cr + 2;
            match self.due {
                None => match string2ll(digits) {
                    Some(n) if n <= 0 => return Scan::Ready,
                    Some(n) if n as u64 <= limits.max_args as u64 => {
                        self.due = Some(n as usize);
                        self.pos = next;
                        self.searched = next;
                    }
                    _ => return Scan::Ready,
                },
                Some(_) => {
                    if buf[self.pos] != b'$' {
                        return Scan::Ready;
                    }
                    match string2ll(digits) {
                        Some(n) if n >= 0 && n as u64 <= limits.max_bulk_len as u64 => {
                            self.arg_end = Some(next + n as usize + 2);
                        }
                        _ => return Scan::Ready,
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array_of_ones(n: usize) -> Vec<u8> {
        let mut out = format!("*{n}\r\n").into_bytes();
        for _ in 0..n {
            out.extend_from_slice(b"$1\r\nx\r\n");
        }
        out
    }

    /// Feeds `bytes` one at a time; the length parsed and the bytes looked at.
    fn byte_by_byte(bytes: &[u8]) -> (Result<usize, RespParseError>, u64) {
        let limits = RespLimits::default();
        let mut scan = RequestScan::default();
        for held in 1..=bytes.len() {
            let examined = scan.examined();
            match scan.parse(&bytes[..held], &limits) {
                Err(RespParseError::Incomplete) => continue,
                other => return (other.map(|(_, len)| len), examined),
            }
        }
        (Err(RespParseError::Incomplete), scan.examined())
    }

    #[test]
    fn an_array_sent_one_byte_at_a_time_is_looked_at_once() {
        let bytes = array_of_ones(50_000);
        let (parsed, examined) = byte_by_byte(&bytes);
        assert_eq!(parsed, Ok(bytes.len()));
        // The headers are searched once each; the arguments' bytes are jumped over.
        assert!(
            examined <= bytes.len() as u64,
            "{examined} of {}",
            bytes.len()
        );
    }

    #[test]
    fn an_inline_line_sent_one_byte_at_a_time_is_searched_once() {
        let mut bytes = b"SET ".to_vec();
        bytes.extend(std::iter::repeat_n(b'k', 60_000));
        bytes.extend_from_slice(b" v\r\n");
        let (parsed, examined) = byte_by_byte(&bytes);
        assert_eq!(parsed, Ok(bytes.len()));
        assert!(examined <= bytes.len() as u64);
    }

    #[test]
    fn a_header_line_sent_one_byte_at_a_time_is_searched_once() {
        // A header that never ends is refused at the inline limit, not searched again
        // from its start on every read.
        let mut bytes = b"*1\r\n$".to_vec();
        bytes.extend(std::iter::repeat_n(b'9', 70_000));
        let (parsed, examined) = byte_by_byte(&bytes);
        assert!(matches!(parsed, Err(RespParseError::Invalid(_))));
        assert!(examined <= bytes.len() as u64);
    }

    #[test]
    fn the_scan_is_ready_exactly_when_the_parser_stops_asking_for_more() {
        let limits = RespLimits {
            max_args: 4,
            max_bulk_len: 10,
            max_inline_len: 12,
        };
        let cases: [&[u8]; 12] = [
            b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
            b"*0\r\n",
            b"*-1\r\n",
            b"*5\r\n",
            b"*2\r\n:3\r\n",
            b"*1\r\n$11\r\n",
            b"*1\r\n$-1\r\n",
            b"*1\r\n$1\rXxYZ",
            b"*x\r\n",
            b"PING\r\n",
            b"this line is too long\r\n",
            b"*1\r\n$100000000000000",
        ];
        for bytes in cases {
            let mut scan = RequestScan::default();
            for held in 0..=bytes.len() {
                let whole = parse_command(&bytes[..held], &limits);
                let ready = scan.advance(&bytes[..held], &limits) == Scan::Ready;
                assert_eq!(
                    ready,
                    whole != Err(RespParseError::Incomplete),
                    "{:?} at {held}",
                    String::from_utf8_lossy(bytes)
                );
                if ready {
                    break;
                }
            }
        }
    }
}
