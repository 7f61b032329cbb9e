//! `--metrics-addr`: the middleware's counters, gauges and latency histograms in the
//! OpenMetrics text format (which Prometheus scrapes) over HTTP, encoded by the
//! `prometheus-client` crate. One request per connection; any path answers.
//!
//! Latency histograms (seconds, buckets from 50 µs to 10 s, see `histograms`):
//! - `cachelab_proxy_response_seconds{op}`: arrival to reply sent, per operation type;
//! - `cachelab_proxy_server_seconds{server}`: message sent to that server's answer.
//!
//! Per server also `cachelab_proxy_server_up` (1 in service, 0 ejected),
//! `cachelab_proxy_server_failures` (in a row now) and
//! `cachelab_proxy_server_ejections_total`.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::counters::Counters;
use crate::metrics::OpKind;
use crate::observed::Observed;
use crate::stats_units::StatsUnits;

const REQUEST_LIMIT: usize = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a scrape waits for the loops to publish their latencies.
const PUBLISH_PATIENCE: Duration = Duration::from_millis(250);

/// Serves scrapes until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Observed>, units: Arc<StatsUnits>) {
    let registry = Arc::new(registry(shared));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let registry = Arc::clone(&registry);
        let units = Arc::clone(&units);
        tokio::spawn(async move {
            let answered = answer(stream, &registry, &units);
            if let Err(e) = tokio::time::timeout(IO_TIMEOUT, answered).await {
                debug!(error = %e, "metrics scrape timed out");
            }
        });
    }
}

async fn answer(
    mut stream: TcpStream,
    registry: &Registry,
    units: &StatsUnits,
) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_LIMIT {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    // The latencies as the loops have them now (a loop that does not answer in time
    // shows what it published last).
    units.ask_latencies(PUBLISH_PATIENCE).await;
    let body = encode(registry);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/openmetrics-text; version=1.0.0; \
         charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The registry: one collector that reads the proxy's own counters at each scrape.
pub fn registry(shared: Arc<Observed>) -> Registry {
    let mut registry = Registry::with_prefix("cachelab_proxy");
    registry.register_collector(Box::new(ProxyCollector(shared)));
    registry
}

/// The exposition text of `registry` (pure, so it is tested without sockets).
pub fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry)
        .expect("writing to a String cannot fail");
    out
}

/// Reads the proxy's counters, gauges and histograms when scraped.
struct ProxyCollector(Arc<Observed>);

impl std::fmt::Debug for ProxyCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProxyCollector")
    }
}

fn counter(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    metric.encode_counter::<NoLabelSet, _, u64>(&value, None)
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: i64,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    metric.encode_gauge(&value)
}

impl Collector for ProxyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let shared = &self.0;
        let t = Counters::sum(&shared.counters);
        let net = &shared.net;
        let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
        {
            let mut m = encoder.encode_descriptor(
                "requests",
                "Requests completed by the workers, by operation type.",
                None,
                MetricType::Counter,
            )?;
            for (op, value) in [
                ("get", t.get_requests),
                ("multiget", t.multiget_requests),
                ("set", t.set_requests),
                ("other", t.other_requests),
            ] {
                m.encode_family(&[("op", op)])?
                    .encode_counter::<NoLabelSet, _, u64>(&value, None)?;
            }
        }
        let e = &mut encoder;
        counter(
            e,
            "get_keys",
            "Keys asked for by get and multi-get requests.",
            t.get_keys,
        )?;
        counter(e, "get_hits", "Keys found.", t.get_hits)?;
        counter(e, "get_misses", "Keys not found.", t.get_misses)?;
        counter(
            e,
            "error_replies",
            "Requests answered with an error line.",
            t.error_replies,
        )?;
        counter(
            e,
            "failovers",
            "Parts served by a stand-in server.",
            t.failovers,
        )?;
        counter(
            e,
            "out_of_step",
            "Server connections closed because a reply did not match what was sent.",
            t.out_of_step,
        )?;
        counter(
            e,
            "received",
            "Requests decoded by the net layer.",
            load(&net.arrivals),
        )?;
        counter(
            e,
            "bad_requests",
            "Requests rejected by the net layer.",
            load(&net.bad_requests),
        )?;
        counter(
            e,
            "client_pauses",
            "Times a client got nothing more dispatched until it read its replies.",
            load(&net.client_pauses),
        )?;
        counter(
            e,
            "connections",
            "Client connections accepted.",
            load(&net.total_connections),
        )?;
        gauge(
            e,
            "open_connections",
            "Client connections open.",
            load(&net.curr_connections) as i64,
        )?;
        gauge(
            e,
            "queue_length",
            "Requests waiting in the FCFS queue.",
            shared.queue_len() as i64,
        )?;
        gauge(
            e,
            "workers",
            "Worker slots per event loop.",
            shared.workers as i64,
        )?;
        gauge(
            e,
            "loops",
            "Event loops, each with its own queue and workers.",
            shared.loops as i64,
        )?;
        gauge(
            e,
            "memory_used_bytes",
            "Bytes held against the memory budget.",
            shared.budget.used() as i64,
        )?;

        let latencies = shared.latencies.total();
        {
            let mut m = encoder.encode_descriptor(
                "response_seconds",
                "Response time, arrival to reply sent, by operation type.",
                None,
                MetricType::Histogram,
            )?;
            for kind in OpKind::ALL {
                let h = &latencies.ops[kind as usize];
                encode_latency(m.encode_family(&[("op", kind.name())])?, h)?;
            }
        }
        let servers = shared.health.report();
        let addrs: Vec<&str> = servers.iter().map(|s| s.label.as_str()).collect();
        {
            let mut m = encoder.encode_descriptor(
                "server_seconds",
                "Time from sending a server its message to parsing its answer, by server.",
                None,
                MetricType::Histogram,
            )?;
            let empty = crate::histograms::Histogram::default();
            for (id, addr) in addrs.iter().enumerate() {
                let h = latencies.servers.get(id).unwrap_or(&empty);
                encode_latency(m.encode_family(&[("server", *addr)])?, h)?;
            }
        }
        let per_server = |encoder: &mut DescriptorEncoder,
                          name: &str,
                          help: &str,
                          kind: MetricType,
                          value: &dyn Fn(usize) -> i64|
         -> Result<(), std::fmt::Error> {
            let mut m = encoder.encode_descriptor(name, help, None, kind)?;
            for (id, addr) in addrs.iter().enumerate() {
                let labels = [("server", *addr)];
                let mut family = m.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => {
                        family.encode_counter::<NoLabelSet, _, u64>(&(value(id) as u64), None)?
                    }
                    _ => family.encode_gauge(&value(id))?,
                }
            }
            Ok(())
        };
        per_server(
            &mut encoder,
            "server_up",
            "1 while the server is in service, 0 while it is ejected.",
            MetricType::Gauge,
            &|id| i64::from(!servers[id].ejected),
        )?;
        per_server(
            &mut encoder,
            "server_failures",
            "Failures in a row now, counted over every worker.",
            MetricType::Gauge,
            &|id| i64::from(servers[id].failures),
        )?;
        per_server(
            &mut encoder,
            "server_ejections",
            "Times the server was ejected.",
            MetricType::Counter,
            &|id| servers[id].ejections as i64,
        )?;
        Ok(())
    }
}

/// One latency histogram, in seconds, as Prometheus expects it.
fn encode_latency(
    mut metric: prometheus_client::encoding::MetricEncoder<'_>,
    h: &crate::histograms::Histogram,
) -> std::fmt::Result {
    metric.encode_histogram::<NoLabelSet>(
        h.sum_us as f64 / 1e6,
        h.count,
        &h.buckets_seconds(),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::metrics::Outcome;

    #[test]
    fn exposition_lists_counters_gauges_and_histograms_with_help_and_type() {
        let config = Config::new(
            "127.0.0.1:0".parse().unwrap(),
            vec!["127.0.0.1:1".parse().unwrap()],
            2,
        );
        let parts = crate::server::Parts::new(&config).unwrap();
        let shared = Arc::clone(&parts.observed);
        shared.counters[1].record(
            OpKind::Get,
            &Outcome {
                keys: 1,
                hits: 1,
                error: false,
            },
            0,
        );
        shared.latencies.lock(0).record_response(OpKind::Get, 180);
        shared.latencies.lock(1).record_server(0, 150);
        let text = encode(&registry(shared));
        assert!(
            text.contains("cachelab_proxy_requests_total{op=\"get\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("cachelab_proxy_get_hits_total 1\n"));
        assert!(text.contains("# TYPE cachelab_proxy_queue_length gauge\n"));
        assert!(text.contains("# TYPE cachelab_proxy_response_seconds histogram\n"));
        assert!(
            text.contains("cachelab_proxy_response_seconds_bucket{le=\"0.0002\",op=\"get\"} 1\n")
                || text.contains(
                    "cachelab_proxy_response_seconds_bucket{op=\"get\",le=\"0.0002\"} 1\n"
                ),
            "{text}"
        );
        assert!(
            text.contains("cachelab_proxy_server_up{server=\"127.0.0.1:1\"} 1\n"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"));
    }
}
