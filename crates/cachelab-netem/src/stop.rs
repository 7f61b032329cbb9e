//! A stop that another thread triggers: a flag, and an eventfd that the forwarding
//! loop's epoll set includes, so a loop asleep with empty queues wakes at once (the
//! binary stops on a signalfd instead; tests and embedders use this).

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug)]
pub struct Stop {
    flag: AtomicBool,
    event: OwnedFd,
}

impl Stop {
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Stop {
            flag: AtomicBool::new(false),
            // SAFETY: `raw` is a new descriptor that nothing else owns.
            event: unsafe { OwnedFd::from_raw_fd(raw) },
        })
    }

    /// Sets the flag and makes the eventfd readable for good (it is never read), so
    /// every `ppoll` that includes it returns.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::Release);
        // SAFETY: writing 1 to our own eventfd; it cannot block (EFD_NONBLOCK) and only
        // fails when the counter would overflow, which one write per stop cannot reach.
        unsafe { libc::eventfd_write(self.event.as_raw_fd(), 1) };
    }

    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

impl AsFd for Stop {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_triggered_stop_is_set_and_its_fd_readable() {
        let stop = Stop::new().unwrap();
        assert!(!stop.is_set());
        stop.trigger();
        assert!(stop.is_set());
        let mut pfd = libc::pollfd {
            fd: stop.as_fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        assert_eq!((n, pfd.revents & libc::POLLIN), (1, libc::POLLIN));
    }
}
