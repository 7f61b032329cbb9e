"""Was it the machine or the emulated system? A run's machine check (issue 25). Pure.

On `netns` the emulated hosts share this machine's cores with the delay line, which runs
outside every host's cgroup, and with whatever else runs here. A run whose machine was
busy to the limit while no host had reached its own CPU quota measured the machine, not
the emulated data centre: its throughput would be higher on hosts that had their quota
for real. `check` says so with the figures: the machine's busy share (from /proc/stat,
every core), the delay line's CPU (from /proc/<pid>/stat), the hosts' (their cgroups),
and the busiest host against its quota.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cachelab.analysis.trust import Check

#: The machine counts as saturated at this share of all its cores busy.
MACHINE_BUSY_LIMIT = 0.90
#: A host counts as at its quota at this share of it (CFS enforces it per period, and
#: the samples are one-second means, so a bound host reads a little under).
QUOTA_REACHED = 0.90
NAME = "machine"


@dataclass(frozen=True)
class MachineUse:
    """A run's steady-state CPU figures."""

    cores: int
    #: Every core together, % of all cores (100: the whole machine busy).
    busy_pct: float
    #: The delay line, % of one core.
    emulator_pct: float
    #: Each host's processes (usr + sys), % of one core.
    hosts_pct: Mapping[str, float]
    #: Each host's CPU quota in cores (0: unlimited).
    quotas: Mapping[str, float]


def at_quota(pct: float, quota: float, reached: float = QUOTA_REACHED) -> bool:
    """Whether a host using `pct` % of a core has reached a quota of `quota` cores."""
    return quota > 0 and pct >= reached * 100.0 * quota


def check(use: MachineUse, limit: float = MACHINE_BUSY_LIMIT,
          reached: float = QUOTA_REACHED) -> Check:
    """Fails when the machine was saturated while no host was at its quota. Statistic:
    the machine's busy share (0..1)."""
    busy = use.busy_pct / 100.0
    bound = sorted(h for h, pct in use.hosts_pct.items()
                   if at_quota(pct, use.quotas.get(h, 0.0), reached))
    hosts = sum(use.hosts_pct.values())
    figures = (f"machine {use.busy_pct:.0f}% busy over {use.cores} cores, delay line "
               f"{use.emulator_pct:.0f}% of a core, hosts {hosts:.0f}% of a core together")
    if use.hosts_pct:
        name = max(use.hosts_pct, key=lambda h: use.hosts_pct[h])
        quota = use.quotas.get(name, 0.0)
        figures += (f", busiest {name} {use.hosts_pct[name]:.0f}% "
                    + (f"of its {100 * quota:.0f}% quota" if quota else "(no quota)"))
    saturated = busy >= limit
    if not saturated:
        return Check(NAME, True, busy, float("nan"), figures)
    if bound:
        return Check(NAME, True, busy, float("nan"),
                     f"{figures}; at their quota: {', '.join(bound)} (the emulated "
                     "system's own limit)")
    return Check(NAME, False, busy, float("nan"),
                 f"{figures}: the machine was saturated, no host at its quota; the "
                 "throughput is this machine's, not the emulated system's")


def steady_mean(samples: list[tuple[float, float]], low: float, high: float) -> float | None:
    """The mean of the (t, value) samples whose t lies in [low, high]; all of them when
    none does (a run shorter than a sample); None without samples."""
    if not samples:
        return None
    inside = [v for t, v in samples if low <= t <= high] or [v for _, v in samples]
    return sum(inside) / len(inside)
