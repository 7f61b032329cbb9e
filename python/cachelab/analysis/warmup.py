"""When a cache is warm enough to measure: a pure rule on per-second counts.

The rule (DCPerf's TaoBench `warmup_monitor.py` as the model): warm once, over the last
window of seconds, (1) the hit ratio is at least `hit_ratio_share` of its steady value and
(2) the request rate is steady, its coefficient of variation under `steady_cv`. TaoBench
knows its target hit ratio; here it may be given (`hit_ratio_target`), else the steady
value is estimated as the last window's hit ratio, and (1) asks that the window before it
had reached that share of it: the hit ratio rose by less than 1 - share over a window.
A window without GETs (a write-only load) has no hit ratio: only the rate is judged.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.analysis import trust
from cachelab.spec.warmup import Warmup

#: The self-check's name in the run's checks (and the results database's run_check rows).
CHECK = "warm-up"


@dataclass(frozen=True)
class Second:
    """One second of the warm-up, every instance and operation together."""

    ops: int
    hits: int
    misses: int


@dataclass(frozen=True)
class Verdict:
    warm: bool
    #: Seconds of load judged.
    seconds: int
    #: The last window's hit ratio, and the value it was held to (None: no GETs).
    hit_ratio: float | None
    steady_hit_ratio: float | None
    #: The last window's coefficient of variation of the rate (None: too few seconds).
    rate_cv: float | None
    reason: str

    def check(self) -> trust.Check:
        """As a run self-check: statistic = the last hit ratio (or -1 without GETs),
        p_value = the rate's CV (or -1)."""
        return trust.Check(CHECK, self.warm,
                           -1.0 if self.hit_ratio is None else self.hit_ratio,
                           -1.0 if self.rate_cv is None else self.rate_cv, self.reason)


def _ratio(window: Sequence[Second]) -> float | None:
    gets = sum(s.hits + s.misses for s in window)
    return None if gets == 0 else sum(s.hits for s in window) / gets


def judge(seconds: Sequence[Second], rule: Warmup) -> Verdict:
    """Whether the cache is warm after `seconds` of load, by the last window of them."""
    n = max(2, int(rule.window_s))
    need = n if rule.hit_ratio_target is not None else 2 * n
    if len(seconds) < need:
        return Verdict(False, len(seconds), None, None, None,
                       f"{len(seconds)} s of load, fewer than the {need} s the rule needs")
    last = seconds[-n:]
    rates = [s.ops for s in last]
    mean = statistics.fmean(rates)
    cv = statistics.pstdev(rates) / mean if mean > 0 else float("inf")
    hit = _ratio(last)
    if hit is None:
        steady = None
        hit_ok = True
    elif rule.hit_ratio_target is not None:
        steady = rule.hit_ratio_target
        hit_ok = hit >= rule.hit_ratio_share * steady
    else:
        before = _ratio(seconds[-2 * n:-n])
        steady = hit
        hit_ok = before is not None and before >= rule.hit_ratio_share * hit
    rate_ok = cv < rule.steady_cv
    parts = []
    if hit is not None and not hit_ok:
        if rule.hit_ratio_target is not None:
            parts.append(f"hit ratio {hit:.3f}, under {rule.hit_ratio_share:g} of the "
                         f"target {steady:.3f}")
        else:
            parts.append(f"hit ratio still rising ({_ratio(seconds[-2 * n:-n]) or 0:.3f} "
                         f"then {hit:.3f} over the last two {n} s windows)")
    if not rate_ok:
        parts.append(f"rate CV {cv:.3f} over the last {n} s, above {rule.steady_cv:g}")
    warm = hit_ok and rate_ok
    hit_text = "no GETs" if hit is None else f"hit ratio {hit:.3f}"
    reason = (f"warm after {len(seconds)} s: {hit_text}, rate CV {cv:.3f}" if warm
              else f"not warm after {len(seconds)} s: " + "; ".join(parts))
    return Verdict(warm, len(seconds), hit, steady, None if mean <= 0 else cv, reason)
