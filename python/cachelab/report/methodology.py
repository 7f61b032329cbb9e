"""The report's methodology parts, read through the store: every run's throughput against
when it started (drift shows as a trend across points run at different times), the run
order, the capacity searches (every trial, and each run's answer), the runs whose
load generator sent late, and every run's self-checks (selfcheck.py)."""

from __future__ import annotations

from dataclasses import dataclass

from cachelab.spec.order import Order
from cachelab.store import LateRun, RunCheck, Store, StoredCapacity


@dataclass(frozen=True)
class TimelineRun:
    point: int
    label: str
    repetition: int
    #: Seconds since the experiment's first run started.
    started_s: float
    throughput: float


def timeline(s: Store) -> list[TimelineRun]:
    runs = s.timeline()
    if not runs:
        return []
    first = runs[0].started_at
    return [TimelineRun(r.point, r.label, r.repetition, r.started_at - first, r.throughput)
            for r in runs]


def run_order(s: Store) -> tuple[Order, int | None]:
    exp = s.experiment()
    return (exp.order, exp.order_seed) if exp else (Order.SWEEP, None)


def capacity_searches(s: Store) -> list[StoredCapacity]:
    return s.capacity_searches()


#: A run's timing is suspect when its load generator sent this late relative to its p99.
LAG_SHARE = 0.1


def late_runs(s: Store) -> list[LateRun]:
    """Runs whose load generator's p99 send lag exceeds a tenth of their p99 latency: its
    own lateness is then a visible part of the latency it measured."""
    return s.late_runs(LAG_SHARE)


def run_checks(s: Store) -> list[RunCheck]:
    """Every run's self-checks (independence, stationarity, client CPU), passed or not."""
    exp = s.experiment()
    return s.run_checks(exp.id) if exp else []
