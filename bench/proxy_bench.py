"""The middleware against direct memcached and twemproxy, measured side by side.

    python bench/proxy_bench.py [--quick] [--repeats N] [--run-time S] [--baseline BIN]
                                [--proxy-arg ARG ...] [--backends {1,3} ...]

Loopback only, bounded run times. cachelab-proxy runs as a replicate pool (`-m`) in four
configurations (CACHELAB_MODES; all are printed): "default", the original study's
structure (W = 64 workers, one request per worker at the servers), "production", the
configuration recommended for speed (PRODUCTION_ARGS, docs/performance.md), and
"busy-poll", the same spinning 100 us after each read (`--busy-poll-us`), and "unshared",
production with a server connection per worker rather than one shared by all four; and as a
hashing pool
from the very nutcracker.yml twemproxy runs with ("cachelab-shard": the same servers,
hash and ketama ring, so both shard keys the same way). `--baseline BIN` adds another
cachelab-proxy binary (e.g. an older build) in the production and default modes
("baseline-production", "baseline-default") to show a change's cost in both.
`--proxy-arg ARG` (repeatable) is appended to the current binary's command line in its
modes.
With one backend, "floor" is cachelab-floor (bench/floor): a bare
single-threaded epoll proxy with no features, the least CPU per request any proxy of
this kind spends here; its ratios to twemproxy are printed beside T1a and T1b, so a
target that even the floor misses shows as the platform's, not our code's.

Placement on this 2-core machine: memcached on CPU 0, the proxy
(cachelab-proxy or twemproxy) on CPU 1, the load generator on CPU 0 (with the server: the
proxy gets a core of its own, since its cost is what is compared).

Load: CLOSED_CLIENTS connections, closed loop or open loop at each of OPEN_RATES; values
of 64 B and 4 KiB; GETs only or SET:GET 1:1. Runs are interleaved (direct, cachelab...,
twemproxy, direct, ...) and repeated; the medians are tabulated and every repetition is
kept in the JSON. Steal time is read from /proc/stat for every run, and a run with more
than 5% steal is repeated (up to twice). Issue 14's targets are judged on the one-backend
cases, each on the median over repetitions of the per-repetition ratio (repetition i of
cachelab against repetition i of twemproxy), with the min-max spread beside it; issue
20's the same way, against the floor (T20a, T20b) and twemproxy (T20c), and T20d on the
production mode's user time per request (bench/_proc_cpu.py says how it is measured).

Duration: the default (1 backend, 3 repetitions of 4 s, 12 cases, 5 + 4 targets) about
17 minutes; `--baseline` about 5 more (each configuration added about 2.5),
`--backends 1 3` about 10; `--quick` (1 repetition of 2 s, 64 B only, so
its target lines are not verdicts) about a minute.

Writes bench/results/latest.json and prints a table with the ratios cachelab/twemproxy
and proxy/direct, then one line per target with PASS/MISS.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from _common import (
    BenchError,
    cpu_times,
    free_port,
    stay_on,
    steal_fraction,
    wait_listening,
)
from _proc_cpu import sample, user_ns
from _proxy_targets import (
    FLOOR,
    OPEN_RATES,
    TITLES,
    TITLES20,
    TITLES34,
    Case,
    issue14_targets,
    issue20_targets,
    issue34_targets,
)
from _targets import format_targets, summary_line

# The configuration recommended for speed (docs/performance.md), measured as
# "cachelab-production" and judged against issue 14's first targets. Change it here when
# the recommendation changes.
PRODUCTION_ARGS = ["-t", "4", "--pipeline", "16", "--share-connections", "--merge-gets"]

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "target" / "release"
# Where cachelab-proxy and cachelab-floor are taken from: BIN, or with --pgo the
# profile-guided builds of bench/pgo.py (the load generator is always BIN's).
BUILT = BIN
RESULTS = ROOT / "bench" / "results"
SERVER_CPU, PROXY_CPU, LOAD_CPU = "0", "1", "0"
KEYS = 10_000
CLOSED_CLIENTS = 20  # connections of the load generator, closed and open loop alike
STEAL_LIMIT = 0.05


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


# The middleware's configurations measured. "default" is the original study's structure:
# 64 workers, one request per worker at the servers (pinned to one CPU it runs one
# runtime thread). "production" is PRODUCTION_ARGS, what docs/performance.md recommends.
CACHELAB_MODES = {
    "default": ["-t", "64"],
    "production": PRODUCTION_ARGS,
    # Production spinning instead of sleeping after each read: the CPU it costs for the
    # latency it saves (T1c's second line).
    "busy-poll": [*PRODUCTION_ARGS, "--busy-poll-us", "100"],
    # Production with each worker on its own server connections (the production mode
    # until 2026-11-28): what sharing them buys and costs, in the same run.
    "unshared": ["-t", "4", "--pipeline", "16"],
}


def start_cachelab(ports: list[int], mode: str, protocol: str = "memcached",
                   extra_args: Sequence[str] = (), binary: Path | None = None,
                   name: str | None = None, cpus: str = PROXY_CPU,
                   mode_args: Sequence[str] | None = None) -> Target:
    """cachelab-proxy in one of CACHELAB_MODES (its options replaced by `mode_args` if
    given), `extra_args` appended to its command line, on `cpus`; named "cachelab-MODE"
    unless `name` says otherwise."""
    extra = list(CACHELAB_MODES[mode] if mode_args is None else mode_args)
    if protocol != "memcached":  # the flag is left out for memcached, the default
        extra = ["--protocol", protocol, *extra]
    binary = binary or BUILT / "cachelab-proxy"
    proc = pinned(cpus, [str(binary), "-p", "0", *extra, *extra_args, "-m",
                              *[f"127.0.0.1:{p}" for p in ports]],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    if not line:
        proc.wait()
        raise BenchError(f"{binary} {' '.join([*extra, *extra_args])} exited at start "
                         f"(exit code {proc.returncode})")
    port = int(line.rsplit(":", 1)[1])
    wait_listening(port)
    return Target(name or f"cachelab-{mode}", proc, port)


def nutcracker_yml(ports: list[int], workdir: Path, redis: bool = False) -> tuple[Path, int]:
    """A nutcracker.yml over the servers (memcached, or Redis with `redis`), listening on
    a free port."""
    port = free_port()
    conf = workdir / f"nutcracker-{port}.yml"
    servers = "\n".join(f"   - 127.0.0.1:{p}:1" for p in ports)
    conf.write_text(f"pool:\n  listen: 127.0.0.1:{port}\n  hash: fnv1a_64\n"
                    f"  distribution: ketama\n  auto_eject_hosts: false\n"
                    f"  redis: {'true' if redis else 'false'}\n"
                    f"  servers:\n{servers}\n")
    return conf, port


def start_twemproxy(ports: list[int], workdir: Path, redis: bool = False,
                    cpus: str = PROXY_CPU) -> Target:
    conf, port = nutcracker_yml(ports, workdir, redis)
    proc = pinned(cpus, ["nutcracker", "-c", str(conf), "-p", str(workdir / f"{port}.pid"),
                              "-o", str(workdir / f"{port}.log")])
    wait_listening(port)
    return Target("twemproxy", proc, port)


def start_cachelab_shard(ports: list[int], workdir: Path, redis: bool = False,
                         extra_args: Sequence[str] = (),
                         name: str = "cachelab-shard") -> Target:
    """cachelab-proxy with the nutcracker.yml twemproxy gets (its own listen port), with
    `extra_args`; each call writes its own file (its own port)."""
    conf, port = nutcracker_yml(ports, workdir, redis)
    proc = pinned(PROXY_CPU, [str(BUILT / "cachelab-proxy"), "--config", str(conf), *extra_args],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    proc.stdout.readline()
    wait_listening(port)
    return Target(name, proc, port)




def start_floor(port: int, extra_args: Sequence[str] = ()) -> Target:
    proc = pinned(PROXY_CPU, [str(BUILT / "cachelab-floor"), "-p", "0", "-s", f"127.0.0.1:{port}",
                              *extra_args],
                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(proc.stdout.readline().rsplit(":", 1)[1])
    wait_listening(port)
    return Target(FLOOR, proc, port)


# The modes the --baseline binary runs in too ("baseline-MODE"), so a change's before
# and after show in both.
COMPARED_MODES = ("production", "default")


def start_baseline(binary: Path, ports: list[int], mode: str) -> Target:
    return start_cachelab(ports, mode, binary=binary, name=f"baseline-{mode}")


def start_proxies(ports: list[int], workdir: Path, proxy_args: Sequence[str],
                  baseline: Path | None) -> list[Target]:
    """Every proxy measured over `ports` but the floor, in the order they are measured:
    the baseline binary in COMPARED_MODES, the current binary in each of CACHELAB_MODES
    with `proxy_args`, cachelab-shard, twemproxy. If one fails to start, those already up
    are stopped."""
    targets: list[Target] = []
    try:
        for mode in COMPARED_MODES if baseline else ():
            targets.append(start_baseline(baseline, ports, mode))
        for mode in CACHELAB_MODES:
            targets.append(start_cachelab(ports, mode, extra_args=proxy_args))
        targets.append(start_cachelab_shard(ports, workdir))
        targets.append(start_twemproxy(ports, workdir))
    except BaseException:
        stop_all(targets)
        raise
    return targets


@dataclass
class Measure:
    ops_per_sec: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    errors: int
    proxy_cpu_s_per_100k: float | None
    steal: float
    send_lag_p99_ms: float | None  # the load generator's own timing error, open loop
    fell_behind: bool | None
    # The proxy's user-mode time per completed request (_proc_cpu.user_ns), over the same
    # interval as proxy_cpu_s_per_100k: from just before the load generator starts to
    # just after it exits, warm-up included in both.
    proxy_user_ns_per_request: float | None = None


def load_argv(case: Case) -> list[str]:
    """The load generator's workload flags for a case of this script."""
    return ["-P", "memcache_text", "-d", str(case.value),
            "--ratio", "0:1" if case.mix == "get" else "1:1"]


def load(port: int, workload: list[str], rate: int | None, run_time: float, out: Path) -> dict:
    """One closed-loop (rate None) or open-loop run of cachelab-load on the load CPU;
    `workload` is its protocol, value size and mix (load_argv)."""
    argv = [str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port), *workload,
            "-t", "1", "-c", str(CLOSED_CLIENTS),
            "--key-minimum", "1", "--key-maximum", str(KEYS), "--key-pattern", "R:R",
            "--test-time", str(run_time), "--warmup", str(min(1.0, run_time / 4)),
            "--json-out-file", str(out)]
    if rate is not None:
        argv += ["--rate", str(rate)]
    result = subprocess.run(["taskset", "-c", LOAD_CPU, *argv], capture_output=True, text=True,
                            timeout=run_time + 60)
    if result.returncode != 0:
        raise SystemExit(f"cachelab-load failed: {result.stderr.strip()}")
    return json.loads(out.read_text())


def measure(target: Target, workload: list[str], rate: int | None, run_time: float,
            workdir: Path) -> Measure:
    for _attempt in range(3):
        before = sample(target.proc.pid) if target.proc else None
        times_before = cpu_times()
        report = load(target.port, workload, rate, run_time, workdir / "load.json")
        steal = steal_fraction(times_before, cpu_times())
        after = sample(target.proc.pid) if target.proc else None
        cpu = after.cpu_seconds - before.cpu_seconds if before and after else None
        user = user_ns(before, after) if before and after else None
        if steal <= STEAL_LIMIT:
            break
        print(f"  steal {steal:.1%} > {STEAL_LIMIT:.0%}: repeating", file=sys.stderr)
    total = report["summary"]["total"]
    completed = report["totals"]["completed"]
    open_loop = report.get("open_loop")
    return Measure(
        ops_per_sec=total["ops_per_sec"], p50_ms=total["latency_ms"]["p50"],
        p99_ms=total["latency_ms"]["p99"], p999_ms=total["latency_ms"]["p999"],
        errors=report["totals"]["errors"],
        proxy_cpu_s_per_100k=(cpu / completed * 1e5) if cpu is not None and completed else None,
        steal=steal,
        send_lag_p99_ms=open_loop["send_lag_ms"]["p99"] if open_loop else None,
        fell_behind=open_loop["fell_behind"] if open_loop else None,
        proxy_user_ns_per_request=user / completed if user is not None and completed else None)


def populate(ports: list[int], value: int, workdir: Path) -> None:
    for port in ports:
        subprocess.run([str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port),
                        "-P", "memcache_text", "-t", "1", "-c", "4", "-d", str(value),
                        "--key-minimum", "1", "--key-maximum", str(KEYS), "--populate",
                        "--json-out-file", str(workdir / "populate.json")],
                       check=True, capture_output=True, timeout=120)


def median_of(runs: list[Measure]) -> dict:
    """Each field's median over the repetitions, the repetitions themselves under
    "repetitions" (in run order), and fell_behind if any repetition fell behind."""
    def med(field):
        values = [getattr(r, field) for r in runs if getattr(r, field) is not None]
        return statistics.median(values) if values else None
    falls = [r.fell_behind for r in runs if r.fell_behind is not None]
    return ({f: med(f) for f in asdict(runs[0])}
            | {"fell_behind": any(falls) if falls else None, "runs": len(runs),
               "repetitions": [asdict(r) for r in runs]})


def interleaved(targets: list[Target], workload: list[str], rate: int | None, repeats: int,
                run_time: float, workdir: Path) -> dict:
    """One case's row: every target measured `repeats` times, interleaved (A B C A B C
    ...), each field's median with the repetitions kept (median_of)."""
    runs: dict[str, list[Measure]] = {t.name: [] for t in targets}
    for _ in range(repeats):
        for t in targets:
            runs[t.name].append(measure(t, workload, rate, run_time, workdir))
    return {n: median_of(r) for n, r in runs.items()}


def stop_all(targets: list[Target]) -> None:
    for t in targets:
        if t.proc:
            stop(t.proc)


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="interleaved repetitions of every run (targets need 3 or more)")
    parser.add_argument("--run-time", type=float, default=4.0, help="seconds per run")
    parser.add_argument("--quick", action="store_true",
                        help="1 repetition of 2 s, 64-byte values only (targets not verdicts)")
    parser.add_argument("--baseline", type=Path, metavar="BIN",
                        help="another cachelab-proxy binary (an older build), run in the "
                             "production and default modes as baseline-production and "
                             "baseline-default")
    parser.add_argument("--proxy-arg", action="append", default=[], metavar="ARG",
                        help="appended to the current cachelab-proxy's command line in its "
                             "modes (not cachelab-shard's, nor the baseline's); repeat it "
                             "per word: --proxy-arg=--loops --proxy-arg=2")
    parser.add_argument("--pgo", action="store_true",
                        help="measure the profile-guided cachelab-proxy and cachelab-floor "
                             "that bench/pgo.py builds into target/pgo/release")
    parser.add_argument("--backends", type=int, nargs="+", default=[1], choices=[1, 3],
                        help="memcached servers behind the proxies (targets use 1)")
    args = parser.parse_args()
    if args.quick:
        args.repeats, args.run_time = 1, 2.0
    if args.baseline and not args.baseline.is_file():
        raise BenchError(f"--baseline {args.baseline}: no such file")
    stay_on(int(LOAD_CPU))  # off the proxy's CPU, whose CPU time and p99 are measured
    for tool in ("taskset", "memcached", "nutcracker"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found: run `make deps`")
    global BUILT
    if args.pgo:
        BUILT = ROOT / "target" / "pgo" / "release"
    for binary in ("cachelab-load", "cachelab-proxy", "cachelab-floor"):
        path = (BIN if binary == "cachelab-load" else BUILT) / binary
        if not path.exists():
            raise SystemExit(f"{path} missing: run `make build`"
                             + (" and `python bench/pgo.py`" if args.pgo else ""))
    print(f"cachelab-proxy and cachelab-floor from {BUILT.relative_to(ROOT)}")
    values = [64] if args.quick else [64, 4096]
    loops = [("closed", None), *(("open", rate) for rate in OPEN_RATES)]
    cases = [Case(b, v, mix, loop, rate) for b in args.backends for v in values
             for mix in ("get", "1:1") for loop, rate in loops]
    results = []
    print("cachelab-proxy modes: " + "; ".join(
        f"{mode} = {' '.join(extra) or '(defaults)'}" for mode, extra in CACHELAB_MODES.items()))
    if args.proxy_arg:
        print(f"current cachelab-proxy's modes with: {' '.join(args.proxy_arg)}")
    print(f"placement: memcached on CPU {SERVER_CPU}, proxy on CPU {PROXY_CPU}, "
          f"load generator on CPU {LOAD_CPU}; {CLOSED_CLIENTS} connections; "
          f"{args.repeats} repetition(s) of {args.run_time:g} s")
    with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
        workdir = Path(tmp)
        for backends in args.backends:
            servers = Servers(backends)
            try:
                targets = start_proxies(servers.ports, workdir, args.proxy_arg, args.baseline)
            except BaseException:
                servers.close()
                raise
            try:
                if backends == 1:
                    targets.append(start_floor(servers.ports[0]))
                    targets.insert(0, Target("direct", None, servers.ports[0]))
                for case in (c for c in cases if c.backends == backends):
                    populate(servers.ports, case.value, workdir)
                    row = {"case": asdict(case)} | interleaved(
                        targets, load_argv(case), case.rate, args.repeats, args.run_time,
                        workdir)
                    results.append(row)
                    print_row(row)
            finally:
                stop_all(targets)
                servers.close()
    verdicts = issue14_targets(results)
    verdicts20 = issue20_targets(results)
    verdicts34 = issue34_targets(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / "latest.json"
    # Format 3: issue20_targets, proxy_user_ns_per_request, proxy_args; the
    # baseline runs in COMPARED_MODES (format 2 ran it once with its own defaults);
    # issue34_targets since 2026-11-28.
    out.write_text(json.dumps({
        "format": 3, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "repeats": args.repeats,
        "run_time_s": args.run_time, "closed_clients": CLOSED_CLIENTS,
        "open_rates": list(OPEN_RATES),
        "placement": {"memcached": SERVER_CPU, "proxy": PROXY_CPU, "load": LOAD_CPU},
        "cachelab_modes": {mode: " ".join(extra) or "(defaults)"
                           for mode, extra in CACHELAB_MODES.items()},
        "proxy_args": args.proxy_arg,
        "build": "pgo" if args.pgo else "release",
        "note": "with 3 backends twemproxy and cachelab-shard shard keys (the same "
                "nutcracker.yml: fnv1a_64, ketama) while cachelab-default and -production "
                "replicate sets to all 3 and balance gets round-robin",
        "baseline": str(args.baseline) if args.baseline else None,
        "results": results,
        "targets": [t.as_json() for t in verdicts],
        "issue20_targets": [t.as_json() for t in verdicts20],
        "issue34_targets": [t.as_json() for t in verdicts34]}, indent=2))
    for issue, ts, titles in (("14", verdicts, TITLES), ("20", verdicts20, TITLES20),
                              ("34", verdicts34, TITLES34)):
        print(f"\nissue {issue}'s targets (one backend; median over repetitions of the "
              "per-repetition value, spread min..max):")
        print("\n".join(format_targets(ts, titles)))
        print(summary_line(ts))
    print(f"\nwritten {out}")


def print_row(row: dict) -> None:
    c = row["case"]
    print(f"\n{c['backends']} backend(s), {Case(**c).label()}")
    print(f"  {'target':<26}{'ops/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'p99.9':>9}"
          f"{'cpu s/100k':>12}{'user ns':>9}{'errors':>8}  lag p99")
    for name, m in row.items():
        if name == "case":
            continue
        cpu = f"{m['proxy_cpu_s_per_100k']:.3f}" if m["proxy_cpu_s_per_100k"] is not None else "-"
        user = m.get("proxy_user_ns_per_request")
        user = f"{user:.0f}" if user is not None else "-"
        lag = m["send_lag_p99_ms"]
        # The load generator's own timing error: flagged when it exceeds a tenth of the p99
        # it measured (then the p99 says as much about the client as about the server).
        flag = " (!)" if lag is not None and lag > m["p99_ms"] / 10 else ""
        lag = f"{lag:.3f}{flag}" if lag is not None else "-"
        if m["fell_behind"]:
            lag += " FELL BEHIND"
        print(f"  {name:<26}{m['ops_per_sec']:>10.0f}{m['p50_ms']:>9.3f}{m['p99_ms']:>9.3f}"
              f"{m['p999_ms']:>9.3f}{cpu:>12}{user:>9}{m['errors']:>8}  {lag}")
    tw = row["twemproxy"]
    for mode in (name for name in row if name not in ("case", "direct", "twemproxy")):
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
