"""The middleware against direct memcached and twemproxy, measured side by side.

    python bench/proxy_bench.py [--quick] [--repeats N] [--run-time S] [--baseline BIN]

Loopback only, bounded run times. cachelab-proxy runs in its default mode (a replicate
pool, `-m`), with the --pipeline extension (CACHELAB_MODES says how; both are printed),
and as a hashing pool from the very nutcracker.yml twemproxy runs with ("cachelab-shard":
the same servers, hash and ketama ring, so both shard keys the same way). `--baseline BIN`
adds another cachelab-proxy binary in its default mode ("baseline-default", e.g. an older
build) to show a change's cost. Placement on this
2-core machine: memcached on CPU 0, the proxy (cachelab-proxy or twemproxy) on CPU 1, the
load generator on CPU 0 (with the server: the proxy gets a core of its own, since its cost
is what is compared). Runs are interleaved (direct, cachelab, twemproxy, direct, ...) and
repeated; the median of the repetitions is reported. Steal time is read from /proc/stat for
every run, and a run with more than 5% steal is repeated (up to twice).

Writes bench/results/latest.json and prints a table with the ratios cachelab/twemproxy
and proxy/direct.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from _common import BenchError, free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "target" / "release"
RESULTS = ROOT / "bench" / "results"
SERVER_CPU, PROXY_CPU, LOAD_CPU = "0", "1", "0"
KEYS = 10_000
CLOSED_CLIENTS = 32
OPEN_RATE = 20_000
STEAL_LIMIT = 0.05
CLK_TCK = os.sysconf("SC_CLK_TCK")


def pinned(cpu: str, argv: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(["taskset", "-c", cpu, *argv], **kw)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def cpu_times() -> list[int]:
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def steal_fraction(before: list[int], after: list[int]) -> float:
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return delta[7] / sum(delta) if sum(delta) else 0.0


class Servers:
    """memcached instances pinned to the server CPU."""

    def __init__(self, n: int):
        self.ports = [free_port() for _ in range(n)]
        user = ["-u", "root"] if os.geteuid() == 0 else []
        self.procs = [pinned(SERVER_CPU, ["memcached", "-l", "127.0.0.1", "-p", str(p), "-U", "0",
                                          "-t", "1", "-m", "256", *user])
                      for p in self.ports]
        for p in self.ports:
            wait_listening(p)

    def close(self) -> None:
        for p in self.procs:
            stop(p)


@dataclass(frozen=True)
class Target:
    name: str
    proc: subprocess.Popen | None
    port: int


# The middleware's modes measured. Pinned to one CPU, the default (16 workers, one request
# per worker at a time) runs one runtime thread. "pipelined" is the --pipeline extension:
# 4 workers each take up to 16 waiting requests and send them in one write per server.
CACHELAB_MODES = {
    "default": [],
    "pipelined": ["-t", "4", "--pipeline", "16"],
}


def start_cachelab(ports: list[int], mode: str) -> Target:
    extra = CACHELAB_MODES[mode]
    proc = pinned(PROXY_CPU, [str(BIN / "cachelab-proxy"), "-p", "0", *extra, "-m",
                              *[f"127.0.0.1:{p}" for p in ports]],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    port = int(line.rsplit(":", 1)[1])
    wait_listening(port)
    return Target(f"cachelab-{mode}", proc, port)


def nutcracker_yml(ports: list[int], workdir: Path) -> tuple[Path, int]:
    """A nutcracker.yml over the servers, listening on a free port."""
    port = free_port()
    conf = workdir / f"nutcracker-{port}.yml"
    servers = "\n".join(f"   - 127.0.0.1:{p}:1" for p in ports)
    conf.write_text(f"pool:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n"
                    f"  distribution: ketama\n  auto_eject_hosts: false\n  redis: false\n"
                    f"  servers:\n{servers}\n")
    return conf, port


def start_twemproxy(ports: list[int], workdir: Path) -> Target:
    conf, port = nutcracker_yml(ports, workdir)
    proc = pinned(PROXY_CPU, ["nutcracker", "-c", str(conf), "-p", str(workdir / f"{port}.pid"),
                              "-o", str(workdir / f"{port}.log")])
    wait_listening(port)
    return Target("twemproxy", proc, port)


def start_cachelab_shard(ports: list[int], workdir: Path) -> Target:
    """cachelab-proxy with the nutcracker.yml twemproxy gets (its own listen port)."""
    conf, port = nutcracker_yml(ports, workdir)
    proc = pinned(PROXY_CPU, [str(BIN / "cachelab-proxy"), "--config", str(conf)],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdout.readline()
    wait_listening(port)
    return Target("cachelab-shard", proc, port)


def start_baseline(binary: Path, ports: list[int]) -> Target:
    proc = pinned(PROXY_CPU, [str(binary), "-p", "0", "-m", *[f"127.0.0.1:{p}" for p in ports]],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().rsplit(":", 1)[1])
    wait_listening(port)
    return Target("baseline-default", proc, port)


@dataclass(frozen=True)
class Case:
    backends: int
    value: int
    mix: str  # "get" or "1:1"
    loop: str  # "closed" or "open"


@dataclass
class Measure:
    ops_per_sec: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    errors: int
    proxy_cpu_s_per_100k: float | None
    steal: float


def load(port: int, case: Case, run_time: float, out: Path) -> dict:
    argv = [str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port), "-P", "memcache_text",
            "-t", "1", "-c", str(CLOSED_CLIENTS), "-d", str(case.value),
            "--key-minimum", "1", "--key-maximum", str(KEYS), "--key-pattern", "R:R",
            "--ratio", "0:1" if case.mix == "get" else "1:1",
            "--test-time", str(run_time), "--warmup", str(min(1.0, run_time / 4)),
            "--json-out-file", str(out)]
    if case.loop == "open":
        argv += ["--rate", str(OPEN_RATE)]
    result = subprocess.run(["taskset", "-c", LOAD_CPU, *argv], capture_output=True, text=True,
                            timeout=run_time + 60)
    if result.returncode != 0:
        raise SystemExit(f"cachelab-load failed: {result.stderr.strip()}")
    return json.loads(out.read_text())


def measure(target: Target, case: Case, run_time: float, workdir: Path) -> Measure:
    for _attempt in range(3):
        cpu_before = cpu_seconds(target.proc.pid) if target.proc else 0.0
        times_before = cpu_times()
        report = load(target.port, case, run_time, workdir / "load.json")
        steal = steal_fraction(times_before, cpu_times())
        cpu = cpu_seconds(target.proc.pid) - cpu_before if target.proc else None
        if steal <= STEAL_LIMIT:
            break
        print(f"  steal {steal:.1%} > {STEAL_LIMIT:.0%}: repeating", file=sys.stderr)
    total = report["summary"]["total"]
    completed = report["totals"]["completed"]
    return Measure(
        ops_per_sec=total["ops_per_sec"], p50_ms=total["latency_ms"]["p50"],
        p99_ms=total["latency_ms"]["p99"], p999_ms=total["latency_ms"]["p999"],
        errors=report["totals"]["errors"],
        proxy_cpu_s_per_100k=(cpu / completed * 1e5) if cpu is not None and completed else None,
        steal=steal)


def populate(ports: list[int], value: int, workdir: Path) -> None:
    for port in ports:
        subprocess.run([str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port),
                        "-P", "memcache_text", "-t", "1", "-c", "4", "-d", str(value),
                        "--key-minimum", "1", "--key-maximum", str(KEYS), "--populate",
                        "--json-out-file", str(workdir / "populate.json")],
                       check=True, capture_output=True, timeout=120)


def median_of(runs: list[Measure]) -> dict:
    def med(field):
        values = [getattr(r, field) for r in runs if getattr(r, field) is not None]
        return statistics.median(values) if values else None
    return {f: med(f) for f in asdict(runs[0])} | {"runs": len(runs)}


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--run-time", type=float, default=4.0)
    parser.add_argument("--quick", action="store_true", help="1 repeat of 2 s, 64-byte values only")
    parser.add_argument("--baseline", type=Path, metavar="BIN",
                        help="another cachelab-proxy binary, run in its default mode")
    parser.add_argument("--backends", type=int, nargs="+", default=[1, 3], choices=[1, 3])
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.run_time = 1, 2.0
    for tool in ("taskset", "memcached", "nutcracker"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: run `make deps`")
    for binary in ("cachelab-load", "cachelab-proxy"):
        if not (BIN / binary).exists():
            raise SystemExit(f"{BIN / binary} missing: run `make build`")
    values = [64] if args.quick else [64, 4096]
    cases = [Case(b, v, mix, loop) for b in args.backends for v in values
             for mix in ("get", "1:1") for loop in ("closed", "open")]
    results = []
    print("cachelab-proxy modes: " + "; ".join(
        f"{mode} = {' '.join(extra) or '(defaults)'}" for mode, extra in CACHELAB_MODES.items()))
    print(f"placement: memcached on CPU {SERVER_CPU}, proxy on CPU {PROXY_CPU}, "
          f"load generator on CPU {LOAD_CPU}")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        for backends in args.backends:
            servers = Servers(backends)
            targets = [*(start_cachelab(servers.ports, mode) for mode in CACHELAB_MODES),
                       start_cachelab_shard(servers.ports, workdir),
                       start_twemproxy(servers.ports, workdir)]
            if args.baseline:
                targets.insert(0, start_baseline(args.baseline, servers.ports))
            if backends == 1:
                targets.insert(0, Target("direct", None, servers.ports[0]))
            try:
                for case in (c for c in cases if c.backends == backends):
                    populate(servers.ports, case.value, workdir)
                    runs: dict[str, list[Measure]] = {t.name: [] for t in targets}
                    for _ in range(args.repeats):
                        for t in targets:  # interleaved: A B C A B C ...
                            runs[t.name].append(measure(t, case, args.run_time, workdir))
                    row = {"case": asdict(case)} | {n: median_of(r) for n, r in runs.items()}
                    results.append(row)
                    print_row(row)
            finally:
                for t in targets:
                    if t.proc:
                        stop(t.proc)
                servers.close()
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "latest.json"
    out.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M:%S"), "repeats": args.repeats,
        "run_time_s": args.run_time, "closed_clients": CLOSED_CLIENTS, "open_rate": OPEN_RATE,
        "placement": {"memcached": SERVER_CPU, "proxy": PROXY_CPU, "load": LOAD_CPU},
        "cachelab_modes": {mode: " ".join(args) or "(defaults)"
                           for mode, args in CACHELAB_MODES.items()},
        "note": "with 3 backends twemproxy and cachelab-shard shard keys (the same "
                "nutcracker.yml: fnv1a_64, ketama) while cachelab-default and -pipelined "
                "replicate sets to all 3 and balance gets round-robin",
        "baseline": str(args.baseline) if args.baseline else None,
        "results": results}, indent=2))
    print_targets(results)
    print(f"\nwritten {out}")


def spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def print_targets(results: list[dict]) -> None:
    """Issue 6's three targets, per cachelab mode, over the one-backend cases."""
    one = [r for r in results if r["case"]["backends"] == 1]
    print("\nagainst the targets (one backend; cpu <= 0.80x twemproxy, closed-loop throughput"
          " >= 1.20x twemproxy, open-loop p99 added over direct <= 50 us):")
    for mode in (*(f"cachelab-{mode}" for mode in CACHELAB_MODES), "cachelab-shard"):
        cpu = spread([ratio(r[mode]["proxy_cpu_s_per_100k"], r["twemproxy"]["proxy_cpu_s_per_100k"])
                      for r in one])
        tput = spread([ratio(r[mode]["ops_per_sec"], r["twemproxy"]["ops_per_sec"])
                       for r in one if r["case"]["loop"] == "closed"])
        added = [1000 * (r[mode]["p99_ms"] - r["direct"]["p99_ms"])
                 for r in one if r["case"]["loop"] == "open"]
        added_tw = [1000 * (r["twemproxy"]["p99_ms"] - r["direct"]["p99_ms"])
                    for r in one if r["case"]["loop"] == "open"]
        print(f"  {mode}: cpu/request x{cpu}, throughput x{tput}, p99 added "
              f"{min(added):+.0f}..{max(added):+.0f} us (twemproxy {min(added_tw):+.0f}.."
              f"{max(added_tw):+.0f} us)" if added else f"  {mode}: cpu x{cpu}, throughput x{tput}")


def print_row(row: dict) -> None:
    c = row["case"]
    label = f"{c['backends']} backend(s), {c['value']} B, {c['mix']}, {c['loop']} loop"
    print(f"\n{label}")
    print(f"  {'target':<18}{'ops/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'p99.9':>9}"
          f"{'cpu s/100k':>12}{'errors':>8}")
    for name, m in row.items():
        if name == "case":
            continue
        cpu = f"{m['proxy_cpu_s_per_100k']:.3f}" if m["proxy_cpu_s_per_100k"] is not None else "-"
        print(f"  {name:<18}{m['ops_per_sec']:>10.0f}{m['p50_ms']:>9.3f}{m['p99_ms']:>9.3f}"
              f"{m['p999_ms']:>9.3f}{cpu:>12}{m['errors']:>8}")
    tw = row["twemproxy"]
    for mode in [*(f"cachelab-{mode}" for mode in CACHELAB_MODES), "cachelab-shard",
                 *(["baseline-default"] if "baseline-default" in row else [])]:
        m = row[mode]
        parts = [f"throughput x{ratio(m['ops_per_sec'], tw['ops_per_sec']):.2f}",
                 f"cpu/request x{ratio(m['proxy_cpu_s_per_100k'], tw['proxy_cpu_s_per_100k']):.2f}"]
        if "direct" in row:
            d = row["direct"]
            parts.append(f"p99 added {1000 * (m['p99_ms'] - d['p99_ms']):+.0f} us over direct")
            parts.append(f"throughput vs direct x{ratio(m['ops_per_sec'], d['ops_per_sec']):.2f}")
        print(f"  {mode} / twemproxy: " + ", ".join(parts))


if __name__ == "__main__":
    try:
        main()
    except BenchError as exc:
        raise SystemExit(f"proxy_bench: {exc}") from None
