"""Instructions a proxy spends per request, counted with callgrind (repeatable where
seconds are not on a shared machine).

Each proxy runs under `valgrind --tool=callgrind` in front of one memcached. One client
(cachelab-load, `--clients` connections) sends SMALL GETs of 64-byte values, then, in a
second run, LARGE of them; the difference of the two totals over LARGE - SMALL is the
proxy's user-space instructions per request, start-up and shut-down excluded. With one
connection nothing is batched: every request pays for its own reads and writes. It
counts instructions, not time: the kernel's work (most of a request's CPU here,
docs/performance.md) and cache misses are not in it.

    python bench/instructions_bench.py                      # the current build and the floor
    python bench/instructions_bench.py --baseline OLD_BINARY --args "-t 4 --pipeline 16"

About a minute per proxy. Needs valgrind.
"""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import BenchError, free_port, wait_listening

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / "target" / "release"
PRODUCTION = "-t 4 --pipeline 16 --share-connections --merge-gets"
SMALL, LARGE = 1000, 5000


def total_instructions(out: Path) -> int:
    """The `summary:` (or `totals:`) line of a callgrind output file."""
    for line in out.read_text().splitlines():
        m = re.match(r"(?:summary|totals):\s+(\d+)", line)
        if m:
            return int(m.group(1))
    raise BenchError(f"{out}: no instruction total")


Command = Callable[[int], list[str]]  # the proxy's command line, given its port


def counted_run(command: Command, requests: int, clients: int, workdir: Path) -> int:
    """Total instructions of the proxy `command` over `requests` GETs per connection."""
    out = workdir / f"callgrind.{time.monotonic_ns()}"
    port = free_port()
    proxy = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *command(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_listening(port, timeout=60)
        load = [str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(port),
                "-P", "memcache_text", "-d", "64", "--ratio", "0:1", "-t", "1",
                "-c", str(clients), "--key-minimum", "1", "--key-maximum", "1000",
                "--key-pattern", "R:R", "--requests", str(requests)]
        result = subprocess.run(load, capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            raise BenchError(f"cachelab-load failed: {result.stderr.strip()[:200]}")
    finally:
        proxy.terminate()
        proxy.wait(60)
    return total_instructions(out)


def per_request(command: Command, clients: int, workdir: Path) -> float:
    small = counted_run(command, SMALL, clients, workdir)
    large = counted_run(command, LARGE, clients, workdir)
    return (large - small) / ((LARGE - SMALL) * clients)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--args", default=PRODUCTION,
                        help=f"cachelab-proxy's options (default: production, {PRODUCTION})")
    parser.add_argument("--baseline", type=Path, metavar="BIN",
                        help="another cachelab-proxy binary, counted with the same options")
    parser.add_argument("--clients", type=int, default=1,
                        help="connections of the client (1: no batching)")
    args = parser.parse_args()
    for tool in ("valgrind", "memcached"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} not found")
    mport = free_port()
    options = shlex.split(args.args)

    def cachelab(binary: Path) -> Command:
        return lambda port: [str(binary), "-p", str(port), *options,
                             "-m", f"127.0.0.1:{mport}"]

    proxies = [("cachelab-proxy", cachelab(BIN / "cachelab-proxy"))]
    if args.baseline:
        if not args.baseline.is_file():
            raise BenchError(f"--baseline {args.baseline}: no such file")
        proxies.append(("baseline", cachelab(args.baseline)))
    proxies.append(("cachelab-floor", lambda port: [str(BIN / "cachelab-floor"), "-p", str(port),
                                                    "-s", f"127.0.0.1:{mport}"]))
    memcached = subprocess.Popen(["memcached", "-l", "127.0.0.1", "-p", str(mport), "-U", "0",
                                  "-t", "1", "-m", "64", "-u", "nobody"])
    try:
        wait_listening(mport)
        populate = [str(BIN / "cachelab-load"), "-s", "127.0.0.1", "-p", str(mport),
                    "-P", "memcache_text", "-d", "64", "--ratio", "1:0", "-t", "1", "-c", "1",
                    "--key-minimum", "1", "--key-maximum", "1000", "--key-pattern", "P:P",
                    "--requests", "1000"]
        subprocess.run(populate, capture_output=True, check=True, timeout=120)
        with tempfile.TemporaryDirectory(prefix="cachelab-instr-") as tmp:
            print(f"64 B GETs, {args.clients} connection(s), instructions per request "
                  f"(runs of {SMALL} and {LARGE} per connection):")
            for name, command in proxies:
                count = per_request(command, args.clients, Path(tmp))
                print(f"  {name:16} {count:9,.0f}", flush=True)
    finally:
        memcached.terminate()
        memcached.wait(10)


if __name__ == "__main__":
    try:
        main()
    except BenchError as e:
        raise SystemExit(f"instructions_bench: {e}") from None
