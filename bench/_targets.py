"""Judging measured figures against a target: per-repetition values, median, spread, verdict.

Pure functions, no I/O, so the logic is unit-tested (python/tests/test_bench_targets.py).
A target is judged on the median over repetitions; the spread (min-max of the
per-repetition values) is printed beside it so a verdict resting on one lucky or
unlucky run can be seen. With fewer than MIN_REPETITIONS repetitions the line is still
printed but marked as not a verdict.

Per-repetition values pair repetition i of one configuration with repetition i of the
other: the runs are interleaved (A B C, A B C, ...), so run i of A and run i of B saw the
same machine at nearly the same time.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

MIN_REPETITIONS = 3

# How a measured value is compared with the threshold.
AT_MOST = "<="
AT_LEAST = ">="
WITHIN = "|d| <="  # the absolute value at most the threshold


def paired(f: Callable[[float, float], float], a: Sequence[float | None],
           b: Sequence[float | None]) -> list[float | None]:
    """f(a[i], b[i]) per repetition i; None where either side is missing or f divides by 0."""
    if len(a) != len(b):
        raise ValueError(f"repetition counts differ: {len(a)} and {len(b)}")
    out: list[float | None] = []
    for x, y in zip(a, b, strict=True):
        try:
            out.append(None if x is None or y is None else f(x, y))
        except ZeroDivisionError:
            out.append(None)
    return out


def ratios(num: Sequence[float | None], den: Sequence[float | None]) -> list[float | None]:
    """num[i] / den[i] per repetition."""
    return paired(lambda x, y: x / y, num, den)


def differences(a: Sequence[float | None], b: Sequence[float | None],
                scale: float = 1.0) -> list[float | None]:
    """(a[i] - b[i]) * scale per repetition (scale 1000 turns ms into us)."""
    return paired(lambda x, y: (x - y) * scale, a, b)


def meets(value: float, op: str, threshold: float) -> bool:
    if op == AT_MOST:
        return value <= threshold
    if op == AT_LEAST:
        return value >= threshold
    if op == WITHIN:
        return abs(value) <= threshold
    raise ValueError(f"unknown comparison {op!r}")


@dataclass(frozen=True)
class TargetResult:
    """One target on one case. `ratio` is the median of `values` (a ratio, or a
    difference in `unit`); `verdict` is PASS, MISS, or n/a when nothing was measured."""

    name: str
    case: str
    values: tuple[float, ...]
    ratio: float | None
    spread: tuple[float, float] | None
    op: str
    threshold: float
    unit: str
    verdict: str
    repetitions: int
    max_steal: float | None
    note: str = ""

    @property
    def conclusive(self) -> bool:
        return self.repetitions >= MIN_REPETITIONS and self.verdict != "n/a"

    def as_json(self) -> dict:
        return {"name": self.name, "case": self.case, "ratio": self.ratio,
                "spread": list(self.spread) if self.spread else None,
                "values": list(self.values), "threshold": f"{self.op} {self.threshold}",
                "unit": self.unit, "verdict": self.verdict, "conclusive": self.conclusive,
                "repetitions": self.repetitions, "max_steal": self.max_steal,
                "note": self.note}


def judge(name: str, case: str, values: Iterable[float | None], op: str, threshold: float,
          unit: str = "x", steal: Iterable[float | None] = (), note: str = "") -> TargetResult:
    """The median of the per-repetition values against the threshold."""
    values = list(values)
    measured = tuple(v for v in values if v is not None)
    steals = [s for s in steal if s is not None]
    median = statistics.median(measured) if measured else None
    verdict = "n/a" if median is None else "PASS" if meets(median, op, threshold) else "MISS"
    return TargetResult(
        name=name, case=case, values=measured, ratio=median,
        spread=(min(measured), max(measured)) if measured else None,
        op=op, threshold=threshold, unit=unit, verdict=verdict,
        repetitions=len(values), max_steal=max(steals) if steals else None, note=note)


def fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.1f} {unit}"


def format_target(t: TargetResult) -> str:
    """One line: name, case, median, spread, threshold, verdict, steal."""
    if t.ratio is None:
        measured = "not measured"
    else:
        lo, hi = t.spread
        digits = 2 if t.unit == "x" else 1
        measured = f"{fmt(t.ratio, t.unit)} (spread {lo:.{digits}f}..{hi:.{digits}f})"
    limit = f"{t.threshold:.2f}x" if t.unit == "x" else f"{t.threshold:g} {t.unit}"
    steal = f"steal max {t.max_steal:.1%}" if t.max_steal is not None else "steal -"
    line = f"  {t.name:<4} {t.case:<33} {measured:<33} {t.op} {limit:<9}{t.verdict:<5} {steal}"
    if t.note:
        line += f"; {t.note}"
    if t.repetitions < MIN_REPETITIONS:
        s = "" if t.repetitions == 1 else "s"
        line += f" ({t.repetitions} repetition{s}: not a verdict)"
    return line


def format_targets(results: Sequence[TargetResult], titles: dict[str, str]) -> list[str]:
    """Every result's line, under its target's title (printed when the name changes)."""
    lines, name = [], None
    for t in results:
        if t.name != name:
            name = t.name
            lines.append(titles.get(name, name))
        lines.append(format_target(t))
    return lines


def summary_line(results: Sequence[TargetResult]) -> str:
    counts = {v: sum(1 for t in results if t.verdict == v) for v in ("PASS", "MISS", "n/a")}
    line = f"targets: {counts['PASS']} PASS, {counts['MISS']} MISS"
    if counts["n/a"]:
        line += f", {counts['n/a']} not measured"
    reps = min((t.repetitions for t in results), default=0)
    if reps < MIN_REPETITIONS:
        line += f" ({reps} repetition{'' if reps == 1 else 's'}: not a verdict)"
    else:
        line += f" (median of {reps} interleaved repetitions)"
    return line
