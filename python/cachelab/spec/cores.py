"""Emulated cores: the rules of `thread_quota`, the CPU of one serving thread of a server
(docs/topologies.md, "Emulated cores"). Pure checks on a parsed topology; every mistake
names its field.

A host's `cpu_quota` bounds all its threads together; `thread_quota` gives each serving
thread (memcached's workers, Redis's main thread) a cgroup of its own inside the host's,
so that with cpu_quota = 6 and thread_quota = 1 one Redis uses at most one of 6 emulated
cores, and 12 memcached threads share 6. A thread cannot have more than its host, and
cgroup v1 refuses a child quota above its parent's, so that is checked here first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cachelab.errors import UserError


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
    threads = {i: 0 for i in range(len(layout.hosts))}
    for i in layout.servers:
        threads[i] += threads_per_server
    limits = {}
    for i, h in enumerate(layout.hosts):
        limit = h.cpu_quota
        if h.thread_quota and threads[i]:
            cap = threads[i] * h.thread_quota
            limit = min(limit, cap) if limit else cap
        limits[h.name] = limit
    return limits
