"""The hosts of a run and what each one runs: pure planning, no I/O.

A `netns` (or `ssh`) topology is a set of logical hosts, each with one link to a shared
bridge. A host's link has an egress rate and a one-way delay in each direction, so

    RTT(A, B) = 2 x (delay_A + delay_B) + base

where the base is the round trip of the unshaped path (tens of microseconds here).
Instances of each role (server, middleware, load generator) are placed round-robin over
the hosts that have the role; without explicit hosts every instance gets a host of its
own named after it (server1, middleware1, load1, ...), with the topology's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachelab.spec.experiment import MAX_HOSTS, ROLES, RunConfig

#: Addresses of the emulated hosts: inside 198.18.0.0/15, the range RFC 2544 sets aside
#: for benchmarking, so they cannot clash with a real network. The controller (this
#: process's namespace) is .1 of the subnet, hosts .2 upwards.
SUBNET_BASE = (198, 18)


@dataclass(frozen=True)
class PlannedHost:
    name: str
    roles: tuple[str, ...]
    #: Egress rate of the host's link in each direction, Mbit/s; 0: unshaped.
    link_mbit: float
    #: One-way delay added on the host's link in each direction, ms.
    delay_ms: float
    #: Cores the host may use (cgroup quota); 0: unlimited.
    cpu_quota: float
    cpus: str | None


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
        hosts = tuple(PlannedHost(
            h.name, h.roles,
            t.link_mbit if h.link_mbit is None else h.link_mbit,
            t.delay_ms if h.delay_ms is None else h.delay_ms,
            t.cpu_quota if h.cpu_quota is None else h.cpu_quota, h.cpus) for h in t.host)
        placement = {}
        for role in ROLES:
            eligible = [i for i, h in enumerate(hosts) if role in h.roles]
            placement[role] = tuple(eligible[(i // per_host[role]) % len(eligible)]
                                    for i in range(counts[role] * per_host[role]))
    else:
        hosts, placement = (), {}
        for role in ROLES:
            first = len(hosts)
            hosts += tuple(PlannedHost(f"{role}{i + 1}", (role,), t.link_mbit, t.delay_ms,
                                       t.cpu_quota, None) for i in range(counts[role]))
            placement[role] = tuple(first + i // per_host[role]
                                    for i in range(counts[role] * per_host[role]))
    if len(hosts) > MAX_HOSTS:
        raise ValueError(f"{len(hosts)} hosts; at most {MAX_HOSTS} fit in one topology")
    return Layout(hosts, placement["server"], placement["middleware"], placement["load"],
                  placement["measure"])


def round_trip_ms(a: PlannedHost, b: PlannedHost) -> float:
    """The round trip the delays add between two hosts (the base RTT comes on top)."""
    return 2.0 * (a.delay_ms + b.delay_ms)


def address(subnet: int, index: int) -> str:
    """Host `index` (0-based) of emulated subnet `subnet` (0-511)."""
    return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1] + subnet // 256}.{subnet % 256}.{index + 2}"


def controller_address(subnet: int) -> str:
    return f"{SUBNET_BASE[0]}.{SUBNET_BASE[1] + subnet // 256}.{subnet % 256}.1"
