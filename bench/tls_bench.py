#!/usr/bin/env python3
"""What TLS costs through the proxy: runs the `tls_cost` example and prints its table.

    python bench/tls_bench.py

The example (crates/cachelab-proxy/examples/tls_cost.rs, see docs/tls.md: Cost) starts
memcached plain and with `-Z`, then the proxy plain, with TLS from clients, with TLS to
memcached and both; 4 closed-loop clients send `get` of a 100-byte value for 3 s per
set-up, and it prints requests/s, mean/p50/p99 latency and the CPU per request of the
proxy (or of memcached alone). No targets: the figures are for reading.

Duration: about 25 seconds. Loopback only; the run is bounded by TIMEOUT.
Writes bench/results/tls.json.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import BenchError

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "target" / "release" / "examples" / "tls_cost"
PROXY = ROOT / "target" / "release" / "cachelab-proxy"
RESULTS = ROOT / "bench" / "results" / "tls.json"
TIMEOUT = 180  # six set-ups of 3 s each, with start-up and handshakes: far less
COLUMNS = ("req_per_s", "mean_us", "p50_us", "p99_us", "cpu_us_per_req")


def parse_rows(table: str) -> list[dict]:
    """The table's measured rows: `set-up  req/s mean p50 p99 cpu  (whose CPU)`."""
    rows = []
    for line in table.splitlines():
        setup, sep, rest = line.partition("  ")
        fields = rest.split()
        if not sep or len(fields) < len(COLUMNS):
            continue
        try:
            values = [float(f) for f in fields[: len(COLUMNS)]]
        except ValueError:
            continue  # the header
        cpu_of = " ".join(fields[len(COLUMNS):]).strip("()")
        rows.append({"setup": setup.strip(), **dict(zip(COLUMNS, values, strict=True)),
                     "cpu_of": cpu_of})
    return rows


def run() -> str:
    for binary, build in ((EXAMPLE, "cargo build --release -p cachelab-proxy --examples"),
                          (PROXY, "make build")):
        if not binary.exists():
            raise BenchError(f"{binary} missing: run `{build}`")
    if shutil.which("memcached") is None:
        raise BenchError("memcached not found: run `make deps`")
    try:
        done = subprocess.run([str(EXAMPLE), "--proxy", str(PROXY)], capture_output=True,
                              text=True, timeout=TIMEOUT, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        raise BenchError(f"tls_cost still running after {TIMEOUT} s") from e
    if done.returncode != 0:
        raise BenchError(f"tls_cost exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout


def main() -> int:
    try:
        table = run()
    except BenchError as e:
        print(f"tls_bench: {e}", file=sys.stderr)
        return 1
    rows = parse_rows(table)
    if len(rows) != 6:
        print(f"tls_bench: expected 6 measured rows, read {len(rows)}:\n{table}",
              file=sys.stderr)
        return 1
    print(table, end="")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"format": 1, "benchmark": "tls",
                                   "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                   "rows": rows}, indent=2) + "\n")
    print(f"\nwritten to {RESULTS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
