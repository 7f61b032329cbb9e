"""The progress display: time left from the runs so far, plain lines and the live panel."""

import io

from rich.console import Console

from cachelab import store
from cachelab.hosts.hostinfo import HostInfo
from cachelab.run import progress, validate
from cachelab.spec import experiment as spec

EXPERIMENT = spec.parse("""
name = "p"
repetitions = 2
run_time_s = 10
warmup_s = 1
cooldown_s = 1
[sweep.factors]
"load.clients" = [1, 2, 4]
""")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def record(point, repetition):
    summary = store.RunSummary(12345.0, 0.5, 0.4, 0.6, 0.9, 1.2, 3.0, 10, 0, 0, 0.021)
    return store.RunRecord(point, repetition, 0.0, 10.2, summary, HostInfo.from_json({}), (), (),
                           (), {})


def test_time_left_is_the_runs_left_at_the_mean_duration():
    clock = Clock()
    outcomes = {0: [validate.RunOutcome(1, 0.01)], 1: [], 2: []}  # one run stored already
    status = progress.Status(EXPERIMENT, outcomes, clock=clock)
    assert status.runs_left() == 5
    assert status.remaining_s() == 5 * (10 + progress.OVERHEAD_GUESS_S)  # nothing timed yet
    status.start(EXPERIMENT.points[0], 2)
    clock.now += 12
    status.finish(EXPERIMENT.points[0], record(0, 2))
    outcomes[0].append(validate.RunOutcome(1, 0.01))
    assert status.runs_left() == 4 and status.remaining_s() == 4 * 12
    status.start(EXPERIMENT.points[1], 1)
    clock.now += 5
    assert status.remaining_s() == 4 * 12 - 5
    assert progress.clock_text(status.elapsed_s()) == "0:00:17"
    assert progress.clock_text(3725) == "1:02:05"


def test_an_extra_repetition_counts_as_a_run_left():
    outcomes = {0: [validate.RunOutcome(1, 0.01)] * 2, 1: [], 2: []}
    status = progress.Status(EXPERIMENT, outcomes, clock=Clock())
    status.start(EXPERIMENT.points[0], 3)
    assert status.runs_left() == 5


def test_plain_lines_and_the_live_panel():
    outcomes = {0: [], 1: [], 2: []}
    status = progress.Status(EXPERIMENT, outcomes, clock=Clock())
    verdict = validate.Verdict(2, (0, 1), 0.01, True, False, "stable")
    plain = io.StringIO()
    p = progress.Progress(plain)
    p.begin(status)
    status.start(EXPERIMENT.points[2], 1)
    p.started(status)
    status.finish(EXPERIMENT.points[2], record(2, 1))
    p.finished(status, record(2, 1), verdict)
    p.end(status)
    lines = plain.getvalue().splitlines()
    assert lines[0] == "experiment 'p': 3 points x 2 repetitions (up to 4), 10 s runs"
    assert lines[1].startswith("point 3/3 rep 1 [4 clients] started; elapsed 0:00:00")
    assert lines[2] == ("point 3/3 rep 1 [4 clients]: 12,345 ops/s, avg 0.500 ms, "
                        "p99 0.900 ms, cv 2.1%, 10.2 s -> stable")
    assert lines[3] == "1 run in 0:00:00"

    screen = io.StringIO()
    live = progress.LiveProgress(Console(file=screen, force_terminal=True, width=120))
    live.begin(status)
    status.start(EXPERIMENT.points[1], 2)
    panel = live._render().plain
    assert "point 2/3 [2 clients] repetition 2" in panel and "runs left" in panel
    live.finished(status, record(1, 2), verdict)
    live.end(status)
    assert "12,345 ops/s" in screen.getvalue()
    assert type(progress.for_terminal(io.StringIO())) is progress.Progress
