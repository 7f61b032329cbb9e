"""The hosts of a run and what each one runs: pure planning, no I/O.

A `netns` (or `ssh`) topology is a set of logical hosts, each with one link to a shared
bridge. A host's link has a rate for what it sends (egress) and for what it receives
(ingress), each with its token bucket and queue, and a one-way delay in each direction, so

    RTT(A, B) = 2 x (delay_A + delay_B) + base

where the base is the round trip of the unshaped path (tens of microseconds here).
Instances of each role (server, middleware, load generator) are placed round-robin over
the hosts that have the role; without explicit hosts every instance gets a host of its
own named after it (server1, middleware1, load1, ...).

A host's value of a link field is the first set of: the host's own, its roles' profiles
(`[topology.server]`, ... in the order of the host's roles), the topology's. At each of
these levels `egress_mbit`/`ingress_mbit` fall back to that level's `link_mbit`.

A scale model (`topology.scale = k`) divides every rate, bucket and CPU quota (the
hosts' and their threads') by k and
multiplies every delay and queue by k, so every ratio of service, transfer and delay
times is kept and the system runs k times slower (`scaled`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cachelab.spec.kinds import ROLES
from cachelab.spec.sections import Host, LinkProfile, RunConfig, Topology

#: Emulated hosts one topology may have: their addresses are .2 upwards in one /24
#: (`address`; the controller is .1).
MAX_HOSTS = 250
#: Addresses of the emulated hosts: inside 198.18.0.0/15, the range RFC 2544 sets aside
#: for benchmarking, so they cannot clash with a real network. The controller (this
#: process's namespace) is .1 of the subnet, hosts .2 upwards.
SUBNET_BASE = (198, 18)


@dataclass(frozen=True)
class PlannedHost:
    name: str
    roles: tuple[str, ...]
    #: Rate of what the host sends (egress) and receives (ingress), Mbit/s; 0: unshaped.
    egress_mbit: float
    ingress_mbit: float
    #: One-way delay added on the host's link in each direction, ms.
    delay_ms: float
    #: Cores the host may use (cgroup quota); 0: unlimited.
    cpu_quota: float
    cpus: str | None
    #: Token buckets in KiB (None: netns.tbf_args's default) and how long a frame may
    #: wait for tokens, ms, per direction.
    egress_burst_kb: float | None = None
    ingress_burst_kb: float | None = None
    egress_queue_ms: float = 50.0
    ingress_queue_ms: float = 50.0
    #: Cores each serving thread of a server here may use (an emulated core); 0: no cap.
    thread_quota: float = 0.0

    @property
    def shaped(self) -> bool:
        return self.egress_mbit > 0 or self.ingress_mbit > 0

    def link_key(self) -> tuple[object, ...]:
        """What makes two hosts' links alike (for measuring each kind of pair once)."""
        return (self.egress_mbit, self.ingress_mbit, self.delay_ms, self.cpu_quota,
                self.egress_burst_kb, self.ingress_burst_kb)


def _resolve(t: Topology, name: str, roles: tuple[str, ...], own: Host | None,
             cpus: str | None) -> PlannedHost:
    """A host's link and CPU from its own values, its roles' profiles, the topology's."""
    levels: list[Host | LinkProfile | Topology] = [own] if own else []
    levels += [getattr(t, r) for r in roles]
    levels.append(t)

    def first(key: str, fallback: str | None = None) -> float | None:
        for level in levels:
            value = getattr(level, key)
            if value is None and fallback:
                value = getattr(level, fallback)
            if value is not None:
                return float(value)
        return None

    return PlannedHost(
        name, roles, egress_mbit=first("egress_mbit", "link_mbit") or 0.0,
        ingress_mbit=first("ingress_mbit", "link_mbit") or 0.0,
        delay_ms=first("delay_ms") or 0.0, cpu_quota=first("cpu_quota") or 0.0, cpus=cpus,
        egress_burst_kb=first("egress_burst_kb"), ingress_burst_kb=first("ingress_burst_kb"),
        egress_queue_ms=first("egress_queue_ms") or t.egress_queue_ms,
        ingress_queue_ms=first("ingress_queue_ms") or t.ingress_queue_ms,
        thread_quota=first("thread_quota") or 0.0)


def scaled(host: PlannedHost, k: float) -> PlannedHost:
    """The host of a scale model k: rates, buckets and quota / k; delay and queues x k."""
    if k == 1:
        return host

    def slow(x: float | None) -> float | None:
        return None if x is None else x / k

    return replace(host, egress_mbit=host.egress_mbit / k,
                   ingress_mbit=host.ingress_mbit / k, delay_ms=host.delay_ms * k,
                   cpu_quota=host.cpu_quota / k, thread_quota=host.thread_quota / k,
                   egress_burst_kb=slow(host.egress_burst_kb),
                   ingress_burst_kb=slow(host.ingress_burst_kb),
                   egress_queue_ms=host.egress_queue_ms * k,
                   ingress_queue_ms=host.ingress_queue_ms * k)


@dataclass(frozen=True)
class Layout:
    hosts: tuple[PlannedHost, ...]
    #: Index into `hosts` of server process i (servers.instances of them per server
    #: host), middleware i, load generator instance i.
    servers: tuple[int, ...]
    middlewares: tuple[int, ...]
    loads: tuple[int, ...]
    #: The measuring client (load.measure_rate), if any.
    measures: tuple[int, ...] = ()
    #: The CFS period of the hosts' CPU quotas, µs (a scale model stretches it too).
    cpu_period_us: int = 100_000
    #: The scale model's k (1: none); the hosts above are already scaled.
    scale: float = 1.0

    def host(self, role: str, i: int) -> PlannedHost:
        return self.hosts[self._placement(role)[i]]

    def _placement(self, role: str) -> tuple[int, ...]:
        return {"server": self.servers, "middleware": self.middlewares,
                "load": self.loads, "measure": self.measures}[role]

    def pairs(self) -> list[tuple[str, str]]:
        """The (client host, server host) pairs that carry a run's traffic: load -> target
        and, with middlewares, middleware -> every server. Same-host pairs are left out."""
        found: dict[tuple[str, str], None] = {}
        targets = self.middlewares or self.servers
        for i, load in enumerate(self.loads + self.measures):
            found[(self.hosts[load].name, self.hosts[targets[i % len(targets)]].name)] = None
        for mw in self.middlewares:
            for server in self.servers:
                found[(self.hosts[mw].name, self.hosts[server].name)] = None
        return [p for p in found if p[0] != p[1]]


def plan(config: RunConfig) -> Layout:
    """Which hosts a run has and where each instance goes."""
    t = config.topology
    counts = {"server": config.servers.count, "middleware": config.middleware.count,
              "load": config.instances, "measure": config.measures}
    per_host = {"server": config.servers.instances, "middleware": 1, "load": 1, "measure": 1}
    if t.host:
        hosts = tuple(_resolve(t, h.name, h.roles, h, h.cpus) for h in t.host)
        placement = {}
        for role in ROLES:
            eligible = [i for i, h in enumerate(hosts) if role in h.roles]
            placement[role] = tuple(eligible[(i // per_host[role]) % len(eligible)]
                                    for i in range(counts[role] * per_host[role]))
    else:
        hosts, placement = (), {}
        for role in ROLES:
            first = len(hosts)
            hosts += tuple(_resolve(t, f"{role}{i + 1}", (role,), None, None)
                           for i in range(counts[role]))
            placement[role] = tuple(first + i // per_host[role]
                                    for i in range(counts[role] * per_host[role]))
    hosts = tuple(scaled(h, t.scale) for h in hosts)
    if len(hosts) > MAX_HOSTS:
        raise ValueError(f"{len(hosts)} hosts; at most {MAX_HOSTS} fit in one topology")
    period_us = min(round(t.cpu_period_ms * 1000 * t.scale), 1_000_000)
    return Layout(hosts, placement["server"], placement["middleware"], placement["load"],
                  placement["measure"], period_us, t.scale)


def round_trip_ms(a: PlannedHost, b: PlannedHost) -> float:
    """The round trip the delays add between two hosts (the base RTT comes on top)."""
    return 2.0 * (a.delay_ms + b.delay_ms)


def address(subnet: int, index: int) -> str:
    """Host `index` (0-based) of emulated subnet `subnet` (0-511)."""
    return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1] + subnet // 256}.{subnet % 256}.{index + 2}"


def controller_address(subnet: int) -> str:
    return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1] + subnet // 256}.{subnet % 256}.1"
