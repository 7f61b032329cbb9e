"""Every read of the results database the report, export, compare and capacity sections
make, each returning typed records (records.py): the methods `db.Store` has for reading,
apart from opening the database and writing runs. Nothing outside this package runs SQL."""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Sequence
from pathlib import Path

from cachelab.analysis.capacity import Verdict
from cachelab.errors import UserError
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen
from cachelab.readers.cpu import SHARES
from cachelab.readers.proxy_stats import Welford
from cachelab.store.records import (
    CapacityRecord,
    CapacityTrial,
    ClientClock,
    ClientOpTotals,
    ClientTiming,
    LateRun,
    LinkRecord,
    MiddlewareOp,
    MiddlewareQueue,
    MiddlewareRate,
    ProcessCpu,
    RunCheck,
    RunStart,
    ServerService,
    StoredCapacity,
    StoredExperiment,
    StoredInterval,
    StoredPoint,
    StoredRun,
    Table,
    TlsSession,
    WindowKey,
)

#: Welford metrics of the middleware (`mw_op` columns `<metric>_count/_mean/_m2`).
WELFORD_METRICS = ("response", "decode", "queue_wait", "worker_service", "server_service",
                   "worker_processing")
#: Per-run tables, exported as they are stored (`raw_table`).
RUN_TABLES = ("client_summary", "client_second", "mw_window", "mw_op", "mw_server",
              "mw_histogram", "cpu_sample", "client_instance", "client_timing",
              "run_percentile", "run_check", "run_tls", "process_cpu")
INTERVAL_FIELDS = ("role", "name", "quantile", "estimate_ms", "low_ms", "high_ms",
                   "confidence", "samples")


class Reads:
    """The reads of an open database (`db.Store` is one)."""

    conn: sqlite3.Connection
    path: Path

    # -- the experiment, its points and runs ----------------------------------------------

    def experiment(self) -> StoredExperiment | None:
        """The directory's experiment (one per directory), or None."""
        row = self.conn.execute("SELECT * FROM experiment ORDER BY id LIMIT 1").fetchone()
        if row is None:
            return None
        return StoredExperiment(row["id"], row["name"], row["description"], row["source"],
                                row["digest"], json.loads(row["settings"]), row["created_at"])

    def require_experiment(self) -> StoredExperiment:
        exp = self.experiment()
        if exp is None:
            raise UserError(f"{self.path}: no experiment stored yet")
        return exp

    def points(self, exp_id: int) -> list[StoredPoint]:
        return [StoredPoint(r["idx"], r["label"], json.loads(r["factors"]),
                            json.loads(r["config"]), r["clients"])
                for r in self.conn.execute("SELECT * FROM point WHERE experiment_id = ? "
                                           "ORDER BY idx", (exp_id,))]

    def runs_by_point(self, exp_id: int) -> dict[int, list[StoredRun]]:
        """The finished runs of every point, by point index, in repetition order."""
        rows = self.conn.execute(
            "SELECT point.idx AS point, run.* FROM run JOIN point ON run.point_id = point.id "
            "WHERE point.experiment_id = ? ORDER BY point.idx, run.repetition", (exp_id,))
        out: dict[int, list[StoredRun]] = {}
        for row in rows:
            out.setdefault(row["point"], []).append(_run(row))
        return out

    def runs(self, run_ids: Sequence[int]) -> list[StoredRun]:
        return [_run(r) for r in self.conn.execute(
            "SELECT point.idx AS point, run.* FROM run JOIN point ON run.point_id = point.id "
            f"WHERE run.id IN ({marks(run_ids)})", tuple(run_ids))]

    def last_host(self) -> HostInfo | None:
        """The host metadata of the run stored last."""
        row = self.conn.execute("SELECT host FROM run ORDER BY id DESC LIMIT 1").fetchone()
        return HostInfo.from_json(json.loads(row["host"])) if row else None

    def timeline(self) -> list[RunStart]:
        """Every run in the order it started."""
        return [RunStart(*r) for r in self.conn.execute(
            "SELECT p.idx, p.label, r.repetition, r.started_at, r.throughput FROM run r "
            "JOIN point p ON p.id = r.point_id ORDER BY r.started_at")]

    def late_runs(self, share: float) -> list[LateRun]:
        """Runs whose load generator's p99 send lag exceeds `share` x their p99 latency."""
        return [LateRun(*r) for r in self.conn.execute(
            "SELECT p.idx, p.label, r.repetition, r.send_lag_p99_ms, r.p99_ms FROM run r "
            "JOIN point p ON p.id = r.point_id WHERE r.send_lag_p99_ms IS NOT NULL "
            "AND r.send_lag_p99_ms > ? * r.p99_ms ORDER BY p.idx, r.repetition", (share,))]

    def capacity_searches(self) -> list[StoredCapacity]:
        """Every capacity run's search (its trials in the order run, and its answer)."""
        out = []
        for a in self.conn.execute(
                "SELECT a.*, p.idx, p.label, r.repetition FROM capacity_answer a "
                "JOIN run r ON r.id = a.run_id JOIN point p ON p.id = r.point_id "
                "ORDER BY p.idx, r.repetition").fetchall():
            trials = tuple(CapacityTrial(
                t["rate"], t["repetition"], t["latency_ms"], t["completed_rate"],
                t["send_lag_p99_ms"], bool(t["fell_behind"]), Verdict(t["verdict"]), t["trial_s"])
                for t in self.conn.execute("SELECT * FROM capacity_trial WHERE run_id = ? "
                                           "ORDER BY seq", (a["run_id"],)))
            out.append(StoredCapacity(a["idx"], a["label"], a["repetition"], CapacityRecord(
                trials, a["capacity"], a["uncertainty"], a["latency_ms"], a["percentile"],
                a["target_ms"], a["reason"], bool(a["limited_by_generator"]))))
        return out

    def point_intervals(self, exp_id: int) -> dict[int, dict[str, dict[str, StoredInterval]]]:
        """Every point's percentile intervals: by point index, role and name (p50, ...)."""
        out: dict[int, dict[str, dict[str, StoredInterval]]] = {}
        for r in self.conn.execute(
                "SELECT p.idx, x.* FROM point_percentile x JOIN point p ON p.id = x.point_id "
                "WHERE p.experiment_id = ? ORDER BY p.idx, x.role, x.quantile", (exp_id,)):
            out.setdefault(r["idx"], {}).setdefault(r["role"], {})[r["name"]] = \
                StoredInterval(*(r[k] for k in INTERVAL_FIELDS))
        return out

    def run_intervals(self, run_id: int) -> dict[str, dict[str, StoredInterval]]:
        """One run's percentile intervals by role and name."""
        out: dict[str, dict[str, StoredInterval]] = {}
        for r in self.conn.execute("SELECT * FROM run_percentile WHERE run_id = ? "
                                   "ORDER BY role, quantile", (run_id,)):
            interval = StoredInterval(*(r[k] for k in INTERVAL_FIELDS))
            out.setdefault(r["role"], {})[r["name"]] = interval
        return out

    def run_checks(self, exp_id: int) -> list[RunCheck]:
        """Every run's self-checks, by point and repetition."""
        return [RunCheck(r["idx"], r["label"], r["repetition"], r["name"], bool(r["passed"]),
                         r["statistic"], r["p_value"], r["reason"])
                for r in self.conn.execute(
                    "SELECT p.idx, p.label, run.repetition, k.* FROM run_check k "
                    "JOIN run ON run.id = k.run_id JOIN point p ON p.id = run.point_id "
                    "WHERE p.experiment_id = ? ORDER BY p.idx, run.repetition, k.name",
                    (exp_id,))]

    def client_timings(self, run_ids: Sequence[int], point: int) -> list[ClientTiming]:
        """The runs' timing figures per role, figure and clock, averaged over instances."""
        return [ClientTiming(point, r["role"], r["figure"], r["clock"], r["p50"], r["p99"],
                             r["n"])
                for r in self.conn.execute(
                    "SELECT role, figure, clock, avg(p50_ms) AS p50, avg(p99_ms) AS p99, "
                    f"count(*) AS n FROM client_timing WHERE run_id IN ({marks(run_ids)}) "
                    "GROUP BY role, figure, clock ORDER BY role, figure", tuple(run_ids))]

    def client_clocks(self, run_ids: Sequence[int], point: int) -> list[ClientClock]:
        """Per role and latency clock: whether every instance had kernel stamps, a fallback
        reason if any, and the busiest load thread's CPU share."""
        return [ClientClock(point, r["role"], r["latency_clock"], bool(r["kernel"]),
                            r["fallback"], r["busiest"])
                for r in self.conn.execute(
                    "SELECT role, latency_clock, min(kernel) AS kernel, max(fallback) AS "
                    "fallback, max(cpu_busiest_share) AS busiest FROM client_instance "
                    f"WHERE run_id IN ({marks(run_ids)}) AND latency_clock IS NOT NULL "
                    "GROUP BY role, latency_clock ORDER BY role", tuple(run_ids))]

    def op_histograms(self, run_ids: Sequence[int]) -> dict[str, list[str]]:
        """Per client operation type (set, get, multiget, total), the load instances'
        histograms of the runs (from their stored reports), to be merged."""
        out: dict[str, list[str]] = {}
        for r in self.conn.execute(
                f"SELECT content FROM artifact WHERE run_id IN ({marks(run_ids)}) "
                "AND name LIKE 'load-%.json' ORDER BY run_id, name", tuple(run_ids)):
            found = json.loads(zlib.decompress(r["content"]))["histograms"]
            for op in loadgen.OPS:
                if op in found:
                    out.setdefault(op, []).append(found[op])
        return out

    def tls_sessions(self, run_ids: Sequence[int]) -> list[TlsSession]:
        """What the runs' encrypted hops negotiated: each distinct (hop, version, cipher,
        source) once, instance 0 standing for all, in hop order."""
        return [TlsSession(r["hop"], 0, r["version"], r["cipher"], r["source"])
                for r in self.conn.execute(
                    "SELECT DISTINCT hop, version, cipher, source FROM run_tls "
                    f"WHERE run_id IN ({marks(run_ids)}) ORDER BY hop, version, cipher",
                    tuple(run_ids))]

    def process_cpu(self, run_ids: Sequence[int]) -> dict[int, list[ProcessCpu]]:
        """Per run, the CPU seconds of its processes (only runs that measured them)."""
        out: dict[int, list[ProcessCpu]] = {}
        for r in self.conn.execute(
                f"SELECT * FROM process_cpu WHERE run_id IN ({marks(run_ids)}) "
                "ORDER BY run_id, role, instance", tuple(run_ids)):
            out.setdefault(r["run_id"], []).append(ProcessCpu(
                r["role"], r["instance"], r["user_s"], r["system_s"], r["requests"]))
        return out

    def run_histograms(self, run_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """Per run, its load instances' `total` histograms (from their stored reports)."""
        out: dict[int, tuple[str, ...]] = {i: () for i in run_ids}
        for r in self.conn.execute(
                f"SELECT run_id, content FROM artifact WHERE run_id IN ({marks(run_ids)}) "
                "AND name LIKE 'load-%.json' ORDER BY run_id, name", tuple(run_ids)):
            doc = json.loads(zlib.decompress(r["content"]))
            out[r["run_id"]] += (doc["histograms"]["total"],)
        return out

    def measure_histograms(self, run_ids: Sequence[int]) -> list[str]:
        """The measuring clients' `total` histograms of the runs."""
        return [json.loads(zlib.decompress(r["content"]))["histograms"]["total"]
                for r in self.conn.execute(
                    f"SELECT content FROM artifact WHERE run_id IN ({marks(run_ids)}) "
                    "AND name LIKE 'measure-%.json' ORDER BY run_id, name", tuple(run_ids))]

    # -- what was measured in runs -------------------------------------------------------

    def window_keys(self, run_id: int, low: float, high: float) -> list[WindowKey]:
        """The middleware windows of a run whose midpoint lies in [low, high] (epoch s)."""
        return [(run_id, w["middleware"], w["window"]) for w in self.conn.execute(
            'SELECT middleware, window FROM mw_window WHERE run_id = ? '
            'AND (start + "end") / 2 BETWEEN ? AND ?', (run_id, low, high))]

    def middleware_ops(self, keys: Sequence[WindowKey]) -> list[MiddlewareOp]:
        clause, args = windows(keys)
        return [MiddlewareOp(o["op"], o["count"], {
            m: Welford(o[f"{m}_count"], o[f"{m}_mean"], o[f"{m}_m2"])
            for m in WELFORD_METRICS}, o["rt_hdr"])
            for o in self.conn.execute(f"SELECT * FROM mw_op WHERE {clause}", args)]

    def middleware_rates(self, keys: Sequence[WindowKey]) -> list[MiddlewareRate]:
        """Per run and middleware, over the windows: arrivals, seconds, completed."""
        clause, args = windows(keys)
        return [MiddlewareRate(*w) for w in self.conn.execute(
            "SELECT run_id, middleware, sum(arrivals) AS arrivals, sum(duration_s) AS secs, "
            "sum(throughput * duration_s) AS done FROM mw_window "
            f"WHERE {clause} GROUP BY run_id, middleware", args)]

    def middleware_queues(self, keys: Sequence[WindowKey]) -> list[MiddlewareQueue]:
        clause, args = windows(keys)
        return [MiddlewareQueue(w["run_id"], w["middleware"], Welford(
            w["queue_len_count"], w["queue_len_mean"], w["queue_len_m2"]))
            for w in self.conn.execute(
                "SELECT run_id, middleware, queue_len_count, queue_len_mean, queue_len_m2 "
                f"FROM mw_window WHERE {clause}", args)]

    def server_services(self, keys: Sequence[WindowKey]) -> list[ServerService]:
        clause, args = windows(keys)
        return [ServerService(r["server"], Welford(r["count"], r["mean"], r["m2"]))
                for r in self.conn.execute(
                    f"SELECT server, count, mean, m2 FROM mw_server WHERE {clause}", args)]

    def client_ops(self, run_ids: Sequence[int]) -> list[ClientOpTotals]:
        """Per run and client operation type (not `total`), over the instances."""
        return [ClientOpTotals(*r) for r in self.conn.execute(
            "SELECT run_id, op, sum(ops) AS ops, sum(ops_per_sec) AS rate, "
            f"sum(avg_ms * ops) AS weighted FROM client_summary WHERE run_id IN "
            f"({marks(run_ids)}) AND op != 'total' GROUP BY run_id, op", tuple(run_ids))]

    def cpu_means(self, run_ids: Sequence[int], low: float,
                  high: float) -> dict[str, float] | None:
        """The host's mean CPU shares (percent) over the samples whose interval's middle
        lies in [low, high] seconds of their run; None without samples."""
        row = self.conn.execute(
            f"SELECT count(*) AS n, {', '.join(f'avg({s}) AS {s}' for s in SHARES)} "
            f"FROM cpu_sample WHERE cpu = 'all' AND run_id IN ({marks(run_ids)}) "
            f"AND t - 0.5 BETWEEN ? AND ?", (*run_ids, low, high)).fetchone()
        return {s: row[s] for s in SHARES} if row["n"] else None

    def host_cpu_means(self, run_ids: Sequence[int], low: float,
                       high: float) -> dict[str, tuple[float, float]]:
        """Per emulated host, mean (usr, sys) over the samples in [low, high]."""
        return {r["host"]: (r["usr"], r["sys"]) for r in self.conn.execute(
            f"SELECT host, avg(usr) AS usr, avg(sys) AS sys FROM host_cpu "
            f"WHERE run_id IN ({marks(run_ids)}) AND t - 0.5 BETWEEN ? AND ? "
            "GROUP BY host ORDER BY host", (*run_ids, low, high))}

    def emulator_cpu_mean(self, run_ids: Sequence[int], low: float,
                          high: float) -> tuple[float, float] | None:
        """The delay line's mean (usr, sys) over the samples in [low, high], its processes
        added up per sample; None without samples (no delay, or not netns)."""
        row = self.conn.execute(
            "SELECT avg(usr) AS usr, avg(sys) AS sys, count(*) AS n FROM ("
            "SELECT sum(usr) AS usr, sum(sys) AS sys FROM emulator_cpu "
            f"WHERE run_id IN ({marks(run_ids)}) AND t - 0.5 BETWEEN ? AND ? "
            "GROUP BY run_id, t)", (*run_ids, low, high)).fetchone()
        return (row["usr"], row["sys"]) if row["n"] else None

    def links(self, run_ids: Sequence[int]) -> list[LinkRecord]:
        return [LinkRecord(r["src"], r["dst"], r["rtt_p50_us"], r["rtt_p99_us"],
                           r["rtt_min_us"], r["expected_rtt_us"], r["mbit_forward"],
                           r["mbit_reverse"])
                for r in self.conn.execute(
                    f"SELECT * FROM link WHERE run_id IN ({marks(run_ids)}) "
                    "ORDER BY run_id, src, dst", tuple(run_ids))]

    def artifact(self, run_id: int, name: str) -> bytes:
        row = self.conn.execute("SELECT content FROM artifact WHERE run_id = ? AND name = ?",
                                (run_id, name)).fetchone()
        if row is None:
            raise UserError(f"run {run_id} has no stored file {name!r}")
        return zlib.decompress(row["content"])

    def load_reports(self, run_ids: Sequence[int]) -> list[bytes]:
        """The load generators' JSON reports (`load-<i>.json`) of the runs."""
        return [zlib.decompress(r["content"]) for r in self.conn.execute(
            f"SELECT content FROM artifact WHERE run_id IN ({marks(run_ids)}) AND "
            "name LIKE 'load-%.json'", tuple(run_ids))]

    # -- raw tables for export -------------------------------------------------------------

    def raw_table(self, exp_id: int, name: str) -> Table:
        """A per-run table (or `run` itself) as stored, each row led by its point's index
        (and, for per-run tables, the run's repetition), in the order written."""
        if name == "run":
            cur = self.conn.execute(
                "SELECT point.idx AS point, run.* FROM run JOIN point ON point.id = "
                "run.point_id WHERE point.experiment_id = ? ORDER BY run.id", (exp_id,))
        elif name in RUN_TABLES:
            cur = self.conn.execute(
                f"SELECT point.idx AS point, run.repetition, t.* FROM {name} t "
                "JOIN run ON run.id = t.run_id JOIN point ON point.id = run.point_id "
                "WHERE point.experiment_id = ? ORDER BY t.rowid", (exp_id,))
        else:
            raise ValueError(f"no raw table {name!r}")
        return Table(name, tuple(d[0] for d in cur.description),
                     [tuple(r) for r in cur.fetchall()])


def _run(row: sqlite3.Row) -> StoredRun:
    return StoredRun(
        row["id"], row["point"], row["repetition"], row["started_at"], row["ended_at"],
        row["throughput"], row["response_ms"], row["p50_ms"], row["p90_ms"], row["p99_ms"],
        row["p999_ms"], row["max_ms"], row["hits"], row["misses"], row["errors"],
        row["cv_within"], HostInfo.from_json(json.loads(row["host"])),
        None if row["fell_behind"] is None else bool(row["fell_behind"]),
        row["send_lag_p99_ms"])


def windows(keys: Sequence[WindowKey]) -> tuple[str, list[int]]:
    """A WHERE clause selecting the given windows, and its arguments."""
    clause = " OR ".join(["(run_id = ? AND middleware = ? AND window = ?)"] * len(keys))
    return clause, [v for k in keys for v in k]


def marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))
