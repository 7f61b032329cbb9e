"""What `cachelab run` shows while it works: the point and repetition running, the time
elapsed and the estimated time left, and one summary line per finished run.

`Status` holds the numbers (tested directly); `Progress` prints plain lines (pipes, CI,
tests); `LiveProgress` redraws a rich status panel on a terminal with the summary lines
scrolling above it. Points are named as the report names them ("read-only, 8 workers,
16 clients"), not by their factor paths.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from rich.console import Console
from rich.live import Live
from rich.text import Text

from cachelab.run.validate import RunOutcome, Verdict
from cachelab.spec.experiment import Experiment, Point
from cachelab.spec.naming import name_of
from cachelab.store import RunRecord

#: Assumed overhead of a run beyond its run time (start, populate, stop, store) until a
#: run has been timed.
OVERHEAD_GUESS_S = 3.0


class Status:
    def __init__(self, exp: Experiment, outcomes: dict[int, list[RunOutcome]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.exp = exp
        self.outcomes = outcomes
        self.clock = clock
        self.began = clock()
        self.durations: list[float] = []
        self.point: Point | None = None
        self.repetition = 0
        self.run_began = self.began

    @property
    def runs_this_session(self) -> int:
        return len(self.durations)

    @property
    def runs_stored(self) -> int:
        return sum(len(r) for r in self.outcomes.values())

    def start(self, point: Point, repetition: int) -> None:
        self.point, self.repetition = point, repetition
        self.run_began = self.clock()

    def finish(self, point: Point, record: RunRecord) -> None:
        self.durations.append(self.clock() - self.run_began)
        self.point = None

    def runs_left(self) -> int:
        """Planned runs not done yet, the one running included (extra repetitions that
        validation may add are not foreseen)."""
        left = sum(max(self.exp.repetitions - len(r), 0) for r in self.outcomes.values())
        if self.point is not None and len(self.outcomes[self.point.index]) >= \
                self.exp.repetitions:
            left += 1  # an extra repetition is running
        return left

    def seconds_per_run(self) -> float:
        if self.durations:
            return sum(self.durations) / len(self.durations)
        return self.exp.run_time_s + OVERHEAD_GUESS_S

    def remaining_s(self) -> float:
        """Estimated seconds until the end: the runs left at the mean duration so far,
        less what the current run has already used."""
        running = self.clock() - self.run_began if self.point is not None else 0.0
        return max(self.runs_left() * self.seconds_per_run() - running, 0.0)

    def elapsed_s(self) -> float:
        return self.clock() - self.began


def clock_text(seconds: float) -> str:
    seconds = round(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def summary_line(status: Status, record: RunRecord, verdict: Verdict) -> str:
    s = record.summary
    cv = "-" if s.cv_within is None else f"{s.cv_within:.1%}"
    label = name_of(status.exp.points[record.point])
    if verdict.stable:
        state = " -> stable"
    elif verdict.runs < status.exp.repetitions:
        state = ""
    else:
        state = f" -> {'unstable, one more run' if verdict.more else 'unstable'}"
    p99 = next((i for i in record.intervals if i.role == "load" and i.name == "p99"), None)
    interval = f" [{p99.low_ms:.3f}, {p99.high_ms:.3f}]" if p99 else ""
    failed = [k.name for k in record.checks if not k.passed]
    return (f"point {record.point + 1}/{len(status.exp.points)} rep {record.repetition} "
            f"[{label}]: {s.throughput:,.0f} ops/s, avg {s.response_ms:.3f} ms, "
            f"p99 {s.p99_ms:.3f}{interval} ms, cv {cv}, "
            f"{record.ended_at - record.started_at:.1f} s{state}"
            + (" (the load generator fell behind its schedule)" if s.fell_behind else "")
            + (f" (failed check: {', '.join(failed)})" if failed else ""))


class Progress:
    """Plain lines, for anything that is not a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout

    def _print(self, line: str) -> None:
        print(line, file=self.stream, flush=True)

    def begin(self, status: Status) -> None:
        exp = status.exp
        done = status.runs_stored
        self._print(f"experiment {exp.name!r}: {len(exp.points)} points x "
                    f"{exp.repetitions} repetitions (up to {exp.max_repetitions}), "
                    f"{exp.run_time_s:g} s runs" + (f"; {done} runs already stored" if done
                                                    else ""))

    def started(self, status: Status) -> None:
        assert status.point is not None
        self._print(f"point {status.point.index + 1}/{len(status.exp.points)} rep "
                    f"{status.repetition} [{name_of(status.point)}] started; elapsed "
                    f"{clock_text(status.elapsed_s())}, about "
                    f"{clock_text(status.remaining_s())} left")

    def finished(self, status: Status, record: RunRecord, verdict: Verdict) -> None:
        self._print(summary_line(status, record, verdict))

    def end(self, status: Status) -> None:
        n = status.runs_this_session
        self._print(f"{n} run{'' if n == 1 else 's'} in {clock_text(status.elapsed_s())}")


class LiveProgress(Progress):
    """A status panel redrawn twice a second on a terminal."""

    def __init__(self, console: Console | None = None) -> None:
        super().__init__()
        self.console = console or Console()
        self.live: Live | None = None
        self.status: Status | None = None

    def _print(self, line: str) -> None:
        self.console.print(line, highlight=False, markup=False)

    def _render(self) -> Text:
        s = self.status
        if s is None or s.point is None:
            return Text("")
        return Text.assemble(
            ("running ", "bold"), f"point {s.point.index + 1}/{len(s.exp.points)} ",
            (f"[{name_of(s.point)}]", "cyan"), f" repetition {s.repetition}\n",
            f"this run {clock_text(s.clock() - s.run_began)} of about "
            f"{clock_text(s.seconds_per_run())}; elapsed {clock_text(s.elapsed_s())}; "
            f"{s.runs_left()} runs left, about {clock_text(s.remaining_s())} to go")

    def begin(self, status: Status) -> None:
        self.status = status
        super().begin(status)
        self.live = Live(get_renderable=self._render, console=self.console,
                         refresh_per_second=2, transient=True)
        self.live.start()

    def started(self, status: Status) -> None:
        pass  # the panel shows it

    def end(self, status: Status) -> None:
        if self.live is not None:
            self.live.stop()
        super().end(status)


def for_terminal(stream: TextIO | None = None) -> Progress:
    """The live panel on a terminal, plain lines otherwise."""
    stream = stream or sys.stdout
    return LiveProgress() if stream.isatty() else Progress(stream)
