//! Kernel timestamps as the socket delivers them, and which request each belongs to.
//! Pure: control messages are parsed from bytes, and stamps are matched to requests by
//! their byte offsets in the stream.
//!
//! With `SO_TIMESTAMPING` (see `runner::stamping`):
//! - every `recvmsg` of data carries an `SCM_TIMESTAMPING` message: the software stamp
//!   (`ts[0]`, `CLOCK_REALTIME`) and the NIC's (`ts[2]`, its own clock; zero on loopback)
//!   of the last segment that read took bytes from;
//! - every write queues, on the socket's error queue, a transmit stamp of the segment
//!   holding the write's last byte, keyed (`SOF_TIMESTAMPING_OPT_ID`,
//!   `SOF_TIMESTAMPING_OPT_ID_TCP`) by that byte's offset in the stream, counted from 0
//!   when the option was set, modulo 2^32 (`ee_data` of a `sock_extended_err`).
//!
//! A request's transmit time is the stamp of the write that carried its last byte:
//! several requests written together (a pipeline) went to the device in that write's
//! segments. A stamp the kernel dropped (its error queue was full) leaves the requests
//! of its write without one, never with a later write's.

/// `SCM_TSTAMP_SND` (linux/errqueue.h): stamped when the segment went to the device.
pub const SCM_TSTAMP_SND: u32 = 0;

/// A timestamp from the kernel, in ns since the Unix epoch (software) or on the NIC's
/// clock (hardware).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stamp {
    pub software_ns: Option<u64>,
    pub hardware_ns: Option<u64>,
}

impl Stamp {
    pub fn is_empty(&self) -> bool {
        self.software_ns.is_none() && self.hardware_ns.is_none()
    }
}

/// What one message's control data said.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Control {
    pub stamp: Stamp,
    /// A transmit stamp's key (error queue only): the low 32 bits of the stamped
    /// segment's last byte offset.
    pub tx_key: Option<u32>,
}

/// The control-message header as Linux lays it out (`struct cmsghdr`).
const HEADER: usize = std::mem::size_of::<usize>() + 2 * std::mem::size_of::<i32>();
const ALIGN: usize = std::mem::size_of::<usize>();
/// `struct scm_timestamping`: three `struct timespec` (64-bit seconds and nanoseconds).
const TIMESPEC: usize = 16;
/// `struct sock_extended_err`: errno u32, origin u8, type u8, code u8, pad u8, info u32,
/// data u32.
const EXTENDED_ERR: usize = 16;

fn align(n: usize) -> usize {
    n.div_ceil(ALIGN) * ALIGN
}

fn word<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    bytes[at..at + N].try_into().expect("length checked")
}

fn timespec_ns(bytes: &[u8]) -> Option<u64> {
    let secs = i64::from_ne_bytes(word(bytes, 0));
    let nanos = i64::from_ne_bytes(word(bytes, 8));
    let ns = u64::try_from(secs).ok()? * 1_000_000_000 + u64::try_from(nanos).ok()?;
    // All zero: the kernel had no stamp of that kind.
    (ns != 0).then_some(ns)
}

/// Parses the control data of one `recvmsg`. `timestamping` is `SCM_TIMESTAMPING`'s type
/// at `SOL_SOCKET` (`sol_socket`); `recverr` lists the (level, type) pairs of the IPv4
/// and IPv6 error messages. Unknown messages are skipped; a truncated one ends the parse.
pub fn parse_control(
    bytes: &[u8],
    sol_socket: i32,
    timestamping: i32,
    recverr: [(i32, i32); 2],
) -> Control {
    let mut control = Control::default();
    let mut at = 0;
    while at + HEADER <= bytes.len() {
        let len = usize::from_ne_bytes(word(bytes, at));
        let level = i32::from_ne_bytes(word(bytes, at + ALIGN));
        let kind = i32::from_ne_bytes(word(bytes, at + ALIGN + 4));
        if len < HEADER || at + len > bytes.len() {
            break;
        }
        let data = &bytes[at + align(HEADER)..at + len];
        if level == sol_socket && kind == timestamping && data.len() >= 3 * TIMESPEC {
            control.stamp = Stamp {
                software_ns: timespec_ns(&data[..TIMESPEC]),
                hardware_ns: timespec_ns(&data[2 * TIMESPEC..3 * TIMESPEC]),
            };
        } else if recverr.contains(&(level, kind)) && data.len() >= EXTENDED_ERR {
            let errno = u32::from_ne_bytes(word(data, 0));
            let origin = data[4];
            let info = u32::from_ne_bytes(word(data, 8));
            if errno == libc::ENOMSG as u32
                && origin == libc::SO_EE_ORIGIN_TIMESTAMPING
                && info == SCM_TSTAMP_SND
            {
                control.tx_key = Some(u32::from_ne_bytes(word(data, 12)));
            }
        }
        at += align(len);
    }
    control
}

/// The stream offset a 32-bit key stands for, given the offset of the last byte written
/// so far (the key is of a byte already written, less than 2^31 bytes back).
pub fn unwrap_key(key: u32, last_written: u64) -> u64 {
    let back = (last_written as u32).wrapping_sub(key);
    last_written.saturating_sub(u64::from(back))
}

/// A request waiting for its transmit stamp: the offset of the last byte of the write
/// that carried its own last byte (None until written), and the stamp once known.
pub trait AwaitsTransmit {
    fn write_end(&self) -> Option<u64>;
    fn transmitted(&mut self) -> &mut Stamp;
}

/// Gives the transmit stamp of the write whose last byte is at `stamped_byte` to the
/// requests (oldest first) that write carried. Returns how many it stamped. A stamp of a
/// segment sent again (a retransmission) finds its requests stamped already and changes
/// nothing.
pub fn assign_transmit<'a, R: AwaitsTransmit + 'a>(
    requests: impl IntoIterator<Item = &'a mut R>,
    stamped_byte: u64,
    stamp: Stamp,
) -> usize {
    let mut stamped = 0;
    for r in requests {
        match r.write_end() {
            Some(end) if end == stamped_byte => {}
            Some(end) if end < stamped_byte => continue,
            _ => break,
        }
        let slot = r.transmitted();
        if slot.is_empty() {
            *slot = stamp;
            stamped += 1;
        } else {
            // A hardware stamp arrives as its own message: fill in the missing half.
            slot.software_ns = slot.software_ns.or(stamp.software_ns);
            slot.hardware_ns = slot.hardware_ns.or(stamp.hardware_ns);
        }
    }
    stamped
}

/// The wire time of a request from its transmit and receive stamps, on one clock: the
/// NIC's when both ends have it, else the kernel's software clock. None if either end
/// lacks a stamp on a common clock. The flag tells whether the NIC's clock measured it.
pub fn wire_ns(transmitted: Stamp, received: Stamp) -> Option<(u64, bool)> {
    if let (Some(tx), Some(rx)) = (transmitted.hardware_ns, received.hardware_ns) {
        return Some((rx.saturating_sub(tx), true));
    }
    match (transmitted.software_ns, received.software_ns) {
        (Some(tx), Some(rx)) => Some((rx.saturating_sub(tx), false)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOL: i32 = 1;
    const TS: i32 = 37;
    const ERR: [(i32, i32); 2] = [(0, 11), (41, 25)];

    fn cmsg(out: &mut Vec<u8>, level: i32, kind: i32, data: &[u8]) {
        let start = out.len();
        out.extend_from_slice(&(HEADER + data.len()).to_ne_bytes());
        out.extend_from_slice(&level.to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.resize(start + align(HEADER), 0);
        out.extend_from_slice(data);
        out.resize(start + align(HEADER + data.len()), 0);
    }

    fn timestamping(software: (i64, i64), hardware: (i64, i64)) -> Vec<u8> {
        let mut d = Vec::new();
        for (s, n) in [software, (0, 0), hardware] {
            d.extend_from_slice(&s.to_ne_bytes());
            d.extend_from_slice(&n.to_ne_bytes());
        }
        d
    }

    fn extended_err(errno: u32, origin: u8, info: u32, data: u32) -> Vec<u8> {
        let mut d = Vec::new();
        d.extend_from_slice(&errno.to_ne_bytes());
        d.extend_from_slice(&[origin, 0, 0, 0]);
        d.extend_from_slice(&info.to_ne_bytes());
        d.extend_from_slice(&data.to_ne_bytes());
        d.extend_from_slice(&[0; 16]); // the offender's address follows
        d
    }

    #[test]
    fn a_receive_stamp_is_read_from_scm_timestamping() {
        let mut buf = Vec::new();
        cmsg(&mut buf, SOL, TS, &timestamping((12, 345), (0, 0)));
        let c = parse_control(&buf, SOL, TS, ERR);
        assert_eq!(c.stamp.software_ns, Some(12_000_000_345));
        assert_eq!(c.stamp.hardware_ns, None, "zero means no hardware stamp");
        assert_eq!(c.tx_key, None);
    }

    #[test]
    fn a_transmit_stamp_carries_its_key_in_the_extended_error_of_either_family() {
        for (level, kind) in ERR {
            let mut buf = Vec::new();
            cmsg(&mut buf, SOL, TS, &timestamping((1, 0), (2, 5)));
            let ee = extended_err(libc::ENOMSG as u32, libc::SO_EE_ORIGIN_TIMESTAMPING, 0, 99);
            cmsg(&mut buf, level, kind, &ee);
            let c = parse_control(&buf, SOL, TS, ERR);
            assert_eq!(c.tx_key, Some(99));
            assert_eq!(c.stamp.hardware_ns, Some(2_000_000_005));
        }
    }

    #[test]
    fn other_error_queue_messages_are_not_transmit_stamps() {
        let mut buf = Vec::new();
        // An acknowledgement stamp (SCM_TSTAMP_ACK = 2) and a real ICMP error.
        cmsg(
            &mut buf,
            0,
            11,
            &extended_err(libc::ENOMSG as u32, libc::SO_EE_ORIGIN_TIMESTAMPING, 2, 7),
        );
        cmsg(&mut buf, 0, 11, &extended_err(111, 2, 0, 7));
        assert_eq!(parse_control(&buf, SOL, TS, ERR).tx_key, None);
    }

    #[test]
    fn unknown_and_truncated_messages_are_skipped_without_reading_past_the_end() {
        let mut buf = Vec::new();
        cmsg(&mut buf, 6, 1, &[1, 2, 3]);
        cmsg(&mut buf, SOL, TS, &timestamping((3, 0), (0, 0)));
        let whole = parse_control(&buf, SOL, TS, ERR);
        assert_eq!(whole.stamp.software_ns, Some(3_000_000_000));
        for cut in 0..buf.len() {
            let c = parse_control(&buf[..cut], SOL, TS, ERR);
            assert_eq!(c.stamp.software_ns, None, "cut at {cut}");
        }
        let mut short = Vec::new();
        cmsg(&mut short, SOL, TS, &[0; 8]);
        assert_eq!(parse_control(&short, SOL, TS, ERR), Control::default());
    }

    #[test]
    fn keys_unwrap_across_the_32_bit_boundary() {
        assert_eq!(unwrap_key(10, 100), 10);
        assert_eq!(unwrap_key(100, 100), 100);
        let last = (1u64 << 32) + 5;
        assert_eq!(unwrap_key(u32::MAX - 2, last), (1 << 32) - 3);
        assert_eq!(unwrap_key(3, last), (1 << 32) + 3);
    }

    struct Req(u64, Stamp);
    impl AwaitsTransmit for Req {
        fn write_end(&self) -> Option<u64> {
            (self.0 != u64::MAX).then_some(self.0)
        }
        fn transmitted(&mut self) -> &mut Stamp {
            &mut self.1
        }
    }

    fn sw(ns: u64) -> Stamp {
        Stamp {
            software_ns: Some(ns),
            hardware_ns: None,
        }
    }

    #[test]
    fn a_writes_stamp_goes_to_every_request_it_carried_and_none_after() {
        // Three pipelined requests written in one write ending at byte 29, a fourth in
        // the next write, which ended at 39 (a write that ended at 34 carried only part of
        // the fourth request).
        let mut reqs: Vec<Req> = [29, 29, 29, 39]
            .into_iter()
            .map(|b| Req(b, Stamp::default()))
            .collect();
        assert_eq!(assign_transmit(&mut reqs, 29, sw(500)), 3);
        assert_eq!(
            reqs.iter().map(|r| r.1.software_ns).collect::<Vec<_>>(),
            [Some(500), Some(500), Some(500), None]
        );
        // A retransmission of the first write changes nothing.
        assert_eq!(assign_transmit(&mut reqs, 29, sw(900)), 0);
        assert_eq!(reqs[0].1.software_ns, Some(500));
        // A request written in two parts is stamped by the write of its last byte.
        assert_eq!(assign_transmit(&mut reqs, 34, sw(950)), 0);
        assert_eq!(assign_transmit(&mut reqs, 39, sw(1000)), 1);
        assert_eq!(reqs[3].1.software_ns, Some(1000));
    }

    #[test]
    fn a_dropped_stamp_leaves_its_requests_without_one_and_unwritten_ones_wait() {
        let mut reqs: Vec<Req> = [9, 19, u64::MAX]
            .into_iter()
            .map(|b| Req(b, Stamp::default()))
            .collect();
        // The stamp of the write ending at 9 was dropped; 19's arrives.
        assert_eq!(assign_transmit(&mut reqs, 19, sw(700)), 1);
        assert_eq!(reqs[0].1, Stamp::default());
        assert_eq!(reqs[1].1.software_ns, Some(700));
        // A stamp past every written request stamps nothing.
        assert_eq!(assign_transmit(&mut reqs, 29, sw(800)), 0);
        assert_eq!(reqs[2].1, Stamp::default());
    }

    #[test]
    fn a_hardware_stamp_in_its_own_message_completes_the_software_one() {
        let mut reqs = vec![Req(9, Stamp::default())];
        assign_transmit(&mut reqs, 9, sw(500));
        let hw = Stamp {
            software_ns: None,
            hardware_ns: Some(77),
        };
        assign_transmit(&mut reqs, 9, hw);
        assert_eq!(
            reqs[0].1,
            Stamp {
                software_ns: Some(500),
                hardware_ns: Some(77)
            }
        );
    }

    #[test]
    fn wire_time_uses_the_nics_clock_only_when_both_ends_have_it() {
        let both = |s, h| Stamp {
            software_ns: Some(s),
            hardware_ns: h,
        };
        assert_eq!(
            wire_ns(both(100, Some(10)), both(200, Some(60))),
            Some((50, true))
        );
        assert_eq!(
            wire_ns(both(100, Some(10)), both(200, None)),
            Some((100, false))
        );
        assert_eq!(wire_ns(Stamp::default(), both(200, None)), None);
    }
}
