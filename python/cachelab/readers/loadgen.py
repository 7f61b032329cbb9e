"""The load generator adapter: `cachelab-load` command lines from an experiment's
configuration, and its JSON report (schema `cachelab-load/1`, docs/load-generator.md) read
into plain data: the summary, the per-second series, the histograms, and where the
time went (`timing`: which clock ends each latency, and the client's own delays) and the
load threads' own CPU (`client_cpu`). Reports written before those fields existed read
with `timing` and `client_cpu` None.

Keys are `key-<n>` for n in [0, key_maximum]; the populate step writes every one of them
once, so a run's GETs hit (memcached's memory permitting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError
from cachelab.spec import presets
from cachelab.spec.experiment import (
    LoadMode,
    RunConfig,
    ServerKind,
    Timestamps,
    WireProtocol,
    Workload,
)

SCHEMA = "cachelab-load/1"
OPS = ("set", "get", "multiget", "total")
KEY_PREFIX = "key-"
LATENCY_FIELDS = ("avg", "stddev", "p50", "p90", "p99", "p999", "max")
#: The figures of `timing` (docs/load-generator.md, *Kernel timestamps*): wire = kernel
#: receive - kernel transmit; response = kernel receive - intended send; user latency =
#: read - intended send; send delay = kernel transmit - intended; read delay = read -
#: kernel receive.
TIMING_FIGURES = ("wire", "response", "user_latency", "send_delay", "read_delay")


@dataclass(frozen=True)
class Transport:
    """How a load generator reaches its target beyond host and port: a Unix socket to
    connect to instead (`-S`), and/or TLS verified against a CA (PEM) for the name the
    target's certificate has (`--tls --cacert --sni`)."""

    socket: Path | None = None
    #: With TLS, the CA that signed the target's certificate; None: plain.
    ca: Path | None = None
    name: str = ""
    #: `--shard`: every server of the pool (host:port or a socket's path), instead of one.
    shard: tuple[str, ...] = ()

    def argv(self, host: str, port: int) -> list[str]:
        if self.shard:
            argv = ["--shard", ",".join(self.shard)]
        elif self.socket is not None:
            argv = ["-S", str(self.socket)]
        else:
            argv = ["--server", host, "--port", str(port)]
        if self.ca is not None:
            argv += ["--tls", f"--cacert={self.ca}"] + ([f"--sni={self.name}"] if self.name
                                                        else [])
        return argv


PLAIN = Transport()


def protocol(config: RunConfig) -> str:
    if config.servers.kind == ServerKind.REDIS:
        return "redis"
    return "memcache_binary" if config.load.protocol == WireProtocol.BINARY else "memcache_text"


def _workload_args(config: RunConfig) -> list[str]:
    """The protocol, keys and sizes; with a preset, the preset and the fields the file
    changed from their defaults (spec/presets.py), which override it."""
    w = config.workload
    argv = ["-P", protocol(config)]
    argv += ["--workload", w.preset] if w.preset else []
    argv += ["--data-size", str(w.data_size)] if presets.given(w, "data_size") else []
    return [*argv, "--key-prefix", KEY_PREFIX, "--key-minimum", "0",
            "--key-maximum", str(w.key_maximum)]


def _mix_args(w: Workload) -> list[str]:
    """--ratio and --key-pattern, each unless a preset gives it."""
    pattern = w.pattern_letter
    argv = ["--ratio", w.ratio] if presets.given(w, "ratio") else []
    return argv + (["--key-pattern", f"{pattern}:{pattern}"]
                   if presets.given(w, "key_pattern") else [])


def populate_argv(config: RunConfig, host: str, port: int, json_out: Path,
                  transport: Transport = PLAIN, seed: int | None = None) -> list[str]:
    """Writes every key of the range once (sequentially, split over 4 connections), with
    `seed` if given (a key-size distribution sizes each key by the seed)."""
    argv = [*transport.argv(host, port), *_workload_args(config),
            "--threads", "1", "--clients", "4", "--populate", "--json-out-file", str(json_out)]
    return argv + (["--seed", str(seed)] if seed is not None else [])


def run_argv(config: RunConfig, host: str, port: int, *, test_time: float, warmup: float,
             cooldown: float, seed: int, json_out: Path,
             start_at_ms: int | None = None, transport: Transport = PLAIN,
             instance: int | None = None) -> list[str]:
    """Load generator instance `instance` of a run, with its connections per thread from
    the run's placement (spec/placement.py) and an open-loop rate split in proportion to
    them (evenly without `instance`). With `start_at_ms`, the instance starts its clock on
    that wall-clock instant (Unix ms), as every other instance of the run does."""
    w, load = config.workload, config.load
    placed = config.placement
    clients = load.clients if instance is None else placed.clients[instance]
    share = (1 / config.instances if instance is None
             else placed.instance_shares()[instance])
    argv = [*transport.argv(host, port), *_workload_args(config),
            "--threads", str(load.threads), "--clients", str(clients), *_mix_args(w),
            "--test-time", f"{test_time:g}", "--warmup", f"{warmup:g}",
            "--cooldown", f"{cooldown:g}", "--pipeline", str(load.pipeline),
            "--seed", str(seed), "--json-out-file", str(json_out)]
    argv += _key_args(config)
    if load.mode == LoadMode.OPEN:
        assert load.rate is not None
        argv += ["--rate", f"{load.rate * share:g}"]
    if load.busy_poll_us:
        argv += ["--busy-poll-us", str(load.busy_poll_us)]
    if load.timestamps != Timestamps.KERNEL:
        argv += ["--timestamps", load.timestamps]
    if start_at_ms is not None:
        argv += [f"--start-at={start_at_ms}"]
    return argv + _trace_args(w)


def _trace_args(w: Workload) -> list[str]:
    """Replay: the trace (a path relative to where cachelab runs) at its speed; the
    load generator then ignores the generated-workload options."""
    if w.trace is None:
        return []
    return ["--trace", str(Path(w.trace).resolve()), "--trace-speed", f"{w.trace_speed:g}"]


def measure_argv(config: RunConfig, host: str, port: int, *, rate: float, test_time: float,
                 warmup: float, cooldown: float, seed: int, json_out: Path,
                 start_at_ms: int | None = None, transport: Transport = PLAIN) -> list[str]:
    """The measuring client (mutilate's -Q/-C, Lancet's latency agent): one connection in
    open loop at a low `rate`, same workload as the load instances, so its latencies are
    not its own queueing."""
    w = config.workload
    argv = [*transport.argv(host, port), *_workload_args(config),
            "--threads", "1", "--clients", "1", *_mix_args(w), "--test-time", f"{test_time:g}",
            "--warmup", f"{warmup:g}", "--cooldown", f"{cooldown:g}",
            "--seed", str(seed), "--json-out-file", str(json_out), "--rate", f"{rate:g}"]
    argv += _key_args(config)
    if config.load.timestamps != Timestamps.KERNEL:
        argv += ["--timestamps", config.load.timestamps]
    if start_at_ms is not None:
        argv += [f"--start-at={start_at_ms}"]
    return argv


def _key_args(config: RunConfig) -> list[str]:
    w = config.workload
    argv = ["--multiget-keys", str(w.multiget_keys)] if w.multiget_keys else []
    if w.pattern_letter == "G":
        argv += [f"--key-stddev={w.key_stddev}"] if w.key_stddev is not None else []
        argv += [f"--key-median={w.key_median}"] if w.key_median is not None else []
    if w.pattern_letter == "Z" and presets.given(w, "zipf_exponent"):
        argv += ["--zipf-exponent", f"{w.zipf_exponent:g}"]
    return argv


@dataclass(frozen=True)
class OpSummary:
    ops: int
    ops_per_sec: float
    hits: int
    misses: int
    errors: int
    #: avg, stddev, p50, p90, p99, p999, max in milliseconds.
    latency_ms: dict[str, float]


@dataclass(frozen=True)
class SecondRow:
    second: int
    op: str
    ops: int
    hits: int
    misses: int
    errors: int
    latency_ms_avg: float
    latency_ms_max: float


@dataclass(frozen=True)
class TimingFigure:
    """One figure of `timing` over the summary window: where its timer starts and stops
    (`clock`, e.g. `kernel_tx->kernel_rx`; `mixed` when only some requests had the kernel's
    stamps) and its latency_ms fields."""

    clock: str
    latency_ms: dict[str, float]


@dataclass(frozen=True)
class Timing:
    """`timing`: which clock the summary's latencies end on, and where the time went."""

    timestamps: str
    kernel: bool
    fallback: str | None
    #: The summary's latency: `intended->kernel_rx`, `intended->user_read` or `mixed`.
    latency_clock: str
    requests: int
    transmit_stamped: int
    receipt_stamped: int
    hardware_wire: int
    #: The figures the report has (those without kernel stamps are left out).
    figures: dict[str, TimingFigure]


@dataclass(frozen=True)
class ClientCpu:
    """`client_cpu`: the load threads' own CPU (getrusage) over the run."""

    threads: int
    user_s: float
    system_s: float
    wall_s: float
    #: CPU over wall time, all threads; and the busiest thread's share.
    share: float
    busiest_thread_share: float
    saturated: bool


@dataclass(frozen=True)
class ConnectionSetup:
    """`connection_setup`: the connections opened over the run and, with TLS, the
    handshakes and what the first one agreed on (rustls's names, e.g. `TLSv1_3`,
    `TLS13_AES_256_GCM_SHA384`)."""

    connections: int
    handshakes: int
    handshake_failures: int
    tls_version: str | None
    cipher_suite: str | None


@dataclass(frozen=True)
class Report:
    """One instance's report; `summary` covers its steady window (warm-up and cool-down
    cut), `series` every second of the run."""

    started_unix_ms: int
    duration_s: float
    window_start_s: float
    window_end_s: float
    summary: dict[str, OpSummary]
    totals: dict[str, int]
    open_loop: dict | None
    series: list[SecondRow]
    #: Base64 HDR histograms per operation type (hdr.decode reads them).
    histograms: dict[str, str]
    configuration: dict
    timing: Timing | None = None
    client_cpu: ClientCpu | None = None
    #: With --start-at: how late the clock started after the instant, µs.
    start_late_us: int | None = None
    #: Open loop: a sample of the gaps between successive sends of each load thread in
    #: the window, ns (empty in closed loop and in reports before it existed).
    send_intervals_ns: tuple[int, ...] = ()
    #: None in reports from before the load generator reported it.
    connection_setup: ConnectionSetup | None = None

    def ops_per_second(self) -> dict[int, int]:
        """Requests completed in each second of the run, every operation type together."""
        out: dict[int, int] = {}
        for row in self.series:
            out[row.second] = out.get(row.second, 0) + row.ops
        return out


def parse(text: str, where: str = "load report") -> Report:
    """Reads a `cachelab-load/1` JSON report; a missing field is a UserError naming it."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(f"{where}: not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        found = doc.get("schema") if isinstance(doc, dict) else None
        raise UserError(f"{where}: schema {found!r} is not {SCHEMA!r}")
    try:
        run = doc["run"]
        summary = {op: OpSummary(s["ops"], s["ops_per_sec"], s["hits"], s["misses"],
                                 s["errors"], {k: s["latency_ms"][k] for k in LATENCY_FIELDS})
                   for op, s in doc["summary"].items()}
        series = [SecondRow(sec["second"], op, sec[op]["ops"], sec[op]["hits"],
                            sec[op]["misses"], sec[op]["errors"], sec[op]["latency_ms_avg"],
                            sec[op]["latency_ms_max"])
                  for sec in doc["series"] for op in OPS[:3]]
        return Report(run["started_unix_ms"], run["duration_s"], run["window_start_s"],
                      run["window_end_s"], summary, dict(doc["totals"]), doc["open_loop"],
                      series, {op: doc["histograms"][op] for op in OPS},
                      doc["configuration"], _timing(doc.get("timing")),
                      _client_cpu(doc.get("client_cpu")), run.get("start_late_us"),
                      tuple(doc.get("send_intervals_ns", ())),
                      _setup(doc.get("connection_setup")))
    except (KeyError, TypeError) as exc:
        raise UserError(f"{where}: missing or malformed field {exc}") from None


def _timing(t: dict | None) -> Timing | None:
    if t is None:
        return None
    clocks = t["clocks"]
    figures = {name: TimingFigure(clocks[name], {k: t[f"{name}_ms"][k] for k in LATENCY_FIELDS})
               for name in TIMING_FIGURES if t.get(f"{name}_ms") and clocks.get(name)}
    return Timing(t["timestamps"], t["kernel"], t["fallback"], clocks["latency"],
                  t["requests"], t["transmit_stamped"], t["receipt_stamped"],
                  t["hardware_wire"], figures)


def _client_cpu(c: dict | None) -> ClientCpu | None:
    if c is None:
        return None
    return ClientCpu(c["threads"], c["user_s"], c["system_s"], c["wall_s"], c["share"],
                     c["busiest_thread_share"], c["saturated"])


def _setup(c: dict | None) -> ConnectionSetup | None:
    if c is None:
        return None
    return ConnectionSetup(c["connections"], c["handshakes"], c["handshake_failures"],
                           c.get("tls_version"), c.get("cipher_suite"))


def load(path: Path) -> Report:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read the load report {path}: {exc.strerror}") from None
    return parse(text, str(path))
