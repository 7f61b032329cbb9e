"""A scale model's figures back at full speed (`topology.scale = k`, docs/topologies.md).

A scale model runs the emulated data centre k times slower: link rates and CPU quotas
divided by k, delays and queues multiplied by k. Every service, transfer and delay time is
then k times longer and every ratio between them is kept, so the full-speed system's
throughput is the measured one times k and its latencies the measured ones divided by k.
`point` applies that to what the report shows of a point (throughput, response times,
percentiles and their intervals, the decomposition, per-operation figures, the link
bound); CPU shares and queue lengths are ratios and stay as measured. Pure.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from cachelab import linkbound
from cachelab.report import measure
from cachelab.store import StoredInterval

if TYPE_CHECKING:
    from cachelab.report.data import PointResult


def _times(x: float | None, f: float) -> float | None:
    return None if x is None else x * f


def interval(i: StoredInterval, k: float) -> StoredInterval:
    return dataclasses.replace(i, estimate_ms=i.estimate_ms / k, low_ms=i.low_ms / k,
                               high_ms=i.high_ms / k)


def point(p: PointResult, k: float) -> PointResult:
    """The point's figures at full speed; `k` = 1 returns it unchanged."""
    if k == 1:
        return p
    return dataclasses.replace(
        p,
        throughput=_times(p.throughput, k), throughput_std=_times(p.throughput_std, k),
        response_ms=_times(p.response_ms, 1 / k), response_std=_times(p.response_std, 1 / k),
        percentiles_ms={n: v / k for n, v in p.percentiles_ms.items()},
        decomposition=None if p.decomposition is None else
        {s: v / k for s, v in p.decomposition.items()},
        server_service_us=tuple(v / k for v in p.server_service_us),
        link_bound=None if p.link_bound is None else
        linkbound.Bound(p.link_bound.ops_per_s * k, p.link_bound.limit),
        ops={n: measure.OpResult(o.throughput * k, o.response_ms / k, o.requests)
             for n, o in p.ops.items()},
        intervals={role: {n: interval(i, k) for n, i in by_name.items()}
                   for role, by_name in p.intervals.items()},
        scale=k)
