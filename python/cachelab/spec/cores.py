"""Emulated cores: the rules of `thread_quota`, the CPU of one serving thread of a server
(docs/topologies.md, "Emulated cores"). Pure checks on a parsed topology; every mistake
names its field.

A host's `cpu_quota` bounds all its threads together; `thread_quota` gives each serving
thread (memcached's workers, Redis's main thread) a cgroup of its own inside the host's,
so that with cpu_quota = 6 and thread_quota = 1 one Redis uses at most one of 6 emulated
cores, and 12 memcached threads share 6. A thread cannot have more than its host, and
cgroup v1 refuses a child quota above its parent's, so that is checked here first.

More serving threads than emulated cores (cpu_quota / thread_quota) time-share them the
way the kernel shares real cores (`thread_share`): each thread gets its fair share,
cores / threads of an emulated core, per period of CFS's scheduling latency on a host of
that many cores, so a thread that has run its slice waits while the others run theirs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cachelab.errors import UserError

#: CFS's tunables before EEVDF (kernel/sched/fair.c, the thesis's kernel): every runnable
#: task runs once per `sched_latency` (6 ms), a slice is at least `min_granularity`
#: (0.75 ms); both x (1 + log2 of the CPUs, at most 8), the kernel's default "log" scaling.
SCHED_LATENCY_MS = 6.0
SCHED_MIN_GRANULARITY_MS = 0.75
#: The longest CFS period a cgroup takes (cpu.cfs_period_us, cpu.max), ms.
MAX_PERIOD_MS = 1000.0
#: The smallest runtime per period the kernel takes, ms.
MIN_RUNTIME_MS = 1.0


def scaled_text(quota: float, scale: float) -> str:
    """A quota as the machine sees it: "6 cores" or "60 cores (6 at topology.scale 10)"."""
    return f"{quota:g} cores" + (f" ({quota / scale:g} at topology.scale {scale:g})"
                                 if scale != 1 else "")


def quota_fields(t: Any, roles: Sequence[str]) -> list[tuple[str, float | None]]:
    """Every quota field of the topology with its path: cpu_quota and thread_quota of the
    topology, each role's profile and each host (for the kernel's runtime minimum)."""
    found: list[tuple[str, float | None]] = []
    for key in ("cpu_quota", "thread_quota"):
        found.append((f"topology.{key}", getattr(t, key)))
        found += [(f"topology.{r}.{key}", getattr(getattr(t, r), key)) for r in roles]
        found += [(f"topology.host[{i}].{key}", getattr(h, key))
                  for i, h in enumerate(t.host, start=1)]
    return found


def resolved(t: Any, key: str, levels: Sequence[Any]) -> tuple[str, float]:
    """The first level (a host, its roles' profiles, the topology) that sets `key`, as
    (its path, its value); ("", 0) when none does."""
    for path, level in levels:
        value = getattr(level, key)
        if value is not None:
            return path, float(value)
    return "", 0.0


def check(t: Any, roles: Sequence[str]) -> None:
    """The quotas' period, stretched by the scale model, is one the kernel takes; each
    thread quota fits its host's CPU quota and this machine once scaled (the cpuset, the
    kernel's minimum runtime and the topology kind are checked with the other quotas)."""
    period = t.cpu_period_ms * t.scale
    if period < 1 or period > 1000:
        raise UserError(f"topology.cpu_period_ms: {t.cpu_period_ms:g} ms at topology.scale "
                        f"{t.scale:g} is a {period:g} ms period; the kernel's is 1 .. 1000 ms")
    cases = [[("topology", t)]]
    cases += [[(f"topology.{r}", getattr(t, r)), ("topology", t)] for r in roles]
    cases += [[(f"topology.host[{i}]", h),
               *((f"topology.{r}", getattr(t, r)) for r in h.roles if r in roles),
               ("topology", t)] for i, h in enumerate(t.host, start=1)]
    for levels in cases:
        where, thread = resolved(t, "thread_quota", levels)
        if not thread or where != levels[0][0]:
            continue
        _, host = resolved(t, "cpu_quota", levels)
        if host and thread > host:
            raise UserError(f"{where}.thread_quota: {thread:g} cores per thread is more than "
                            f"the host's cpu_quota of {host:g} (a thread runs inside its "
                            f"host's quota)")
        if thread / t.scale > 1:
            raise UserError(f"{where}.thread_quota: {thread:g} cores per thread at "
                            f"topology.scale {t.scale:g} is {thread / t.scale:g} cores of "
                            f"this machine; one thread uses at most one")


def host_limits(layout: Any, threads_per_server: int) -> dict[str, float]:
    """Each host's CPU limit in cores: its quota, or, where its serving threads have
    quotas of their own, the smaller of that and threads x thread_quota (4 memcached
    threads on a host of 6 emulated cores can use 4). `layout` is a planned topology;
    `threads_per_server` the serving threads of one server process."""
    threads = serving_threads(layout, threads_per_server)
    limits = {}
    for i, h in enumerate(layout.hosts):
        limit = h.cpu_quota
        if h.thread_quota and threads[i]:
            cap = threads[i] * h.thread_quota
            limit = min(limit, cap) if limit else cap
        limits[h.name] = limit
    return limits


@dataclass(frozen=True)
class ThreadShare:
    """What one serving thread's cgroup gets: `quota` cores of this machine per
    `period_us` (None: the host's period, topology.cpu_period_ms)."""

    quota: float
    period_us: int | None = None


def sched_period_ms(cpus: int, runnable_per_cpu: float) -> float:
    """CFS's scheduling period on a host of `cpus` CPUs with `runnable_per_cpu` tasks
    runnable on each: sched_latency, stretched to min_granularity a task when more are
    runnable than it holds (kernel/sched/fair.c __sched_period)."""
    factor = 1 + int(math.log2(min(max(cpus, 1), 8)))
    return max(SCHED_LATENCY_MS * factor,
               runnable_per_cpu * SCHED_MIN_GRANULARITY_MS * factor)


def emulated_cores(cpu_quota: float, thread_quota: float) -> float:
    """A host's emulated cores, cpu_quota / thread_quota; 0 where either is unset."""
    return cpu_quota / thread_quota if cpu_quota and thread_quota else 0.0


def thread_share(cpu_quota: float, thread_quota: float, threads: int, scale: float
                 ) -> ThreadShare:
    """Each of `threads` serving threads of a host (quotas already scaled, as the layout
    has them): up to as many as its emulated cores, one core each at the host's period;
    beyond them, cores / threads of a core per CFS period of that host, stretched by the
    scale model, as a real core time-shared by its runnable threads gives each its slice
    and makes it wait out the others' (a request to a thread off its core waits)."""
    cores = emulated_cores(cpu_quota, thread_quota)
    if not cores or threads <= cores * (1 + 1e-9):
        return ThreadShare(thread_quota)
    period_ms = sched_period_ms(int(cores + 1e-9), threads / cores) * scale
    return ThreadShare(thread_quota * cores / threads, round(period_ms * 1000))


def serving_threads(layout: Any, threads_per_server: int) -> dict[int, int]:
    """The serving threads on each host of a planned topology, by host index."""
    threads = {i: 0 for i in range(len(layout.hosts))}
    for i in layout.servers:
        threads[i] += threads_per_server
    return threads


def check_sharing(layout: Any, threads_per_server: int, field: str) -> None:
    """Time-shared emulated cores take a period and a runtime the kernel accepts;
    `field` is the setting that sets the serving threads (servers.threads, .instances)."""
    for i, n in serving_threads(layout, threads_per_server).items():
        h = layout.hosts[i]
        share = thread_share(h.cpu_quota, h.thread_quota, n, layout.scale)
        if share.period_us is None:
            continue
        period_ms = share.period_us / 1000
        cores = emulated_cores(h.cpu_quota, h.thread_quota)
        what = (f"{field}: {n} serving threads on {h.name}'s {cores:g} emulated cores "
                f"time-share them over a {period_ms:g} ms period")
        if period_ms > MAX_PERIOD_MS:
            raise UserError(f"{what} (at topology.scale {layout.scale:g}), above the "
                            f"kernel's {MAX_PERIOD_MS:g} ms")
        if share.quota * period_ms < MIN_RUNTIME_MS:
            raise UserError(f"{what}, {share.quota * period_ms:g} ms per period each, below "
                            f"the kernel's minimum of {MIN_RUNTIME_MS:g} ms")
