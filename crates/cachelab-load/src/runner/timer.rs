//! A microsecond-precise sleep for the open loop. tokio's timer wheel has a resolution of
//! one millisecond, which would delay each scheduled request by up to a millisecond and
//! add that to its measured latency; a timerfd armed at an absolute `CLOCK_MONOTONIC`
//! time wakes the event loop within microseconds instead, without spinning.

use std::cell::Cell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
    armed_at: Cell<Option<u64>>,
}

impl PreciseTimer {
    pub fn new() -> io::Result<PreciseTimer> {
        // SAFETY: plain system call; the returned descriptor is checked and then owned.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let owned = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the OwnedFd is moved into the AsyncFd, so the descriptor stays open and
        // the same for the AsyncFd's whole life.
        let fd = unsafe { AsyncFd::register_with_interest(owned, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(PreciseTimer {
            fd,
            armed_at: Cell::new(None),
        })
    }

    /// Arms the timer to fire at `deadline_ns` on the monotonic clock (re-arming at the
    /// same time is free, so callers may arm on every loop turn).
    pub fn arm(&self, deadline_ns: u64) -> io::Result<()> {
        if self.armed_at.get() == Some(deadline_ns) {
            return Ok(());
        }
        // A zero it_value would disarm the timer; 1 ns is already in the past.
        let deadline_ns = deadline_ns.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
                tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
            },
        };
        // SAFETY: valid descriptor and itimerspec; the old value is not wanted.
        let rc = unsafe {
            libc::timerfd_settime(
                self.fd.as_raw_fd(),
                libc::TFD_TIMER_ABSTIME,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed_at.set(Some(deadline_ns));
        Ok(())
    }

    /// Resolves once the armed time has passed (or once a previous expiry not yet waited
    /// for is noticed: callers look at the clock). The expiry count is not read: arming
    /// resets it (timerfd_settime), and the descriptor is registered edge-triggered, so
    /// every expiry wakes us again. That saves a read(2) per expiry.
    pub async fn expired(&self) -> io::Result<()> {
        let mut guard = self.fd.readable().await?;
        guard.clear_ready();
        self.armed_at.set(None);
        Ok(())
    }

    /// The time the timer is armed for, if it has not been seen to expire since.
    pub fn armed_at(&self) -> Option<u64> {
        self.armed_at.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::clock::monotonic_ns;

    #[test]
    fn fires_within_a_fraction_of_a_millisecond_of_the_deadline() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = PreciseTimer::new().unwrap();
            let mut late = Vec::new();
            for _ in 0..20 {
                let deadline = monotonic_ns() + 300_000;
                timer.arm(deadline).unwrap();
                // An expiry may be noticed early only if it belongs to an older arming.
                while monotonic_ns() < deadline {
                    timer.expired().await.unwrap();
                }
                let now = monotonic_ns();
                assert!(now >= deadline, "fired early");
                late.push(now - deadline);
            }
            late.sort_unstable();
            // The median wake-up is well under tokio's 1 ms timer resolution.
            assert!(late[10] < 500_000, "median lateness {} ns", late[10]);
        });
    }

    #[test]
    fn a_deadline_in_the_past_fires_at_once() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let timer = PreciseTimer::new().unwrap();
            timer.arm(monotonic_ns() - 1_000_000).unwrap();
            tokio::time::timeout(std::time::Duration::from_secs(1), timer.expired())
                .await
                .expect("a past deadline fires")
                .unwrap();
        });
    }
}
