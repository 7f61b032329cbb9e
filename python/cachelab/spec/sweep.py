"""Expanding a sweep into its points: pure, no validation (experiment.py checks every point).

A point is a mapping from field paths (`load.clients`) to values. The sweep is every
explicit point crossed with every combination of the factor levels; the first factor varies
slowest, the last fastest, as in a nested loop written in the file's order, so the runs of
a sweep over clients come in increasing order of clients.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence


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

