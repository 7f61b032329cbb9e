//! Lines of a trace, each within a bound: a line never costs more memory than the bound,
//! however long it is in the file (or however far a compressed frame expands).

use std::io::{BufRead, Read};

use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

/// What reading one line gave.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    /// A whole line is in the buffer, without its `\n` (nor a `\r` before it).
    Read,
    /// The input ended cleanly, before any byte of a new line.
    End,
    /// The input ended inside a line: the file is truncated.
    Truncated,
    /// The line is longer than the bound.
    TooLong,
}

/// Reads the next line of `input` into `buf` (cleared first), reading at most `max`
/// bytes of it: a longer line is refused before it is all in memory.
pub fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let available = input.fill_buf()?;
        if available.is_empty() {
            return Ok(if buf.is_empty() {
                Line::End
            } else {
                Line::Truncated
            });
        }
        let (take, found) = match memchr::memchr(b'\n', available) {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        if buf.len() + take > max {
            return Ok(Line::TooLong);
        }
        buf.extend_from_slice(&available[..take]);
        input.consume(take + usize::from(found));
        if found {
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            return Ok(Line::Read);
        }
    }
}

/// The magic number that opens a zstd frame (RFC 8878), little-endian on disk.
pub const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Decompresses one zstd frame after another (as `zstd -d` does with concatenated
/// frames), streaming: memory is the frame's window (ruzstd refuses one over 100 MiB),
/// not the decompressed size.
pub struct ZstdFrames<R: BufRead> {
    state: Frames<R>,
}

enum Frames<R: BufRead> {
    InFrame(Box<StreamingDecoder<R, FrameDecoder>>),
    /// After a frame, before the next one (or the end).
    Between(R),
    /// A frame failed: its error was returned, nothing more is read.
    Failed,
}

impl<R: BufRead> ZstdFrames<R> {
    pub fn new(input: R) -> ZstdFrames<R> {
        ZstdFrames {
            state: Frames::Between(input),
        }
    }
}

impl<R: BufRead> Read for ZstdFrames<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match std::mem::replace(&mut self.state, Frames::Failed) {
                Frames::InFrame(mut frame) => {
                    let n = frame.read(buf)?;
                    if n > 0 || buf.is_empty() {
                        self.state = Frames::InFrame(frame);
                        return Ok(n);
                    }
                    let (input, decoder) = frame.into_parts();
                    // The frame's checksum (when it has one) against what was decoded.
                    if let Some(stored) = decoder.get_checksum_from_data() {
                        if decoder.get_calculated_checksum() != Some(stored) {
                            return Err(std::io::Error::other("checksum mismatch"));
                        }
                    }
                    self.state = Frames::Between(input);
                }
                Frames::Between(mut input) => {
                    if input.fill_buf()?.is_empty() {
                        self.state = Frames::Between(input);
                        return Ok(0);
                    }
                    let frame = StreamingDecoder::new(input).map_err(std::io::Error::other)?;
                    self.state = Frames::InFrame(Box::new(frame));
                }
                Frames::Failed => {
                    return Err(std::io::Error::other("after an earlier error"));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        let mut input = std::io::BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        let mut buf = Vec::new();
        loop {
            let line = read_line(&mut input, &mut buf, max).unwrap();
            let last = line != Line::Read;
            out.push((line, buf.clone()));
            if last {
                return out;
            }
        }
    }

    #[test]
    fn lines_lose_their_crlf_and_the_end_is_clean() {
        let got = lines(b"ab\r\ncdefgh\n\n", 16);
        let texts: Vec<&[u8]> = got.iter().map(|(_, b)| b.as_slice()).collect();
        assert_eq!(texts, [&b"ab"[..], b"cdefgh", b"", b""]);
        assert_eq!(got.last().unwrap().0, Line::End);
    }

    #[test]
    fn a_last_line_without_its_newline_is_a_truncated_file() {
        assert_eq!(lines(b"ab\ncd", 16).last().unwrap().0, Line::Truncated);
    }

    #[test]
    fn a_line_over_the_bound_is_refused_before_it_is_read_whole() {
        let got = lines(b"12345678\n123456789\n", 8);
        assert_eq!(got[0], (Line::Read, b"12345678".to_vec()));
        assert_eq!(got[1].0, Line::TooLong);
        assert!(got[1].1.len() <= 8);
    }
}
