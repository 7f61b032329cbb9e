"""The report's answers, computed from what the rest of the report already holds: the
capacity of each configuration within the QoS target and the best of them, the
bottleneck at each configuration's highest load by the utilisation law, whether the
queueing models fit, what not to trust, and the original study beside ours.

Every sentence the findings section prints comes from these records; nothing is written
per experiment. Pure: no SQL, no HTML (the template words the records).
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from cachelab.errors import UserError
from cachelab.report.data import LOAD_AXES, Curve, LawRow, PointResult, QosRow, known
from cachelab.report.models import MvaSection, QueueingPoint, server_threads, utilisation
from cachelab.report.study import StudyComparison
from cachelab.spec import experiment as spec
from cachelab.spec import naming, topology
from cachelab.store import LateRun, RunCheck, StoredCapacity

#: A resource this busy or busier is the bottleneck; below it the load did not saturate.
SATURATED = 0.8
#: A model fits a point when predicted / measured lies within [1 / FIT, FIT].
FIT = 1.5
#: An interactive-law error above this share of N / X points at the measurement.
LAW_ERROR = 0.1
#: More unstable points than this are one finding, linked to their list.
LISTED = 4


def anchor(p: PointResult) -> str:
    """The id of a point's row in the points table."""
    return f"point-{p.index + 1}"


@dataclass(frozen=True)
class Capacity:
    """A configuration's highest throughput whose p99 meets the target (None: none does)."""

    name: str
    raw: str
    throughput: float | None
    at: float | None
    p99_ms: float | None
    #: `at` as a reader says it: a load's number, or another factor's level ("write-only").
    at_text: str = ""
    #: The point measured there when it stayed unstable (the answer rests on it).
    unstable: PointResult | None = None


def capacities(rows: Sequence[QosRow]) -> list[Capacity]:
    return [Capacity(r.name or r.curve, r.curve, r.result.throughput, r.result.load,
                     r.result.latency, r.at, r.point if r.point and _unstable(r.point)
                     else None) if r.result else
            Capacity(r.name or r.curve, r.curve, None, None, None) for r in rows]


def _unstable(p: PointResult) -> bool:
    return bool(p.verdict and not p.verdict.stable and not p.verdict.more)


def best(found: Sequence[Capacity]) -> Capacity | None:
    """The configuration that carries the most within the target; None if none meets it."""
    meeting = [c for c in found if c.throughput is not None]
    return max(meeting, key=lambda c: known(c.throughput)) if meeting else None


def searched(searches: Sequence[StoredCapacity], names: dict[int, str]) -> list[Capacity]:
    """Open-loop capacity searches: per point, the smallest capacity its repetitions
    found (the rate every repetition carried)."""
    out = []
    for point in dict.fromkeys(k.point for k in searches):
        mine = [k for k in searches if k.point == point]
        found = [k.search for k in mine if k.search.capacity]
        low = min(found, key=lambda s: known(s.capacity)) if found else None
        out.append(Capacity(names.get(point, mine[0].label), mine[0].label,
                            low.capacity if low else None, None,
                            low.latency_ms if low else None))
    return out


@dataclass(frozen=True)
class Load:
    """One resource's utilisation at a point and how it was computed."""

    resource: str
    utilisation: float
    how: str
    #: Not a utilisation but the requests there (a server's time as the middleware sees
    #: it holds the round trip and the server's queue, so it may exceed 1): ranked after
    #: every true utilisation.
    occupancy: bool = False


def loads(p: PointResult, quotas: dict[str, float] | None = None) -> list[Load]:
    """Every resource the point measured, busiest first, by the utilisation law U = X D / m:
    the middleware's workers, the links' bound, the host's CPUs, each emulated host's CPU
    against its quota (`quotas`, cores by host), and the load generators' busiest thread;
    then each server's occupancy X V S per thread (its time as the middleware measures it
    includes the round trip and its queue, so it is no utilisation)."""
    out = []
    u = utilisation(p)
    mw = p.middleware
    if mw is not None and "workers" in u:
        m = p.config["middleware"]["workers"] * mw.middlewares
        # A scale model's middleware figures stay in its own time (k times slower than
        # the points table's): U is the same either way, X and S are not.
        out.append(Load("the middleware's workers", u["workers"],
                        f"X S / m = {mw.throughput:,.0f}/s x "
                        f"{mw.mean_us('worker_service'):,.0f} µs / {m}"
                        + (f" in the scale model's time (k = {p.scale:g})"
                           if p.scale != 1 else "")
                        + (f"; queue length {mw.queue_len_total:.3g}"
                           if mw.queue_len_total else "")))
        threads = server_threads(p.config)
        for j, server in enumerate(mw.servers):
            out.append(Load(f"server {j + 1}", u[f"server {j + 1}"] / threads,
                            f"X V S / threads = {mw.throughput:,.0f}/s x "
                            f"{mw.visits(j):.2f} x {server.service.mean:,.0f} µs / {threads}"
                            " (S includes the round trip and the server's queue)",
                            occupancy=True))
    if p.link_bound is not None and p.throughput and p.link_bound.ops_per_s > 0:
        out.append(Load(f"the link ({p.link_bound.limit})",
                        p.throughput / p.link_bound.ops_per_s,
                        f"X / link bound = {p.throughput:,.0f} / "
                        f"{p.link_bound.ops_per_s:,.0f} ops/s"))
    if "host CPU" in u:
        out.append(Load("this machine's CPUs", u["host CPU"],
                        f"busy {u['host CPU']:.0%} of every core"))
    for host, (usr, sys) in p.host_cpu.items():
        quota = (quotas or {}).get(host)
        if quota:
            out.append(Load(f"host {host}'s CPU quota", (usr + sys) / 100 / quota,
                            f"{usr + sys:.0f}% of a core / quota {quota:g} cores"))
    clients = [k.busiest_cpu_share for k in p.clocks
               if k.role == "load" and k.busiest_cpu_share is not None]
    if clients:
        out.append(Load("the load generators", max(clients),
                        f"busiest thread {max(clients):.0%} of a core"))
    return sorted(out, key=lambda x: (x.occupancy, -x.utilisation))


def host_quotas(config: dict) -> dict[str, float]:
    """The CPU quota (cores, as the run applied it) of each emulated host; {} on local."""
    c = spec.config_from_dict(config)
    if c.topology.kind != spec.TopologyKind.NETNS:
        return {}
    return {h.name: h.cpu_quota for h in topology.plan(c).hosts if h.cpu_quota > 0}


@dataclass(frozen=True)
class Bottleneck:
    """At a configuration's highest load (or, when the x axis is not a load, its point of
    highest throughput): the busiest resource (None: nothing measured) and whether it is
    saturated, with the next busiest."""

    configuration: str
    point: PointResult
    busiest: Load | None
    next: Load | None

    @property
    def saturated(self) -> bool:
        return self.busiest is not None and self.busiest.utilisation >= SATURATED


def bottleneck(c: Curve, quotas: dict[str, float] | None = None,
               by_load: bool = True) -> Bottleneck:
    """The configuration's highest load (the last point on its x axis) when the x axis is
    a load (`by_load`), else its point of highest measured throughput (the last on an axis
    of workloads or worker counts is no higher load), and its busiest resources."""
    p = c.points[-1] if by_load else max(c.points, key=lambda q: q.throughput or 0.0)
    found = loads(p, quotas)
    return Bottleneck(c.name, p, found[0] if found else None,
                      found[1] if len(found) > 1 else None)


@dataclass(frozen=True)
class ModelFit:
    """A model's response time predicted / measured over the points it predicted."""

    model: str
    ratios: tuple[float, ...]
    fits: int
    #: The point farthest from 1 (by |log ratio|), its ratio and the assumptions it breaks.
    worst: PointResult | None
    worst_ratio: float | None
    broken: tuple[str, ...]
    #: Points where the model has no prediction (rho >= 1).
    unpredicted: int
    #: Where the model was not applied and why ("at all 16 points: ..."); None: nowhere.
    left_out: str | None = None

    @property
    def applied(self) -> bool:
        """Whether the model was applied at any point (with or without a prediction)."""
        return bool(self.ratios) or self.unpredicted > 0

    @property
    def median(self) -> float | None:
        return statistics.median(self.ratios) if self.ratios else None

    @property
    def fits_all(self) -> bool:
        return bool(self.ratios) and self.fits == len(self.ratios) and not self.unpredicted


def fitting(ratio: float) -> bool:
    return 1 / FIT <= ratio <= FIT


def queueing_fits(points: Sequence[QueueingPoint]) -> list[ModelFit]:
    """M/M/1 and M/M/m: how many points each fits, and where the worst misses, why; and
    where M/M/1 was left out (no service rate measured apart from the point) and why."""
    out = []
    for model in ("M/M/1", "M/M/m"):
        rows = [(q.point, r) for q in points for r in q.rows if r.model == model]
        skipped = [q for q in points if q.mm1 is None] if model == "M/M/1" else []
        why = "; ".join(dict.fromkeys(q.mm1_reason or "no service rate measured"
                                      for q in skipped))
        where = (f"{len(skipped)} of {len(points)}" if rows else
                 "the one" if len(skipped) == 1 else f"all {len(skipped)}")
        left_out = f"at {where} point{'s' if len(points) > 1 else ''}: {why}" if skipped \
            else None
        if not rows:
            if left_out:
                out.append(ModelFit(model, (), 0, None, None, (), 0, left_out))
            continue
        rated = [(p, r, r.response_time.ratio) for p, r in rows
                 if r.response_time.ratio is not None]
        ratios = tuple(x for _, _, x in rated if x is not None)
        worst = max(rated, key=lambda t: abs(_log(t[2])), default=None)
        missing = [r for _, r in rows if r.response_time.ratio is None]
        broken = (worst[1].assumptions if worst and not fitting(known(worst[2]))
                  else missing[0].assumptions if missing else ())
        out.append(ModelFit(model, ratios, sum(1 for x in ratios if fitting(x)),
                            worst[0] if worst else None, worst[2] if worst else None,
                            broken, len(missing), left_out))
    return out


def mva_fits(sections: Sequence[MvaSection], note: str | None = None,
             configurations: int = 0) -> list[ModelFit]:
    """The network of queues over every configuration it was built for: throughput
    predicted / measured at each population (the response time follows from it by the
    interactive law), and the assumptions of the configuration where it misses most; and
    with `note` (models.mva_sections' reason), the configurations left out of the
    `configurations` and why."""
    rated = [(p, m.throughput / p.throughput, s) for s in sections
             for p, m in zip(s.points, s.basis.predicted, strict=True) if p.throughput]
    left = max(configurations - len(sections), 0)
    left_out = None if not note else (
        f"at {left} of {configurations} configurations: {note}" if sections and left
        else f"at every configuration: {note}" if not sections else note)
    if not rated:
        return [ModelFit("MVA", (), 0, None, None, (), 0, left_out)] if left_out else []
    worst = max(rated, key=lambda t: abs(_log(t[1])))
    ratios = tuple(r for _, r, _ in rated)
    return [ModelFit("MVA" if len(sections) == 1 else
                     f"MVA ({len(sections)} configurations)", ratios,
                     sum(1 for r in ratios if fitting(r)), worst[0], worst[1],
                     worst[2].assumptions if not fitting(worst[1]) else (), 0, left_out)]


def _log(x: float | None) -> float:
    return math.log(x) if x and x > 0 else math.inf


@dataclass(frozen=True)
class Doubt:
    """A figure not to trust, and the anchor of its detail."""

    what: str
    link: str


def doubts(points: Sequence[PointResult], late: Sequence[LateRun],
           checks: Sequence[RunCheck], searches: Sequence[StoredCapacity],
           laws: Sequence[LawRow]) -> list[Doubt]:
    """Unstable points (one line for more than LISTED), open-loop schedules missed, load
    generators that sent late, failed self-checks (by kind: a busy machine, a saturated
    client, dependent or drifting seconds), capacity searches limited by their generator,
    and interactive-law errors above LAW_ERROR."""
    out = []
    names = {p.index: p.name for p in points}
    unstable = [p for p in points if _unstable(p)]
    if len(unstable) > LISTED:
        out.append(Doubt(f"{len(unstable)} of {len(points)} points stayed unstable (their "
                         "runs' throughput varied more than the threshold)", "unstable"))
    else:
        out += [Doubt(f"{p.name}: unstable ({known(p.verdict).reason})", anchor(p))
                for p in unstable]
    for p in points:
        if p.fell_behind_runs:
            out.append(Doubt(f"{p.name}: the load generator fell behind its open-loop "
                             f"schedule in {p.fell_behind_runs} run(s)", anchor(p)))
    for point in dict.fromkeys(r.point for r in late):
        mine = [r for r in late if r.point == point]
        worst = max(mine, key=lambda r: r.send_lag_p99_ms)
        out.append(Doubt(f"{names.get(point, worst.label)}: the load generator sent late in "
                         f"{len(mine)} run(s) (p99 send lag {worst.send_lag_p99_ms:.3g} ms of "
                         f"a {worst.p99_ms:.3g} ms p99)", "late"))
    failed = Counter(k.name for k in checks if not k.passed)
    runs = len({(k.point, k.repetition) for k in checks})
    what = {"machine": "this machine, not the emulated system, was the limit",
            "client CPU": "a load generator's thread was saturated (the throughput may be "
                          "the client's)",
            "independence": "successive seconds are correlated (intervals too narrow)",
            "stationarity": "the latency drifts within the run",
            "warm-up": "the cache was not warm when measuring began"}
    for name, n in failed.items():
        out.append(Doubt(f"{n} of {runs} runs: {what.get(name, name + ' failed')}", "checks"))
    limited = {k.point for k in searches if k.search.limited_by_generator}
    if limited:
        out.append(Doubt(f"{len(limited)} capacity search(es) stopped by the load generator, "
                         "not the system", "capacity"))
    bad = [r for r in laws if r.check.expected and abs(r.check.error / r.check.expected)
           > LAW_ERROR]
    if bad:
        worst_law = max(bad, key=lambda r: abs(r.check.error / r.check.expected))
        out.append(Doubt(f"{len(bad)} point(s) break the interactive law by more than "
                         f"{LAW_ERROR:.0%} (worst {worst_law.point.name}: "
                         f"{worst_law.check.error / worst_law.check.expected:+.0%})", "law"))
    return out


@dataclass(frozen=True)
class StudyRow:
    """One cited design: each effect's share of the variation, the study's and ours."""

    cite: str
    response: str
    #: Effect name -> (study %, our %); None where one side has no value.
    shares: dict[str, tuple[float | None, float | None]]
    same_signs: int
    signs: int
    note: str | None


def study_rows(st: StudyComparison | None) -> tuple[list[str], list[StudyRow]]:
    """The study's allocation of variation beside ours, one row per cited design, and the
    effects (columns) in the order the study lists them."""
    if st is None:
        return [], []
    rows, columns = [], []
    for e in st.effects:
        shares = {r.study_name: (r.study_pct, r.ours_pct) for r in e.rows
                  if r.study_pct is not None or r.ours_pct is not None}
        columns += [n for n in shares if n not in columns]
        signed = [r.same_sign for r in e.rows if r.same_sign is not None and r.study_name != "I"]
        rows.append(StudyRow(e.cite, e.response, shares, sum(signed), len(signed), e.note))
    if "error" in columns:
        columns.append(columns.pop(columns.index("error")))
    return columns, rows


@dataclass(frozen=True)
class Findings:
    capacities: list[Capacity]
    best: Capacity | None
    searched: list[Capacity]
    bottlenecks: list[Bottleneck]
    models: list[ModelFit]
    doubts: list[Doubt]
    study_columns: list[str]
    study: list[StudyRow]
    study_points: StudyComparison | None
    #: Whether the x axis is a load (clients, rate): only then is a configuration's last
    #: point its highest load; else the bottleneck is sought at its busiest point.
    load_axis: bool = True
    #: The x axis's factor as a reader says it ("clients", "sets:gets ratio").
    x_name: str = "clients"
    #: Every measured point's resources, busiest first: the table the bottleneck column
    #: is checked against.
    utilisation: list[tuple[PointResult, list[Load]]] = field(default_factory=list)


def build(*, qos: Sequence[QosRow], curves: Sequence[Curve],
          queueing: Sequence[QueueingPoint], mva: Sequence[MvaSection],
          points: Sequence[PointResult], late: Sequence[LateRun],
          checks: Sequence[RunCheck], searches: Sequence[StoredCapacity],
          laws: Sequence[LawRow], study: StudyComparison | None,
          x_path: str = "clients", mva_note: str | None = None) -> Findings:
    found = capacities(qos)
    columns, rows = study_rows(study)
    by_load = x_path in LOAD_AXES
    return Findings(
        capacities=found, best=best(found),
        searched=searched(searches, {p.index: p.name for p in points}),
        bottlenecks=[bottleneck(c, _quotas(c), by_load) for c in curves],
        utilisation=[(p, loads(p, _quotas(c))) for c in curves for p in c.points],
        models=(queueing_fits(queueing) + mva_fits(mva, mva_note, len(curves))
                if queueing or mva else []),
        doubts=doubts(points, late, checks, searches, laws),
        study_columns=columns, study=rows, study_points=study,
        load_axis=by_load, x_name=naming.factor_name(x_path).split(" (")[0])


def _quotas(c: Curve) -> dict[str, float]:
    try:
        return host_quotas(c.points[-1].config)
    except (KeyError, TypeError, ValueError, UserError):
        return {}  # a hand-made configuration (tests) or one from an older schema
