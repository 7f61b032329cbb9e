"""The results database (`DIR/results.db`, SQLite): opening it and writing runs; every
read the report, export, compare and capacity sections make is in `reads` (the `Store`
is a `Reads`), each returning typed records (records.py). Nothing outside this package
runs SQL.

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

from cachelab.errors import UserError
from cachelab.readers import loadgen, proxy_stats, selfcheck
from cachelab.readers.cpu import SHARES
from cachelab.spec.experiment import Experiment, config_dict
from cachelab.store import check
from cachelab.store.reads import (
    INTERVAL_FIELDS,
    WELFORD_METRICS,
    Reads,
)
from cachelab.store.records import (
    ClientPlacement,
    RunRecord,
)
from cachelab.store.schema import MIGRATIONS, migrate

FILENAME = "results.db"
_LATENCY = ("avg", "stddev", "p50", "p90", "p99", "p999", "max")


class Store(Reads):
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
                {"run_id": run_id, **{k: getattr(x, k) for k in INTERVAL_FIELDS}}
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
                {"point_id": point_id, **{k: getattr(x, k) for k in INTERVAL_FIELDS}, "runs": runs}
                for x in intervals])


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
