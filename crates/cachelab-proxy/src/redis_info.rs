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

/// Writes the `INFO` reply into `out`: every section, or (as Redis does for
/// `INFO <section>`) the one named, in any case; a name no section has gives an empty
/// string.
pub fn compose_info(shared: &Observed, section: Option<&str>, out: &mut BytesMut) {
    let mut text = String::with_capacity(2048);
    write_info(shared, &mut text);
    let wanted = section.filter(|s| !matches!(*s, "all" | "everything" | "default"));
    match wanted {
        None => put_bulk(out, text.as_bytes()),
        Some(name) => {
            let only: String = text
                .split("\r\n\r\n")
                .filter(|block| {
                    block
                        .strip_prefix("# ")
                        .and_then(|b| b.split("\r\n").next())
                        .is_some_and(|title| title.eq_ignore_ascii_case(name))
                })
                .map(|block| format!("{}\r\n", block.trim_end()))
                .collect();
            put_bulk(out, only.as_bytes());
        }
    }
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
            ("queue_length", shared.queue_len().to_string()),
            ("used_memory", shared.budget.used().to_string()),
            ("memory_budget", shared.budget.limit().to_string()),
            ("memory_refusals", shared.budget.refusals().to_string()),
        ],
    );
    section(
        "Proxy",
        &[
            ("workers", shared.workers.to_string()),
            ("loops", shared.loops.to_string()),
            ("pipeline", shared.pipeline.to_string()),
            (
                "share_connections",
                u8::from(shared.share_connections).to_string(),
            ),
            // Batches the workers sent: requests forwarded per batch is what the
            // servers were spared (each batch is one write per server).
            ("worker_batches", totals.batches.to_string()),
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
            server.label, server.failures, server.ejections
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use cachelab_protocol::{parse_resp_reply, RespReply};
    use crossbeam_utils::CachePadded;

    use crate::budget::MemoryBudget;
    use crate::endpoint::Endpoint;
    use crate::health::{FailureKind, Health};
    use crate::histograms::LatencyUnits;
    use crate::metrics::{OpKind, Outcome};
    use crate::observed::{NetCounters, PoolSlot};
    use crate::queue::QueueLength;
    use crate::routing::plan::{Pool, PoolServer};
    use crate::routing::ring::Member;
    use crate::routing::Protocol;

    fn observed() -> Observed {
        let addrs: Vec<Endpoint> = ["127.0.0.1:6379", "127.0.0.1:6380"]
            .iter()
            .map(|a| Endpoint::Tcp(a.parse().unwrap()))
            .collect();
        let health = Arc::new(Health::new(&addrs, 1));
        health.report_failure(1, FailureKind::Timeout, "no reply within 1000 ms");
        let servers = addrs
            .iter()
            .enumerate()
            .map(|(id, addr)| PoolServer {
                id,
                addr: addr.clone(),
                member: Member {
                    name: addr.to_string(),
                    weight: 1,
                },
            })
            .collect();
        let mut pool = Pool::replicate(servers, false, Duration::from_secs(1));
        pool.protocol = Protocol::Redis;
        let counters: Arc<[CachePadded<Counters>]> = (0..2)
            .map(|_| CachePadded::new(Counters::default()))
            .collect();
        let hit = Outcome {
            keys: 1,
            hits: 1,
            error: false,
        };
        counters[0].record(OpKind::Get, &hit, 0);
        counters[1].record(OpKind::Get, &Outcome { hits: 0, ..hit }, 0);
        let net = Arc::new(NetCounters::default());
        net.arrivals.store(7, Ordering::Relaxed);
        Observed {
            counters,
            latencies: Arc::new(LatencyUnits::new(2)),
            net,
            health,
            budget: Arc::new(MemoryBudget::new(1 << 20)),
            queues: Arc::new([Arc::new(QueueLength::default())]),
            listeners: vec![(
                Endpoint::Tcp("127.0.0.1:22121".parse().unwrap()),
                Arc::new(PoolSlot::new(pool)),
            )],
            started: Instant::now(),
            workers: 2,
            loops: 1,
            pipeline: 1,
            share_connections: false,
            merge_gets: false,
            sharded: false,
        }
    }

    #[test]
    fn info_is_one_bulk_string_of_sections_and_name_value_lines() {
        let mut out = BytesMut::new();
        compose_info(&observed(), None, &mut out);
        let (reply, used) = parse_resp_reply(&out).unwrap();
        assert_eq!(used, out.len());
        let RespReply::Bulk(Some(text)) = reply else {
            panic!("{reply:?}")
        };
        let text = std::str::from_utf8(text).unwrap();
        assert!(text.split("\r\n").all(|line| line.is_empty()
            || line.starts_with("# ")
            || line.split_once(':').is_some_and(|(k, _)| !k.contains(' '))));
        for line in [
            "# Stats",
            "total_commands_processed:7",
            "keyspace_hits:1",
            "keyspace_misses:1",
            "server_0:addr=127.0.0.1:6379,state=up,failures=0,ejections=0",
            "loops:1",
            "worker_batches:0",
            "server_1:addr=127.0.0.1:6380,state=ejected,failures=1,ejections=1",
            "pool_0:name=default,listen=127.0.0.1:22121,protocol=redis,mode=replicate,servers=2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in {text}");
        }
    }

    #[test]
    fn info_of_one_section_is_that_section_only_in_any_case() {
        let mut out = BytesMut::new();
        compose_info(&observed(), Some("servers"), &mut out);
        let (RespReply::Bulk(Some(text)), _) = parse_resp_reply(&out).unwrap() else {
            panic!()
        };
        let text = std::str::from_utf8(text).unwrap();
        assert!(text.starts_with("# Servers\r\nserver_0:"), "{text}");
        assert!(
            !text.contains("# Stats") && text.ends_with("ejections=1\r\n"),
            "{text}"
        );
        out.clear();
        compose_info(&observed(), Some("nosuch"), &mut out);
        assert_eq!(&out[..], b"$0\r\n\r\n");
    }
}
