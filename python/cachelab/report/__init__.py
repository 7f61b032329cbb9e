"""`DIR/report.html` from `DIR/results.db`: plots as PNG files beside it, tables, the
validation results, the configuration and the versions. Works on an unfinished experiment
(it shows what was measured so far and says what is missing).

`data` assembles the numbers, `plots` draws them, `template.html.j2` lays out the page.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

import jinja2

from cachelab.report import data as data_mod
from cachelab.report import plots
from cachelab.store import Store

TEMPLATE = "template.html.j2"
PAGE = "report.html"
IMAGES = "report-images"


def write_report(out: Path) -> Path:
    """Writes DIR/report.html and its images; returns the page's path."""
    with Store.open_existing(out) as s:
        d = data_mod.load(s)
    images = out / IMAGES
    images.mkdir(exist_ok=True)
    for old in images.glob("*.png"):
        old.unlink()
    found, ticks = data_mod.curves(d)
    _, xlabel = data_mod.x_axis(d)
    figures = []

    def add(name: str, title: str, draw, **size) -> None:
        plots.render(images / f"{name}.png", draw, **size)
        figures.append({"file": f"{IMAGES}/{name}.png", "title": title})

    if found:
        add("throughput", "Throughput against load (mean, error bars one standard deviation)",
            partial(plots.plot_throughput, curves=found, xlabel=xlabel, ticks=ticks))
        add("response-time", "Response time against load (mean, error bars one standard "
            "deviation)", partial(plots.plot_response_time, curves=found, xlabel=xlabel,
                                  ticks=ticks))
        add("percentiles", "Response-time percentiles and the QoS target",
            partial(plots.plot_percentiles, curves=found, qos_ms=d.settings["qos_target_ms"],
                    xlabel=xlabel, ticks=ticks), height=5.5)
    measured = [p for p in d.points if p.measured]
    if any(p.decomposition for p in measured):
        add("decomposition", "Response-time decomposition in the middleware (network = "
            "client response time minus middleware response time)",
            partial(plots.plot_decomposition, points=measured))
    if any(p.queue_len is not None for p in measured):
        add("queue-length", "Middleware queue length",
            partial(plots.plot_queue_length, curves=found, xlabel=xlabel, ticks=ticks))
    if any(p.server_service_us for p in measured):
        add("server-service", "Server service time per server (measured by the middleware)",
            partial(plots.plot_server_service, points=measured))
    if any(p.cpu for p in measured):
        add("cpu", "CPU utilisation of the host by state",
            partial(plots.plot_cpu, points=measured))
    if any(p.host_cpu for p in measured):
        add("host-cpu", "CPU per emulated host (user solid, system light; % of one core)",
            partial(plots.plot_host_cpu, points=measured))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent),
                             autoescape=True, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters["num"] = _num
    env.filters["pct"] = lambda v: "-" if v is None else f"{v:.1%}"
    page = out / PAGE
    page.write_text(env.get_template(TEMPLATE).render(
        d=d, figures=figures, qos=data_mod.qos_rows(found, d.settings["qos_target_ms"]),
        laws=data_mod.interactive_rows(d), stages=data_mod.STAGES, xlabel=xlabel,
        unstable=[p for p in d.points if p.verdict and not p.verdict.stable
                  and not p.verdict.more],
        pending=[p for p in d.points if p.verdict is None or p.verdict.more],
        generated=time.strftime("%Y-%m-%d %H:%M:%S")))
    return page


def _num(value: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits (thousands separated), "-" for None."""
    if value is None:
        return "-"
    if abs(value) >= 10 ** digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"
