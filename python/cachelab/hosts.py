"""A host as the process starters see it: an address to listen on and to connect to, and
a command prefix that runs a process there (nothing for this host; a network namespace
and a cgroup for an emulated one)."""

from __future__ import annotations

from dataclasses import dataclass, field

from cachelab.cgroups import CpuGroup


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    prefix: tuple[str, ...] = ()
    #: The cgroup that accounts this host's CPU (None: not accounted separately).
    group: CpuGroup | None = field(default=None, compare=False)


LOOPBACK = Host("local", "127.0.0.1")
