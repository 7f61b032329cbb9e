//! What the engine sleeps on: one `epoll` set over every link's sockets and a `signalfd`
//! for SIGTERM and SIGINT, waited on with `epoll_pwait2`, whose timeout (in nanoseconds)
//! ends at the next frame due.
//!
//! Why a timeout and no busy-waiting: it expires at the due instant (the thread's timer
//! slack is 1 ns, so the kernel does not defer it to coalesce wake-ups), and what a send is
//! late by is the scheduler's wake-up latency, which the lines measure and report
//! (`lateness_us`). Spinning the last tens of microseconds before each frame bought a few
//! microseconds per crossing for a core's worth of CPU over all links (issue 25). The
//! timeout rides on the wait itself: no timerfd to arm and read, two syscalls fewer per
//! frame than a timerfd.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

fn owned(rc: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    check(rc).map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A level-triggered epoll set; each registered descriptor carries a caller's token.
/// Created (and waited on) by one thread, whose timer slack it sets to 1 ns.
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub fn new() -> io::Result<Self> {
        set_timer_slack_ns(1);
        // SAFETY: plain syscall; the result is checked.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // Room for one event more than registered: epoll_wait refuses room for none.
        Ok(Epoll {
            fd,
            events: vec![libc::epoll_event { events: 0, u64: 0 }],
        })
    }

    /// Wakes on `fd` readable, reporting `token`.
    pub fn add(&mut self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: `ev` is a valid epoll_event; the kernel copies it.
        check(unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) })?;
        self.events.push(libc::epoll_event { events: 0, u64: 0 });
        Ok(())
    }

    /// Waits until something registered is readable or `timeout` (to the nanosecond) has
    /// passed (None: no timeout), and returns the tokens of what is readable (none on a
    /// timeout).
    pub fn wait(&mut self, ready: &mut Vec<u64>, timeout: Option<Duration>) -> io::Result<()> {
        ready.clear();
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().try_into().unwrap_or(libc::time_t::MAX),
            tv_nsec: t.subsec_nanos().into(),
        });
        let ts_ptr = ts
            .as_ref()
            .map_or(std::ptr::null(), |ts| ts as *const libc::timespec);
        let n = loop {
            // SAFETY: `events` has room for `len` entries; `ts_ptr` is null or points to
            // `ts`, alive for the call; a null sigmask leaves the mask as it is.
            let n = unsafe {
                libc::epoll_pwait2(
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    self.events.len() as libc::c_int,
                    ts_ptr,
                    std::ptr::null(),
                )
            };
            match check(n) {
                Ok(n) => break n as usize,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        ready.extend(self.events[..n].iter().map(|e| e.u64));
        Ok(())
    }
}

/// SIGTERM and SIGINT as a readable descriptor. The signals must already be blocked in
/// every thread ([`block_stop_signals`]), so they wait here instead of killing us.
#[derive(Debug)]
pub struct StopSignals {
    fd: OwnedFd,
}

impl StopSignals {
    pub fn new(set: &libc::sigset_t) -> io::Result<Self> {
        // SAFETY: `set` is an initialised sigset.
        let fd = owned(unsafe { libc::signalfd(-1, set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) })?;
        Ok(StopSignals { fd })
    }
}

impl AsFd for StopSignals {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts later)
/// and returns their set, for [`StopSignals`].
pub fn block_stop_signals() -> io::Result<libc::sigset_t> {
    // SAFETY: the set is initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_wait_with_a_timeout_never_returns_before_it_unless_woken() {
        let mut ep = Epoll::new().unwrap();
        let mut ready = vec![99];
        for us in [0, 200, 1_000] {
            let start = Instant::now();
            ep.wait(&mut ready, Some(Duration::from_micros(us)))
                .unwrap();
            assert!(start.elapsed() >= Duration::from_micros(us), "{us} us");
            assert!(ready.is_empty());
        }
    }

    #[test]
    fn a_readable_descriptor_ends_the_wait_with_its_token() {
        let mut ep = Epoll::new().unwrap();
        let stop = crate::stop::Stop::new().unwrap();
        ep.add(stop.as_fd().as_raw_fd(), 7).unwrap();
        stop.trigger();
        let mut ready = Vec::new();
        let start = Instant::now();
        ep.wait(&mut ready, Some(Duration::from_secs(10))).unwrap();
        assert_eq!(ready, [7]);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
