"""CPU limits and CPU accounting for emulated hosts, through cgroup v2 or v1, whichever
this machine has.

v2: one directory under a cgroup2 mount whose `cgroup.controllers` lists `cpu`:
`cpu.max` ("QUOTA PERIOD"), `cpuset.cpus`, usage from `cpu.stat` (user_usec, system_usec).
v1: a directory of the same name in each of the `cpu`, `cpuacct` and `cpuset` hierarchies
(wherever each is mounted, combined or not): `cpu.cfs_quota_us` / `cpu.cfs_period_us`,
`cpuset.cpus` (and `cpuset.mems`, which must be set before a task may join), usage from
`cpuacct.usage_user` / `cpuacct.usage_sys` (nanoseconds).

A process joins by writing its PID to `cgroup.procs` of each directory before it execs
(`join_prefix`), so every thread it starts is inside from the first instruction.

A host's serving threads may each get a cgroup of their own inside the host's (an emulated
core, `cap_threads`): v1 moves a single thread by writing its id to the child's `tasks`
(the cpu hierarchy only; accounting stays with the host's cpuacct group); v2 makes the
child `threaded` (the host's group becomes a threaded domain), enables `cpu` in the host's
`cgroup.subtree_control` and writes the id to the child's `cgroup.threads`. Children are
named `cachelab-thread<n>` and removed before their host's group.

A group's CPU weight follows the harness's nice value (v2 `cpu.weight.nice`, v1
`cpu.shares` from the kernel's weight of that nice value). The kernel shares the CPU
between sibling groups by their weights, and a nice value counts only among the tasks of
one group: without this, the hosts of a harness run under `nice -n 19` (a test suite, say)
competed with those of a measurement run on the same machine as equals, nice-0 tasks each.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError

#: The CFS period by default; a quota q cores is q x the period per period. A host that
#: spends its quota early in a period waits out the rest of it, so the period bounds the
#: stall a request may see (docs/topologies.md has the measurement behind
#: topology.cpu_period_ms's default).
PERIOD_US = 100_000
#: The smallest runtime per period the kernel accepts (v1 cfs_quota_us, v2 cpu.max).
MIN_QUOTA_US = 1000
#: The kernel's load weight of nice -20 .. 19 (kernel/sched/core.c sched_prio_to_weight);
#: nice 0 is 1024, v1's default cpu.shares.
NICE_WEIGHTS = (
    88761, 71755, 56483, 46273, 36291, 29154, 23254, 18705, 14949, 11916,
    9548, 7620, 6100, 4904, 3906, 3121, 2501, 1991, 1586, 1277,
    1024, 820, 655, 526, 423, 335, 272, 215, 172, 137,
    110, 87, 70, 56, 45, 36, 29, 23, 18, 15,
)


def shares_of_nice(nice: int) -> int:
    """v1 cpu.shares of a group weighed as one task of this nice value."""
    return NICE_WEIGHTS[min(max(nice, -20), 19) + 20]


def own_nice() -> int:
    """This process's nice value, which the hosts it starts inherit."""
    return os.getpriority(os.PRIO_PROCESS, 0)


@dataclass(frozen=True)
class Hierarchies:
    """Where the CPU controllers are: `v2` set, or the v1 mounts by controller."""

    v2: Path | None
    v1: dict[str, Path]

    @property
    def version(self) -> int | None:
        return 2 if self.v2 else 1 if {"cpu", "cpuacct", "cpuset"} <= set(self.v1) else None


def parse_mounts(text: str, read: Callable[[str], str] = lambda p: Path(p).read_text()
                 ) -> Hierarchies:
    """Finds the CPU controllers in /proc/mounts text. A cgroup2 mount counts only if its
    root has the cpu controller (on these machines the v2 mount has none)."""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 4:
            continue
        path, kind, options = fields[1], fields[2], fields[3].split(",")
        if kind == "cgroup2" and v2 is None:
            try:
                if "cpu" in read(f"{path}/cgroup.controllers").split():
                    v2 = Path(path)
            except OSError:
                pass
        elif kind == "cgroup":
            for controller in ("cpu", "cpuacct", "cpuset"):
                if controller in options and controller not in v1:
                    v1[controller] = Path(path)
    return Hierarchies(v2, v1)


def detect() -> Hierarchies:
    return parse_mounts(Path("/proc/mounts").read_text())


class CpuGroup:
    """One host's cgroup: created with its limits, joined by its processes, read for usage,
    removed when the host goes (after its processes are gone)."""

    def __init__(self, name: str, *, quota: float = 0.0, cpus: str | None = None,
                 hierarchies: Hierarchies | None = None, period_us: int = PERIOD_US,
                 nice: int | None = None) -> None:
        self.name = name
        self.period_us = period_us
        #: The group's weight as one task of this nice value (default: the harness's).
        self.nice = own_nice() if nice is None else nice
        h = hierarchies or detect()
        if h.version is None:
            raise UserError("no CPU cgroup controller found (neither cgroup v2 with cpu nor "
                            "v1 cpu, cpuacct and cpuset); hosts need one for CPU accounting")
        self.version = h.version
        if h.v2:
            self.dirs = [h.v2 / name]
        else:
            self.dirs = list(dict.fromkeys(h.v1[c] / name for c in ("cpu", "cpuacct",
                                                                     "cpuset")))
        self._h = h
        #: The per-thread groups inside this one (`cap_threads`), removed first.
        self._threads: list[Path] = []
        for d in self.dirs:
            d.mkdir(exist_ok=True)
        try:
            self._limit(quota, cpus)
        except UserError:
            self.remove()
            raise
        except OSError as exc:
            self.remove()
            raise UserError(f"cannot set the CPU limits of cgroup {name}: {exc}") from exc

    def _limit(self, quota: float, cpus: str | None) -> None:
        runtime = self.quota_us(quota) if quota else 0  # refused before anything is written
        if self.version == 2:
            d = self.dirs[0]
            if quota:
                (d / "cpu.max").write_text(f"{runtime} {self.period_us}")
            if self.nice:
                (d / "cpu.weight.nice").write_text(str(self.nice))
            if cpus:
                (d / "cpuset.cpus").write_text(cpus)
            return
        cpu, cpuset = self._h.v1["cpu"] / self.name, self._h.v1["cpuset"] / self.name
        if quota:
            (cpu / "cpu.cfs_period_us").write_text(str(self.period_us))
            (cpu / "cpu.cfs_quota_us").write_text(str(runtime))
        if self.nice:
            (cpu / "cpu.shares").write_text(str(shares_of_nice(self.nice)))
        parent = cpuset.parent
        (cpuset / "cpuset.mems").write_text((parent / "cpuset.mems").read_text().strip())
        (cpuset / "cpuset.cpus").write_text(
            cpus or (parent / "cpuset.cpus").read_text().strip())

    def quota_us(self, quota: float) -> int:
        """`quota` cores as runtime per period; the kernel refuses less than 1 ms (the
        experiment file's check says so first, naming the field)."""
        runtime = round(quota * self.period_us)
        if runtime < MIN_QUOTA_US:
            raise UserError(f"cgroup {self.name}: {quota:g} core over a "
                            f"{self.period_us} us period is below the kernel's minimum "
                            f"runtime of {MIN_QUOTA_US} us per period")
        return runtime

    def cap_threads(self, tids: list[int], quota: float, period_us: int | None = None
                    ) -> list[Path]:
        """Gives each thread of `tids` (of a process already in this group) a cgroup of
        its own inside this one, limited to `quota` cores per `period_us` (None: this
        group's period); returns their directories."""
        period = period_us or self.period_us
        runtime = round(quota * period)
        if runtime < MIN_QUOTA_US:
            raise UserError(f"cgroup {self.name}: {quota:g} core over a {period} us period "
                            f"is below the kernel's minimum runtime of {MIN_QUOTA_US} us "
                            f"per period")
        cpu_dir = self.dirs[0] if self.version == 2 else self._h.v1["cpu"] / self.name
        made = []
        try:
            for tid in tids:
                child = cpu_dir / f"{THREAD_PREFIX}{len(self._threads)}"
                child.mkdir()
                self._threads.append(child)
                made.append(child)
                for name, value in thread_writes(self.version, runtime, period):
                    (child / name).write_text(value)
                    if name == "cgroup.type":  # v2: the controller below the host's group
                        (cpu_dir / "cgroup.subtree_control").write_text("+cpu")
                (child / thread_join_file(self.version)).write_text(str(tid))
        except OSError as exc:
            raise UserError(f"cannot give thread {tid} of cgroup {self.name} a CPU "
                            f"quota of its own: {exc}") from exc
        return made

    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs]

    def usage(self) -> tuple[float, float]:
        """(user, system) CPU seconds used by the group's processes so far.

        The total is the kernel's exact runtime (v1 `cpuacct.usage`, v2 `usage_usec`); the
        user/system split is sampled at scheduler ticks, so only its ratio is taken. The
        sampled figures alone are biased under a short CFS period: a throttled process
        that runs right after each period starts is found running at too many ticks
        (measured: 0.2 core over a 10 ms period read 0.36-0.62 s of 1.55 s where the
        exact runtime was 0.31 s)."""
        if self.version == 2:
            stat = dict(line.split() for line in
                        (self.dirs[0] / "cpu.stat").read_text().splitlines())
            return split_total(int(stat["usage_usec"]) / 1e6, int(stat["user_usec"]),
                               int(stat["system_usec"]))
        acct = self._h.v1["cpuacct"] / self.name
        return split_total(int((acct / "cpuacct.usage").read_text()) / 1e9,
                           int((acct / "cpuacct.usage_user").read_text()),
                           int((acct / "cpuacct.usage_sys").read_text()))

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in self.procs_files()[0].read_text().split()]
        except OSError:
            return []

    def remove(self, timeout: float = 5.0) -> None:
        """Removes the directories; a cgroup with processes left cannot be removed, so it
        waits for them (bounded) after the caller killed them."""
        deadline = time.monotonic() + timeout
        children = [c for d in self.dirs if d.exists() for c in d.iterdir()
                    if c.is_dir() and c.name.startswith(THREAD_PREFIX)]
        for d in [*children, *self.dirs]:
            while d.exists():
                try:
                    d.rmdir()
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)


#: The name of a per-thread cgroup inside a host's (an emulated core).
THREAD_PREFIX = "cachelab-thread"


def thread_writes(version: int, runtime_us: int, period_us: int) -> list[tuple[str, str]]:
    """What to write into a per-thread cgroup, in order, to limit it to `runtime_us` per
    `period_us`: v1 the CFS period then the quota (the kernel checks the quota against
    the period in force); v2 the child's type first (the host's group then becomes a
    threaded domain and the cpu controller may be enabled below it), then `cpu.max`."""
    if version == 2:
        return [("cgroup.type", "threaded"), ("cpu.max", f"{runtime_us} {period_us}")]
    return [("cpu.cfs_period_us", str(period_us)), ("cpu.cfs_quota_us", str(runtime_us))]


def thread_join_file(version: int) -> str:
    """Where a thread id is written to move that one thread (not its whole process)."""
    return "cgroup.threads" if version == 2 else "tasks"


def split_total(total: float, user: float, system: float) -> tuple[float, float]:
    """`total` seconds split as `user` : `system` (tick-sampled figures in any unit); all
    user time when neither was sampled yet."""
    sampled = user + system
    if sampled <= 0:
        return total, 0.0
    return total * user / sampled, total * system / sampled


def join_prefix(group: CpuGroup) -> list[str]:
    """A command prefix that moves the process into `group` and then execs the rest."""
    script = " && ".join(f'echo $$ > "{f}"' for f in group.procs_files()) + ' && exec "$@"'
    return ["/bin/sh", "-c", script, "cachelab-join"]


def stale(prefix: str, alive: Callable[[int], bool], hierarchies: Hierarchies | None = None
          ) -> list[Path]:
    """Our cgroup directories (named `prefix<pid>-...`) whose owner process `alive(pid)`
    says is gone."""
    h = hierarchies or detect()
    roots = [h.v2] if h.v2 else list(dict.fromkeys(h.v1.values()))
    found = []
    for root in roots:
        if root is None or not root.exists():
            continue
        for d in root.iterdir():
            owner = owner_pid(d.name, prefix)
            if owner is not None and not alive(owner):
                found.append(d)
    return found


def owner_pid(name: str, prefix: str) -> int | None:
    """The PID in a name `prefix<pid>-...` (how cachelab names what a process made)."""
    if not name.startswith(prefix):
        return None
    digits = name[len(prefix):].split("-", 1)[0]
    return int(digits) if digits.isdigit() else None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
