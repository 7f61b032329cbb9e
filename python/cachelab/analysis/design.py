"""Finding the 2^k r designs in an experiment's sweep, and the runs that keep them balanced.

A sweep is a 2^k design when k factors each take two levels and every combination was run.
Factors under `workload.` may instead split the runs into groups, one design per workload,
as the original study analysed reads and writes apart. Only steady runs count (a run whose
within-run CV is above the threshold measured something else than the point); a design
needs the same number r of runs per combination, so when the points have different numbers
of steady runs the first r of each are used, and the plan says so.

Pure: the caller reads the runs (`cachelab.report.designs` does, from the database).
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from cachelab.analysis.errors import AnalysisError
from cachelab.spec.naming import level_text

#: Run columns a design can take as its response, with the words the report uses.
RESPONSES = {
    "throughput": "throughput (ops/s)",
    "response_ms": "response time (ms)",
    "p50_ms": "p50 (ms)", "p90_ms": "p90 (ms)", "p99_ms": "p99 (ms)", "p999_ms": "p99.9 (ms)",
    "max_ms": "max (ms)",
}
#: Factors under this prefix split the runs into one design each, unless named as factors.
GROUPING_PREFIX = "workload."


@dataclass(frozen=True)
class Run:
    """One stored run: its point's factor values, whether it is steady, its responses."""

    point: int
    repetition: int
    factors: Mapping[str, object]
    steady: bool
    responses: Mapping[str, float]


@dataclass(frozen=True)
class Design:
    """A balanced 2^k r design: the runs used, r of each combination of `factors`.

    Effects are named by letters (A for the first factor, ...), so that AB reads as the
    interaction of the first two; `letters` maps each letter to its factor's path.
    """

    group: tuple[tuple[str, str], ...]
    factors: tuple[str, ...]
    runs: tuple[Run, ...]
    replications: int
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return ", ".join(f"{p}={v}" for p, v in self.group) or "all runs"

    @property
    def letters(self) -> dict[str, str]:
        return dict(zip(string.ascii_uppercase, self.factors, strict=False))

    def columns(self) -> dict[str, list[str]]:
        """One column of level labels per factor, keyed by letter, in run order."""
        return {letter: [level_text(r.factors[path]) for r in self.runs]
                for letter, path in self.letters.items()}

    def response(self, name: str) -> list[float]:
        return [float(r.responses[name]) for r in self.runs]


@dataclass(frozen=True)
class Plan:
    """The designs found; `skipped` says which groups could not be analysed and why."""

    designs: tuple[Design, ...]
    factors: tuple[str, ...]
    grouping: tuple[str, ...]
    runs: int
    steady_runs: int
    skipped: tuple[str, ...] = field(default=())


def resolve(name: str, paths: Sequence[str], what: str = "factor") -> str:
    """A factor path from its full path or an unambiguous last part (`workers` for
    `middleware.workers`, `ratio` for `workload.ratio`)."""
    if name in paths:
        return name
    found = [p for p in paths if p.endswith("." + name) or p.split(".")[-1] == name]
    if len(found) == 1:
        return found[0]
    listed = ", ".join(paths) or "none"
    if not found:
        raise AnalysisError(f"{name!r} is not a {what} of this experiment (factors: {listed})")
    raise AnalysisError(f"{name!r} could be any of {', '.join(found)}; give the full path")


def plan(factor_paths: Sequence[str], runs: Sequence[Run], *,
         factors: Sequence[str] | None = None,
         where: Mapping[str, str] | None = None, include_unsteady: bool = False) -> Plan:
    """The designs among `runs`: filtered by `where` (path or last part -> level), with
    `factors` as the design's factors (default: every non-workload factor that varies, or
    the workload factors if nothing else varies) and every other varying factor splitting
    the runs into groups. With `include_unsteady`, runs flagged unsteady count too (the
    notes name them). Raises AnalysisError when the sweep is not a 2^k design."""
    selected = list(runs)
    for name, value in (where or {}).items():
        path = resolve(name, factor_paths)
        levels = _levels(selected, path)
        if value not in levels:
            raise AnalysisError(f"no run has {path}={value} (levels: {', '.join(levels)})")
        selected = [r for r in selected if level_text(r.factors.get(path)) == value]
    varying = [p for p in factor_paths if len(_levels(selected, p)) > 1]
    if factors:
        design = [resolve(f, factor_paths) for f in factors]
        twice = next((p for p in design if design.count(p) > 1), None)
        if twice is not None:
            raise AnalysisError(f"factor {twice} is named twice")
    else:
        design = [p for p in varying if not p.startswith(GROUPING_PREFIX)] or varying
    if not design:
        raise AnalysisError("no factor varies over these runs, so there is no design")
    for path in design:
        levels = _levels(selected, path)
        if len(levels) != 2:
            shown = ", ".join(levels[:6]) + (", ..." if len(levels) > 6 else "")
            raise AnalysisError(f"not a 2^k design: {path} has {len(levels)} level(s) "
                                f"({shown}); every factor needs exactly two")
    grouping = [p for p in varying if p not in design]
    groups: dict[tuple[tuple[str, str], ...], list[Run]] = {}
    for r in selected:
        key = tuple((p, level_text(r.factors.get(p))) for p in grouping)
        groups.setdefault(key, []).append(r)
    designs, skipped = [], []
    for key, members in groups.items():
        try:
            designs.append(_balanced(key, tuple(design), members, include_unsteady))
        except AnalysisError as exc:
            label = ", ".join(f"{p}={v}" for p, v in key) or "all runs"
            skipped.append(f"{label}: {exc}")
    return Plan(tuple(designs), tuple(design), tuple(grouping), len(selected),
                sum(r.steady for r in selected), tuple(skipped))


def _balanced(group: tuple[tuple[str, str], ...], design: tuple[str, ...],
              runs: list[Run], include_unsteady: bool = False) -> Design:
    """The group's design with r steady runs per combination, r the smallest count (r
    runs of any verdict with `include_unsteady`)."""
    combos: dict[tuple[str, ...], dict[int, list[Run]]] = {}
    for r in runs:
        combo = tuple(level_text(r.factors.get(p)) for p in design)
        combos.setdefault(combo, {}).setdefault(r.point, []).append(r)
    needed = 2 ** len(design)
    if len(combos) < needed:
        raise AnalysisError(f"{len(combos)} of the {needed} combinations have runs")
    notes = []
    per_point = {point: sorted(rs, key=lambda r: r.repetition)
                 for by_point in combos.values() for point, rs in by_point.items()}
    if any(len(by_point) > 1 for by_point in combos.values()):
        raise AnalysisError("several points share a combination of the design's factors; "
                            "name the factors that tell them apart")
    unsteady = [r for rs in per_point.values() for r in rs if not r.steady]
    if unsteady:
        notes.append(f"{len(unsteady)} unsteady run(s) "
                     f"{'included (--include-unsteady)' if include_unsteady else 'left out'}: "
                     + ", ".join(f"#{r.point + 1} rep {r.repetition}" for r in unsteady))
    steady = {p: [r for r in rs if r.steady or include_unsteady]
              for p, rs in per_point.items()}
    reps = min(len(rs) for rs in steady.values())
    if reps == 0:
        empty = next(p for p, rs in steady.items() if not rs)
        raise AnalysisError(f"point #{empty + 1} has no steady run")
    extra = {p: len(rs) - reps for p, rs in steady.items() if len(rs) > reps}
    if extra:
        kind = "" if include_unsteady else "steady "
        notes.append(f"r = {reps}: the first {reps} {kind}runs of each point are used; "
                     + ", ".join(f"#{p + 1} has {n} more" for p, n in sorted(extra.items())))
    used = tuple(run for p in sorted(steady) for run in steady[p][:reps])
    return Design(group, design, used, reps, tuple(notes))


def _levels(runs: Sequence[Run], path: str) -> list[str]:
    return list(dict.fromkeys(level_text(r.factors.get(path)) for r in runs
                              if path in r.factors))
