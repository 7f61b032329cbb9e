"""A process's CPU time from /proc: its clock ticks, and its exact on-CPU time split by them.

/proc/PID/stat's utime and stime (fields 14 and 15) are the process's exact on-CPU time
split in the proportion of the kernel's tick samples (a tick may be 250 Hz) of user against
kernel mode, printed in clock ticks (USER_HZ, 100 here): over a run of a few seconds they
give its CPU time to about 1%. /proc/PID/task/TID/schedstat's first field is each thread's
time on a CPU in nanoseconds. A process's user time over an interval is taken as its
schedstat time split in the ratio of the user ticks to all ticks (user_ns), so it is not
rounded to 10 ms. Checked against perf's timer samples (`perf record -e cpu-clock -p PID`,
share of samples outside the kernel) over 3 s of closed-loop GETs, 2026-11-27: a user share
of 25.6% against perf's 23.7% for cachelab-proxy -t 4 --pipeline 16, 3.8% against 3.7% for
cachelab-floor.

`perf stat` is no better here: this guest has no PMU; `-e user_time` is the rusage of a
command perf starts, not of `-p PID`; and a counting `cpu-clock:u` ignores the `:u`.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    """One reading of a process's CPU counters (every thread alive at the time)."""

    utime_ticks: int
    stime_ticks: int
    runtime_ns: int  # the sum over its threads of schedstat's on-CPU nanoseconds

    @property
    def cpu_seconds(self) -> float:
        return (self.utime_ticks + self.stime_ticks) / CLK_TCK


def sample(pid: int) -> CpuSample:
    """The counters of process `pid` now. stat's ticks include threads that have exited;
    schedstat is summed over the threads alive, which for the proxies measured here are
    the same threads from start to end of a run."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    runtime = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        # A thread that exited between the listing and the read counts no more.
        with contextlib.suppress(FileNotFoundError):
            runtime += int((task / "schedstat").read_text().split()[0])
    return CpuSample(int(fields[11]), int(fields[12]), runtime)


def split_user_ns(runtime_ns: float, utime_ticks: int, stime_ticks: int) -> float | None:
    """The user-mode part of `runtime_ns` on-CPU nanoseconds that were sampled as
    `utime_ticks` user and `stime_ticks` kernel ticks; None when no tick fell in them
    (nothing to split by) or the runtime went backwards (a thread exited)."""
    ticks = utime_ticks + stime_ticks
    if ticks <= 0 or runtime_ns < 0:
        return None
    return runtime_ns * utime_ticks / ticks


def user_ns(before: CpuSample, after: CpuSample) -> float | None:
    """User-mode nanoseconds between two samples of one process (split_user_ns)."""
    return split_user_ns(after.runtime_ns - before.runtime_ns,
                         after.utime_ticks - before.utime_ticks,
                         after.stime_ticks - before.stime_ticks)
