"""HDR histograms as the load generator and the middleware write them (HdrHistogram's
compressed V2 encoding, base64), decoded and merged by the `hdrhistogram` package (`hdrh`),
so the harness can merge the histograms of several instances, runs or windows and take
exact percentiles of the merged distribution.

Percentiles follow the Rust `hdrhistogram` crate's `value_at_quantile` (the highest value
equivalent to the first bucket whose cumulative count reaches ceil(q x total)), so they
equal the ones the tools print; `hdrh`'s own `get_value_at_percentile` rounds the rank to
the nearest count instead, which differs from the tools' p99 on some windows
(tests/test_loadgen_hdr.py shows one).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from hdrh.histogram import HdrHistogram


class HdrError(ValueError):
    """Bytes that are not a V2 compressed histogram, or histograms that cannot merge."""


class Histogram:
    """A decoded histogram; `merge` leaves both operands unchanged."""

    def __init__(self, hdr: HdrHistogram) -> None:
        self._hdr = hdr

    @property
    def layout(self) -> tuple[int, int]:
        """(lowest discernible value, significant digits): what fixes the buckets."""
        return self._hdr.lowest_trackable_value, self._hdr.significant_figures

    @property
    def total(self) -> int:
        return int(self._hdr.get_total_count())

    @property
    def counts(self) -> dict[int, int]:
        """Counts per value (the lowest value of each non-empty bucket)."""
        return {self._hdr.get_lowest_equivalent_value(value): count
                for value, count in self._recorded()}

    def buckets(self) -> list[tuple[int, int]]:
        """(value, count) of every non-empty bucket in ascending order, each value the
        bucket's highest equivalent value (the one `quantile` reports)."""
        return list(self._recorded())

    def merge(self, other: Histogram) -> Histogram:
        return _merged([self, other])

    def quantile(self, q: float) -> int:
        """The value at quantile q in [0, 1] as the Rust crate gives it; 0 when empty."""
        total = self.total
        if total == 0:
            return 0
        target = max(math.ceil(min(q, 1.0) * total), 1)
        seen = 0
        for value, count in self._recorded():
            seen += count
            if seen >= target:
                return value
        return self.max()

    def max(self) -> int:
        return int(self._hdr.get_max_value())

    def _recorded(self) -> Iterator[tuple[int, int]]:
        """(highest equivalent value, count) of every non-empty bucket, in order."""
        for step in self._hdr.get_recorded_iterator():
            yield step.value_iterated_to, step.count_at_value_iterated_to


def decode(text: str) -> Histogram:
    """A histogram from its base64 V2 compressed encoding."""
    try:
        return Histogram(HdrHistogram.decode(text))
    except Exception as exc:  # hdrh raises its own kinds, zlib's and base64's
        raise HdrError(f"not a V2 compressed HDR histogram: {exc or type(exc).__name__}") \
            from None


def merge_all(encoded: list[str]) -> Histogram | None:
    """The merge of several encoded histograms; None when there are none."""
    return _merged([decode(text) for text in encoded]) if encoded else None


def _merged(parts: list[Histogram]) -> Histogram:
    """One histogram holding the counts of all `parts` (which must share a layout)."""
    first = parts[0]
    for other in parts[1:]:
        if other.layout != first.layout:
            raise HdrError(f"cannot merge histograms of layouts {first.layout} and "
                           f"{other.layout}")
    lowest, digits = first.layout
    merged = HdrHistogram(lowest, max(h._hdr.highest_trackable_value for h in parts), digits)
    for h in parts:
        merged.add(h._hdr)
    return Histogram(merged)
