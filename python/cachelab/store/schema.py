"""The results database's schema: named migrations, each applied in its own transaction.

Like sqlite-utils' migrations, each migration has a name; the `_migrations` table names
the ones applied with the time they were applied, and `PRAGMA user_version` counts them.
A database's migrations must be a prefix of these, by name and in order (`check.py`).
docs/experiments.md describes the tables.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cachelab.store import check

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


def statements(sql: str) -> list[str]:
    """The complete statements of a script, as SQLite's own parser ends them
    (`sqlite3.complete_statement`), so a `;` inside a string or a trigger body does not
    cut one short."""
    out, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            out.append(pending.strip())
            pending = ""
    if pending.strip():  # the last statement may leave out its `;`
        if not sqlite3.complete_statement(pending + ";"):
            raise ValueError(f"incomplete SQL statement: {pending.strip()[:60]!r}")
        out.append(pending.strip())
    return out


def _script(sql: str) -> Callable[[sqlite3.Connection], None]:
    """A migration that runs each statement of `sql` in the caller's transaction
    (`executescript` would commit it first)."""
    def apply(conn: sqlite3.Connection) -> None:
        for statement in statements(sql):
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
    # Trustworthy measurement (issue 24): each client instance's clock, kernel timestamps
    # and own CPU; its timing figures; every run's and point's percentiles with their
    # order-statistic intervals; the runs' self-checks; the common start instant.
    Migration("0006_trust", _script("""
ALTER TABLE run ADD COLUMN start_at_unix_ms INTEGER;
CREATE TABLE client_instance (
    run_id INTEGER NOT NULL REFERENCES run(id), role TEXT NOT NULL, instance INTEGER NOT NULL,
    host TEXT, clock_offset_us REAL, started_unix_ms INTEGER NOT NULL, start_late_us INTEGER,
    timestamps TEXT, kernel INTEGER, fallback TEXT, latency_clock TEXT, requests INTEGER,
    transmit_stamped INTEGER, receipt_stamped INTEGER, hardware_wire INTEGER,
    cpu_threads INTEGER, cpu_user_s REAL, cpu_system_s REAL, cpu_wall_s REAL, cpu_share REAL,
    cpu_busiest_share REAL, cpu_saturated INTEGER,
    PRIMARY KEY (run_id, role, instance)
);
CREATE TABLE client_timing (
    run_id INTEGER NOT NULL REFERENCES run(id), role TEXT NOT NULL, instance INTEGER NOT NULL,
    figure TEXT NOT NULL, clock TEXT NOT NULL, avg_ms REAL NOT NULL, stddev_ms REAL NOT NULL,
    p50_ms REAL NOT NULL, p90_ms REAL NOT NULL, p99_ms REAL NOT NULL, p999_ms REAL NOT NULL,
    max_ms REAL NOT NULL,
    PRIMARY KEY (run_id, role, instance, figure)
);
CREATE TABLE run_percentile (
    run_id INTEGER NOT NULL REFERENCES run(id), role TEXT NOT NULL, name TEXT NOT NULL,
    quantile REAL NOT NULL, estimate_ms REAL NOT NULL, low_ms REAL NOT NULL,
    high_ms REAL NOT NULL, confidence REAL NOT NULL, samples INTEGER NOT NULL,
    PRIMARY KEY (run_id, role, name)
);
CREATE TABLE point_percentile (
    point_id INTEGER NOT NULL REFERENCES point(id), role TEXT NOT NULL, name TEXT NOT NULL,
    quantile REAL NOT NULL, estimate_ms REAL NOT NULL, low_ms REAL NOT NULL,
    high_ms REAL NOT NULL, confidence REAL NOT NULL, samples INTEGER NOT NULL,
    runs INTEGER NOT NULL,
    PRIMARY KEY (point_id, role, name)
);
CREATE TABLE run_check (
    run_id INTEGER NOT NULL REFERENCES run(id), name TEXT NOT NULL, passed INTEGER NOT NULL,
    statistic REAL, p_value REAL, reason TEXT NOT NULL,
    PRIMARY KEY (run_id, name)
);
""")),
    # The emulated data centre (issue 25): each host's egress and ingress rates apart, and
    # the delay line's own CPU every second (the machine check is a run_check row).
    Migration("0007_links_and_emulator", _script("""
ALTER TABLE run_host ADD COLUMN egress_mbit REAL;
ALTER TABLE run_host ADD COLUMN ingress_mbit REAL;
CREATE TABLE emulator_cpu (
    run_id INTEGER NOT NULL REFERENCES run(id), t REAL NOT NULL, process TEXT NOT NULL,
    usr REAL NOT NULL, sys REAL NOT NULL,
    PRIMARY KEY (run_id, t, process)
);
""")),
    # TLS (issue 23): what each encrypted hop of a run negotiated, and the CPU seconds of
    # each server, middleware and load generator process over the run (what a request
    # costs each of them, with and without TLS).
    Migration("0008_tls_and_process_cpu", _script("""
CREATE TABLE run_tls (
    run_id INTEGER NOT NULL REFERENCES run(id), hop TEXT NOT NULL, instance INTEGER NOT NULL,
    version TEXT NOT NULL, cipher TEXT NOT NULL, source TEXT NOT NULL,
    PRIMARY KEY (run_id, hop, instance)
);
CREATE TABLE process_cpu (
    run_id INTEGER NOT NULL REFERENCES run(id), role TEXT NOT NULL, instance INTEGER NOT NULL,
    user_s REAL NOT NULL, system_s REAL NOT NULL, requests INTEGER,
    PRIMARY KEY (run_id, role, instance)
);
""")),
)


def migrate(conn: sqlite3.Connection, migrations: tuple[Migration, ...] = MIGRATIONS, *,
            path: Path | str = "the results database") -> int:
    """Applies the migrations not yet applied (known by name), each in its own
    transaction; returns the schema version. Refuses a database with migrations these are
    not the start of."""
    known = [m.name for m in migrations]
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    applied = check.applied_names(conn, path)
    check.known_prefix(applied, known, version, path)
    if not applied:
        conn.execute(check.MIGRATIONS_TABLE)
    for number, migration in enumerate(migrations[len(applied):], start=len(applied) + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Inside the write lock: another process may have applied it meanwhile.
            if migration.name not in check.applied_names(conn, path):
                migration.apply(conn)
                conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)",
                             (migration.name, time.time()))
                conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
    return len(migrations)
