"""The report's methodology parts, read from the database: every run's throughput against
when it started (drift shows as a trend across points run at different times), the run
order, and the capacity searches (every trial, and each run's answer)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from cachelab.store import Store


@dataclass(frozen=True)
class TimelineRun:
    point: int
    label: str
    repetition: int
    #: Seconds since the experiment's first run started.
    started_s: float
    throughput: float


@dataclass(frozen=True)
class CapacitySearch:
    point: int
    label: str
    repetition: int
    capacity: float | None
    uncertainty: float | None
    latency_ms: float | None
    percentile: float
    target_ms: float
    reason: str
    limited_by_generator: bool
    #: (rate, latency_ms, verdict) of every trial, in the order run.
    trials: tuple[tuple[float, float, str], ...]


def timeline(s: Store) -> list[TimelineRun]:
    rows = s.conn.execute(
        "SELECT p.idx, p.label, r.repetition, r.started_at, r.throughput FROM run r "
        "JOIN point p ON p.id = r.point_id ORDER BY r.started_at").fetchall()
    if not rows:
        return []
    first = rows[0]["started_at"]
    return [TimelineRun(r["idx"], r["label"], r["repetition"], r["started_at"] - first,
                        r["throughput"]) for r in rows]


def run_order(s: Store) -> tuple[str, int | None]:
    exp = s.experiment()
    settings = json.loads(exp["settings"]) if exp else {}
    return settings.get("order", "sweep"), settings.get("order_seed")


def capacity_searches(s: Store) -> list[CapacitySearch]:
    answers = s.conn.execute(
        "SELECT a.*, p.idx, p.label, r.repetition FROM capacity_answer a "
        "JOIN run r ON r.id = a.run_id JOIN point p ON p.id = r.point_id "
        "ORDER BY p.idx, r.repetition").fetchall()
    out = []
    for a in answers:
        trials = tuple((t["rate"], t["latency_ms"], t["verdict"]) for t in s.conn.execute(
            "SELECT rate, latency_ms, verdict FROM capacity_trial WHERE run_id = ? "
            "ORDER BY seq", (a["run_id"],)))
        out.append(CapacitySearch(a["idx"], a["label"], a["repetition"], a["capacity"],
                                  a["uncertainty"], a["latency_ms"], a["percentile"],
                                  a["target_ms"], a["reason"],
                                  bool(a["limited_by_generator"]), trials))
    return out


#: A run's timing is suspect when its load generator sent this late relative to its p99.
LAG_SHARE = 0.1


@dataclass(frozen=True)
class LateRun:
    point: int
    label: str
    repetition: int
    send_lag_p99_ms: float
    p99_ms: float


def late_runs(s: Store) -> list[LateRun]:
    """Runs whose load generator's p99 send lag exceeds a tenth of their p99 latency: its
    own lateness is then a visible part of the latency it measured."""
    rows = s.conn.execute(
        "SELECT p.idx, p.label, r.repetition, r.send_lag_p99_ms, r.p99_ms FROM run r "
        "JOIN point p ON p.id = r.point_id WHERE r.send_lag_p99_ms IS NOT NULL "
        "AND r.send_lag_p99_ms > ? * r.p99_ms ORDER BY p.idx, r.repetition",
        (LAG_SHARE,)).fetchall()
    return [LateRun(*r) for r in rows]
