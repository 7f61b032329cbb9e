"""The plots of the workload section (report/workload.py's data), each `plot_x(ax, ...)`
on a matplotlib Axes it is given, as plots.py's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
from matplotlib.axes import Axes

from cachelab.report.figures import Figures
from cachelab.report.workload import Bucket, PointWorkload, Sizes


def plot_sizes(ax: Axes, sizes: Sizes, what: str) -> None:
    """Share of requests per power-of-two size bucket, bars at the buckets' ranges."""
    total = sum(b.count for b in sizes.buckets) or 1.0
    labels = [_range(b) for b in sizes.buckets]
    ax.bar(range(len(labels)), [b.count / total for b in sizes.buckets], color="#4e79a7")
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_xlabel(f"{what} size (bytes, power-of-two buckets)")
    ax.set_ylabel(f"share ({sizes.source})")
    ax.set_title(f"{what} sizes: {sizes.described}", fontsize=9)
    ax.grid(True, axis="y", alpha=0.3)


def _range(b: Bucket) -> str:
    return f"{_bytes(b.low)}-{_bytes(b.high)}"


def _bytes(n: int) -> str:
    for unit, size in (("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size and (n + 1) % size == 0:
            return f"{(n + 1) // size}{unit}"
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def plot_popularity(ax: Axes, top: Sequence[int], distinct: int | None,
                    capped: bool) -> None:
    """Rank-frequency of the most asked keys on log-log axes, with the zipf exponent of a
    least-squares line through them (in log space)."""
    ranks = np.arange(1, len(top) + 1)
    counts = np.asarray(top, dtype=float)
    ax.loglog(ranks, counts, ".", markersize=3, color="#4e79a7", label="keys")
    keep = counts > 0
    if keep.sum() >= 3:
        slope, intercept = np.polyfit(np.log(ranks[keep]), np.log(counts[keep]), 1)
        ax.loglog(ranks, np.exp(intercept) * ranks ** slope, "--", color="#e15759",
                  label=f"fit: exponent {-slope:.2f}")
        ax.legend(fontsize=8)
    ax.set_xlabel("key rank (most asked first)")
    ax.set_ylabel("requests")
    more = f", {distinct:,} distinct{' (counting capped)' if capped else ''}" \
        if distinct is not None else ""
    ax.set_title(f"key popularity: the {len(top):,} most asked{more}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)


def plot_gaps(ax: Axes, gaps_ns: Sequence[int]) -> None:
    """The gaps between successive sends: their complementary CDF, log y (an exponential
    is a straight line), gaps in µs."""
    gaps = np.sort(np.asarray(gaps_ns, dtype=float)) / 1000
    tail = 1 - np.arange(len(gaps)) / len(gaps)
    ax.semilogy(gaps, tail, color="#4e79a7")
    ax.set_xlabel("gap between sends (µs)")
    ax.set_ylabel("share of gaps longer")
    ax.set_title(f"inter-arrival gaps: {len(gaps):,} sampled, mean "
                 f"{gaps.mean():.3g} µs", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)


def plot_hit_ratio(ax: Axes, series: Sequence[tuple[int, float]]) -> None:
    """The hit ratio of GETs, second by second over the whole run."""
    ax.plot([s for s, _ in series], [h for _, h in series], "-o", markersize=3,
            color="#59a14f")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("second of the run")
    ax.set_ylabel("GET hit ratio")
    ax.set_title("hit ratio over time", fontsize=9)
    ax.grid(True, alpha=0.3)


def add_figures(work: Sequence[PointWorkload], figures: Figures) -> None:
    """One grid per point, in section `workload`: what of its workload is known."""
    for w in work:
        draws: list[Callable[[Axes], None]] = []
        if w.values is not None and w.values.buckets:
            draws.append(partial(plot_sizes, sizes=w.values, what="value"))
        if w.keys is not None and w.keys.buckets:
            draws.append(partial(plot_sizes, sizes=w.keys, what="key"))
        if w.top:
            draws.append(partial(plot_popularity, top=w.top, distinct=w.distinct,
                                 capped=w.capped))
        if w.gaps_ns:
            draws.append(partial(plot_gaps, gaps_ns=w.gaps_ns))
        if w.hit_ratio:
            draws.append(partial(plot_hit_ratio, series=w.hit_ratio))
        if draws:
            figures.add_grid("workload", f"workload-{w.point.index + 1}",
                             f"#{w.point.index + 1} {w.point.name}: the workload sent "
                             f"({'replay of ' + w.trace if w.trace else w.mode + ' loop'})",
                             draws, ncols=2, width=11, height=3.4)
