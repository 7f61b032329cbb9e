"""Starting and stopping the processes of an experiment on this host (loopback).

Every process is a `Managed` handle: stopped on `stop()` or when used as a context
manager, so a test or an experiment that fails half-way leaves nothing running.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from cachelab.binaries import find_binary
from cachelab.errors import UserError

START_TIMEOUT_S = 10.0


def free_port() -> int:
    """A port that was free a moment ago on 127.0.0.1 (the OS picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float = START_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return True
        except OSError:
            time.sleep(0.02)
    return False


@dataclass
class Managed:
    """A child process with the address it serves on."""

    name: str
    process: subprocess.Popen
    host: str
    port: int
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int | None:
        """Signals the process and waits for it; kills it if it does not exit in time."""
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> Managed:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def _require(command: str) -> str:
    path = shutil.which(command)
    if path is None:
        raise UserError(f"{command} not found: `make deps` installs it from Debian's packages")
    return path


def start_memcached(port: int | None = None, threads: int = 1, memory_mb: int = 64) -> Managed:
    """A fresh memcached on 127.0.0.1 (a free port unless one is given)."""
    binary = _require("memcached")
    for _ in range(5):
        chosen = port or free_port()
        argv = [binary, "-l", "127.0.0.1", "-p", str(chosen), "-U", "0",
                "-t", str(threads), "-m", str(memory_mb)]
        if os.geteuid() == 0:
            argv += ["-u", "root"]  # memcached refuses root without naming a user
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait_for_port("127.0.0.1", chosen):
            return Managed("memcached", proc, "127.0.0.1", chosen)
        proc.kill()
        proc.wait()
        if port:
            break
    raise UserError("memcached did not start listening on 127.0.0.1")


def start_proxy(
    servers: list[str],
    workers: int,
    *,
    sharded: bool = False,
    stats_file: Path | None = None,
    log_file: Path | None = None,
    stats_window: float = 5.0,
    extra: list[str] | None = None,
) -> Managed:
    """cachelab-proxy on a free port; returns once it listens (it prints its address)."""
    argv = [str(find_binary("cachelab-proxy")), "-l", "127.0.0.1", "-p", "0",
            "-t", str(workers), "--stats-window", str(stats_window), "-m", *servers]
    files: dict[str, Path] = {}
    if sharded:
        argv.append("-s")
    if stats_file:
        argv += ["--stats-file", str(stats_file)]
        files["stats"] = stats_file
    if log_file:
        argv += ["--log-file", str(log_file)]
        files["log"] = log_file
    argv += extra or []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    prefix = "listening on "
    if not line.startswith(prefix):
        proc.kill()
        proc.wait()
        raise UserError(f"cachelab-proxy did not start (it printed {line!r}); see its log")
    host, _, port = line[len(prefix):].rpartition(":")
    return Managed("cachelab-proxy", proc, host, int(port), files)
