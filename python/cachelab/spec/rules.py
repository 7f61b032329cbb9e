"""The rules that tie an experiment's fields together, checked on each point's run
configuration once every field has passed its own check: what goes with what (a transport
with a topology, a protocol with a server kind), and how many processes, clients and hosts
a run may start. Each mistake is one line naming the field."""

from __future__ import annotations

import os

from cachelab.errors import UserError
from cachelab.spec import cores, topology
from cachelab.spec.kinds import ROLES, LoadMode, Persistence, ServerKind, TopologyKind, WireProtocol
from cachelab.spec.sections import LINK_FIELDS, LinkProfile, RunConfig
from cachelab.spec.topology import MAX_HOSTS


def check_run(c: RunConfig) -> None:
    """Rules between fields."""
    # The middleware speaks its servers' protocol (cachelab-proxy --protocol redis for
    # Redis servers), so either kind may sit behind it.
    if c.servers.kind == ServerKind.REDIS and "--requirepass" in c.servers.extra_args:
        raise UserError("servers.extra_args: --requirepass: cachelab-load sends no AUTH, so "
                        "the populate step and the load would be refused (NOAUTH)")
    if c.load.protocol == WireProtocol.BINARY and (c.servers.kind != ServerKind.MEMCACHED
                                                   or c.middleware.count):
        raise UserError('load.protocol: "binary" is memcached\'s binary protocol, spoken to '
                        'memcached directly (servers.kind = "memcached", middleware.count = 0)')
    if c.servers.kind != ServerKind.MEMCACHED and c.servers.group_size is not None:
        raise UserError("servers.group_size: memcached's -R; Redis has no such option")
    if c.servers.kind != ServerKind.REDIS and c.servers.redis_persistence != Persistence.OFF:
        raise UserError('servers.redis_persistence: only for servers.kind = "redis"')
    if c.load.mode == LoadMode.OPEN and c.load.rate is None:
        raise UserError('load.rate: missing (load.mode = "open" needs an offered rate)')
    if c.load.measure_rate is not None and c.load.mode == LoadMode.CAPACITY:
        raise UserError('load.measure_rate: not with load.mode = "capacity" (the search '
                        'runs its own trials); use "closed" or "open"')
    if c.load.mode != LoadMode.OPEN and c.load.rate is not None:
        raise UserError('load.rate: only for load.mode = "open" (capacity mode searches '
                        'the rate)')
    if c.load.shard and c.middleware.count:
        raise UserError("load.shard: only with middleware.count = 0 (a middleware places "
                        "the keys itself)")
    if c.load.shard and c.workload.multiget_keys > 1:
        raise UserError("load.shard: not with workload.multiget_keys > 1 (the sharded "
                        "client does not split a multi-GET over the servers)")
    _check_transport(c)
    _check_topology(c)
    _check_counts(c)
    cpus = os.cpu_count() or 1
    for section in ("servers", "middleware", "load"):  # on ssh hosts, the hosts' CPUs
        for cpu in getattr(c, section).cpus if c.topology.kind != TopologyKind.SSH else ():
            if cpu >= cpus:
                raise UserError(f"{section}.cpus: CPU {cpu} does not exist here "
                                f"(this host has {cpus}: 0-{cpus - 1})")


def _check_transport(c: RunConfig) -> None:
    """TLS and Unix sockets: what the servers and the middleware can serve together, and
    the load generators' side agreeing with their target."""
    if c.servers.tls and c.servers.unix_socket:
        raise UserError("servers.unix_socket: not with servers.tls (memcached and Redis "
                        "serve TLS on TCP only)")
    if c.middleware.count and c.middleware.tls and c.middleware.unix_socket:
        raise UserError("middleware.unix_socket: not with middleware.tls (cachelab-proxy "
                        "serves TLS on TCP only)")
    target = "middleware" if c.middleware.count else "servers"
    if c.load.tls is not None and c.load.tls != c.client_tls:
        raise UserError(f"load.tls: {str(c.load.tls).lower()}, but the load generators talk "
                        f"to the {target}, which serve{'s' if target == 'middleware' else ''} "
                        f"{'TLS' if c.client_tls else 'plain TCP'} ({target}.tls = "
                        f"{str(c.client_tls).lower()}); leave load.tls out to follow it")
    kind = c.topology.kind
    for section in ("servers", "middleware"):
        if section == "middleware" and not c.middleware.count:
            continue
        if getattr(c, section).unix_socket and kind != TopologyKind.LOCAL:
            raise UserError(f'{section}.unix_socket: only on topology.kind = "local" (a Unix '
                            f'socket does not cross the links of {kind} hosts)')
    if c.tls and kind == TopologyKind.SSH:
        field_ = "servers.tls" if c.servers.tls else "middleware.tls"
        raise UserError(f'{field_}: not on topology.kind = "ssh" (the throw-away '
                        "certificates are not copied to remote hosts); use local or netns")


#: Processes one run may start (servers, middlewares, load generators): far more than
#: any experiment needs, and few enough that a typo (servers.count = 100000) is caught
#: before thousands of processes start.
MAX_PROCESSES = 256
#: Client connections one run may open (each takes a socket and a port on its host).
MAX_CLIENTS = 50_000
#: The smallest CPU quota per CFS period the kernel accepts (cgroups.MIN_QUOTA_US).
MIN_QUOTA_MS = 1.0


def _check_counts(c: RunConfig) -> None:
    processes = c.servers.processes + c.middleware.count + c.instances + c.measures
    if processes > MAX_PROCESSES:
        field_, value = max((("servers.count", c.servers.count),
                             ("middleware.count", c.middleware.count),
                             ("load.instances", c.instances)), key=lambda fv: fv[1])
        raise UserError(f"{field_}: {value} is too many: the run would start {processes} "
                        f"processes ({c.servers.processes} servers, {c.middleware.count} "
                        f"middlewares, {c.instances} load generators); at most "
                        f"{MAX_PROCESSES} fit")
    if c.total_clients > MAX_CLIENTS:
        raise UserError(f"load.clients: {c.total_clients} client connections in all "
                        f"(instances x threads x clients); at most {MAX_CLIENTS} fit")
    if c.topology.kind == TopologyKind.NETNS:
        hosts = len(c.topology.host) or processes
        if hosts > MAX_HOSTS:
            raise UserError(f"topology: {hosts} emulated hosts; at most {MAX_HOSTS} fit in "
                            "one topology (name fewer hosts with [[topology.host]])")


def _check_topology(c: RunConfig) -> None:
    t = c.topology
    if t.kind == TopologyKind.SSH:
        if not t.host:
            raise UserError('topology.host: topology.kind = "ssh" needs its hosts '
                            '([[topology.host]] with name, address and roles)')
        for key in ("link_mbit", "egress_mbit", "ingress_mbit", "delay_ms", "cpu_quota",
                    "thread_quota"):
            if getattr(t, key):
                raise UserError(f"topology.{key}: only for kind = \"netns\" (real hosts "
                                "have real links and CPUs)")
        if t.scale != 1:
            raise UserError('topology.scale: only for kind = "netns" (real hosts run at '
                            "their own speed)")
        for role in ROLES:
            if getattr(t, role) != LinkProfile():
                raise UserError(f'topology.{role}: only for kind = "netns" (real hosts '
                                "have real links and CPUs)")
        for i, h in enumerate(t.host, start=1):
            if not h.address:
                raise UserError(f"topology.host[{i}].address: missing (where to reach "
                                f"host {h.name!r} over SSH)")
            for key in (*LINK_FIELDS, "cpu_quota", "thread_quota", "cpus"):
                if getattr(h, key) is not None:
                    raise UserError(f"topology.host[{i}].{key}: only for kind = \"netns\"")
    if t.kind == TopologyKind.LOCAL:
        if t.host:
            raise UserError('topology.host: hosts need topology.kind = "netns" or "ssh"')
        return
    names = [h.name for h in t.host]
    for i, name in enumerate(names, start=1):
        if not name or not all(ch.isalnum() or ch in "-_" for ch in name) or len(name) > 20:
            raise UserError(f"topology.host[{i}].name: expected 1-20 letters, digits, - or _, "
                            f"got {name!r}")
        if names.count(name) > 1:
            raise UserError(f"topology.host[{i}].name: {name!r} is used twice")
    if t.host:
        needed = {"server": c.servers.count, "middleware": c.middleware.count,
                  "load": c.instances, "measure": c.measures}
        for role, count in needed.items():
            if count and not any(role in h.roles for h in t.host):
                raise UserError(f"topology.host: no host has the role {role!r} "
                                f"({count} {role} instance(s) to place)")
    if t.kind == TopologyKind.NETNS:
        for i, h in enumerate(t.host, start=1):
            if h.address is not None:
                raise UserError(f"topology.host[{i}].address: cachelab chooses the addresses "
                                "of emulated hosts; address is for kind = \"ssh\"")
    cpus = os.cpu_count() or 1
    for i, h in enumerate(t.host, start=1):
        if h.cpus is not None:
            for part in h.cpus.split(","):
                low, _, high = part.partition("-")
                if int(high or low) >= cpus or int(high or low) < int(low):
                    raise UserError(f"topology.host[{i}].cpus: {h.cpus!r} names CPUs this "
                                    f"host does not have (0-{cpus - 1})")
        if h.cpu_quota and h.cpu_quota / t.scale > cpus:
            raise UserError(f"topology.host[{i}].cpu_quota: "
                            f"{cores.scaled_text(h.cpu_quota, t.scale)}, this machine has {cpus}")
    if t.cpu_quota / t.scale > cpus:
        raise UserError(f"topology.cpu_quota: {cores.scaled_text(t.cpu_quota, t.scale)}, this "
                        f"machine has {cpus}")
    quotas = cores.quota_fields(t, ROLES)
    cores.check(t, ROLES)
    if t.kind == TopologyKind.NETNS:
        per = serving_threads(c)
        cores.check_sharing(topology.plan(c), per,
                            "servers.threads" if per > 1 else "servers.instances")
    for where, quota in quotas:
        if quota and quota * t.cpu_period_ms < MIN_QUOTA_MS:
            raise UserError(f"{where}: {quota:g} core over a {t.cpu_period_ms:g} ms period is "
                            f"{quota * t.cpu_period_ms:g} ms per period, below the kernel's "
                            f"minimum of {MIN_QUOTA_MS:g} ms (raise topology.cpu_period_ms to "
                            f"at least {MIN_QUOTA_MS / quota:g})")


def serving_threads(c: RunConfig) -> int:
    """The serving threads of one server process, each an emulated core's tenant:
    memcached's workers (-t), Redis's one main thread (its I/O threads are not)."""
    return c.servers.threads if c.servers.kind == ServerKind.MEMCACHED else 1
