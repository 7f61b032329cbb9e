"""Measuring the links between hosts, as the original study did before its experiments:
the round trip with a TCP echo (small messages, Nagle off, one outstanding) and the
bandwidth with iperf3 (Debian's package), each direction.

The echo ends run as `python -m cachelab.linkprobe echo ADDR PORT` and
`python -m cachelab.linkprobe rtt ADDR PORT COUNT` inside the hosts' namespaces; the
client prints one JSON object with the round trips in microseconds. Each round trip's
timer starts just before the client's send and stops when the whole echo is read.
"""

from __future__ import annotations

import json
import shutil
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.errors import UserError
from cachelab.hosts import Host

MESSAGE = 64
RTT_COUNT = 200
IPERF_SECONDS = 1.0
PORT = 5299


@dataclass(frozen=True)
class LinkMeasurement:
    src: str
    dst: str
    #: Round trip src -> dst -> src over TCP, microseconds.
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_min_us: float
    #: TCP goodput measured by iperf3, Mbit/s: src -> dst and dst -> src (None: the link
    #: is unshaped and the bandwidth was not measured).
    mbit_forward: float | None
    mbit_reverse: float | None


def echo(addr: str, port: int, timeout: float = 30.0) -> None:
    """Serves one connection: echoes every MESSAGE-byte block until EOF."""
    with socket.create_server((addr, port)) as server:
        server.settimeout(timeout)
        print("ready", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while block := _read(conn, MESSAGE):
                conn.sendall(block)


def rtt(addr: str, port: int, count: int) -> list[float]:
    """`count` round trips of a MESSAGE-byte block, in microseconds (after 10 unmeasured)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            conn = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)
    samples = []
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        block = b"x" * MESSAGE
        for i in range(count + 10):
            start = time.perf_counter()
            conn.sendall(block)
            if not _read(conn, MESSAGE):
                raise OSError("echo closed early")
            if i >= 10:
                samples.append((time.perf_counter() - start) * 1e6)
    return samples


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def round_trips(src: Host, dst: Host, count: int = RTT_COUNT) -> list[float]:
    """`count` TCP round trips src -> dst -> src, in microseconds."""
    server = _spawn(dst, [sys.executable, "-m", "cachelab.linkprobe", "echo", dst.address,
                          str(PORT)])
    try:
        _wait_ready(server)
        client = subprocess.run(
            [*src.prefix, sys.executable, "-m", "cachelab.linkprobe", "rtt", dst.address,
             str(PORT), str(count)], capture_output=True, text=True, timeout=60 + count / 100)
        if client.returncode != 0:
            raise UserError(f"measuring the round trip {src.name} -> {dst.name} failed: "
                            f"{client.stderr.strip()[-300:]}")
        return json.loads(client.stdout)["rtt_us"]
    finally:
        _stop(server)


def measure(src: Host, dst: Host, *, bandwidth: bool, count: int = RTT_COUNT) -> LinkMeasurement:
    """Round trip (and, with `bandwidth`, iperf3 each way) between two hosts."""
    samples = round_trips(src, dst, count)
    forward = reverse = None
    if bandwidth:
        forward = iperf(src, dst, reverse=False)
        reverse = iperf(src, dst, reverse=True)
    return LinkMeasurement(src.name, dst.name, statistics.median(samples),
                           percentile(samples, 0.99), min(samples), forward, reverse)


def iperf(src: Host, dst: Host, *, reverse: bool, seconds: float = IPERF_SECONDS) -> float:
    """TCP goodput src -> dst (dst -> src with `reverse`) in Mbit/s, as the receiver saw it."""
    binary = shutil.which("iperf3")
    if binary is None:
        raise UserError("iperf3 not found: `make deps` installs it from Debian's packages")
    server = _spawn(dst, [binary, "-s", "-1", "-B", dst.address, "-p", str(PORT + 1)])
    try:
        deadline = time.monotonic() + 10
        while True:
            argv = [*src.prefix, binary, "-c", dst.address, "-p", str(PORT + 1), "-J",
                    "-t", f"{seconds:g}", "-O", "0.3", *(["-R"] if reverse else [])]
            client = subprocess.run(argv, capture_output=True, text=True,
                                    timeout=seconds + 30)
            try:
                result = json.loads(client.stdout)
                return result["end"]["sum_received"]["bits_per_second"] / 1e6
            except (ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise UserError(f"iperf3 {src.name} -> {dst.name} failed: "
                                f"{(client.stdout + client.stderr).strip()[-300:]}")
            time.sleep(0.1)  # the server was not listening yet
    finally:
        _stop(server)


def _spawn(host: Host, argv: list[str]) -> subprocess.Popen:
    return subprocess.Popen([*host.prefix, *argv], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            start_new_session=True)


def _wait_ready(proc: subprocess.Popen) -> None:
    line = proc.stdout.readline() if proc.stdout else ""
    if "ready" not in line:
        raise UserError("the link probe's echo server did not start")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def main(argv: list[str]) -> int:
    if argv[:1] == ["echo"]:
        echo(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["rtt"]:
        print(json.dumps({"rtt_us": rtt(argv[1], int(argv[2]), int(argv[3]))}))
        return 0
    print("usage: python -m cachelab.linkprobe echo ADDR PORT | rtt ADDR PORT COUNT",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
