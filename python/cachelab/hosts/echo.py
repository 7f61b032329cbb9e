"""The two ends of a TCP round-trip probe, standard library only, so that it also runs on
a remote host as a plain script (`python3 echo.py ...`): `echo ADDR PORT` serves one
connection and echoes every MESSAGE-byte block; `rtt ADDR PORT COUNT` prints one JSON
object with COUNT round trips in microseconds. Each round trip's timer starts just before
the client's send and stops when the whole echo has been read.

`clock ADDR PORT` serves one connection and answers every 8-byte block with its wall clock
(`time.time_ns()`, 8 bytes big-endian); `offset(ADDR, PORT, COUNT)` asks COUNT times and
estimates how far the serving host's clock is ahead of the asking one's as NTP does:
offset = server time - (send + receive) / 2, taken from the exchange with the shortest
round trip (the one least disturbed by queueing, whose error is at most half of it)."""

from __future__ import annotations

import json
import socket
import sys
import time

MESSAGE = 64


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
    conn = _connect(addr, port)
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


def clock(addr: str, port: int, timeout: float = 30.0) -> None:
    """Serves one connection: answers every 8-byte block with this host's time_ns()."""
    with socket.create_server((addr, port)) as server:
        server.settimeout(timeout)
        print("ready", flush=True)
        conn, _ = server.accept()
        with conn:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            while _read(conn, 8):
                conn.sendall(time.time_ns().to_bytes(8, "big"))


def offset(addr: str, port: int, count: int) -> tuple[float, float]:
    """(offset in µs of the clock server's clock ahead of this host's, the round trip in
    µs of the exchange it came from)."""
    conn = _connect(addr, port)
    best = (0.0, float("inf"))
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(count):
            sent = time.time_ns()
            conn.sendall(b"t" * 8)
            answer = _read(conn, 8)
            received = time.time_ns()
            if not answer:
                raise OSError("clock server closed early")
            rtt_ns = received - sent
            if rtt_ns / 1000 < best[1]:
                theirs = int.from_bytes(answer, "big")
                best = ((theirs - (sent + received) / 2) / 1000, rtt_ns / 1000)
    return best


def _connect(addr: str, port: int) -> socket.socket:
    deadline = time.monotonic() + 10
    while True:
        try:
            return socket.create_connection((addr, port), timeout=5)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _read(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def main(argv: list[str]) -> int:
    if argv[:1] == ["echo"]:
        echo(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["clock"]:
        clock(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["rtt"]:
        print(json.dumps({"rtt_us": rtt(argv[1], int(argv[2]), int(argv[3]))}))
        return 0
    print("usage: python -m cachelab.hosts.echo echo ADDR PORT | clock ADDR PORT | "
          "rtt ADDR PORT COUNT",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
