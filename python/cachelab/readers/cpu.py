"""CPU utilisation of this host, sampled every second (through psutil), like mpstat.

The kernel counts, per CPU and for all CPUs together, the time spent in each state since
boot; psutil's `cpu_times` reads those counters. Utilisation over an interval is the
difference of two readings, each state's share of the total difference. As mpstat does,
guest time (already counted in user and nice by the kernel) is taken out of usr and nice
so nothing is counted twice.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

#: The kernel's CPU states (proc(5)), as psutil names them; a state the platform does not
#: count reads as 0.
COLUMNS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "guest",
           "guest_nice")
#: The shares reported per sample, in percent; they add up to 100.
SHARES = ("usr", "nice", "sys", "iowait", "irq", "softirq", "steal", "idle")

#: Cumulative seconds per state (COLUMNS order), keyed "all", "0", "1", ...
Counters = dict[str, tuple[float, ...]]


@dataclass(frozen=True)
class Sample:
    """One CPU's (or `all`) utilisation over one interval, in percent."""

    t: float  # seconds from the sampler's start to the end of the interval
    cpu: str  # "all", or the CPU number
    usr: float
    nice: float
    sys: float
    iowait: float
    irq: float
    softirq: float
    steal: float
    idle: float


def read_counters() -> Counters:
    """The cumulative CPU times of all CPUs together ("all") and of each CPU ("0", "1",
    ... in the order the kernel lists the online ones)."""
    def row(times: object) -> tuple[float, ...]:
        return tuple(float(getattr(times, c, 0.0)) for c in COLUMNS)

    counters = {"all": row(psutil.cpu_times())}
    counters.update((str(i), row(t)) for i, t in enumerate(psutil.cpu_times(percpu=True)))
    return counters


def utilisation(before: Counters, after: Counters, t: float) -> list[Sample]:
    """The shares of each CPU between two readings. A CPU whose counters did not move (or
    went backwards, as on hotplug) gives no sample."""
    samples = []
    for cpu, new in after.items():
        old = before.get(cpu)
        if old is None:
            continue
        d = dict(zip(COLUMNS, (b - a for a, b in zip(old, new, strict=True)), strict=True))
        if any(v < 0 for v in d.values()):
            continue
        usr = d["user"] - d["guest"]
        nice = d["nice"] - d["guest_nice"]
        parts = {"usr": usr, "nice": nice, "sys": d["system"], "iowait": d["iowait"],
                 "irq": d["irq"], "softirq": d["softirq"], "steal": d["steal"],
                 "idle": d["idle"]}
        total = sum(parts.values())
        if total <= 0:
            continue
        samples.append(Sample(t, cpu, **{k: 100.0 * v / total for k, v in parts.items()}))
    return samples


class Sampler:
    """A thread that reads the CPU counters every `interval` seconds until stopped.

    Used as a context manager around a run; `samples` holds every CPU's shares per
    interval. The reader and the clock are injectable for tests.
    """

    def __init__(self, interval: float = 1.0, read: Callable[[], Counters] = read_counters,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._read = read
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self.samples: list[Sample] = []

    def __enter__(self) -> Sampler:
        self._start = self._clock()
        self._last = self._read()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now = self._read()
            self.samples.extend(utilisation(self._last, now, self._clock() - self._start))
            self._last = now


def core_percent(before: tuple[float, float], after: tuple[float, float],
                 seconds: float) -> tuple[float, float]:
    """(usr, sys) of a group of processes over an interval, in percent of one core, from
    two readings of its cumulative CPU seconds; 200 means two cores busy all the time."""
    if seconds <= 0:
        return 0.0, 0.0
    return (max(0.0, 100.0 * (after[0] - before[0]) / seconds),
            max(0.0, 100.0 * (after[1] - before[1]) / seconds))


def process_usage(pid: int, proc: str = "/proc") -> tuple[float, float]:
    """Cumulative (user, system) CPU seconds of process `pid`, all its threads, from
    /proc/<pid>/stat (fields 14 and 15, in clock ticks)."""
    with open(f"{proc}/{pid}/stat") as f:
        text = f.read()
    # The command name (field 2) is in parentheses and may hold spaces or parentheses:
    # the fields after it start past the last ')'.
    fields = text[text.rindex(")") + 2:].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


class GroupSampler:
    """A thread that reads each host's cumulative (user, system) CPU seconds every
    `interval` seconds (a cgroup's counters), so each host's cost is seen apart from the
    machine's. `samples` holds (t, host, usr %, sys %) per host and interval."""

    def __init__(self, readers: dict[str, Callable[[], tuple[float, float]]],
                 interval: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.readers = readers
        self.interval = interval
        self._clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="host-cpu", daemon=True)
        self.samples: list[tuple[float, str, float, float]] = []

    def __enter__(self) -> GroupSampler:
        self._start = self._last_t = self._clock()
        self._last = {name: read() for name, read in self.readers.items()}
        if self.readers:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            now_t = self._clock()
            for name, read in self.readers.items():
                try:
                    now = read()
                except OSError:  # the host went away under us: nothing more to read
                    continue
                usr, sys_ = core_percent(self._last[name], now, now_t - self._last_t)
                self.samples.append((now_t - self._start, name, usr, sys_))
                self._last[name] = now
            self._last_t = now_t


def process_seconds(pid: int) -> tuple[float, float] | None:
    """Cumulative (user, system) CPU seconds of process `pid` and its live children (a
    command prefix that forks, such as a namespace's, leaves the server a child), or None
    when the process is gone."""
    try:
        root = psutil.Process(pid)
        user = system = 0.0
        for proc in (root, *root.children(recursive=True)):
            times = proc.cpu_times()
            user += times.user
            system += times.system
        return user, system
    except psutil.Error:
        return None
