//! What the loop answers of its workers' records: a client's `stats` (composed here,
//! where this loop's latencies are current) and the requests of the statistics writer
//! and the metrics endpoint ([`crate::stats_units`]), looked at once per turn.

use std::time::Instant;

use bytes::BytesMut;

use super::EventLoop;
use crate::stats_command::compose_stats;
use crate::stats_units::hand_over;

impl EventLoop {
    /// Answers a client's `stats` requests, with this loop's latencies as they are
    /// now (the other loops', if any, as they last published them: asked again here).
    pub(super) fn answer_stats(&mut self, key: usize) {
        self.publish_latencies();
        if self.net.observed.loops > 1 {
            self.ctx.stats.nudge_latencies();
        }
        let mut out = BytesMut::with_capacity(2048);
        compose_stats(&self.net.observed, &mut out);
        self.clients[key].answer_stats(&out);
        let fate =
            self.clients[key].after_replies(self.poll.registry(), &mut self.queue, self.turn);
        self.settle_client(key, fate);
    }

    /// Answers what readers on other threads asked of the workers' records since the
    /// last turn ([`crate::stats_units`]).
    pub(super) fn answer_readers(&mut self) {
        let (windows, latencies) = self.ctx.stats.pending(&self.seen);
        if let Some(n) = windows {
            self.hand_over_windows();
            self.ctx
                .stats
                .answered_windows(self.index, n, &mut self.seen);
        }
        if let Some(n) = latencies {
            self.publish_latencies();
            self.ctx
                .stats
                .answered_latencies(self.index, n, &mut self.seen);
        }
    }

    pub(super) fn hand_over_windows(&mut self) {
        let now = Instant::now();
        for worker in &mut self.workers {
            let mut handover = self.ctx.stats.lock(worker.id);
            hand_over(&mut handover, &mut worker.records.stats, now);
        }
    }

    pub(super) fn publish_latencies(&mut self) {
        for worker in &self.workers {
            let mut published = self.ctx.latencies.lock(worker.id);
            published.clone_from(&worker.records.latencies);
        }
    }
}
