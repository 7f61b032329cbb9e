//! The loop's time: how long it may sleep, and what is due when it wakes (a worker's
//! deadline or connection attempt, a client's idle timeout or linger, accepting again).
//! Deadlines are found by scanning the workers' next deadlines, which the loop keeps
//! (`EventLoop::deadlines`), and the clients only with an idle timeout, or those
//! lingering: no timer wheel, W is small.

use std::time::{Duration, Instant};

use super::EventLoop;

impl EventLoop {
    /// How long poll may sleep: until the earliest deadline (kept for `on_time`), or
    /// not at all while busy-polling.
    pub(super) fn poll_timeout(&mut self) -> Option<Duration> {
        self.next_due = self.earliest_deadline();
        if self.next_due.is_none() && self.settings.busy_poll.is_zero() {
            return None;
        }
        let now = Instant::now();
        if !self.settings.busy_poll.is_zero()
            && now.duration_since(self.last_read) < self.settings.busy_poll
        {
            return Some(Duration::ZERO);
        }
        self.next_due
            .map(|at| at.saturating_duration_since(now) + Duration::from_micros(50))
    }

    /// Something was read: busy-polling goes on from now. A clock reading per read
    /// event (two per request) is paid only when busy-polling is on.
    pub(super) fn note_read(&mut self) {
        if !self.settings.busy_poll.is_zero() {
            self.last_read = Instant::now();
        }
    }

    /// The earliest time something is due: a worker's deadline or connection attempt,
    /// a client's idle timeout or the end of its linger, accepting again.
    fn earliest_deadline(&self) -> Option<Instant> {
        let mut earliest = self.accept_paused_until;
        let mut consider = |at: Option<Instant>| {
            if let Some(at) = at {
                earliest = Some(earliest.map_or(at, |e: Instant| e.min(at)));
            }
        };
        for &at in &self.deadlines {
            consider(at);
        }
        consider(self.shared.as_ref().and_then(|s| s.deadline()));
        let idle = self.settings.idle_timeout;
        if idle.is_some() {
            for (_, client) in &self.clients {
                consider(client.deadline(idle));
            }
        } else {
            for &key in &self.lingering {
                consider(self.clients.get(key).and_then(|c| c.deadline(idle)));
            }
        }
        earliest
    }

    pub(super) fn on_time(&mut self) {
        let Some(due) = self.next_due else {
            return;
        };
        let now = self.turn;
        if now < due {
            return;
        }
        if self.accept_paused_until.is_some_and(|at| now >= at) {
            self.accept_paused_until = None;
            for i in 0..self.listeners.len() {
                self.accept(i, false);
            }
        }
        for w in 0..self.workers.len() {
            if self.deadlines[w].is_some_and(|d| now >= d) {
                let shared = self.shared.as_mut();
                self.workers[w].on_time(&self.ctx, self.poll.registry(), shared, now);
                self.after_worker(w);
                self.deliver_pokes();
            }
        }
        if let Some(shared) = &mut self.shared {
            shared.on_time(&self.ctx, self.poll.registry(), now);
            self.deliver_pokes();
        }
        let idle = self.settings.idle_timeout;
        let mut due = std::mem::take(&mut self.due_clients);
        due.extend(
            self.clients
                .iter()
                .filter(|(_, c)| c.deadline(idle).is_some_and(|d| now >= d))
                .map(|(k, _)| k),
        );
        for key in due.drain(..) {
            let fate = self.clients[key].on_time(now, idle, self.poll.registry());
            self.settle_client(key, fate);
        }
        self.due_clients = due;
    }
}
