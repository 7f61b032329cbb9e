//! An `AF_PACKET` socket bound to one interface that reads and writes whole Ethernet
//! frames, each behind its 10-byte virtio-net header.
//!
//! Why the header: traffic between veths carries `CHECKSUM_PARTIAL` (the checksum is left
//! for "the hardware" to fill in) and GSO super-packets of up to 64 KiB. Without
//! `PACKET_VNET_HDR` a re-injected frame would leave with a wrong checksum, or be larger
//! than the MTU. With it, the kernel describes each received frame's offloads in the
//! header and takes the same description back when we send: we pass it through verbatim.

use std::ffi::CString;
use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use thiserror::Error;

/// `struct virtio_net_hdr` (without `num_buffers`), in front of every frame.
pub const VNET_HDR_LEN: usize = 10;

#[derive(Debug, Error)]
pub enum SocketError {
    #[error("interface name {0:?} contains a NUL byte")]
    BadName(String),
    #[error("no interface named {0:?} in this network namespace")]
    NoInterface(String),
    #[error("{what} on {iface}: {source}")]
    Os {
        what: &'static str,
        iface: String,
        #[source]
        source: io::Error,
    },
}

/// When the kernel received a frame, on the real-time clock (`SO_TIMESTAMPNS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp(pub std::time::SystemTime);

impl Stamp {
    /// How long ago the kernel received the frame, against the real-time clock now;
    /// None when the stamp is in the future (a clock step).
    pub fn age(&self) -> Option<std::time::Duration> {
        std::time::SystemTime::now().duration_since(self.0).ok()
    }
}

/// The SCM_TIMESTAMPNS control message of a received `msg`, if the kernel attached one.
fn stamp_of(msg: &libc::msghdr) -> Option<Stamp> {
    // SAFETY: `msg` was filled in by recvmsg; the CMSG macros walk its control buffer
    // within `msg_controllen`.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                if ts.tv_sec <= 0 {
                    return None;
                }
                return Some(Stamp(
                    std::time::UNIX_EPOCH
                        + std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32),
                ));
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    None
}

/// What one non-blocking receive got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// A frame of this many bytes, virtio-net header included, and when the kernel
    /// received it (None: no stamp).
    Frame(usize, Option<Stamp>),
    /// A frame that this host sent out of the interface (kernels before 4.20 show them
    /// despite `PACKET_IGNORE_OUTGOING`): not ours to forward.
    Outgoing,
    /// A frame of this many bytes, more than the buffer held: cut, so dropped.
    Truncated(usize),
    /// Nothing to read.
    Empty,
}

#[derive(Debug)]
pub struct PacketSocket {
    fd: OwnedFd,
    iface: String,
}

impl PacketSocket {
    /// Opens a socket on `iface` that sees every frame arriving there (promiscuous), not
    /// the ones it sends itself, with kernel buffers of `buffer_bytes` each way.
    pub fn open(iface: &str, buffer_bytes: usize) -> Result<Self, SocketError> {
        let name = CString::new(iface).map_err(|_| SocketError::BadName(iface.to_owned()))?;
        // SAFETY: `name` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(SocketError::NoInterface(iface.to_owned()));
        }
        let os = |what, source| SocketError::Os {
            what,
            iface: iface.to_owned(),
            source,
        };
        // Protocol 0: the socket receives nothing until `bind` names a protocol, so no
        // frame from another interface, or without its header, slips in before.
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(os("socket(AF_PACKET)", io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let sock = PacketSocket {
            fd,
            iface: iface.to_owned(),
        };

        sock.set_int(libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)
            .map_err(|e| os("PACKET_VNET_HDR", e))?;
        // Kernels before 4.20 lack it; `recv` then skips outgoing frames by their type.
        match sock.set_int(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1) {
            Err(e) if e.raw_os_error() != Some(libc::ENOPROTOOPT) => {
                return Err(os("PACKET_IGNORE_OUTGOING", e));
            }
            _ => {}
        }
        // The kernel stamps each frame as it arrives; `recv` reads it back with the frame,
        // so a late wake-up of the receiving thread is not added to the delay.
        let _ = sock.set_int(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        let bytes = libc::c_int::try_from(buffer_bytes).unwrap_or(libc::c_int::MAX);
        // The FORCE variants pass the rmem_max/wmem_max caps (root only); otherwise take
        // what the caps allow.
        for (force, plain, what) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF, "SO_RCVBUF"),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF, "SO_SNDBUF"),
        ] {
            if sock.set_int(libc::SOL_SOCKET, force, bytes).is_err() {
                sock.set_int(libc::SOL_SOCKET, plain, bytes)
                    .map_err(|e| os(what, e))?;
            }
        }

        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut addr: libc::sockaddr_ll = unsafe { mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as libc::c_ushort;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = ifindex as libc::c_int;
        // SAFETY: `addr` is a sockaddr_ll of the length given.
        let rc = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                (&raw const addr).cast(),
                mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            return Err(os("bind", io::Error::last_os_error()));
        }

        let mreq = libc::packet_mreq {
            mr_ifindex: ifindex as libc::c_int,
            mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
            mr_alen: 0,
            mr_address: [0; 8],
        };
        sock.set_opt(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
            .map_err(|e| os("PACKET_ADD_MEMBERSHIP(PROMISC)", e))?;
        Ok(sock)
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Receives one frame into `buf` without waiting, with the kernel's receive
    /// timestamp (`SO_TIMESTAMPNS`, real-time clock) from the same `recvmsg`: one
    /// syscall per frame rather than a `recv` and a `SIOCGSTAMPNS` ioctl.
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<Received> {
        // Room for one SCM_TIMESTAMPNS control message (a timespec), u64-aligned.
        let mut control = [0u64; 8];
        loop {
            // SAFETY: all-zero is a valid sockaddr_ll and msghdr.
            let mut from: libc::sockaddr_ll = unsafe { mem::zeroed() };
            let mut iov = libc::iovec {
                iov_base: buf.as_mut_ptr().cast(),
                iov_len: buf.len(),
            };
            // SAFETY: see above.
            let mut msg: libc::msghdr = unsafe { mem::zeroed() };
            msg.msg_name = (&raw mut from).cast();
            msg.msg_namelen = mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            msg.msg_iov = &raw mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = mem::size_of_val(&control) as _;
            // SAFETY: every pointer in `msg` is valid for the length given. MSG_TRUNC makes
            // the kernel return the frame's real length when it did not fit.
            let n = unsafe {
                libc::recvmsg(
                    self.fd.as_raw_fd(),
                    &raw mut msg,
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if n < 0 {
                let err = io::Error::last_os_error();
                match err.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => return Ok(Received::Empty),
                    _ => return Err(err),
                }
            }
            let n = n as usize;
            return Ok(if from.sll_pkttype == libc::PACKET_OUTGOING {
                Received::Outgoing
            } else if n > buf.len() {
                Received::Truncated(n)
            } else {
                Received::Frame(n, stamp_of(&msg))
            });
        }
    }

    /// Sends one frame (virtio-net header first) out of the interface, without waiting:
    /// one thread serves every link, so a send must not block. A veth hands the frame to
    /// its peer at once and releases it from our send buffer (the kernel orphans a
    /// forwarded skb), so the buffer does not fill up; if it ever does, the send fails
    /// with `WouldBlock` and the caller counts the frame as lost, like a full qdisc.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        loop {
            // SAFETY: `frame` is valid for its length.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n >= 0 {
                return Ok(());
            }
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    }

    fn set_int(&self, level: libc::c_int, name: libc::c_int, value: libc::c_int) -> io::Result<()> {
        self.set_opt(level, name, &value)
    }

    fn set_opt<T>(&self, level: libc::c_int, name: libc::c_int, value: &T) -> io::Result<()> {
        // SAFETY: `value` points to a T of the size given.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (value as *const T).cast(),
                mem::size_of::<T>() as libc::socklen_t,
            )
        };
        if rc < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }
}

impl AsFd for PacketSocket {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
