//! Per-server statistics of a sharded run (`--shard`): each server's requests sent over
//! the whole run, and its answers, hits, misses, errors and latency inside the summary
//! window, beside the run's totals. Pure and mergeable like the [`Recorder`] that holds
//! them.
//!
//! [`Recorder`]: super::Recorder

use super::{OpStats, Window};
use crate::timing::ns_to_us;
use crate::workload::Outcome;

/// One server's counts.
#[derive(Debug, Clone, Default)]
pub struct ServerCounts {
    /// Requests written to it over the whole run.
    pub sent: u64,
    /// Requests that failed with its connection over the whole run.
    pub failed: u64,
    /// Its answers that completed inside the window.
    pub window: OpStats,
}

/// Every server's counts, by the server's index in the `--shard` list (empty when the
/// run is not sharded).
#[derive(Debug, Clone)]
pub struct PerServer {
    window: Window,
    pub servers: Vec<ServerCounts>,
}

impl PerServer {
    pub fn new(window: Window) -> PerServer {
        PerServer {
            window,
            servers: Vec::new(),
        }
    }

    fn server(&mut self, index: usize) -> &mut ServerCounts {
        if index >= self.servers.len() {
            self.servers.resize(index + 1, ServerCounts::default());
        }
        &mut self.servers[index]
    }

    /// A request was written to server `index`.
    pub fn sent(&mut self, index: usize) {
        self.server(index).sent += 1;
    }

    /// Server `index` answered a request that started at `start_ns`, at `end_ns`.
    pub fn answered(&mut self, index: usize, start_ns: u64, end_ns: u64, outcome: Outcome) {
        if !self.window.contains(end_ns) {
            return;
        }
        let us = ns_to_us(end_ns.saturating_sub(start_ns));
        self.server(index).window.answered(us, outcome);
    }

    /// A request to server `index` failed with its connection at `at_ns`.
    pub fn failed(&mut self, index: usize, at_ns: u64) {
        let in_window = self.window.contains(at_ns);
        let server = self.server(index);
        server.failed += 1;
        server.window.errors += u64::from(in_window);
    }

    pub fn merge(&mut self, other: &PerServer) {
        for (index, theirs) in other.servers.iter().enumerate() {
            let mine = self.server(index);
            mine.sent += theirs.sent;
            mine.failed += theirs.failed;
            mine.window.merge(&theirs.window);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    fn window() -> Window {
        Window {
            start_ns: S,
            end_ns: 3 * S,
        }
    }

    #[test]
    fn each_server_counts_its_own_and_only_the_window_has_latencies() {
        let mut per = PerServer::new(window());
        let hit = Outcome {
            hits: 1,
            ..Outcome::default()
        };
        per.sent(2);
        per.sent(0);
        per.answered(2, 0, S / 2, hit); // before the window
        per.answered(0, S, S + 2_000_000, hit);
        per.failed(0, 2 * S);
        assert_eq!(per.servers.len(), 3);
        assert_eq!((per.servers[0].sent, per.servers[2].sent), (1, 1));
        assert_eq!(per.servers[0].window.completed, 1);
        assert_eq!(per.servers[0].window.errors, 1);
        assert_eq!(per.servers[0].window.latency.percentiles().max, 2000);
        assert_eq!(per.servers[2].window.completed, 0);
        assert_eq!(per.servers[1].sent, 0);
    }

    #[test]
    fn merging_adds_server_by_server() {
        let mut a = PerServer::new(window());
        let mut b = PerServer::new(window());
        a.sent(0);
        b.sent(0);
        b.sent(1);
        b.answered(1, S, 2 * S, Outcome::default());
        a.merge(&b);
        assert_eq!(a.servers[0].sent, 2);
        assert_eq!(a.servers[1].sent, 1);
        assert_eq!(a.servers[1].window.completed, 1);
    }
}
