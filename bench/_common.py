"""Helpers shared by the benchmark scripts (run as `python bench/NAME_bench.py`)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


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


def cpu_times() -> list[int]:
    """The machine's CPU time counters (the `cpu` line of /proc/stat), in ticks."""
    return [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]


def steal_fraction(before: list[int], after: list[int]) -> float:
    """Steal ticks (the 8th counter) over all ticks between two cpu_times() readings."""
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return delta[7] / sum(delta) if sum(delta) else 0.0


def stay_on(cpu: int) -> None:
    """Pins this script (and what it starts without taskset) to `cpu`.

    The script polls its children every 10 ms; left free, the scheduler puts it on the
    measured CPU too, where each wake-up preempts a busy-polling load generator or the
    proxy under test and shows up as their send lag or tail latency."""
    if hasattr(os, "sched_setaffinity") and cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {cpu})
