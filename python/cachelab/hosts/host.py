"""A host as the process starters see it: an address to listen on and to connect to, and
how to run a process there. `Host` is this machine or an emulated host on it (a command
prefix enters the host's network namespace and cgroup); `cachelab.hosts.ssh.SshHost` is a
real host reached over SSH and has the same methods."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from cachelab.hosts.cgroups import CpuGroup


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    prefix: tuple[str, ...] = ()
    #: The cgroup that accounts this host's CPU (None: not accounted separately).
    group: CpuGroup | None = field(default=None, compare=False)
    #: Cores each serving thread of a server here may use (its own cgroup inside
    #: `group`, `cgroups.CpuGroup.cap_threads`); 0: no cap.
    thread_quota: float = 0.0
    #: Processes here run as root (memcached then needs `-u root`).
    root: bool = field(default_factory=lambda: _is_root())
    remote = False

    def command(self, argv: Sequence[str], cpus: Sequence[int] = ()) -> list[str]:
        """The command line with the parent-death signal (so a killed harness leaves
        nothing running), the host's prefix and the CPU pinning put in front."""
        prefix: list[str] = []
        if shutil.which("setpriv"):
            prefix += [shutil.which("setpriv") or "setpriv", "--pdeathsig", "TERM", "--"]
        prefix += self.prefix
        if cpus:
            taskset = shutil.which("taskset") or "taskset"
            prefix += [taskset, "-c", ",".join(str(c) for c in cpus)]
        return [*prefix, *argv]

    def spawn(self, argv: Sequence[str], out: Path, cpus: Sequence[int] = ()
              ) -> subprocess.Popen:
        """Starts a process in its own session, stdout and stderr appended to `out`."""
        with open(out, "ab") as sink:
            return subprocess.Popen(self.command(argv, cpus), stdin=subprocess.DEVNULL,
                                    stdout=sink, stderr=sink, start_new_session=True)

    def spawn_piped(self, argv: Sequence[str]) -> subprocess.Popen:
        """Starts a helper whose stdout the caller reads (the link probes)."""
        return subprocess.Popen(self.command(argv), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                start_new_session=True)

    def run(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(argv), capture_output=True, text=True,
                              timeout=timeout)

    def python(self) -> list[str]:
        """How to run cachelab's stdlib-only echo module here."""
        return [sys.executable, "-m", "cachelab.hosts.echo"]

    def which(self, command: str) -> str | None:
        return shutil.which(command)

    def cpu_reader(self) -> Callable[[], tuple[float, float]] | None:
        """Cumulative (user, system) CPU seconds of this host, or None when it is this
        machine itself (the machine-wide sampler covers it)."""
        return self.group.usage if self.group else None

    def collect(self, directory: Path) -> None:
        """Brings the files processes wrote here into `directory` (already there)."""


def _is_root() -> bool:
    import os

    return os.geteuid() == 0


LOOPBACK = Host("local", "127.0.0.1")
