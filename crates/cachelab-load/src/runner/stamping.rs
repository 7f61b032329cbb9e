//! Kernel timestamps on a connection (`SO_TIMESTAMPING`, the kernel's
//! Documentation/networking/timestamping.rst): switching them on, reading data with its
//! receive stamp, and draining the transmit stamps from the socket's error queue. The
//! control data is parsed by [`crate::stamps`].

use std::io;
use std::os::fd::RawFd;

use crate::stamps::{parse_control, Control, Stamp};

/// `SO_TIMESTAMPING` (asm-generic/socket.h, the 64-bit `timespec` variant every 64-bit
/// Linux uses; `SCM_TIMESTAMPING` has the same number).
const SO_TIMESTAMPING: libc::c_int = 37;

/// Software stamps on transmit and receive, reported; transmit stamps keyed by byte
/// offset counted from this call (OPT_ID with OPT_ID_TCP), without the packet's bytes
/// (TSONLY); the NIC's stamps too where it makes them (OPT_TX_SWHW keeps the software
/// transmit stamp then).
const FLAGS: libc::c_uint = libc::SOF_TIMESTAMPING_TX_SOFTWARE
    | libc::SOF_TIMESTAMPING_RX_SOFTWARE
    | libc::SOF_TIMESTAMPING_SOFTWARE
    | libc::SOF_TIMESTAMPING_TX_HARDWARE
    | libc::SOF_TIMESTAMPING_RX_HARDWARE
    | libc::SOF_TIMESTAMPING_RAW_HARDWARE
    | libc::SOF_TIMESTAMPING_OPT_ID
    | libc::SOF_TIMESTAMPING_OPT_ID_TCP
    | libc::SOF_TIMESTAMPING_OPT_TSONLY
    | libc::SOF_TIMESTAMPING_OPT_TX_SWHW;

/// Room for an `SCM_TIMESTAMPING` and an `IP(V6)_RECVERR` message with its address.
const CONTROL_BYTES: usize = 256;

fn set(fd: RawFd, flags: libc::c_uint) -> io::Result<()> {
    // SAFETY: a plain setsockopt with a c_uint option value of the size given.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_TIMESTAMPING,
            (&flags as *const libc::c_uint).cast(),
            std::mem::size_of::<libc::c_uint>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Switches kernel timestamps on for a connected socket before anything is written on
/// it (the transmit keys count from here). Kernels before 6.2 lack OPT_ID_TCP: without
/// it the count starts at the same byte when nothing is in flight, as here.
pub fn enable(fd: RawFd) -> io::Result<()> {
    match set(fd, FLAGS) {
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            set(fd, FLAGS & !libc::SOF_TIMESTAMPING_OPT_ID_TCP)
        }
        other => other,
    }
}

fn control(buf: &[u8]) -> Control {
    parse_control(
        buf,
        libc::SOL_SOCKET,
        SO_TIMESTAMPING,
        [
            (libc::SOL_IP, libc::IP_RECVERR),
            (libc::SOL_IPV6, libc::IPV6_RECVERR),
        ],
    )
}

/// Aligned room for control messages.
#[repr(C, align(8))]
struct ControlBuf([u8; CONTROL_BYTES]);

fn recvmsg(fd: RawFd, data: &mut [u8], flags: libc::c_int) -> io::Result<(usize, Control)> {
    let mut cbuf = ControlBuf([0; CONTROL_BYTES]);
    let mut iov = libc::iovec {
        iov_base: data.as_mut_ptr().cast(),
        iov_len: data.len(),
    };
    // SAFETY: msghdr is plain data; zeroed is its empty value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = CONTROL_BYTES as _;
    // SAFETY: the iovec and control buffer outlive the call and their lengths are theirs.
    let n = unsafe { libc::recvmsg(fd, &mut msg, flags | libc::MSG_DONTWAIT) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let used = (msg.msg_controllen as usize).min(CONTROL_BYTES);
    Ok((n as usize, control(&cbuf.0[..used])))
}

/// Reads data without blocking; returns the bytes read and the receive stamp of the last
/// segment they came from (empty when the kernel gave none).
pub fn recv(fd: RawFd, data: &mut [u8]) -> io::Result<(usize, Stamp)> {
    recvmsg(fd, data, 0).map(|(n, c)| (n, c.stamp))
}

/// Copies queued data without reading it (`MSG_PEEK`).
pub fn peek(fd: RawFd, data: &mut [u8]) -> io::Result<(usize, Stamp)> {
    recvmsg(fd, data, libc::MSG_PEEK).map(|(n, c)| (n, c.stamp))
}

/// Reads the transmit stamps queued on the socket's error queue, in order, and hands
/// each with its key to `each`; returns how many it read. One stamp is expected per
/// write: once `expected` software stamps are read it stops, sparing the read that would
/// only answer that the queue is empty (one system call per write); with hardware stamps,
/// which the NIC may add as messages of their own, it reads until the queue is empty.
pub fn drain_transmit_stamps(fd: RawFd, expected: u32, mut each: impl FnMut(u32, Stamp)) -> usize {
    let mut count = 0;
    let mut hardware = false;
    let mut scratch = [0u8; 1];
    loop {
        if !hardware && count >= expected as usize {
            return count;
        }
        match recvmsg(fd, &mut scratch, libc::MSG_ERRQUEUE) {
            Ok((_, c)) => {
                if let Some(key) = c.tx_key {
                    count += 1;
                    hardware |= c.stamp.hardware_ns.is_some();
                    each(key, c.stamp);
                }
            }
            // EAGAIN: the queue is empty; anything else: nothing more to read from it
            // (a lost stamp only leaves its request without a wire time).
            Err(_) => return count,
        }
    }
}
