//! Ground truth for wire times: memcached exchanges read from captured loopback frames.
//! Pure: frames in, request-to-reply times out (the `capture` module captures the frames).
//!
//! Each connection's two byte streams are rebuilt from the TCP segments (by sequence
//! number; a retransmitted segment adds nothing), requests are split with the protocol
//! crate's parser and each reply with the parser of the reply its request expects. A
//! request was sent when the frame holding its last byte was captured, and answered when
//! the frame holding its reply's last byte was: the wire time is the difference.

use std::collections::BTreeMap;

use cachelab_protocol::{parse_reply, parse_request, Expect, Limits, ReplyError, Request};

/// One TCP segment with payload, of a connection to the server's port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Capture time, ns since the Unix epoch.
    pub at_ns: u64,
    pub client_port: u16,
    /// Client to server.
    pub to_server: bool,
    pub seq: u32,
    pub payload: Vec<u8>,
}

const ETHERNET: usize = 14;
const IPV4: u16 = 0x0800;
const TCP: u8 = 6;

/// The segment in an Ethernet frame (loopback frames carry a zeroed Ethernet header) of
/// IPv4 TCP to or from `server_port`, if it carries payload.
pub fn parse_frame(frame: &[u8], server_port: u16, at_ns: u64) -> Option<Segment> {
    let ip = frame.get(ETHERNET..)?;
    if u16::from_be_bytes([frame[12], frame[13]]) != IPV4 || ip.len() < 20 || ip[9] != TCP {
        return None;
    }
    let ip_header = usize::from(ip[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]])).min(ip.len());
    let tcp = ip.get(ip_header..total)?;
    if tcp.len() < 20 {
        return None;
    }
    let src = u16::from_be_bytes([tcp[0], tcp[1]]);
    let dst = u16::from_be_bytes([tcp[2], tcp[3]]);
    let seq = u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]);
    let payload = tcp.get(usize::from(tcp[12] >> 4) * 4..)?;
    if payload.is_empty() {
        return None;
    }
    let (to_server, client_port) = match (src == server_port, dst == server_port) {
        (false, true) => (true, src),
        (true, false) => (false, dst),
        _ => return None,
    };
    Some(Segment {
        at_ns,
        client_port,
        to_server,
        seq,
        payload: payload.to_vec(),
    })
}

/// One direction of a connection, rebuilt.
#[derive(Debug, Default)]
struct Stream {
    next_seq: Option<u32>,
    bytes: Vec<u8>,
    /// (end offset, capture time) of each segment's new bytes, in order.
    ends: Vec<(usize, u64)>,
}

impl Stream {
    fn add(&mut self, s: &Segment) -> Result<(), WireError> {
        let next = *self.next_seq.get_or_insert(s.seq);
        let ahead = s.seq.wrapping_sub(next) as i32;
        if ahead > 0 {
            return Err(WireError::Gap {
                client_port: s.client_port,
            });
        }
        // Bytes already seen (a retransmission) are skipped.
        let skip = (-i64::from(ahead)) as usize;
        if skip >= s.payload.len() {
            return Ok(());
        }
        self.bytes.extend_from_slice(&s.payload[skip..]);
        self.ends.push((self.bytes.len(), s.at_ns));
        self.next_seq = Some(next.wrapping_add((s.payload.len() - skip) as u32));
        Ok(())
    }

    /// When the byte at `offset` was captured.
    fn time_of(&self, offset: usize) -> u64 {
        let i = self.ends.partition_point(|(end, _)| *end <= offset);
        self.ends[i].1
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// A segment came after bytes the capture missed.
    Gap {
        client_port: u16,
    },
    /// A request the ground truth cannot pair with its reply.
    Unsupported {
        client_port: u16,
    },
    Malformed {
        client_port: u16,
    },
}

/// One request and its reply, as captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exchange {
    pub client_port: u16,
    pub sent_ns: u64,
    pub answered_ns: u64,
}

impl Exchange {
    pub fn wire_ns(&self) -> u64 {
        self.answered_ns.saturating_sub(self.sent_ns)
    }
}

fn expect(request: &Request) -> Option<Expect> {
    match request {
        Request::Get(_) => Some(Expect::Values),
        Request::Store(_) => Some(Expect::Store),
        Request::Delete(_) => Some(Expect::Delete),
        _ => None,
    }
}

/// Every complete memcached exchange in the segments (in capture order), per connection
/// in request order; connections by client port.
pub fn exchanges(segments: &[Segment]) -> Result<Vec<Exchange>, WireError> {
    let mut streams: BTreeMap<(u16, bool), Stream> = BTreeMap::new();
    for s in segments {
        streams
            .entry((s.client_port, s.to_server))
            .or_default()
            .add(s)?;
    }
    let empty = Stream::default();
    let mut out = Vec::new();
    for (&(port, to_server), requests) in &streams {
        if !to_server {
            continue;
        }
        let replies = streams.get(&(port, false)).unwrap_or(&empty);
        let (mut at, mut reply_at) = (0, 0);
        let limits = Limits::default();
        while let Ok((request, len)) = parse_request(&requests.bytes[at..], &limits) {
            let kind = expect(&request).ok_or(WireError::Unsupported { client_port: port })?;
            let sent_ns = requests.time_of(at + len - 1);
            at += len;
            if request.noreply() {
                continue;
            }
            let reply_len = match parse_reply(&replies.bytes[reply_at..], kind) {
                Ok((_, len)) => len,
                Err(ReplyError::Incomplete) => break,
                Err(_) => return Err(WireError::Malformed { client_port: port }),
            };
            reply_at += reply_len;
            out.push(Exchange {
                client_port: port,
                sent_ns,
                answered_ns: replies.time_of(reply_at - 1),
            });
        }
    }
    Ok(out)
}

/// The nearest-rank `q` quantile (0 < q <= 1) of `values`, which it sorts.
pub fn quantile(values: &mut [u64], q: f64) -> Option<u64> {
    if values.is_empty() {
        return None;
    }
    values.sort_unstable();
    let rank = ((q * values.len() as f64).ceil() as usize).clamp(1, values.len());
    Some(values[rank - 1])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(at_ns: u64, to_server: bool, seq: u32, payload: &[u8]) -> Segment {
        Segment {
            at_ns,
            client_port: 40000,
            to_server,
            seq,
            payload: payload.to_vec(),
        }
    }

    fn frame(src: u16, dst: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend_from_slice(&IPV4.to_be_bytes());
        let total = (20 + 20 + payload.len()) as u16;
        let mut ip = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, TCP, 0, 0, 127, 0, 0, 1, 127, 0, 0, 1,
        ];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&ip);
        let mut tcp = vec![0u8; 20];
        tcp[0..2].copy_from_slice(&src.to_be_bytes());
        tcp[2..4].copy_from_slice(&dst.to_be_bytes());
        tcp[4..8].copy_from_slice(&seq.to_be_bytes());
        tcp[12] = 5 << 4;
        f.extend_from_slice(&tcp);
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn a_frame_to_or_from_the_server_port_is_a_segment_and_a_bare_ack_is_not() {
        let s = parse_frame(&frame(40000, 11211, 7, b"get k\r\n"), 11211, 5).unwrap();
        assert_eq!(s, seg(5, true, 7, b"get k\r\n"));
        let r = parse_frame(&frame(11211, 40000, 9, b"END\r\n"), 11211, 6).unwrap();
        assert!(!r.to_server && r.client_port == 40000);
        assert_eq!(parse_frame(&frame(40000, 11211, 7, b""), 11211, 5), None);
        assert_eq!(parse_frame(&frame(40000, 6379, 7, b"x"), 11211, 5), None);
        assert_eq!(parse_frame(&[0; 10], 11211, 5), None);
    }

    #[test]
    fn a_request_is_timed_by_its_last_byte_and_its_reply_by_the_replys_last_byte() {
        let segments = [
            seg(100, true, 1, b"get a\r\nget"),
            seg(150, true, 11, b" b\r\n"),
            seg(300, false, 50, b"END\r\nVALUE b 0 1\r\n"),
            seg(400, false, 68, b"x\r\nEND\r\n"),
        ];
        let ex = exchanges(&segments).unwrap();
        let times: Vec<(u64, u64)> = ex.iter().map(|e| (e.sent_ns, e.answered_ns)).collect();
        assert_eq!(times, [(100, 300), (150, 400)]);
        assert_eq!(ex[1].wire_ns(), 250);
    }

    #[test]
    fn a_retransmission_adds_nothing_and_a_gap_is_an_error() {
        let segments = [
            seg(100, true, 1, b"set k 0 0 1\r\nv\r\n"),
            seg(120, true, 1, b"set k 0 0 1\r\nv\r\n"),
            seg(300, false, 9, b"STORED\r\n"),
        ];
        let ex = exchanges(&segments).unwrap();
        assert_eq!((ex.len(), ex[0].sent_ns), (1, 100));
        let gap = [
            seg(100, true, 1, b"get a\r\n"),
            seg(200, true, 99, b"get b\r\n"),
        ];
        assert_eq!(exchanges(&gap), Err(WireError::Gap { client_port: 40000 }));
    }

    #[test]
    fn a_request_still_unanswered_at_the_end_is_left_out() {
        let segments = [
            seg(100, true, 1, b"get a\r\nget b\r\n"),
            seg(300, false, 9, b"END\r\n"),
        ];
        assert_eq!(exchanges(&segments).unwrap().len(), 1);
    }

    #[test]
    fn nearest_rank_quantiles() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(quantile(&mut v, 0.5), Some(3));
        assert_eq!(quantile(&mut v, 0.99), Some(5));
        assert_eq!(quantile(&mut v, 0.2), Some(1));
        assert_eq!(quantile(&mut [], 0.5), None);
    }
}
