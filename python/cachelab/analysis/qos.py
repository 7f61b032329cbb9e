"""The QoS throughput: the highest throughput whose latency percentile stays under a target.

A sweep (over clients in closed loop, over offered rate in open loop) gives one point per load:
the throughput achieved and a latency percentile (p99 by default in the report, but any
percentile works: the function only compares the number it is given with the target).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from cachelab.analysis.errors import AnalysisError


@dataclass(frozen=True)
class Point:
    """One measured load: the load applied, the throughput achieved, the latency percentile."""

    load: float
    throughput: float
    latency: float


@dataclass(frozen=True)
class QosResult:
    """The best throughput meeting the target, and where it came from.

    `point` is the measured point that met the target. When the answer was interpolated,
    `load`, `throughput` and `latency` (= the target) lie on the segment from `point` to
    `beyond`, the neighbouring measured point that missed the target; otherwise they are
    `point`'s own values and `beyond` is None.
    """

    load: float
    throughput: float
    latency: float
    point: Point
    beyond: Point | None = None

    @property
    def interpolated(self) -> bool:
        """Whether the answer lies between two measured points rather than on one."""
        return self.beyond is not None


def max_throughput_under(
    points: Iterable[Point], target: float, *, interpolate: bool = False
) -> QosResult | None:
    """Returns the highest throughput among the points whose latency is <= `target`.

    With `interpolate`, each pair of neighbouring loads whose latencies straddle the target
    also offers the point where the straight line between them reaches the target (load and
    throughput interpolated linearly). Interpolation is off by default because a latency
    curve near saturation is far from straight, so an interpolated answer is a guess the
    caller must ask for. Returns None when no point meets the target; ties in throughput go
    to the lower load.
    """
    ordered = sorted(_checked(points), key=lambda p: p.load)
    if not math.isfinite(target) or target <= 0:
        raise AnalysisError(f"QoS target must be a positive number, got {target!r}")
    candidates = [QosResult(p.load, p.throughput, p.latency, p) for p in ordered
                  if p.latency <= target]
    if interpolate:
        for left, right in zip(ordered, ordered[1:], strict=False):
            crossing = _crossing(left, right, target)
            if crossing is not None:
                candidates.append(crossing)
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c.throughput, -c.load))


def _crossing(left: Point, right: Point, target: float) -> QosResult | None:
    """The point where the segment left-right reaches the target, if it straddles it."""
    if (left.latency <= target) == (right.latency <= target):
        return None
    good, bad = (left, right) if left.latency <= target else (right, left)
    fraction = (target - good.latency) / (bad.latency - good.latency)
    return QosResult(
        load=good.load + fraction * (bad.load - good.load),
        throughput=good.throughput + fraction * (bad.throughput - good.throughput),
        latency=target,
        point=good,
        beyond=bad,
    )


def _checked(points: Iterable[Point]) -> list[Point]:
    result = list(points)
    for p in result:
        if not all(math.isfinite(v) for v in (p.load, p.throughput, p.latency)):
            raise AnalysisError(f"QoS point has a non-finite value: {p}")
        if p.throughput < 0 or p.latency < 0:
            raise AnalysisError(f"QoS point has a negative throughput or latency: {p}")
    return result
