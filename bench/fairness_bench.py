"""Fairness: what a client that never reads costs the proxy and the other clients.

    python bench/fairness_bench.py [--repeats N] [--greedy N] [--baseline BIN]

A greedy client pipelines GETs of a 500 KB value and never reads (issue 20's case).
Per repetition, against memcached on loopback, this measures:
- the proxy's RSS growth (VmHWM after the greedy clients minus VmRSS before them);
- another client's GET latency (64-byte value, one request at a time) with and without
  the greedy clients parked on the proxy: p50 and p99 over the same number of requests.

Targets (issue 20): F1, RSS growth <= --max-pending-bytes + --max-reply-bytes + 8 MiB for
one greedy client; T20e, the other client's GET latency beside it within 2x of its latency
alone, p50 and p99 (each judged on the median over repetitions of the per-repetition ratio).
`--baseline BIN` runs another cachelab-proxy binary (an older build) the same way,
interleaved, and prints its figures beside ours. Results: bench/results/fairness.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BenchError, free_port, wait_listening  # noqa: E402
from _targets import AT_MOST, format_targets, judge, summary_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PROXY = ROOT / "target" / "release" / "cachelab-proxy"
RESULTS = ROOT / "bench" / "results" / "fairness.json"
PENDING = 4 << 20
MAX_REPLY = 1 << 20
BIG = 500_000
CONTROL_REQUESTS = 3000
GREEDY_GETS = 2000


def kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field):
            return int(line.split()[1])
    raise BenchError(f"no {field} for pid {pid}")


def read_until(sock: socket.socket, end: bytes, buf: bytearray) -> bytes:
    while end not in buf:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise BenchError("the proxy closed the connection")
        buf.extend(chunk)
    i = buf.index(end) + len(end)
    reply = bytes(buf[:i])
    del buf[:i]
    return reply


def request(sock: socket.socket, line: bytes, end: bytes) -> bytes:
    sock.sendall(line)
    return read_until(sock, end, bytearray())


def control_latencies(port: int) -> list[float]:
    """Microseconds per GET of the small key, one request at a time."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        out = []
        for _ in range(CONTROL_REQUESTS):
            t0 = time.perf_counter_ns()
            s.sendall(b"get small\r\n")
            read_until(s, b"END\r\n", buf)
            out.append((time.perf_counter_ns() - t0) / 1000)
        return out


def stat(port: int, name: str) -> int:
    with socket.create_connection(("127.0.0.1", port)) as s:
        text = request(s, b"stats\r\n", b"END\r\n").decode()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == name:
            return int(parts[2])
    raise BenchError(f"no stat {name}")


def wait_quiet(port: int) -> None:
    """Until the proxy has stopped serving (get_requests unchanged for 300 ms; at most 20 s)."""
    deadline = time.monotonic() + 20
    last, same = -1, 0
    while same < 3 and time.monotonic() < deadline:
        now = stat(port, "get_requests")
        same = same + 1 if now == last else 0
        last = now
        time.sleep(0.1)


def p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000)[int(q * 1000) - 1]


def one_run(binary: Path, memcached_port: int, greedy: int) -> dict[str, float]:
    port = free_port()
    proxy = subprocess.Popen(
        [str(binary), "-l", "127.0.0.1", "-p", str(port), "-t", "4",
         "-m", f"127.0.0.1:{memcached_port}", "--max-pending-bytes", str(PENDING),
         "--max-reply-bytes", str(MAX_REPLY)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    clients: list[socket.socket] = []
    try:
        wait_listening(port)
        with socket.create_connection(("127.0.0.1", port)) as s:
            request(s, b"set small 0 0 64\r\n" + b"s" * 64 + b"\r\n", b"\r\n")
            # every worker holds a 500 KB reply once, so its buffers are grown already
            buf = bytearray()
            s.sendall(b"get big\r\n" * 16)
            for _ in range(16):
                read_until(s, b"END\r\n", buf)
        alone = control_latencies(port)
        base = kib(proxy.pid, "VmRSS:")
        for _ in range(greedy):
            c = socket.create_connection(("127.0.0.1", port))
            c.settimeout(5)
            with contextlib.suppress(OSError):  # the proxy stopped reading it: the point
                c.sendall(b"get big\r\n" * GREEDY_GETS)
            clients.append(c)
        wait_quiet(port)
        beside = control_latencies(port)
        growth = kib(proxy.pid, "VmHWM:") - base
        return {"rss_growth_kib": growth,
                "p50_alone_us": statistics.median(alone), "p99_alone_us": p(alone, 0.99),
                "p50_beside_us": statistics.median(beside), "p99_beside_us": p(beside, 0.99)}
    finally:
        for c in clients:
            c.close()
        proxy.terminate()
        proxy.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--greedy", type=int, default=1, help="never-reading clients")
    parser.add_argument("--baseline", type=Path, metavar="BIN")
    args = parser.parse_args()
    if not PROXY.exists():
        raise BenchError(f"{PROXY} missing: run `make build`")
    builds = {"ours": PROXY}
    if args.baseline:
        builds["baseline"] = args.baseline
    mport = free_port()
    cmd = ["memcached", "-l", "127.0.0.1", "-p", str(mport), "-m", "256", "-U", "0"]
    if os.geteuid() == 0:
        cmd += ["-u", "root"]  # memcached refuses to run as root without it
    memcached = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in builds}
    try:
        wait_listening(mport)
        with socket.create_connection(("127.0.0.1", mport)) as s:
            request(s, f"set big 0 0 {BIG}\r\n".encode() + b"v" * BIG + b"\r\n", b"\r\n")
        for _ in range(args.repeats):
            for name, binary in builds.items():
                runs[name].append(one_run(binary, mport, args.greedy))
    finally:
        memcached.terminate()
        memcached.wait(timeout=10)
    allowed_kib = (PENDING + MAX_REPLY) // 1024 + 8 * 1024
    results = []
    for name, rs in runs.items():
        case = f"{name}, {args.greedy} greedy"
        results.append(judge("F1", case, [r["rss_growth_kib"] / 1024 for r in rs], AT_MOST,
                             allowed_kib / 1024, unit="MiB"))
        for q in ("p50", "p99"):
            results.append(judge("T20e", f"{case}, {q}",
                                 [r[f"{q}_beside_us"] / r[f"{q}_alone_us"] for r in rs],
                                 AT_MOST, 2.0))
    results.sort(key=lambda t: t.name)
    titles = {"F1": f"F1 RSS growth beside never-reading clients <= --max-pending-bytes "
                    f"+ --max-reply-bytes + 8 MiB ({PENDING >> 20} + {MAX_REPLY >> 20} + 8 MiB)",
              "T20e": "T20e another client's GET latency beside them / alone <= 2x, p50 and p99"}
    for line in format_targets(results, titles):
        print(line)
    for name, rs in runs.items():
        for r in rs:
            print(f"  {name}: p99 alone {r['p99_alone_us']:.0f} us, beside "
                  f"{r['p99_beside_us']:.0f} us, RSS +{r['rss_growth_kib'] / 1024:.1f} MiB")
    print(summary_line(results))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"runs": runs, "targets": [t.as_json() for t in results]},
                                  indent=2) + "\n")


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        print(f"fairness_bench: {e}", file=sys.stderr)
        sys.exit(1)
