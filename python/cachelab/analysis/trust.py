"""How far a run's figures can be trusted: distribution-free confidence intervals for its
percentiles, and self-checks of the assumptions behind its averages.

A p99 from a few seconds of samples is an estimate; its interval comes from order
statistics, which need no assumption about the latency distribution (the number of samples
below the true quantile is binomial). The checks are the ones a careful reviewer asks for
(Lancet, NSDI '19): are successive samples independent, is the run stationary (no drift,
no late warm-up), did the open-loop sender follow the distribution it claims, and was
the load generator itself the bottleneck. Each returns a verdict with its statistic, its
p-value and a one-line reason, so a report can flag a run as it flags send lag.

Every statistic comes from scipy; nothing here is hand-written statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from cachelab.analysis.errors import AnalysisError

#: Significance level of the self-checks: a p-value below it fails the check.
ALPHA = 0.05
#: A closed-loop run whose load generator used more of its CPU than this is flagged: the
#: throughput it measured may be the client's, not the system's.
CLIENT_CPU_LIMIT = 0.85


@dataclass(frozen=True)
class QuantileInterval:
    """The `quantile` of a sample, with a distribution-free `confidence` interval."""

    quantile: float
    estimate: float
    low: float
    high: float
    confidence: float
    samples: int

    @property
    def width(self) -> float:
        return self.high - self.low


@dataclass(frozen=True)
class Check:
    """A self-check's verdict: `passed`, the test's statistic and p-value, and why."""

    name: str
    passed: bool
    statistic: float
    p_value: float
    reason: str


def quantile_interval(
    values: Sequence[float],
    counts: Sequence[int],
    quantile: float,
    confidence: float = 0.95,
) -> QuantileInterval:
    """The order-statistic interval of `quantile` for a histogram (`values` ascending, each
    seen `counts` times, as a merged HDR histogram gives them).

    With n samples, the number of samples below the true quantile q is Binomial(n, q), so
    the samples of ranks l = F^-1(a/2) and u = F^-1(1 - a/2) + 1 of that binomial bound q
    with probability at least 1 - a, whatever the latency distribution.
    """
    if not 0 < quantile < 1:
        raise AnalysisError(f"quantile must be between 0 and 1, got {quantile}")
    if not 0 < confidence < 1:
        raise AnalysisError(f"confidence must be between 0 and 1, got {confidence}")
    vals = np.asarray(values, dtype=float)
    cum = np.cumsum(np.asarray(counts, dtype=np.int64))
    if len(vals) != len(cum) or len(vals) == 0 or cum[-1] == 0:
        raise AnalysisError("a quantile interval needs a non-empty histogram")
    if np.any(np.diff(vals) < 0):
        raise AnalysisError("histogram values must be ascending")
    n = int(cum[-1])
    alpha = 1 - confidence
    binomial = stats.binom(n, quantile)
    low_rank = max(1, int(binomial.ppf(alpha / 2)))
    high_rank = min(n, int(binomial.ppf(1 - alpha / 2)) + 1)
    est_rank = max(1, int(np.ceil(quantile * n)))

    def at(rank: int) -> float:
        return float(vals[int(np.searchsorted(cum, rank))])

    return QuantileInterval(
        quantile=quantile,
        estimate=at(est_rank),
        low=at(low_rank),
        high=at(high_rank),
        confidence=confidence,
        samples=n,
    )


def independence(series: Sequence[float], alpha: float = ALPHA) -> Check:
    """Whether successive values (per-interval throughput or latency) are independent:
    Spearman's rank correlation of each value with the next. Correlated samples make
    every confidence interval too narrow."""
    x = _series(series, 4, "independence")
    if np.all(x == x[0]):
        return Check("independence", True, 0.0, 1.0, "constant series")
    result = stats.spearmanr(x[:-1], x[1:])
    rho, p = float(result.statistic), float(result.pvalue)
    passed = not (p < alpha and rho > 0)
    reason = (
        f"successive values uncorrelated (Spearman rho {rho:.2f}, p {p:.3f})"
        if passed
        else f"successive values correlated (Spearman rho {rho:.2f}, p {p:.3f})"
    )
    return Check("independence", passed, rho, p, reason)


def stationarity(series: Sequence[float], alpha: float = ALPHA) -> Check:
    """Whether the run has no trend (a drift, a late warm-up, a slow leak): Kendall's tau
    of the values against time (the Mann-Kendall trend test)."""
    x = _series(series, 4, "stationarity")
    if np.all(x == x[0]):
        return Check("stationarity", True, 0.0, 1.0, "constant series")
    result = stats.kendalltau(np.arange(len(x)), x)
    tau, p = float(result.statistic), float(result.pvalue)
    passed = not p < alpha
    reason = (
        f"no trend over the run (Kendall tau {tau:.2f}, p {p:.3f})"
        if passed
        else f"the run drifts (Kendall tau {tau:.2f}, p {p:.3f})"
    )
    return Check("stationarity", passed, tau, p, reason)


def poisson_arrivals(intervals: Sequence[float], alpha: float = ALPHA) -> Check:
    """Whether open-loop send intervals are exponential (Poisson arrivals), by the
    Anderson-Darling test with the scale fitted (p-value interpolated from its tables,
    which give 0.15 at most and 0.01 at least)."""
    x = _series(intervals, 8, "the arrival check")
    if np.any(x < 0):
        raise AnalysisError("send intervals cannot be negative")
    result = stats.anderson(x, dist="expon", method="interpolate")
    statistic, p = float(result.statistic), float(result.pvalue)
    passed = not p < alpha
    reason = (
        f"send intervals fit an exponential (Anderson-Darling {statistic:.2f}, p {p:.2f})"
        if passed
        else f"send intervals are not exponential (Anderson-Darling {statistic:.2f}, p {p:.2f})"
    )
    return Check("arrivals", passed, statistic, p, reason)


def client_saturation(cpu_fraction: float, limit: float = CLIENT_CPU_LIMIT) -> Check:
    """Whether the load generator stayed under `limit` of its CPU (user + system time over
    its threads' wall time); above it, a closed loop measured the client."""
    if cpu_fraction < 0:
        raise AnalysisError(f"a CPU fraction cannot be negative, got {cpu_fraction}")
    passed = cpu_fraction <= limit
    reason = (
        f"load generator at {cpu_fraction:.0%} of its CPU"
        if passed
        else f"load generator at {cpu_fraction:.0%} of its CPU (over {limit:.0%}): "
        "the throughput may be the client's"
    )
    return Check("client CPU", passed, cpu_fraction, float("nan"), reason)


def narrow_enough(interval: QuantileInterval, width: float) -> bool:
    """`validation.stop_when`: whether a percentile's interval is already narrower than
    `width` (in the interval's unit), so no more repetitions are needed for it."""
    return interval.width <= width


def _series(values: Sequence[float], minimum: int, what: str) -> np.ndarray:
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or len(x) < minimum:
        raise AnalysisError(f"{what} needs at least {minimum} values, got {len(x)}")
    if not np.all(np.isfinite(x)):
        raise AnalysisError(f"{what} needs finite values")
    return x
