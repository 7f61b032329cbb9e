"""The results database (`DIR/results.db`, SQLite): opening it, writing runs, and every
read the report, export, compare and capacity sections make, each returning typed records
(records.py). Nothing outside this package runs SQL.

Before anything reads or writes a database, `check` makes sure this cachelab fully
understands it (intact, its migrations known by name, its columns as they made them); a
database from a newer cachelab, a corrupt one or one edited by hand is refused in one line
rather than guessed at. `cachelab report`, `export` and `compare` open it read-only.

Every run is written in one transaction after it finished (`save_run`), so a crash or
Ctrl-C loses at most the run in progress. WAL mode lets `cachelab report` read while a run
is being written. Inserts name their columns, so a record's field order is free.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from types import TracebackType

from cachelab.analysis.capacity import Verdict
from cachelab.errors import UserError
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen, proxy_stats, selfcheck
from cachelab.readers.cpu import SHARES
from cachelab.readers.proxy_stats import Welford
from cachelab.spec.experiment import Experiment, config_dict
from cachelab.store import check
from cachelab.store.records import (
    CapacityRecord,
    CapacityTrial,
    ClientClock,
    ClientOpTotals,
    ClientPlacement,
    ClientTiming,
    LateRun,
    LinkRecord,
    MiddlewareOp,
    MiddlewareQueue,
    MiddlewareRate,
    ProcessCpu,
    RunCheck,
    RunRecord,
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
from cachelab.store.schema import MIGRATIONS, migrate

FILENAME = "results.db"
#: Welford metrics of the middleware (`mw_op` columns `<metric>_count/_mean/_m2`).
WELFORD_METRICS = ("response", "decode", "queue_wait", "worker_service", "server_service",
                   "worker_processing")
_LATENCY = ("avg", "stddev", "p50", "p90", "p99", "p999", "max")
#: Per-run tables, exported as they are stored (`raw_table`).
RUN_TABLES = ("client_summary", "client_second", "mw_window", "mw_op", "mw_server",
              "mw_histogram", "cpu_sample", "client_instance", "client_timing",
              "run_percentile", "run_check", "run_tls", "process_cpu")
_INTERVAL = ("role", "name", "quantile", "estimate_ms", "low_ms", "high_ms", "confidence",
             "samples")


class Store:
    """The results database. `Store(path)` may write (the runner); `open_existing(DIR)`
    reads (the report, export, compare)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        try:
            self.conn = _connect(self.path, read_only)
        except sqlite3.DatabaseError as exc:
            raise UserError(check.describe(self.path, exc)) from None
        try:
            # Everything checked before the first write.
            self.version = check.check(self.conn, self.path, MIGRATIONS)
            if not read_only:
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.version = migrate(self.conn, path=self.path)
            self.conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise UserError(check.describe(self.path, exc)) from None
        except BaseException:
            self.conn.close()
            raise

    @classmethod
    def open_existing(cls, directory: Path) -> Store:
        """DIR/results.db, read-only; one from an older cachelab is migrated first (so it
        is opened for writing once)."""
        path = Path(directory) / FILENAME
        if not path.is_file():
            raise UserError(f"{directory}: no {FILENAME} here (run `cachelab run` first)")
        store = cls(path, read_only=True)
        if store.version < len(MIGRATIONS):
            store.close()
            store = cls(path)
        return store

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
        if isinstance(exc, sqlite3.DatabaseError):
            # A page that quick_check passed may still fail to read (or a write may find
            # the disk full): one line naming the file, never a traceback.
            raise UserError(check.describe(self.path, exc)) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # -- writes ------------------------------------------------------------------------

    def create_experiment(self, exp: Experiment, order_seed: int) -> int:
        """Stores the experiment and its points; `order_seed` is the seed its run order
        uses (the file's, or one the runner drew)."""
        settings = {k: getattr(exp, k) for k in (
            "topology", "repetitions", "run_time_s", "warmup_s", "cooldown_s",
            "stats_window_s", "qos_target_ms", "report_x", "max_repetitions",
            "max_replacements")}
        settings["cv_threshold"] = exp.validation.cv_threshold
        settings["stop_p99_width_ms"] = exp.validation.stop_when.p99_width_ms
        settings["order"] = exp.order
        settings["order_seed"] = order_seed
        settings["factors"] = list(exp.factor_paths)
        with self.transaction() as c:
            exp_id = _insert(c, "experiment", {
                "name": exp.name, "description": exp.description, "source": exp.source,
                "digest": exp.digest, "settings": _json(settings), "created_at": time.time()})
            _insert_many(c, "point", [
                {"experiment_id": exp_id, "idx": p.index, "label": p.label,
                 "factors": _json(dict(p.factors)), "config": _json(config_dict(p.config)),
                 "clients": p.config.total_clients} for p in exp.points])
        return exp_id

    def save_run(self, exp_id: int, record: RunRecord) -> int:
        """Writes one finished run and everything measured in it, in one transaction."""
        s = record.summary
        with self.transaction() as c:
            (point_id,) = c.execute("SELECT id FROM point WHERE experiment_id = ? AND idx = ?",
                                    (exp_id, record.point)).fetchone()
            run_id = _insert(c, "run", {
                "point_id": point_id, "repetition": record.repetition,
                "started_at": record.started_at, "ended_at": record.ended_at,
                "throughput": s.throughput, "response_ms": s.response_ms, "p50_ms": s.p50_ms,
                "p90_ms": s.p90_ms, "p99_ms": s.p99_ms, "p999_ms": s.p999_ms,
                "max_ms": s.max_ms, "hits": s.hits, "misses": s.misses, "errors": s.errors,
                "cv_within": s.cv_within, "host": _json(record.host.to_json()),
                "fell_behind": s.fell_behind, "send_lag_p99_ms": s.send_lag_p99_ms,
                "start_at_unix_ms": record.start_at_unix_ms})
            for i, report in enumerate(record.loads):
                _save_load(c, run_id, i, report)
            placed = {(pl.role, pl.instance): pl for pl in record.placements}
            for role, reports in (("load", record.loads), ("measure", record.measures)):
                for i, report in enumerate(reports):
                    _save_client(c, run_id, role, i, report, placed.get((role, i)))
            _insert_many(c, "run_percentile", [
                {"run_id": run_id, **{k: getattr(x, k) for k in _INTERVAL}}
                for x in record.intervals])
            _insert_many(c, "run_check", [
                {"run_id": run_id, "name": x.name, "passed": x.passed,
                 "statistic": _finite(x.statistic), "p_value": _finite(x.p_value),
                 "reason": x.reason} for x in record.checks])
            _insert_many(c, "run_tls", [{"run_id": run_id, **asdict(x)} for x in record.tls])
            _insert_many(c, "process_cpu", [{"run_id": run_id, **asdict(x)}
                                            for x in record.process_cpu])
            for i, stats in enumerate(record.middlewares):
                _save_middleware(c, run_id, i, stats)
            _insert_many(c, "cpu_sample", [
                {"run_id": run_id, "t": x.t, "cpu": x.cpu, **{k: getattr(x, k) for k in SHARES}}
                for x in record.cpu])
            for table, rows in (("run_host", record.hosts), ("host_cpu", record.host_cpu),
                                ("link", record.links), ("emulator_cpu", record.emulator_cpu)):
                _insert_many(c, table, [{"run_id": run_id, **asdict(x)} for x in rows])
            if record.capacity is not None:
                k = record.capacity
                _insert_many(c, "capacity_trial", [
                    {"run_id": run_id, "seq": seq, **asdict(t)}
                    for seq, t in enumerate(k.trials, start=1)])
                _insert(c, "capacity_answer", {
                    "run_id": run_id, "capacity": k.capacity, "uncertainty": k.uncertainty,
                    "latency_ms": k.latency_ms, "percentile": k.percentile,
                    "target_ms": k.target_ms, "reason": k.reason,
                    "limited_by_generator": k.limited_by_generator})
            _insert_many(c, "artifact", [
                {"run_id": run_id, "name": name, "content": zlib.compress(data)}
                for name, data in sorted(record.artifacts.items())])
        return run_id

    def save_point_intervals(self, exp_id: int, point: int,
                             intervals: Sequence[selfcheck.Interval], runs: int) -> None:
        """Replaces a point's percentile intervals (over the merged histograms of the `runs`
        runs its aggregates use), as they stand after its latest run."""
        with self.transaction() as c:
            (point_id,) = c.execute("SELECT id FROM point WHERE experiment_id = ? AND idx = ?",
                                    (exp_id, point)).fetchone()
            c.execute("DELETE FROM point_percentile WHERE point_id = ?", (point_id,))
            _insert_many(c, "point_percentile", [
                {"point_id": point_id, **{k: getattr(x, k) for k in _INTERVAL}, "runs": runs}
                for x in intervals])

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
            f"WHERE run.id IN ({_marks(run_ids)})", tuple(run_ids))]

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
                StoredInterval(*(r[k] for k in _INTERVAL))
        return out

    def run_intervals(self, run_id: int) -> dict[str, dict[str, StoredInterval]]:
        """One run's percentile intervals by role and name."""
        out: dict[str, dict[str, StoredInterval]] = {}
        for r in self.conn.execute("SELECT * FROM run_percentile WHERE run_id = ? "
                                   "ORDER BY role, quantile", (run_id,)):
            out.setdefault(r["role"], {})[r["name"]] = StoredInterval(*(r[k] for k in _INTERVAL))
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
                    f"count(*) AS n FROM client_timing WHERE run_id IN ({_marks(run_ids)}) "
                    "GROUP BY role, figure, clock ORDER BY role, figure", tuple(run_ids))]

    def client_clocks(self, run_ids: Sequence[int], point: int) -> list[ClientClock]:
        """Per role and latency clock: whether every instance had kernel stamps, a fallback
        reason if any, and the busiest load thread's CPU share."""
        return [ClientClock(point, r["role"], r["latency_clock"], bool(r["kernel"]),
                            r["fallback"], r["busiest"])
                for r in self.conn.execute(
                    "SELECT role, latency_clock, min(kernel) AS kernel, max(fallback) AS "
                    "fallback, max(cpu_busiest_share) AS busiest FROM client_instance "
                    f"WHERE run_id IN ({_marks(run_ids)}) AND latency_clock IS NOT NULL "
                    "GROUP BY role, latency_clock ORDER BY role", tuple(run_ids))]

    def op_histograms(self, run_ids: Sequence[int]) -> dict[str, list[str]]:
        """Per client operation type (set, get, multiget, total), the load instances'
        histograms of the runs (from their stored reports), to be merged."""
        out: dict[str, list[str]] = {}
        for r in self.conn.execute(
                f"SELECT content FROM artifact WHERE run_id IN ({_marks(run_ids)}) "
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
                    f"WHERE run_id IN ({_marks(run_ids)}) ORDER BY hop, version, cipher",
                    tuple(run_ids))]

    def process_cpu(self, run_ids: Sequence[int]) -> dict[int, list[ProcessCpu]]:
        """Per run, the CPU seconds of its processes (only runs that measured them)."""
        out: dict[int, list[ProcessCpu]] = {}
        for r in self.conn.execute(
                f"SELECT * FROM process_cpu WHERE run_id IN ({_marks(run_ids)}) "
                "ORDER BY run_id, role, instance", tuple(run_ids)):
            out.setdefault(r["run_id"], []).append(ProcessCpu(
                r["role"], r["instance"], r["user_s"], r["system_s"], r["requests"]))
        return out

    def run_histograms(self, run_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """Per run, its load instances' `total` histograms (from their stored reports)."""
        out: dict[int, tuple[str, ...]] = {i: () for i in run_ids}
        for r in self.conn.execute(
                f"SELECT run_id, content FROM artifact WHERE run_id IN ({_marks(run_ids)}) "
                "AND name LIKE 'load-%.json' ORDER BY run_id, name", tuple(run_ids)):
            doc = json.loads(zlib.decompress(r["content"]))
            out[r["run_id"]] += (doc["histograms"]["total"],)
        return out

    def measure_histograms(self, run_ids: Sequence[int]) -> list[str]:
        """The measuring clients' `total` histograms of the runs."""
        return [json.loads(zlib.decompress(r["content"]))["histograms"]["total"]
                for r in self.conn.execute(
                    f"SELECT content FROM artifact WHERE run_id IN ({_marks(run_ids)}) "
                    "AND name LIKE 'measure-%.json' ORDER BY run_id, name", tuple(run_ids))]

    # -- what was measured in runs -------------------------------------------------------

    def window_keys(self, run_id: int, low: float, high: float) -> list[WindowKey]:
        """The middleware windows of a run whose midpoint lies in [low, high] (epoch s)."""
        return [(run_id, w["middleware"], w["window"]) for w in self.conn.execute(
            'SELECT middleware, window FROM mw_window WHERE run_id = ? '
            'AND (start + "end") / 2 BETWEEN ? AND ?', (run_id, low, high))]

    def middleware_ops(self, keys: Sequence[WindowKey]) -> list[MiddlewareOp]:
        clause, args = _windows(keys)
        return [MiddlewareOp(o["op"], o["count"], {
            m: Welford(o[f"{m}_count"], o[f"{m}_mean"], o[f"{m}_m2"])
            for m in WELFORD_METRICS}, o["rt_hdr"])
            for o in self.conn.execute(f"SELECT * FROM mw_op WHERE {clause}", args)]

    def middleware_rates(self, keys: Sequence[WindowKey]) -> list[MiddlewareRate]:
        """Per run and middleware, over the windows: arrivals, seconds, completed."""
        clause, args = _windows(keys)
        return [MiddlewareRate(*w) for w in self.conn.execute(
            "SELECT run_id, middleware, sum(arrivals) AS arrivals, sum(duration_s) AS secs, "
            "sum(throughput * duration_s) AS done FROM mw_window "
            f"WHERE {clause} GROUP BY run_id, middleware", args)]

    def middleware_queues(self, keys: Sequence[WindowKey]) -> list[MiddlewareQueue]:
        clause, args = _windows(keys)
        return [MiddlewareQueue(w["run_id"], w["middleware"], Welford(
            w["queue_len_count"], w["queue_len_mean"], w["queue_len_m2"]))
            for w in self.conn.execute(
                "SELECT run_id, middleware, queue_len_count, queue_len_mean, queue_len_m2 "
                f"FROM mw_window WHERE {clause}", args)]

    def server_services(self, keys: Sequence[WindowKey]) -> list[ServerService]:
        clause, args = _windows(keys)
        return [ServerService(r["server"], Welford(r["count"], r["mean"], r["m2"]))
                for r in self.conn.execute(
                    f"SELECT server, count, mean, m2 FROM mw_server WHERE {clause}", args)]

    def client_ops(self, run_ids: Sequence[int]) -> list[ClientOpTotals]:
        """Per run and client operation type (not `total`), over the instances."""
        return [ClientOpTotals(*r) for r in self.conn.execute(
            "SELECT run_id, op, sum(ops) AS ops, sum(ops_per_sec) AS rate, "
            f"sum(avg_ms * ops) AS weighted FROM client_summary WHERE run_id IN "
            f"({_marks(run_ids)}) AND op != 'total' GROUP BY run_id, op", tuple(run_ids))]

    def cpu_means(self, run_ids: Sequence[int], low: float,
                  high: float) -> dict[str, float] | None:
        """The host's mean CPU shares (percent) over the samples whose interval's middle
        lies in [low, high] seconds of their run; None without samples."""
        row = self.conn.execute(
            f"SELECT count(*) AS n, {', '.join(f'avg({s}) AS {s}' for s in SHARES)} "
            f"FROM cpu_sample WHERE cpu = 'all' AND run_id IN ({_marks(run_ids)}) "
            f"AND t - 0.5 BETWEEN ? AND ?", (*run_ids, low, high)).fetchone()
        return {s: row[s] for s in SHARES} if row["n"] else None

    def host_cpu_means(self, run_ids: Sequence[int], low: float,
                       high: float) -> dict[str, tuple[float, float]]:
        """Per emulated host, mean (usr, sys) over the samples in [low, high]."""
        return {r["host"]: (r["usr"], r["sys"]) for r in self.conn.execute(
            f"SELECT host, avg(usr) AS usr, avg(sys) AS sys FROM host_cpu "
            f"WHERE run_id IN ({_marks(run_ids)}) AND t - 0.5 BETWEEN ? AND ? "
            "GROUP BY host ORDER BY host", (*run_ids, low, high))}

    def emulator_cpu_mean(self, run_ids: Sequence[int], low: float,
                          high: float) -> tuple[float, float] | None:
        """The delay line's mean (usr, sys) over the samples in [low, high], its processes
        added up per sample; None without samples (no delay, or not netns)."""
        row = self.conn.execute(
            "SELECT avg(usr) AS usr, avg(sys) AS sys, count(*) AS n FROM ("
            "SELECT sum(usr) AS usr, sum(sys) AS sys FROM emulator_cpu "
            f"WHERE run_id IN ({_marks(run_ids)}) AND t - 0.5 BETWEEN ? AND ? "
            "GROUP BY run_id, t)", (*run_ids, low, high)).fetchone()
        return (row["usr"], row["sys"]) if row["n"] else None

    def links(self, run_ids: Sequence[int]) -> list[LinkRecord]:
        return [LinkRecord(r["src"], r["dst"], r["rtt_p50_us"], r["rtt_p99_us"],
                           r["rtt_min_us"], r["expected_rtt_us"], r["mbit_forward"],
                           r["mbit_reverse"])
                for r in self.conn.execute(
                    f"SELECT * FROM link WHERE run_id IN ({_marks(run_ids)}) "
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
            f"SELECT content FROM artifact WHERE run_id IN ({_marks(run_ids)}) AND "
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


def _insert(c: sqlite3.Connection, table: str, row: Mapping[str, object]) -> int:
    """Inserts one row by column name; returns its rowid."""
    cur = c.execute(f"INSERT INTO {table} ({', '.join(_quoted(row))}) "
                    f"VALUES ({', '.join('?' * len(row))})", tuple(row.values()))
    assert cur.lastrowid is not None
    return cur.lastrowid


def _insert_many(c: sqlite3.Connection, table: str, rows: Sequence[Mapping[str, object]]) -> None:
    """Inserts rows that name the same columns."""
    if rows:
        c.executemany(f"INSERT INTO {table} ({', '.join(_quoted(rows[0]))}) "
                      f"VALUES ({', '.join('?' * len(rows[0]))})",
                      [tuple(r.values()) for r in rows])


def _quoted(row: Mapping[str, object]) -> list[str]:
    return [f'"{name}"' for name in row]


def _save_load(c: sqlite3.Connection, run_id: int, instance: int,
               report: loadgen.Report) -> None:
    _insert_many(c, "client_summary", [
        {"run_id": run_id, "instance": instance, "op": op, "ops": s.ops,
         "ops_per_sec": s.ops_per_sec, "hits": s.hits, "misses": s.misses, "errors": s.errors,
         **{f"{k}_ms": s.latency_ms[k] for k in _LATENCY}}
        for op, s in report.summary.items()])
    _insert_many(c, "client_second", [
        {"run_id": run_id, "instance": instance, "second": r.second, "op": r.op,
         "ops": r.ops, "hits": r.hits, "misses": r.misses, "errors": r.errors,
         "latency_ms_avg": r.latency_ms_avg, "latency_ms_max": r.latency_ms_max}
        for r in report.series])


def _save_client(c: sqlite3.Connection, run_id: int, role: str, instance: int,
                 report: loadgen.Report, placed: ClientPlacement | None) -> None:
    """One client instance's clock, timestamps and CPU, and its timing figures."""
    t, cpu = report.timing, report.client_cpu
    key = {"run_id": run_id, "role": role, "instance": instance}
    _insert(c, "client_instance", {
        **key, "host": placed.host if placed else None,
        "clock_offset_us": placed.clock_offset_us if placed else None,
        "started_unix_ms": report.started_unix_ms, "start_late_us": report.start_late_us,
        "timestamps": t.timestamps if t else None, "kernel": t.kernel if t else None,
        "fallback": t.fallback if t else None, "latency_clock": t.latency_clock if t else None,
        "requests": t.requests if t else None,
        "transmit_stamped": t.transmit_stamped if t else None,
        "receipt_stamped": t.receipt_stamped if t else None,
        "hardware_wire": t.hardware_wire if t else None,
        "cpu_threads": cpu.threads if cpu else None, "cpu_user_s": cpu.user_s if cpu else None,
        "cpu_system_s": cpu.system_s if cpu else None,
        "cpu_wall_s": cpu.wall_s if cpu else None, "cpu_share": cpu.share if cpu else None,
        "cpu_busiest_share": cpu.busiest_thread_share if cpu else None,
        "cpu_saturated": cpu.saturated if cpu else None})
    if t is not None:
        _insert_many(c, "client_timing", [
            {**key, "figure": name, "clock": f.clock,
             **{f"{k}_ms": f.latency_ms[k] for k in _LATENCY}}
            for name, f in t.figures.items()])


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _save_middleware(c: sqlite3.Connection, run_id: int, mw: int,
                     stats: proxy_stats.ProxyStats) -> None:
    for w in stats.windows:
        q = w.queue_len
        window = {"run_id": run_id, "middleware": mw, "window": w.window}
        _insert(c, "mw_window", {
            **window, "start": w.start, "end": w.end, "duration_s": w.duration_s,
            "arrivals": w.arrivals, "arrival_rate": w.arrival_rate,
            "throughput": w.throughput, "queue_len_count": q.count,
            "queue_len_mean": q.mean, "queue_len_m2": q.m2,
            "queue_len_now": w.queue_len_now, "connections": w.connections,
            "failovers": w.failovers})
        for op, o in w.ops.items():
            p = o.rt_percentiles_us
            _insert(c, "mw_op", {
                **window, "op": op, "count": o.count, "hits": o.hits,
                "misses": o.misses, "errors": o.errors, "keys_mean": o.keys.mean,
                **{f"{m}_{part}": getattr(getattr(o, f"{m}_us"), part) for m in WELFORD_METRICS
                   for part in ("count", "mean", "m2")},
                **{f"{k}_us": getattr(p, k) for k in ("p50", "p90", "p99", "p999", "max")},
                "rt_overflow": o.rt_overflow, "rt_hdr": o.rt_hdr})
            _insert_many(c, "mw_server", [
                {**window, "op": op, "server": i, "count": s.count, "mean": s.mean,
                 "m2": s.m2} for i, s in enumerate(o.server_service_us_by_server)])
            _insert_many(c, "mw_histogram", [
                {**window, "op": op, "bucket": b, "count": n}
                for b, n in enumerate(o.rt_hist_100us) if n])


def _windows(keys: Sequence[WindowKey]) -> tuple[str, list[int]]:
    """A WHERE clause selecting the given windows, and its arguments."""
    clause = " OR ".join(["(run_id = ? AND middleware = ? AND window = ?)"] * len(keys))
    return clause, [v for k in keys for v in k]


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


def _connect(path: Path, read_only: bool) -> sqlite3.Connection:
    if read_only:
        conn = _connect_read_only(path)
    else:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30)
    conn.row_factory = sqlite3.Row
    return conn


def _connect_read_only(path: Path) -> sqlite3.Connection:
    """`mode=ro`; in a directory that cannot be written, a WAL database without its
    `-shm` file cannot be opened so, and is opened `immutable` instead (safe there: no
    one can write it through this path, and there is no log to miss)."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None, timeout=30)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        wal = path.with_name(path.name + "-wal")
        if os.access(path.parent, os.W_OK) or (wal.exists() and wal.stat().st_size):
            raise
    return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True)
