"""Points named as a reader says them: "read-only, 8 workers, 16 clients" rather than
"workload.ratio=0:1, middleware.workers=8, load.clients=16". The raw factor paths stay in
the exports and in each name's hover title. Pure: factor paths and levels in, text out.
Here in spec/ so that every later package can name points alike: `cachelab run`'s progress
lines as well as the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from cachelab.spec.experiment import Point


def level_text(value: object) -> str:
    """A level as text, as experiment files write it (true, 4, 0:1)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ratio_name(level: object) -> str:
    """A workload's sets:gets ratio: 0:1 is read-only, 1:0 write-only, others as written."""
    text = level_text(level).replace(" ", "")
    sets, _, gets = text.partition(":")
    if sets.strip("0") == "" and gets.strip("0") != "":
        return "read-only"
    if gets.strip("0") == "" and sets.strip("0") != "":
        return "write-only"
    return f"sets:gets {text}"


def _count(one: str, many: str | None = None) -> Callable[[object], str]:
    """"1 middleware", "2 middlewares": a level that counts something."""
    def name(level: object) -> str:
        text = _number(level)
        return f"{text} {one if text == '1' else (many or one + 's')}"
    return name


def _switch(on: str, off: str) -> Callable[[object], str]:
    return lambda level: on if level is True or level_text(level) == "true" else off


def _cpus(role: str) -> Callable[[object], str]:
    def name(level: object) -> str:
        if isinstance(level, list | tuple):
            return (f"{role} on CPU{'s' if len(level) > 1 else ''} "
                    f"{','.join(map(str, level))}") if level else f"{role} on any CPU"
        return f"{role} on CPUs {level_text(level)}"
    return name


def _number(level: object) -> str:
    if isinstance(level, float) and level.is_integer():
        level = int(level)
    if isinstance(level, int) and not isinstance(level, bool) and abs(level) >= 10_000:
        return f"{level:,}"
    return level_text(level)


def _bytes(level: object) -> str:
    n = level if isinstance(level, int) else None
    if n is not None and n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB values" if n < 1024 ** 2 else f"{n // 1024 ** 2} MiB values"
    return f"{_number(level)}-byte values"


#: How each factor a reader meets reads; any other is "last part of its path = level".
NAMES: dict[str, Callable[[object], str]] = {
    "workload.ratio": ratio_name,
    "workload.data_size": _bytes,
    "workload.multiget_keys": lambda v: f"multi-GET of {_number(v)} keys",
    "workload.key_pattern": lambda v: f"{level_text(v)} keys",
    "middleware.workers": _count("worker"),
    "middleware.count": _count("middleware"),
    "middleware.sharded": _switch("sharded", "replicated"),
    "load.shard": _switch("sharded by the client", "a load generator per server"),
    "middleware.tls": _switch("TLS to the middleware", "no TLS to the middleware"),
    "servers.kind": lambda v: {"redis": "Redis"}.get(level_text(v), level_text(v)),
    "servers.count": _count("server"),
    "servers.threads": _count("server thread"),
    "servers.instances": _count("instance per server", "instances per server"),
    "servers.group_size": lambda v: f"group size {_number(v)}",
    "servers.pinning": lambda v: f"pinning {level_text(v)}",
    "servers.tls": _switch("TLS to the servers", "no TLS to the servers"),
    "servers.cpus": _cpus("servers"),
    "load.clients": _count("client"),
    "load.threads": _count("client thread"),
    "load.instances": _count("load generator"),
    "load.rate": lambda v: f"{_number(v)} ops/s offered",
    "load.mode": lambda v: f"{level_text(v)} loop",
    "load.pipeline": lambda v: f"pipeline {_number(v)}",
    "load.cpus": _cpus("load"),
}

#: How each factor itself reads (an axis, a column header); any other is the last part
#: of its path.
FACTORS: dict[str, str] = {
    "clients": "clients",
    "workload.ratio": "sets:gets ratio",
    "workload.data_size": "value size",
    "workload.multiget_keys": "keys per multi-GET",
    "workload.key_pattern": "key pattern",
    "middleware.workers": "workers per middleware",
    "middleware.count": "middlewares",
    "middleware.sharded": "sharding",
    "load.shard": "client-side sharding",
    "middleware.tls": "TLS to the middleware",
    "servers.kind": "server",
    "servers.count": "servers",
    "servers.threads": "server threads",
    "servers.instances": "instances per server",
    "servers.group_size": "group size",
    "servers.tls": "TLS to the servers",
    "load.clients": "clients per load thread",
    "load.threads": "client threads",
    "load.instances": "load generators",
    "load.rate": "offered rate (ops/s)",
    "load.mode": "loop",
    "load.pipeline": "pipeline depth",
}

#: Factors that count clients: a point's own name says its total when it differs.
CLIENT_PATHS = ("load.clients", "load.threads", "load.instances")


def level_name(path: str, level: object) -> str:
    """One factor's level as a reader says it ("8 workers", "read-only")."""
    known = NAMES.get(path)
    if known is not None:
        return known(level)
    return f"{path.rsplit('.', 1)[-1].replace('_', ' ')} {level_text(level)}"


def factor_name(path: str) -> str:
    """A factor as a reader says it ("sets:gets ratio" for workload.ratio)."""
    return FACTORS.get(path) or path.rsplit(".", 1)[-1].replace("_", " ")


def point_name(factors: dict[str, object], clients: int | None = None) -> str:
    """A point's factors in the sweep's order, each as a reader says it; `clients` (the
    total of every instance, thread and connection) is said where the client factors do
    not already say it. No factors: "base"."""
    said = [p for p in CLIENT_PATHS if p in factors]
    if clients is None or not said or (said == ["load.clients"]
                                       and _number(factors["load.clients"]) == str(clients)):
        return ", ".join(level_name(p, v) for p, v in factors.items()) or "base"
    if said == ["load.clients"]:  # connections per load thread, times threads and instances
        return ", ".join(f"{clients} clients ({_number(v)} per load thread)"
                         if p == "load.clients" else level_name(p, v)
                         for p, v in factors.items())
    return ", ".join([*(level_name(p, v) for p, v in factors.items()),
                      f"{clients} clients in all"])


def curve_name(fixed: Iterable[tuple[str, object]]) -> str:
    """A configuration (every factor but the x axis) as a reader says it."""
    return ", ".join(level_name(path, level) for path, level in fixed) or "all points"


def name_of(point: Point) -> str:
    """A sweep point as a reader says it, its clients counted over every instance and
    thread; `point.label` keeps the raw factor paths."""
    return point_name(dict(point.factors), point.config.total_clients)
