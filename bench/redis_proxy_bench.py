"""Redis pools: the middleware against twemproxy's Redis mode and direct redis-server.

    python bench/redis_proxy_bench.py [--quick] [--repeats N] [--run-time S]
                                      [--backends {1,3} ...]

Loopback only, bounded run times. Both proxies get the very same nutcracker.yml
(`redis: true`, fnv1a_64, ketama), so both shard every key to the same redis-server
("cachelab-shard" and "twemproxy"; "cachelab-shard-production" is the same file with
proxy_bench's PRODUCTION_ARGS, whose workers share a connection per server as
twemproxy's clients do); cachelab-proxy also runs the original study's
structure as a replicate pool (`--protocol redis -m ...`) in its "default" (W = 64
workers) and "production" (proxy_bench's PRODUCTION_ARGS) modes, where SETs go to every
server and GETs and MGETs round-robin.

Workloads: GET, SET and MGET of 10 keys (`--multiget-keys 10`), 64-byte values, keys
1..10,000 written to every server first; closed loop with 20 connections, and open loop
at OPEN_RATE requests/s. Placement as in proxy_bench: the redis-servers and the load
generator on CPU 0, the proxy under test on CPU 1, so its CPU per request is what is
compared. Runs are interleaved and repeated, the medians tabulated, every repetition kept.

Duration: the default (backends 1 and 3, 3 repetitions of 3 s, 6 cases each, 5 targets at
most) about 10 minutes; `--quick` (1 repetition of 2 s, 1 backend) about a minute.

Writes bench/results/redis-latest.json and prints per case the CPU per request and the
throughput of each cachelab configuration as a ratio to twemproxy's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from _common import BenchError, free_port, stay_on, wait_listening
from _proxy_targets import fmt_median, per_rep
from _targets import ratios
from proxy_bench import (
    BIN,
    CLOSED_CLIENTS,
    KEYS,
    LOAD_CPU,
    PRODUCTION_ARGS,
    PROXY_CPU,
    RESULTS,
    SERVER_CPU,
    Target,
    interleaved,
    pinned,
    start_cachelab,
    start_cachelab_shard,
    start_twemproxy,
    stop,
    stop_all,
)

OPEN_RATE = 20_000  # requests/s in total, open loop
VALUE = 64
CACHELAB_REDIS_MODES = ("default", "production")

# The three commands measured, as cachelab-load flags (GET, SET, MGET of 10 keys).
WORKLOADS = {
    "GET": ["--ratio", "0:1"],
    "SET": ["--ratio", "1:0"],
    "MGET 10": ["--ratio", "0:1", "--multiget-keys", "10"],
}


class RedisServers:
    """redis-server instances without persistence, pinned to the server CPU."""

    def __init__(self, n: int, workdir: Path):
        self.ports = [free_port() for _ in range(n)]
        self.procs = [pinned(SERVER_CPU, ["redis-server", "--bind", "127.0.0.1", "--port", str(p),
                                          "--save", "", "--appendonly", "no",
                                          "--dir", str(workdir), "--protected-mode", "no"],
                             stdout=subprocess.DEVNULL)
                      for p in self.ports]
        for p in self.ports:
            wait_listening(p)

    def populate(self, workdir: Path) -> None:
        """Every key on every server, so replicate and shard pools alike find them all."""
        for port in self.ports:
            subprocess.run([str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port),
                            "-P", "redis", "-t", "1", "-c", "4", "-d", str(VALUE),
                            "--key-minimum", "1", "--key-maximum", str(KEYS), "--populate",
                            "--json-out-file", str(workdir / "populate.json")],
                           check=True, capture_output=True, timeout=120)

    def close(self) -> None:
        for p in self.procs:
            stop(p)


@dataclass(frozen=True)
class Case:
    backends: int
    command: str  # a key of WORKLOADS
    rate: int | None  # requests/s in total, open loop; None: closed loop

    def label(self) -> str:
        loop = "closed" if self.rate is None else f"open {self.rate // 1000}k/s"
        return f"{self.command}, {loop}"

    def workload(self) -> list[str]:
        return ["-P", "redis", "-d", str(VALUE), *WORKLOADS[self.command]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions")
    parser.add_argument("--run-time", type=float, default=3.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true",
                        help="1 repetition of 2 s with one backend")
    parser.add_argument("--backends", type=int, nargs="+", default=[1, 3], choices=[1, 3],
                        help="redis-servers behind the proxies")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.run_time, args.backends = 1, 2.0, [1]
    stay_on(int(LOAD_CPU))
    for tool in ("taskset", "redis-server", "nutcracker"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: run `make deps`")
    for binary in ("cachelab-load", "cachelab-proxy"):
        if not (BIN / binary).exists():
            raise SystemExit(f"{BIN / binary} missing: run `make build`")
    cases = [Case(b, command, rate) for b in args.backends for command in WORKLOADS
             for rate in (None, OPEN_RATE)]
    print(f"placement: redis-server on CPU {SERVER_CPU}, proxy on CPU {PROXY_CPU}, "
          f"load generator on CPU {LOAD_CPU}; {CLOSED_CLIENTS} connections, {VALUE} B values; "
          f"{args.repeats} repetition(s) of {args.run_time:g} s")
    results = []
    with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
        workdir = Path(tmp)
        for backends in args.backends:
            servers = RedisServers(backends, workdir)
            targets: list[Target] = []
            try:
                targets = [*(start_cachelab(servers.ports, mode, "redis")
                             for mode in CACHELAB_REDIS_MODES),
                           start_cachelab_shard(servers.ports, workdir, redis=True),
                           start_cachelab_shard(servers.ports, workdir, redis=True,
                                                extra_args=PRODUCTION_ARGS,
                                                name="cachelab-shard-production"),
                           start_twemproxy(servers.ports, workdir, redis=True)]
                if backends == 1:
                    targets.insert(0, Target("direct", None, servers.ports[0]))
                servers.populate(workdir)
                for case in (c for c in cases if c.backends == backends):
                    row = {"case": asdict(case)} | interleaved(
                        targets, case.workload(), case.rate, args.repeats, args.run_time,
                        workdir)
                    results.append(row)
                    print_row(row)
            finally:
                stop_all(targets)
                servers.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "redis-latest.json"
    out.write_text(json.dumps({
        "format": 1, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "repeats": args.repeats,
        "run_time_s": args.run_time, "closed_clients": CLOSED_CLIENTS, "open_rate": OPEN_RATE,
        "value_bytes": VALUE,
        "placement": {"redis-server": SERVER_CPU, "proxy": PROXY_CPU, "load": LOAD_CPU},
        "note": "twemproxy and cachelab-shard shard keys with the same nutcracker.yml "
                "(redis: true, fnv1a_64, ketama); cachelab-default and -production replicate "
                "SETs to every server and balance GETs and MGETs round-robin",
        "results": results}, indent=2))
    print("\nsummary: cachelab / twemproxy, median over repetitions of the per-repetition "
          "ratio (CPU per request; throughput)")
    for row in results:
        case = Case(**row["case"])
        parts = []
        for name in (n for n in row if n.startswith("cachelab-")):
            cpu = ratios(per_rep(row, name, "proxy_cpu_s_per_100k"),
                         per_rep(row, "twemproxy", "proxy_cpu_s_per_100k"))
            tput = ratios(per_rep(row, name, "ops_per_sec"),
                          per_rep(row, "twemproxy", "ops_per_sec"))
            parts.append(f"{name.removeprefix('cachelab-')} cpu {fmt_median(cpu)} "
                         f"tput {fmt_median(tput)}")
        print(f"  {case.backends} backend(s), {case.label():<20} " + "; ".join(parts))
    print(f"\nwritten {out}")


def print_row(row: dict) -> None:
    case = Case(**row["case"])
    print(f"\n{case.backends} backend(s), {case.label()}")
    print(f"  {'target':<21}{'ops/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'cpu s/100k':>12}"
          f"{'errors':>8}")
    for name, m in row.items():
        if name == "case":
            continue
        cpu = f"{m['proxy_cpu_s_per_100k']:.3f}" if m["proxy_cpu_s_per_100k"] is not None else "-"
        behind = "  FELL BEHIND" if m["fell_behind"] else ""
        print(f"  {name:<21}{m['ops_per_sec']:>10.0f}{m['p50_ms']:>9.3f}{m['p99_ms']:>9.3f}"
              f"{cpu:>12}{m['errors']:>8}{behind}")


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        raise SystemExit(f"redis_proxy_bench: {exc}") from None
    except subprocess.CalledProcessError as exc:
        sys.exit(f"redis_proxy_bench: {' '.join(map(str, exc.cmd[:2]))} failed: {exc.stderr}")
