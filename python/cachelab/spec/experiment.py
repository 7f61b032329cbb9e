"""Experiment files (TOML) parsed into frozen dataclasses; every mistake names its field.

The file describes one run configuration (sections `servers`, `middleware`, `load`,
`workload`) and a sweep over it (`[sweep.factors]`: the cross product of the levels of
each factor, and/or `[[sweep.points]]`: an explicit list of partial configurations, each
crossed with the factors); a file without a sweep is one point, the configuration itself.
docs/experiments.md is the reference for every field.

Parsing is two steps: the document's fields are checked against the dataclasses below
(unknown key, wrong type, out of range), then each sweep point is the base configuration
with the point's values written over it, checked the same way plus the rules that tie
fields together (`_check_run`).

Why dataclasses and this small checker (`_build`, `_coerce`) rather than pydantic: the
messages are the product here, one line a user acts on, naming the field path and what
was given (`servers.kind: must be one of memcached, redis, got 'mongodb'`, `colour:
unknown field (expected one of ...)`). pydantic v2 names the path too, but its messages
("Input should be a valid integer, unable to parse string as an integer") say neither what
was given nor what is allowed without a translation layer per error type, and its lax mode
would accept what this file refuses (`true` for 1, "2" for 2) unless every model is made
strict; the sweep's per-level and per-point checks and the rules between fields stay
hand-written either way. So pydantic would add a dependency and about as much code for
vaguer errors.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import hashlib
import math
import os
import tomllib
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from cachelab.errors import UserError
from cachelab.spec import cores
from cachelab.spec import presets as presets_mod
from cachelab.spec import study as study_mod
from cachelab.spec import sweep as sweep_mod
from cachelab.spec.order import Order
from cachelab.spec.placement import Placement, PlacementPolicy, place
from cachelab.spec.warmup import Warmup

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


def _at_least(low: float) -> Check:
    return lambda v: None if v is None or v >= low else f"must be >= {low:g}, got {v!r}"


def _positive(v: Any) -> str | None:
    return None if v is None or v > 0 else f"must be > 0, got {v!r}"


def _ratio(v: Any) -> str | None:
    parts = str(v).split(":")
    if len(parts) == 2 and all(p.isdigit() for p in parts) and any(int(p) for p in parts):
        return None
    return f'expected "S:G" with integers, not both 0 (e.g. "1:10"), got {v!r}'


def _pattern(v: Any) -> str | None:
    if v in KEY_PATTERNS or v in KEY_PATTERNS.values():
        return None
    return f"must be one of {', '.join(KEY_PATTERNS)} (or R, G, Z, S, P), got {v!r}"


def _cpus(v: tuple[int, ...]) -> str | None:
    return next((f"CPU numbers must be >= 0, got {c}" for c in v if c < 0), None)


def _f(default: Any, check: Check | None = None) -> Any:
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class Servers:
    kind: ServerKind = _f(ServerKind.MEMCACHED)
    #: Server instances; without a middleware each load generator instance uses one.
    count: int = _f(1, _at_least(1))
    #: memcached `-t`; Redis `--io-threads`.
    threads: int = _f(1, _at_least(1))
    memory_mb: int = _f(1024, _at_least(1))
    #: Server i is pinned to cpus[i % len(cpus)]; empty: not pinned.
    cpus: tuple[int, ...] = _f((), _cpus)
    #: Server processes per server host (`count` hosts x `instances` each; on `local`
    #: simply count x instances processes).
    instances: int = _f(1, _at_least(1))
    #: "process": server i on cpus[i mod len] (as `cpus` says); "thread": each server
    #: worker thread on its own CPU, round-robin over `cpus` (all CPUs if empty);
    #: "none": not pinned, whatever `cpus` says.
    pinning: Pinning = _f(Pinning.PROCESS)
    #: memcached `-R`: requests served per event before the worker yields (None: 20).
    group_size: int | None = _f(None, _at_least(1))
    #: Arguments appended to the server's command line as written (recorded).
    extra_args: tuple[str, ...] = _f(())
    #: Redis only: "off", "rdb" (snapshots, Redis's default schedule), "aof" (append-only
    #: file, fsync every second).
    redis_persistence: Persistence = _f(Persistence.OFF)
    #: Serve TLS with the experiment's throw-away certificates (memcached `-Z`, Redis
    #: `--tls-port` and no plain port); the load generators and middlewares speak TLS to
    #: them and verify them (docs/tls.md, *In the harness*).
    tls: bool = _f(False)
    #: Listen on a Unix socket instead of TCP (memcached `-s`, Redis `--unixsocket`);
    #: only where the servers' clients share their host (topology.kind = "local").
    unix_socket: bool = _f(False)

    @property
    def processes(self) -> int:
        return self.count * self.instances


@dataclass(frozen=True)
class Middleware:
    #: 0: the load generators talk to the servers directly.
    count: int = _f(1, _at_least(0))
    workers: int = _f(16, _at_least(1))
    sharded: bool = _f(False)
    #: `--pipeline`: requests a worker takes at once and sends together (1: the
    #: spec's one-request-per-worker model, which the queueing models assume).
    pipeline: int = _f(1, _at_least(1))
    #: The proxy's runtime threads; None: its default (one per CPU).
    threads: int | None = _f(None, _at_least(1))
    #: `--busy-poll-us`: spin this long after each read instead of sleeping (0: off).
    busy_poll_us: int = _f(0, _at_least(0))
    cpus: tuple[int, ...] = _f((), _cpus)
    #: Serve TLS to the load generators (`--tls-cert`); TLS to the servers follows
    #: servers.tls.
    tls: bool = _f(False)
    #: Listen on a Unix socket (`--unix-socket`) instead of TCP (topology.kind = "local").
    unix_socket: bool = _f(False)


@dataclass(frozen=True)
class Load:
    #: Load generator processes; None: one per target (middleware, or server without one).
    instances: int | None = _f(None, _at_least(1))
    threads: int = _f(1, _at_least(1))
    #: Connections per thread; the clients are instances x threads x clients.
    clients: int = _f(1, _at_least(1))
    mode: LoadMode = _f(LoadMode.CLOSED)
    #: Open loop: offered requests per second over all instances.
    rate: float | None = _f(None, _positive)
    pipeline: int = _f(1, _at_least(1))
    cpus: tuple[int, ...] = _f((), _cpus)
    #: memcached's "text" or "binary" protocol (binary: servers directly, no middleware).
    protocol: WireProtocol = _f(WireProtocol.TEXT)
    #: cachelab-load's --busy-poll-us: spin before due sends and while replies are awaited
    #: (sends on time, replies timed when they land), at a CPU cost.
    busy_poll_us: int = _f(0, _at_least(0))
    #: How instances and their connections spread over the targets (spec/placement.py):
    #: "even" keeps every target's share of the clients equal where instance i mod T
    #: would not; "round-robin" gives every instance `clients` per thread.
    placement: PlacementPolicy = _f(PlacementPolicy.EVEN)
    #: The measuring client (mutilate's -Q/-C, Lancet's latency agent): one more instance,
    #: one connection in open loop at this rate (requests/s), on a host of its own; the
    #: report shows its latencies as the trusted ones. None: no measuring client.
    measure_rate: float | None = _f(None, _positive)
    #: Speak TLS to the target: None follows it (middleware.tls, or servers.tls without a
    #: middleware); true or false must agree with it.
    tls: bool | None = _f(None)
    #: cachelab-load's --timestamps: "kernel" (latency ends at the kernel's receipt of the
    #: reply where the kernel stamps it) or "user" (at the program's read, as over TLS and
    #: Unix sockets, where the kernel cannot stamp requests).
    timestamps: Timestamps = _f(Timestamps.KERNEL)
    #: Without a middleware: every instance shards over all the servers as twemproxy
    #: would (cachelab-load --shard, ketama over fnv1a_64, the servers named as the
    #: middleware names them), the "direct" baseline of a pool; false: each instance
    #: talks to one server.
    shard: bool = _f(False)
    #: `[load.warmup]`: load the cache until warm before measuring (spec/warmup.py).
    warmup: Warmup = field(default=Warmup(), metadata={"check": None, "section": Warmup})


@dataclass(frozen=True)
class Workload:
    ratio: str = _f("1:10", _ratio)
    #: Keys per GET; above 1 every GET is a multi-GET.
    multiget_keys: int = _f(0, _at_least(0))
    data_size: int = _f(4096, _at_least(1))
    key_maximum: int = _f(10000, _at_least(1))
    key_pattern: str = _f("uniform", _pattern)
    key_stddev: float | None = _f(None, _positive)
    key_median: float | None = _f(None, _at_least(0))
    zipf_exponent: float = _f(1.0, _positive)
    seed: int = _f(5381, _at_least(0))
    #: cachelab-load's --workload preset (spec/presets.py); the fields above override it.
    preset: str | None = _f(None, presets_mod.check)
    #: Write every key before the run (false: the servers start empty, as a cold cache).
    populate: bool = _f(True)
    #: cachelab-load's --trace (replay instead of generated requests) and --trace-speed.
    trace: str | None = _f(None)
    trace_speed: float = _f(1.0, _at_least(0))

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

    name: str = _f("")
    #: What runs here; instances of a role are placed round-robin over its hosts.
    roles: tuple[str, ...] = _f(ROLES, _roles)
    #: Both directions' rate in Mbit/s (0: unshaped); egress/ingress override it.
    link_mbit: float | None = _f(None, _at_least(0))
    egress_mbit: float | None = _f(None, _at_least(0))
    ingress_mbit: float | None = _f(None, _at_least(0))
    #: Token bucket per direction in KiB (None: 2 ms at the rate or a 64 KiB GSO frame).
    egress_burst_kb: float | None = _f(None, _positive)
    ingress_burst_kb: float | None = _f(None, _positive)
    #: How long a frame may wait for tokens before it is dropped, per direction, in ms.
    egress_queue_ms: float | None = _f(None, _positive)
    ingress_queue_ms: float | None = _f(None, _positive)
    delay_ms: float | None = _f(None, _at_least(0))
    #: Cores this host may use (a cgroup CPU quota); 0: unlimited.
    cpu_quota: float | None = _f(None, _at_least(0))
    #: Cores one serving thread of a server here may use (its own cgroup inside the
    #: host's: an emulated core, docs/topologies.md); 0: no cap of its own.
    thread_quota: float | None = _f(None, _at_least(0))
    #: A cpuset for the host's processes, e.g. "1" or "0-1"; None: every CPU.
    cpus: str | None = _f(None, _cpuset)
    #: `ssh`: the address to reach the host at (and its processes listen on), the SSH
    #: user and private key (default: the topology's), and the SSH port.
    address: str | None = _f(None)
    user: str | None = _f(None)
    key: str | None = _f(None)
    ssh_port: int = _f(22, _at_least(1))


@dataclass(frozen=True)
class LinkProfile:
    """`[topology.server]`, `[topology.middleware]`, `[topology.load]`,
    `[topology.measure]`: the links (and CPU) of the hosts with that role, over the
    topology's defaults, under a host's own values."""

    link_mbit: float | None = _f(None, _at_least(0))
    egress_mbit: float | None = _f(None, _at_least(0))
    ingress_mbit: float | None = _f(None, _at_least(0))
    egress_burst_kb: float | None = _f(None, _positive)
    ingress_burst_kb: float | None = _f(None, _positive)
    egress_queue_ms: float | None = _f(None, _positive)
    ingress_queue_ms: float | None = _f(None, _positive)
    delay_ms: float | None = _f(None, _at_least(0))
    cpu_quota: float | None = _f(None, _at_least(0))
    thread_quota: float | None = _f(None, _at_least(0))


def _profile() -> Any:
    return field(default=LinkProfile(), metadata={"check": None, "section": LinkProfile})


@dataclass(frozen=True)
class Topology:
    """Where the processes run (docs/topologies.md)."""

    kind: TopologyKind = _f(TopologyKind.LOCAL)
    #: Every host's link: rate in Mbit/s of both directions; 0: unshaped.
    link_mbit: float = _f(0.0, _at_least(0))
    #: What every host sends (egress) and receives (ingress), Mbit/s; None: link_mbit.
    #: The study's cloud capped egress only (docs/topologies.md).
    egress_mbit: float | None = _f(None, _at_least(0))
    ingress_mbit: float | None = _f(None, _at_least(0))
    #: Token bucket per direction in KiB; None: 2 ms at the rate or a 64 KiB GSO frame.
    egress_burst_kb: float | None = _f(None, _positive)
    ingress_burst_kb: float | None = _f(None, _positive)
    #: How long a frame may wait for tokens before it is dropped, per direction, in ms.
    egress_queue_ms: float = _f(50.0, _positive)
    ingress_queue_ms: float = _f(50.0, _positive)
    #: One-way delay added on every host's link, each direction, in milliseconds.
    delay_ms: float = _f(0.0, _at_least(0))
    #: Cores per host through a cgroup CPU quota; 0: unlimited.
    cpu_quota: float = _f(0.0, _at_least(0))
    #: Cores each serving thread of a server may use (memcached's workers, Redis's main
    #: thread), a cgroup per thread inside its host's: with cpu_quota = 6 and
    #: thread_quota = 1 a server host has 6 emulated cores; 0: no per-thread cap.
    thread_quota: float = _f(0.0, _at_least(0))
    #: The CFS period of the quotas, ms: a host that spends its quota early waits out the
    #: rest of the period, so a long period shows as latency (docs/topologies.md).
    #: A scale model stretches it (x scale); the kernel's period is 1 .. 1000 ms.
    cpu_period_ms: float = _f(10.0, lambda v: None if 0.1 <= v <= 1000 else
                              f"must be within 0.1 .. 1000, got {v!r}")
    #: A scale model: every link rate and CPU quota divided by this, every delay and
    #: queue multiplied by it; the report multiplies throughput by it and divides
    #: latencies by it (docs/topologies.md).
    scale: float = _f(1.0, _at_least(1))
    #: `ssh`: defaults for the hosts' SSH user and key (None: this user, the SSH agent
    #: and ~/.ssh keys), whether to copy cachelab-proxy and cachelab-load to the hosts,
    #: and whether a host key must already be known (~/.ssh/known_hosts).
    user: str | None = _f(None)
    key: str | None = _f(None)
    copy_binaries: bool = _f(False)
    strict_host_keys: bool = _f(True)
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


@dataclass(frozen=True)
class StopWhen:
    """`[validation.stop_when]`: what must hold before a point needs no more runs."""

    #: The p99's order-statistic interval (95%, over the merged histograms of the point's
    #: steady runs) at most this wide, in ms.
    p99_width_ms: float | None = _f(None, _positive)


@dataclass(frozen=True)
class Validation:
    #: Largest coefficient of variation of throughput accepted, as a fraction.
    cv_threshold: float = _f(0.05, _positive)
    #: Bound on the runs of one point; None: repetitions + 2.
    max_repetitions: int | None = _f(None, _at_least(1))
    #: Extra runs a point may get, beyond max_repetitions, to replace unsteady runs until it
    #: has `repetitions` steady ones (so one bad run does not shrink a factorial design);
    #: None: as many as `repetitions`; 0: none.
    replace_unsteady: int | None = _f(None, _at_least(0))
    #: Repeat a point until these hold too (bounded by max_repetitions), as Lancet does.
    stop_when: StopWhen = field(default=StopWhen(), metadata={"check": None,
                                                               "section": StopWhen})


@dataclass(frozen=True)
class Capacity:
    """The capacity search of `load.mode = "capacity"` points and `cachelab capacity`
    (analysis/capacity.py)."""

    #: The latency target in ms (None: the experiment's qos_target_ms).
    target_ms: float | None = _f(None, _positive)
    #: The latency percentile held to the target.
    percentile: float = _f(99.0, lambda v: None if 0 < v < 100 else
                           f"must be between 0 and 100 (exclusive), got {v!r}")
    #: Seconds of measured load per trial (longer when the percentile needs more samples).
    trial_s: float = _f(3.0, _positive)
    trial_warmup_s: float = _f(0.5, _at_least(0))
    #: Trials per rate; the median decides.
    trial_repetitions: int = _f(3, _at_least(1))
    start_rate: float = _f(1000.0, _positive)
    max_rate: float = _f(2_000_000.0, _positive)
    growth: float = _f(2.0, lambda v: None if v > 1 else f"must be > 1, got {v!r}")
    #: The search ends when the bracket is this narrow (a share of the capacity).
    tolerance: float = _f(0.05, _positive)


@dataclass(frozen=True)
class Point:
    """One point of the sweep: the factor values that define it, and its configuration."""

    index: int
    factors: tuple[tuple[str, object], ...]
    config: RunConfig

    @property
    def label(self) -> str:
        return ", ".join(f"{path}={_show(v)}" for path, v in self.factors) or "base"


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    topology: str
    repetitions: int
    run_time_s: float
    warmup_s: float
    cooldown_s: float
    stats_window_s: float
    qos_target_ms: float
    validation: Validation
    #: The factor on the report's x axis (a path such as `load.clients`), or None to choose.
    report_x: str | None
    points: tuple[Point, ...]
    #: The file as written (stored with the results) and its hash (checked by --resume).
    source: str
    #: The order of the runs (order.py) and its seed (None: drawn when the experiment is
    #: first stored, then kept).
    order: Order = Order.RANDOMIZED
    order_seed: int | None = None
    capacity: Capacity = Capacity()
    #: The original study's values this experiment re-creates (`[study]`, spec/study.py).
    study: study_mod.Study | None = None

    @property
    def max_repetitions(self) -> int:
        return max(self.validation.max_repetitions or self.repetitions + 2, self.repetitions)

    @property
    def max_replacements(self) -> int:
        """validation.replace_unsteady, its default (the repetitions) filled in."""
        extra = self.validation.replace_unsteady
        return self.repetitions if extra is None else extra

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def factor_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for pt in self.points for p, _ in pt.factors))


_SECTIONS: dict[str, type] = {"servers": Servers, "middleware": Middleware, "load": Load,
                              "workload": Workload, "topology": Topology}
_TOP = {"name", "description", "topology", "repetitions", "run_time_s", "warmup_s",
        "order", "order_seed", "capacity",
        "cooldown_s", "stats_window_s", "qos_target_ms", "validation", "report", "sweep",
        "study", *_SECTIONS}


def load(path: Path) -> Experiment:
    """Reads an experiment file; every mistake is a UserError `FILE: field: problem`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    try:
        return parse(text)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None


def parse(text: str) -> Experiment:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"invalid TOML: {exc}") from None
    for key in doc:
        if key not in _TOP:
            raise UserError(f"{key}: unknown field (expected one of {', '.join(sorted(_TOP))})")
    name = _get(doc, "name", str, None)
    if not name or not name.strip():
        raise UserError("name: missing (every experiment needs a name)")
    if isinstance(doc.get("topology"), str):  # `topology = "netns"`: the kind alone
        doc["topology"] = {"kind": doc["topology"]}
    run_time = _get(doc, "run_time_s", float, 60.0)
    warmup = _get(doc, "warmup_s", float, 10.0)
    cooldown = _get(doc, "cooldown_s", float, 5.0)
    for key, value in (("run_time_s", run_time), ("warmup_s", warmup),
                       ("cooldown_s", cooldown)):
        if value < 0 or (key == "run_time_s" and value <= 0):
            raise UserError(f"{key}: must be {'> 0' if key == 'run_time_s' else '>= 0'}, "
                            f"got {value!r}")
    if warmup + cooldown >= run_time:
        raise UserError(f"warmup_s: warm-up ({warmup:g} s) plus cool-down ({cooldown:g} s) "
                        f"must be shorter than run_time_s ({run_time:g} s)")
    repetitions = _get(doc, "repetitions", int, 3)
    if repetitions < 1:
        raise UserError(f"repetitions: must be >= 1, got {repetitions}")
    window = _get(doc, "stats_window_s", float, 1.0)
    qos = _get(doc, "qos_target_ms", float, 1.0)
    for key, value in (("stats_window_s", window), ("qos_target_ms", qos)):
        if value <= 0:
            raise UserError(f"{key}: must be > 0, got {value!r}")
    validation = _build(Validation, _table(doc, "validation"), "validation")
    report = _table(doc, "report")
    _no_unknown("report.", report, ("x",))
    report_x = _get(report, "x", str, None, "report.")
    raw = {s: _table(doc, s) for s in _SECTIONS}
    _fields(raw, "")
    sweep_mod.check_size(_table(doc, "sweep"), repetitions, run_time)
    points = _expand(raw, _table(doc, "sweep"))
    if report_x is not None and report_x not in _paths():
        raise UserError(f"report.x: {report_x!r} is not a field (e.g. \"load.clients\")")
    run_order = _get(doc, "order", Order, Order.RANDOMIZED)
    order_seed = _get(doc, "order_seed", int, None)
    capacity = _build(Capacity, _table(doc, "capacity"), "capacity")
    topology = ", ".join(dict.fromkeys(p.config.topology.kind for p in points))
    factor_paths = tuple(dict.fromkeys(p for pt in points for p, _ in pt.factors))
    study = (study_mod.parse(doc["study"], factor_paths, _paths()) if "study" in doc
             else None)
    return Experiment(name.strip(), _get(doc, "description", str, ""), topology, repetitions,
                      run_time, warmup, cooldown, window, qos, validation, report_x,
                      points, text, run_order, order_seed, capacity, study)


def _expand(raw: dict[str, dict], sweep: dict) -> tuple[Point, ...]:
    """The points of the sweep: each explicit point crossed with every factor combination;
    without either, the base configuration alone is the one point."""
    _no_unknown("sweep.", sweep, ("factors", "points", "max_points"))
    factors = _flatten(_table(sweep, "factors", "sweep."))
    explicit = sweep.get("points", [])
    if not isinstance(explicit, list):
        raise UserError("sweep.points: must be an array of tables ([[sweep.points]])")
    levels: list[tuple[str, list]] = []
    for path, values in factors.items():
        where = f"sweep.factors.{path}"
        if not isinstance(values, list):
            raise UserError(f"{where}: must be a list of levels, got {values!r}")
        if not values:
            raise UserError(f"{where}: empty list of levels")
        for i, value in enumerate(values):
            _fields(_override(raw, {path: value}, "sweep.factors"), f"{where}[{i}]: ")
        levels.append((path, values))
    overrides = []
    for i, table in enumerate(explicit, start=1):
        if not isinstance(table, dict):
            raise UserError(f"sweep.points[{i}]: must be a table")
        flat = _flatten(table)
        if not flat:
            raise UserError(f"sweep.points[{i}]: empty point (give at least one field)")
        clash = next((p for p in flat if p in factors), None)
        if clash:
            raise UserError(f"sweep.points[{i}].{clash}: also a factor in [sweep.factors]")
        _fields(_override(raw, flat, f"sweep.points[{i}]"), f"sweep.points[{i}]: ")
        overrides.append(flat)
    points = []
    for index, values in enumerate(sweep_mod.expand(overrides, levels)):
        label = ", ".join(f"{p}={_show(v)}" for p, v in values.items())
        config = _config(_override(raw, values, ""), f"sweep point {index + 1} ({label}): ")
        points.append(Point(index, tuple((p, _plain(v)) for p, v in values.items()), config))
    return tuple(points)


def _override(raw: dict[str, dict], values: dict[str, object], where: str) -> dict[str, dict]:
    merged = copy.deepcopy(raw)
    for path, value in values.items():
        section, _, name = path.partition(".")
        if path not in _paths():
            raise UserError(f"{where}.{path}: unknown field (a factor is a field such as "
                            "load.clients or middleware.workers)")
        *inner, leaf = name.split(".")
        table = merged[section]
        for key in inner:
            table = table.setdefault(key, {})
        table[leaf] = value
    return merged


def _fields(raw: dict[str, dict], prefix: str) -> RunConfig:
    """The configuration with every field checked on its own (type, range)."""
    try:
        return RunConfig(**{s: _build(cls, raw[s], s) for s, cls in _SECTIONS.items()})
    except UserError as exc:
        raise UserError(f"{prefix}{exc}") from None


def _config(raw: dict[str, dict], prefix: str) -> RunConfig:
    """The configuration with its fields and the rules between them checked."""
    config = _fields(raw, prefix)
    try:
        _check_run(config)
    except UserError as exc:
        raise UserError(f"{prefix}{exc}") from None
    return config


def _check_run(c: RunConfig) -> None:
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
#: Emulated hosts one topology may have: their addresses are .2 upwards in one /24
#: (topology.address; the controller is .1).
MAX_HOSTS = 250
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
    for where, quota in quotas:
        if quota and quota * t.cpu_period_ms < MIN_QUOTA_MS:
            raise UserError(f"{where}: {quota:g} core over a {t.cpu_period_ms:g} ms period is "
                            f"{quota * t.cpu_period_ms:g} ms per period, below the kernel's "
                            f"minimum of {MIN_QUOTA_MS:g} ms (raise topology.cpu_period_ms to "
                            f"at least {MIN_QUOTA_MS / quota:g})")


def _build(cls: type, table: dict, section: str) -> Any:
    """One dataclass from its TOML table: unknown keys, types and ranges checked."""
    hints = typing.get_type_hints(cls)
    known = tuple(f.name for f in dataclasses.fields(cls))
    _no_unknown(f"{section}.", table, known)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in table:
            continue
        where = f"{section}.{f.name}"
        if "section" in f.metadata:  # a table of its own ([section.name])
            if not isinstance(table[f.name], dict):
                raise UserError(f"{where}: must be a table ([{where}]), got "
                                f"{_kind(table[f.name])} {table[f.name]!r}")
            values[f.name] = _build(f.metadata["section"], table[f.name], where)
            continue
        if "table" in f.metadata:  # an array of tables ([[section.name]])
            items = table[f.name]
            if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
                raise UserError(f"{where}: must be an array of tables ([[{where}]])")
            values[f.name] = tuple(_build(f.metadata["table"], t, f"{where}[{i}]")
                                   for i, t in enumerate(items, start=1))
            continue
        value = _coerce(table[f.name], hints[f.name], where)
        problem = f.metadata.get("check") and f.metadata["check"](value)
        if problem:
            raise UserError(f"{where}: {problem}")
        values[f.name] = value
    return cls(**values)


def _coerce(value: Any, hint: Any, where: str) -> Any:
    """Checks a TOML value against a field's annotation (int, float, str, bool, one of a
    StrEnum's words, optional, tuple of ints); ints are accepted for floats."""
    args = typing.get_args(hint)
    if isinstance(hint, enum.EnumType) and issubclass(hint, StrEnum):
        if isinstance(value, str) and value in hint._value2member_map_:
            return hint(value)
        if isinstance(value, str):
            raise UserError(f"{where}: must be one of {', '.join(hint)}, got {value!r}")
        raise UserError(f"{where}: expected a string, got {_kind(value)} {value!r}")
    if isinstance(hint, types.UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return _coerce(value, inner, where)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise UserError(f"{where}: expected a list, got {_kind(value)}")
        return tuple(_coerce(v, args[0], where) for v in value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UserError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and isinstance(value, hint):
        return value
    expected = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    raise UserError(f"{where}: expected {expected[hint]}, got {_kind(value)} {value!r}")


def _get(table: dict, key: str, kind: type, default: Any, prefix: str = "") -> Any:
    if key not in table:
        return default
    return _coerce(table[key], kind, prefix + key)


def _table(doc: dict, key: str, prefix: str = "") -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"{prefix}{key}: must be a table ([{prefix}{key}]), got {_kind(value)}")
    return value


def _flatten(table: dict, prefix: str = "") -> dict[str, object]:
    """{"load": {"clients": [1, 2]}} and {"load.clients": [1, 2]} both give the path
    "load.clients" (TOML's dotted keys make nested tables; quoted keys do not)."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


def field_paths() -> set[str]:
    """Every configuration field by its path (what a sweep may vary)."""
    return _paths()


def _paths() -> set[str]:
    """The fields a sweep may vary (every field but the list of hosts; a field of a
    section inside a section by its full path, `topology.server.egress_mbit`)."""
    def of(prefix: str, cls: type) -> set[str]:
        found = set()
        for f in dataclasses.fields(cls):
            if "section" in f.metadata:
                found |= of(f"{prefix}{f.name}.", f.metadata["section"])
            elif "table" not in f.metadata:
                found.add(prefix + f.name)
        return found

    return {p for s, cls in _SECTIONS.items() for p in of(f"{s}.", cls)}


def _no_unknown(prefix: str, table: dict, known: tuple[str, ...]) -> None:
    for key in table:
        if key not in known:
            raise UserError(f"{prefix}{key}: unknown field (expected one of {', '.join(known)})")


def _kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def _plain(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _show(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def config_from_dict(d: dict) -> RunConfig:
    """The configuration back from `config_dict`'s plain data (as stored with a point);
    sections missing from an older database take their defaults."""
    def plain(table: dict) -> dict:
        return {k: [plain(x) if isinstance(x, dict) else x for x in v] if isinstance(v, list)
                else plain(v) if isinstance(v, dict) else v
                for k, v in table.items() if v is not None}

    tables = {s: plain(d.get(s, {})) for s in _SECTIONS}
    if "load" in d and "placement" not in d["load"]:
        tables["load"]["placement"] = "round-robin"  # stored before "even" was the default
    return RunConfig(**{s: _build(cls, tables[s], s) for s, cls in _SECTIONS.items()})


def config_dict(config: RunConfig) -> dict:
    """The configuration as plain data (for the database and the report)."""
    return dataclasses.asdict(config)
