//! The report's `servers`: each server's share of a sharded run (`--shard`), in the
//! list's order, beside the run's totals. Pure.

use serde::{Deserialize, Serialize};

use super::configuration::address;
use super::OpSummary;
use crate::config::Config;
use crate::record::servers::PerServer;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ServerReport {
    /// `host:port` or the socket's path.
    pub server: String,
    /// The name its ketama points are hashed from.
    pub name: String,
    pub weight: u32,
    /// Requests written to it over the whole run.
    pub sent: u64,
    /// Requests lost with its connection over the whole run.
    pub failed: u64,
    /// Its answers inside the window (all operations together).
    pub summary: OpSummary,
}

/// Every server's report, or none when the run was not sharded.
pub fn servers(config: &Config, counts: &PerServer, window_s: f64) -> Vec<ServerReport> {
    let Some(shard) = &config.shard else {
        return Vec::new();
    };
    shard
        .servers
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let mine = counts.servers.get(index).cloned().unwrap_or_default();
            ServerReport {
                server: address(&entry.address),
                name: entry.name.clone(),
                weight: entry.weight,
                sent: mine.sent,
                failed: mine.failed,
                summary: OpSummary::of(&mine.window, window_s),
            }
        })
        .collect()
}
