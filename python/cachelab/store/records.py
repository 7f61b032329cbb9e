"""The records the store writes and the ones it reads back: every table's rows as typed,
frozen dataclasses, so no caller touches SQL or a row by column name.

Writes: `RunRecord` (one finished run, with everything measured in it). Reads: `Stored*`
records and the aggregates the report, export, compare and capacity sections need.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cachelab.analysis.capacity import Verdict
from cachelab.analysis.trust import Check
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen, proxy_stats
from cachelab.readers.cpu import Sample
from cachelab.readers.proxy_stats import Welford
from cachelab.readers.selfcheck import Interval
from cachelab.spec.order import Order


@dataclass(frozen=True)
class RunSummary:
    """A run's headline numbers: client side, over the steady window, all instances."""

    throughput: float
    response_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    hits: int
    misses: int
    errors: int
    #: Coefficient of variation of the per-second throughput; None below two seconds.
    cv_within: float | None
    #: Open loop: a load generator fell behind its schedule; None in closed loop.
    fell_behind: bool | None = None
    #: Open loop: the worst load generator's p99 send lag (how late it sent), in ms; None
    #: in closed loop.
    send_lag_p99_ms: float | None = None


@dataclass(frozen=True)
class RunRecord:
    """Everything measured in one run, as the runner collected it."""

    point: int
    repetition: int
    started_at: float
    ended_at: float
    summary: RunSummary
    host: HostInfo
    loads: tuple[loadgen.Report, ...]
    middlewares: tuple[proxy_stats.ProxyStats, ...]
    cpu: tuple[Sample, ...]
    artifacts: dict[str, bytes]
    #: Emulated hosts (empty on `local`): their plan, CPU samples and measured links.
    hosts: tuple[RunHost, ...] = ()
    host_cpu: tuple[HostCpuSample, ...] = ()
    links: tuple[LinkRecord, ...] = ()
    #: Capacity mode: the search's trials and its answer.
    capacity: CapacityRecord | None = None
    #: The measuring client's report (load.measure_rate), if any.
    measures: tuple[loadgen.Report, ...] = ()
    #: Where each client instance ran and its host's clock offset: the load instances in
    #: order, then the measuring client.
    placements: tuple[ClientPlacement, ...] = ()
    #: The common --start-at instant every instance was given (Unix ms).
    start_at_unix_ms: int | None = None
    #: The percentiles of each role's merged histograms with their intervals.
    intervals: tuple[Interval, ...] = ()
    #: The self-checks the run passed or failed (selfcheck.checks, and machine.check).
    checks: tuple[Check, ...] = ()
    #: The emulator's CPU samples (netns with delays).
    emulator_cpu: tuple[EmulatorCpuSample, ...] = ()
    #: What each encrypted hop negotiated (none without TLS).
    tls: tuple[TlsSession, ...] = ()
    #: The CPU seconds of the run's processes, where measured.
    process_cpu: tuple[ProcessCpu, ...] = ()


#: The hops of a run, as `TlsSession.hop` names them.
HOPS = ("load->server", "load->middleware", "middleware->server")


@dataclass(frozen=True)
class TlsSession:
    """What one encrypted hop of a run negotiated (a `run_tls` row)."""

    #: One of HOPS.
    hop: str
    #: The load generator instance (load->...), or the server (middleware->server).
    instance: int
    #: As the reporting side names them: cachelab-load (rustls) says `TLSv1_3` and
    #: `TLS13_AES_256_GCM_SHA384`, Python's ssl `TLSv1.3` and `TLS_AES_256_GCM_SHA384`.
    version: str
    cipher: str
    #: Who saw it: "cachelab-load" (its first connection's handshake) or "probe" (one
    #: connection the harness opened with Python's ssl before the load, offering the
    #: versions the middleware offers: the middleware does not report its own).
    source: str


@dataclass(frozen=True)
class ProcessCpu:
    """The CPU seconds one process of a run used (a `process_cpu` row). Servers and
    middlewares: read from the kernel (the process and its children) just before the load
    generators start and just after they end, so connection set-up and handshakes are
    inside; load generators: their own `client_cpu`, from their clock's start to their
    connections' end."""

    #: "server", "middleware" or "load".
    role: str
    instance: int
    user_s: float
    system_s: float
    #: Load generators: the requests they completed over that time; None for the others
    #: (what a request costs them is their CPU over every load generator's requests).
    requests: int | None

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s


@dataclass(frozen=True)
class ClientPlacement:
    """A client instance of a run: its role (`load` or `measure`), its number within the
    role, the host it ran on (None on `local`) and that host's clock offset, µs (how far
    its clock is ahead of the harness's; None when not measured)."""

    role: str
    instance: int
    host: str | None
    clock_offset_us: float | None


@dataclass(frozen=True)
class CapacityTrial:
    """One trial of a capacity search (a `capacity_trial` row)."""

    rate: float
    repetition: int
    latency_ms: float
    completed_rate: float
    send_lag_p99_ms: float
    fell_behind: bool
    #: The verdict of the trial's rate.
    verdict: Verdict
    trial_s: float


@dataclass(frozen=True)
class CapacityRecord:
    """A capacity search: every trial in the order run, and the answer."""

    trials: tuple[CapacityTrial, ...]
    capacity: float | None
    uncertainty: float | None
    latency_ms: float | None
    percentile: float
    target_ms: float
    reason: str
    limited_by_generator: bool


@dataclass(frozen=True)
class RunHost:
    host: str
    roles: str
    address: str
    #: The faster of the two directions (the column from before they were apart).
    link_mbit: float
    delay_ms: float
    cpu_quota: float
    cpus: str | None
    #: What the host sends and receives, Mbit/s (0: unshaped).
    egress_mbit: float | None = None
    ingress_mbit: float | None = None


@dataclass(frozen=True)
class EmulatorCpuSample:
    """The delay line's CPU over one interval, in percent of one core (from
    /proc/<pid>/stat), outside every host's cgroup."""

    t: float
    process: str
    usr: float
    sys: float


@dataclass(frozen=True)
class HostCpuSample:
    """One host's CPU over one interval, in percent of one core (200 = two cores busy)."""

    t: float
    host: str
    usr: float
    sys: float


@dataclass(frozen=True)
class LinkRecord:
    src: str
    dst: str
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_min_us: float
    #: 2 x (delay_src + delay_dst): what the configuration adds to the base round trip.
    expected_rtt_us: float
    mbit_forward: float | None
    mbit_reverse: float | None


@dataclass(frozen=True)
class StoredExperiment:
    """The directory's experiment as it was created (`experiment` row)."""

    id: int
    name: str
    description: str
    source: str
    digest: str
    #: The run settings as stored (JSON): repetitions, run_time_s, factors, order, ...
    settings: dict[str, Any]
    created_at: float

    @property
    def order(self) -> Order:
        """The run order; an experiment stored before orders existed ran in sweep order."""
        return Order(self.settings.get("order", Order.SWEEP))

    @property
    def order_seed(self) -> int | None:
        seed = self.settings.get("order_seed")
        return None if seed is None else int(seed)


@dataclass(frozen=True)
class StoredPoint:
    index: int
    label: str
    #: The factor values that define the point, by path.
    factors: dict[str, Any]
    #: The full run configuration as plain data (`spec.config_dict`).
    config: dict[str, Any]
    clients: int


@dataclass(frozen=True)
class StoredRun:
    """One finished run's headline numbers (`run` row) and the point it belongs to."""

    id: int
    point: int
    repetition: int
    started_at: float
    ended_at: float
    throughput: float
    response_ms: float
    p50_ms: float
    p90_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    hits: int
    misses: int
    errors: int
    cv_within: float | None
    #: Host metadata and versions, as `hostinfo.collect` gave them.
    host: HostInfo
    fell_behind: bool | None
    send_lag_p99_ms: float | None


#: A middleware window: (run id, middleware, window).
WindowKey = tuple[int, int, int]


@dataclass(frozen=True)
class MiddlewareOp:
    """One operation type in one middleware window (`mw_op` row): its requests, the
    Welford triple of each timed stage (µs), and its response-time HDR histogram."""

    op: str
    count: int
    stages: dict[str, Welford]
    rt_hdr: str


@dataclass(frozen=True)
class MiddlewareRate:
    """One middleware in one run, summed over the chosen windows."""

    run_id: int
    middleware: int
    arrivals: int
    seconds: float
    #: Requests completed: sum of throughput x window seconds.
    completed: float


@dataclass(frozen=True)
class MiddlewareQueue:
    """The queue length one window's workers found (a Welford triple)."""

    run_id: int
    middleware: int
    queue_len: Welford


@dataclass(frozen=True)
class ServerService:
    """One server's service time (µs) in one window and operation type, as the middleware
    measured it."""

    server: int
    service: Welford


@dataclass(frozen=True)
class ClientOpTotals:
    """One client operation type in one run, over all load generator instances."""

    run_id: int
    op: str
    ops: int
    #: Sum of the instances' ops/s.
    rate: float
    #: Sum of mean latency (ms) x ops: the requests' total response time.
    weighted_ms: float


@dataclass(frozen=True)
class RunStart:
    """When a run started, and its throughput (the report's timeline)."""

    point: int
    label: str
    repetition: int
    started_at: float
    throughput: float


@dataclass(frozen=True)
class StoredCapacity:
    """A capacity run's search, with the point and repetition it belongs to."""

    point: int
    label: str
    repetition: int
    search: CapacityRecord


@dataclass(frozen=True)
class LateRun:
    """A run whose load generator's p99 send lag is a visible part of its p99 latency."""

    point: int
    label: str
    repetition: int
    send_lag_p99_ms: float
    p99_ms: float


@dataclass(frozen=True)
class Table:
    """Rows under named columns: a raw table as exported, or one of the report's."""

    name: str
    columns: tuple[str, ...]
    rows: list[tuple[Any, ...]]


@dataclass(frozen=True)
class StoredInterval:
    """A percentile with its order-statistic interval (`run_percentile` or
    `point_percentile` row), ms."""

    role: str
    name: str
    quantile: float
    estimate_ms: float
    low_ms: float
    high_ms: float
    confidence: float
    samples: int


@dataclass(frozen=True)
class RunCheck:
    """A self-check of one run (`run_check` row), with the run it belongs to."""

    point: int
    label: str
    repetition: int
    name: str
    passed: bool
    statistic: float | None
    p_value: float | None
    reason: str


@dataclass(frozen=True)
class ClientTiming:
    """One figure of the load generators' `timing` at one point and role, averaged over
    its runs' instances: the clock it uses and its mean p50 and p99 (ms)."""

    point: int
    role: str
    figure: str
    clock: str
    p50_ms: float
    p99_ms: float
    instances: int


@dataclass(frozen=True)
class ClientClock:
    """What a point's clients measured with: the clock ending the summary's latencies,
    whether the kernel stamped every connection, and the busiest load thread's CPU."""

    point: int
    role: str
    latency_clock: str
    kernel: bool
    fallback: str | None
    busiest_cpu_share: float | None
