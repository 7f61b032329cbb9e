//! The delay lines of every link, served by one thread: an `epoll` loop over all the
//! links' `AF_PACKET` sockets, its timeout ending when the next frame is due.
//!
//! ```text
//! loop:
//!     send every frame, of every direction, whose due time has come
//!     stop if told to
//!     epoll_pwait2(sockets, stop; timeout = until the earliest head)  (no busy-wait by default)
//!     receive what is readable (MSG_DONTWAIT), stamping each frame with the kernel's
//!     receive time, until the socket is empty or a frame is due
//! ```
//!
//! Each link has two directions, each a FIFO [`DelayQueue`] (a constant delay keeps due
//! times in arrival order). With `d` directions the loop finds the earliest head in
//! O(d), which for the few dozen links of an emulated data centre costs less than a
//! heap's bookkeeping per frame.
//!
//! A frame's arrival is the kernel's receive timestamp, so neither this thread's wake-up
//! latency nor the time it spent on other links is added to the delay; a send is late by
//! the wake-up latency after the timeout (reported per direction, never early: the timeout
//! ends at the due instant or later, and a frame leaves only once the clock has reached it).

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::pool::{BufferPool, Frame};
use crate::queue::DelayQueue;
use crate::socket::{PacketSocket, Received, VNET_HDR_LEN};
use crate::stats::DirectionStats;
use crate::wake::Epoll;

/// A kernel timestamp older than this is not believed (a clock step): the frame is
/// stamped when it was read instead.
const MAX_STAMP_AGE: Duration = Duration::from_millis(50);
/// Frames read from one socket before the loop looks at the others and at what is due.
const RECEIVE_BATCH: usize = 64;

/// Receive buffer: the largest GSO frame (64 KiB) behind its header, plus slack for the
/// Ethernet and VLAN headers around it.
pub const RX_BUFFER_BYTES: usize = VNET_HDR_LEN + 65536 + 1024;
/// Frames up to this size (a 1500-byte MTU frame and its header) are kept in small buffers.
pub const SMALL_FRAME_BYTES: usize = 2048;

const STOP_TOKEN: u64 = u64::MAX;

/// One link: frames arriving on `a` leave by `b` after `delay_ab`, and back after
/// `delay_ba`.
#[derive(Debug)]
pub struct Link {
    pub name: String,
    pub a: PacketSocket,
    pub b: PacketSocket,
    pub delay_ab: Duration,
    pub delay_ba: Duration,
}

#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Frames queued per direction beyond which arrivals are dropped (netem's limit).
    pub limit_packets: usize,
    /// Busy-wait instead of sleeping when the next frame is due within this (0: never).
    /// The wait then times out this much early and the rest is spun, receiving meanwhile.
    pub spin: Duration,
}

/// What one link's two directions counted.
#[derive(Debug, Clone, Default)]
pub struct LinkStats {
    pub ab: DirectionStats,
    pub ba: DirectionStats,
}

#[derive(Debug, Error)]
pub enum ForwardError {
    #[error("waiting for frames: {0}")]
    Wait(#[source] io::Error),
    #[error("setting up the wait (epoll): {0}")]
    Setup(#[source] io::Error),
}

/// Forwards every link until `stop` is readable (a signalfd, an eventfd), then returns
/// what each link counted, in the order given. Frames still queued then are not sent
/// (counted in `queued_at_exit`).
pub fn run(
    links: &[Link],
    settings: Settings,
    stop: BorrowedFd<'_>,
) -> Result<Vec<LinkStats>, ForwardError> {
    // Socket 2l is link l's `a`, 2l + 1 its `b`. Direction d receives on socket d and
    // sends on socket d ^ 1: 2l is a -> b, 2l + 1 is b -> a.
    let sockets: Vec<&PacketSocket> = links.iter().flat_map(|l| [&l.a, &l.b]).collect();
    let mut dirs: Vec<Line> = links
        .iter()
        .flat_map(|l| [l.delay_ab, l.delay_ba])
        .map(|delay| Line {
            queue: DelayQueue::new(delay, settings.limit_packets),
            stats: DirectionStats::default(),
        })
        .collect();
    let mut epoll = Epoll::new().map_err(ForwardError::Setup)?;
    for (d, socket) in sockets.iter().enumerate() {
        epoll
            .add(socket.as_raw_fd(), d as u64)
            .map_err(ForwardError::Setup)?;
    }
    epoll
        .add(stop.as_raw_fd(), STOP_TOKEN)
        .map_err(ForwardError::Setup)?;

    let mut pool = BufferPool::new(RX_BUFFER_BYTES, SMALL_FRAME_BYTES);
    let mut ready = Vec::with_capacity(sockets.len() + 1);
    let mut stopped = false;
    loop {
        for (d, line) in dirs.iter_mut().enumerate() {
            line.send_due(sockets[d ^ 1], &mut pool);
        }
        if stopped {
            break;
        }
        let next = next_due(&dirs);
        let now = Instant::now();
        if let Some(due) = next.filter(|due| due.saturating_duration_since(now) <= settings.spin) {
            spin_until(due, &sockets, &mut dirs, &mut pool);
            continue;
        }
        // Wake when the earliest head is due, less the spin (which spins the rest).
        let timeout = next.map(|due| (due - settings.spin).saturating_duration_since(now));
        epoll
            .wait(&mut ready, timeout)
            .map_err(ForwardError::Wait)?;
        for &token in &ready {
            match token {
                STOP_TOKEN => stopped = true,
                d => {
                    let d = d as usize;
                    let until = next_due(&dirs);
                    dirs[d].receive(sockets[d], &mut pool, until);
                }
            }
        }
    }
    let mut stats = Vec::with_capacity(links.len());
    let mut dirs = dirs.into_iter();
    while let (Some(ab), Some(ba)) = (dirs.next(), dirs.next()) {
        stats.push(LinkStats {
            ab: ab.finish(),
            ba: ba.finish(),
        });
    }
    Ok(stats)
}

fn next_due(dirs: &[Line]) -> Option<Instant> {
    dirs.iter().filter_map(|l| l.queue.next_due()).min()
}

/// Busy-waits until `due`, receiving from every socket without blocking meanwhile, so
/// that frames arriving then are stamped when they come (only with `--spin-us`).
fn spin_until(due: Instant, sockets: &[&PacketSocket], dirs: &mut [Line], pool: &mut BufferPool) {
    while Instant::now() < due {
        for (d, line) in dirs.iter_mut().enumerate() {
            line.receive(sockets[d], pool, Some(due));
        }
        std::hint::spin_loop();
    }
}

/// One direction: its queue and counters.
struct Line {
    queue: DelayQueue<Frame>,
    stats: DirectionStats,
}

impl Line {
    /// Receives until nothing is readable, `RECEIVE_BATCH` frames were read, or `until`
    /// (the earliest frame due over all directions) has come. Each frame's arrival is
    /// when the kernel received it (its timestamp), or else the clock read right after
    /// its `recvmsg` returned.
    fn receive(&mut self, rx: &PacketSocket, pool: &mut BufferPool, until: Option<Instant>) {
        for _ in 0..RECEIVE_BATCH {
            let mut landing = pool.landing();
            let got = rx.recv(&mut landing);
            let mut arrival = Instant::now();
            match got {
                Ok(Received::Frame(len, stamp)) => {
                    if let Some(age) = stamp.and_then(|s| s.age()).filter(|a| *a < MAX_STAMP_AGE) {
                        arrival = arrival.checked_sub(age).unwrap_or(arrival);
                    }
                    let frame = pool.keep(landing, len);
                    if let Err(dropped) = self.queue.push(arrival, frame) {
                        pool.recycle(dropped);
                    }
                    let head = self.queue.next_due();
                    if until.into_iter().chain(head).any(|due| due <= arrival) {
                        return;
                    }
                }
                Ok(Received::Outgoing) => pool.give_back(landing),
                Ok(Received::Truncated(_)) => {
                    self.stats.truncated += 1;
                    pool.give_back(landing);
                }
                Ok(Received::Empty) => {
                    pool.give_back(landing);
                    return;
                }
                Err(_) => {
                    // Reported once per error (ENETDOWN while the link is down): count
                    // it and wait for the next frame.
                    self.stats.recv_errors += 1;
                    pool.give_back(landing);
                    return;
                }
            }
        }
    }

    /// Sends every due frame. Lateness runs from the frame's due time to the clock read
    /// just before its `send`.
    fn send_due(&mut self, tx: &PacketSocket, pool: &mut BufferPool) {
        if self.queue.is_empty() {
            return;
        }
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
            pool.recycle(due.frame);
            now = Instant::now();
        }
    }

    fn finish(self) -> DirectionStats {
        let mut stats = self.stats;
        stats.drops = self.queue.drops();
        stats.queued_at_exit = self.queue.len() as u64;
        stats
    }
}
