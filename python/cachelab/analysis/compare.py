"""Comparing experiments point by point: which points match, and whether a difference is
larger than the repetitions' noise. No I/O.

Points match when their configurations agree on every factor any of the experiments
sweeps (a factor one experiment does not sweep takes its configured value there), so
`workers = 8, 32` x `clients = 1, 4` matches an experiment of `clients = 1, 4` at its
configured workers. Everything else in the configurations may differ: that difference is
what a comparison is for (a code change, `--pipeline`, another server).

A difference is significant when Welch's two-sided t-test (unequal variances, from each
point's mean, standard deviation and number of steady runs) rejects equal means at the
given level; with one run on either side there is no test.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats

from cachelab.analysis.errors import AnalysisError


@dataclass(frozen=True)
class PointKey:
    """One experiment's point: its index and its value (as text) of every key path."""

    index: int
    label: str
    values: Mapping[str, str]


@dataclass(frozen=True)
class Matching:
    """`rows` holds, for every baseline point that some other experiment matches, the
    point index in each experiment (the baseline's first, None where an experiment has no
    match); `unmatched` says, point by point, what could not be matched and why."""

    paths: tuple[str, ...]
    rows: tuple[tuple[int | None, ...], ...]
    unmatched: tuple[str, ...]


def match(paths: Sequence[str], names: Sequence[str],
          experiments: Sequence[Sequence[PointKey]]) -> Matching:
    """Matches every experiment's points with the first's (the baseline) on `paths`.

    Raises AnalysisError when no point of the baseline matches a point of another
    experiment, naming the paths on which they differ."""
    if len(experiments) < 2:
        raise AnalysisError("a comparison needs at least two experiments")
    keyed = [{_key(p, paths): p for p in points} for points in experiments]
    rows = []
    for key, base in keyed[0].items():
        others = [k[key].index if key in k else None for k in keyed[1:]]
        if any(o is not None for o in others):
            rows.append((base.index, *others))
    messages = []
    for e, points in enumerate(experiments):
        for p in points:
            for o in range(len(experiments)):
                if o != e and (e == 0 or o == 0) and _key(p, paths) not in keyed[o]:
                    messages.append(f"{names[e]} #{p.index + 1} ({p.label}): "
                                    f"{_why(p, paths, names[o], experiments[o])}")
    if not rows:
        raise AnalysisError("the experiments share no point: " + _differences(
            paths, names, experiments))
    return Matching(tuple(paths), tuple(rows), tuple(messages))


def _key(p: PointKey, paths: Sequence[str]) -> tuple[str, ...]:
    return tuple(p.values.get(path, "") for path in paths)


def _levels(points: Sequence[PointKey], path: str) -> list[str]:
    return list(dict.fromkeys(p.values.get(path, "") for p in points))


def _why(p: PointKey, paths: Sequence[str], other: str, points: Sequence[PointKey]) -> str:
    missing = [path for path in paths if p.values.get(path, "") not in _levels(points, path)]
    if not missing:
        return f"{other} has each of these levels but not this combination"
    return f"{other} has no point with " + " nor ".join(
        f"{path}={p.values.get(path, '')} (it has {', '.join(_levels(points, path))})"
        for path in missing)


def _differences(paths: Sequence[str], names: Sequence[str],
                 experiments: Sequence[Sequence[PointKey]]) -> str:
    parts = []
    for path in paths:
        levels = [_levels(points, path) for points in experiments]
        if any(set(lv) != set(levels[0]) for lv in levels[1:]):
            parts.append(f"{path} is " + "; ".join(
                f"{', '.join(lv)} in {name}" for name, lv in zip(names, levels, strict=True)))
    return "; ".join(parts) or "no combination of levels is in both"


@dataclass(frozen=True)
class Difference:
    """`ratio` = other / baseline; `p_value` of Welch's test, None without one."""

    ratio: float | None
    p_value: float | None
    significant: bool | None


def difference(base: tuple[float, float, int], other: tuple[float, float, int],
               level: float = 0.05) -> Difference:
    """Compares (mean, standard deviation, runs) of a baseline point and another.

    When both standard deviations are 0 the t statistic is undefined: the difference then
    counts as significant exactly when the means differ."""
    (m1, s1, n1), (m2, s2, n2) = base, other
    if not 0 < level < 1:
        raise AnalysisError(f"significance level must be between 0 and 1, got {level}")
    ratio = m2 / m1 if m1 > 0 else None
    if n1 < 2 or n2 < 2:
        return Difference(ratio, None, None)
    if s1 == 0 and s2 == 0:
        same = math.isclose(m1, m2)
        return Difference(ratio, 1.0 if same else 0.0, not same)
    result = stats.ttest_ind_from_stats(m1, s1, n1, m2, s2, n2, equal_var=False)
    p = float(result.pvalue)
    return Difference(ratio, p, p < level)
