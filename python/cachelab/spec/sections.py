"""The sections of an experiment file's run configuration, as frozen dataclasses: servers,
middleware, load, workload, the topology and its hosts, and the run configuration they
make (`RunConfig`). docs/experiments.md is the reference for every field; the checks
between fields are in `rules`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from cachelab.spec import presets as presets_mod
from cachelab.spec.kinds import (
    KEY_PATTERNS,
    ROLES,
    LoadMode,
    Persistence,
    Pinning,
    ServerKind,
    Timestamps,
    TopologyKind,
    WireProtocol,
    at_least,
    check_cpus,
    check_pattern,
    check_ratio,
    positive,
    setting,
)
from cachelab.spec.placement import Placement, PlacementPolicy, place
from cachelab.spec.warmup import Warmup


@dataclass(frozen=True)
class Servers:
    kind: ServerKind = setting(ServerKind.MEMCACHED)
    #: Server instances; without a middleware each load generator instance uses one.
    count: int = setting(1, at_least(1))
    #: memcached `-t`; Redis `--io-threads`.
    threads: int = setting(1, at_least(1))
    memory_mb: int = setting(1024, at_least(1))
    #: Server i is pinned to cpus[i % len(cpus)]; empty: not pinned.
    cpus: tuple[int, ...] = setting((), check_cpus)
    #: Server processes per server host (`count` hosts x `instances` each; on `local`
    #: simply count x instances processes).
    instances: int = setting(1, at_least(1))
    #: "process": server i on cpus[i mod len] (as `cpus` says); "thread": each server
    #: worker thread on its own CPU, round-robin over `cpus` (all CPUs if empty);
    #: "none": not pinned, whatever `cpus` says.
    pinning: Pinning = setting(Pinning.PROCESS)
    #: memcached `-R`: requests served per event before the worker yields (None: 20).
    group_size: int | None = setting(None, at_least(1))
    #: Arguments appended to the server's command line as written (recorded).
    extra_args: tuple[str, ...] = setting(())
    #: Redis only: "off", "rdb" (snapshots, Redis's default schedule), "aof" (append-only
    #: file, fsync every second).
    redis_persistence: Persistence = setting(Persistence.OFF)
    #: Serve TLS with the experiment's throw-away certificates (memcached `-Z`, Redis
    #: `--tls-port` and no plain port); the load generators and middlewares speak TLS to
    #: them and verify them (docs/tls.md, *In the harness*).
    tls: bool = setting(False)
    #: Listen on a Unix socket instead of TCP (memcached `-s`, Redis `--unixsocket`);
    #: only where the servers' clients share their host (topology.kind = "local").
    unix_socket: bool = setting(False)

    @property
    def processes(self) -> int:
        return self.count * self.instances


@dataclass(frozen=True)
class Middleware:
    #: 0: the load generators talk to the servers directly.
    count: int = setting(1, at_least(0))
    workers: int = setting(16, at_least(1))
    sharded: bool = setting(False)
    #: `--pipeline`: requests a worker takes at once and sends together (1: the
    #: spec's one-request-per-worker model, which the queueing models assume).
    pipeline: int = setting(1, at_least(1))
    #: `--loops`: event-loop threads, each with its own clients, FCFS queue and
    #: `workers` workers (1: the spec's one queue; N: N such stations in parallel).
    loops: int = setting(1, at_least(1))
    #: `--busy-poll-us`: spin this long after each read instead of sleeping (0: off).
    busy_poll_us: int = setting(0, at_least(0))
    #: `--share-connections`: a loop's workers share one connection per server, their
    #: batches pipelined on it (false: each worker its own, the spec's structure).
    share_connections: bool = setting(False)
    #: `--merge-gets`: a batch's memcached gets for one server go out as one `get`
    #: line (false: each request its own line).
    merge_gets: bool = setting(False)
    cpus: tuple[int, ...] = setting((), check_cpus)
    #: Serve TLS to the load generators (`--tls-cert`); TLS to the servers follows
    #: servers.tls.
    tls: bool = setting(False)
    #: Listen on a Unix socket (`--unix-socket`) instead of TCP (topology.kind = "local").
    unix_socket: bool = setting(False)


@dataclass(frozen=True)
class Load:
    #: Load generator processes; None: one per target (middleware, or server without one).
    instances: int | None = setting(None, at_least(1))
    threads: int = setting(1, at_least(1))
    #: Connections per thread; the clients are instances x threads x clients.
    clients: int = setting(1, at_least(1))
    mode: LoadMode = setting(LoadMode.CLOSED)
    #: Open loop: offered requests per second over all instances.
    rate: float | None = setting(None, positive)
    pipeline: int = setting(1, at_least(1))
    cpus: tuple[int, ...] = setting((), check_cpus)
    #: memcached's "text" or "binary" protocol (binary: servers directly, no middleware).
    protocol: WireProtocol = setting(WireProtocol.TEXT)
    #: cachelab-load's --busy-poll-us: spin before due sends and while replies are awaited
    #: (sends on time, replies timed when they land), at a CPU cost.
    busy_poll_us: int = setting(0, at_least(0))
    #: How instances and their connections spread over the targets (spec/placement.py):
    #: "even" keeps every target's share of the clients equal where instance i mod T
    #: would not; "round-robin" gives every instance `clients` per thread.
    placement: PlacementPolicy = setting(PlacementPolicy.EVEN)
    #: The measuring client (mutilate's -Q/-C, Lancet's latency agent): one more instance,
    #: one connection in open loop at this rate (requests/s), on a host of its own; the
    #: report shows its latencies as the trusted ones. None: no measuring client.
    measure_rate: float | None = setting(None, positive)
    #: Speak TLS to the target: None follows it (middleware.tls, or servers.tls without a
    #: middleware); true or false must agree with it.
    tls: bool | None = setting(None)
    #: cachelab-load's --timestamps: "kernel" (latency ends at the kernel's receipt of the
    #: reply where the kernel stamps it) or "user" (at the program's read, as over TLS and
    #: Unix sockets, where the kernel cannot stamp requests).
    timestamps: Timestamps = setting(Timestamps.KERNEL)
    #: Without a middleware: every instance shards over all the servers as twemproxy
    #: would (cachelab-load --shard, ketama over fnv1a_64, the servers named as the
    #: middleware names them), the "direct" baseline of a pool; false: each instance
    #: talks to one server.
    shard: bool = setting(False)
    #: `[load.warmup]`: load the cache until warm before measuring (spec/warmup.py).
    warmup: Warmup = field(default=Warmup(), metadata={"check": None, "section": Warmup})


@dataclass(frozen=True)
class Workload:
    ratio: str = setting("1:10", check_ratio)
    #: Keys per GET; above 1 every GET is a multi-GET.
    multiget_keys: int = setting(0, at_least(0))
    data_size: int = setting(4096, at_least(1))
    key_maximum: int = setting(10000, at_least(1))
    key_pattern: str = setting("uniform", check_pattern)
    key_stddev: float | None = setting(None, positive)
    key_median: float | None = setting(None, at_least(0))
    zipf_exponent: float = setting(1.0, positive)
    seed: int = setting(5381, at_least(0))
    #: cachelab-load's --workload preset (spec/presets.py); the fields above override it.
    preset: str | None = setting(None, presets_mod.check)
    #: Write every key before the run (false: the servers start empty, as a cold cache).
    populate: bool = setting(True)
    #: cachelab-load's --trace (replay instead of generated requests) and --trace-speed.
    trace: str | None = setting(None)
    trace_speed: float = setting(1.0, at_least(0))

    @property
    def pattern_letter(self) -> str:
        return KEY_PATTERNS.get(self.key_pattern, self.key_pattern)


def _roles(v: tuple[str, ...]) -> str | None:
    return next((f"must be a list of {', '.join(ROLES)}, got {r!r}" for r in v
                 if r not in ROLES), None)


def _cpuset(v: Any) -> str | None:
    if v is None:
        return None
    parts = str(v).split(",")
    for part in parts:
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()):
            return f'expected a cpuset such as "1" or "0-1" or "0,2", got {v!r}'
    return None


#: The link fields of a host, a role's profile and the topology (docs/topologies.md):
#: `link_mbit` is shorthand for both directions' rates; `egress_*` shapes what the host
#: sends, `ingress_*` what it receives.
LINK_FIELDS = ("link_mbit", "egress_mbit", "ingress_mbit", "egress_burst_kb",
               "ingress_burst_kb", "egress_queue_ms", "ingress_queue_ms", "delay_ms")


@dataclass(frozen=True)
class Host:
    """A host of a `netns` or `ssh` topology; link and CPU fields left out take its
    role's profile's values, then the topology's."""

    name: str = setting("")
    #: What runs here; instances of a role are placed round-robin over its hosts.
    roles: tuple[str, ...] = setting(ROLES, _roles)
    #: Both directions' rate in Mbit/s (0: unshaped); egress/ingress override it.
    link_mbit: float | None = setting(None, at_least(0))
    egress_mbit: float | None = setting(None, at_least(0))
    ingress_mbit: float | None = setting(None, at_least(0))
    #: Token bucket per direction in KiB (None: 2 ms at the rate or a 64 KiB GSO frame).
    egress_burst_kb: float | None = setting(None, positive)
    ingress_burst_kb: float | None = setting(None, positive)
    #: How long a frame may wait for tokens before it is dropped, per direction, in ms.
    egress_queue_ms: float | None = setting(None, positive)
    ingress_queue_ms: float | None = setting(None, positive)
    delay_ms: float | None = setting(None, at_least(0))
    #: Cores this host may use (a cgroup CPU quota); 0: unlimited.
    cpu_quota: float | None = setting(None, at_least(0))
    #: Cores one serving thread of a server here may use (its own cgroup inside the
    #: host's: an emulated core, docs/topologies.md); 0: no cap of its own.
    thread_quota: float | None = setting(None, at_least(0))
    #: A cpuset for the host's processes, e.g. "1" or "0-1"; None: every CPU.
    cpus: str | None = setting(None, _cpuset)
    #: `ssh`: the address to reach the host at (and its processes listen on), the SSH
    #: user and private key (default: the topology's), and the SSH port.
    address: str | None = setting(None)
    user: str | None = setting(None)
    key: str | None = setting(None)
    ssh_port: int = setting(22, at_least(1))


@dataclass(frozen=True)
class LinkProfile:
    """`[topology.server]`, `[topology.middleware]`, `[topology.load]`,
    `[topology.measure]`: the links (and CPU) of the hosts with that role, over the
    topology's defaults, under a host's own values."""

    link_mbit: float | None = setting(None, at_least(0))
    egress_mbit: float | None = setting(None, at_least(0))
    ingress_mbit: float | None = setting(None, at_least(0))
    egress_burst_kb: float | None = setting(None, positive)
    ingress_burst_kb: float | None = setting(None, positive)
    egress_queue_ms: float | None = setting(None, positive)
    ingress_queue_ms: float | None = setting(None, positive)
    delay_ms: float | None = setting(None, at_least(0))
    cpu_quota: float | None = setting(None, at_least(0))
    thread_quota: float | None = setting(None, at_least(0))


def _profile() -> Any:
    return field(default=LinkProfile(), metadata={"check": None, "section": LinkProfile})


@dataclass(frozen=True)
class Topology:
    """Where the processes run (docs/topologies.md)."""

    kind: TopologyKind = setting(TopologyKind.LOCAL)
    #: Every host's link: rate in Mbit/s of both directions; 0: unshaped.
    link_mbit: float = setting(0.0, at_least(0))
    #: What every host sends (egress) and receives (ingress), Mbit/s; None: link_mbit.
    #: The study's cloud capped egress only (docs/topologies.md).
    egress_mbit: float | None = setting(None, at_least(0))
    ingress_mbit: float | None = setting(None, at_least(0))
    #: Token bucket per direction in KiB; None: 2 ms at the rate or a 64 KiB GSO frame.
    egress_burst_kb: float | None = setting(None, positive)
    ingress_burst_kb: float | None = setting(None, positive)
    #: How long a frame may wait for tokens before it is dropped, per direction, in ms.
    egress_queue_ms: float = setting(50.0, positive)
    ingress_queue_ms: float = setting(50.0, positive)
    #: One-way delay added on every host's link, each direction, in milliseconds.
    delay_ms: float = setting(0.0, at_least(0))
    #: Cores per host through a cgroup CPU quota; 0: unlimited.
    cpu_quota: float = setting(0.0, at_least(0))
    #: Cores each serving thread of a server may use (memcached's workers, Redis's main
    #: thread), a cgroup per thread inside its host's: with cpu_quota = 6 and
    #: thread_quota = 1 a server host has 6 emulated cores; 0: no per-thread cap.
    thread_quota: float = setting(0.0, at_least(0))
    #: The CFS period of the quotas, ms: a host that spends its quota early waits out the
    #: rest of the period, so a long period shows as latency (docs/topologies.md).
    #: A scale model stretches it (x scale); the kernel's period is 1 .. 1000 ms.
    cpu_period_ms: float = setting(10.0, lambda v: None if 0.1 <= v <= 1000 else
                              f"must be within 0.1 .. 1000, got {v!r}")
    #: A scale model: every link rate and CPU quota divided by this, every delay and
    #: queue multiplied by it; the report multiplies throughput by it and divides
    #: latencies by it (docs/topologies.md).
    scale: float = setting(1.0, at_least(1))
    #: `ssh`: defaults for the hosts' SSH user and key (None: this user, the SSH agent
    #: and ~/.ssh keys), whether to copy cachelab-proxy and cachelab-load to the hosts,
    #: and whether a host key must already be known (~/.ssh/known_hosts).
    user: str | None = setting(None)
    key: str | None = setting(None)
    copy_binaries: bool = setting(False)
    strict_host_keys: bool = setting(True)
    #: Per-role link profiles.
    server: LinkProfile = _profile()
    middleware: LinkProfile = _profile()
    load: LinkProfile = _profile()
    measure: LinkProfile = _profile()
    #: Explicit hosts; none: every instance of every role gets a host of its own.
    host: tuple[Host, ...] = field(default=(), metadata={"check": None, "table": Host})


@dataclass(frozen=True)
class RunConfig:
    """Everything one run needs to know about what to start and what load to send."""

    servers: Servers
    middleware: Middleware
    load: Load
    workload: Workload
    topology: Topology = Topology()

    @property
    def targets(self) -> int:
        """What the load generators connect to: the middlewares, or else the servers (all
        of them together, one pool, with `load.shard`)."""
        if not self.middleware.count and self.load.shard:
            return 1
        return self.middleware.count or self.servers.processes

    @property
    def instances(self) -> int:
        return self.load.instances or self.targets

    @property
    def placement(self) -> Placement:
        """Each load instance's target and connections per thread (spec/placement.py)."""
        return place(self.instances, self.load.threads, self.load.clients, self.targets,
                     self.load.placement)

    @property
    def client_tls(self) -> bool:
        """Whether the load generators speak TLS: what their target serves."""
        return self.middleware.tls if self.middleware.count else self.servers.tls

    @property
    def tls(self) -> bool:
        """Whether any hop of the run is encrypted (the run needs certificates)."""
        return self.servers.tls or bool(self.middleware.count and self.middleware.tls)

    @property
    def measures(self) -> int:
        """Measuring clients: one with load.measure_rate, else none."""
        return 1 if self.load.measure_rate is not None else 0

    @property
    def total_clients(self) -> int:
        return self.instances * self.load.threads * self.load.clients
