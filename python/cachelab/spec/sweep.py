"""Expanding a sweep into its points, and counting them first (pure).

A point is a mapping from field paths (`load.clients`) to values. The sweep is every
explicit point crossed with every combination of the factor levels; the first factor varies
slowest, the last fastest, as in a nested loop written in the file's order, so the runs of
a sweep over clients come in increasing order of clients.

`check_size` counts the points from the levels alone, before anything is expanded: a sweep
of millions of points would otherwise be built and checked one point at a time before the
user hears of it. Past `sweep.max_points` (default MAX_POINTS) it is refused with the
number of runs and roughly how long they would take.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from cachelab.errors import UserError

#: The most points a sweep may have unless `sweep.max_points` allows more: at the
#: default 60 s a run and 3 repetitions, four days of runs; reading such a file takes
#: about 3 s (each point is built and checked).
MAX_POINTS = 2_000


def expand(points: Sequence[dict[str, object]],
           factors: Sequence[tuple[str, Sequence[object]]]) -> list[dict[str, object]]:
    """Every point of `points` (or one empty point if there are none) crossed with the cross
    product of the factors' levels. With no factors, the explicit points themselves."""
    bases = list(points) or [{}]
    names = [name for name, _ in factors]
    out = []
    for base in bases:
        for combo in itertools.product(*(levels for _, levels in factors)):
            out.append({**base, **dict(zip(names, combo, strict=True))})
    return out


def _levels(table: dict) -> list[int]:
    """The number of levels of every factor in a (possibly nested) factors table; a value
    that is not a list counts as one (expanding it reports the mistake)."""
    out = []
    for value in table.values():
        if isinstance(value, dict):
            out += _levels(value)
        else:
            out.append(len(value) if isinstance(value, list) else 1)
    return out


def count(sweep: dict) -> int:
    """How many points `sweep` (the file's `[sweep]` table) expands to."""
    factors = sweep.get("factors", {})
    explicit = sweep.get("points", [])
    bases = len(explicit) if isinstance(explicit, list) and explicit else 1
    return bases * math.prod(_levels(factors) if isinstance(factors, dict) else [1])


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 2 * size:
            return f"{seconds / size:,.0f} {unit}"
    return f"{seconds:.0f} s"


def check_size(sweep: dict, repetitions: int, run_time_s: float) -> None:
    """Refuses a sweep of more points than `sweep.max_points` allows, in one line."""
    limit = sweep.get("max_points", MAX_POINTS)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise UserError(f"sweep.max_points: must be a whole number >= 1, got {limit!r}")
    points = count(sweep)
    if points <= limit:
        return
    runs = points * repetitions
    raise UserError(
        f"sweep: {points:,} points x {repetitions} repetitions = {runs:,} runs, at least "
        f"{_duration(runs * run_time_s)} at {run_time_s:g} s a run; over sweep.max_points "
        f"({limit:,}): use fewer levels, or set sweep.max_points = {points} to run them")
