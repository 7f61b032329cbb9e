"""Reading the middleware's stats file (JSON lines; fields in docs/stats-file.md, the
contract in crates/cachelab-proxy/schema/stats-file.schema.json). The Rust writer and this
reader are both tested against crates/cachelab-proxy/schema/stats-file.golden.jsonl.

Every line becomes a typed record whose fields are the schema's properties (held to the
schema by tests/test_proxy_stats_contract.py). A run that crashed may have left a torn
last line: it is ignored, and every complete window before it is kept.
"""

from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cachelab.errors import UserError

#: The stats-file schema versions this reader understands.
SUPPORTED_SCHEMAS = {1}


@dataclass(frozen=True)
class Welford:
    """Count, mean and M2 of Welford's algorithm, as the proxy writes them."""

    count: int
    mean: float
    m2: float

    @property
    def variance(self) -> float:
        """Sample variance M2 / (n - 1); NaN below two values."""
        return self.m2 / (self.count - 1) if self.count > 1 else math.nan

    @property
    def std(self) -> float:
        return math.sqrt(self.variance)

    def merge(self, other: Welford) -> Welford:
        """Combines two streams exactly (Chan et al.), like the proxy does."""
        if other.count == 0:
            return self
        if self.count == 0:
            return other
        n = self.count + other.count
        delta = other.mean - self.mean
        mean = self.mean + delta * other.count / n
        m2 = self.m2 + other.m2 + delta * delta * self.count * other.count / n
        return Welford(n, mean, m2)


@dataclass(frozen=True)
class Percentiles:
    """Response-time percentiles in microseconds (`percentiles` in the schema)."""

    p50: int
    p90: int
    p99: int
    p999: int
    max: int


@dataclass(frozen=True)
class OpStats:
    """One operation type's figures in a window or the summary (`op`)."""

    count: int
    hits: int
    misses: int
    errors: int
    #: Keys per request (multi-GETs ask for more than one).
    keys: Welford
    response_us: Welford
    decode_us: Welford
    queue_wait_us: Welford
    worker_service_us: Welford
    server_service_us: Welford
    worker_processing_us: Welford
    #: One per server, in the order of the start line's servers.
    server_service_us_by_server: tuple[Welford, ...]
    #: Element i counts responses in [100 i, 100 (i + 1)) µs, trimmed after the last
    #: non-empty bucket; `rt_overflow` counts the ones past the last bucket.
    rt_hist_100us: tuple[int, ...]
    rt_overflow: int
    rt_percentiles_us: Percentiles
    #: HdrHistogram V2-deflate, base64 (readers.hdr decodes it).
    rt_hdr: str


@dataclass(frozen=True)
class Pool:
    """A listener's pool, as the start line describes it (`pool`)."""

    name: str
    listen: str
    mode: str
    replicas: int
    hash: str
    distribution: str
    servers: tuple[str, ...]


@dataclass(frozen=True)
class Start:
    """The first line (`start`): what the proxy was started with."""

    schema: int
    version: str
    pid: int
    #: Unix time of the start, seconds.
    start: float
    listen: str
    workers: int
    servers: tuple[str, ...]
    sharded: bool
    window_s: float
    bucket_width_us: int
    pools: tuple[Pool, ...]
    #: Event loops, each with `workers` workers and its own queue (1 in older files).
    loops: int = 1


@dataclass(frozen=True)
class Window:
    """What every window line has (`worker_window`, `total_window`)."""

    window: int
    start: float
    end: float
    duration_s: float
    queue_len: Welford
    failovers: int
    #: By operation type: get, multiget, set, other (those seen in the window).
    ops: dict[str, OpStats]


@dataclass(frozen=True)
class WorkerWindow(Window):
    """One worker's window (`"scope": "worker"`)."""

    worker: int


@dataclass(frozen=True)
class TotalWindow(Window):
    """The workers' window merged, with the process's own figures (`"scope": "total"`)."""

    arrivals: int
    arrival_rate: float
    throughput: float
    #: The queue's length when the window closed.
    queue_len_now: int
    connections: int


@dataclass(frozen=True)
class Summary:
    """The end-of-run line (`summary`), written when the proxy exits cleanly."""

    windows: int
    end: float
    duration_s: float
    arrivals: int
    throughput: float
    bad_requests: int
    total_connections: int
    queue_len: Welford
    failovers: int
    ops: dict[str, OpStats]


@dataclass(frozen=True)
class ProxyStats:
    header: Start
    #: Merged ("total") window lines, in order.
    windows: list[TotalWindow]
    #: Per-worker window lines, in order.
    worker_windows: list[WorkerWindow]
    #: The end-of-run summary, or None if the proxy did not exit cleanly.
    summary: Summary | None


#: The record each line becomes, by its `type` (and a window's `scope`).
_LINES: dict[tuple[str, str | None], type] = {
    ("start", None): Start, ("window", "worker"): WorkerWindow,
    ("window", "total"): TotalWindow, ("summary", None): Summary}


def load(path: Path) -> ProxyStats:
    """The stats file's lines as records; a line that is not one the schema allows (a
    field missing or of another type) is a UserError naming the line and the field."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read the proxy stats file {path}: {exc.strerror}") from exc
    raw = text.splitlines()
    lines: list[tuple[int, dict]] = []
    for number, line in enumerate(raw, start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if number == len(raw):
                break  # a torn last line from a crash
            raise UserError(f"{path}:{number}: not a JSON object") from None
        if not isinstance(obj, dict):
            raise UserError(f"{path}:{number}: not a JSON object")
        lines.append((number, obj))
    if not lines or lines[0][1].get("type") != "start":
        raise UserError(f"{path}: does not start with a proxy stats header")
    if lines[0][1].get("schema") not in SUPPORTED_SCHEMAS:
        raise UserError(f"{path}: stats schema {lines[0][1].get('schema')} is not supported")
    records = []
    for number, obj in lines:
        kind = str(obj.get("type"))
        cls = _LINES.get((kind, obj.get("scope") if kind == "window" else None))
        if cls is None:
            raise UserError(f"{path}:{number}: not a stats line (type {obj.get('type')!r})")
        try:
            records.append(_record(cls, obj, kind))
        except _Mismatch as exc:
            raise UserError(f"{path}:{number}: {exc}") from None
    header = records[0]
    assert isinstance(header, Start)
    return ProxyStats(header, [r for r in records if isinstance(r, TotalWindow)],
                      [r for r in records if isinstance(r, WorkerWindow)],
                      next((r for r in records if isinstance(r, Summary)), None))


class _Mismatch(ValueError):
    """A line's field that is missing or not of its record's type."""


def _record(cls: type, obj: object, where: str) -> Any:
    """A record from a JSON object, field by field after the dataclass's annotations."""
    if not isinstance(obj, dict):
        raise _Mismatch(f"{where}: expected an object, got {obj!r}")
    hints = typing.get_type_hints(cls)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in obj and f.default is not dataclasses.MISSING:
            continue  # a field added later, absent from older files
        if f.name not in obj:
            raise _Mismatch(f"{where}: no field {f.name!r}")
        values[f.name] = _value(obj[f.name], hints[f.name], f"{where}.{f.name}")
    return cls(**values)


def _value(value: object, hint: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return _record(hint, value, where)  # type: ignore[arg-type]
    if origin is tuple and isinstance(value, list):
        return tuple(_value(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict and isinstance(value, dict):
        return {k: _value(v, args[1], f"{where}.{k}") for k, v in value.items()}
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint in (int, str, bool) and isinstance(value, hint) and (
            hint is bool or not isinstance(value, bool)):
        return value
    raise _Mismatch(f"{where}: expected {getattr(hint, '__name__', hint)}, got {value!r}")


@dataclass(frozen=True)
class StageRow:
    """Mean time per stage for one operation type, in microseconds."""

    op: str
    count: int
    response: float
    decode: float
    queue_wait: float
    server_service: float
    worker_processing: float
    p50: int
    p99: int
    hits: int
    misses: int
    errors: int


def stage_rows(ops: dict[str, OpStats]) -> list[StageRow]:
    """The per-stage decomposition of every operation type in an `ops` object."""
    return [StageRow(
        op=op, count=o.count, response=o.response_us.mean, decode=o.decode_us.mean,
        queue_wait=o.queue_wait_us.mean, server_service=o.server_service_us.mean,
        worker_processing=o.worker_processing_us.mean,
        p50=o.rt_percentiles_us.p50, p99=o.rt_percentiles_us.p99,
        hits=o.hits, misses=o.misses, errors=o.errors) for op, o in ops.items()]


def format_stage_table(rows: list[StageRow]) -> str:
    """A fixed-width table of the decomposition (times in microseconds)."""
    head = (f"{'op':<9}{'count':>8}{'resp':>9}{'decode':>9}{'queue':>9}{'server':>9}"
            f"{'worker':>9}{'p50':>7}{'p99':>7}{'hits':>8}{'misses':>8}{'errors':>7}")
    out = [head]
    for r in rows:
        out.append(
            f"{r.op:<9}{r.count:>8}{r.response:>9.1f}{r.decode:>9.1f}{r.queue_wait:>9.1f}"
            f"{r.server_service:>9.1f}{r.worker_processing:>9.1f}{r.p50:>7}{r.p99:>7}"
            f"{r.hits:>8}{r.misses:>8}{r.errors:>7}"
        )
    return "\n".join(out)
