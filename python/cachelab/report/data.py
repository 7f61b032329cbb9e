"""The report's numbers, assembled from the results database. No plotting, no HTML.

Aggregates over a point use its steady runs (run/validate.py); within a run, only the steady
part counts: the client summaries already cut warm-up and cool-down, middleware windows
and CPU samples are kept when their midpoint lies in [warm-up, run time - cool-down].
Middleware times merge the Welford triples of those windows exactly, over operation types,
middlewares and runs.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cachelab.analysis import laws, linkbound, qos
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen
from cachelab.report import measure
from cachelab.run import validate
from cachelab.spec import experiment as spec
from cachelab.spec import naming, topology
from cachelab.store import (
    ClientClock,
    ClientTiming,
    LinkRecord,
    Store,
    StoredInterval,
    StoredPoint,
    StoredRun,
)

#: The response-time decomposition, in the order the bars stack (see docs/stats-file.md).
STAGES = ("network", "decode", "queue", "server", "worker")
_STAGE_METRICS = {"decode": "decode", "queue": "queue_wait", "server": "server_service",
                  "worker": "worker_processing"}
T = TypeVar("T")
CLIENT_FACTORS = ("load.clients", "load.threads", "load.instances")
#: Report x axes that sweep the load: along them a configuration's last point is its
#: highest load, and its highest throughput can serve as M/M/1's service rate.
LOAD_AXES = ("clients", *CLIENT_FACTORS, "load.rate")


def known(value: T | None) -> T:
    """A number every measured point has (curves, models and tables hold measured points
    only): None here is a bug, not missing data."""
    if value is None:
        raise ValueError("a measured point without its value")
    return value


@dataclass(frozen=True)
class PointResult:
    index: int
    label: str
    factors: dict[str, object]
    config: dict
    clients: int
    runs: int
    steady_runs: int
    verdict: validate.Verdict | None
    throughput: float | None = None
    throughput_std: float | None = None
    response_ms: float | None = None
    response_std: float | None = None
    percentiles_ms: dict[str, float] = field(default_factory=dict)
    cv_within_max: float | None = None
    #: Open-loop runs whose load generator fell behind its schedule.
    fell_behind_runs: int = 0
    #: The runs the means are over: the steady ones, or every run when none is steady.
    run_ids: tuple[int, ...] = ()
    #: Mean time per stage in µs (network = client response - middleware response).
    decomposition: dict[str, float] | None = None
    queue_len: float | None = None
    #: Mean server service time per server (µs), in the middleware's -m order.
    server_service_us: tuple[float, ...] = ()
    #: Mean CPU shares (percent) of the host over the steady samples.
    cpu: dict[str, float] | None = None
    #: Emulated hosts: mean (usr, sys) per host over the steady samples, % of one core,
    #: and the delay line's (EMULATOR), which runs outside every host.
    host_cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: The throughput the configured links allow (linkbound.py), and the link that sets it.
    link_bound: linkbound.Bound | None = None
    #: The links measured before the point's first run.
    links: tuple[LinkRecord, ...] = ()
    #: The middlewares' totals over the steady windows (measure.py); None without one.
    middleware: measure.MiddlewareTotals | None = None
    #: Client side per operation type with requests (get, multiget, set).
    ops: dict[str, measure.OpResult] = field(default_factory=dict)
    #: The percentiles of the merged histograms of the runs the means are over, with
    #: their order-statistic intervals: by role (`load`, `measure`) and name (p50, ...).
    intervals: dict[str, dict[str, StoredInterval]] = field(default_factory=dict)
    #: Which clock ends the clients' latencies, per role (and the client CPU).
    clocks: tuple[ClientClock, ...] = ()
    #: Where the clients' time went (wire, response, send and read delays), per role.
    timings: tuple[ClientTiming, ...] = ()
    #: A scale model's k: the figures above are already rescaled to full speed
    #: (throughput x k, times / k; report/rescale.py). 1: no scale model.
    scale: float = 1.0

    @property
    def measured(self) -> bool:
        return self.throughput is not None

    @property
    def name(self) -> str:
        """The point as a reader says it ("read-only, 8 workers, 16 clients"); `label`
        keeps the raw factor paths for the exports and hover titles."""
        return naming.point_name(self.factors, self.clients)


@dataclass(frozen=True)
class ReportData:
    name: str
    description: str
    source: str
    settings: dict
    points: tuple[PointResult, ...]
    host: HostInfo | None
    schema_version: int
    runs: int

    @property
    def finished(self) -> bool:
        return all(p.verdict is not None and not p.verdict.more for p in self.points)


def load(s: Store) -> ReportData:
    exp = s.require_experiment()
    settings = exp.settings
    runs = s.runs_by_point(exp.id)
    intervals = s.point_intervals(exp.id)
    points = tuple(_point(s, p, runs.get(p.index, []), settings, intervals.get(p.index, {}))
                   for p in s.points(exp.id))
    return ReportData(exp.name, exp.description, exp.source, settings, points,
                      s.last_host(), s.version, sum(len(r) for r in runs.values()))


def _point(s: Store, stored: StoredPoint, runs: list[StoredRun], settings: dict[str, Any],
           intervals: dict[str, dict[str, StoredInterval]]) -> PointResult:
    order = [f for f in settings.get("factors", []) if f in stored.factors]
    factors = {f: stored.factors[f] for f in order} | stored.factors  # the sweep's order
    base: dict[str, Any] = dict(index=stored.index, label=stored.label, factors=factors,
                config=stored.config, clients=stored.clients, runs=len(runs))
    if not runs:
        return PointResult(**base, steady_runs=0, verdict=None)
    width = settings.get("stop_p99_width_ms")
    hists = s.run_histograms([r.id for r in runs]) if width is not None else {}
    outcomes = [validate.RunOutcome(r.throughput, r.cv_within, hists.get(r.id, ()))
                for r in runs]
    verdict = validate.assess(outcomes, threshold=settings["cv_threshold"],
                              repetitions=settings["repetitions"],
                              max_repetitions=settings["max_repetitions"],
                              max_replacements=settings.get("max_replacements", 0),
                              stop_width_ms=width)
    used = [runs[i] for i in verdict.steady] or runs
    ids = [r.id for r in used]
    cvs = [r.cv_within for r in runs if r.cv_within is not None]
    response = _mean([r.response_ms for r in used])
    mw = measure.middleware(s, measure.steady_windows(s, used, settings))
    low, high = settings["warmup_s"], settings["run_time_s"] - settings["cooldown_s"]
    k = float(stored.config.get("topology", {}).get("scale", 1.0) or 1.0)
    return rescaled(PointResult(
        **base, steady_runs=len(verdict.steady), verdict=verdict,
        throughput=_mean([r.throughput for r in used]),
        throughput_std=_std([r.throughput for r in used]),
        response_ms=response, response_std=_std([r.response_ms for r in used]),
        percentiles_ms={"p50": _mean([r.p50_ms for r in used]),
                        "p90": _mean([r.p90_ms for r in used]),
                        "p99": _mean([r.p99_ms for r in used])},
        cv_within_max=max(cvs) if cvs else None,
        fell_behind_runs=sum(1 for r in runs if r.fell_behind),
        run_ids=tuple(ids),
        decomposition=_decomposition(mw, response),
        queue_len=mw.queue_len if mw else None,
        server_service_us=tuple(x.service.mean for x in mw.servers) if mw else (),
        middleware=mw,
        ops=measure.client_ops(s.client_ops(ids), s.op_histograms(ids)),
        cpu=s.cpu_means(ids, low, high),
        host_cpu=_host_cpu(s, ids, low, high),
        link_bound=_link_bound(base["config"]),
        links=tuple(s.links([r.id for r in runs])),
        intervals=intervals,
        clocks=tuple(s.client_clocks(ids, stored.index)),
        timings=tuple(s.client_timings(ids, stored.index)),
    ), k)


def percentile_ms(p: PointResult, name: str, role: str = "load") -> float:
    """A point's percentile as its plots draw it: from the merged histograms when its
    interval is stored, else (a database from before intervals) the mean over runs."""
    found = p.intervals.get(role, {}).get(name)
    return found.estimate_ms if found else p.percentiles_ms[name]


def percentile_error(p: PointResult, name: str, role: str = "load") -> tuple[float, float]:
    """(estimate - low, high - estimate) of a point's percentile interval; (0, 0) without
    one."""
    found = p.intervals.get(role, {}).get(name)
    if found is None:
        return 0.0, 0.0
    return found.estimate_ms - found.low_ms, found.high_ms - found.estimate_ms


#: How the delay line shows among the hosts' CPU: it runs outside every host's cgroup.
EMULATOR = "delay line (no host)"


def _host_cpu(s: Store, ids: list[int], low: float,
              high: float) -> dict[str, tuple[float, float]]:
    """Each emulated host's mean CPU, and the delay line's beside them."""
    found = s.host_cpu_means(ids, low, high)
    emulator = s.emulator_cpu_mean(ids, low, high)
    return found if emulator is None else {**found, EMULATOR: emulator}


def _link_bound(config: dict) -> linkbound.Bound | None:
    """The configured links' bound on throughput, for points with emulated hosts."""
    c = spec.config_from_dict(config)
    if c.topology.kind == spec.TopologyKind.LOCAL:
        return None
    layout = topology.plan(c)
    key_len = len(loadgen.KEY_PREFIX) + len(str(c.workload.key_maximum))
    return linkbound.bound(c, layout, key_len, linkbound.configured_rates(layout))


def _decomposition(mw: measure.MiddlewareTotals | None,
                   client_ms: float) -> dict[str, float] | None:
    if mw is None:
        return None
    stages = {s: mw.mean_us(m) for s, m in _STAGE_METRICS.items()}
    stages["network"] = max(client_ms * 1000 - mw.mean_us("response"), 0.0)
    return {s: stages[s] for s in STAGES}


def _mean(values: list[float]) -> float:
    return statistics.fmean(values)


def _std(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def x_axis(data: ReportData) -> tuple[str, str]:
    """(path, axis label) of the factor on the x axis: `report.x` if the file set it, else
    the offered rate when it is swept (open loop), else the number of clients when a client
    factor is swept, else the first factor."""
    factors = data.settings.get("factors", [])
    chosen = data.settings.get("report_x")
    if chosen is None:
        if "load.rate" in factors:
            chosen = "load.rate"
        elif any(f in CLIENT_FACTORS for f in factors) or not factors:
            chosen = "clients"
        else:
            chosen = factors[0]
    if chosen in CLIENT_FACTORS:
        chosen = "clients"
    return chosen, ("clients (instances x threads x connections)" if chosen == "clients"
                    else naming.factor_name(chosen))


def x_level(path: str, x: float, ticks: list[str] | None) -> str:
    """A position on the x axis as a reader says it: a load as its number ("16"), any
    other factor's level by its name ("write-only", "8 workers")."""
    if ticks is None and path in LOAD_AXES:
        return f"{x:,.0f}" if x >= 10_000 else f"{x:g}"
    level: object = ticks[int(x)] if ticks is not None else x
    return naming.level_name(path, level)


@dataclass(frozen=True)
class Curve:
    """The points of one configuration (every factor but the x axis fixed), by x."""

    label: str
    points: tuple[PointResult, ...]
    x: tuple[float, ...]
    #: The factors fixed along the curve, with their levels, in the sweep's order.
    fixed: tuple[tuple[str, object], ...] = ()

    @property
    def name(self) -> str:
        """The configuration as a reader says it ("read-only, 8 workers")."""
        return naming.curve_name(self.fixed) if self.fixed else self.label


def curves(data: ReportData) -> tuple[list[Curve], list[str] | None]:
    """The measured points grouped into curves, and tick labels when x is not numeric."""
    path, _ = x_axis(data)
    others = [f for f in data.settings.get("factors", [])
              if f != path and not (path == "clients" and f in CLIENT_FACTORS)]
    raw: dict[int, Any] = {p.index: (p.clients if path == "clients" else p.factors.get(path))
           for p in data.points}
    numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw.values())
    ticks = None if numeric else list(dict.fromkeys(str(v) for v in raw.values()))
    groups: dict[str, list[PointResult]] = {}
    fixed: dict[str, tuple[tuple[str, object], ...]] = {}
    for p in data.points:
        if p.measured:
            mine = tuple((f, p.factors[f]) for f in others if f in p.factors)
            key = ", ".join(f"{f}={v}" for f, v in mine) or "all points"
            groups.setdefault(key, []).append(p)
            fixed[key] = mine
    out = []
    for label, pts in groups.items():
        xs = [float(raw[p.index]) if ticks is None else float(ticks.index(str(raw[p.index])))
              for p in pts]
        order = sorted(range(len(pts)), key=lambda i: xs[i])
        out.append(Curve(label, tuple(pts[i] for i in order), tuple(xs[i] for i in order),
                         fixed[label]))
    return out, ticks


#: An x axis whose levels span this factor or more is drawn on a log scale.
LOG_SPAN = 100


def log_x(found: list[Curve], ticks: list[str] | None) -> bool:
    """Whether the x axis spans decades (object size, rate): numeric, positive, and the
    largest level at least LOG_SPAN times the smallest."""
    xs = [x for c in found for x in c.x]
    return ticks is None and bool(xs) and min(xs) > 0 and max(xs) >= LOG_SPAN * min(xs)


@dataclass(frozen=True)
class QosRow:
    curve: str
    result: qos.QosResult | None
    #: The configuration as a reader says it (`curve` keeps the raw factor paths).
    name: str = ""
    #: Where on the x axis the result lies, as a reader says it (`x_level`).
    at: str = ""
    #: The point the result was measured at.
    point: PointResult | None = None


def qos_rows(found: list[Curve], target_ms: float, x_path: str = "clients",
             ticks: list[str] | None = None) -> list[QosRow]:
    """Per curve, the highest throughput whose p99 stays under the target."""
    out = []
    for c in found:
        result = qos.max_throughput_under(
            [qos.Point(x, known(p.throughput), percentile_ms(p, "p99"))
             for x, p in zip(c.x, c.points, strict=True)], target_ms)
        at = [p for x, p in zip(c.x, c.points, strict=True) if result and x == result.load]
        out.append(QosRow(c.label, result, c.name,
                          x_level(x_path, result.load, ticks) if result else "",
                          at[0] if at else None))
    return out


@dataclass(frozen=True)
class LawRow:
    point: PointResult
    check: laws.InteractiveCheck


def interactive_rows(data: ReportData) -> list[LawRow]:
    """R = N / X - Z with Z = 0, for the closed-loop points (times in ms). N counts the
    requests outstanding: clients x pipeline depth."""
    rows = []
    for p in data.points:
        if p.measured and p.config["load"]["mode"] == "closed" and known(p.throughput) > 0:
            n = p.clients * p.config["load"]["pipeline"]
            (check,) = laws.check_interactive_law([(n, known(p.throughput) / 1000,
                                                    known(p.response_ms))])
            rows.append(LawRow(p, check))
    return rows


# A scale model's figures back at full speed (`topology.scale = k`, docs/topologies.md).
#
# A scale model runs the emulated data centre k times slower: link rates and CPU quotas
# divided by k, delays and queues multiplied by k. Every service, transfer and delay time is
# then k times longer and every ratio between them is kept, so the full-speed system's
# throughput is the measured one times k and its latencies the measured ones divided by k.
# `rescaled` applies that to what the report shows of a point (throughput, response times,
# percentiles and their intervals, the decomposition, per-operation figures, the link
# bound); CPU shares and queue lengths are ratios and stay as measured. Pure.

def _times(x: float | None, f: float) -> float | None:
    return None if x is None else x * f


def _interval(i: StoredInterval, k: float) -> StoredInterval:
    return dataclasses.replace(i, estimate_ms=i.estimate_ms / k, low_ms=i.low_ms / k,
                               high_ms=i.high_ms / k)


def rescaled(p: PointResult, k: float) -> PointResult:
    """The point's figures at full speed; `k` = 1 returns it unchanged."""
    if k == 1:
        return p
    return dataclasses.replace(
        p,
        throughput=_times(p.throughput, k), throughput_std=_times(p.throughput_std, k),
        response_ms=_times(p.response_ms, 1 / k), response_std=_times(p.response_std, 1 / k),
        percentiles_ms={n: v / k for n, v in p.percentiles_ms.items()},
        decomposition=None if p.decomposition is None else
        {s: v / k for s, v in p.decomposition.items()},
        server_service_us=tuple(v / k for v in p.server_service_us),
        link_bound=None if p.link_bound is None else
        linkbound.Bound(p.link_bound.ops_per_s * k, p.link_bound.limit),
        ops={n: measure.OpResult(o.throughput * k, o.response_ms / k, o.requests,
                                 {q: v / k for q, v in o.percentiles_ms.items()})
             for n, o in p.ops.items()},
        intervals={role: {n: _interval(i, k) for n, i in by_name.items()}
                   for role, by_name in p.intervals.items()},
        scale=k)
