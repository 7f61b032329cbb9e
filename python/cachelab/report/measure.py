"""What the middlewares and the clients measured at one point, summed over the steady part
of its runs: the inputs of the decomposition, the queueing models and the per-operation
plots. Reads through the store's typed records; no SQL, no analysis.

Rates (per second, all middlewares):

    lambda = mean over runs of sum over middlewares of  sum(arrivals) / sum(window seconds)
    X      = mean over runs of sum over middlewares of  sum(throughput x window seconds)
                                                        / sum(window seconds)

Times merge the Welford triples of every steady window exactly (all operation types, all
middlewares, all runs). Server j's visit ratio is its answers over the requests the
middlewares completed: n_j / n.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from cachelab.readers import hdr
from cachelab.readers.proxy_stats import Welford
from cachelab.store import WELFORD_METRICS, ClientOpTotals, Store, StoredRun, WindowKey

#: Welford metrics of the middleware (the stats file's `<metric>_us` objects).
METRICS = WELFORD_METRICS
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


#: The percentiles taken per operation type, by name and quantile.
OP_PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


@dataclass(frozen=True)
class OpResult:
    """One client operation type at a point: ops/s of that type only (mean over runs, all
    instances: a multi-GET's throughput counts no SET), the mean response time (weighted
    by requests), and percentiles of the merged HDR histograms of every instance of every
    run (never a mean of per-instance percentiles); empty without histograms."""

    throughput: float
    response_ms: float
    requests: int
    percentiles_ms: dict[str, float] = field(default_factory=dict)


def steady_windows(s: Store, runs: Sequence[StoredRun],
                   settings: dict[str, Any]) -> list[WindowKey]:
    """(run id, middleware, window) of the middleware windows whose midpoint lies in the
    run's steady part, [start + warm-up, start + run time - cool-down]."""
    out = []
    for r in runs:
        out += s.window_keys(r.id, r.started_at + settings["warmup_s"],
                             r.started_at + settings["run_time_s"] - settings["cooldown_s"])
    return out


def middleware(s: Store, keys: list[WindowKey]) -> MiddlewareTotals | None:
    """The totals over the given windows; None without windows or requests."""
    if not keys:
        return None
    stages = {m: Welford(0, 0.0, 0.0) for m in METRICS}
    requests = 0
    for o in s.middleware_ops(keys):
        requests += o.count
        for m in METRICS:
            stages[m] = stages[m].merge(o.stages[m])
    if stages["response"].count == 0:
        return None
    per_run: dict[int, dict[str, float]] = {}
    queue_all = Welford(0, 0.0, 0.0)
    queue_by: dict[tuple[int, int], Welford] = {}
    for w in s.middleware_rates(keys):
        run = per_run.setdefault(w.run_id, {"lam": 0.0, "x": 0.0})
        if w.seconds > 0:
            run["lam"] += w.arrivals / w.seconds
            run["x"] += w.completed / w.seconds
    for q in s.middleware_queues(keys):
        queue_all = queue_all.merge(q.queue_len)
        key = (q.run_id, q.middleware)
        queue_by[key] = queue_by.get(key, Welford(0, 0.0, 0.0)).merge(q.queue_len)
    totals: dict[int, float] = {}
    for (run_id, _), q_len in queue_by.items():
        if q_len.count:
            totals[run_id] = totals.get(run_id, 0.0) + q_len.mean
    servers: dict[int, tuple[int, Welford]] = {}
    for row in s.server_services(keys):
        n, w_ = servers.get(row.server, (0, Welford(0, 0.0, 0.0)))
        servers[row.server] = (n + row.service.count, w_.merge(row.service))
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


def client_ops(rows: Sequence[ClientOpTotals],
               histograms: dict[str, list[str]] | None = None) -> dict[str, OpResult]:
    """Per operation type with requests: throughput and mean response time, and the
    percentiles of its merged histograms (`histograms`: op -> encoded, every instance)."""
    out = {}
    for op in CLIENT_OPS:
        mine = [r for r in rows if r.op == op]
        ops = sum(r.ops for r in mine)
        if ops:
            out[op] = OpResult(statistics.fmean(r.rate for r in mine),
                               sum(r.weighted_ms for r in mine) / ops, ops,
                               merged_percentiles((histograms or {}).get(op, [])))
    return out


def merged_percentiles(encoded: list[str]) -> dict[str, float]:
    """p50, p90, p99 in ms of the merge of the encoded histograms (µs values); {} when
    there are none or they are empty."""
    merged = hdr.merge_all(encoded)
    if merged is None or merged.total == 0:
        return {}
    return {name: merged.quantile(q) / 1000 for name, q in OP_PERCENTILES}
