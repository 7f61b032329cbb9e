//! A packet capture on the loopback device (an `AF_PACKET` socket, as tcpdump opens),
//! keeping the TCP segments with payload of one server port, stamped by the kernel
//! (`SO_TIMESTAMPNS`, `CLOCK_REALTIME`). Needs `CAP_NET_RAW` (root). [`crate::wire`]
//! turns the segments into exchanges.
//!
//! On loopback every frame passes the capture twice, leaving (`PACKET_OUTGOING`) and
//! arriving; like libpcap, only the arrival is kept.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::wire::{parse_frame, Segment};

const ETH_P_ALL: u16 = 0x0003;
const SOL_PACKET: libc::c_int = 263;
const PACKET_STATISTICS: libc::c_int = 6;
const PACKET_OUTGOING: u8 = 4;
const SO_TIMESTAMPNS: libc::c_int = 35;
const SO_RCVBUFFORCE: libc::c_int = 33;
/// How long the capture goes on reading what was queued before the stop.
const DRAIN_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);
/// Room for the frames of a few seconds of traffic while the reader is descheduled.
const RECEIVE_BUFFER: libc::c_int = 256 << 20;

/// What a capture kept.
#[derive(Debug)]
pub struct Captured {
    pub segments: Vec<Segment>,
    /// Frames the kernel dropped because the capture's buffer was full: the streams may
    /// have gaps.
    pub drops: u32,
}

/// A capture running on its own thread until [`Capture::stop`].
pub struct Capture {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<io::Result<Captured>>,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn set(
    fd: libc::c_int,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: an int option of its size.
    check(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn open() -> io::Result<OwnedFd> {
    // SAFETY: plain system calls; the descriptor is checked, then owned.
    let fd = check(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            i32::from(ETH_P_ALL.to_be()),
        )
    })?;
    // SAFETY: a fresh descriptor nobody else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a NUL-terminated name.
    let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
    if lo == 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain data.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = ETH_P_ALL.to_be();
    addr.sll_ifindex = lo as i32;
    // SAFETY: a valid sockaddr_ll of the size given.
    check(unsafe {
        libc::bind(
            fd,
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    })?;
    set(fd, libc::SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
        .or_else(|_| set(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RECEIVE_BUFFER))?;
    set(fd, libc::SOL_SOCKET, SO_TIMESTAMPNS, 1)?;
    let timeout = libc::timeval {
        tv_sec: 0,
        tv_usec: 20_000,
    };
    // SAFETY: a timeval of its size.
    check(unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            (&timeout as *const libc::timeval).cast(),
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    })?;
    Ok(owned)
}

/// One frame, its direction and its kernel timestamp (ns since the epoch).
fn receive(fd: libc::c_int, frame: &mut [u8]) -> io::Result<(usize, u8, u64)> {
    #[repr(C, align(8))]
    struct ControlBuf([u8; 128]);
    let mut control = ControlBuf([0; 128]);
    // SAFETY: plain data.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut iov = libc::iovec {
        iov_base: frame.as_mut_ptr().cast(),
        iov_len: frame.len(),
    };
    // SAFETY: plain data; zeroed is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = (&mut from as *mut libc::sockaddr_ll).cast();
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len() as _;
    // SAFETY: every buffer outlives the call and has the length given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut at_ns = 0;
    // SAFETY: the kernel filled msg_control with well-formed messages of msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == SO_TIMESTAMPNS {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                at_ns = ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64;
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, from.sll_pkttype, at_ns))
}

fn drops(fd: libc::c_int) -> io::Result<u32> {
    // struct tpacket_stats { tp_packets, tp_drops } (reading it resets them).
    let mut stats = [0u32; 2];
    let mut len = std::mem::size_of_val(&stats) as libc::socklen_t;
    // SAFETY: a buffer of the size given.
    check(unsafe {
        libc::getsockopt(
            fd,
            SOL_PACKET,
            PACKET_STATISTICS,
            stats.as_mut_ptr().cast(),
            &mut len,
        )
    })?;
    Ok(stats[1])
}

impl Capture {
    /// Starts capturing on `lo` the segments to and from `server_port`. Fails at once when
    /// capture is impossible (no `CAP_NET_RAW`, no loopback device).
    pub fn start(server_port: u16) -> io::Result<Capture> {
        let socket = open()?;
        // Frames before the start are not the test's: the counters start here too.
        drops(socket.as_raw_fd())?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("capture".into())
            .spawn(move || {
                let fd = socket.as_raw_fd();
                let mut frame = vec![0u8; 65536 + 64];
                let mut segments = Vec::new();
                // After the stop, read what is queued (a timeout means nothing is; other
                // traffic on lo cannot keep it reading for long).
                let mut draining: Option<std::time::Instant> = None;
                loop {
                    match receive(fd, &mut frame) {
                        Ok((n, kind, at_ns)) if kind != PACKET_OUTGOING => {
                            segments.extend(parse_frame(&frame[..n], server_port, at_ns));
                        }
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                            ) =>
                        {
                            if draining.is_some() {
                                break;
                            }
                        }
                        Err(e) => return Err(e),
                    }
                    match draining {
                        None if stopping.load(Ordering::SeqCst) => {
                            draining = Some(std::time::Instant::now());
                        }
                        Some(since) if since.elapsed() > DRAIN_LIMIT => break,
                        _ => {}
                    }
                }
                Ok(Captured {
                    segments,
                    drops: drops(fd)?,
                })
            })?;
        Ok(Capture { stop, thread })
    }

    /// Stops the capture and returns what it kept.
    pub fn stop(self) -> io::Result<Captured> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().expect("the capture thread panicked")
    }
}
