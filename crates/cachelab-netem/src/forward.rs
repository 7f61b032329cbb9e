//! One direction of the delay line: the I/O loop around [`DelayQueue`].
//!
//! ```text
//! loop:
//!     send every frame whose due time has come      (clock read before each send)
//!     stop if told to
//!     head due within --spin-us?  busy-wait for it, receiving without blocking meanwhile
//!     otherwise                    ppoll(rx, stop; timeout = until --spin-us before the head is due)
//!     receive everything readable (MSG_DONTWAIT), stamping each frame as it comes
//! ```
//!
//! `ppoll` takes its timeout in nanoseconds and the thread's timer slack is set to 1 ns,
//! so the wake-up is as early as the kernel's hrtimer allows (plain `poll` rounds to
//! milliseconds, and the default slack adds up to 50 µs). A drain stops as soon as the
//! head of the queue is due, so a flood of arrivals cannot hold back due frames.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::pool::{BufferPool, Frame};
use crate::queue::DelayQueue;
use crate::socket::{PacketSocket, Received, VNET_HDR_LEN};
use crate::stats::DirectionStats;
use crate::stop::Stop;

/// A kernel timestamp older than this is not believed (a clock step): the frame is
/// stamped when it was read instead.
const MAX_STAMP_AGE: std::time::Duration = std::time::Duration::from_millis(50);

/// Receive buffer: the largest GSO frame (64 KiB) behind its header, plus slack for the
/// Ethernet and VLAN headers around it.
pub const RX_BUFFER_BYTES: usize = VNET_HDR_LEN + 65536 + 1024;
/// Frames up to this size (a 1500-byte MTU frame and its header) are kept in small buffers.
pub const SMALL_FRAME_BYTES: usize = 2048;

/// One direction: frames from `rx`'s interface leave by `tx`'s after `delay`.
#[derive(Debug, Clone, Copy)]
pub struct Direction<'a> {
    pub rx: &'a PacketSocket,
    pub tx: &'a PacketSocket,
    pub delay: Duration,
    pub limit_packets: usize,
    /// Busy-wait instead of sleeping when the head is due within this; sleeps end this
    /// much early, so the timer's wake-up latency (when shorter) is spun away.
    pub spin: Duration,
}

#[derive(Debug, Error)]
pub enum ForwardError {
    #[error("waiting for frames on {iface}: {source}")]
    Poll {
        iface: String,
        #[source]
        source: io::Error,
    },
}

/// Forwards until `stop` is triggered, then returns what it counted. Frames still queued
/// then are not sent (counted in `queued_at_exit`).
pub fn run(dir: Direction<'_>, stop: &Stop) -> Result<DirectionStats, ForwardError> {
    set_timer_slack_ns(1);
    let mut line = Line {
        queue: DelayQueue::new(dir.delay, dir.limit_packets),
        pool: BufferPool::new(RX_BUFFER_BYTES, SMALL_FRAME_BYTES),
        stats: DirectionStats::default(),
    };
    loop {
        line.send_due(dir.tx);
        if stop.is_set() {
            break;
        }
        let now = Instant::now();
        match line.queue.next_due() {
            Some(due) if due.saturating_duration_since(now) <= dir.spin => {
                line.spin_until(dir.rx, due);
            }
            head => {
                // Wake `spin` before the head is due: the branch above spins the rest.
                let wait =
                    head.map(|due| due.saturating_duration_since(now).saturating_sub(dir.spin));
                wait_readable(dir.rx, stop, wait)?;
                line.receive(dir.rx);
            }
        }
    }
    line.stats.drops = line.queue.drops();
    line.stats.queued_at_exit = line.queue.len() as u64;
    Ok(line.stats)
}

struct Line {
    queue: DelayQueue<Frame>,
    pool: BufferPool,
    stats: DirectionStats,
}

impl Line {
    /// Receives until nothing is readable or the head of the queue is due. Each frame's
    /// arrival is when the kernel received it (its timestamp, so this thread's own
    /// wake-up latency is not added to the delay), or else the clock read right after
    /// its `recv` returned.
    fn receive(&mut self, rx: &PacketSocket) {
        loop {
            let mut landing = self.pool.landing();
            let got = rx.recv(&mut landing);
            let mut arrival = Instant::now();
            match got {
                Ok(Received::Frame(len)) => {
                    if let Some(age) = rx.arrival_age().filter(|a| *a < MAX_STAMP_AGE) {
                        arrival = arrival.checked_sub(age).unwrap_or(arrival);
                    }
                    let frame = self.pool.keep(landing, len);
                    if let Err(dropped) = self.queue.push(arrival, frame) {
                        self.pool.recycle(dropped);
                    }
                    if self.queue.next_due().is_some_and(|due| due <= arrival) {
                        return;
                    }
                }
                Ok(Received::Outgoing) => self.pool.give_back(landing),
                Ok(Received::Truncated(_)) => {
                    self.stats.truncated += 1;
                    self.pool.give_back(landing);
                }
                Ok(Received::Empty) => {
                    self.pool.give_back(landing);
                    return;
                }
                Err(_) => {
                    // Reported once per error (ENETDOWN while the link is down): count
                    // it and wait for the next frame.
                    self.stats.recv_errors += 1;
                    self.pool.give_back(landing);
                    return;
                }
            }
        }
    }

    /// Sends every due frame. Lateness runs from the frame's due time to the clock read
    /// just before its `send`.
    fn send_due(&mut self, tx: &PacketSocket) {
        let mut now = Instant::now();
        while let Some(due) = self.queue.pop_due(now) {
            match tx.send(due.frame.bytes()) {
                Ok(()) => {
                    self.stats.packets += 1;
                    self.stats.bytes += due.frame.len().saturating_sub(VNET_HDR_LEN) as u64;
                    self.stats.lateness.record(now - due.due);
                }
                Err(_) => self.stats.send_errors += 1,
            }
            self.pool.recycle(due.frame);
            now = Instant::now();
        }
    }

    /// Busy-waits until `due`, receiving (without blocking) all the while so that frames
    /// arriving meanwhile are stamped when they come.
    fn spin_until(&mut self, rx: &PacketSocket, due: Instant) {
        loop {
            self.receive(rx);
            if Instant::now() >= due {
                return;
            }
            std::hint::spin_loop();
        }
    }
}

/// Sleeps until `rx` is readable, `stop` is triggered, or `timeout` (to the nanosecond)
/// has passed; `None` waits without a timeout.
fn wait_readable(
    rx: &PacketSocket,
    stop: &Stop,
    timeout: Option<Duration>,
) -> Result<(), ForwardError> {
    let mut fds = [
        libc::pollfd {
            fd: rx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: stop.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().try_into().unwrap_or(libc::time_t::MAX),
        tv_nsec: t.subsec_nanos().into(),
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
    // SAFETY: `fds` holds two valid pollfds; `ts_ptr` is null or points to `ts`, alive
    // for the call; a null sigmask leaves the mask as it is.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if n < 0 {
        let source = io::Error::last_os_error();
        if source.kind() != io::ErrorKind::Interrupted {
            return Err(ForwardError::Poll {
                iface: rx.iface().to_owned(),
                source,
            });
        }
    }
    Ok(())
}

/// Without this the kernel may fire a sleeping thread's timer up to 50 µs late (the
/// default slack), which would add to every frame's delay.
fn set_timer_slack_ns(ns: libc::c_ulong) {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long; it only changes this thread.
    unsafe {
        libc::prctl(
            libc::PR_SET_TIMERSLACK,
            ns,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
}
