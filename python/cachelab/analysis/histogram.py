"""Response-time histograms with Freedman-Diaconis buckets and one overflow bucket.

Latency distributions have long tails: buckets sized to cover the maximum would squeeze the
body of the distribution into a few bars. So values above a cutoff (a given value, or a high
percentile) are counted in one overflow bucket, and the bucket width comes from the
interquartile range, which the tail does not move.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from cachelab.analysis.errors import AnalysisError

#: More buckets than this are merged (the width grows) so a tiny IQR over a wide range
#: cannot allocate millions of empty buckets.
MAX_BUCKETS = 10_000


@dataclass(frozen=True)
class Histogram:
    """Bucket i holds values in [edges[i], edges[i+1]); the last bucket also holds its upper
    edge, which is >= `cutoff`. `overflow` counts values above `cutoff`.

    When every value is the same there is one bucket of width 0 holding them all.
    """

    edges: tuple[float, ...]
    counts: tuple[int, ...]
    overflow: int
    cutoff: float
    width: float

    @property
    def total(self) -> int:
        return sum(self.counts) + self.overflow


def freedman_diaconis_width(values: Sequence[float] | np.ndarray) -> float:
    """The Freedman-Diaconis bucket width, 2 IQR / n^(1/3).

    The IQR uses numpy's default (linear) percentiles. Returns 0 when the IQR is 0 (more
    than half the values equal); `histogram` then falls back to Sturges' rule.
    """
    data = _finite(values)
    q1, q3 = np.percentile(data, [25, 75])
    return float(2.0 * (q3 - q1) / len(data) ** (1.0 / 3.0))


def histogram(
    values: Sequence[float] | np.ndarray,
    *,
    cutoff: float | None = None,
    cutoff_percentile: float | None = None,
    width: float | None = None,
    start: float | None = None,
) -> Histogram:
    """Counts `values` in equal buckets from `start` up to a cutoff, plus an overflow bucket.

    - `cutoff`: values above it go to the overflow bucket; or `cutoff_percentile` (e.g. 99)
      takes that percentile of the values; with neither, the maximum (no overflow).
    - `width`: the bucket width; by default Freedman-Diaconis over the values up to the
      cutoff, or Sturges' rule, range / (log2 n + 1), when their IQR is 0 (as numpy's
      "auto" does). Pass the width and start of one histogram to another to compare two
      distributions (middleware and client) bucket by bucket.
    - `start`: the lower edge of the first bucket; by default the minimum value.
    """
    data = _finite(values)
    if cutoff is not None and cutoff_percentile is not None:
        raise AnalysisError("give either a cutoff or a cutoff percentile, not both")
    if cutoff_percentile is not None:
        if not 0 < cutoff_percentile <= 100:
            raise AnalysisError(f"cutoff percentile must be in (0, 100], got {cutoff_percentile}")
        cutoff = float(np.percentile(data, cutoff_percentile))
    lowest = float(data.min())
    start = lowest if start is None else float(start)
    if start > lowest:
        raise AnalysisError(f"histogram start {start} is above the smallest value {lowest}")
    cutoff = float(data.max()) if cutoff is None else float(cutoff)
    if cutoff < start:
        raise AnalysisError(f"histogram cutoff {cutoff} is below its start {start}")
    body = data[data <= cutoff]
    overflow = len(data) - len(body)
    span = cutoff - start
    if span == 0:
        return Histogram((start, start), (len(body),), overflow, cutoff, 0.0)
    if width is None:
        width = _default_width(body, span)
    if not math.isfinite(width) or width <= 0:
        raise AnalysisError(f"bucket width must be positive, got {width}")
    buckets = max(1, math.ceil(span / width))
    if buckets > MAX_BUCKETS:
        buckets, width = MAX_BUCKETS, span / MAX_BUCKETS
    edges = start + width * np.arange(buckets + 1)
    edges[-1] = max(edges[-1], cutoff)  # rounding must not push the cutoff out of the last
    counts, _ = np.histogram(body, bins=edges)
    return Histogram(tuple(edges.tolist()), tuple(counts.tolist()), overflow, cutoff, width)


def _default_width(body: np.ndarray, span: float) -> float:
    """Freedman-Diaconis, or Sturges when the IQR is 0 but the values are not all equal."""
    if len(body) > 0:
        fd = freedman_diaconis_width(body)
        if fd > 0:
            return fd
    return span / (math.log2(max(len(body), 1)) + 1.0)


def _finite(values: Sequence[float] | np.ndarray) -> np.ndarray:
    data = np.asarray(values, dtype=float).ravel()
    if data.size == 0:
        raise AnalysisError("a histogram needs at least one value")
    if not np.all(np.isfinite(data)):
        raise AnalysisError("histogram values must be finite numbers")
    return data
