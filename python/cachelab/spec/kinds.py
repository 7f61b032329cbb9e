"""The words and checks an experiment file's fields are built from: the fixed sets a field
takes its word from (as StrEnums), the roles of a topology's hosts, the key patterns, and
each field's own check (`setting`), which the parser (`experiment._build`) applies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from enum import StrEnum
from typing import Any

# The words a field takes from a fixed set are StrEnums: each member is its word (it
# compares, hashes, formats and serialises as the plain string), so the files, the
# database and the CLI keep their words, and a field's type says what it may hold.


class ServerKind(StrEnum):
    MEMCACHED = "memcached"
    REDIS = "redis"


class TopologyKind(StrEnum):
    """Topologies of SPEC section 3 (docs/topologies.md)."""

    LOCAL = "local"
    NETNS = "netns"
    SSH = "ssh"


class Pinning(StrEnum):
    PROCESS = "process"
    THREAD = "thread"
    NONE = "none"


class Persistence(StrEnum):
    OFF = "off"
    RDB = "rdb"
    AOF = "aof"


class WireProtocol(StrEnum):
    """memcached's protocol between the load generator and its targets."""

    TEXT = "text"
    BINARY = "binary"


class LoadMode(StrEnum):
    """Closed loop (each connection waits for its reply), open loop (a fixed offered rate),
    or a capacity search (open-loop trials at the rates the search picks)."""

    CLOSED = "closed"
    OPEN = "open"
    CAPACITY = "capacity"


class Timestamps(StrEnum):
    """cachelab-load's --timestamps: which clock ends each latency."""

    KERNEL = "kernel"
    USER = "user"


#: What a host of a topology may run (`measure`: the measuring client, load.measure_rate).
ROLES = ("server", "middleware", "load", "measure")
#: Key patterns by name, as the load generator's letters.
KEY_PATTERNS = {"uniform": "R", "gaussian": "G", "zipf": "Z", "sequential": "S", "split": "P"}


#: A field's own check: a problem to report, or None.
Check = Callable[[Any], str | None]


def at_least(low: float) -> Check:
    return lambda v: None if v is None or v >= low else f"must be >= {low:g}, got {v!r}"


def positive(v: Any) -> str | None:
    return None if v is None or v > 0 else f"must be > 0, got {v!r}"


def check_ratio(v: Any) -> str | None:
    parts = str(v).split(":")
    if len(parts) == 2 and all(p.isdigit() for p in parts) and any(int(p) for p in parts):
        return None
    return f'expected "S:G" with integers, not both 0 (e.g. "1:10"), got {v!r}'


def check_pattern(v: Any) -> str | None:
    if v in KEY_PATTERNS or v in KEY_PATTERNS.values():
        return None
    return f"must be one of {', '.join(KEY_PATTERNS)} (or R, G, Z, S, P), got {v!r}"


def check_cpus(v: tuple[int, ...]) -> str | None:
    return next((f"CPU numbers must be >= 0, got {c}" for c in v if c < 0), None)


def setting(default: Any, check: Check | None = None) -> Any:
    return field(default=default, metadata={"check": check})
