#!/usr/bin/env python3
"""The load generator's clocks against a packet capture of the same run (issue 24).

    python bench/wire_bench.py [--quick] [--repeats N]

Against one memcached on loopback (`-t 1`, pinned to CPU 0; cachelab-load pinned to
CPU 1, 1 thread, open loop, no busy-polling), at each rate of RATES with each number of
connections of CONNECTIONS, every repetition runs cachelab-load for RUN_SECONDS while
cachelab-wirecap (crates/cachelab-testkit, an AF_PACKET capture on `lo`; needs root)
captures the run's frames and pairs each request with its reply: the capture's wire time
runs from the frame holding a request's last byte to the frame holding its reply's last
byte. Printed per case, as the median over repetitions of the per-repetition value:
- the reported wire time (kernel transmit to kernel receipt, `timing.wire_ms`) minus
  the capture's, at p50 and p99: the target (W1, W2);
- the user-space latency (scheduled send to the reply read by the program,
  `timing.user_latency_ms`) minus the capture's wire time, at p50 and p99: what a
  generator timing requests in user space alone would add (no target).

Duration: the default (3 repetitions) about 45 seconds; `--quick` (1 repetition) about 15.
Plain Python 3 standard library; loopback only; every process is bounded in time.
Writes bench/results/wire.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import BenchError, cpu_times, free_port, stay_on, steal_fraction, wait_listening
from _targets import WITHIN, differences, format_targets, judge, summary_line

ROOT = Path(__file__).resolve().parent.parent
LOAD = ROOT / "target" / "release" / "cachelab-load"
WIRECAP = ROOT / "target" / "release" / "cachelab-wirecap"
RESULTS = ROOT / "bench" / "results" / "wire.json"

RATES = (2_000, 20_000)
CONNECTIONS = (1, 20)
RUN_SECONDS = 3
VALUE = 64
KEYS = 10_000
TIMEOUT = 60  # no single process may run longer than this
WIRE_P50_US = 5
WIRE_P99_US = 20

TITLES = {
    "W1": f"W1 reported wire time minus the capture's, p50: within {WIRE_P50_US} us",
    "W2": f"W2 reported wire time minus the capture's, p99: within {WIRE_P99_US} us",
}


def cores() -> tuple[list[str], list[str]]:
    """taskset prefixes for the server (and capture) and the load generator."""
    if (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", "0"], ["taskset", "-c", "1"]
    return [], []


def one_run(client: list[str], server: list[str], port: int, rate: int,
            connections: int, seconds: float) -> dict:
    """One cachelab-load run under capture: the report's and the capture's figures."""
    cap = subprocess.Popen(server + [str(WIRECAP), str(port)], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if cap.stdout.readline().strip() != "ready":
            raise BenchError(f"cachelab-wirecap cannot capture: {cap.stderr.read().strip()} "
                             "(it needs root: CAP_NET_RAW)")
        before = cpu_times()
        with tempfile.TemporaryDirectory(prefix="cachelab") as tmp:
            report_path = Path(tmp) / "report.json"
            argv = client + [str(LOAD), "-s", "127.0.0.1", "-p", str(port), "-P",
                             "memcache_text", "-t", "1", "-c", str(connections),
                             f"--test-time={seconds}", "--ratio=1:1", "-d", str(VALUE),
                             f"--key-maximum={KEYS - 1}", "--rate", str(rate),
                             "--json-out-file", str(report_path)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT)
            if done.returncode != 0:
                raise BenchError(f"cachelab-load exited {done.returncode}: "
                                 f"{done.stderr.strip()[:300]}")
            report = json.loads(report_path.read_text())
        steal = steal_fraction(before, cpu_times())
        out, err = cap.communicate(input="", timeout=TIMEOUT)
    finally:
        if cap.poll() is None:
            cap.kill()
            cap.wait()
    if cap.returncode != 0:
        raise BenchError(f"cachelab-wirecap failed: {err.strip()[:300]}")
    truth = json.loads(out.strip().splitlines()[-1])
    timing = report["timing"]
    if timing["wire_ms"] is None:
        raise BenchError(f"no kernel timestamps: {timing['fallback']}")

    def us(figure: str, p: str) -> float:
        return timing[figure][p] * 1000

    return {
        "exchanges": truth["exchanges"],
        "drops": truth["drops"],
        "requests": timing["requests"],
        "capture_wire_p50_us": truth["wire_us"]["p50"],
        "capture_wire_p99_us": truth["wire_us"]["p99"],
        "wire_p50_us": us("wire_ms", "p50"),
        "wire_p99_us": us("wire_ms", "p99"),
        "user_p50_us": us("user_latency_ms", "p50"),
        "user_p99_us": us("user_latency_ms", "p99"),
        "send_delay_p50_us": us("send_delay_ms", "p50"),
        "read_delay_p50_us": us("read_delay_ms", "p50"),
        "fell_behind": report["open_loop"]["fell_behind"],
        "client_cpu_share": report["client_cpu"]["busiest_thread_share"],
        "steal": steal,
    }


def run(repeats: int, seconds: float) -> dict:
    for binary in (LOAD, WIRECAP):
        if not binary.exists():
            raise BenchError(f"{binary} missing: run `make build`")
    server_cpu, client_cpu = cores()
    port = free_port()
    mc = ["memcached", "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "64",
          *(["-u", "root"] if os.geteuid() == 0 else [])]
    server = subprocess.Popen(server_cpu + mc, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        wait_listening(port)
        subprocess.run([str(LOAD), "-s", "127.0.0.1", "-p", str(port), "-P", "memcache_text",
                        "-t", "1", "-c", "4", "-d", str(VALUE), f"--key-maximum={KEYS - 1}",
                        "--populate"], check=True, stdout=subprocess.DEVNULL, timeout=TIMEOUT)
        cases = [(r, c) for r in RATES for c in CONNECTIONS]
        runs: dict[str, list[dict]] = {name(r, c): [] for r, c in cases}
        for i in range(repeats):
            print(f"repetition {i + 1} of {repeats}", file=sys.stderr)
            for rate, conns in cases:  # interleaved: A B C D, A B C D, ...
                runs[name(rate, conns)].append(
                    one_run(client_cpu, server_cpu, port, rate, conns, seconds))
    finally:
        server.kill()
        server.wait()
    return {"format": 1, "benchmark": "wire", "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "settings": {"repeats": repeats, "run_seconds": seconds, "rates": list(RATES),
                         "connections": list(CONNECTIONS), "value_size": VALUE, "keys": KEYS,
                         "busy_poll_us": 0},
            "runs": runs}


def name(rate: int, connections: int) -> str:
    return f"{rate // 1000}k/s, {connections} conn{'s' if connections > 1 else ''}"


def targets(runs: dict[str, list[dict]]) -> list:
    out = []
    for case, rows in runs.items():
        def diff(mine: str, truth: str, rows: list[dict] = rows) -> list[float | None]:
            return differences([r[mine] for r in rows], [r[truth] for r in rows])

        steal = [r["steal"] for r in rows]
        out.append(judge("W1", case, diff("wire_p50_us", "capture_wire_p50_us"), WITHIN,
                         WIRE_P50_US, unit="us", steal=steal))
        out.append(judge("W2", case, diff("wire_p99_us", "capture_wire_p99_us"), WITHIN,
                         WIRE_P99_US, unit="us", steal=steal))
    return out


def table(runs: dict[str, list[dict]]) -> str:
    head = (f"{'case (medians, us)':<20}{'capture p50':>12}{'p99':>9}{'wire-cap p50':>13}"
            f"{'p99':>8}{'user-cap p50':>13}{'p99':>9}{'send p50':>9}{'read p50':>9}"
            f"{'CPU':>6}")
    lines = [head, "-" * len(head)]
    for case, rows in runs.items():
        def med(key: str, minus: str | None = None, rows: list[dict] = rows) -> float:
            values = [r[key] - (r[minus] if minus else 0) for r in rows]
            return sorted(values)[len(values) // 2]

        lines.append(
            f"{case:<20}{med('capture_wire_p50_us'):>12.1f}{med('capture_wire_p99_us'):>9.1f}"
            f"{med('wire_p50_us', 'capture_wire_p50_us'):>+13.1f}"
            f"{med('wire_p99_us', 'capture_wire_p99_us'):>+8.1f}"
            f"{med('user_p50_us', 'capture_wire_p50_us'):>+13.1f}"
            f"{med('user_p99_us', 'capture_wire_p99_us'):>+9.1f}"
            f"{med('send_delay_p50_us'):>9.1f}{med('read_delay_p50_us'):>9.1f}"
            f"{med('client_cpu_share'):>6.0%}"
            + (" FELL BEHIND" if any(r["fell_behind"] for r in rows) else ""))
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
    seconds = RUN_SECONDS
    if args.quick:
        args.repeats, seconds = 1, 2
    if (os.cpu_count() or 1) >= 2:
        stay_on(0)  # the server's CPU: the load generator has CPU 1 to itself
    try:
        result = run(args.repeats, seconds)
    except (BenchError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as e:
        print(f"wire_bench: {e}", file=sys.stderr)
        return 1
    verdicts = targets(result["runs"])
    result["targets"] = [t.as_json() for t in verdicts]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result["runs"]))
    print("\nissue 24's wire-time targets (median over repetitions of the per-repetition "
          "difference, spread min..max):")
    print("\n".join(format_targets(verdicts, TITLES)))
    print(summary_line(verdicts))
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
