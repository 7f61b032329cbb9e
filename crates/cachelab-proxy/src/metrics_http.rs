//! `--metrics-addr`: the middleware's counters in Prometheus' text format over HTTP, for
//! scrapers (twemproxy users know its stats port; this is the same idea, in the format
//! monitoring systems read). One request per connection; any path answers.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

use crate::counters::Counters;
use crate::server::Observed;

const REQUEST_LIMIT: usize = 8 * 1024;
const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Serves scrapes until the task is dropped.
pub async fn serve(listener: TcpListener, shared: Arc<Observed>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            if let Err(e) = tokio::time::timeout(IO_TIMEOUT, answer(stream, &shared)).await {
                debug!(error = %e, "metrics scrape timed out");
            }
        });
    }
}

async fn answer(mut stream: TcpStream, shared: &Observed) -> std::io::Result<()> {
    let mut request = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") && request.len() < REQUEST_LIMIT {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        request.extend_from_slice(&chunk[..n]);
    }
    let body = render(shared);
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The exposition text (pure, so it is tested without sockets).
pub fn render(shared: &Observed) -> String {
    let t = Counters::sum(&shared.counters);
    let net = &shared.net;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
    let mut out = String::new();
    let mut metric = |name: &str, kind: &str, help: &str, samples: &[(&str, u64)]| {
        let _ = writeln!(out, "# HELP cachelab_proxy_{name} {help}");
        let _ = writeln!(out, "# TYPE cachelab_proxy_{name} {kind}");
        for (labels, value) in samples {
            let _ = writeln!(out, "cachelab_proxy_{name}{labels} {value}");
        }
    };
    metric(
        "requests_total",
        "counter",
        "Requests completed by the workers, by operation type.",
        &[
            ("{op=\"get\"}", t.get_requests),
            ("{op=\"multiget\"}", t.multiget_requests),
            ("{op=\"set\"}", t.set_requests),
            ("{op=\"other\"}", t.other_requests),
        ],
    );
    metric(
        "get_keys_total",
        "counter",
        "Keys asked for by get and multi-get requests.",
        &[("", t.get_keys)],
    );
    metric(
        "get_hits_total",
        "counter",
        "Keys found.",
        &[("", t.get_hits)],
    );
    metric(
        "get_misses_total",
        "counter",
        "Keys not found.",
        &[("", t.get_misses)],
    );
    metric(
        "error_replies_total",
        "counter",
        "Requests answered with an error line.",
        &[("", t.error_replies)],
    );
    metric(
        "failovers_total",
        "counter",
        "Reads re-sent to another server.",
        &[("", t.failovers)],
    );
    metric(
        "received_total",
        "counter",
        "Requests decoded by the net layer.",
        &[("", load(&net.arrivals))],
    );
    metric(
        "bad_requests_total",
        "counter",
        "Requests rejected by the net layer.",
        &[("", load(&net.bad_requests))],
    );
    metric(
        "connections_total",
        "counter",
        "Client connections accepted.",
        &[("", load(&net.total_connections))],
    );
    metric(
        "connections",
        "gauge",
        "Client connections open.",
        &[("", load(&net.curr_connections))],
    );
    metric(
        "queue_length",
        "gauge",
        "Requests waiting in the FCFS queue.",
        &[("", shared.queue.len() as u64)],
    );
    metric(
        "workers",
        "gauge",
        "Worker slots.",
        &[("", shared.workers as u64)],
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::metrics::{OpKind, Outcome};

    #[test]
    fn exposition_lists_every_counter_with_help_and_type() {
        let config = Config::new(
            "127.0.0.1:0".parse().unwrap(),
            vec!["127.0.0.1:1".parse().unwrap()],
            2,
        );
        let parts = crate::server::Parts::new(&config).unwrap();
        let shared = &parts.observed;
        shared.counters[1].record(
            OpKind::Get,
            &Outcome {
                keys: 1,
                hits: 1,
                error: false,
            },
            0,
        );
        let text = render(shared);
        assert!(
            text.contains("cachelab_proxy_requests_total{op=\"get\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("cachelab_proxy_get_hits_total 1\n"));
        assert!(text.contains("# TYPE cachelab_proxy_queue_length gauge\n"));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<u64>().is_ok(), "{line}");
        }
    }
}
