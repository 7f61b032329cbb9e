"""The load generator adapter: `cachelab-load` command lines from an experiment's
configuration, and its JSON report (schema `cachelab-load/1`, docs/load-generator.md) read
into plain data.

Keys are `key-<n>` for n in [0, key_maximum]; the populate step writes every one of them
once, so a run's GETs hit (memcached's memory permitting).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError
from cachelab.spec import RunConfig

SCHEMA = "cachelab-load/1"
OPS = ("set", "get", "multiget", "total")
KEY_PREFIX = "key-"
LATENCY_FIELDS = ("avg", "stddev", "p50", "p90", "p99", "p999", "max")


def protocol(config: RunConfig) -> str:
    if config.servers.kind == "redis":
        return "redis"
    return "memcache_binary" if config.load.protocol == "binary" else "memcache_text"


def _workload_args(config: RunConfig) -> list[str]:
    w = config.workload
    return ["-P", protocol(config), "--data-size", str(w.data_size),
            "--key-prefix", KEY_PREFIX, "--key-minimum", "0",
            "--key-maximum", str(w.key_maximum)]


def populate_argv(config: RunConfig, host: str, port: int, json_out: Path) -> list[str]:
    """Writes every key of the range once (sequentially, split over 4 connections)."""
    return ["--server", host, "--port", str(port), *_workload_args(config),
            "--threads", "1", "--clients", "4", "--populate", "--json-out-file", str(json_out)]


def run_argv(config: RunConfig, host: str, port: int, *, test_time: float, warmup: float,
             cooldown: float, seed: int, json_out: Path) -> list[str]:
    """One load generator instance of a run; an open-loop rate is split evenly over the
    instances."""
    w, load = config.workload, config.load
    pattern = w.pattern_letter
    argv = ["--server", host, "--port", str(port), *_workload_args(config),
            "--threads", str(load.threads), "--clients", str(load.clients),
            "--ratio", w.ratio, "--key-pattern", f"{pattern}:{pattern}",
            "--test-time", f"{test_time:g}", "--warmup", f"{warmup:g}",
            "--cooldown", f"{cooldown:g}", "--pipeline", str(load.pipeline),
            "--seed", str(seed), "--json-out-file", str(json_out)]
    if w.multiget_keys:
        argv += ["--multiget-keys", str(w.multiget_keys)]
    if pattern == "G":
        argv += [f"--key-stddev={w.key_stddev}"] if w.key_stddev is not None else []
        argv += [f"--key-median={w.key_median}"] if w.key_median is not None else []
    if pattern == "Z":
        argv += ["--zipf-exponent", f"{w.zipf_exponent:g}"]
    if load.mode == "open":
        assert load.rate is not None
        argv += ["--rate", f"{load.rate / config.instances:g}"]
    if load.busy_poll_us:
        argv += ["--busy-poll-us", str(load.busy_poll_us)]
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
                      doc["configuration"])
    except (KeyError, TypeError) as exc:
        raise UserError(f"{where}: missing or malformed field {exc}") from None


def load(path: Path) -> Report:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"cannot read the load report {path}: {exc.strerror}") from None
    return parse(text, str(path))
