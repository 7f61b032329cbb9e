"""What the middlewares and the clients measured at one point, summed over the steady part
of its runs: the inputs of the decomposition, the queueing models and the per-operation
plots. Reads the database; no analysis.

Rates (per second, all middlewares):

    lambda = mean over runs of sum over middlewares of  sum(arrivals) / sum(window seconds)
    X      = mean over runs of sum over middlewares of  sum(throughput x window seconds)
                                                        / sum(window seconds)

Times merge the Welford triples of every steady window exactly (all operation types, all
middlewares, all runs). Server j's visit ratio is its answers over the requests the
middlewares completed: n_j / n.
"""

from __future__ import annotations

import sqlite3
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.proxy_stats import Welford

#: Welford metrics of the middleware (store.py's `mw_op` columns, without `_us`).
METRICS = ("response", "decode", "queue_wait", "worker_service", "server_service",
           "worker_processing")
#: Client operation types (the load generator's summary keys besides `total`).
CLIENT_OPS = ("get", "multiget", "set")


@dataclass(frozen=True)
class ServerTotals:
    answers: int
    service: Welford


@dataclass(frozen=True)
class MiddlewareTotals:
    """The middlewares at one point; times in µs as the middleware writes them."""

    middlewares: int
    arrival_rate: float
    throughput: float
    requests: int
    stages: dict[str, Welford]
    #: Mean queue length seen by the workers, over every window of every middleware.
    queue_len: float | None
    #: The same summed over the middlewares (the requests waiting in all queues).
    queue_len_total: float | None
    servers: tuple[ServerTotals, ...]

    def mean_us(self, metric: str) -> float:
        return self.stages[metric].mean

    def visits(self, server: int) -> float:
        return self.servers[server].answers / self.requests if self.requests else 0.0


@dataclass(frozen=True)
class OpResult:
    """One client operation type at a point: ops/s (mean over runs, all instances) and the
    mean response time (weighted by requests)."""

    throughput: float
    response_ms: float
    requests: int


WindowKey = tuple[int, int, int]


def steady_windows(conn: sqlite3.Connection, runs: Sequence[sqlite3.Row],
                   settings: dict) -> list[WindowKey]:
    """(run id, middleware, window) of the middleware windows whose midpoint lies in the
    run's steady part, [start + warm-up, start + run time - cool-down]."""
    out = []
    for r in runs:
        lo = r["started_at"] + settings["warmup_s"]
        hi = r["started_at"] + settings["run_time_s"] - settings["cooldown_s"]
        out += [(r["id"], w["middleware"], w["window"]) for w in conn.execute(
            'SELECT middleware, window FROM mw_window WHERE run_id = ? '
            'AND (start + "end") / 2 BETWEEN ? AND ?', (r["id"], lo, hi))]
    return out


def middleware(conn: sqlite3.Connection, keys: list[WindowKey]) -> MiddlewareTotals | None:
    """The totals over the given windows; None without windows or requests."""
    if not keys:
        return None
    clause = " OR ".join(["(run_id = ? AND middleware = ? AND window = ?)"] * len(keys))
    args = [v for k in keys for v in k]
    stages = {m: Welford(0, 0.0, 0.0) for m in METRICS}
    requests = 0
    for o in conn.execute(f"SELECT * FROM mw_op WHERE {clause}", args):
        requests += o["count"]
        for m in METRICS:
            stages[m] = stages[m].merge(Welford(o[f"{m}_count"], o[f"{m}_mean"], o[f"{m}_m2"]))
    if stages["response"].count == 0:
        return None
    per_run: dict[int, dict[str, float]] = {}
    queue_all = Welford(0, 0.0, 0.0)
    queue_by: dict[tuple[int, int], Welford] = {}
    for w in conn.execute(
            "SELECT run_id, middleware, sum(arrivals) AS arrivals, sum(duration_s) AS secs, "
            "sum(throughput * duration_s) AS done FROM mw_window "
            f"WHERE {clause} GROUP BY run_id, middleware", args):
        run = per_run.setdefault(w["run_id"], {"lam": 0.0, "x": 0.0})
        if w["secs"] > 0:
            run["lam"] += w["arrivals"] / w["secs"]
            run["x"] += w["done"] / w["secs"]
    for w in conn.execute("SELECT run_id, middleware, queue_len_count, queue_len_mean, "
                          f"queue_len_m2 FROM mw_window WHERE {clause}", args):
        part = Welford(w["queue_len_count"], w["queue_len_mean"], w["queue_len_m2"])
        queue_all = queue_all.merge(part)
        key = (w["run_id"], w["middleware"])
        queue_by[key] = queue_by.get(key, Welford(0, 0.0, 0.0)).merge(part)
    totals: dict[int, float] = {}
    for (run_id, _), q in queue_by.items():
        if q.count:
            totals[run_id] = totals.get(run_id, 0.0) + q.mean
    servers: dict[int, tuple[int, Welford]] = {}
    for row in conn.execute(f"SELECT server, count, mean, m2 FROM mw_server WHERE {clause}",
                            args):
        n, w = servers.get(row["server"], (0, Welford(0, 0.0, 0.0)))
        servers[row["server"]] = (n + row["count"],
                                  w.merge(Welford(row["count"], row["mean"], row["m2"])))
    return MiddlewareTotals(
        middlewares=len({k[1] for k in keys}),
        arrival_rate=statistics.fmean(r["lam"] for r in per_run.values()),
        throughput=statistics.fmean(r["x"] for r in per_run.values()),
        requests=requests,
        stages=stages,
        queue_len=queue_all.mean if queue_all.count else None,
        queue_len_total=statistics.fmean(totals.values()) if totals else None,
        servers=tuple(ServerTotals(*servers[i]) for i in sorted(servers)),
    )


def client_ops(conn: sqlite3.Connection, run_ids: list[int]) -> dict[str, OpResult]:
    """Per operation type with requests: throughput and mean response time."""
    marks = ", ".join("?" * len(run_ids))
    rows = conn.execute(
        "SELECT run_id, op, sum(ops) AS ops, sum(ops_per_sec) AS rate, "
        f"sum(avg_ms * ops) AS weighted FROM client_summary WHERE run_id IN ({marks}) "
        "AND op != 'total' GROUP BY run_id, op", run_ids).fetchall()
    out = {}
    for op in CLIENT_OPS:
        mine = [r for r in rows if r["op"] == op]
        ops = sum(r["ops"] for r in mine)
        if ops:
            out[op] = OpResult(statistics.fmean(r["rate"] for r in mine),
                               sum(r["weighted"] for r in mine) / ops, ops)
    return out
