"""`DIR/report.html` from `DIR/results.db`: one self-contained page (plots inline as SVG,
or PNG files in `report-images/` when asked) that opens with its findings, then
throughput and latency, where the time goes, the models and analysis (factorial designs,
queueing models beside the measurements, the study), validity, and the configuration and
versions. Works on an unfinished experiment (it shows what was measured so far and says
what is missing).

`sections` assembles the numbers (from `data`, `measure`, `designs`, `models`,
`distributions`), `findings` draws the answers from them, `plots` and `plots_analysis`
draw them, `template.html.j2` and its includes lay out the page, and `tables` flattens the
same numbers for `cachelab export --table`.
"""

from __future__ import annotations

import dataclasses
import time
from functools import partial
from pathlib import Path
from typing import Any

import jinja2

from cachelab import paths
from cachelab.analysis.design import RESPONSES, Design
from cachelab.report import data as data_mod
from cachelab.report import (
    findings,
    methodology,
    plots,
    plots_analysis,
    plots_workload,
    sections,
    workload,
)
from cachelab.report.figures import Figures
from cachelab.spec import naming
from cachelab.store import Store

TEMPLATE = "template.html.j2"
PAGE = "report.html"
IMAGES = "report-images"


def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["signed"] = lambda v: "-" if v is None else ("+" if v >= 0 else "") + _num(v)
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    env.filters["design_name"] = lambda a: _design_name(a.design)
    env.filters["pct0"] = lambda v: "-" if v is None else f"{v:.0%}"
    env.filters["ratio"] = lambda v: "-" if v is None else f"{v:.2f}"
    env.filters["factor"] = naming.factor_name
    env.filters["response"] = lambda r: RESPONSES.get(r, r)
    return env


def write_report(out: Path, image_files: bool = False) -> Path:
    """Writes DIR/report.html, its images inline (or, with `image_files`, as PNG files in
    DIR/report-images/); returns the page's path."""
    with Store.open_existing(out) as s:
        paths.writable_dir(out, "the report")
        sec = sections.build(s)
        runs = methodology.timeline(s)
        run_order, order_seed = methodology.run_order(s)
        searches = methodology.capacity_searches(s)
        late = methodology.late_runs(s)
        checks = methodology.run_checks(s)
        work = workload.workloads(s, sec.data.points)
    with paths.writing(out, "the report"):
        figures = Figures(out / IMAGES if image_files else None, IMAGES)
        names = {p.index: p.name for p in sec.data.points}
        runs = [dataclasses.replace(r, label=names.get(r.point, r.label)) for r in runs]
        _load_figures(sec, figures)
        _analysis_figures(sec, figures)
        plots_workload.add_figures(work, figures)
        if len(runs) > 1:
            figures.add("validity", "timeline", "Every run's throughput against its start time "
                        f"(runs in {run_order} order): a trend over time is drift",
                        partial(plots.plot_timeline, runs=runs, order=run_order))
        for i, point in enumerate(dict.fromkeys(k.point for k in searches), start=1):
            mine = [k for k in searches if k.point == point]
            first = mine[0].search
            figures.add("capacity", f"capacity-{i}", f"Capacity search, #{point + 1} "
                        f"{names.get(point, mine[0].label)}: p{first.percentile:g} of every "
                        "trial against its offered rate",
                        partial(plots.plot_capacity_trials,
                                trials=[(t.rate, t.latency_ms) for k in mine
                                        for t in k.search.trials],
                                target_ms=first.target_ms, percentile=first.percentile,
                                capacity=min((k.search.capacity for k in mine
                                              if k.search.capacity), default=None)))
        d = sec.data
        page = out / PAGE
        page.write_text(environment().get_template(TEMPLATE).render(
            d=d, sec=sec, figures=figures, qos=sec.qos, laws=sec.laws, stages=data_mod.STAGES,
            run_order=run_order, order_seed=order_seed, searches=searches, late=late,
            checks=checks, work=work, max_points=workload.MAX_POINTS,
            failed=[k for k in checks if not k.passed],
            xlabel=sec.xlabel, names=names, saturated=findings.SATURATED, fit=findings.FIT,
            f=findings.build(qos=sec.qos, curves=sec.curves, queueing=sec.queueing,
                             mva=sec.mva, points=d.points, late=late, checks=checks,
                             searches=searches, laws=sec.laws, study=sec.study,
                             x_path=sec.x_path, mva_note=sec.mva_note),
            unstable=[p for p in d.points if p.verdict and not p.verdict.stable
                      and not p.verdict.more],
            pending=[p for p in d.points if p.verdict is None or p.verdict.more],
            generated=time.strftime("%Y-%m-%d %H:%M:%S")))
        return page


def _load_figures(sec: sections.Sections, figures: Figures) -> None:
    """The plots against load, as before the analysis sections."""
    found = sec.curves
    axis: dict[str, Any] = dict(xlabel=sec.xlabel, ticks=sec.tick_names, log_x=sec.log_x)
    measured = [p for p in sec.data.points if p.measured]
    add = partial(figures.add, "throughput")
    at = partial(figures.add, "time")
    if found:
        add("throughput", "Throughput against load (mean, error bars one standard deviation)",
            partial(plots.plot_throughput, curves=found, **axis))
        add("response-time", "Response time against load (mean, error bars one standard "
            "deviation)", partial(plots.plot_response_time, curves=found, **axis))
        add("percentiles", "Response-time percentiles of the load generators and the QoS "
            "target; error bars: 95% intervals from order statistics over each point's "
            "merged histograms",
            partial(plots.plot_percentiles, curves=found,
                    qos_ms=sec.data.settings["qos_target_ms"], **axis), height=5.5)
        if any("measure" in p.intervals for p in measured):
            add("percentiles-measured", "Response-time percentiles seen by the measuring "
                "client (one low-rate open-loop connection on its own host: the trusted "
                "latencies); error bars: 95% intervals from order statistics",
                partial(plots.plot_percentiles, curves=found,
                        qos_ms=sec.data.settings["qos_target_ms"], role="measure", **axis),
                height=5.5)
        add("latency-throughput", "Latency against throughput: p50 and p99 against the "
            "achieved ops/s, one line per configuration; error bars: 95% intervals from "
            "order statistics",
            partial(plots_analysis.plot_latency_throughput, curves=found,
                    qos_ms=sec.data.settings["qos_target_ms"]))
    if sec.mixed_ops:
        figures.add_grid("throughput", "per-op", "Per operation type: client throughput and mean "
                         "response time", [
                             partial(plots_analysis.plot_per_op, curves=found,
                                     metric="throughput", **axis),
                             partial(plots_analysis.plot_per_op, curves=found,
                                     metric="response_ms", **axis)], width=12, height=4.5)
    if any(p.decomposition for p in measured):
        at("decomposition", "Response-time decomposition in the middleware (network = "
            "client response time minus middleware response time)",
            partial(plots.plot_decomposition, points=measured))
    if any(p.queue_len is not None for p in measured):
        at("queue-length", "Middleware queue length",
            partial(plots.plot_queue_length, curves=found, **axis))
    if any(p.middleware or p.cpu for p in measured):
        at("utilisation", "Utilisation against load: workers X S / m, servers X V S "
            "(requests there), the host's CPUs (busy share)",
            partial(plots_analysis.plot_utilisation, curves=found, **axis))
    if any(p.server_service_us for p in measured):
        at("server-service", "Server service time per server (measured by the middleware)",
            partial(plots.plot_server_service, points=measured))
    if any(p.cpu for p in measured):
        at("cpu", "CPU utilisation of the host by state",
            partial(plots.plot_cpu, points=measured))
    if any(p.host_cpu for p in measured):
        at("host-cpu", "CPU per emulated host (user solid, system light; % of one core)",
            partial(plots.plot_host_cpu, points=measured))


def _analysis_figures(sec: sections.Sections, figures: Figures) -> None:
    for i, a in enumerate(sec.designs.analysed if sec.designs else (), start=1):
        figures.add(f"design-{i}", f"design-{i}-allocation",
                    f"Allocation of variation ({_design_name(a.design)})",
                    partial(plots_analysis.plot_allocation, analysed=a, labels=RESPONSES),
                    width=7, height=3.8)
        draws = []
        for name, (predicted, residual) in a.residuals.items():
            draws += [partial(plots_analysis.plot_residuals, predicted=predicted,
                              residuals=residual, label=RESPONSES[name]),
                      partial(plots_analysis.plot_normal_qq, residuals=residual,
                              label=RESPONSES[name])]
        figures.add_grid(f"design-{i}", f"design-{i}-residuals",
                         f"Residuals against predicted response, and their normal quantile "
                         f"plot ({_design_name(a.design)})", draws, ncols=2, width=10,
                         height=3.4)
    axis: dict[str, Any] = dict(xlabel=sec.xlabel, ticks=sec.tick_names, log_x=sec.log_x)
    if sec.queueing:
        figures.add_grid("models", "models", "Measured (solid) against M/M/1 (dotted) and "
                         "M/M/m (dashed) over the sweep", [
                             partial(plots_analysis.plot_models, rows=sec.queueing,
                                     metric=m, **axis)
                             for m in ("response_time", "queue_length")],
                         width=13, height=4.8)
    for i, s in enumerate(sec.mva, start=1):
        figures.add_grid(f"mva-{i}", f"mva-{i}",
                         f"MVA against the measurements ({s.name or s.curve})", [
            partial(plots_analysis.plot_mva, section=s, metric=m)
            for m in ("throughput", "response")], width=12, height=4.2)
    ops = list(dict.fromkeys(d.op for d in sec.distributions))
    for op in ops:
        mine = [d for d in sec.distributions if d.op == op]
        figures.add_grid("distributions", f"histogram-{op}",
                         f"{op}: response time, client and middleware, at each "
                         "configuration's highest throughput",
                         [partial(plots_analysis.plot_histogram, dist=d) for d in mine],
                         ncols=2, width=12 if len(mine) > 1 else 7, height=3.6)


def _design_name(design: Design) -> str:
    """A design's group of runs as a reader says it ("read-only"), or "all runs"."""
    return naming.curve_name(design.group) if design.group else design.label


def _num(value: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits (thousands separated), "-" for None."""
    if value is None:
        return "-"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"
