"""The plots of the report's analysis sections, each `plot_x(ax, ...)` on a matplotlib Axes
it is given (no pyplot): factorial designs, queueing models beside the measurements,
distributions, utilisation, latency against throughput, and per operation type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from cachelab.analysis import factorial
from cachelab.report.data import Curve, known, percentile_error, percentile_ms
from cachelab.report.designs import Analysed
from cachelab.report.distributions import OpDistribution
from cachelab.report.models import MvaSection, QueueingPoint, utilisation
from cachelab.report.plots import LineStyle, x_axis

MODEL_STYLES: dict[str, LineStyle] = {"measured": "-", "M/M/1": ":", "M/M/m": "--"}
OP_STYLES: dict[str, LineStyle] = {"get": "-", "multiget": "-.", "set": "--"}


def _legend(ax: Axes, handles: list[Any], **kw: Any) -> None:
    if handles:
        ax.legend(handles=handles, fontsize="x-small", **kw)


def plot_allocation(ax: Axes, analysed: Analysed, labels: dict[str, str]) -> None:
    """Allocation of variation: the share of each effect and of the error, one bar per
    response (Jain, section 18.3)."""
    names = list(analysed.results)
    first = analysed.results[names[0]]
    effects = [e.name for e in first.effects if e.name != "I"] + ["error"]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        res = analysed.results[name]
        shares = [e.variation_pct or 0.0 for e in res.effects if e.name != "I"]
        shares.append(res.error_pct or 0.0)
        xs = np.arange(len(effects)) - 0.4 + width * (i + 0.5)
        ax.bar(xs, shares, width, label=labels.get(name, name))
    ax.set_xticks(range(len(effects)), effects)
    ax.set_ylabel("variation explained (%)")
    ax.set_ylim(0, 100)
    ax.set_xlabel("effect (" + ", ".join(f"{k} = {v}" for k, v in
                                         analysed.design.letters.items()) + ")")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)


def plot_residuals(ax: Axes, predicted: np.ndarray, residuals: np.ndarray,
                   label: str) -> None:
    """Residuals against the predicted response: no trend and an even spread are what the
    model's errors should look like."""
    ax.scatter(predicted, residuals, s=18)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"predicted {label}")
    ax.set_ylabel("residual")
    ax.grid(True, alpha=0.3)


def plot_normal_qq(ax: Axes, residuals: np.ndarray, label: str) -> None:
    """Sorted residuals against normal quantiles; near a line if the errors are normal
    (the line through the quartiles is drawn for reference)."""
    ordered = np.sort(residuals)
    q = factorial.normal_quantiles(len(ordered))
    ax.scatter(q, ordered, s=18)
    if len(ordered) >= 4:
        (x1, x3), (y1, y3) = np.percentile(q, [25, 75]), np.percentile(ordered, [25, 75])
        if x3 > x1:
            slope = (y3 - y1) / (x3 - x1)
            ax.plot(q, y1 + slope * (q - x1), color="grey", linewidth=0.8)
    ax.set_xlabel("normal quantile")
    ax.set_ylabel(f"residual ({label})")
    ax.grid(True, alpha=0.3)


def plot_models(ax: Axes, rows: Sequence[QueueingPoint], metric: str, xlabel: str,
                ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Measured (solid), M/M/1 (dotted) and M/M/m (dashed) against load, one colour per
    configuration; `metric` is response_time (ms), queue_wait (ms) or queue_length."""
    scale = 1.0 if metric == "queue_length" else 1e3
    curves = list(dict.fromkeys(r.curve for r in rows))
    handles = []
    for i, curve in enumerate(curves):
        mine = [r for r in rows if r.curve == curve]
        curve = mine[0].curve_name or curve
        colour = f"C{i % 10}"
        xs = [r.x for r in mine]
        ax.plot(xs, [getattr(r.mmm, metric).measured * scale for r in mine], marker="o",
                color=colour, linestyle=MODEL_STYLES["measured"])
        for model, style in (("mm1", ":"), ("mmm", "--")):
            ys = [None if (row := getattr(r, model)) is None else
                  getattr(row, metric).predicted for r in mine]
            ax.plot(xs, [np.nan if y is None else y * scale for y in ys], marker=".",
                    color=colour, linestyle=style)
        handles.append(Line2D([], [], color=colour, label=curve))
    handles += [Line2D([], [], color="black", linestyle=s, label=name)
                for name, s in MODEL_STYLES.items()]
    ax.set_ylabel({"response_time": "response time: queue + service (ms)",
                   "queue_wait": "queue wait (ms)",
                   "queue_length": "queue length"}[metric])
    ax.set_yscale("symlog", linthresh=1e-3 if metric != "queue_length" else 1e-2)
    x_axis(ax, xlabel, ticks, log_x)
    _legend(ax, handles, loc="upper left")


def plot_mva(ax: Axes, section: MvaSection, metric: str) -> None:
    """The network's prediction against N (line), the measurements (points, error bars
    one standard deviation), and for throughput the bottleneck's bound (dotted)."""
    ns, b = section.populations, section.basis
    if metric == "throughput":
        ax.errorbar(ns, [known(p.throughput) for p in section.points],
                    yerr=[known(p.throughput_std) for p in section.points], marker="o",
                    linestyle="none", color="black", capsize=3, label="measured")
        ax.plot(range(1, len(b.dense) + 1), [m.throughput for m in b.dense], color="C0",
                label=f"MVA, demands at {b.name}")
        ax.axhline(b.bounds.max_throughput, color="C0", linestyle=":", linewidth=0.8,
                   label=f"bound: {b.bounds.bottleneck}")
        ax.set_ylabel("throughput (ops/s)")
        top = max(max(known(p.throughput) for p in section.points),
                  max(m.throughput for m in b.dense))
        ax.set_ylim(0, min(top, b.bounds.max_throughput) * 1.25)
    else:
        ax.errorbar(ns, [known(p.response_ms) for p in section.points],
                    yerr=[known(p.response_std) for p in section.points], marker="o",
                    linestyle="none", color="black", capsize=3, label="measured")
        ax.plot(range(1, len(b.dense) + 1), [m.response_time * 1e3 for m in b.dense],
                color="C0", label=f"MVA, demands at {b.name}")
        ax.set_ylabel("response time (ms)")
        ax.set_ylim(bottom=0)
    ax.set_xlabel("N (requests outstanding: clients x pipeline)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", loc="best")


def plot_histogram(ax: Axes, dist: OpDistribution) -> None:
    """Client and middleware response times in the same buckets (steps), with each
    side's overflow beyond the cutoff written in the legend."""
    for name, h, colour in (("client", dist.client, "C0"), ("middleware", dist.middleware,
                                                            "C1")):
        if h is None:
            continue
        edges = np.array(h.edges)
        ax.stairs(h.counts, edges, color=colour, fill=name == "middleware", alpha=0.35
                  if name == "middleware" else 1.0,
                  label=f"{name} (n = {h.total:,}, {h.overflow:,} over {h.cutoff:.3g} ms)")
    ax.set_xlabel(f"{dist.op} response time (ms), bucket {dist.client.width * 1e3:.3g} µs")
    ax.set_ylabel("requests")
    ax.set_title(dist.point.name, fontsize="small")  # the configuration at its peak
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small")


def plot_utilisation(ax: Axes, curves: Sequence[Curve], xlabel: str,
                     ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Utilisation against load: the workers (X S / m, solid), each server (X V_j S_j,
    dashed: requests in service there) and the host's CPUs (busy share, dotted)."""
    handles = []
    styles: dict[str, LineStyle] = {"workers": "-", "host CPU": ":"}
    for i, c in enumerate(curves):
        colour = f"C{i % 10}"
        series: dict[str, list[tuple[float, float]]] = {}
        for x, p in zip(c.x, c.points, strict=True):
            for name, u in utilisation(p).items():
                series.setdefault(name, []).append((x, u))
        for name, pairs in series.items():
            ax.plot(*zip(*pairs, strict=True), marker=".", color=colour,
                    linestyle=styles.get(name, "--"),
                    alpha=1.0 if name in styles else 0.6)
        if series:
            handles.append(Line2D([], [], color=colour, label=c.name))
    legend: list[tuple[str, LineStyle]] = [("workers", "-"), ("servers", "--"),
                                           ("host CPU", ":")]
    handles += [Line2D([], [], color="black", linestyle=s, label=n) for n, s in legend]
    ax.set_ylabel("utilisation")
    ax.set_ylim(bottom=0)
    x_axis(ax, xlabel, ticks, log_x)
    _legend(ax, handles, loc="upper left")


def plot_latency_throughput(ax: Axes, curves: Sequence[Curve], qos_ms: float) -> None:
    """p50 (dashed) and p99 (solid) client response time against achieved throughput,
    one line per configuration, each with its order-statistic interval as error bars, with
    the QoS target."""
    handles = []
    for i, c in enumerate(curves):
        colour = f"C{i % 10}"
        pts = sorted(c.points, key=lambda p: known(p.throughput))
        xs = [known(p.throughput) for p in pts]
        for name, marker, style in (("p99", "o", "-"), ("p50", ".", "--")):
            errors = [percentile_error(p, name) for p in pts]
            ax.errorbar(xs, [percentile_ms(p, name) for p in pts],
                        yerr=[[e[0] for e in errors], [e[1] for e in errors]], marker=marker,
                        color=colour, linestyle=style, capsize=2)
        handles.append(Line2D([], [], color=colour, label=c.name))
    handles += [Line2D([], [], color="black", label="p99"),
                Line2D([], [], color="black", linestyle="--", label="p50"),
                ax.axhline(qos_ms, color="red", linewidth=1.2, label=f"QoS {qos_ms:g} ms")]
    ax.set_xlabel("throughput (ops/s)")
    ax.set_ylabel("response time (ms)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    _legend(ax, handles, loc="upper left")


def plot_per_op(ax: Axes, curves: Sequence[Curve], metric: str, xlabel: str,
                ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Per operation type (line style) and configuration (colour): client throughput
    (ops/s) or mean response time (ms)."""
    handles, ops = [], set()
    for i, c in enumerate(curves):
        colour = f"C{i % 10}"
        for op, style in OP_STYLES.items():
            pairs = [(x, getattr(p.ops[op], metric)) for x, p in zip(c.x, c.points,
                                                                     strict=True)
                     if op in p.ops]
            if pairs:
                ops.add(op)
                ax.plot(*zip(*pairs, strict=True), marker=".", color=colour, linestyle=style)
        handles.append(Line2D([], [], color=colour, label=c.name))
    handles += [Line2D([], [], color="black", linestyle=s, label=op)
                for op, s in OP_STYLES.items() if op in ops]
    ax.set_ylabel("throughput (ops/s)" if metric == "throughput" else "response time (ms)")
    ax.set_ylim(bottom=0)
    x_axis(ax, xlabel, ticks, log_x)
    _legend(ax, handles, loc="best")
