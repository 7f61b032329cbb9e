//! `INFO` from a Redis pool's client: the middleware's own counters in Redis's `INFO`
//! text format (a bulk string of `# Section` headers and `name:value` lines), since no
//! single server's `INFO` describes a pool. The same counters as memcached's `stats`
//! ([`crate::stats_command`]), under Redis's names where Redis has one.

use std::fmt::Write;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use cachelab_protocol::resp::put_bulk;

use crate::counters::Counters;
use crate::observed::Observed;
use crate::routing::plan::Mode;

/// Writes the whole `INFO` reply (every section) into `out`.
pub fn compose_info(shared: &Observed, out: &mut BytesMut) {
    let mut text = String::with_capacity(2048);
    write_info(shared, &mut text);
    put_bulk(out, text.as_bytes());
}

fn write_info(shared: &Observed, text: &mut String) {
    let totals = Counters::sum(&shared.counters);
    let net = &shared.net;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let mut section = |name: &str, fields: &[(&str, String)]| {
        let _ = write!(text, "# {name}\r\n");
        for (key, value) in fields {
            let _ = write!(text, "{key}:{value}\r\n");
        }
        text.push_str("\r\n");
    };
    let uptime = shared.started.elapsed().as_secs();
    section(
        "Server",
        &[
            ("cachelab_proxy_version", env!("CARGO_PKG_VERSION").into()),
            ("process_id", std::process::id().to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
        ],
    );
    section(
        "Clients",
        &[("connected_clients", load(&net.curr_connections).to_string())],
    );
    let servers = shared.health.report();
    section(
        "Stats",
        &[
            (
                "total_connections_received",
                load(&net.total_connections).to_string(),
            ),
            ("total_commands_processed", load(&net.arrivals).to_string()),
            (
                "rejected_connections",
                load(&net.rejected_connections).to_string(),
            ),
            ("keyspace_hits", totals.get_hits.to_string()),
            ("keyspace_misses", totals.get_misses.to_string()),
            ("total_error_replies", totals.error_replies.to_string()),
            ("bad_requests", load(&net.bad_requests).to_string()),
            ("get_requests", totals.get_requests.to_string()),
            ("multiget_requests", totals.multiget_requests.to_string()),
            ("set_requests", totals.set_requests.to_string()),
            ("other_requests", totals.other_requests.to_string()),
            ("failovers", totals.failovers.to_string()),
            ("out_of_step", totals.out_of_step.to_string()),
            ("queue_length", shared.queue.len().to_string()),
            ("used_memory", shared.budget.used().to_string()),
            ("memory_budget", shared.budget.limit().to_string()),
            ("memory_refusals", shared.budget.refusals().to_string()),
        ],
    );
    section(
        "Proxy",
        &[
            ("workers", shared.workers.to_string()),
            ("pipeline", shared.pipeline.to_string()),
            ("servers", servers.len().to_string()),
            (
                "ejected_servers",
                shared.health.ejected_servers().to_string(),
            ),
            ("server_ejections", shared.health.ejections().to_string()),
        ],
    );
    let _ = write!(text, "# Servers\r\n");
    for (i, server) in servers.iter().enumerate() {
        let state = if server.ejected { "ejected" } else { "up" };
        let _ = write!(
            text,
            "server_{i}:addr={},state={state},failures={},ejections={}\r\n",
            server.addr, server.failures, server.ejections
        );
    }
    let _ = write!(text, "\r\n# Pools\r\n");
    for (i, (listen, slot)) in shared.listeners.iter().enumerate() {
        let pool = slot.current();
        let mode = match pool.mode {
            Mode::Replicate { .. } => "replicate".to_string(),
            Mode::Shard { replicas } => format!("shard/{replicas}"),
        };
        let _ = write!(
            text,
            "pool_{i}:name={},listen={listen},protocol={},mode={mode},servers={}\r\n",
            pool.name,
            pool.protocol.name(),
            pool.servers.len()
        );
    }
}
