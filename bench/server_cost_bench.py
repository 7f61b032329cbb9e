"""What the middleware saves its servers: their CPU per request, direct and through it.

    python bench/server_cost_bench.py [--quick] [--repeats N] [--run-time S]

A proxy that carries many clients' requests in few server writes makes each request
cheaper for the server (issue 34). CLIENTS closed-loop connections of 64-byte GETs (keys
1..10,000 written first; LOAD_THREADS load threads) against one redis-server and one
memcached (-t 1), each in a cgroup of its own on the server CPU, whose exact runtime
gives the server's CPU per completed request:
- "direct": the load generator's connections straight to the server;
- "direct-pipelined": the same with 16 requests outstanding per connection, the least a
  coalescing proxy can bring the server to;
- "cachelab-production": through cachelab-proxy in production mode (PRODUCTION_ARGS);
- "cachelab-coalescing": through it with one worker whose batches carry up to 64
  requests (COALESCING_ARGS), the fewest server writes;
- "twemproxy": through nutcracker, which multiplexes every client onto one connection.
Then redis-server, and memcached, capped at CAP cores (its cgroup's CPU quota), direct
and through both proxy configurations: throughput and p99 when the server's CPU is what
limits (memcached's rows have no target: production mode merges its gets). Each
proxied row shows the requests each batch carried (the proxy's `worker_batches`).
Placement: the server on CPU 0 (its cgroup's cpuset); the proxy and the load generator
free to run on either CPU (FLOATING), as they would run on machines of their own. Pinned
beside the server, a load generator of one CPU's share limits every configuration to
the same 55-70k requests/s, and the proxy's batches stay small (measured 2026-11-27:
Redis's CPU per request through production mode 6.9 us pinned, 2.3-2.5 us floating).
Runs are interleaved and repeated; medians are printed, every repetition kept.
`--production ARGS` replaces PRODUCTION_ARGS (a sweep of `-t` and `--pipeline`).

Targets: S1 Redis's CPU per request through the production mode at most twemproxy's;
S2 at most 0.3x direct; S3 memcached's through the production mode at most what
direct-pipelined costs it; S4 the capped Redis serves at least 2x the direct throughput
through the production mode, S5 with a lower p99. Each is judged on the production
mode, with the coalescing configuration's value beside it.

Duration: the default (3 repetitions of 4 s) about 4 minutes; `--quick` (1 of 2 s)
under a minute. Needs root for the cgroups. Writes bench/results/server-cost-latest.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BenchError, free_port, stay_on, wait_listening
from _targets import (
    AT_LEAST,
    AT_MOST,
    differences,
    fmt,
    format_targets,
    judge,
    ratios,
    summary_line,
)
from proxy_bench import (
    BIN,
    KEYS,
    LOAD_CPU,
    PRODUCTION_ARGS,
    RESULTS,
    SERVER_CPU,
    Target,
    pinned,
    start_cachelab,
    start_twemproxy,
    stop,
    stop_all,
)

from cachelab.hosts.cgroups import CpuGroup

CLIENTS = 50
LOAD_THREADS = 2  # CLIENTS / LOAD_THREADS connections each
FLOATING = "0,1"  # where the proxy and the load generator may run
VALUE = 64
DEPTH = 16  # direct-pipelined: requests outstanding per connection
# Measured beside the production mode: one worker whose batches carry up to 64 requests,
# the fewest server writes a worker engine makes (at a latency cost, docs/performance.md).
COALESCING = "cachelab-coalescing"
COALESCING_ARGS = ["-t", "1", "--pipeline", "64"]
CAP = 0.3  # cores for the capped redis-server
TITLES = {
    "S1": "S1: Redis CPU per request through production mode, over twemproxy's (<= 1.0)",
    "S2": "S2: Redis CPU per request through production mode, over direct (<= 0.3)",
    "S3": "S3: memcached CPU per request through production mode, over direct-pipelined "
          "(<= 1.0)",
    "S4": f"S4: Redis capped at {CAP} core, throughput through production mode over "
          "direct (>= 2.0)",
    "S5": f"S5: Redis capped at {CAP} core, p99 through production mode minus direct "
          "(ms, <= 0)",
}


class Server:
    """One server process in a cgroup of its own on the server CPU (quota: capped)."""

    def __init__(self, kind: str, workdir: Path, quota: float = 0.0):
        self.kind, self.port = kind, free_port()
        user = ["-u", "root"] if os.geteuid() == 0 else []
        argv = (["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                 "--appendonly", "no", "--dir", str(workdir), "--protected-mode", "no"]
                if kind == "redis" else
                ["memcached", "-l", "127.0.0.1", "-p", str(self.port), "-U", "0", "-t", "1",
                 "-m", "256", *user])
        self.group = CpuGroup(f"cachelab-bench-{kind}-{os.getpid()}", quota=quota,
                              cpus=SERVER_CPU)
        self.proc = pinned(SERVER_CPU, argv, stdout=subprocess.DEVNULL)
        try:
            for path in self.group.procs_files():
                path.write_text(str(self.proc.pid))
            wait_listening(self.port)
            subprocess.run([str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(self.port),
                            "-P", self.protocol(), "-t", "1", "-c", "4", "-d", str(VALUE),
                            "--key-minimum", "1", "--key-maximum", str(KEYS), "--populate",
                            "--json-out-file", str(workdir / "populate.json")],
                           check=True, capture_output=True, timeout=120)
        except BaseException:
            self.close()
            raise

    def protocol(self) -> str:
        return "redis" if self.kind == "redis" else "memcache_text"

    def cpu_seconds(self) -> float:
        return sum(self.group.usage())

    def close(self) -> None:
        stop(self.proc)
        self.group.remove()


def proxy_counts(port: int, redis: bool) -> tuple[int, int]:
    """A cachelab-proxy's requests forwarded so far and the batches its workers sent
    (`stats`, or INFO for a Redis pool): their ratio is what each server write carried."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"INFO\r\n" if redis else b"stats\r\n")
        text, end = b"", (b"# Pools" if redis else b"END\r\n")
        while end not in text:
            chunk = sock.recv(65536)
            if not chunk:
                break
            text += chunk
    pairs = [line.replace(":", " ").split()[-2:] for line in text.decode().splitlines()]
    values = {p[0]: p[1] for p in pairs if len(p) == 2}
    received = "total_commands_processed" if redis else "requests_received"
    return int(values[received]), int(values["worker_batches"])


def run(server: Server, port: int, run_time: float, out: Path, depth: int = 1,
        batches: bool = False) -> dict:
    """One closed-loop run of GETs; the server's CPU seconds per completed request (and,
    through a cachelab-proxy (`batches`), the requests each batch carried)."""
    argv = [str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port), "-P",
            server.protocol(), "-d", str(VALUE), "--ratio", "0:1", "-t", str(LOAD_THREADS),
            "-c", str(CLIENTS // LOAD_THREADS),
            "--pipeline", str(depth), "--key-minimum", "1", "--key-maximum", str(KEYS),
            "--key-pattern", "R:R", "--test-time", str(run_time),
            "--warmup", str(min(1.0, run_time / 4)), "--json-out-file", str(out)]
    redis = server.kind == "redis"
    counted = proxy_counts(port, redis) if batches else (0, 0)
    before = server.cpu_seconds()
    result = subprocess.run(["taskset", "-c", FLOATING, *argv], capture_output=True, text=True,
                            timeout=run_time + 60)
    cpu = server.cpu_seconds() - before
    sent, batched = 0, 0
    if batches:
        after = proxy_counts(port, redis)
        sent, batched = after[0] - counted[0], after[1] - counted[1]
    if result.returncode != 0:
        raise BenchError(f"cachelab-load failed: {result.stderr.strip()}")
    report = json.loads(out.read_text())
    total, completed = report["summary"]["total"], report["totals"]["completed"]
    return {"ops_per_sec": total["ops_per_sec"], "p99_ms": total["latency_ms"]["p99"],
            "errors": report["totals"]["errors"],
            "server_us_per_request": cpu / completed * 1e6 if completed else None,
            "requests_per_batch": sent / batched if batched else None}


def interleaved(server: Server, targets: list[tuple[str, int, int]], repeats: int,
                run_time: float, workdir: Path) -> dict[str, list[dict]]:
    """Every (name, port, depth) measured `repeats` times, interleaved."""
    runs: dict[str, list[dict]] = {name: [] for name, _, _ in targets}
    for _ in range(repeats):
        for name, port, depth in targets:
            runs[name].append(run(server, port, run_time, workdir / "load.json", depth,
                                  batches=name.startswith("cachelab")))
    return runs


def field(runs: list[dict], name: str) -> list[float | None]:
    return [r[name] for r in runs]


def median(runs: list[dict], name: str) -> float | None:
    values = [v for v in field(runs, name) if v is not None]
    return statistics.median(values) if values else None


def measure_kind(kind: str, args: argparse.Namespace, workdir: Path,
                 quota: float = 0.0) -> dict[str, list[dict]]:
    server = Server(kind, workdir, quota)
    proxies: list[Target] = []
    try:
        protocol = "redis" if kind == "redis" else "memcached"
        proxies = [start_cachelab([server.port], "production", protocol, cpus=FLOATING,
                                  mode_args=args.production),
                   start_cachelab([server.port], "production", protocol, cpus=FLOATING,
                                  mode_args=COALESCING_ARGS, name=COALESCING)]
        targets = [("direct", server.port, 1), ("cachelab-production", proxies[0].port, 1),
                   (COALESCING, proxies[1].port, 1)]
        if not quota:
            proxies.append(start_twemproxy([server.port], workdir, redis=kind == "redis",
                                           cpus=FLOATING))
            targets += [("direct-pipelined", server.port, DEPTH),
                        ("twemproxy", proxies[-1].port, 1)]
        return interleaved(server, targets, args.repeats, args.run_time, workdir)
    finally:
        stop_all(proxies)
        server.close()


def print_runs(title: str, runs: dict[str, list[dict]]) -> None:
    print(f"\n{title}")
    print(f"  {'target':<22}{'ops/s':>10}{'p99 ms':>9}{'server us/req':>15}{'errors':>8}"
          f"{'per batch':>11}")
    for name, reps in runs.items():
        us = median(reps, "server_us_per_request")
        batch = median(reps, "requests_per_batch")
        print(f"  {name:<22}{median(reps, 'ops_per_sec') or 0:>10.0f}"
              f"{median(reps, 'p99_ms') or 0:>9.3f}{us if us is not None else 0:>15.2f}"
              f"{sum(r['errors'] for r in reps):>8}"
              f"{f'{batch:.1f}' if batch is not None else '-':>11}")


def targets(redis: dict, memcached: dict, capped: dict) -> list:
    def cpu(row: dict, name: str) -> list[float | None]:
        return field(row[name], "server_us_per_request")

    def on(row: dict, a: str, b: str) -> list[float | None]:
        return ratios(cpu(row, a), cpu(row, b))

    def measures(proxy: str) -> list[tuple[str, list[float | None], str, float, str]]:
        return [
            ("S1", on(redis, proxy, "twemproxy"), AT_MOST, 1.0, "x"),
            ("S2", on(redis, proxy, "direct"), AT_MOST, 0.3, "x"),
            ("S3", on(memcached, proxy, "direct-pipelined"), AT_MOST, 1.0, "x"),
            ("S4", ratios(field(capped[proxy], "ops_per_sec"),
                          field(capped["direct"], "ops_per_sec")), AT_LEAST, 2.0, "x"),
            ("S5", differences(field(capped[proxy], "p99_ms"), field(capped["direct"], "p99_ms")),
             AT_MOST, 0.0, "ms"),
        ]

    # Judged on the production mode, as the issue asks; the coalescing configuration's
    # median beside each, in its note.
    verdicts = []
    for (name, values, op, bound, unit), (_, other, *_) in zip(
            measures("cachelab-production"), measures(COALESCING), strict=True):
        measured = [v for v in other if v is not None]
        beside = fmt(statistics.median(measured), unit) if measured else "n/a"
        note = f"{' '.join(COALESCING_ARGS)}: {beside}"
        verdicts.append(judge(name, "GET 64 B, closed", values, op, bound, unit=unit,
                              note=note))
    return verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--run-time", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="1 repetition of 2 s")
    parser.add_argument("--production", default=None,
                        help="the production mode's options instead of PRODUCTION_ARGS "
                             "(one string, e.g. \"-t 2 --pipeline 32\")")
    args = parser.parse_args()
    args.production = shlex.split(args.production) if args.production else None
    if args.quick:
        args.repeats, args.run_time = 1, 2.0
    if os.geteuid() != 0:
        raise SystemExit("server_cost_bench needs root: the servers' CPU is read from cgroups")
    stay_on(int(LOAD_CPU))
    for tool in ("taskset", "redis-server", "memcached", "nutcracker"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: run `make deps`")
    for binary in ("cachelab-load", "cachelab-proxy"):
        if not (BIN / binary).exists():
            raise SystemExit(f"{BIN / binary} missing: run `make build`")
    print(f"placement: server on CPU {SERVER_CPU}, proxy and load on CPUs {FLOATING}; "
          f"{CLIENTS} connections of {VALUE} B GETs ({LOAD_THREADS} load threads); "
          f"production mode {' '.join(args.production or PRODUCTION_ARGS)}; "
          f"{args.repeats} repetition(s) of {args.run_time:g} s")
    with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
        workdir = Path(tmp)
        redis = measure_kind("redis", args, workdir)
        print_runs("redis-server", redis)
        memcached = measure_kind("memcached", args, workdir)
        print_runs("memcached -t 1", memcached)
        capped = measure_kind("redis", args, workdir, quota=CAP)
        print_runs(f"redis-server capped at {CAP} core", capped)
        # No target: what merged gets (production mode) let a CPU-bound memcached serve.
        memcached_capped = measure_kind("memcached", args, workdir, quota=CAP)
        print_runs(f"memcached -t 1 capped at {CAP} core", memcached_capped)
    verdicts = targets(redis, memcached, capped)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "server-cost-latest.json"
    out.write_text(json.dumps({
        "format": 1, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "repeats": args.repeats,
        "run_time_s": args.run_time, "clients": CLIENTS, "value_bytes": VALUE, "cap": CAP,
        "placement": {"server": SERVER_CPU, "proxy": FLOATING, "load": FLOATING},
        "production": args.production or PRODUCTION_ARGS,
        "redis": redis, "memcached": memcached, "redis_capped": capped,
        "memcached_capped": memcached_capped,
        "targets": [t.as_json() for t in verdicts]}, indent=2))
    print("\nissue 34's server targets (median over repetitions, spread min..max):")
    print("\n".join(format_targets(verdicts, TITLES)))
    print(summary_line(verdicts))
    print(f"\nwritten {out}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        sys.exit(f"server_cost_bench: {exc}")
