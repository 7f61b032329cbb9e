"""A study's phenomena (`[[study.findings]]`, spec/findings.py) beside ours: its QoS knee,
its peak throughput and where, its scaling ratios and its CPU breakdown, each measured
on our points and judged by the rule the experiment file states. Pure: points in, rows
out; the points are the report's (a scale model's already at full speed).

- peak: the level of `along` with the highest throughput; it appears when ours is at
  one of the levels `appears` lists.
- knee: the highest level whose p99 stays under the QoS target; it appears when ours is
  one of the listed levels (none under the target: it does not).
- ratio: throughput at level `to` over that at `from`; it appears within [low, high].
- cpu: the server host's user and system time (its cgroup, % of one core) at the point
  of highest throughput that `where` picks; it appears when the kernel's time is above
  the server's own, as the study found (soft interrupts run outside every cgroup, so
  ours is the kernel's system time alone).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cachelab.analysis.design import level_text
from cachelab.report.data import PointResult
from cachelab.spec.findings import Finding

#: How each kind reads in a row's first column.
WHAT = {"peak": "peak throughput", "knee": "QoS knee (last level with p99 under target)",
        "ratio": "throughput ratio", "cpu": "CPU breakdown"}


@dataclass(frozen=True)
class PhenomenonRow:
    cite: str
    what: str
    #: What the study found and what we measured, as a reader says it.
    study: str
    ours: str
    #: True / False; None when ours could not be measured (`ours` says why).
    appears: bool | None
    #: The rule it was judged by.
    rule: str


def compare(findings: Sequence[Finding], points: Sequence[PointResult],
            value: Callable[[dict, str], object], qos_ms: float = 1.0) -> tuple[PhenomenonRow, ...]:
    """One row per finding. `value(config, path)` reads a stored configuration's field."""
    return tuple(_row(f, points, value, qos_ms) for f in findings)


def _row(f: Finding, points: Sequence[PointResult], value: Callable[[dict, str], object],
         qos_ms: float) -> PhenomenonRow:
    chosen = [q for q in points if q.measured and q.throughput is not None and all(
        level_text(value(q.config, path)) == level_text(v) for path, v in f.where)]
    if f.what == "cpu":
        return _cpu(f, chosen)
    levels: dict[str, PointResult] = {}
    for q in chosen:  # the highest throughput where several points share a level
        key = level_text(value(q.config, f.along or ""))
        if key not in levels or (q.throughput or 0) > (levels[key].throughput or 0):
            levels[key] = q
    ordered = sorted(levels.items(), key=lambda kv: _order(kv[0]))
    if f.what == "ratio":
        return _ratio(f, levels)
    listed = ", ".join(level_text(v) for v in f.appears)
    rule = f"ours at {listed}"
    study = f"at {level_text(f.level)}" + (f", {_ops(f.throughput)}" if f.throughput else "")
    if not ordered:
        return PhenomenonRow(f.cite, WHAT[f.what], study, "not measured", None, rule)
    if f.what == "peak":
        level, q = max(ordered, key=lambda kv: kv[1].throughput or 0.0)
    else:
        under = [(k, q) for k, q in ordered if q.percentiles_ms.get("p99", 1e9) < qos_ms]
        if not under:
            lowest = min(q.percentiles_ms.get("p99", 1e9) for _, q in ordered)
            return PhenomenonRow(f.cite, WHAT[f.what], study,
                                 f"never under {qos_ms:g} ms (lowest p99 {lowest:.2f} ms)",
                                 False, rule)
        level, q = under[-1]
    p99 = q.percentiles_ms.get("p99")
    ours = f"at {level}, {_ops(q.throughput)}" + (f", p99 {p99:.2f} ms" if p99 else "")
    theirs = levels.get(level_text(f.level))
    if f.what == "peak" and theirs is not None and theirs is not q and q.throughput:
        share = 100 * (theirs.throughput or 0.0) / q.throughput
        ours += f"; at {level_text(f.level)}: {_ops(theirs.throughput)} ({share:.1f}% of it)"
    return PhenomenonRow(f.cite, WHAT[f.what], study, ours,
                         level in {level_text(v) for v in f.appears}, rule)


def _ratio(f: Finding, levels: dict[str, PointResult]) -> PhenomenonRow:
    low, high = (float(v) for v in f.appears if isinstance(v, int | float))
    span = f"{level_text(f.from_level)} -> {level_text(f.to_level)}"
    study = f"{span}: " + (f"x{f.ratio:.2f}" if f.ratio is not None else "(no figure)")
    rule = f"ours within x{low:g} .. x{high:g}"
    a, b = levels.get(level_text(f.from_level)), levels.get(level_text(f.to_level))
    if a is None or b is None or not a.throughput:
        return PhenomenonRow(f.cite, WHAT["ratio"], study, f"{span}: not measured", None,
                             rule)
    r = (b.throughput or 0.0) / a.throughput
    ours = f"{span}: x{r:.2f} ({_ops(a.throughput)} -> {_ops(b.throughput)})"
    return PhenomenonRow(f.cite, WHAT["ratio"], study, ours, low <= r <= high, rule)


def _cpu(f: Finding, chosen: list[PointResult]) -> PhenomenonRow:
    shares = [("usr", f.usr), ("sys", f.sys), ("soft", f.soft)]
    study = ", ".join(f"{k} {v:g}%" for k, v in shares if v is not None)
    kernel = (f.sys or 0) + (f.soft or 0)
    study += f" (kernel {kernel:g}% vs user {f.usr:g}%)"
    rule = "the server host's system time above its user time"
    found = [q for q in chosen if f.host in q.host_cpu]
    if not found:
        return PhenomenonRow(f.cite, WHAT["cpu"], study,
                             f"no CPU of host {f.host} measured", None, rule)
    q = max(found, key=lambda p: p.throughput or 0.0)
    usr, sys_ = q.host_cpu[f.host]
    busy = usr + sys_
    share = f", kernel {100 * sys_ / busy:.0f}% of its busy time" if busy else ""
    soft = f"; machine softirq {q.cpu['softirq']:.1f}%" if q.cpu and "softirq" in q.cpu else ""
    ours = f"{f.host}: usr {usr:.1f}%, sys {sys_:.1f}% of a core{share}{soft}"
    return PhenomenonRow(f.cite, WHAT["cpu"], study, ours, sys_ > usr, rule)


def _ops(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1000:.0f}k ops/s" if x >= 10_000 else f"{x:,.0f} ops/s"


def _order(text: str) -> tuple[int, float, str]:
    try:
        return (0, float(text), text)
    except ValueError:
        return (1, 0.0, text)
