"""2^k r factorial designs (Jain, The Art of Computer Systems Performance Analysis, ch. 18).

k factors with two levels each, every one of the 2^k combinations run r times. The model is
y = q_I + q_A x_A + q_B x_B + q_AB x_A x_B + ... + e with every x coded -1/+1; the effects q
come from the sign table, and the repetitions give the error that the confidence intervals
need. Effects are named by concatenating factor names in the given order (I, A, B, AB, C, AC,
BC, ABC, ...) and listed in Jain's order: I first, then by how many factors they combine.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from cachelab.analysis.errors import AnalysisError


@dataclass(frozen=True)
class Effect:
    """One effect. `ss` and `variation_pct` are None for I (the mean explains no variation);
    `ci` and `significant` are None when r = 1 (no repetitions, so no error estimate)."""

    name: str
    estimate: float
    ss: float | None
    variation_pct: float | None
    ci: tuple[float, float] | None
    significant: bool | None


@dataclass(frozen=True)
class FactorialResult:
    """The analysis of one response. `levels[f]` is (label coded -1, label coded +1)."""

    factors: tuple[str, ...]
    levels: dict[str, tuple[str, str]]
    replications: int
    effects: tuple[Effect, ...]
    sst: float
    sse: float
    error_pct: float | None
    confidence: float
    t_quantile: float | None
    dof: int

    def effect(self, name: str) -> Effect:
        return next(e for e in self.effects if e.name == name)


def effect_columns(k: int) -> list[tuple[int, ...]]:
    """The factor subsets of every effect in Jain's order: (), (0,), (1,), ..., (0, 1), ..."""
    return [c for size in range(k + 1) for c in itertools.combinations(range(k), size)]


def sign_table(k: int) -> np.ndarray:
    """The 2^k x 2^k sign table: row i is combination i in standard order (the first factor
    alternating fastest), column j the product of the levels in effect j's subset."""
    rows = np.array([[1 if (i >> f) & 1 else -1 for f in range(k)] for i in range(2**k)])
    return np.array([[int(np.prod(row[list(c)])) for c in effect_columns(k)] for row in rows])


def code_levels(name: str, column: Sequence[object]) -> tuple[np.ndarray, tuple[str, str]]:
    """Codes a factor's column as -1/+1 and returns the codes and (low label, high label).

    If both levels read as numbers, the smaller is -1 (so -1/+1, 0/1 and 4/16 mean what they
    say); otherwise the label met first is -1, which is right for a design written in
    standard order, whose first run has every factor low.
    """
    labels = list(dict.fromkeys(str(v).strip() for v in column))
    if len(labels) != 2:
        shown = ", ".join(labels[:5]) + (", ..." if len(labels) > 5 else "")
        raise AnalysisError(
            f"factor {name!r} has {len(labels)} level(s) ({shown}); a 2^k design needs exactly two"
        )
    low, high = (_as_number(label) for label in labels)
    if low is not None and high is not None:
        if low == high:
            raise AnalysisError(f"factor {name!r}: levels {labels[0]} and {labels[1]} are equal")
        if low > high:
            labels.reverse()
    codes = np.array([-1 if str(v).strip() == labels[0] else 1 for v in column])
    return codes, (labels[0], labels[1])


def analyse(
    factors: Mapping[str, Sequence[object]],
    response: Sequence[float],
    *,
    confidence: float = 0.9,
) -> FactorialResult:
    """Analyses a 2^k r design given one column of levels per factor and the response per run.

    Checks that every factor has two levels and every combination appears the same number
    of times r. SST is the sum of (y - mean)^2 over all runs, SS of an effect is 2^k r q^2,
    SSE is the sum of squared deviations of runs from their combination's mean; the
    confidence intervals are q -/+ t s_e / sqrt(2^k r) with t at 2^k (r - 1) degrees of
    freedom, and an effect is significant when its interval excludes 0.
    """
    names = tuple(factors)
    y = np.asarray(response, dtype=float)
    _check_inputs(names, factors, y, confidence)
    k = len(names)
    coded = {}
    levels = {}
    for name in names:
        coded[name], levels[name] = code_levels(name, factors[name])
    cell = np.sum([((coded[n] + 1) // 2) << i for i, n in enumerate(names)], axis=0)
    r = _replications(cell, names, levels)
    means = np.array([y[cell == i].mean() for i in range(2**k)])
    q = sign_table(k).T @ means / 2**k
    sst = float(np.sum((y - y.mean()) ** 2))
    sse = float(np.sum((y - means[cell]) ** 2))
    dof = 2**k * (r - 1)
    t = float(stats.t.ppf(0.5 + confidence / 2, dof)) if r > 1 else None
    half = t * math.sqrt(sse / dof) / math.sqrt(2**k * r) if t is not None else None
    effects = []
    for subset, estimate in zip(effect_columns(k), q.tolist(), strict=True):
        ss = 2**k * r * estimate**2 if subset else None
        ci = (estimate - half, estimate + half) if half is not None else None
        effects.append(Effect(
            name="".join(names[i] for i in subset) or "I",
            estimate=estimate,
            ss=ss,
            variation_pct=_pct(ss, sst) if ss is not None else None,
            ci=ci,
            significant=(ci[0] > 0 or ci[1] < 0) if ci is not None else None,
        ))
    return FactorialResult(names, levels, r, tuple(effects), sst, sse,
                           _pct(sse, sst) if r > 1 else None, confidence, t, dof)


def _pct(ss: float, sst: float) -> float:
    """Share of the variation in percent; 0 when the response does not vary at all."""
    return 100.0 * ss / sst if sst > 0 else 0.0


def _check_inputs(names: tuple[str, ...], factors: Mapping[str, Sequence[object]],
                  y: np.ndarray, confidence: float) -> None:
    if not names:
        raise AnalysisError("a factorial design needs at least one factor")
    for name in names:
        if len(factors[name]) != len(y):
            raise AnalysisError(
                f"factor {name!r} has {len(factors[name])} values but there are {len(y)} runs")
    effect_names = ["".join(names[i] for i in c) or "I" for c in effect_columns(len(names))]
    clash = next((n for n in effect_names if effect_names.count(n) > 1), None)
    if clash is not None:
        raise AnalysisError(
            f"factor names {', '.join(names)} give two effects the name {clash!r}; rename them")
    if not np.all(np.isfinite(y)):
        raise AnalysisError("every response must be a finite number")
    if not 0 < confidence < 1:
        raise AnalysisError(f"confidence must be between 0 and 1, got {confidence}")


def _replications(cell: np.ndarray, names: tuple[str, ...],
                  levels: dict[str, tuple[str, str]]) -> int:
    """The common number of runs per combination, or an error naming the odd combination."""
    counts = np.bincount(cell, minlength=2 ** len(names))

    def label(i: int) -> str:
        return ", ".join(f"{n}={levels[n][(i >> f) & 1]}" for f, n in enumerate(names))

    if counts.min() == 0:
        missing = int(np.argmin(counts))
        raise AnalysisError(f"unbalanced design: combination {label(missing)} has no runs")
    if counts.min() != counts.max():
        most, fewest = int(np.argmax(counts)), int(np.argmin(counts))
        raise AnalysisError(
            f"unbalanced design: every combination needs the same number of repetitions, "
            f"but {label(most)} has {counts[most]} and {label(fewest)} has {counts[fewest]}")
    return int(counts[0])


def _as_number(label: str) -> float | None:
    try:
        value = float(label)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def predict(result: FactorialResult, factors: Mapping[str, Sequence[object]]) -> np.ndarray:
    """The model's response for each run: y^ = q_I + q_A x_A + ... + q_AB..K x_A...x_K.

    With every effect in the model this is the mean of the run's combination. `factors`
    holds one column of levels per factor, labelled as in the analysed design.
    """
    names = result.factors
    rows = len(factors[names[0]])
    coded = {}
    for name in names:
        low, high = result.levels[name]
        labels = [str(v).strip() for v in factors[name]]
        unknown = next((v for v in labels if v not in (low, high)), None)
        if unknown is not None:
            raise AnalysisError(f"factor {name!r}: level {unknown} is neither {low} nor {high}")
        coded[name] = np.array([-1 if v == low else 1 for v in labels])
    y = np.zeros(rows)
    for subset, effect in zip(effect_columns(len(names)), result.effects, strict=True):
        x = np.ones(rows)
        for i in subset:
            x = x * coded[names[i]]
        y += effect.estimate * x
    return y


def residuals(result: FactorialResult, factors: Mapping[str, Sequence[object]],
              response: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """(predicted y^, residual e = y - y^) for every run, for Jain's visual tests (18.5):
    residuals against predicted response should show no trend and a spread that does not
    grow with the response, and their normal quantile plot should be close to a line."""
    predicted = predict(result, factors)
    return predicted, np.asarray(response, dtype=float) - predicted


def normal_quantiles(n: int) -> np.ndarray:
    """The standard normal quantiles at (i - 0.5) / n, i = 1..n, against which the sorted
    residuals are plotted (Jain, section 12.10)."""
    if n < 1:
        raise AnalysisError(f"a quantile plot needs at least one value, got {n}")
    return stats.norm.ppf((np.arange(1, n + 1) - 0.5) / n)
