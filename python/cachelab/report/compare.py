"""`cachelab compare`: one page overlaying several stored experiments, point by point.

Points are matched by the values of every factor any of the experiments sweeps, read from
each point's configuration (`analysis.compare`); the first experiment is the baseline, and
each matched point of another gets the ratio to it and Welch's t-test over the steady runs
of both (throughput and mean response time). The page also lists what the configurations
differ in besides the factors, which is usually what the comparison is about.
"""

from __future__ import annotations

import csv
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.lines import Line2D

from cachelab import paths
from cachelab.analysis import compare as compare_mod
from cachelab.analysis.design import level_text
from cachelab.errors import UserError
from cachelab.report import Figures, environment
from cachelab.report import data as data_mod
from cachelab.report.data import PointResult, ReportData, known
from cachelab.report.plots import x_axis
from cachelab.store import Store

PAGE = "compare.html"
TABLE = "compare.csv"
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


@dataclass(frozen=True)
class Experiment:
    name: str
    directory: Path
    data: ReportData


@dataclass(frozen=True)
class Row:
    """One matched configuration: each experiment's point (None where it has none) and,
    for each experiment after the baseline, the differences from the baseline."""

    label: str
    key: dict[str, str]
    points: tuple[PointResult | None, ...]
    throughput: tuple[compare_mod.Difference | None, ...]
    response: tuple[compare_mod.Difference | None, ...]


@dataclass(frozen=True)
class Comparison:
    experiments: tuple[Experiment, ...]
    paths: tuple[str, ...]
    x_path: str
    xlabel: str
    rows: tuple[Row, ...]
    unmatched: tuple[str, ...]
    #: (field, value per experiment) for configuration fields and settings that differ.
    differences: tuple[tuple[str, tuple[str, ...]], ...]
    level: float


def load(directories: list[Path], level: float = 0.05) -> Comparison:
    if len(directories) < 2:
        raise UserError("compare needs at least two experiment directories")
    loaded = []
    for directory in directories:
        with Store.open_existing(directory) as s:
            loaded.append((Path(directory), data_mod.load(s)))
    names = _names(loaded)
    experiments = tuple(Experiment(n, d, rd) for n, (d, rd) in zip(names, loaded, strict=True))
    paths = tuple(dict.fromkeys(f for e in experiments for f in e.data.settings["factors"]))
    keys = [[compare_mod.PointKey(p.index, p.label, {f: _value(p, f) for f in paths})
             for p in e.data.points if p.measured] for e in experiments]
    matching = compare_mod.match(paths, names, keys)
    by_index = [{p.index: p for p in e.data.points} for e in experiments]
    rows = []
    for indexes in matching.rows:
        points = tuple(None if i is None else by_index[e][i] for e, i in enumerate(indexes))
        base = points[0]
        assert base is not None  # the baseline has every matched point
        rows.append(Row(
            label=", ".join(f"{f}={_value(base, f)}" for f in paths) or base.label,
            key={f: _value(base, f) for f in paths}, points=points,
            throughput=tuple(None if p is None else compare_mod.difference(
                _stats(base, "throughput"), _stats(p, "throughput"), level)
                for p in points[1:]),
            response=tuple(None if p is None else compare_mod.difference(
                _stats(base, "response"), _stats(p, "response"), level)
                for p in points[1:])))
    x_path, xlabel = data_mod.x_axis(experiments[0].data)
    return Comparison(experiments, paths, x_path, xlabel, tuple(rows), matching.unmatched,
                      _differences(experiments, rows, paths), level)


def _names(loaded: list[tuple[Path, ReportData]]) -> list[str]:
    """Experiment names, or directory names when two experiments share a name."""
    names = [d.name for _, d in loaded]
    if len(set(names)) < len(names):
        names = [p.name for p, _ in loaded]
    if len(set(names)) < len(names):
        names = [f"{n} ({i + 1})" for i, n in enumerate(names)]
    return names


def _value(p: PointResult, path: str) -> str:
    section, _, field = path.partition(".")
    return level_text(p.config.get(section, {}).get(field, p.factors.get(path)))


def _stats(p: PointResult, what: str) -> tuple[float, float, int]:
    n = len(p.run_ids)
    if what == "throughput":
        return known(p.throughput), known(p.throughput_std), n
    return known(p.response_ms), known(p.response_std), n


def _flatten(config: dict, prefix: str = "") -> dict[str, str]:
    out = {}
    for k, v in config.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = level_text(v)
    return out


def _differences(experiments: tuple[Experiment, ...], rows: list[Row],
                 paths: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Configuration fields (of the matched points) and settings whose values differ."""
    values: dict[str, list[set[str]]] = {}
    for row in rows:
        for e, p in enumerate(row.points):
            if p is not None:
                for k, v in _flatten(p.config).items():
                    values.setdefault(k, [set() for _ in experiments])[e].add(v)
    for e, exp in enumerate(experiments):
        for k in ("run_time_s", "warmup_s", "cooldown_s", "repetitions", "cv_threshold",
                  "stats_window_s"):
            values.setdefault(k, [set() for _ in experiments])[e].add(
                level_text(exp.data.settings.get(k)))
    out = []
    for k, per in values.items():
        if k in paths:
            continue
        shown = tuple(", ".join(sorted(v)) or "-" for v in per)
        if len(set(shown)) > 1:
            out.append((k, shown))
    return tuple(out)


def plot_overlay(ax: Axes, comparison: Comparison, metric: str, ticks: list[str] | None,
                 log_x: bool) -> None:
    """Each experiment's curves (every measured point, grouped by the factors other than
    the x axis) in its own colour, one marker per configuration, on the first
    experiment's x axis; matched points share x and marker."""
    labels: list[str] = []
    handles = []
    for e, exp in enumerate(comparison.experiments):
        colour = f"C{e % 10}"
        groups: dict[str, list[tuple[float, float, tuple[float, float]]]] = {}
        for p in exp.data.points:
            if p.measured:
                error = data_mod.percentile_error(p, "p99") if metric == "p99" else (0.0, 0.0)
                groups.setdefault(_group(comparison, p), []).append(
                    (_x(comparison, p, ticks), _metric(p, metric), error))
        for label, rows in groups.items():
            if label not in labels:
                labels.append(label)
            rows.sort()
            # p99: its order-statistic interval as error bars (none stored: no bars)
            ax.errorbar([r[0] for r in rows], [r[1] for r in rows],
                        yerr=[[r[2][0] for r in rows], [r[2][1] for r in rows]],
                        color=colour, capsize=2,
                        marker=MARKERS[labels.index(label) % len(MARKERS)])
        handles.append(Line2D([], [], color=colour, label=exp.name))
    handles += [Line2D([], [], color="grey", marker=MARKERS[g % len(MARKERS)], label=label)
                for g, label in enumerate(labels) if label]
    ax.set_ylabel({"throughput": "throughput (ops/s)", "response": "response time (ms)",
                   "p99": "p99 (ms)"}[metric])
    ax.set_ylim(bottom=0)
    x_axis(ax, comparison.xlabel, ticks, log_x)
    ax.legend(handles=handles, fontsize="x-small", loc="best")


def _others(comparison: Comparison) -> list[str]:
    return [f for f in comparison.paths if f != comparison.x_path
            and not (comparison.x_path == "clients" and f in data_mod.CLIENT_FACTORS)]


def _group(comparison: Comparison, p: PointResult) -> str:
    return ", ".join(f"{f}={_value(p, f)}" for f in _others(comparison))


def _x(comparison: Comparison, p: PointResult, ticks: list[str] | None) -> float:
    if comparison.x_path == "clients":
        return float(p.clients)
    value = _value(p, comparison.x_path)
    return float(ticks.index(value)) if ticks is not None else float(value)


def _metric(p: PointResult, metric: str) -> float:
    if metric == "p99":
        return data_mod.percentile_ms(p, "p99")
    return known({"throughput": p.throughput, "response": p.response_ms}[metric])


def _ticks(comparison: Comparison) -> list[str] | None:
    if comparison.x_path == "clients":
        return None
    values = list(dict.fromkeys(_value(p, comparison.x_path) for e in comparison.experiments
                                for p in e.data.points if p.measured))
    try:
        [float(v) for v in values]
    except ValueError:
        return values
    return None


def write_csv(comparison: Comparison, path: Path) -> Path:
    """One row per matched configuration and experiment."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["experiment", "point", *comparison.paths, "runs", "throughput",
                    "throughput_std", "response_ms", "response_std", "p99_ms",
                    "throughput_ratio", "throughput_p", "throughput_significant",
                    "response_ratio", "response_p", "response_significant"])
        for r in comparison.rows:
            for e, p in enumerate(r.points):
                if p is None:
                    continue
                t = r.throughput[e - 1] if e else None
                q = r.response[e - 1] if e else None
                w.writerow([comparison.experiments[e].name, p.index,
                            *(r.key[f] for f in comparison.paths), len(p.run_ids),
                            p.throughput, p.throughput_std, p.response_ms, p.response_std,
                            data_mod.percentile_ms(p, "p99"),
                            *((t.ratio, t.p_value, t.significant) if t else ("", "", "")),
                            *((q.ratio, q.p_value, q.significant) if q else ("", "", ""))])
    return path


def write(directories: list[Path], out: Path, level: float = 0.05) -> tuple[Path, Comparison]:
    """Writes OUT/compare.html (one file, its plots inline as SVG) and OUT/compare.csv."""
    comparison = load(directories, level)
    paths.writable_dir(out, "the comparison")
    with paths.writing(out, "the comparison"):
        return _write_page(comparison, out), comparison


def _write_page(comparison: Comparison, out: Path) -> Path:
    figures = Figures()  # inline, as the report's: one file that can be mailed
    ticks = _ticks(comparison)
    xs = [_x(comparison, p, ticks) for e in comparison.experiments for p in e.data.points
          if p.measured]
    log_x = ticks is None and min(xs) > 0 and max(xs) >= data_mod.LOG_SPAN * min(xs)
    for metric, title in (("throughput", "Throughput"), ("response", "Mean response time"),
                          ("p99", "p99 response time (error bars: 95% intervals from "
                           "order statistics)")):
        figures.add("compare", f"compare-{metric}", f"{title} against load, per experiment",
                    partial(plot_overlay, comparison=comparison, metric=metric, ticks=ticks,
                            log_x=log_x))
    write_csv(comparison, out / TABLE)
    page = out / PAGE
    page.write_text(environment().get_template("compare.html.j2").render(
        c=comparison, figures=figures["compare"], table=TABLE,
        generated=time.strftime("%Y-%m-%d %H:%M:%S")))
    return page
