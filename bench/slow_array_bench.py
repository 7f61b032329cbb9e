"""Slow arrays: what clients trickling an unfinished RESP array cost the proxy and the others.

    python bench/slow_array_bench.py [--repeats N] [--seconds S] [--baseline BIN]

Issue 33's attack: ATTACKERS connections to a Redis pool each announce `*700000` and then
send one `$1\\r\\nx\\r\\n` argument after another, about 175 KB/s each (25 arguments a
millisecond), so the array is never finished within the run and stays under the
command size bound (`--max-value-size` is raised so the proxy does not close them).
Per repetition, against redis-server on loopback, this measures:
- the proxy's CPU time (user + system, from /proc) over the attack's S seconds;
- another client's GET latency (one request at a time) alone and during the attack.

Targets (issue 33): S33a, the proxy's CPU under 1 s per 15 s of attack (scaled to S);
S33b, the other client's GET p99 during the attack within 2x of its p99 alone (each judged
on the median over repetitions). `--baseline BIN` runs another cachelab-proxy binary (an
older build) the same way, interleaved, and prints its figures beside ours.
Results: bench/results/slow-array.json.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchError, free_port, wait_listening  # noqa: E402
from _targets import AT_MOST, format_targets, judge, summary_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "target" / "release" / "cachelab-proxy"
RESULTS = ROOT / "bench" / "results" / "slow-array.json"
ATTACKERS = 8
ARGS_PER_MS = 25
CONTROL_REQUESTS = 3000
GET = b"*2\r\n$3\r\nGET\r\n$5\r\nsmall\r\n"


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_reply(sock: socket.socket, buf: bytearray) -> None:
    """Reads one bulk-string reply (`$<n>\\r\\n<data>\\r\\n`) into nothing."""
    while True:
        head = buf.find(b"\r\n")
        if head >= 0:
            n = int(buf[1:head])
            end = head + 2 + max(n, 0) + (2 if n >= 0 else 0)
            if len(buf) >= end:
                del buf[:end]
                return
        chunk = sock.recv(65536)
        if not chunk:
            raise BenchError("the proxy closed the control connection")
        buf.extend(chunk)


def control_latencies(port: int) -> list[float]:
    """Microseconds per GET, one request at a time."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        out = []
        for _ in range(CONTROL_REQUESTS):
            t0 = time.perf_counter_ns()
            s.sendall(GET)
            read_reply(s, buf)
            out.append((time.perf_counter_ns() - t0) / 1000)
        return out


def attack(port: int, seconds: float, stop: threading.Event) -> None:
    """ATTACKERS connections trickling one unfinished array each, for `seconds` at most."""
    conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(ATTACKERS)]
    try:
        for c in conns:
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            c.sendall(b"*700000\r\n")
        piece = b"$1\r\nx\r\n" * ARGS_PER_MS
        start = time.monotonic()
        tick = 0
        while not stop.is_set() and time.monotonic() - start < seconds:
            for c in conns:
                c.sendall(piece)
            tick += 1
            delay = start + tick / 1000 - time.monotonic()
            if delay > 0:
                time.sleep(delay)
    finally:
        for c in conns:
            c.close()


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


def one_run(binary: Path, redis_port: int, seconds: float) -> dict[str, float]:
    port = free_port()
    proxy = subprocess.Popen(
        [str(binary), "-l", "127.0.0.1", "-p", str(port), "-t", "4", "--protocol", "redis",
         "-m", f"127.0.0.1:{redis_port}", "--max-value-size", str(64 << 20)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    stop = threading.Event()
    try:
        wait_listening(port)
        alone = control_latencies(port)
        cpu0 = cpu_seconds(proxy.pid)
        attacker = threading.Thread(target=attack, args=(port, seconds, stop))
        t0 = time.monotonic()
        attacker.start()
        time.sleep(min(2.0, seconds / 4))  # the arrays have grown before measuring
        beside = control_latencies(port)
        attacker.join()
        elapsed = time.monotonic() - t0
        cpu = cpu_seconds(proxy.pid) - cpu0
        return {"proxy_cpu_s": cpu, "attack_s": elapsed,
                "p50_alone_us": statistics.median(alone), "p99_alone_us": p99(alone),
                "p50_beside_us": statistics.median(beside), "p99_beside_us": p99(beside)}
    finally:
        stop.set()
        proxy.terminate()
        proxy.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--baseline", type=Path, metavar="BIN")
    args = parser.parse_args()
    if not PROXY.exists():
        raise BenchError(f"{PROXY} missing: run `make build`")
    builds = {"ours": PROXY}
    if args.baseline:
        builds["baseline"] = args.baseline
    rport = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--bind", "127.0.0.1", "--port", str(rport), "--save", "",
         "--appendonly", "no", "--protected-mode", "no"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    try:
        wait_listening(rport)
        with socket.create_connection(("127.0.0.1", rport)) as s:
            s.sendall(b"*3\r\n$3\r\nSET\r\n$5\r\nsmall\r\n$64\r\n" + b"s" * 64 + b"\r\n")
            s.recv(64)
        for _ in range(args.repeats):
            for name, binary in builds.items():
                runs[name].append(one_run(binary, rport, args.seconds))
    finally:
        redis.terminate()
        redis.wait(timeout=10)
    budget = args.seconds / 15.0
    results = []
    for name, rs in runs.items():
        case = f"{name}, {ATTACKERS} slow arrays"
        results.append(judge("S33a", case, [r["proxy_cpu_s"] for r in rs], AT_MOST, budget,
                             unit="s"))
        results.append(judge("S33b", case, [r["p99_beside_us"] / r["p99_alone_us"] for r in rs],
                             AT_MOST, 2.0))
    results.sort(key=lambda t: t.name)
    titles = {"S33a": f"S33a the proxy's CPU during {args.seconds:.0f} s of attack "
                      f"<= {budget:.2f} s (1 s per 15 s)",
              "S33b": "S33b another client's GET p99 during the attack / alone <= 2x"}
    for line in format_targets(results, titles):
        print(line)
    for name, rs in runs.items():
        for r in rs:
            print(f"  {name}: proxy CPU {r['proxy_cpu_s']:.2f} s in {r['attack_s']:.1f} s; GET "
                  f"p50 {r['p50_alone_us']:.0f} -> {r['p50_beside_us']:.0f} us, p99 "
                  f"{r['p99_alone_us']:.0f} -> {r['p99_beside_us']:.0f} us")
    print(summary_line(results))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "targets": [t.as_json() for t in results]},
                                  indent=2) + "\n")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"slow_array_bench: {e}", file=sys.stderr)
        sys.exit(1)
