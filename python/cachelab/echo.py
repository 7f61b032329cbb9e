"""The two ends of a TCP round-trip probe, standard library only, so that it also runs on
a remote host as a plain script (`python3 echo.py ...`): `echo ADDR PORT` serves one
connection and echoes every MESSAGE-byte block; `rtt ADDR PORT COUNT` prints one JSON
object with COUNT round trips in microseconds. Each round trip's timer starts just before
the client's send and stops when the whole echo has been read."""

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


def main(argv: list[str]) -> int:
    if argv[:1] == ["echo"]:
        echo(argv[1], int(argv[2]))
        return 0
    if argv[:1] == ["rtt"]:
        print(json.dumps({"rtt_us": rtt(argv[1], int(argv[2]), int(argv[3]))}))
        return 0
    print("usage: python -m cachelab.echo echo ADDR PORT | rtt ADDR PORT COUNT",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
