"""Host metadata and versions stamped on every run (as pyperf stamps its benchmarks).

A version that cannot be found (a server not installed, a binary not built) is recorded as
None rather than failing: the metadata describes the run, it does not gate it.
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cachelab import __version__
from cachelab.errors import UserError
from cachelab.hosts.binaries import find_binary


@dataclass(frozen=True)
class HostInfo:
    """The controller's facts and versions, stamped on a run (the `run.host` column, as
    JSON: `to_json`, `from_json`)."""

    hostname: str | None
    kernel: str | None
    os: str | None
    cpu_model: str | None
    cpu_count: int | None
    memory_mb: int | None
    #: 1, 5 and 15 minute load averages when the run started.
    loadavg: tuple[float, ...] | None
    python: str | None
    #: Program -> version (None: not found): cachelab, cachelab-proxy, cachelab-load,
    #: memcached, redis.
    versions: dict[str, str | None]
    #: `ssh`: per remote host, the versions of what runs there (`SshHost.versions`).
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain data; `hosts` only when there are remote hosts, as stored since 0001."""
        out: dict[str, Any] = {
            "hostname": self.hostname, "kernel": self.kernel, "os": self.os,
            "cpu_model": self.cpu_model, "cpu_count": self.cpu_count,
            "memory_mb": self.memory_mb,
            "loadavg": list(self.loadavg) if self.loadavg is not None else None,
            "python": self.python, "versions": dict(self.versions)}
        if self.hosts:
            out["hosts"] = {name: dict(v) for name, v in self.hosts.items()}
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> HostInfo:
        """Back from `to_json`'s data; a fact missing from an older row is None."""
        load = d.get("loadavg")
        return cls(d.get("hostname"), d.get("kernel"), d.get("os"), d.get("cpu_model"),
                   d.get("cpu_count"), d.get("memory_mb"),
                   tuple(load) if load is not None else None, d.get("python"),
                   dict(d.get("versions") or {}), dict(d.get("hosts") or {}))


def cpu_model(cpuinfo: str) -> str | None:
    """The first `model name` of /proc/cpuinfo (x86), or `Model`/`Hardware` (ARM)."""
    for key in ("model name", "Model", "Hardware", "cpu model"):
        match = re.search(rf"^{key}\s*:\s*(.+)$", cpuinfo, re.MULTILINE)
        if match:
            return match.group(1).strip()
    return None


def memcached_version(output: str) -> str | None:
    """From `memcached -V`: "memcached 1.6.18"."""
    match = re.match(r"memcached\s+(\S+)", output.strip())
    return match.group(1) if match else None


def redis_version(output: str) -> str | None:
    """From `redis-server --version`: "Redis server v=7.0.15 sha=...".."""
    match = re.search(r"\bv=(\S+)", output)
    return match.group(1) if match else None


def tool_version(output: str) -> str | None:
    """From `NAME --version`: "cachelab-proxy 0.1.0"."""
    parts = output.split()
    return parts[1] if len(parts) >= 2 else None


def _run(argv: list[str]) -> str | None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout or done.stderr) if done.returncode == 0 else None


def _command_version(command: str, flag: str, parse: Callable[[str], str | None]
                     ) -> str | None:
    path = shutil.which(command)
    output = _run([path, flag]) if path else None
    return parse(output) if output else None


def _binary_version(name: str) -> str | None:
    try:
        output = _run([str(find_binary(name)), "--version"])
    except UserError:
        return None
    return tool_version(output) if output else None


def collect() -> HostInfo:
    """This host's facts and the versions of what it runs."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        cpuinfo = ""
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return HostInfo(
        hostname=socket.gethostname(),
        kernel=platform.release(),
        os=platform.platform(),
        cpu_model=cpu_model(cpuinfo),
        cpu_count=os.cpu_count(),
        memory_mb=_memory_mb(),
        loadavg=tuple(load) if load else None,
        python=sys.version.split()[0],
        versions={
            "cachelab": __version__,
            "cachelab-proxy": _binary_version("cachelab-proxy"),
            "cachelab-load": _binary_version("cachelab-load"),
            "memcached": _command_version("memcached", "-V", memcached_version),
            "redis": _command_version("redis-server", "--version", redis_version),
        },
    )


def _memory_mb() -> int | None:
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(r"^MemTotal:\s+(\d+) kB", meminfo, re.MULTILINE)
    return int(match.group(1)) // 1024 if match else None
