"""The `netns` topology: a small data centre on one machine (docs/topologies.md).

Each logical host is a network namespace `cachelab-<owner pid>-<n>-<host>` with one
interface, `eth0`, and its own cgroup. All hosts hang off one bridge in a core namespace
`cachelab-<owner pid>-<n>-core`; this process reaches them through one more veth into that
bridge (the controller link, unshaped), which it uses to wait for listeners and to populate.

A host's link, in the core namespace:

    host eth0 ==veth== hNa  [cachelab-delay hNa <-> hNb]  hNb ==veth== hNp -- bridge
                      (without a delay: hNa is the bridge port itself)

- What the host sends (egress) is shaped by a TBF on the host's eth0 at egress_mbit; what
  it receives (ingress) by a TBF on the bridge port's egress (hNp, or hNa without a
  delay) at ingress_mbit; a direction at 0 has no TBF (the study's cloud capped egress
  only).
- The delay is `cachelab-delay`, a packet-level delay line between hNa and hNb (this kernel
  has no sch_netem): every frame, each direction, waits delay_ms before it is sent on, so
  TCP sees the delay as it would between machines. One process (one thread) serves every
  host's link; its CPU is read from /proc/<pid>/stat (`emulator_pids`).

Everything is named with the `cachelab-` prefix and the owner's PID, so a later run finds
what a killed harness left (`remove_stale`) and touches nothing else.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from cachelab.errors import UserError
from cachelab.hosts import cgroups
from cachelab.hosts.binaries import find_binary
from cachelab.hosts.host import Host
from cachelab.spec.topology import Layout, PlannedHost, address, controller_address

PREFIX = "cachelab-"
NETNS_DIR = Path("/run/netns")
#: TBF queue by default: how long a packet may wait for tokens before it is dropped.
TBF_LATENCY_MS = 50.0
_counter = itertools.count(1)


def require_support() -> None:
    """One clear UserError when this machine cannot build the topology: not root, no
    iproute2 or nsenter, or no network namespaces."""
    if os.geteuid() != 0:
        raise UserError('topology.kind = "netns" needs root (network namespaces, veths, '
                        'qdiscs and cgroups); run as root or use topology.kind = "local"')
    for tool in ("ip", "tc", "nsenter"):
        if shutil.which(tool) is None:
            raise UserError(f'topology.kind = "netns" needs `{tool}` (iproute2, '
                            f'util-linux), which is not installed')
    probe = f"{PREFIX}{os.getpid()}-probe"
    result = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"network namespaces are not available here: "
                        f"{result.stderr.strip() or 'ip netns add failed'}")
    _ip("netns", "delete", probe)


def _run(argv: list[str]) -> str:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode != 0:
        raise UserError(f"{' '.join(argv)}: {result.stderr.strip() or 'failed'}")
    return result.stdout


def _ip(*args: str, netns: str | None = None) -> str:
    return _run(["ip", *(("-n", netns) if netns else ()), *args])


def _tc(*args: str, netns: str) -> str:
    return _run(["tc", "-n", netns, *args])


def tbf_args(mbit: float, burst_kb: float | None = None,
             queue_ms: float = TBF_LATENCY_MS) -> list[str]:
    """A TBF at `mbit`. The default bucket holds at least 2 ms at the rate (the kernel's
    timer ticks are up to 4 ms apart, and a smaller bucket would under-shoot) and at least
    a full 64 KiB GSO packet; a bucket given is kept, but never below one 1514-byte frame
    (TBF drops what its bucket cannot hold). `queue_ms`: how long a frame may wait for
    tokens before it is dropped."""
    rate_bytes = mbit * 1e6 / 8
    if burst_kb is None:
        burst = max(int(rate_bytes * 0.002), 65536 + 1514)
    else:
        burst = max(int(burst_kb * 1024), 1514)
    return ["tbf", "rate", f"{mbit:g}mbit", "burst", str(burst),
            "latency", f"{queue_ms:g}ms"]


def _subnet() -> int:
    """An emulated /24 that no route of this namespace uses yet."""
    routes = _ip("route", "show")
    start = (os.getpid() * 8 + next(_counter)) % 512
    for k in range(512):
        subnet = (start + k) % 512
        if controller_address(subnet).rsplit(".", 1)[0] + "." not in routes:
            return subnet
    raise UserError("no free emulated subnet in 198.18.0.0/15")


class DataCentre:
    """Builds the namespaces, links, shaping, delay lines and cgroups of a layout; tears
    them all down on exit, whatever happened."""

    def __init__(self, layout: Layout, *, log_dir: Path) -> None:
        self.layout = layout
        self.log_dir = log_dir
        self.tag = f"{os.getpid()}-{next(_counter)}"
        self.core = f"{PREFIX}{self.tag}-core"
        self.controller_link = f"cl{self.tag}"[:15]
        self.hosts: dict[str, Host] = {}
        self._namespaces: list[str] = []
        self._groups: list[cgroups.CpuGroup] = []
        self._delay: subprocess.Popen | None = None
        #: (host, interface a, interface b, delay in µs) of every delayed link.
        self._links: list[tuple[str, str, str, int]] = []

    @property
    def emulator_pids(self) -> tuple[int, ...]:
        """The delay line's process (none without delays), for its CPU."""
        return () if self._delay is None else (self._delay.pid,)

    def __enter__(self) -> DataCentre:
        try:
            self.build()
        except BaseException:
            self.teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()

    def host(self, role: str, i: int) -> Host:
        return self.hosts[self.layout.host(role, i).name]

    def build(self) -> None:
        require_support()
        remove_stale()
        subnet = _subnet()
        self._add_netns(self.core)
        _ip("link", "add", "name", "br0", "type", "bridge", netns=self.core)
        _ip("link", "set", "dev", "br0", "up", netns=self.core)
        _ip("link", "add", "name", self.controller_link, "type", "veth", "peer", "name",
            "ctl", "netns", self.core)
        _ip("link", "set", "dev", "ctl", "master", "br0", "up", netns=self.core)
        _ip("addr", "add", f"{controller_address(subnet)}/24", "dev", self.controller_link)
        _ip("link", "set", "dev", self.controller_link, "up")
        for i, planned in enumerate(self.layout.hosts):
            self.hosts[planned.name] = self._add_host(i, planned, address(subnet, i))
        if self._links:
            self._start_delay()

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("link", "set", "dev", "lo", "up", netns=name)

    def _add_host(self, i: int, planned: PlannedHost, addr: str) -> Host:
        netns = f"{PREFIX}{self.tag}-{planned.name}"
        self._add_netns(netns)
        a, b, port = f"h{i}a", f"h{i}b", f"h{i}p"
        _ip("link", "add", "name", a, "type", "veth", "peer", "name", "eth0", "netns", netns,
            netns=self.core)
        _ip("addr", "add", f"{addr}/24", "dev", "eth0", netns=netns)
        _ip("link", "set", "dev", "eth0", "up", netns=netns)
        if planned.delay_ms > 0:
            _ip("link", "add", "name", b, "type", "veth", "peer", "name", port, netns=self.core)
            for dev in (a, b):
                _ip("link", "set", "dev", dev, "up", netns=self.core)
            _ip("link", "set", "dev", port, "master", "br0", "up", netns=self.core)
            self._links.append((planned.name, a, b, round(planned.delay_ms * 1000)))
        else:
            port = a
            _ip("link", "set", "dev", a, "master", "br0", "up", netns=self.core)
        if planned.egress_mbit > 0:
            _tc("qdisc", "replace", "dev", "eth0", "root",
                *tbf_args(planned.egress_mbit, planned.egress_burst_kb,
                          planned.egress_queue_ms), netns=netns)
        if planned.ingress_mbit > 0:
            _tc("qdisc", "replace", "dev", port, "root",
                *tbf_args(planned.ingress_mbit, planned.ingress_burst_kb,
                          planned.ingress_queue_ms), netns=self.core)
        group = cgroups.CpuGroup(f"{PREFIX}{self.tag}-{planned.name}",
                                 quota=planned.cpu_quota, cpus=planned.cpus,
                                 period_us=self.layout.cpu_period_us)
        self._groups.append(group)
        prefix = ("nsenter", f"--net={NETNS_DIR / netns}", "--",
                  *cgroups.join_prefix(group))
        return Host(planned.name, addr, prefix, group, thread_quota=planned.thread_quota)

    def _start_delay(self) -> None:
        """One `cachelab-delay` for every delayed link, in the core namespace; its
        statistics go to `delay.json` (a line per link, named after its host)."""
        out = self.log_dir / "delay.out"
        links = [arg for name, a, b, us in self._links
                 for arg in ("--link", f"{name}:{a}:{b}:{us}")]
        argv = ["nsenter", f"--net={NETNS_DIR / self.core}", "--",
                str(find_binary("cachelab-delay")), *links,
                "--stats-file", str(self.log_dir / "delay.json")]
        if shutil.which("setpriv"):
            argv = ["setpriv", "--pdeathsig", "KILL", "--", *argv]
        with open(out, "wb") as sink:
            # setpriv and nsenter exec, so this PID becomes the delay line's own.
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=sink, stderr=sink,
                                    start_new_session=True)
        self._delay = proc
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if "ready" in out.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.01)
        raise UserError(f"the delay line did not start; see {out}")

    def teardown(self) -> None:
        """Kills what runs in our namespaces and cgroups (by PID), stops the delay lines
        (so they write their statistics), and removes namespaces, links and cgroups."""
        proc = self._delay
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for netns in reversed(self._namespaces):
            _remove_netns(netns)
        for group in self._groups:
            _kill(group.pids())
            group.remove()
        subprocess.run(["ip", "link", "delete", self.controller_link], capture_output=True)
        self._namespaces, self._groups, self._delay, self._links = [], [], None, []


def _kill(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _remove_netns(netns: str) -> None:
    pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True)
    _kill([int(p) for p in pids.stdout.split() if p.isdigit()])
    subprocess.run(["ip", "netns", "delete", netns], capture_output=True)


def _owner(name: str) -> int | None:
    return cgroups.owner_pid(name, PREFIX)


def remove_stale() -> list[str]:
    """Removes the namespaces, controller links and cgroups that a cachelab process which
    no longer runs left behind (killed with -9, say); returns what it removed."""
    removed = []
    listing = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for line in listing.splitlines():
        name = line.split()[0] if line.split() else ""
        owner = _owner(name)
        if owner is not None and not cgroups.pid_alive(owner):
            _remove_netns(name)
            removed.append(name)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    for line in links.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        link = parts[1].strip().split("@")[0]
        owner = cgroups.owner_pid(link, "cl")
        if owner is not None and not cgroups.pid_alive(owner):
            subprocess.run(["ip", "link", "delete", link], capture_output=True)
            removed.append(link)
    for directory in cgroups.stale(PREFIX, cgroups.pid_alive):
        try:
            _kill([int(p) for p in (directory / "cgroup.procs").read_text().split()])
            time.sleep(0.05)
            for child in directory.iterdir():
                if child.is_dir() and child.name.startswith(cgroups.THREAD_PREFIX):
                    child.rmdir()
            directory.rmdir()
            removed.append(str(directory))
        except OSError:
            pass
    return removed


def leftovers(owner: int) -> list[str]:
    """What of ours, made by process `owner`, still exists (for tests and checks)."""
    found = [n.split()[0] for n in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                                  text=True).stdout.splitlines()
             if n.split() and _owner(n.split()[0]) == owner]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in links.splitlines()
             if line.count(":") >= 2]
    found += [name for name in names if name.startswith(f"cl{owner}-")]
    found += [str(d) for d in cgroups.stale(PREFIX, lambda pid: pid != owner)]
    return found
