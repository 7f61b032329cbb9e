"""Helpers shared by the benchmark scripts (run as `python bench/NAME_bench.py`)."""

from __future__ import annotations

import socket
import time


class BenchError(Exception):
    """A problem the user can fix; printed as one line, exit code 1."""


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.02)
    raise BenchError(f"nothing listens on 127.0.0.1:{port}")
