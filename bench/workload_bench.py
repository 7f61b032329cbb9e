#!/usr/bin/env python3
"""The load generator's cost per request by workload, beside memtier_benchmark.

    python bench/workload_bench.py [--quick] [--repeats N]

Against one memcached on loopback (`-t 1`, pinned to CPU 0; the load generator pinned to
CPU 1), every repetition runs these configurations once, interleaved (A B C ..., A B C):
- the plain closed loop, 4 connections of 64-byte GETs, `--pipeline 1` and `--pipeline 16`,
  and `--pipeline 16` with `--timestamps user` (no kernel stamps, as memtier takes none);
- memtier_benchmark with the same options, where it can be had (`$MEMTIER_BENCHMARK`, or
  `memtier_benchmark` on the PATH; it builds from github.com/RedisLabs/memtier_benchmark
  with Debian's libevent-dev);
- the published workloads: the `fb-etc` preset (closed loop, 4 connections) and the
  shipped synthetic trace replayed as fast as the connections go, where this build has
  them (`--workload list`, `--trace`).
For each: requests answered per second and per load-generator CPU-second (user + system,
from wait4's rusage).

Target W1 (issue 35): with `--pipeline 16`, cachelab-load's requests per CPU-second at
least memtier_benchmark's, judged on the median over repetitions of the per-repetition
ratio. Without memtier the pipelined run is printed beside the plain one instead.

Duration: 3 repetitions of 4 s runs, about a minute and a half; `--quick` 1 repetition of
2 s runs (not a verdict). Loopback only; every run is bounded in time.
Writes bench/results/workload.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from _common import BenchError, free_port
from _targets import AT_LEAST, format_targets, judge, ratios, summary_line
from load_bench import BINARY, cores, figures, measured, ours, populate, start

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "workload.json"
TRACE = ROOT / "experiments" / "traces" / "synthetic.csv"

TITLES = {"W1": "W1 requests per load-generator CPU-second with --pipeline 16: >= 1.0x"}

CONNECTIONS = 4
VALUE = 64
KEYS = 10_000
PIPELINE = 16


def memtier_binary() -> str | None:
    found = os.environ.get("MEMTIER_BENCHMARK") or shutil.which("memtier_benchmark")
    return found if found and Path(found).exists() else None


def memtier(client: list[str], binary: str, port: int, pipeline: int, seconds: float) -> dict:
    run = measured(client + [
        binary, "-s", "127.0.0.1", "-p", str(port), "-P", "memcache_text", "-t", "1",
        "-c", str(CONNECTIONS), "--ratio=0:1", f"--pipeline={pipeline}", "-d", str(VALUE),
        f"--key-maximum={KEYS - 1}", f"--test-time={seconds:g}", "--hide-histogram"])
    # The Totals line: ops/sec first; the request count is ops/sec times the run time.
    m = re.search(r"^Totals\s+([\d.]+)", run["stdout"], re.MULTILINE)
    if not m:
        raise BenchError(f"cannot read memtier's output: {run['stdout'][-300:]}")
    requests = int(float(m.group(1)) * seconds)
    return figures("memtier_benchmark", "memcache_text", requests, seconds, run)


def supports(flag: str) -> bool:
    out = subprocess.run([str(BINARY), "--help"], capture_output=True, text=True, timeout=10)
    return flag in out.stdout


def extra(client: list[str], port: int, args: list[str], seconds: float, name: str) -> dict:
    """cachelab-load with extra arguments (a preset, a trace), from its JSON report."""
    argv = [str(BINARY), "-s", "127.0.0.1", "-p", str(port), "-P", "memcache_text", "-t", "1",
            "-c", str(CONNECTIONS), f"--test-time={seconds:g}", *args]
    report_path = Path(f"/tmp/cachelab-workload-bench-{os.getpid()}.json")
    try:
        run = measured(client + argv + ["--json-out-file", str(report_path)])
        report = json.loads(report_path.read_text())
    finally:
        report_path.unlink(missing_ok=True)
    completed = report["totals"]["completed"]
    row = figures("cachelab-load", name, completed, report["run"]["duration_s"], run)
    total = report["summary"]["total"]
    hits, misses = total.get("hits", 0), total.get("misses", 0)
    row["hit_ratio"] = round(hits / (hits + misses), 4) if hits + misses else None
    return row


def configurations(client: list[str], port: int, seconds: float
                   ) -> list[tuple[str, Callable[[], dict]]]:
    def plain(pipeline: int) -> Callable[[], dict]:
        def go() -> dict:
            return ours(client, port, "memcache_text", ratio="0:1", connections=CONNECTIONS,
                        value=VALUE, keys=KEYS, seconds=seconds, pipeline=pipeline)
        return go

    runs: list[tuple[str, Callable[[], dict]]] = [
        ("plain, pipeline 1", plain(1)), (f"plain, pipeline {PIPELINE}", plain(PIPELINE))]
    # The same without the kernel's timestamps, which memtier does not take: what they
    # cost, read beside the row above.
    runs.append((f"plain, pipeline {PIPELINE}, user clock", lambda: extra(
        client, port, ["--ratio=0:1", "-d", str(VALUE), f"--key-maximum={KEYS - 1}",
                       "--pipeline", str(PIPELINE), "--timestamps", "user"],
        seconds, "user clock")))
    binary = memtier_binary()
    if binary:
        runs.append(("memtier, pipeline 1", lambda: memtier(client, binary, port, 1, seconds)))
        runs.append((f"memtier, pipeline {PIPELINE}",
                     lambda: memtier(client, binary, port, PIPELINE, seconds)))
    if supports("--workload"):
        runs.append(("fb-etc preset", lambda: extra(
            client, port, ["--workload", "fb-etc"], seconds, "fb-etc")))
    if supports("--trace") and TRACE.exists():
        runs.append(("synthetic trace", lambda: extra(
            client, port, ["--trace", str(TRACE), "--trace-speed", "0"], seconds, "trace")))
    return runs


def run(repeats: int, seconds: float) -> dict:
    if not BINARY.exists():
        raise BenchError(f"{BINARY} missing: run `make build`")
    if not shutil.which("memcached"):
        raise BenchError("memcached missing: run `make system-deps`")
    server_cpu, client_cpu = cores()
    port = free_port()
    mc = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "256",
          *(["-u", "root"] if os.geteuid() == 0 else [])]
    server = start(server_cpu + mc, port)
    try:
        populate(port, "memcache_text", VALUE, KEYS)
        plan = configurations(client_cpu, port, seconds)
        runs: dict[str, list[dict]] = {name: [] for name, _ in plan}
        for i in range(repeats):
            print(f"repetition {i + 1} of {repeats}", file=sys.stderr)
            for name, go in plan:
                runs[name].append(go())
    finally:
        server.kill()
        server.wait()
    return {
        "format": 1,
        "benchmark": "workload",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "settings": {"repeats": repeats, "run_seconds": seconds, "connections": CONNECTIONS,
                     "value_size": VALUE, "keys": KEYS, "pipeline": PIPELINE,
                     "memtier": memtier_binary(),
                     "pinning": "server on CPU 0, client on CPU 1" if client_cpu else "none"},
        "runs": runs,
        "medians": {name: {k: statistics.median(r[k] for r in rows)
                           for k in ("requests_per_s", "requests_per_cpu_s", "steal")}
                    for name, rows in runs.items()},
    }


def targets(runs: dict[str, list[dict]]) -> list:
    def field(name: str) -> list[float | None]:
        return [r["requests_per_cpu_s"] for r in runs.get(name, [])]

    def steal(*names: str) -> list[float]:
        return [r["steal"] for n in names for r in runs.get(n, [])]

    mine = f"plain, pipeline {PIPELINE}"
    theirs = f"memtier, pipeline {PIPELINE}"
    if theirs in runs:
        return [judge("W1", "cachelab-load / memtier_benchmark",
                      ratios(field(mine), field(theirs)), AT_LEAST, 1.0,
                      steal=steal(mine, theirs))]
    return [judge("W1", "pipeline 16 / pipeline 1 (memtier not found)",
                  ratios(field(mine), field("plain, pipeline 1")), AT_LEAST, 1.0,
                  steal=steal(mine, "plain, pipeline 1"))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    repeats, seconds = (1, 2.0) if args.quick else (args.repeats, 4.0)
    try:
        result = run(repeats, seconds)
    except BenchError as e:
        print(f"workload_bench: {e}", file=sys.stderr)
        return 1
    verdicts = targets(result["runs"])
    result["targets"] = [t.as_json() for t in verdicts]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    for name, m in result["medians"].items():
        print(f"{name:28} {m['requests_per_s']:>10,.0f} req/s "
              f"{m['requests_per_cpu_s']:>10,.0f} req/CPU-s")
    print("\nissue 35's target (median over repetitions of the per-repetition ratio):")
    print("\n".join(format_targets(verdicts, TITLES)))
    print(summary_line(verdicts))
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
