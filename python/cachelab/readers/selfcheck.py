"""A run's trust figures, from what its load generators reported: order-statistic
intervals for its percentiles (analysis/trust.py over the merged HDR histograms), its
per-second series aligned on wall-clock seconds over the instances' common window, and the
self-checks of that series. Pure: reports in, records out; the statistics are scipy's,
through analysis/trust.py.

Which series the checks see: the per-second mean latency of every instance together
(requests completed in the second, weighted by their count), over the steady seconds (the
warm-up and the cool-down cut). Latency rather than throughput because the intervals are
about latency, and because in open loop the throughput is the schedule's, not the
system's.

The arrival check (trust.poisson_arrivals) tests each open-loop instance with Poisson
arrivals on the sample of send gaps its report carries (`send_intervals_ns`: the gaps
between successive sends of each load thread in the window).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.analysis import trust
from cachelab.readers import hdr, loadgen
from cachelab.spec.experiment import LoadMode

#: Fewer send gaps than this say too little about their distribution to test it.
MIN_SEND_INTERVALS = 50
#: The percentiles every run and every point carries an interval for.
PERCENTILES = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
CONFIDENCE = 0.95
#: Fewest steady seconds the independence and stationarity checks are run on.
MIN_SECONDS = 4


@dataclass(frozen=True)
class Interval:
    """A percentile of one role's clients (`load` or `measure`) with its interval, ms."""

    role: str
    name: str
    quantile: float
    estimate_ms: float
    low_ms: float
    high_ms: float
    confidence: float
    samples: int

    @property
    def width_ms(self) -> float:
        return self.high_ms - self.low_ms


def intervals(encoded: Sequence[str], role: str = "load") -> tuple[Interval, ...]:
    """p50, p90, p99 and p99.9 of the merged histograms (base64 HDR, µs), each with its
    distribution-free interval; none for an empty histogram."""
    return _intervals(tuple(encoded), role)


@functools.lru_cache(maxsize=256)
def _intervals(encoded: tuple[str, ...], role: str) -> tuple[Interval, ...]:
    merged = hdr.merge_all(list(encoded))
    if merged is None or merged.total == 0:
        return ()
    buckets = merged.buckets()
    values = [v / 1000 for v, _ in buckets]
    counts = [n for _, n in buckets]
    out = []
    for name, q in PERCENTILES.items():
        i = trust.quantile_interval(values, counts, q, CONFIDENCE)
        out.append(Interval(role, name, q, i.estimate, i.low, i.high, i.confidence,
                            i.samples))
    return tuple(out)


@dataclass(frozen=True)
class Second:
    """One wall-clock second of a run, every instance together."""

    ops: int
    #: Mean latency of the requests completed in it, ms (nan without requests).
    latency_ms: float


def aligned(loads: Sequence[loadgen.Report], offsets_s: Sequence[float] | None = None,
            start_s: float | None = None) -> dict[int, Second]:
    """The instances' per-second series on one time line: second k is [start + k, start +
    k + 1) of wall-clock time, `start` the run's common start instant (or the earliest
    instance's start). Each instance's seconds count from its own start, corrected by
    its host's clock offset (`offsets_s`: how far the host's clock is ahead of the
    harness's), and are moved by the whole seconds that start lies after `start` (with
    --start-at the instances start within microseconds, so nothing moves). Only the
    seconds every instance covers are kept."""
    if not loads:
        return {}
    offsets = list(offsets_s) if offsets_s is not None else [0.0] * len(loads)
    starts = [r.started_unix_ms / 1000 - off for r, off in zip(loads, offsets, strict=True)]
    origin = min(starts) if start_s is None else start_s
    shifts = [round(s - origin) for s in starts]
    spans = []
    per_second: dict[int, list[float]] = {}
    for r, shift in zip(loads, shifts, strict=True):
        seconds = {row.second for row in r.series}
        if not seconds:
            return {}
        spans.append((shift + min(seconds), shift + max(seconds)))
        for row in r.series:
            acc = per_second.setdefault(shift + row.second, [0.0, 0.0])
            acc[0] += row.ops
            acc[1] += row.ops * row.latency_ms_avg
    low, high = max(a for a, _ in spans), min(b for _, b in spans)
    return {k: Second(int(ops), total / ops if ops else math.nan)
            for k, (ops, total) in sorted(per_second.items()) if low <= k <= high}


def steady(seconds: dict[int, Second], run_time: float, warmup: float,
           cooldown: float) -> dict[int, Second]:
    """The whole seconds inside [warmup, run_time - cooldown]."""
    end = run_time - cooldown
    return {k: v for k, v in seconds.items() if k >= warmup and k + 1 <= end + 1e-9}


def checks(loads: Sequence[loadgen.Report], *, mode: LoadMode, run_time: float, warmup: float,
           cooldown: float, offsets_s: Sequence[float] | None = None,
           start_s: float | None = None) -> tuple[trust.Check, ...]:
    """The run's self-checks: independence and stationarity of its steady per-second
    latency (with at least MIN_SECONDS seconds that had requests), in closed loop the
    load generators' CPU (the busiest thread of any instance), and in open loop with
    Poisson arrivals whether the sends were exponential (the worst instance)."""
    out: list[trust.Check] = []
    series = steady(aligned(loads, offsets_s, start_s), run_time, warmup, cooldown)
    latency = [s.latency_ms for s in series.values() if s.ops]
    if len(latency) >= MIN_SECONDS:
        out += [trust.independence(latency), trust.stationarity(latency)]
    cpus = [r.client_cpu.busiest_thread_share for r in loads if r.client_cpu is not None]
    if mode == LoadMode.CLOSED and cpus:
        out.append(trust.client_saturation(max(cpus)))
    arrivals = [trust.poisson_arrivals(r.send_intervals_ns) for r in loads
                if r.configuration.get("arrival") == "poisson"
                and len(r.send_intervals_ns) >= MIN_SEND_INTERVALS]
    if arrivals:
        # One verdict for the run: the instance whose sends fit worst.
        out.append(min(arrivals, key=lambda c: (c.passed, c.p_value)))
    return tuple(out)
