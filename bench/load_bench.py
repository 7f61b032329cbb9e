#!/usr/bin/env python3
"""The load generator's own benchmark: closed-loop throughput and client CPU per request.

Against one memcached on loopback (server pinned to one core, load generator to the
other), it measures cachelab-load next to memaslap (Debian's `memcaslap`), and against
Redis next to `redis-benchmark`, with the same connections, value size and pipeline depth.
For each tool: requests answered per wall-clock second, the CPU time the load generator
process used (user + system, from wait4's rusage) per 100k requests, and requests per
client CPU-second. Then the ratios ours / theirs.

Plain Python 3 standard library; loopback only; every run is bounded in time.
Run as `python3 bench/load_bench.py`; writes bench/results/load.json.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BenchError, free_port, wait_listening

ROOT = Path(__file__).resolve().parent.parent
BINARY = ROOT / "target" / "release" / "cachelab-load"
RESULTS = ROOT / "bench" / "results" / "load.json"

RUN_SECONDS = 5
CONNECTIONS = 50
VALUE_SIZE = 32
KEYS = 100_000
REDIS_REQUESTS = 200_000  # per command (SET, then GET) for redis-benchmark
TIMEOUT = 120  # no single process may run longer than this


def cores() -> tuple[list[str], list[str]]:
    """taskset prefixes for the server and the client (none on a single core)."""
    if (os.cpu_count() or 1) >= 2 and shutil.which("taskset"):
        return ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    return [], []


def measured(argv: list[str]) -> dict:
    """Runs argv to completion; returns its stdout, wall time and CPU seconds."""
    start = time.monotonic()
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
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if proc.returncode != 0:
        raise BenchError(f"{' '.join(argv)} exited {proc.returncode}: {stderr.strip()[:300]}")
    return {"stdout": stdout, "wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime}


def figures(tool: str, target: str, requests: int, seconds: float, cpu_s: float) -> dict:
    return {
        "tool": tool,
        "server": target,
        "requests": requests,
        "seconds": round(seconds, 3),
        "requests_per_s": round(requests / seconds, 1),
        "client_cpu_s": round(cpu_s, 3),
        "cpu_s_per_100k": round(cpu_s / requests * 1e5, 4),
        "requests_per_cpu_s": round(requests / cpu_s, 1),
    }


def ours(client: list[str], port: int, protocol: str, ratio: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "report.json"
        run = measured(
            client
            + [str(BINARY), "-s", "127.0.0.1", "-p", str(port), "-P", protocol]
            + ["-t", "1", "-c", str(CONNECTIONS), f"--test-time={RUN_SECONDS}", f"--ratio={ratio}"]
            + ["-d", str(VALUE_SIZE), f"--key-maximum={KEYS - 1}"]
            + ["--json-out-file", str(report_path)]
        )
        report = json.loads(report_path.read_text())
    completed = report["totals"]["completed"]
    return figures("cachelab-load", protocol, completed, report["run"]["duration_s"], run["cpu_s"])


def populate(port: int, protocol: str) -> None:
    subprocess.run(
        [str(BINARY), "-s", "127.0.0.1", "-p", str(port), "-P", protocol, "-t", "1", "-c", "8"]
        + ["-d", str(VALUE_SIZE), f"--key-maximum={KEYS - 1}", "--populate"],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=TIMEOUT,
    )


def memaslap(client: list[str], port: int) -> dict:
    run = measured(
        client
        + ["memcaslap", "-s", f"127.0.0.1:{port}", "-T", "1", "-c", str(CONNECTIONS)]
        + ["-t", f"{RUN_SECONDS}s", "-X", str(VALUE_SIZE)]
    )
    m = re.search(r"Run time: ([\d.]+)s Ops: (\d+)", run["stdout"])
    if not m:
        raise BenchError(f"cannot read memaslap's output: {run['stdout'][-300:]}")
    return figures("memaslap", "memcache_text", int(m.group(2)), float(m.group(1)), run["cpu_s"])


def redis_benchmark(client: list[str], port: int) -> dict:
    run = measured(
        client
        + ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", str(CONNECTIONS)]
        + ["-n", str(REDIS_REQUESTS), "-t", "set,get", "-d", str(VALUE_SIZE), "-r", str(KEYS)]
        + ["-P", "1", "--threads", "1", "-q"]
    )
    requests = 2 * REDIS_REQUESTS
    return figures("redis-benchmark", "redis", requests, run["wall_s"], run["cpu_s"])


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


def ratio(a: dict, b: dict, key: str) -> float:
    return round(a[key] / b[key], 3)


def run() -> dict:
    if not BINARY.exists():
        print("building cachelab-load (release)...", file=sys.stderr)
        subprocess.run(["cargo", "build", "--release", "-p", "cachelab-load"], cwd=ROOT, check=True)
    server_cpu, client_cpu = cores()
    rows, ratios = [], {}

    if shutil.which("memcached"):
        port = free_port()
        mc = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "256"]
        if os.geteuid() == 0:
            mc += ["-u", "root"]
        server = start(server_cpu + mc, port)
        try:
            populate(port, "memcache_text")
            # memaslap's default command mix is 1 set to 9 gets: use the same.
            mine = ours(client_cpu, port, "memcache_text", "1:9")
            rows.append(mine)
            if shutil.which("memcaslap"):
                theirs = memaslap(client_cpu, port)
                rows.append(theirs)
                ratios["memcached: cachelab-load / memaslap"] = {
                    "requests_per_s": ratio(mine, theirs, "requests_per_s"),
                    "requests_per_cpu_s": ratio(mine, theirs, "requests_per_cpu_s"),
                }
        finally:
            server.kill()
            server.wait()

    if shutil.which("redis-server"):
        port = free_port()
        redis = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", ""]
        redis += ["--appendonly", "no", "--protected-mode", "no"]
        server = start(server_cpu + redis, port)
        try:
            populate(port, "redis")
            # redis-benchmark -t set,get sends as many SETs as GETs.
            mine = ours(client_cpu, port, "redis", "1:1")
            rows.append(mine)
            if shutil.which("redis-benchmark"):
                theirs = redis_benchmark(client_cpu, port)
                rows.append(theirs)
                ratios["redis: cachelab-load / redis-benchmark"] = {
                    "requests_per_s": ratio(mine, theirs, "requests_per_s"),
                    "requests_per_cpu_s": ratio(mine, theirs, "requests_per_cpu_s"),
                }
        finally:
            server.kill()
            server.wait()

    return {
        "format": 1,
        "benchmark": "load",
        "settings": {
            "connections": CONNECTIONS,
            "threads": 1,
            "pipeline": 1,
            "value_size": VALUE_SIZE,
            "keys": KEYS,
            "run_seconds": RUN_SECONDS,
            "pinning": "server on CPU 0, client on CPU 1" if client_cpu else "none (one CPU)",
        },
        "host": host(),
        "runs": rows,
        "ratios": ratios,
    }


def table(result: dict) -> str:
    head = (
        f"{'tool':<16}{'server':<15}{'requests':>10}{'req/s':>12}"
        f"{'client CPU s':>14}{'CPU s/100k':>12}{'req/CPU s':>12}"
    )
    lines = [head, "-" * len(head)]
    for r in result["runs"]:
        lines.append(
            f"{r['tool']:<16}{r['server']:<15}{r['requests']:>10}{r['requests_per_s']:>12.0f}"
            f"{r['client_cpu_s']:>14.3f}{r['cpu_s_per_100k']:>12.4f}{r['requests_per_cpu_s']:>12.0f}"
        )
    lines.append("")
    for name, r in result["ratios"].items():
        lines.append(
            f"{name}: throughput x{r['requests_per_s']:.2f}, "
            f"requests per client CPU-second x{r['requests_per_cpu_s']:.2f}"
        )
    return "\n".join(lines)


def main() -> int:
    try:
        result = run()
    except (BenchError, subprocess.CalledProcessError) as e:
        print(f"load_bench: {e}", file=sys.stderr)
        return 1
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
