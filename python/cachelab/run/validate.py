"""Validation of the measurements: steady windows, coefficients of variation, and the
decision to run another repetition. Pure functions.

A run's within-run CV is over its per-second client throughput after cutting the warm-up
and the cool-down. A run whose within-run CV is above the threshold is *unsteady*: it stays
in the database but is left out of its point's aggregates, and does not count towards the
repetitions. A point is *stable* when it has at least the planned number of steady runs and
the CV of their throughputs (between repetitions) is under the threshold. An unstable point
gets one more run at a time until it is stable or has `max_repetitions` runs; the report
lists the points that stayed unstable.

Unsteady runs are replaced beyond that bound: while a point has fewer than `repetitions`
steady runs it gets another run as long as it has fewer than `repetitions +
max_replacements` runs in all (`validation.replace_unsteady`, by default as many as the
repetitions). A factorial design needs the same r steady runs at every point; with
`max_repetitions = r` one unsteady run would otherwise leave its point, and so the whole
design, at r - 1.

With `validation.stop_when.p99_width_ms`, a point is not settled until the order-statistic
interval of its p99 (selfcheck.py, over the merged histograms of its steady runs) is at
most that wide either, as Lancet keeps measuring until its intervals are narrow enough;
`max_repetitions` still bounds it.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.readers import hdr, loadgen, selfcheck
from cachelab.store import RunSummary


def cv(values: Sequence[float]) -> float | None:
    """Sample standard deviation over mean; None below two values or for a zero mean."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values) / mean if mean > 0 else None


def steady_seconds(per_second: dict[int, float], run_time: float, warmup: float,
                   cooldown: float) -> list[float]:
    """The values of the whole seconds [s, s + 1) that lie inside [warmup, run_time -
    cooldown]."""
    end = run_time - cooldown
    return [v for s, v in sorted(per_second.items()) if s >= warmup and s + 1 <= end + 1e-9]


def summarise(loads: Sequence[loadgen.Report], *, run_time: float, warmup: float,
              cooldown: float, offsets_s: Sequence[float] | None = None,
              start_s: float | None = None) -> RunSummary:
    """The run's client-side numbers over every load generator instance: throughputs add
    up, the mean response time is weighted by requests, the percentiles come from the
    merged HDR histograms (so they are exact over all instances). The within-run CV is
    over the per-second throughput on wall-clock seconds, over the seconds every
    instance covers (selfcheck.aligned)."""
    totals = [r.summary["total"] for r in loads]
    ops = sum(t.ops for t in totals)
    response = sum(t.latency_ms["avg"] * t.ops for t in totals) / ops if ops else 0.0
    merged = hdr.merge_all([r.histograms["total"] for r in loads])
    quantiles = [merged.quantile(q) / 1000 if merged else 0.0 for q in (0.5, 0.9, 0.99, 0.999)]
    per_second = {k: float(v.ops) for k, v in
                  selfcheck.aligned(loads, offsets_s, start_s).items()}
    return RunSummary(
        throughput=sum(t.ops_per_sec for t in totals),
        response_ms=response,
        p50_ms=quantiles[0], p90_ms=quantiles[1], p99_ms=quantiles[2], p999_ms=quantiles[3],
        max_ms=merged.max() / 1000 if merged else 0.0,
        hits=sum(t.hits for t in totals),
        misses=sum(t.misses for t in totals),
        errors=sum(t.errors for t in totals),
        cv_within=cv(steady_seconds(per_second, run_time, warmup, cooldown)),
        fell_behind=(any((r.open_loop or {}).get("fell_behind", False) for r in loads)
                     if any(r.open_loop for r in loads) else None),
        send_lag_p99_ms=max((r.open_loop["send_lag_ms"]["p99"] for r in loads
                             if r.open_loop), default=None),
    )


@dataclass(frozen=True)
class RunOutcome:
    """What validation needs of a finished run."""

    throughput: float
    cv_within: float | None
    #: The run's load instances' `total` histograms (base64 HDR), for stop_when.
    histograms: tuple[str, ...] = ()
    #: The measuring client's, for the point's intervals.
    measure_histograms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    runs: int
    #: Indexes (into the runs given) of the steady runs, those the aggregates use.
    steady: tuple[int, ...]
    cv_between: float | None
    stable: bool
    #: Whether the runner should run this point again.
    more: bool
    reason: str


def is_steady(run: RunOutcome, threshold: float) -> bool:
    """A run with fewer than two steady seconds cannot be judged and counts as steady."""
    return run.cv_within is None or run.cv_within <= threshold


def p99_interval(runs: Sequence[RunOutcome]) -> selfcheck.Interval | None:
    """The p99 with its interval over the merged histograms of `runs`."""
    found = selfcheck.intervals([h for r in runs for h in r.histograms])
    return next((i for i in found if i.name == "p99"), None)


def assess(runs: Sequence[RunOutcome], *, threshold: float, repetitions: int,
           max_repetitions: int, max_replacements: int = 0,
           stop_width_ms: float | None = None) -> Verdict:
    """Whether a point's runs so far are enough, following the rule in the module doc."""
    steady = tuple(i for i, r in enumerate(runs) if is_steady(r, threshold))
    sample = [runs[i].throughput for i in steady] or [r.throughput for r in runs]
    between = cv(sample)
    if len(runs) < repetitions:
        return Verdict(len(runs), steady, between, False, True,
                       f"{len(runs)} of {repetitions} planned runs")
    problems = []
    if len(steady) < repetitions:
        problems.append(f"{len(runs) - len(steady)} run(s) with a within-run CV above "
                        f"{threshold:.0%}")
    if between is not None and between > threshold:
        problems.append(f"CV between repetitions {between:.1%} > {threshold:.0%}")
    if stop_width_ms is not None:
        p99 = p99_interval([runs[i] for i in steady])
        if p99 is None:
            problems.append("no p99 interval yet (no histograms)")
        elif p99.width_ms > stop_width_ms:
            problems.append(f"p99 interval {p99.width_ms:.3g} ms wide > {stop_width_ms:g} ms")
    if not problems:
        return Verdict(len(runs), steady, between, True, False, "stable")
    more = len(runs) < max_repetitions or (len(steady) < repetitions
                                           and len(runs) < repetitions + max_replacements)
    bound = "" if more else f" after {len(runs)} runs (the bound)"
    return Verdict(len(runs), steady, between, False, more, "; ".join(problems) + bound)

