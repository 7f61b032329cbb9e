"""Reading the middleware's stats file (JSON lines; fields in docs/stats-file.md, the
contract in crates/cachelab-proxy/schema/stats-file.schema.json). The Rust writer and this
reader are both tested against crates/cachelab-proxy/schema/stats-file.golden.jsonl.

A run that crashed may have left a torn last line: it is ignored, and every complete
window before it is kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError

#: The stats-file schema versions this reader understands.
SUPPORTED_SCHEMAS = {1}

#: Response-time components, in the order they add up (see docs/stats-file.md).
STAGES = ("decode_us", "queue_wait_us", "server_service_us", "worker_processing_us")


@dataclass(frozen=True)
class Welford:
    """Count, mean and M2 of Welford's algorithm, as the proxy writes them."""

    count: int
    mean: float
    m2: float

    @classmethod
    def from_json(cls, obj: dict) -> Welford:
        return cls(int(obj["count"]), float(obj["mean"]), float(obj["m2"]))

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
class ProxyStats:
    header: dict
    #: Merged ("total") window lines, in order.
    windows: list[dict]
    #: Per-worker window lines, in order.
    worker_windows: list[dict]
    #: The end-of-run summary, or None if the proxy did not exit cleanly.
    summary: dict | None


def load(path: Path) -> ProxyStats:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read the proxy stats file {path}: {exc.strerror}") from exc
    lines = []
    for number, raw in enumerate(text.splitlines(), start=1):
        try:
            lines.append(json.loads(raw))
        except json.JSONDecodeError:
            if number == len(text.splitlines()):
                break  # a torn last line from a crash
            raise UserError(f"{path}:{number}: not a JSON object") from None
    if not lines or lines[0].get("type") != "start":
        raise UserError(f"{path}: does not start with a proxy stats header")
    header = lines[0]
    if header.get("schema") not in SUPPORTED_SCHEMAS:
        raise UserError(f"{path}: stats schema {header.get('schema')} is not supported")
    windows = [x for x in lines if x.get("type") == "window" and x.get("scope") == "total"]
    workers = [x for x in lines if x.get("type") == "window" and x.get("scope") == "worker"]
    summary = next((x for x in lines if x.get("type") == "summary"), None)
    return ProxyStats(header, windows, workers, summary)


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


def stage_rows(ops: dict) -> list[StageRow]:
    """The per-stage decomposition of every operation type in an `ops` object."""
    rows = []
    for op, o in ops.items():
        mean = {k: o[k]["mean"] for k in ("response_us", *STAGES)}
        rows.append(StageRow(
            op=op, count=o["count"], response=mean["response_us"], decode=mean["decode_us"],
            queue_wait=mean["queue_wait_us"], server_service=mean["server_service_us"],
            worker_processing=mean["worker_processing_us"],
            p50=o["rt_percentiles_us"]["p50"], p99=o["rt_percentiles_us"]["p99"],
            hits=o["hits"], misses=o["misses"], errors=o["errors"],
        ))
    return rows


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
