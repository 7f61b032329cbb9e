//! The stats file's typed lines: what the writer serialises and the Python reader
//! reads, held to `schema/stats-file.schema.json` and its golden file.

use std::collections::BTreeMap;

use cachelab_stats::Welford;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::metrics::{OpKind, OpStats, WorkerStats};
use crate::routing::plan::Mode;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// One line of the stats file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Start(StartLine),
    Window(WindowLine),
    Summary(SummaryLine),
}

/// The first line: what ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartLine {
    pub schema: u32,
    pub version: String,
    pub pid: u32,
    /// Unix seconds.
    pub start: f64,
    /// The first listener's address.
    pub listen: String,
    /// Workers per event loop.
    pub workers: usize,
    /// Event loops (`--loops`), each with `workers` workers and its own queue; worker
    /// `i` of the window lines belongs to loop `i / workers`.
    pub loops: usize,
    /// Every distinct server, in the order of `server_service_us_by_server`.
    pub servers: Vec<String>,
    pub sharded: bool,
    pub window_s: f64,
    pub bucket_width_us: u64,
    /// Each listener with its pool as configured at start.
    pub pools: Vec<PoolLine>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolLine {
    pub name: String,
    pub listen: String,
    /// "replicate" or "shard".
    pub mode: String,
    /// Servers holding each key: all of them in a replicate pool.
    pub replicas: usize,
    pub hash: String,
    pub distribution: String,
    pub servers: Vec<String>,
}

/// Count, mean and M2 of Welford's algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WelfordLine {
    pub count: u64,
    pub mean: f64,
    pub m2: f64,
}

impl From<&Welford> for WelfordLine {
    fn from(w: &Welford) -> Self {
        WelfordLine {
            count: w.count,
            mean: w.mean,
            m2: w.m2,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Percentiles {
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

/// One operation type's statistics (times in microseconds).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpLine {
    pub count: u64,
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub keys: WelfordLine,
    pub response_us: WelfordLine,
    pub decode_us: WelfordLine,
    pub queue_wait_us: WelfordLine,
    pub worker_service_us: WelfordLine,
    pub server_service_us: WelfordLine,
    pub worker_processing_us: WelfordLine,
    pub server_service_us_by_server: Vec<WelfordLine>,
    pub rt_hist_100us: Vec<u64>,
    pub rt_overflow: u64,
    pub rt_percentiles_us: Percentiles,
    /// The HDR histogram, V2-deflate encoded, base64.
    pub rt_hdr: String,
}

/// A statistics window of one worker (`scope: "worker"`) or of all (`"total"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowLine {
    pub window: u64,
    /// "worker" or "total".
    pub scope: String,
    pub worker: Option<usize>,
    pub start: f64,
    pub end: f64,
    pub duration_s: f64,
    pub queue_len: WelfordLine,
    pub failovers: u64,
    pub ops: BTreeMap<String, OpLine>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub total: Option<TotalFields>,
}

/// Fields only the merged ("total") line of a window has.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TotalFields {
    pub arrivals: u64,
    pub arrival_rate: f64,
    pub throughput: f64,
    pub queue_len_now: usize,
    pub connections: u64,
}

/// The last line, on a clean shutdown: the whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryLine {
    pub windows: u64,
    pub end: f64,
    pub duration_s: f64,
    pub arrivals: u64,
    pub throughput: f64,
    pub bad_requests: u64,
    pub total_connections: u64,
    pub queue_len: WelfordLine,
    pub failovers: u64,
    pub ops: BTreeMap<String, OpLine>,
}

/// The start line for `config` (pure: the caller gives the pid and the time).
pub fn start_line(config: &Config, pid: u32, start: f64) -> StartLine {
    StartLine {
        schema: SCHEMA_VERSION,
        version: env!("CARGO_PKG_VERSION").into(),
        pid,
        start,
        listen: config.listen.to_string(),
        workers: config.workers,
        loops: config.loops,
        servers: config.servers.iter().map(ToString::to_string).collect(),
        sharded: config.sharded,
        window_s: config.stats_window.as_secs_f64(),
        bucket_width_us: crate::metrics::BUCKET_WIDTH_US,
        pools: config
            .listeners
            .iter()
            .map(|l| PoolLine {
                name: l.pool.name.clone(),
                listen: l.listen.to_string(),
                mode: match l.pool.mode {
                    Mode::Replicate { .. } => "replicate".into(),
                    Mode::Shard { .. } => "shard".into(),
                },
                replicas: match l.pool.mode {
                    Mode::Replicate { .. } => l.pool.servers.len(),
                    Mode::Shard { replicas } => replicas,
                },
                hash: l.pool.hash.name().into(),
                distribution: l.pool.distribution.name().into(),
                servers: l.pool.servers.iter().map(|s| s.addr.to_string()).collect(),
            })
            .collect(),
    }
}

/// A window line (pure).
pub fn window_line(
    window: u64,
    worker: Option<usize>,
    stats: &WorkerStats,
    start: f64,
    end: f64,
    total: Option<TotalFields>,
) -> WindowLine {
    WindowLine {
        window,
        scope: if worker.is_some() { "worker" } else { "total" }.into(),
        worker,
        start,
        end,
        duration_s: end - start,
        queue_len: (&stats.queue_len).into(),
        failovers: stats.failovers,
        ops: ops_lines(stats),
        total,
    }
}

pub(super) fn ops_lines(stats: &WorkerStats) -> BTreeMap<String, OpLine> {
    OpKind::ALL
        .into_iter()
        .filter(|kind| stats.op(*kind).count > 0)
        .map(|kind| (kind.name().to_string(), op_line(stats.op(kind))))
        .collect()
}

fn op_line(op: &OpStats) -> OpLine {
    let p = op.rt_hdr.percentiles();
    OpLine {
        count: op.count,
        hits: op.hits,
        misses: op.misses,
        errors: op.errors,
        keys: (&op.keys).into(),
        response_us: (&op.response).into(),
        decode_us: (&op.decode).into(),
        queue_wait_us: (&op.queue_wait).into(),
        worker_service_us: (&op.worker_service).into(),
        server_service_us: (&op.server_service).into(),
        worker_processing_us: (&op.worker_processing).into(),
        server_service_us_by_server: op.per_server.iter().map(WelfordLine::from).collect(),
        rt_hist_100us: op.rt_buckets.trimmed().to_vec(),
        rt_overflow: op.rt_buckets.overflow,
        rt_percentiles_us: Percentiles {
            p50: p.p50,
            p90: p.p90,
            p99: p.p99,
            p999: p.p999,
            max: p.max,
        },
        rt_hdr: op.rt_hdr.encode_base64().unwrap_or_default(),
    }
}

#[cfg(test)]
mod golden_tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::metrics::{OpKind, Outcome, Timestamps};

    const GOLDEN: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/schema/stats-file.golden.jsonl"
    );

    /// A short run with fixed times and values: two workers over two servers.
    fn fixture() -> Vec<Line> {
        let config = Config::new(
            "127.0.0.1:11212".parse().unwrap(),
            vec![
                "127.0.0.1:11211".parse().unwrap(),
                "127.0.0.1:11311".parse().unwrap(),
            ],
            2,
        );
        let t0 = Instant::now();
        let at = |us: u64| t0 + Duration::from_micros(us);
        let stamps = |offsets: [u64; 6]| Timestamps {
            arrival: at(offsets[0]),
            enqueued: at(offsets[1]),
            dequeued: at(offsets[2]),
            first_sent: Some(at(offsets[3])),
            last_answer: Some(at(offsets[4])),
            reply_sent: at(offsets[5]),
        };
        let mut workers = [WorkerStats::new(2, t0), WorkerStats::new(2, t0)];
        let hit = Outcome {
            keys: 1,
            hits: 1,
            error: false,
        };
        let ts = stamps([0, 4, 10, 12, 160, 170]);
        workers[0].record(OpKind::Get, &ts, hit);
        workers[0].record_server(OpKind::Get, 0, at(12), at(160));
        workers[0].queue_len.add(0.0);
        let ts = stamps([0, 5, 30, 31, 231, 250]);
        workers[0].record(OpKind::Get, &ts, Outcome { hits: 0, ..hit });
        workers[0].record_server(OpKind::Get, 1, at(31), at(231));
        workers[0].queue_len.add(1.0);
        let ts = stamps([0, 6, 8, 9, 1209, 1220]);
        workers[1].record(OpKind::Set, &ts, hit);
        workers[1].record_server(OpKind::Set, 0, at(9), at(1100));
        workers[1].record_server(OpKind::Set, 1, at(9), at(1209));
        workers[1].queue_len.add(0.0);
        workers[1].failovers = 1;
        let (start, end) = (1_700_000_000.0, 1_700_000_005.0);
        let mut lines = vec![Line::Start(start_line(&config, 4242, start))];
        let mut merged = WorkerStats::new(2, t0);
        for (i, w) in workers.iter().enumerate() {
            lines.push(Line::Window(window_line(0, Some(i), w, start, end, None)));
            merged.merge(w);
        }
        let total = TotalFields {
            arrivals: 3,
            arrival_rate: 0.6,
            throughput: 0.6,
            queue_len_now: 0,
            connections: 2,
        };
        lines.push(Line::Window(window_line(
            0,
            None,
            &merged,
            start,
            end,
            Some(total),
        )));
        lines.push(Line::Summary(SummaryLine {
            windows: 1,
            end: end + 0.5,
            duration_s: 5.5,
            arrivals: 3,
            throughput: 3.0 / 5.5,
            bad_requests: 0,
            total_connections: 2,
            queue_len: (&merged.queue_len).into(),
            failovers: merged.failovers,
            ops: ops_lines(&merged),
        }));
        lines
    }

    fn encode(lines: &[Line]) -> String {
        lines
            .iter()
            .map(|l| serde_json::to_string(l).unwrap() + "\n")
            .collect()
    }

    #[test]
    fn the_writer_produces_the_golden_file() {
        let text = encode(&fixture());
        if std::env::var_os("UPDATE_GOLDEN").is_some() {
            std::fs::write(GOLDEN, &text).unwrap();
        }
        let golden = std::fs::read_to_string(GOLDEN).expect("the golden stats file");
        assert_eq!(
            text, golden,
            "the stats file changed: if on purpose, rerun with UPDATE_GOLDEN=1, update \
             schema/stats-file.schema.json and docs/stats-file.md, and check the Python reader"
        );
    }

    #[test]
    fn every_golden_line_reads_back_into_the_same_typed_record() {
        let golden = std::fs::read_to_string(GOLDEN).unwrap();
        let read: Vec<Line> = golden
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(read, fixture());
    }

    #[test]
    fn an_unknown_field_is_refused_by_the_typed_reader() {
        let line = r#"{"type":"summary","windows":0,"end":0,"duration_s":0,"arrivals":0,
            "throughput":0,"bad_requests":0,"total_connections":0,
            "queue_len":{"count":0,"mean":0,"m2":0},"failovers":0,"ops":{},"extra":1}"#;
        assert!(serde_json::from_str::<Line>(line).is_err());
    }
}
