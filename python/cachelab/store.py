"""The results database (`DIR/results.db`, SQLite): a versioned schema with named
migrations, and the writes of the harness.

Like sqlite-utils' migrations, each migration has a name and runs in its own transaction;
the `_migrations` table names the ones applied with the time they were applied, and
`PRAGMA user_version` counts them. Before anything reads or writes a database,
`store_check` makes sure this cachelab fully understands it (intact, its migrations known
by name, its columns as they made them); a database from a newer cachelab, a corrupt one
or one edited by hand is refused in one line rather than guessed at. `cachelab report`,
`export` and `compare` open it read-only. docs/experiments.md describes the tables.

Every run is written in one transaction after it finished (`save_run`), so a crash or
Ctrl-C loses at most the run in progress. WAL mode lets `cachelab report` read while a run
is being written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cachelab import loadgen, proxy_stats, store_check
from cachelab import order as order_mod
from cachelab.cpu import SHARES, Sample
from cachelab.errors import UserError
from cachelab.spec import Experiment, config_dict

FILENAME = "results.db"
_WELFORD_METRICS = ("response", "decode", "queue_wait", "worker_service", "server_service",
                    "worker_processing")
_LATENCY = ("avg", "stddev", "p50", "p90", "p99", "p999", "max")

#: Migration 0001 as it was first applied, frozen as text: a migration must not follow
#: live constants (cpu.SHARES, _LATENCY, ...), or editing one would silently give new
#: databases a different schema from old ones. tests/test_store_schema.py holds it to
#: the schema the original code produced.
_INITIAL = """
CREATE TABLE experiment (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    source TEXT NOT NULL,
    digest TEXT NOT NULL,
    settings TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE point (
    id INTEGER PRIMARY KEY,
    experiment_id INTEGER NOT NULL REFERENCES experiment(id),
    idx INTEGER NOT NULL,
    label TEXT NOT NULL,
    factors TEXT NOT NULL,
    config TEXT NOT NULL,
    clients INTEGER NOT NULL,
    UNIQUE (experiment_id, idx)
);
CREATE TABLE run (
    id INTEGER PRIMARY KEY,
    point_id INTEGER NOT NULL REFERENCES point(id),
    repetition INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL NOT NULL,
    throughput REAL NOT NULL,
    response_ms REAL NOT NULL,
    p50_ms REAL NOT NULL, p90_ms REAL NOT NULL, p99_ms REAL NOT NULL,
    p999_ms REAL NOT NULL, max_ms REAL NOT NULL,
    hits INTEGER NOT NULL, misses INTEGER NOT NULL, errors INTEGER NOT NULL,
    cv_within REAL,
    host TEXT NOT NULL,
    UNIQUE (point_id, repetition)
);
CREATE TABLE client_summary (
    run_id INTEGER NOT NULL REFERENCES run(id), instance INTEGER NOT NULL, op TEXT NOT NULL,
    ops INTEGER NOT NULL, ops_per_sec REAL NOT NULL, hits INTEGER NOT NULL,
    misses INTEGER NOT NULL, errors INTEGER NOT NULL,
    avg_ms REAL NOT NULL, stddev_ms REAL NOT NULL, p50_ms REAL NOT NULL, p90_ms REAL NOT NULL, p99_ms REAL NOT NULL, p999_ms REAL NOT NULL, max_ms REAL NOT NULL,
    PRIMARY KEY (run_id, instance, op)
);
CREATE TABLE client_second (
    run_id INTEGER NOT NULL REFERENCES run(id), instance INTEGER NOT NULL,
    second INTEGER NOT NULL, op TEXT NOT NULL,
    ops INTEGER NOT NULL, hits INTEGER NOT NULL, misses INTEGER NOT NULL,
    errors INTEGER NOT NULL, latency_ms_avg REAL NOT NULL, latency_ms_max REAL NOT NULL,
    PRIMARY KEY (run_id, instance, second, op)
);
CREATE TABLE mw_window (
    run_id INTEGER NOT NULL REFERENCES run(id), middleware INTEGER NOT NULL,
    window INTEGER NOT NULL, start REAL NOT NULL, "end" REAL NOT NULL,
    duration_s REAL NOT NULL, arrivals INTEGER NOT NULL, arrival_rate REAL NOT NULL,
    throughput REAL NOT NULL, queue_len_count INTEGER NOT NULL, queue_len_mean REAL NOT NULL,
    queue_len_m2 REAL NOT NULL, queue_len_now INTEGER NOT NULL, connections INTEGER NOT NULL,
    failovers INTEGER NOT NULL,
    PRIMARY KEY (run_id, middleware, window)
);
CREATE TABLE mw_op (
    run_id INTEGER NOT NULL REFERENCES run(id), middleware INTEGER NOT NULL,
    window INTEGER NOT NULL, op TEXT NOT NULL,
    count INTEGER NOT NULL, hits INTEGER NOT NULL, misses INTEGER NOT NULL,
    errors INTEGER NOT NULL, keys_mean REAL NOT NULL,
    response_count INTEGER NOT NULL, response_mean REAL NOT NULL, response_m2 REAL NOT NULL, decode_count INTEGER NOT NULL, decode_mean REAL NOT NULL, decode_m2 REAL NOT NULL, queue_wait_count INTEGER NOT NULL, queue_wait_mean REAL NOT NULL, queue_wait_m2 REAL NOT NULL, worker_service_count INTEGER NOT NULL, worker_service_mean REAL NOT NULL, worker_service_m2 REAL NOT NULL, server_service_count INTEGER NOT NULL, server_service_mean REAL NOT NULL, server_service_m2 REAL NOT NULL, worker_processing_count INTEGER NOT NULL, worker_processing_mean REAL NOT NULL, worker_processing_m2 REAL NOT NULL,
    p50_us INTEGER NOT NULL, p90_us INTEGER NOT NULL, p99_us INTEGER NOT NULL,
    p999_us INTEGER NOT NULL, max_us INTEGER NOT NULL, rt_overflow INTEGER NOT NULL,
    rt_hdr TEXT NOT NULL,
    PRIMARY KEY (run_id, middleware, window, op)
);
CREATE TABLE mw_server (
    run_id INTEGER NOT NULL REFERENCES run(id), middleware INTEGER NOT NULL,
    window INTEGER NOT NULL, op TEXT NOT NULL, server INTEGER NOT NULL,
    count INTEGER NOT NULL, mean REAL NOT NULL, m2 REAL NOT NULL,
    PRIMARY KEY (run_id, middleware, window, op, server)
);
CREATE TABLE mw_histogram (
    run_id INTEGER NOT NULL REFERENCES run(id), middleware INTEGER NOT NULL,
    window INTEGER NOT NULL, op TEXT NOT NULL, bucket INTEGER NOT NULL,
    count INTEGER NOT NULL,
    PRIMARY KEY (run_id, middleware, window, op, bucket)
);
CREATE TABLE cpu_sample (
    run_id INTEGER NOT NULL REFERENCES run(id), t REAL NOT NULL, cpu TEXT NOT NULL,
    usr REAL NOT NULL, nice REAL NOT NULL, sys REAL NOT NULL, iowait REAL NOT NULL, irq REAL NOT NULL, softirq REAL NOT NULL, steal REAL NOT NULL, idle REAL NOT NULL,
    PRIMARY KEY (run_id, t, cpu)
);
CREATE TABLE artifact (
    run_id INTEGER NOT NULL REFERENCES run(id), name TEXT NOT NULL,
    content BLOB NOT NULL,
    PRIMARY KEY (run_id, name)
);
CREATE INDEX run_point ON run(point_id);
"""  # noqa: E501


@dataclass(frozen=True)
class Migration:
    name: str
    apply: Callable[[sqlite3.Connection], None]


def _script(sql: str) -> Callable[[sqlite3.Connection], None]:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in sql.split(";"):
            if statement.strip():
                conn.execute(statement)
    return apply


#: Applied in order; append new ones, never edit or reorder the applied ones.
MIGRATIONS: tuple[Migration, ...] = (
    Migration("0001_initial", _script(_INITIAL)),
    # Open loop: whether a load generator sent late (its latencies are then the client's).
    Migration("0002_run_fell_behind", _script("ALTER TABLE run ADD COLUMN fell_behind "
                                              "INTEGER")),
    # Topologies with hosts: each run's hosts, their CPU, and the measured links.
    Migration("0003_hosts_and_links", _script("""
CREATE TABLE run_host (
    run_id INTEGER NOT NULL REFERENCES run(id), host TEXT NOT NULL, roles TEXT NOT NULL,
    address TEXT NOT NULL, link_mbit REAL NOT NULL, delay_ms REAL NOT NULL,
    cpu_quota REAL NOT NULL, cpus TEXT,
    PRIMARY KEY (run_id, host)
);
CREATE TABLE host_cpu (
    run_id INTEGER NOT NULL REFERENCES run(id), t REAL NOT NULL, host TEXT NOT NULL,
    usr REAL NOT NULL, sys REAL NOT NULL,
    PRIMARY KEY (run_id, t, host)
);
CREATE TABLE link (
    run_id INTEGER NOT NULL REFERENCES run(id), src TEXT NOT NULL, dst TEXT NOT NULL,
    rtt_p50_us REAL NOT NULL, rtt_p99_us REAL NOT NULL, rtt_min_us REAL NOT NULL,
    expected_rtt_us REAL NOT NULL, mbit_forward REAL, mbit_reverse REAL,
    PRIMARY KEY (run_id, src, dst)
);
""")),
    # Capacity searches: every trial of a run's search, and the rate's verdict.
    Migration("0004_capacity_trials", _script("""
CREATE TABLE capacity_trial (
    run_id INTEGER NOT NULL REFERENCES run(id), seq INTEGER NOT NULL,
    rate REAL NOT NULL, repetition INTEGER NOT NULL, latency_ms REAL NOT NULL,
    completed_rate REAL NOT NULL, send_lag_p99_ms REAL NOT NULL, fell_behind INTEGER NOT NULL,
    verdict TEXT NOT NULL, trial_s REAL NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE TABLE capacity_answer (
    run_id INTEGER PRIMARY KEY REFERENCES run(id), capacity REAL, uncertainty REAL,
    latency_ms REAL, percentile REAL NOT NULL, target_ms REAL NOT NULL, reason TEXT NOT NULL,
    limited_by_generator INTEGER NOT NULL
);
""")),
    # The load generators' own timing error (open loop: the worst instance's p99 send lag).
    Migration("0005_run_send_lag", _script("ALTER TABLE run ADD COLUMN send_lag_p99_ms REAL")),
)


def migrate(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS, *,
            path: Path | str = "the results database") -> int:
    """Applies the migrations not yet applied (known by name), each in its own
    transaction; returns the schema version. Refuses a database with migrations these are
    not the start of."""
    known = [m.name for m in migrations]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    applied = store_check.applied_names(conn, path)
    store_check.known_prefix(applied, known, version, path)
    if not applied:
        conn.execute(store_check.MIGRATIONS_TABLE)
    for number, migration in enumerate(migrations[len(applied):], start=len(applied) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Inside the write lock: another process may have applied it meanwhile.
            if migration.name not in store_check.applied_names(conn, path):
                migration.apply(conn)
                conn.execute("INSERT INTO _migrations VALUES (?, ?)",
                             (migration.name, time.time()))
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(migrations)


@dataclass(frozen=True)
class RunSummary:
    """A run's headline numbers: client side, over the steady window, all instances."""

    throughput: float
    response_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    hits: int
    misses: int
    errors: int
    #: Coefficient of variation of the per-second throughput; None below two seconds.
    cv_within: float | None
    #: Open loop: a load generator fell behind its schedule; None in closed loop.
    fell_behind: bool | None = None
    #: Open loop: the worst load generator's p99 send lag (how late it sent), in ms; None
    #: in closed loop.
    send_lag_p99_ms: float | None = None


@dataclass(frozen=True)
class RunRecord:
    """Everything measured in one run, as the runner collected it."""

    point: int
    repetition: int
    started_at: float
    ended_at: float
    summary: RunSummary
    host: dict
    loads: tuple[loadgen.Report, ...]
    middlewares: tuple[proxy_stats.ProxyStats, ...]
    cpu: tuple[Sample, ...]
    artifacts: dict[str, bytes]
    #: Emulated hosts (empty on `local`): their plan, CPU samples and measured links.
    hosts: tuple[RunHost, ...] = ()
    host_cpu: tuple[HostCpuSample, ...] = ()
    links: tuple[LinkRecord, ...] = ()
    #: Capacity mode: the search's trials and its answer.
    capacity: CapacityRecord | None = None


@dataclass(frozen=True)
class CapacityRecord:
    #: (rate, repetition, latency_ms, completed_rate, send_lag_p99_ms, fell_behind,
    #: verdict of the rate, trial_s) per trial, in the order run.
    trials: tuple[tuple, ...]
    capacity: float | None
    uncertainty: float | None
    latency_ms: float | None
    percentile: float
    target_ms: float
    reason: str
    limited_by_generator: bool


@dataclass(frozen=True)
class RunHost:
    host: str
    roles: str
    address: str
    link_mbit: float
    delay_ms: float
    cpu_quota: float
    cpus: str | None


@dataclass(frozen=True)
class HostCpuSample:
    """One host's CPU over one interval, in percent of one core (200 = two cores busy)."""

    t: float
    host: str
    usr: float
    sys: float


@dataclass(frozen=True)
class LinkRecord:
    src: str
    dst: str
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_min_us: float
    #: 2 x (delay_src + delay_dst): what the configuration adds to the base round trip.
    expected_rtt_us: float
    mbit_forward: float | None
    mbit_reverse: float | None


class Store:
    """The results database. `Store(path)` may write (the runner); `open_existing(DIR)`
    reads (the report, export, compare)."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        try:
            self.conn = _connect(self.path, read_only)
        except sqlite3.DatabaseError as exc:
            raise UserError(store_check.describe(self.path, exc)) from None
        try:
            # Everything checked before the first write.
            self.version = store_check.check(self.conn, self.path, MIGRATIONS)
            if not read_only:
                self.conn.execute("PRAGMA journal_mode = WAL")
                self.version = migrate(self.conn, path=self.path)
            self.conn.execute("PRAGMA foreign_keys = ON")
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise UserError(store_check.describe(self.path, exc)) from None
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

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()
        if isinstance(exc, sqlite3.DatabaseError):
            # A page that quick_check passed may still fail to read (or a write may find
            # the disk full): one line naming the file, never a traceback.
            raise UserError(store_check.describe(self.path, exc)) from exc

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def experiment(self) -> sqlite3.Row | None:
        """The directory's experiment (one per directory), or None."""
        return self.conn.execute("SELECT * FROM experiment ORDER BY id LIMIT 1").fetchone()

    def create_experiment(self, exp: Experiment) -> int:
        settings = {k: getattr(exp, k) for k in (
            "topology", "repetitions", "run_time_s", "warmup_s", "cooldown_s",
            "stats_window_s", "qos_target_ms", "report_x", "max_repetitions")}
        settings["cv_threshold"] = exp.validation.cv_threshold
        settings["order"] = exp.order
        settings["order_seed"] = exp.order_seed if exp.order_seed is not None \
            else order_mod.new_seed()
        settings["factors"] = list(exp.factor_paths)
        with self.transaction() as c:
            cur = c.execute("INSERT INTO experiment (name, description, source, digest, "
                            "settings, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                            (exp.name, exp.description, exp.source, exp.digest,
                             _json(settings), time.time()))
            exp_id = cur.lastrowid
            c.executemany(
                "INSERT INTO point (experiment_id, idx, label, factors, config, clients) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(exp_id, p.index, p.label, _json(dict(p.factors)),
                  _json(config_dict(p.config)), p.config.total_clients) for p in exp.points])
        return exp_id

    def run_order(self, exp_id: int) -> tuple[str, int]:
        """The experiment's run order and its seed, as stored when it was created (an
        experiment stored before orders existed ran in sweep order)."""
        row = self.conn.execute("SELECT settings FROM experiment WHERE id = ?",
                                (exp_id,)).fetchone()
        settings = json.loads(row["settings"])
        return settings.get("order", "sweep"), int(settings.get("order_seed", 0))

    def run_summaries(self, exp_id: int) -> dict[int, list[sqlite3.Row]]:
        """The finished runs of every point, by point index, in repetition order."""
        rows = self.conn.execute(
            "SELECT point.idx AS point, run.* FROM run JOIN point ON run.point_id = point.id "
            "WHERE point.experiment_id = ? ORDER BY point.idx, run.repetition", (exp_id,))
        out: dict[int, list[sqlite3.Row]] = {}
        for row in rows:
            out.setdefault(row["point"], []).append(row)
        return out

    def save_run(self, exp_id: int, record: RunRecord) -> int:
        """Writes one finished run and everything measured in it, in one transaction."""
        s = record.summary
        with self.transaction() as c:
            (point_id,) = c.execute("SELECT id FROM point WHERE experiment_id = ? AND idx = ?",
                                    (exp_id, record.point)).fetchone()
            run_id = c.execute(
                "INSERT INTO run (point_id, repetition, started_at, ended_at, throughput, "
                "response_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms, hits, misses, errors, "
                "cv_within, host, fell_behind, send_lag_p99_ms) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (point_id, record.repetition, record.started_at, record.ended_at,
                 s.throughput, s.response_ms, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms,
                 s.max_ms, s.hits, s.misses, s.errors, s.cv_within, _json(record.host),
                 s.fell_behind, s.send_lag_p99_ms),
            ).lastrowid
            for i, report in enumerate(record.loads):
                _save_load(c, run_id, i, report)
            for i, stats in enumerate(record.middlewares):
                _save_middleware(c, run_id, i, stats)
            c.executemany(
                f"INSERT INTO cpu_sample VALUES (?, ?, ?, {', '.join('?' * len(SHARES))})",
                [(run_id, x.t, x.cpu, *(getattr(x, k) for k in SHARES)) for x in record.cpu])
            c.executemany("INSERT INTO run_host VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          [(run_id, *dataclasses.astuple(h)) for h in record.hosts])
            c.executemany("INSERT INTO host_cpu VALUES (?, ?, ?, ?, ?)",
                          [(run_id, *dataclasses.astuple(x)) for x in record.host_cpu])
            c.executemany("INSERT INTO link VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                          [(run_id, *dataclasses.astuple(x)) for x in record.links])
            if record.capacity is not None:
                k = record.capacity
                c.executemany("INSERT INTO capacity_trial VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                              [(run_id, seq, *t) for seq, t in enumerate(k.trials, start=1)])
                c.execute("INSERT INTO capacity_answer VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (run_id, k.capacity, k.uncertainty, k.latency_ms, k.percentile,
                           k.target_ms, k.reason, k.limited_by_generator))
            c.executemany("INSERT INTO artifact VALUES (?, ?, ?)",
                          [(run_id, name, zlib.compress(data))
                           for name, data in sorted(record.artifacts.items())])
        return run_id

    def artifact(self, run_id: int, name: str) -> bytes:
        row = self.conn.execute("SELECT content FROM artifact WHERE run_id = ? AND name = ?",
                                (run_id, name)).fetchone()
        if row is None:
            raise UserError(f"run {run_id} has no stored file {name!r}")
        return zlib.decompress(row["content"])


def _save_load(c: sqlite3.Connection, run_id: int, instance: int,
               report: loadgen.Report) -> None:
    c.executemany(
        "INSERT INTO client_summary VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(run_id, instance, op, s.ops, s.ops_per_sec, s.hits, s.misses, s.errors,
          *(s.latency_ms[k] for k in _LATENCY)) for op, s in report.summary.items()])
    c.executemany(
        "INSERT INTO client_second VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [(run_id, instance, r.second, r.op, r.ops, r.hits, r.misses, r.errors,
          r.latency_ms_avg, r.latency_ms_max) for r in report.series])


def _save_middleware(c: sqlite3.Connection, run_id: int, mw: int,
                     stats: proxy_stats.ProxyStats) -> None:
    for w in stats.windows:
        q = w["queue_len"]
        c.execute("INSERT INTO mw_window VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                  (run_id, mw, w["window"], w["start"], w["end"], w["duration_s"],
                   w["arrivals"], w["arrival_rate"], w["throughput"], q["count"], q["mean"],
                   q["m2"], w["queue_len_now"], w["connections"], w["failovers"]))
        for op, o in w["ops"].items():
            welford = [v for m in _WELFORD_METRICS for v in
                       (o[f"{m}_us"]["count"], o[f"{m}_us"]["mean"], o[f"{m}_us"]["m2"])]
            p = o["rt_percentiles_us"]
            c.execute(f"INSERT INTO mw_op VALUES ({', '.join('?' * (9 + len(welford) + 7))})",
                      (run_id, mw, w["window"], op, o["count"], o["hits"], o["misses"],
                       o["errors"], o["keys"]["mean"], *welford, p["p50"], p["p90"], p["p99"],
                       p["p999"], p["max"], o["rt_overflow"], o["rt_hdr"]))
            c.executemany("INSERT INTO mw_server VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          [(run_id, mw, w["window"], op, i, s["count"], s["mean"], s["m2"])
                           for i, s in enumerate(o["server_service_us_by_server"])])
            c.executemany("INSERT INTO mw_histogram VALUES (?, ?, ?, ?, ?, ?)",
                          [(run_id, mw, w["window"], op, b, n)
                           for b, n in enumerate(o["rt_hist_100us"]) if n])


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
