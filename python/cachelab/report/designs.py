"""The 2^k r designs of a stored experiment, analysed: what `cachelab factorial DIR` prints
and the report's factorial section show, computed by this one function so they agree.

Runs are steady when their within-run CV is at most the experiment's threshold (or could
not be judged), the rule the means of the report use (`validate.is_steady`).

A scale model's runs (`topology.scale = k`) enter at full speed, as the report's points do
(report/data.py `rescaled`): throughput x k, every time / k. So the effects are those of
the full-speed system, comparable with a study's; the % of variation is the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from cachelab.analysis import design, factorial
from cachelab.analysis.errors import AnalysisError
from cachelab.run import validate
from cachelab.store import Store

#: The responses the report analyses.
REPORT_RESPONSES = ("throughput", "response_ms")


@dataclass(frozen=True)
class Analysed:
    """One design and, per response, its factorial analysis and residuals."""

    design: design.Design
    results: dict[str, factorial.FactorialResult]
    #: Per response: (predicted y^, residual y - y^) for each run of the design.
    residuals: dict[str, tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Designs:
    plan: design.Plan
    analysed: tuple[Analysed, ...]


def stored_runs(s: Store) -> tuple[list[str], list[design.Run]]:
    """The experiment's factor paths and every stored run with its steadiness."""
    exp = s.require_experiment()
    threshold = exp.settings["cv_threshold"]
    points = s.points(exp.id)
    factors = {p.index: p.factors for p in points}
    scales = {p.index: scale_of(p.config) for p in points}
    runs = []
    for point, rows in s.runs_by_point(exp.id).items():
        for r in rows:
            steady = validate.is_steady(validate.RunOutcome(r.throughput, r.cv_within),
                                        threshold)
            runs.append(design.Run(point, r.repetition, factors[point], steady,
                                   full_speed({k: getattr(r, k) for k in design.RESPONSES},
                                              scales[point])))
    return list(exp.settings["factors"]), runs


def scale_of(config: Mapping[str, object]) -> float:
    """A stored point's scale model k (1 without one)."""
    topology = config.get("topology")
    k = topology.get("scale") if isinstance(topology, Mapping) else None
    return float(k) if isinstance(k, (int, float)) and k > 0 else 1.0


def full_speed(responses: Mapping[str, float], k: float) -> dict[str, float]:
    """A run's responses at full speed: throughput x k, every time (`*_ms`) / k."""
    return {name: v * k if name == "throughput" else v / k for name, v in responses.items()}


def scales(s: Store) -> tuple[float, ...]:
    """The scale models (k != 1) of the experiment's points, sorted."""
    exp = s.require_experiment()
    return tuple(sorted({k for p in s.points(exp.id) if (k := scale_of(p.config)) != 1}))


def analyse(s: Store, responses: Sequence[str] = REPORT_RESPONSES, *,
            factors: Sequence[str] | None = None, where: Mapping[str, str] | None = None,
            confidence: float = 0.9, include_unsteady: bool = False) -> Designs:
    """Every design of the stored experiment, each response analysed (steady runs only,
    unless `include_unsteady`). Raises
    AnalysisError when the sweep is not a 2^k design or a response is unknown."""
    for name in responses:
        if name not in design.RESPONSES:
            raise AnalysisError(f"--response {name!r}: a stored experiment's responses are "
                                f"{', '.join(design.RESPONSES)}")
    paths, runs = stored_runs(s)
    found = design.plan(paths, runs, factors=factors, where=where,
                        include_unsteady=include_unsteady)
    analysed = []
    for d in found.designs:
        columns = d.columns()
        results, residuals = {}, {}
        for name in responses:
            y = d.response(name)
            results[name] = factorial.analyse(columns, y, confidence=confidence)
            residuals[name] = factorial.residuals(results[name], columns, y)
        analysed.append(Analysed(d, results, residuals))
    return Designs(found, tuple(analysed))
