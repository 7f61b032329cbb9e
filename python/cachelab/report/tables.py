"""The report's tables as flat rows, for `cachelab export DIR --table NAME`. Times in ms
unless a column says otherwise; ratios are predicted / measured."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cachelab.report import tls
from cachelab.report.data import STAGES, known, percentile_ms
from cachelab.report.measure import CLIENT_OPS, OP_PERCENTILES
from cachelab.report.models import utilisation
from cachelab.report.sections import Sections
from cachelab.store import Table


def _factors(sec: Sections) -> list[str]:
    return list(sec.data.settings.get("factors", []))


def _point_means(sec: Sections) -> Table:
    """One row per measured point: its factor values, throughput and response time over
    its steady runs, the throughput of each operation type alone (a multi-GET's counts no
    SET), and percentiles of the merged histograms of every instance of those runs."""
    factors = _factors(sec)
    rows = [(p.index, p.label, *(p.factors.get(f) for f in factors), p.clients, p.runs,
             p.steady_runs, p.throughput, p.throughput_std, p.response_ms, p.response_std,
             *(p.ops[op].throughput if op in p.ops else None for op in CLIENT_OPS),
             *(percentile_ms(p, k) for k, _ in OP_PERCENTILES), p.cv_within_max,
             known(p.verdict).cv_between, known(p.verdict).stable, known(p.verdict).reason)
            for p in sec.data.points if p.measured]
    return Table("point_means", ("point", "label", *factors, "clients", "runs",
                                 "steady_runs", "throughput", "throughput_std", "response_ms",
                                 "response_std", *(f"{op}_throughput" for op in CLIENT_OPS),
                                 "p50_ms", "p90_ms", "p99_ms", "cv_within_max", "cv_between",
                                 "stable", "validation"), rows)


def _percentile_intervals(sec: Sections) -> Table:
    """Each point's percentiles over its merged histograms, with their order-statistic
    intervals, per role of client (`load`, `measure`)."""
    rows = [(p.index, p.label, role, i.name, i.quantile, i.estimate_ms, i.low_ms, i.high_ms,
             i.confidence, i.samples)
            for p in sec.data.points for role, named in sorted(p.intervals.items())
            for i in named.values()]
    return Table("percentile_intervals", ("point", "label", "role", "percentile", "quantile",
                                          "estimate_ms", "low_ms", "high_ms", "confidence",
                                          "samples"), rows)


def _decomposition(sec: Sections) -> Table:
    rows = [(p.index, p.label, *(p.decomposition[s] for s in STAGES), p.queue_len,
             ", ".join(f"{v:g}" for v in p.server_service_us))
            for p in sec.data.points if p.decomposition]
    return Table("decomposition", ("point", "label", *(f"{s}_us" for s in STAGES),
                                   "queue_length", "server_service_us"), rows)


def _links(sec: Sections) -> Table:
    rows = [(p.index, p.label, p.link_bound.ops_per_s if p.link_bound else None,
             p.link_bound.limit if p.link_bound else None, link.src, link.dst,
             link.rtt_p50_us, link.rtt_p99_us, link.expected_rtt_us, link.mbit_forward,
             link.mbit_reverse)
            for p in sec.data.points for link in p.links]
    return Table("links", ("point", "label", "link_bound", "set_by", "src", "dst",
                           "rtt_p50_us", "rtt_p99_us", "expected_rtt_us", "mbit_forward",
                           "mbit_reverse"), rows)


def _factorial(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for a in sec.designs.analysed if sec.designs else ():
        letters = a.design.letters
        for response, res in a.results.items():
            for e in res.effects:
                lo, hi = e.ci if e.ci else (None, None)
                rows.append((a.design.label, response, e.name,
                             " x ".join(letters[c] for c in e.name if c in letters),
                             e.estimate, e.ss, e.variation_pct, lo, hi, e.significant,
                             res.replications, res.confidence))
            rows.append((a.design.label, response, "error", "", None, res.sse, res.error_pct,
                         None, None, None, res.replications, res.confidence))
            rows.append((a.design.label, response, "total", "", None, res.sst,
                         100.0 if res.sst > 0 else 0.0, None, None, None, res.replications,
                         res.confidence))
    return Table("factorial", ("design", "response", "effect", "factors", "estimate",
                               "sum_of_squares", "variation_pct", "ci_low", "ci_high",
                               "significant", "replications", "confidence"), rows)


def _factorial_runs(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for a in sec.designs.analysed if sec.designs else ():
        for response, (predicted, residual) in a.residuals.items():
            y = a.design.response(response)
            rows += [(a.design.label, r.point, r.repetition, response, yi, float(pi), float(ei))
                     for r, yi, pi, ei in zip(a.design.runs, y, predicted, residual,
                                              strict=True)]
    return Table("factorial_runs", ("design", "point", "repetition", "response", "measured",
                                    "predicted", "residual"), rows)


def _queueing(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for q in sec.queueing:
        if q.mm1 is None:
            rows.append((q.point.index, q.point.label, q.curve, q.x, "M/M/1", None, None,
                         None, None, None, None, None, None, None, None, None, None, None,
                         None, f"left out: {q.mm1_reason}"))
        for row in q.rows:
            rows.append((
                q.point.index, q.point.label, q.curve, q.x, row.model, row.arrival_rate,
                row.service_rate, row.servers, row.utilization, row.measured_utilization,
                row.queue_length.measured, row.queue_length.predicted, row.queue_length.ratio,
                *_ms(row.queue_wait.measured, row.queue_wait.predicted), row.queue_wait.ratio,
                *_ms(row.response_time.measured, row.response_time.predicted),
                row.response_time.ratio, "; ".join(row.assumptions)))
    return Table("queueing", (
        "point", "label", "curve", "x", "model", "lambda", "mu", "servers", "rho",
        "measured_utilization", "queue_length_measured", "queue_length_predicted",
        "queue_length_ratio", "queue_wait_measured_ms", "queue_wait_predicted_ms",
        "queue_wait_ratio", "response_measured_ms", "response_predicted_ms", "response_ratio",
        "assumptions_broken"), rows)


def _mva(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for s in sec.mva:
        for p, m in zip(s.points, s.basis.predicted, strict=True):
            rows.append((s.curve, s.basis.name, m.clients, p.index, p.throughput,
                         m.throughput, _ratio(m.throughput, p.throughput), p.response_ms,
                         m.response_time * 1e3, _ratio(m.response_time * 1e3, p.response_ms)))
    return Table("mva", ("curve", "basis", "N", "point", "throughput_measured",
                         "throughput_predicted", "throughput_ratio", "response_measured_ms",
                         "response_predicted_ms", "response_ratio"), rows)


def _mva_stations(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for s in sec.mva:
        b = s.basis
        rows += [(s.curve, b.name, st.name, st.kind, st.servers, st.visits,
                  st.service_time * 1e6, st.demand * 1e6, st.name == b.bounds.bottleneck)
                 for st in b.network.stations]
    return Table("mva_stations", ("curve", "basis", "station", "kind", "servers", "visits",
                                  "service_us", "demand_us", "bottleneck"), rows)


def _histograms(sec: Sections) -> Table:
    rows: list[tuple[Any, ...]] = []
    for dist in sec.distributions:
        for side, h in (("client", dist.client), ("middleware", dist.middleware)):
            if h is None:
                continue
            rows += [(dist.point.index, dist.curve, dist.op, side, lo, hi, n)
                     for lo, hi, n in zip(h.edges, h.edges[1:], h.counts, strict=False)]
            rows.append((dist.point.index, dist.curve, dist.op, side, h.cutoff, None,
                         h.overflow))
    return Table("histograms", ("point", "curve", "op", "side", "low_ms", "high_ms",
                                "count"), rows)


def _utilisation(sec: Sections) -> Table:
    rows = [(p.index, p.label, c.label, x, station, u)
            for c in sec.curves for x, p in zip(c.x, c.points, strict=True)
            for station, u in utilisation(p).items()]
    return Table("utilisation", ("point", "label", "curve", "x", "station", "utilisation"),
                 rows)


def _per_op(sec: Sections) -> Table:
    """Per point and operation type: that type's throughput alone, its mean response time
    and the percentiles of its merged histograms (all instances, all steady runs)."""
    factors = _factors(sec)
    rows = [(p.index, p.label, *(p.factors.get(f) for f in factors), op, o.throughput,
             o.response_ms, *(o.percentiles_ms.get(k) for k, _ in OP_PERCENTILES), o.requests)
            for p in sec.data.points for op, o in p.ops.items()]
    return Table("per_op", ("point", "label", *factors, "op", "throughput", "response_ms",
                            *(f"{k}_ms" for k, _ in OP_PERCENTILES), "requests"), rows)


def _qos(sec: Sections) -> Table:
    rows = [(r.curve, *((r.result.throughput, r.result.load, r.result.latency)
                        if r.result else (None, None, None))) for r in sec.qos]
    return Table("qos", ("curve", "throughput", "load", "p99_ms"), rows)


def _interactive_law(sec: Sections) -> Table:
    rows = [(r.point.index, r.point.label, r.check.clients, r.check.throughput * 1000,
             r.check.measured, r.check.expected, r.check.error) for r in sec.laws]
    return Table("interactive_law", ("point", "label", "N", "throughput", "response_ms",
                                     "expected_ms", "error_ms"), rows)


def _study(sec: Sections) -> Table:
    """The original study's values beside ours: one row per effect of each cited design
    (kind `effect`: variation %, estimate) and per cited point (kind `point`)."""
    rows: list[tuple[Any, ...]] = []
    st = sec.study
    for e in st.effects if st else ():
        rows += [("effect", e.cite, e.response, e.design, r.study_name, r.ours_name,
                  r.study_pct, r.ours_pct, r.study_estimate, r.ours_estimate, None, None,
                  None, None, None, None) for r in e.rows]
        if e.design is None:
            rows.append(("effect", e.cite, e.response, None, None, None, None, None, None,
                         None, None, None, None, None, None, f"not compared: {e.note}"))
    for r in st.points if st else ():
        p = r.point
        rows.append(("point", r.cite, None, r.where, None, None, None, None, None, None,
                     p.index if p else None, r.study_throughput, p.throughput if p else None,
                     r.study_response_ms, p.response_ms if p else None,
                     None if p else "no measured point matches"))
    return Table("study", ("kind", "cite", "response", "design_or_where", "study_effect",
                           "our_effect", "study_variation_pct", "our_variation_pct",
                           "study_estimate", "our_estimate", "point", "study_throughput",
                           "our_throughput", "study_response_ms", "our_response_ms",
                           "note"), rows)


def _phenomena(sec: Sections) -> Table:
    """The study's phenomena beside ours (`[[study.findings]]`): what it found, what we
    measured, whether it appears (empty where not measured) and the rule."""
    rows = [(r.cite, r.what, r.study, r.ours,
             None if r.appears is None else ("yes" if r.appears else "no"), r.rule)
            for r in (sec.study.findings if sec.study else ())]
    return Table("phenomena", ("cite", "what", "study", "ours", "appears", "rule"), rows)


#: The report's tables by export name, in the order the page shows them.
def _tls_cost(sec: Sections) -> Table:
    """What TLS added to each configuration: latency at p50 and p99 (ms) and CPU per
    request by role (µs), beside the values without TLS."""
    rows = [(c.point.index, c.point.label, c.baseline.index, ",".join(c.hops),
             c.baseline_p50_ms, c.p50_ms, c.p50_added_ms, c.baseline_p99_ms, c.p99_ms,
             c.p99_added_ms, *(v for role in tls.ROLES for v in (
                 c.baseline_cpu_us.get(role), c.cpu_us.get(role), c.cpu_added_us(role))),
             "; ".join(f"{x.hop} {x.version} {x.cipher} ({x.source})" for x in c.sessions))
            for c in sec.tls]
    return Table("tls_cost", ("point", "label", "baseline_point", "encrypted_hops",
                              "p50_plain_ms", "p50_tls_ms", "p50_added_ms", "p99_plain_ms",
                              "p99_tls_ms", "p99_added_ms",
                              *(f"{role}_cpu_{k}_us" for role in tls.ROLES
                                for k in ("plain", "tls", "added")), "negotiated"), rows)


TABLES: dict[str, Callable[[Sections], Table]] = {
    "point_means": _point_means, "percentile_intervals": _percentile_intervals,
    "decomposition": _decomposition, "qos": _qos,
    "interactive_law": _interactive_law, "per_op": _per_op, "utilisation": _utilisation,
    "factorial": _factorial, "factorial_runs": _factorial_runs, "study": _study,
    "phenomena": _phenomena,
    "queueing": _queueing,
    "mva": _mva, "mva_stations": _mva_stations, "histograms": _histograms, "links": _links,
    "tls_cost": _tls_cost,
}


def _ms(measured: float, predicted: float | None) -> tuple[float, float | None]:
    return measured * 1e3, None if predicted is None else predicted * 1e3


def _ratio(predicted: float, measured: float | None) -> float | None:
    return predicted / measured if measured else None
