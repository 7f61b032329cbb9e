"""`[study]`: the original study's values that an experiment re-creates, cited by file,
section and table, so the report can print them beside the measured ones. Pure parsing;
every mistake is a UserError naming the field (`study.effects[2].variation_pct.SX: ...`).

    [study]
    source = "study/001_8336769a2c321254.txt (ASL report)"

    [[study.effects]]                   # a factorial design's allocation of variation
    cite = "section 6, Table 4 (read-only)"
    where = { "workload.ratio" = "0:1" }    # which of the experiment's designs
    response = "throughput"                  # or response_ms
    factors = { S = "servers.count", M = "middleware.count", W = "middleware.workers" }
    variation_pct = { S = 95.5, M = 0.7, W = 0.8, SM = 0.7, error = 0.0 }
    effects = { I = 5638, S = 2692, M = 238 }   # optional: the estimates q (their signs)

    [[study.points]]                    # a measured point: throughput, response time
    cite = "section 6, Table 3, i = 2"
    where = { "workload.ratio" = "0:1", "servers.count" = 3, "middleware.count" = 1 }
    throughput = 6902
    response_ms = 26.8
    at = "each"                          # or "max": the highest throughput among the
                                         # matching points (a summary table's maximum)

Effects are named by concatenating the study's one-letter factor names (SM is the
interaction of S and M), in any order; `error` is the unexplained variation.
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cachelab.errors import UserError
from cachelab.spec import findings as findings_mod

#: Responses a stored experiment's designs are analysed for in the report.
RESPONSES = ("throughput", "response_ms")
AT = ("each", "max")


@dataclass(frozen=True)
class StudyEffects:
    cite: str
    where: tuple[tuple[str, object], ...]
    response: str
    #: The study's factor names (one letter each) and the experiment's path for each.
    factors: tuple[tuple[str, str], ...]
    variation_pct: tuple[tuple[str, float], ...]
    effects: tuple[tuple[str, float], ...] = ()

    def paths_of(self, effect: str) -> frozenset[str]:
        """The factor paths of a study effect name ("SM" -> {servers.count, ...})."""
        letters = dict(self.factors)
        return frozenset(letters[c] for c in effect)


@dataclass(frozen=True)
class StudyPoint:
    cite: str
    where: tuple[tuple[str, object], ...]
    throughput: float | None
    response_ms: float | None
    at: str = "each"


@dataclass(frozen=True)
class Study:
    source: str
    effects: tuple[StudyEffects, ...]
    points: tuple[StudyPoint, ...]
    #: The study's phenomena with their rules (spec/findings.py).
    findings: tuple[findings_mod.Finding, ...] = ()


def parse(table: object, factor_paths: Sequence[str], field_paths: Collection[str]) -> Study:
    """The `[study]` table; `factor_paths` are the experiment's swept factors, and
    `field_paths` every configuration field (a point's `where` may fix any of them)."""
    t = _mapping(table, "study")
    _only("study", t, ("source", "effects", "points", "findings"))
    source = _text(t, "source", "study")
    effects = tuple(_effects(x, f"study.effects[{i}]", factor_paths)
                    for i, x in enumerate(_list(t, "effects", "study"), start=1))
    points = tuple(_point(x, f"study.points[{i}]", field_paths)
                   for i, x in enumerate(_list(t, "points", "study"), start=1))
    findings = tuple(findings_mod.parse(x, f"study.findings[{i}]", factor_paths,
                                        field_paths)
                     for i, x in enumerate(_list(t, "findings", "study"), start=1))
    if not effects and not points and not findings:
        raise UserError("study: no effects, points or findings; give [[study.effects]], "
                        "[[study.points]] or [[study.findings]]")
    return Study(source, effects, points, findings)


def effect_names(letters: Sequence[str]) -> list[str]:
    """Every effect of the factors `letters`, in the order main effects, pairs, ..."""
    return ["".join(c) for k in range(1, len(letters) + 1)
            for c in itertools.combinations(letters, k)]


def _effects(raw: object, where: str, factor_paths: Sequence[str]) -> StudyEffects:
    t = _mapping(raw, where)
    _only(where, t, ("cite", "where", "response", "factors", "variation_pct", "effects"))
    response = _text(t, "response", where)
    if response not in RESPONSES:
        raise UserError(f"{where}.response: must be one of {', '.join(RESPONSES)}, got "
                        f"{response!r}")
    factors = []
    for name, path in _mapping(t.get("factors"), f"{where}.factors").items():
        if len(name) != 1 or not name.isupper():
            raise UserError(f"{where}.factors.{name}: a factor is named by one capital "
                            "letter, so that effects read as SM, SMW")
        if name == "I":
            raise UserError(f"{where}.factors.I: I is the mean; name the factor otherwise")
        if path not in factor_paths:
            raise UserError(f"{where}.factors.{name}: {path!r} is not a factor of this "
                            f"experiment (factors: {', '.join(factor_paths) or 'none'})")
        factors.append((name, str(path)))
    if not factors:
        raise UserError(f"{where}.factors: missing (the study's letter for each factor)")
    letters = [n for n, _ in factors]
    valid = {frozenset(e): e for e in effect_names(letters)}

    def named(table_name: str, extra: tuple[str, ...], low: float | None) -> tuple:
        out = []
        for name, value in _mapping(t.get(table_name, {}), f"{where}.{table_name}").items():
            field = f"{where}.{table_name}.{name}"
            if name not in extra and (len(set(name)) != len(name)
                                      or frozenset(name) not in valid):
                raise UserError(f"{field}: not an effect of {', '.join(letters)} (effects: "
                                f"{', '.join([*extra, *valid.values()])})")
            number = _number(value, field)
            if low is not None and not low <= number <= 100:
                raise UserError(f"{field}: a percentage between 0 and 100, got {number!r}")
            out.append((name, number))
        return tuple(out)

    pct = named("variation_pct", ("error",), 0.0)
    if not pct:
        raise UserError(f"{where}.variation_pct: missing (the study's % of variation per "
                        "effect)")
    return StudyEffects(_text(t, "cite", where), _where(t, where, factor_paths, "factor"), response,
                        tuple(factors), pct, named("effects", ("I",), None))


def _point(raw: object, where: str, field_paths: Collection[str]) -> StudyPoint:
    t = _mapping(raw, where)
    _only(where, t, ("cite", "where", "throughput", "response_ms", "at"))
    values = {k: _number(t[k], f"{where}.{k}") if k in t else None
              for k in ("throughput", "response_ms")}
    if values["throughput"] is None and values["response_ms"] is None:
        raise UserError(f"{where}: give throughput or response_ms (or both)")
    for k, v in values.items():
        if v is not None and v <= 0:
            raise UserError(f"{where}.{k}: must be > 0, got {v!r}")
    at = t.get("at", "each")
    if at not in AT:
        raise UserError(f"{where}.at: must be one of {', '.join(AT)}, got {at!r}")
    return StudyPoint(_text(t, "cite", where), _where(t, where, field_paths, "field"),
                      values["throughput"], values["response_ms"], at)


def _where(t: dict, where: str, allowed: Collection[str],
           kind: str) -> tuple[tuple[str, object], ...]:
    out = []
    for path, value in _mapping(t.get("where", {}), f"{where}.where").items():
        if path not in allowed:
            raise UserError(f"{where}.where.{path}: not a {kind} of this experiment")
        if isinstance(value, dict | list):
            raise UserError(f"{where}.where.{path}: one level, got a {type(value).__name__}")
        out.append((path, value))
    return tuple(out)


def _mapping(value: object, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: expected a table, got {type(value).__name__}")
    return value


def _list(t: dict, key: str, where: str) -> list:
    value = t.get(key, [])
    if not isinstance(value, list):
        raise UserError(f"{where}.{key}: expected an array of tables ([[{where}.{key}]])")
    return value


def _text(t: dict, key: str, where: str) -> str:
    value = t.get(key)
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}.{key}: missing (text)")
    return value.strip()


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: expected a number, got {value!r}")
    return float(value)


def _only(where: str, t: dict, known: tuple[str, ...]) -> None:
    for key in t:
        if key not in known:
            raise UserError(f"{where}.{key}: unknown field (expected one of "
                            f"{', '.join(known)})")
