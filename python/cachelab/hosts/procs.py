"""Process primitives for the processes of an experiment: free loopback ports, waiting for
a listener, and the `Managed` handle (stopped on `stop()` or when used as a context manager,
so a test or an experiment that fails half-way leaves nothing running). `cachelab.hosts.local`
starts the servers, middlewares and load generators with them.
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

import psutil

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
            with socket.create_connection((host, port), timeout=0.2) as probe:
                # While nothing listens on a port of the ephemeral range, a connect can be
                # given that port as its source and connect to itself: not a listener.
                if probe.getsockname() != probe.getpeername():
                    return True
        except OSError:
            pass
        time.sleep(0.02)
    return False


def listens(proc: subprocess.Popen, port: int) -> bool:
    """Whether `proc` (or a process it started) is what listens on TCP `port`: a free port
    may be handed to two starters at once, and then the one whose server could not bind
    finds the other's listener (and would share its server) unless it asks whose it is.

    Read from /proc/PID/net/tcp{,6} (the process's own network namespace: an emulated
    host's sockets are not in this namespace's tables, where psutil looks)."""
    try:
        root = psutil.Process(proc.pid)
        family = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return False
    return any(_listening_inodes(member.pid, port) & _socket_inodes(member.pid)
               for member in family)


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[len("socket:["):-1])
    except OSError:
        pass
    return inodes


#: The state column of /proc/net/tcp for a listening socket.
TCP_LISTEN = "0A"


def _listening_inodes(pid: int, port: int) -> set[str]:
    """The inodes of the sockets listening on `port` in `pid`'s network namespace."""
    inodes = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == TCP_LISTEN \
                    and int(fields[1].rpartition(":")[2], 16) == port:
                inodes.add(fields[9])
    return inodes


def wait_for_socket(path: Path, timeout: float = START_TIMEOUT_S) -> bool:
    """Waits until something accepts on the Unix socket `path`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                probe.settimeout(0.2)
                probe.connect(str(path))
                return True
        except OSError:
            pass
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
    #: The Unix socket it serves on instead of host:port, if any.
    socket: Path | None = None

    @property
    def address(self) -> str:
        """How a middleware names it in `-m`: host:port, or the socket's path."""
        return str(self.socket) if self.socket else f"{self.host}:{self.port}"

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

    def __exit__(self, *exc: object) -> None:
        self.stop()


def require_command(command: str) -> str:
    """The path of an installed program, or a UserError saying how to install it."""
    path = shutil.which(command)
    if path is None:
        raise UserError(f"{command} not found: `make deps` installs it from Debian's packages")
    return path
