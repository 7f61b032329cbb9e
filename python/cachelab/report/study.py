"""The original study's values beside ours: per design, effect by effect (% of variation
and the estimate's sign), and point by point (throughput, response time). The study's
values come from the experiment file's `[study]` (spec/study.py), read back from the
stored source, so a database needs nothing new. No SQL, no plots.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from cachelab.analysis.design import level_text
from cachelab.errors import UserError
from cachelab.report.data import PointResult
from cachelab.report.designs import Designs
from cachelab.report.phenomena import PhenomenonRow
from cachelab.report.phenomena import compare as compare_phenomena
from cachelab.spec import experiment as spec
from cachelab.spec import naming
from cachelab.spec import study as study_mod


@dataclass(frozen=True)
class EffectRow:
    """One effect: the study's name and ours (letters of our design, or `error`)."""

    study_name: str
    ours_name: str | None
    study_pct: float | None
    ours_pct: float | None
    study_estimate: float | None
    ours_estimate: float | None

    @property
    def same_sign(self) -> bool | None:
        if self.study_estimate is None or self.ours_estimate is None:
            return None
        return (self.study_estimate >= 0) == (self.ours_estimate >= 0)


@dataclass(frozen=True)
class EffectsComparison:
    cite: str
    response: str
    #: Our design's label, or None when none matched (`note` says why).
    design: str | None
    rows: tuple[EffectRow, ...]
    note: str | None = None
    #: Our design's group as a reader says it ("read-only"); `design` keeps the raw label.
    design_name: str | None = None


@dataclass(frozen=True)
class PointRow:
    cite: str
    where: str
    at: str
    #: Our point; None when no measured point matches (the row says so).
    point: PointResult | None
    study_throughput: float | None
    study_response_ms: float | None
    #: `where` as a reader says it ("8 workers").
    where_name: str = ""

    @property
    def throughput_ratio(self) -> float | None:
        return _ratio(self.point.throughput if self.point else None, self.study_throughput)

    @property
    def response_ratio(self) -> float | None:
        return _ratio(self.point.response_ms if self.point else None, self.study_response_ms)


@dataclass(frozen=True)
class StudyComparison:
    source: str
    effects: tuple[EffectsComparison, ...]
    points: tuple[PointRow, ...]
    #: The study's phenomena and whether each appears in ours (report/phenomena.py).
    findings: tuple[PhenomenonRow, ...] = ()


def load(source: str, factor_paths: list[str]) -> study_mod.Study | None:
    """The `[study]` of a stored experiment's source; None without one. A source that no
    longer parses (edited by hand in the database) is a UserError naming the field."""
    try:
        doc = tomllib.loads(source)
    except tomllib.TOMLDecodeError:
        return None
    if "study" not in doc:
        return None
    return study_mod.parse(doc["study"], factor_paths, spec.field_paths())


def compare(found: study_mod.Study, designs: Designs | None,
            points: tuple[PointResult, ...], qos_ms: float = 1.0) -> StudyComparison:
    return StudyComparison(found.source,
                           tuple(_effects(e, designs) for e in found.effects),
                           tuple(row for p in found.points for row in _points(p, points)),
                           compare_phenomena(found.findings, points, config_value, qos_ms))


def _effects(e: study_mod.StudyEffects, designs: Designs | None) -> EffectsComparison:
    want = {(path, level_text(v)) for path, v in e.where}
    paths = {path for _, path in e.factors}
    for a in designs.analysed if designs else ():
        if not want <= set(a.design.group) or set(a.design.factors) != paths:
            continue
        if e.response not in a.results:
            break
        res = a.results[e.response]
        ours = {frozenset(a.design.letters[c] for c in eff.name): eff for eff in res.effects
                if eff.name != "I"}
        mean = next(eff for eff in res.effects if eff.name == "I")
        estimates = dict(e.effects)
        rows = []
        for name, pct in e.variation_pct:
            if name == "error":
                rows.append(EffectRow("error", "error", pct, res.error_pct, None, None))
                continue
            mine = ours.get(e.paths_of(name))
            rows.append(EffectRow(name, mine.name if mine else None, pct,
                                  mine.variation_pct if mine else None,
                                  estimates.get(name), mine.estimate if mine else None))
        if "I" in estimates:
            rows.insert(0, EffectRow("I", "I", None, None, estimates["I"], mean.estimate))
        return EffectsComparison(e.cite, e.response, a.design.label, tuple(rows),
                                 design_name=naming.curve_name(a.design.group)
                                 if a.design.group else a.design.label)
    where = ", ".join(f"{p}={level_text(v)}" for p, v in e.where) or "all runs"
    return EffectsComparison(e.cite, e.response, None, (),
                             f"no analysed design of {', '.join(sorted(paths))} at {where}")


def _points(p: study_mod.StudyPoint, points: tuple[PointResult, ...]) -> list[PointRow]:
    where = ", ".join(f"{path}={level_text(v)}" for path, v in p.where) or "every point"
    named = naming.curve_name(p.where) if p.where else "every point"
    found = [q for q in points if q.measured and all(
        level_text(config_value(q.config, path)) == level_text(v) for path, v in p.where)]
    if p.at == "max" and found:
        found = [max(found, key=lambda q: q.throughput or 0.0)]
    if not found:
        return [PointRow(p.cite, where, p.at, None, p.throughput, p.response_ms, named)]
    return [PointRow(p.cite, where, p.at, q, p.throughput, p.response_ms, named)
            for q in found]


def config_value(config: dict, path: str) -> object:
    """A stored configuration's value at a field path ("servers.count")."""
    value: object = config
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise UserError(f"study: {path} is not in the stored configuration")
        value = value[part]
    return value


def _ratio(ours: float | None, theirs: float | None) -> float | None:
    return ours / theirs if ours is not None and theirs else None
