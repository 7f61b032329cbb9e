//! What the engine sleeps on: one `epoll` set over every link's sockets, a `timerfd` armed
//! for the next frame due, and a `signalfd` for SIGTERM and SIGINT.
//!
//! Why a timerfd and no busy-waiting: the timer fires at the due instant (the thread's
//! timer slack is 1 ns, so the kernel does not defer it to coalesce wake-ups), and what a
//! send is late by is the scheduler's wake-up latency, which the lines measure and report
//! (`lateness_us`). Spinning the last tens of microseconds before each frame bought a few
//! microseconds per crossing for a core's worth of CPU over all links (issue 25).

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
#[derive(Debug)]
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let fd = owned(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        Ok(Epoll {
            fd,
            events: Vec::new(),
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

    /// Waits until something registered is readable (no timeout: the timer is one of
    /// them) and returns the tokens of what is.
    pub fn wait(&mut self, ready: &mut Vec<u64>) -> io::Result<()> {
        ready.clear();
        let n = loop {
            // SAFETY: `events` has room for `len` entries.
            let n = unsafe {
                libc::epoll_wait(
                    self.fd.as_raw_fd(),
                    self.events.as_mut_ptr(),
                    self.events.len() as libc::c_int,
                    -1,
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

/// A one-shot monotonic timer, re-armed for the next frame due.
#[derive(Debug)]
pub struct Timer {
    fd: OwnedFd,
}

impl Timer {
    pub fn new() -> io::Result<Self> {
        set_timer_slack_ns(1);
        // SAFETY: plain syscall; the result is checked.
        let fd = owned(unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        })?;
        Ok(Timer { fd })
    }

    /// Fires once, `after` from now (rounded up to a nanosecond so that zero still
    /// fires); None disarms it.
    pub fn arm(&self, after: Option<Duration>) -> io::Result<()> {
        let value = match after {
            Some(d) => {
                let d = d.max(Duration::from_nanos(1));
                libc::timespec {
                    tv_sec: d.as_secs().try_into().unwrap_or(libc::time_t::MAX),
                    tv_nsec: d.subsec_nanos().into(),
                }
            }
            None => libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
        };
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: `spec` is a valid itimerspec; a null old value is allowed.
        check(unsafe {
            libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut())
        })?;
        Ok(())
    }

    /// Clears the expiry count, so the descriptor is no longer readable.
    pub fn clear(&self) {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into `count`; EAGAIN (not expired) is fine.
        unsafe {
            libc::read(
                self.fd.as_raw_fd(),
                (&raw mut count).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

impl AsFd for Timer {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
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
    fn an_armed_timer_wakes_the_set_never_before_it_is_due() {
        let mut ep = Epoll::new().unwrap();
        let timer = Timer::new().unwrap();
        ep.add(timer.as_fd().as_raw_fd(), 7).unwrap();
        let mut ready = Vec::new();
        for us in [0, 200, 1_000] {
            let start = Instant::now();
            timer.arm(Some(Duration::from_micros(us))).unwrap();
            ep.wait(&mut ready).unwrap();
            assert!(start.elapsed() >= Duration::from_micros(us), "{us} us");
            assert_eq!(ready, [7]);
            timer.clear();
        }
    }

    #[test]
    fn a_disarmed_timer_stays_quiet() {
        let timer = Timer::new().unwrap();
        timer.arm(Some(Duration::from_micros(100))).unwrap();
        timer.arm(None).unwrap();
        std::thread::sleep(Duration::from_millis(2));
        let mut pfd = libc::pollfd {
            fd: timer.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut pfd, 1, 0) }, 0);
    }
}
