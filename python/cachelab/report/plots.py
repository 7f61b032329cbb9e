"""The report's plots, each `plot_x(ax, ...)` drawing on a matplotlib Axes it is given
(no pyplot, no global state), from the plain data of `report.data`. `render` puts one plot
on its own Figure and writes it as PNG.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import BinaryIO, Literal

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from cachelab.report.data import (
    STAGES,
    Curve,
    PointResult,
    known,
    percentile_error,
    percentile_ms,
)
from cachelab.spec import naming

#: The line styles the plots use (matplotlib's names).
LineStyle = Literal["-", "--", "-.", ":"]
PERCENTILE_STYLES: dict[str, LineStyle] = {"p50": ":", "p90": "--", "p99": "-"}
STAGE_COLOURS = {"network": "#9e9e9e", "decode": "#8dd3c7", "queue": "#fb8072",
                 "server": "#80b1d3", "worker": "#fdb462"}
CPU_STACK = ("usr", "nice", "sys", "softirq", "irq", "iowait", "steal")
CPU_COLOURS = {"usr": "#4e79a7", "nice": "#a0cbe8", "sys": "#e15759", "softirq": "#f28e2b",
               "irq": "#ffbe7d", "iowait": "#59a14f", "steal": "#b07aa1"}


def x_axis(ax: Axes, xlabel: str, ticks: Sequence[str] | None, log_x: bool = False) -> None:
    """Labels the load axis: text levels as ticks, a log scale when it spans decades."""
    ax.set_xlabel(xlabel)
    if ticks is not None:
        ax.set_xticks(range(len(ticks)), ticks)
    if log_x:
        ax.set_xscale("log")
    ax.grid(True, alpha=0.3)


#: More points than this on a per-point axis: their labels are slanted.
CROWDED = 6


def point_axis(ax: Axes, shown: Sequence[PointResult]) -> None:
    """One tick per point, in `shown`'s order, labelled with its factor levels as a reader
    says them (one line per factor, in the sweep's order; "-" where a point does not set
    one); a point without factors (a one-point experiment) is "base"."""
    factors = list(dict.fromkeys(f for p in shown for f in p.factors))
    levels = [[naming.level_name(f, p.factors[f]) if f in p.factors else "-"
               for f in factors] for p in shown]
    if len(shown) <= CROWDED:
        ax.set_xticks(range(len(shown)), ["\n".join(x) or "base" for x in levels])
    else:  # one slanted line each, so that neighbours do not overlap
        ax.set_xticks(range(len(shown)), [", ".join(x) or "base" for x in levels],
                      rotation=35, ha="right", rotation_mode="anchor", fontsize="small")
    ax.set_xlabel("point")


def _legend(ax: Axes, n: int) -> None:
    if n:
        ax.legend(fontsize="small", loc="best")


def _plot_mean_with_std(ax: Axes, curves: Sequence[Curve], mean: str, std: str, ylabel: str,
                        xlabel: str, ticks: Sequence[str] | None, log_x: bool) -> None:
    """One curve per configuration: the attribute `mean` of each point, error bars `std`."""
    for c in curves:
        ax.errorbar(c.x, [getattr(p, mean) for p in c.points],
                    yerr=[getattr(p, std) for p in c.points], marker="o", capsize=3,
                    label=c.name)
    ax.set_ylabel(ylabel)
    ax.set_ylim(bottom=0)
    x_axis(ax, xlabel, ticks, log_x)
    _legend(ax, len(curves))


def plot_throughput(ax: Axes, curves: Sequence[Curve], xlabel: str,
                    ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Mean throughput over the repetitions, error bars one standard deviation; where the
    links are shaped, the bound they set (dashed, the curve's colour)."""
    _plot_mean_with_std(ax, curves, "throughput", "throughput_std", "throughput (ops/s)",
                        xlabel, ticks, log_x)
    for line, c in zip(ax.get_lines(), curves, strict=False):
        bounds = [p.link_bound.ops_per_s if p.link_bound else None for p in c.points]
        if any(b is not None for b in bounds):
            ax.plot(c.x, [b if b is not None else float("nan") for b in bounds], ls="--",
                    color=line.get_color(), alpha=0.7, label=f"link bound ({c.name})")
    if any(p.link_bound for c in curves for p in c.points):
        _legend(ax, 2 * len(curves))


def plot_response_time(ax: Axes, curves: Sequence[Curve], xlabel: str,
                       ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Mean client response time, error bars one standard deviation over repetitions."""
    _plot_mean_with_std(ax, curves, "response_ms", "response_std", "response time (ms)",
                        xlabel, ticks, log_x)


def plot_percentiles(ax: Axes, curves: Sequence[Curve], qos_ms: float, xlabel: str,
                     ticks: Sequence[str] | None = None, log_x: bool = False,
                     role: str = "load") -> None:
    """p50, p90 and p99 of the client response time of `role`'s clients (one colour per
    curve, one line style per percentile), each with its order-statistic interval as error
    bars, and the QoS target as a horizontal line."""
    handles = []
    for i, c in enumerate(curves):
        colour = f"C{i % 10}"
        for name, style in PERCENTILE_STYLES.items():
            errors = [percentile_error(p, name, role) for p in c.points]
            ax.errorbar(c.x, [percentile_ms(p, name, role) for p in c.points],
                        yerr=[[e[0] for e in errors], [e[1] for e in errors]],
                        linestyle=style, marker=".", color=colour, capsize=2)
        handles.append(Line2D([], [], color=colour, label=c.name))
    handles += [Line2D([], [], color="black", linestyle=style, label=name)
                for name, style in PERCENTILE_STYLES.items()]
    handles.append(ax.axhline(qos_ms, color="red", linewidth=1.5,
                              label=f"QoS target {qos_ms:g} ms"))
    ax.set_ylabel("response time (ms)")
    ax.set_ylim(bottom=0)
    x_axis(ax, xlabel, ticks, log_x)
    ax.legend(handles=handles, fontsize="x-small", loc="upper left")


def plot_decomposition(ax: Axes, points: Sequence[PointResult]) -> None:
    """Stacked mean time per stage for each point with a middleware."""
    shown = [p for p in points if p.decomposition]
    xs = range(len(shown))
    bottom = [0.0] * len(shown)
    for stage in STAGES:
        heights = [known(p.decomposition)[stage] for p in shown]
        ax.bar(xs, heights, bottom=bottom, color=STAGE_COLOURS[stage], label=stage)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    point_axis(ax, shown)
    ax.set_ylabel("mean time (µs)")
    ax.legend(fontsize="small", loc="upper left")
    ax.grid(True, axis="y", alpha=0.3)


def plot_queue_length(ax: Axes, curves: Sequence[Curve], xlabel: str,
                      ticks: Sequence[str] | None = None, log_x: bool = False) -> None:
    """Mean length of the middleware's request queue, as the workers found it."""
    drawn = 0
    for c in curves:
        pairs = [(x, p.queue_len) for x, p in zip(c.x, c.points, strict=True)
                 if p.queue_len is not None]
        if pairs:
            ax.plot(*zip(*pairs, strict=True), marker="o", label=c.name)
            drawn += 1
    ax.set_ylabel("mean queue length")
    ax.set_ylim(bottom=0)
    x_axis(ax, xlabel, ticks, log_x)
    _legend(ax, drawn)


def plot_server_service(ax: Axes, points: Sequence[PointResult]) -> None:
    """Mean server service time per server (grouped bars), as the middleware measured it."""
    shown = [p for p in points if p.server_service_us]
    servers = max((len(p.server_service_us) for p in shown), default=0)
    width = 0.8 / max(servers, 1)
    for s in range(servers):
        xs = [i - 0.4 + width * (s + 0.5) for i, p in enumerate(shown)
              if s < len(p.server_service_us)]
        ys = [p.server_service_us[s] for p in shown if s < len(p.server_service_us)]
        ax.bar(xs, ys, width=width, label=f"server {s + 1}")
    point_axis(ax, shown)
    ax.set_ylabel("server service time (µs)")
    _legend(ax, servers)
    ax.grid(True, axis="y", alpha=0.3)


def plot_cpu(ax: Axes, points: Sequence[PointResult]) -> None:
    """The host's CPU time by state (stacked, percent); the rest up to 100 is idle."""
    shown = [p for p in points if p.cpu]
    xs = range(len(shown))
    bottom = [0.0] * len(shown)
    for share in CPU_STACK:
        heights = [known(p.cpu)[share] for p in shown]
        ax.bar(xs, heights, bottom=bottom, color=CPU_COLOURS[share], label=share)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    ax.set_ylim(0, 100)
    point_axis(ax, shown)
    ax.set_ylabel("CPU (% of all cores)")
    ax.legend(fontsize="small", loc="upper left", ncols=4)
    ax.grid(True, axis="y", alpha=0.3)


def plot_host_cpu(ax: Axes, points: Sequence[PointResult]) -> None:
    """Each emulated host's CPU (user and system stacked, % of one core) per point."""
    shown = [p for p in points if p.host_cpu]
    hosts = sorted({h for p in shown for h in p.host_cpu})
    width = 0.8 / max(1, len(hosts))
    for j, host in enumerate(hosts):
        xs = [i + (j - (len(hosts) - 1) / 2) * width for i in range(len(shown))]
        usr = [p.host_cpu.get(host, (0.0, 0.0))[0] for p in shown]
        sys_ = [p.host_cpu.get(host, (0.0, 0.0))[1] for p in shown]
        bars = ax.bar(xs, usr, width, label=f"{host} usr")
        ax.bar(xs, sys_, width, bottom=usr, color=bars.patches[0].get_facecolor(),
               alpha=0.45, label=f"{host} sys")
    point_axis(ax, shown)
    ax.set_ylabel("CPU (% of one core)")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize="x-small", loc="upper left", ncols=4)
    ax.grid(True, axis="y", alpha=0.3)


def plot_capacity_trials(ax: Axes, trials: Sequence[tuple[float, float]], target_ms: float,
                         percentile: float, capacity: float | None,
                         label: str | None = None) -> None:
    """A capacity search: every trial's latency percentile against its offered rate, the
    target as a line, the capacity found as a vertical line."""
    rates = [r for r, _ in trials]
    lines = ax.plot(rates, [ms for _, ms in trials], "o", alpha=0.7,
                    label=label or f"p{percentile:g} per trial")
    ax.axhline(target_ms, color="red", ls="--", lw=1, label=f"target {target_ms:g} ms")
    if capacity:
        ax.axvline(capacity, color=lines[0].get_color(), ls=":", lw=1,
                   label=f"capacity {capacity:,.0f}/s")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("offered rate (requests/s)")
    ax.set_ylabel(f"p{percentile:g} latency (ms)")
    ax.legend(fontsize="small")
    ax.grid(True, which="both", alpha=0.3)


def plot_timeline(ax: Axes, runs: Sequence, order: str) -> None:
    """Every run's throughput against when it started, one colour per point: with a
    randomized order, a trend over time that is not a trend over points is drift."""
    labels = list(dict.fromkeys(r.label for r in runs))
    for label in labels:
        mine = [r for r in runs if r.label == label]
        ax.plot([r.started_s / 60 for r in mine], [r.throughput for r in mine], "o",
                label=label)
    ax.set_xlabel(f"run start (minutes since the first run; order: {order})")
    ax.set_ylabel("throughput (ops/s)")
    ax.set_ylim(bottom=0)
    _legend(ax, len(labels))
    ax.grid(True, alpha=0.3)


def render(target: Path | BinaryIO, draw: Callable[[Axes], None], width: float = 8.0,
           height: float = 4.5, fmt: str = "png") -> None:
    """Draws one plot on a new Figure and writes it (PNG or SVG) to a file or a stream."""
    render_grid(target, [draw], ncols=1, width=width, height=height, fmt=fmt)


def render_grid(target: Path | BinaryIO, draws: Sequence[Callable[[Axes], None]],
                ncols: int = 2, width: float = 8.0, height: float = 4.5,
                fmt: str = "png") -> None:
    """Draws several plots side by side (`ncols` per row, each row `height` inches high)
    on one Figure and writes it (PNG or SVG, without a date, so the same data gives the
    same bytes) to a file or a stream."""
    ncols = max(1, min(ncols, len(draws)))
    rows = -(-len(draws) // ncols)
    fig = Figure(figsize=(width, height * rows), layout="constrained")
    for i, draw in enumerate(draws):
        draw(fig.add_subplot(rows, ncols, i + 1))
    metadata = {"Date": None} if fmt == "svg" else None
    fig.savefig(target, dpi=100, format=fmt, metadata=metadata)
