#!/usr/bin/env python3
"""The load generator's own benchmark: throughput, client CPU per request, and its clock.

    python bench/load_bench.py [--quick] [--repeats N]

Against one memcached on loopback (`-t 1`, pinned to CPU 0; the load generator pinned to
CPU 1), every repetition runs these configurations once, in this order (the repetitions
are interleaved: A B C ..., A B C ...):
- the peer comparison: cachelab-load next to memaslap (Debian's `memcaslap`), closed loop,
  CONNECTIONS connections, VALUE_SIZE-byte values, 1 set to 9 gets (memaslap's mix), and
  next to cachelab-floor-load (bench/floor), a bare epoll client with the same load: the
  least CPU per request any client of its kind spends here, printed beside L4;
- issue 14's runs, all with 1 thread, CLOCK_CONNECTIONS connections, 64-byte values, 1:1,
  key maximum 9999: closed loop; open loop at each of OPEN_RATES without and with
  `--busy-poll-us BUSY_POLL_US`; a closed loop on 1 connection and an open loop at
  LOW_RATE (for the round trip);
- against Redis (if installed): cachelab-load next to `redis-benchmark`.
For each run: requests answered per wall-clock second, the CPU time the load generator
process used (user + system, from wait4's rusage) per request, requests per client
CPU-second, the steal time of the machine (/proc/stat) during the run, and from
cachelab-load's JSON report the send lag (open loop: the actual send time minus the
scheduled one, its timing error) and the latency p50.

Issue 14's load-generator targets (L1-L5) are judged on the median over repetitions of
the per-repetition value, with the min..max spread beside it; see TITLES.

Duration: the default (3 repetitions) about 3 minutes; `--quick` (1 repetition of 2 s
runs, whose target lines are not verdicts) about 30 seconds.
Plain Python 3 standard library; loopback only; every run is bounded in time.
Writes bench/results/load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import (
    BenchError,
    cpu_times,
    free_port,
    stay_on,
    steal_fraction,
    wait_listening,
)
from _targets import (
    AT_LEAST,
    AT_MOST,
    WITHIN,
    differences,
    format_targets,
    judge,
    ratios,
    summary_line,
)

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "cachelab-load"
FLOOR_BINARY = ROOT / "target" / "release" / "cachelab-floor-load"
RESULTS = ROOT / "bench" / "results" / "load.json"

# The peer comparison (memaslap, redis-benchmark).
RUN_SECONDS = 5
CONNECTIONS = 50
VALUE_SIZE = 32
KEYS = 100_000
REDIS_REQUESTS = 200_000  # per command (SET, then GET) for redis-benchmark
# Issue 14's runs: the load generator's clock and its open-loop cost.
CLOCK_SECONDS = 4
CLOCK_CONNECTIONS = 8
CLOCK_VALUE = 64
CLOCK_KEYS = 10_000
OPEN_RATES = (20_000, 50_000)
BUSY_POLL_US = 100
LOW_RATE = 2_000
TIMEOUT = 120  # no single process may run longer than this

TITLES = {
    "L1": f"L1 send lag with --busy-poll-us {BUSY_POLL_US}: p50 <= 10 us, p99 <= 50 us "
          "(CPU per request in the note)",
    "L2": "L2 send lag without busy-polling: p99 <= 200 us",
    "L3": "L3 CPU per request, open loop over closed loop (8 connections): <= 1.5x",
    "L4": "L4 requests per client CPU-second, cachelab-load over memaslap: >= 1.5x",
    "L5": f"L5 latency p50 at {LOW_RATE:,}/s minus the closed-loop 1-connection round trip "
          "p50: within 10 us",
}


def cores() -> tuple[list[str], list[str]]:
    """taskset prefixes for the server and the client (none on a single core)."""
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    return [], []


def measured(argv: list[str]) -> dict:
    """Runs argv to completion; returns its stdout, wall time, CPU seconds and the
    machine's steal fraction over the run."""
    start = time.monotonic()
    times_before = cpu_times()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err)
        deadline = start + TIMEOUT
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                raise BenchError(f"{argv[0]} ran over {TIMEOUT} s")
            time.sleep(0.01)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - start
        steal = steal_fraction(times_before, cpu_times())
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}: {stderr.strip()[:300]}")
    return {"stdout": stdout, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime,
            "steal": steal}


def figures(tool: str, target: str, requests: int, seconds: float, run: dict) -> dict:
    cpu_s = run["cpu_s"]
    return {
        "tool": tool,
        "server": target,
        "requests": requests,
        "seconds": round(seconds, 3),
        "requests_per_s": round(requests / seconds, 1),
        "client_cpu_s": round(cpu_s, 3),
        "cpu_s_per_100k": round(cpu_s / requests * 1e5, 4),
        "cpu_us_per_request": round(cpu_s / requests * 1e6, 3),
        "requests_per_cpu_s": round(requests / cpu_s, 1),
        "steal": round(run["steal"], 5),
    }


def ours(client: list[str], port: int, protocol: str, *, ratio: str, connections: int,
         value: int, keys: int, seconds: float, rate: int | None = None,
         busy_poll_us: int = 0, pipeline: int = 1) -> dict:
    """One cachelab-load run: the figures, and from its report the latency p50 and, in
    open loop, the send lag percentiles and whether it fell behind."""
    argv = [str(BINARY), "-s", "127.0.0.1", "-p", str(port), "-P", protocol, "-t", "1",
            "-c", str(connections), f"--test-time={seconds}", f"--ratio={ratio}",
            "-d", str(value), f"--key-maximum={keys - 1}"]
    if rate is not None:
        argv += ["--rate", str(rate)]
    argv += ["--busy-poll-us", str(busy_poll_us), "--pipeline", str(pipeline)]
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        run = measured(client + argv + ["--json-out-file", str(report_path)])
        report = json.loads(report_path.read_text())
    completed = report["totals"]["completed"]
    row = figures("cachelab-load", protocol, completed, report["run"]["duration_s"], run)
    row["latency_p50_ms"] = report["summary"]["total"]["latency_ms"]["p50"]
    open_loop = report.get("open_loop")
    row["send_lag_p50_ms"] = open_loop["send_lag_ms"]["p50"] if open_loop else None
    row["send_lag_p99_ms"] = open_loop["send_lag_ms"]["p99"] if open_loop else None
    row["fell_behind"] = open_loop["fell_behind"] if open_loop else None
    return row


def populate(port: int, protocol: str, value: int, keys: int) -> None:
    subprocess.run(
        [str(BINARY), "-s", "127.0.0.1", "-p", str(port), "-P", protocol, "-t", "1", "-c", "8"]
        + ["-d", str(value), f"--key-maximum={keys - 1}", "--populate"],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=TIMEOUT,
    )


def memaslap(client: list[str], port: int, seconds: float) -> dict:
    run = measured(
        client
        + ["memcaslap", "-s", f"127.0.0.1:{port}", "-T", "1", "-c", str(CONNECTIONS)]
        + ["-t", f"{seconds:g}s", "-X", str(VALUE_SIZE)]
    )
    m = re.search(r"Run time: ([\d.]+)s Ops: (\d+)", run["stdout"])
    if not m:
        raise BenchError(f"cannot read memaslap's output: {run['stdout'][-300:]}")
    return figures("memaslap", "memcache_text", int(m.group(2)), float(m.group(1)), run)


def floor_load(client: list[str], port: int, seconds: float) -> dict:
    """cachelab-floor-load with memaslap's load."""
    run = measured(
        client
        + [str(FLOOR_BINARY), "-s", f"127.0.0.1:{port}", "-c", str(CONNECTIONS)]
        + ["-t", f"{seconds:g}", "-d", str(VALUE_SIZE), "--ratio", "1:9", "--keys", str(KEYS)]
    )
    m = re.search(r"requests (\d+) seconds ([\d.]+)", run["stdout"])
    if not m:
        raise BenchError(f"cannot read cachelab-floor-load's output: {run['stdout'][-300:]}")
    return figures("cachelab-floor-load", "memcache_text", int(m.group(1)), float(m.group(2)),
                   run)


def redis_benchmark(client: list[str], port: int, requests: int) -> dict:
    run = measured(
        client
        + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNECTIONS)]
        + ["-n", str(requests), "-t", "set,get", "-d", str(VALUE_SIZE), "-r", str(KEYS)]
        + ["-P", "1", "--threads", "1", "-q"]
    )
    return figures("redis-benchmark", "redis", 2 * requests, run["wall_s"], run)


def start(argv: list[str], port: int) -> subprocess.Popen:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_listening(port)
    return proc


def version(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return "unknown"


def host() -> dict:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_model": model,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "loadavg": os.getloadavg(),
        "memcached": version(["memcached", "-V"]),
        "redis": version(["redis-server", "--version"]),
        "memaslap": version(["memcaslap", "-V"]),
    }


FLOOR = "floor client (vs memaslap)"  # cachelab-floor-load's run


def configurations(client: list[str], mc_port: int | None, redis_port: int | None,
                   seconds: float, clock_seconds: float,
                   redis_requests: int) -> list[tuple[str, Callable[[], dict]]]:
    """Every run of one repetition, named, in the order they run."""
    runs: list[tuple[str, Callable[[], dict]]] = []
    if mc_port is not None:
        def clock(**kw) -> Callable[[], dict]:
            return lambda: ours(client, mc_port, "memcache_text", ratio="1:1",
                                value=CLOCK_VALUE, keys=CLOCK_KEYS, seconds=clock_seconds,
                                **({"connections": CLOCK_CONNECTIONS} | kw))

        # memaslap's default command mix is 1 set to 9 gets: use the same.
        runs.append(("memcached closed (vs memaslap)", lambda: ours(
            client, mc_port, "memcache_text", ratio="1:9", connections=CONNECTIONS,
            value=VALUE_SIZE, keys=KEYS, seconds=seconds)))
        if shutil.which("memcaslap"):
            runs.append(("memaslap", lambda: memaslap(client, mc_port, seconds)))
        runs.append((FLOOR, lambda: floor_load(client, mc_port, seconds)))
        runs.append(("closed, 8 conns", clock()))
        for rate in OPEN_RATES:
            runs.append((f"open {rate}/s", clock(rate=rate)))
            runs.append((f"open {rate}/s busy-poll", clock(rate=rate, busy_poll_us=BUSY_POLL_US)))
        runs.append(("closed, 1 conn", clock(connections=1)))
        runs.append((f"open {LOW_RATE}/s", clock(rate=LOW_RATE)))
        # The same pair with both sides spinning instead of sleeping, so neither measures
        # its own wake-up: what is left is the server's latency at each load.
        runs.append(("closed, 1 conn busy-poll", clock(connections=1, busy_poll_us=BUSY_POLL_US)))
        runs.append((f"open {LOW_RATE}/s busy-poll", clock(rate=LOW_RATE,
                                                         busy_poll_us=BUSY_POLL_US)))
    if redis_port is not None:
        # redis-benchmark -t set,get sends as many SETs as GETs.
        runs.append(("redis closed (vs redis-benchmark)", lambda: ours(
            client, redis_port, "redis", ratio="1:1", connections=CONNECTIONS,
            value=VALUE_SIZE, keys=KEYS, seconds=seconds)))
        if shutil.which("redis-benchmark"):
            runs.append(("redis-benchmark", lambda: redis_benchmark(client, redis_port,
                                                                   redis_requests)))
    return runs


def run(repeats: int, seconds: float, clock_seconds: float, redis_requests: int) -> dict:
    for binary in (BINARY, FLOOR_BINARY):
        if not binary.exists():
            raise BenchError(f"{binary} missing: run `make build`")
    server_cpu, client_cpu = cores()
    servers: list[subprocess.Popen] = []
    mc_port = redis_port = None
    try:
        if shutil.which("memcached"):
            mc_port = free_port()
            mc = ["memcached", "-l", "127.0.0.1", "-p", str(mc_port), "-U", "0", "-t", "1",
                  "-m", "256", *(["-u", "root"] if os.geteuid() == 0 else [])]
            servers.append(start(server_cpu + mc, mc_port))
            populate(mc_port, "memcache_text", VALUE_SIZE, KEYS)
            populate(mc_port, "memcache_text", CLOCK_VALUE, CLOCK_KEYS)
        if shutil.which("redis-server"):
            redis_port = free_port()
            redis = ["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                     "--save", "", "--appendonly", "no", "--protected-mode", "no"]
            servers.append(start(server_cpu + redis, redis_port))
            populate(redis_port, "redis", VALUE_SIZE, KEYS)
        plan = configurations(client_cpu, mc_port, redis_port, seconds, clock_seconds,
                              redis_requests)
        runs: dict[str, list[dict]] = {name: [] for name, _ in plan}
        for i in range(repeats):
            print(f"repetition {i + 1} of {repeats}", file=sys.stderr)
            for name, go in plan:  # interleaved: A B C ..., A B C ...
                runs[name].append(go())
    finally:
        for s in servers:
            s.kill()
            s.wait()
    return {
        "format": 2,
        "benchmark": "load",
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "settings": {
            "repeats": repeats,
            "peer_comparison": {"connections": CONNECTIONS, "threads": 1, "pipeline": 1,
                                "value_size": VALUE_SIZE, "keys": KEYS, "run_seconds": seconds,
                                "redis_requests_per_command": redis_requests},
            "clock": {"connections": CLOCK_CONNECTIONS, "threads": 1, "value_size": CLOCK_VALUE,
                      "keys": CLOCK_KEYS, "ratio": "1:1", "run_seconds": clock_seconds,
                      "open_rates": list(OPEN_RATES), "busy_poll_us": BUSY_POLL_US,
                      "low_rate": LOW_RATE},
            "pinning": "server on CPU 0, client on CPU 1" if client_cpu else "none (one CPU)",
        },
        "host": host(),
        "runs": runs,
        "medians": {name: medians(rows) for name, rows in runs.items()},
        "ratios": peer_ratios(runs),
    }


def medians(rows: list[dict]) -> dict:
    """Every numeric figure's median over the repetitions."""
    out = {}
    for key, first in rows[0].items():
        values = [r[key] for r in rows if isinstance(r[key], int | float)
                  and not isinstance(r[key], bool)]
        out[key] = statistics.median(values) if values else first
    out["fell_behind"] = any(r.get("fell_behind") for r in rows)
    return out


def field(runs: dict[str, list[dict]], name: str, key: str) -> list[float | None]:
    return [r[key] for r in runs[name]] if name in runs else []


def peer_ratios(runs: dict[str, list[dict]]) -> dict:
    """Median over repetitions of ours / theirs, repetition by repetition."""
    out = {}
    for label, mine, theirs in (
            ("memcached: cachelab-load / memaslap", "memcached closed (vs memaslap)", "memaslap"),
            ("memcached: cachelab-floor-load / memaslap", FLOOR, "memaslap"),
            ("redis: cachelab-load / redis-benchmark", "redis closed (vs redis-benchmark)",
             "redis-benchmark")):
        if mine in runs and theirs in runs:
            out[label] = {}
            for key in ("requests_per_s", "requests_per_cpu_s"):
                values = [v for v in ratios(field(runs, mine, key), field(runs, theirs, key))
                          if v is not None]
                out[label][key] = round(statistics.median(values), 3) if values else None
    return out


def issue14_targets(runs: dict[str, list[dict]]) -> list:
    """Issue 14's load-generator targets L1-L5 (see TITLES)."""
    def lag(name: str, key: str) -> list[float | None]:
        """A send-lag percentile per repetition, in us."""
        return [None if v is None else v * 1000 for v in field(runs, name, key)]

    def steal(*names: str) -> list[float]:
        return [s for n in names for s in field(runs, n, "steal")]

    def cpu(name: str) -> str:
        """The median client CPU per request of one configuration."""
        values = field(runs, name, "cpu_us_per_request")
        return f"{statistics.median(values):.1f} us" if values else "-"

    out = []
    for rate in OPEN_RATES:
        name = f"open {rate}/s busy-poll"
        note = f"CPU/request {cpu(name)} ({cpu(f'open {rate}/s')} without busy-poll)"
        out.append(judge("L1", f"p50, {rate // 1000}k/s", lag(name, "send_lag_p50_ms"),
                         AT_MOST, 10, unit="us", steal=steal(name), note=note))
        out.append(judge("L1", f"p99, {rate // 1000}k/s", lag(name, "send_lag_p99_ms"),
                         AT_MOST, 50, unit="us", steal=steal(name), note=note))
    for rate in OPEN_RATES:
        name = f"open {rate}/s"
        out.append(judge("L2", f"p99, {rate // 1000}k/s", lag(name, "send_lag_p99_ms"),
                         AT_MOST, 200, unit="us", steal=steal(name)))
    for rate in OPEN_RATES:
        name, closed = f"open {rate}/s", "closed, 8 conns"
        out.append(judge("L3", f"{rate // 1000}k/s", ratios(
            field(runs, name, "cpu_us_per_request"), field(runs, closed, "cpu_us_per_request")),
            AT_MOST, 1.5, steal=steal(name, closed),
            note=f"CPU/request {cpu(name)} open, {cpu(closed)} closed"))
    mine, theirs = "memcached closed (vs memaslap)", "memaslap"
    floor = ratios(field(runs, FLOOR, "requests_per_cpu_s"),
                   field(runs, theirs, "requests_per_cpu_s")) if FLOOR in runs else []
    floor = [v for v in floor if v is not None]
    out.append(judge("L4", "50 conns, 32 B, 1:9", ratios(
        field(runs, mine, "requests_per_cpu_s"), field(runs, theirs, "requests_per_cpu_s")),
        AT_LEAST, 1.5, steal=steal(mine, theirs),
        note=f"floor {statistics.median(floor):.2f}x" if floor else ""))
    for suffix in ("", " busy-poll"):
        low, rtt = f"open {LOW_RATE}/s{suffix}", f"closed, 1 conn{suffix}"
        out.append(judge("L5", f"{LOW_RATE // 1000}k/s vs 1 conn{suffix}", differences(
            field(runs, low, "latency_p50_ms"), field(runs, rtt, "latency_p50_ms"), 1000),
            WITHIN, 10, unit="us", steal=steal(low, rtt)))
    return out


def table(result: dict) -> str:
    head = (
        f"{'run (medians)':<34}{'requests':>9}{'req/s':>9}{'CPU us/req':>11}{'req/CPU s':>10}"
        f"{'p50 ms':>8}{'lag p50':>8}{'lag p99':>8}{'steal':>7}"
    )
    lines = [head, "-" * len(head)]

    def ms(v):
        return f"{v:.3f}" if v is not None else "-"

    for name, r in result["medians"].items():
        lines.append(
            f"{name:<34}{r['requests']:>9.0f}{r['requests_per_s']:>9.0f}"
            f"{r['cpu_us_per_request']:>11.2f}{r['requests_per_cpu_s']:>10.0f}"
            f"{ms(r.get('latency_p50_ms')):>8}{ms(r.get('send_lag_p50_ms')):>8}"
            f"{ms(r.get('send_lag_p99_ms')):>8}{r['steal']:>7.1%}"
            + (" FELL BEHIND" if r.get("fell_behind") else "")
        )
    lines.append("")
    for name, r in result["ratios"].items():
        lines.append(
            f"{name}: throughput x{r['requests_per_s']:.2f}, "
            f"requests per client CPU-second x{r['requests_per_cpu_s']:.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved repetitions (targets need 3 or more)")
    parser.add_argument("--quick", action="store_true",
                        help="1 repetition of 2 s runs (target lines are not verdicts)")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if (os.cpu_count() or 1) >= 2:
        stay_on(0)  # the server's CPU: the load generator has CPU 1 to itself
    seconds, clock_seconds, redis_requests = RUN_SECONDS, CLOCK_SECONDS, REDIS_REQUESTS
    if args.quick:
        args.repeats, seconds, clock_seconds, redis_requests = 1, 2, 2, REDIS_REQUESTS // 4
    try:
        result = run(args.repeats, seconds, clock_seconds, redis_requests)
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"load_bench: {e}", file=sys.stderr)
        return 1
    verdicts = issue14_targets(result["runs"]) if "closed, 8 conns" in result["runs"] else []
    result["targets"] = [t.as_json() for t in verdicts]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    if verdicts:
        print("\nissue 14's targets (median over repetitions of the per-repetition value, "
              "spread min..max):")
        print("\n".join(format_targets(verdicts, TITLES)))
        print(summary_line(verdicts))
    else:
        print("\nissue 14's targets: not measured (memcached not installed)")
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
