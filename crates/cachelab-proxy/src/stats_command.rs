//! The `stats` command: the middleware's own counters in memcached's `STAT` format.

use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::BytesMut;
use cachelab_protocol::compose_stat;

use crate::counters::Counters;
use crate::observed::Observed;
use crate::routing::plan::Mode;

/// Every counter, then one block per server (`server_<i>` its address,
/// `server_<i>_state` up or ejected, `_failures` in a row now, `_ejections` so far,
/// `_answers` and `_latency_us`, the mean time from sending it a message to its answer) and
/// one line per pool (`pool_<i>`: name, listen address, mode, servers).
pub fn compose_stats(shared: &Observed, out: &mut BytesMut) {
    let totals = Counters::sum(&shared.counters);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let net = &shared.net;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    compose_stat(out, "pid", std::process::id());
    compose_stat(out, "uptime", shared.started.elapsed().as_secs());
    compose_stat(out, "time", now);
    compose_stat(
        out,
        "version",
        concat!("cachelab-proxy-", env!("CARGO_PKG_VERSION")),
    );
    compose_stat(out, "curr_connections", load(&net.curr_connections));
    compose_stat(out, "total_connections", load(&net.total_connections));
    compose_stat(out, "rejected_connections", load(&net.rejected_connections));
    compose_stat(out, "ssl_handshake_errors", load(&net.tls_handshake_errors));
    let servers = shared.health.report();
    compose_stat(out, "workers", shared.workers);
    compose_stat(out, "loops", shared.loops);
    compose_stat(out, "servers", servers.len());
    compose_stat(out, "sharded", u8::from(shared.sharded));
    compose_stat(out, "pipeline", shared.pipeline);
    compose_stat(out, "share_connections", u8::from(shared.share_connections));
    compose_stat(out, "merge_gets", u8::from(shared.merge_gets));
    compose_stat(out, "busy_poll_us", crate::busy_poll::window_us());
    compose_stat(out, "queue_length", shared.queue_len());
    compose_stat(out, "requests_received", load(&net.arrivals));
    compose_stat(out, "bad_requests", load(&net.bad_requests));
    // memcached counts keys in cmd_get; the request counts are ours.
    compose_stat(out, "cmd_get", totals.get_keys);
    compose_stat(out, "get_hits", totals.get_hits);
    compose_stat(out, "get_misses", totals.get_misses);
    compose_stat(out, "get_requests", totals.get_requests);
    compose_stat(out, "multiget_requests", totals.multiget_requests);
    compose_stat(out, "cmd_set", totals.set_requests);
    compose_stat(out, "other_requests", totals.other_requests);
    compose_stat(out, "error_replies", totals.error_replies);
    compose_stat(out, "failovers", totals.failovers);
    compose_stat(out, "out_of_step", totals.out_of_step);
    compose_stat(out, "ejected_servers", shared.health.ejected_servers());
    compose_stat(out, "memory_used", shared.budget.used());
    compose_stat(out, "memory_budget", shared.budget.limit());
    compose_stat(out, "memory_refusals", shared.budget.refusals());
    compose_stat(out, "client_pauses", load(&net.client_pauses));
    compose_stat(out, "server_ejections", shared.health.ejections());
    compose_stat(out, "worker_batches", totals.batches);
    compose_stat(out, "merged_gets", totals.merged_gets);
    let latencies = shared.latencies.total();
    for (i, server) in servers.iter().enumerate() {
        compose_stat(out, &format!("server_{i}"), &server.label);
        let state = if server.ejected { "ejected" } else { "up" };
        compose_stat(out, &format!("server_{i}_state"), state);
        compose_stat(out, &format!("server_{i}_failures"), server.failures);
        compose_stat(out, &format!("server_{i}_ejections"), server.ejections);
        let h = latencies.servers.get(i);
        compose_stat(
            out,
            &format!("server_{i}_answers"),
            h.map_or(0, |h| h.count),
        );
        let mean = h.map_or(0.0, |h| h.mean_us());
        compose_stat(
            out,
            &format!("server_{i}_latency_us"),
            format_args!("{mean:.1}"),
        );
    }
    compose_stat(out, "pools", shared.listeners.len());
    for (i, (listen, slot)) in shared.listeners.iter().enumerate() {
        let pool = slot.current();
        let mode = match pool.mode {
            Mode::Replicate { .. } => "replicate".to_string(),
            Mode::Shard { replicas } => format!("shard/{replicas}"),
        };
        let addrs: Vec<String> = pool.servers.iter().map(|s| s.addr.to_string()).collect();
        compose_stat(
            out,
            &format!("pool_{i}"),
            format_args!("{} {listen} {mode} {}", pool.name, addrs.join(",")),
        );
    }
    out.extend_from_slice(b"END\r\n");
}
