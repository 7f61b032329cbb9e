"""`[load.warmup]`: how long a run may load the cache before its measured window, and
when the cache counts as warm (the rule is analysis/warmup.py; the phases run/warmup.py).

DCPerf's TaoBench is the model: it measures only once the hit ratio is at 0.95 of its
target and the rate steady (a coefficient of variation under 0.05 over the last points).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The bound when `max_s` is left out and the servers start empty (workload.populate =
#: false): long enough for a lookaside client to fill a small key range on this machine.
EMPTY_SERVER_MAX_S = 60.0


def _share(v: Any) -> str | None:
    return None if v is None or 0 < v <= 1 else f"must be in (0, 1], got {v!r}"


def _non_negative(v: Any) -> str | None:
    return None if v is None or v >= 0 else f"must be >= 0, got {v!r}"


def _seconds(v: Any) -> str | None:
    return None if v is None or v >= 2 else f"must be >= 2 (seconds), got {v!r}"


@dataclass(frozen=True)
class Warmup:
    #: Warm when the hit ratio of the last window reaches this share of its steady value.
    hit_ratio_share: float = field(default=0.95, metadata={"check": _share})
    #: The steady hit ratio, if known (DCPerf's target_hit_ratio); None: estimated as the
    #: last window's, which the window before must reach `hit_ratio_share` of (the hit
    #: ratio stopped rising).
    hit_ratio_target: float | None = field(default=None, metadata={"check": _share})
    #: Largest coefficient of variation of the per-second rate over the last window.
    steady_cv: float = field(default=0.05, metadata={"check": _non_negative})
    #: Seconds in a window; each warm-up phase lasts one window.
    window_s: float = field(default=5.0, metadata={"check": _seconds})
    #: The bound on the warm-up; 0: none (measure at once); None: EMPTY_SERVER_MAX_S when
    #: the servers start empty, else 0 (populated servers are warm).
    max_s: float | None = field(default=None, metadata={"check": _non_negative})

    def bound_s(self, populated: bool, trace: bool) -> float:
        """Seconds the warm-up may take: `max_s`, or its default for the run."""
        if self.max_s is not None:
            return self.max_s
        return 0.0 if populated or trace else EMPTY_SERVER_MAX_S
