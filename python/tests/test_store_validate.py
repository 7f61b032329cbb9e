"""The results database (migrations, one transaction per run) and validation, including the
runner's scheduling of extra repetitions, with a synthetic executor instead of processes."""

import io
import sqlite3

import pytest

from cachelab import store
from cachelab.errors import UserError
from cachelab.hosts.hostinfo import HostInfo
from cachelab.run import validate
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

EXPERIMENT = """
name = "synthetic"
order = "sweep"
repetitions = 2
run_time_s = 10
warmup_s = 2
cooldown_s = 1
[validation]
cv_threshold = 0.05
max_repetitions = 5
[sweep.factors]
"load.clients" = [1, 2]
"""

NO_HOST = HostInfo.from_json({})


def record(point: int, repetition: int, throughput: float, cv_within: float | None = 0.01):
    summary = store.RunSummary(throughput, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0, 0, cv_within)
    return store.RunRecord(point, repetition, 1.0, 2.0, summary,
                           HostInfo.from_json({"kernel": "x"}), (), (), (), {"note.txt": b"hello"})


def fake_executor(throughputs: dict[int, list[float]], cvs: dict[int, list] | None = None):
    calls = []

    def execute(exp, point, repetition, directory):
        calls.append((point.index, repetition))
        cv = (cvs or {}).get(point.index, [0.01] * 10)[repetition - 1]
        return record(point.index, repetition, throughputs[point.index][repetition - 1], cv)

    execute.calls = calls
    return execute


def run(tmp_path, execute, text=EXPERIMENT, **kw):
    return run_experiment(spec.parse(text), tmp_path, progress=Progress(io.StringIO()),
                          execute=execute, **kw)


def test_migrations_set_the_version_and_are_idempotent(tmp_path):
    path = tmp_path / "r.db"
    with store.Store(path) as s:
        assert s.version == len(store.MIGRATIONS) == 8
    with store.Store(path) as s:  # reopening applies nothing twice
        names = [r[0] for r in s.conn.execute("SELECT name FROM _migrations")]
        assert names == ["0001_initial", "0002_run_fell_behind", "0003_hosts_and_links",
                         "0004_capacity_trials", "0005_run_send_lag", "0006_trust",
                         "0007_links_and_emulator",
                         "0008_tls_and_process_cpu"]
        assert s.conn.execute("PRAGMA user_version").fetchone()[0] == 8


def test_an_old_database_is_migrated_and_keeps_its_runs(tmp_path):
    conn = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    store.migrate(conn, store.MIGRATIONS[:1])
    conn.execute("INSERT INTO experiment VALUES (1, 'x', '', '', '', '{}', 0)")
    conn.execute("INSERT INTO point VALUES (1, 1, 0, 'p', '{}', '{}', 1)")
    conn.execute("INSERT INTO run (point_id, repetition, started_at, ended_at, throughput, "
                 "response_ms, p50_ms, p90_ms, p99_ms, p999_ms, max_ms, hits, misses, errors, "
                 "host) VALUES (1, 1, 0, 1, 500, 1, 1, 1, 1, 1, 1, 0, 0, 0, '{}')")
    conn.close()
    with store.Store(tmp_path / "r.db") as s:
        assert s.version == len(store.MIGRATIONS)
        row = s.conn.execute("SELECT throughput, fell_behind, start_at_unix_ms FROM run"
                             ).fetchone()
        assert tuple(row) == (500, None, None)


def test_a_failing_migration_leaves_the_previous_version(tmp_path):
    conn = sqlite3.connect(tmp_path / "r.db", isolation_level=None)

    def broken(c):
        c.execute("CREATE TABLE half_done (x)")
        raise RuntimeError("boom")

    migrations = (*store.MIGRATIONS, store.Migration("9999_broken", broken))
    with pytest.raises(RuntimeError):
        store.migrate(conn, migrations)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(store.MIGRATIONS)
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'"
                        ).fetchone()[0] == 0


def test_a_database_from_a_newer_cachelab_is_refused(tmp_path):
    conn = sqlite3.connect(tmp_path / "r.db")
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(UserError, match="schema version 99, newer"):
        store.Store(tmp_path / "r.db")


def test_cv_and_steady_seconds():
    assert validate.cv([10, 10, 10]) == 0
    assert validate.cv([90, 110]) == pytest.approx(14.142135 / 100)
    assert validate.cv([5]) is None
    series = {0: 1, 1: 2, 2: 3, 3: 4, 4: 5}
    assert validate.steady_seconds(series, run_time=5, warmup=1, cooldown=1) == [2, 3, 4]


@pytest.mark.parametrize(("runs", "stable", "more"), [
    ([(100, 0.01)], False, True),                          # fewer than planned
    ([(100, 0.01), (101, 0.01)], True, False),             # steady and close
    ([(100, 0.01), (150, 0.01)], False, True),             # far apart: again
    ([(100, 0.20), (100, 0.01)], False, True),             # one unsteady run: replace it
    ([(100, 0.20), (100, 0.01), (101, 0.02)], True, False),
    ([(100, 0.01), (150, 0.01), (100, 0.01), (150, 0.01), (100, 0.01)], False, False),
])
def test_assess(runs, stable, more):
    outcomes = [validate.RunOutcome(x, c) for x, c in runs]
    v = validate.assess(outcomes, threshold=0.05, repetitions=2, max_repetitions=5)
    assert (v.stable, v.more) == (stable, more)
    if not stable and not more:
        assert "after 5 runs (the bound)" in v.reason


def test_an_unstable_series_gets_extra_repetitions_up_to_the_bound(tmp_path):
    execute = fake_executor({0: [100, 150] * 5, 1: [100, 101, 100, 100, 100]})
    outcome = run(tmp_path, execute)
    assert execute.calls == [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (1, 1), (1, 2)]
    assert len(outcome.unstable) == 1
    label, reason = outcome.unstable[0]
    assert label == "load.clients=1" and "CV between repetitions" in reason
    with store.Store(outcome.database) as s:
        assert [r.repetition for r in s.runs_by_point(outcome.experiment_id)[0]] == \
            [1, 2, 3, 4, 5]
        assert s.artifact(1, "note.txt") == b"hello"


def test_an_unsteady_run_is_replaced(tmp_path):
    execute = fake_executor({0: [100, 100, 100], 1: [100, 100]}, {0: [0.3, 0.01, 0.01]})
    outcome = run(tmp_path, execute)
    assert execute.calls == [(0, 1), (0, 2), (0, 3), (1, 1), (1, 2)]
    assert outcome.unstable == ()


def test_a_crash_loses_only_the_run_in_progress_and_resume_continues(tmp_path):
    throughputs = {0: [100, 100], 1: [100, 100]}
    calls = []

    def crash_on_third(exp, point, repetition, directory):
        calls.append((point.index, repetition))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return record(point.index, repetition, throughputs[point.index][repetition - 1])

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, crash_on_third)
    with pytest.raises(UserError, match="continue it with --resume"):
        run(tmp_path, fake_executor(throughputs))
    with pytest.raises(UserError, match="differs from the one"):
        run(tmp_path, fake_executor(throughputs), text=EXPERIMENT + "\n# edited", resume=True)
    execute = fake_executor(throughputs)
    outcome = run(tmp_path, execute, resume=True)
    assert execute.calls == [(1, 1), (1, 2)]
    assert outcome.runs_done == 2


def test_stored_state_tells_empty_unfinished_finished_and_other(tmp_path):
    from cachelab.run.runner import stored_state

    exp = spec.parse(EXPERIMENT)
    assert stored_state(exp, tmp_path) == "empty"

    class Stop(Exception):
        pass

    def one_then_crash(exp_, point, repetition, directory):
        if point.index == 1:
            raise Stop
        return record(point.index, repetition, 100.0)

    with pytest.raises(Stop):
        run(tmp_path, one_then_crash)
    assert stored_state(exp, tmp_path) == "unfinished"
    run(tmp_path, fake_executor({0: [100.0] * 5, 1: [100.0] * 5}), resume=True)
    assert stored_state(exp, tmp_path) == "finished"
    assert stored_state(spec.parse(EXPERIMENT.replace("[1, 2]", "[1, 3]")), tmp_path) == "other"


RANDOM = EXPERIMENT.replace('order = "sweep"', 'order = "randomized"\norder_seed = 11').replace(
    '"load.clients" = [1, 2]', '"load.clients" = [1, 2, 3, 4]')


def steady(points: int, runs: int = 5) -> dict[int, list[float]]:
    return {p: [100.0] * runs for p in range(points)}


def test_randomized_runs_every_planned_run_once_in_the_seeds_order(tmp_path):
    from cachelab.spec import order

    execute = fake_executor(steady(4))
    run(tmp_path, execute, text=RANDOM)
    assert [p for p, _ in execute.calls] == [p for p, _ in order.plan(range(4), 2,
                                                                       "randomized", 11)]
    assert sorted(execute.calls) == [(p, r) for p in range(4) for r in (1, 2)]
    with store.Store(tmp_path / store.FILENAME) as s:
        exp = s.experiment()
        assert (exp.id, exp.order, exp.order_seed) == (1, "randomized", 11)


def test_a_resumed_randomized_experiment_continues_in_the_same_order(tmp_path):
    whole = fake_executor(steady(4))
    run(tmp_path / "whole", whole, text=RANDOM.replace("order_seed = 11\n", ""))
    with store.Store(tmp_path / "whole" / store.FILENAME) as s:
        seed = s.experiment().order_seed
    assert seed > 0  # drawn and stored
    text = RANDOM.replace("order_seed = 11", f"order_seed = {seed}")
    calls = []

    def crash_on_fourth(exp, point, repetition, directory):
        calls.append((point.index, repetition))
        if len(calls) == 4:
            raise KeyboardInterrupt
        return record(point.index, repetition, 100.0)

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut", crash_on_fourth, text=text)
    rest = fake_executor(steady(4))
    run(tmp_path / "cut", rest, text=text, resume=True)
    assert [p for p, _ in calls[:3] + rest.calls] == [p for p, _ in whole.calls]


def test_interleaved_goes_repetition_by_repetition_and_validation_adds_rounds(tmp_path):
    text = RANDOM.replace('order = "randomized"', 'order = "interleaved"')
    execute = fake_executor({0: [100, 150, 100, 150, 100], 1: [100] * 5, 2: [100] * 5,
                             3: [100] * 5})
    run(tmp_path, execute, text=text)
    assert execute.calls[:8] == [(0, 1), (1, 1), (2, 1), (3, 1), (0, 2), (1, 2), (2, 2),
                                 (3, 2)]
    assert execute.calls[8:] == [(0, 3), (0, 4), (0, 5)]  # only point 0 was unstable


def test_runs_whose_load_generator_sent_late_are_stored_and_flagged(tmp_path):
    from cachelab.report import methodology

    def execute(exp, point, repetition, directory):
        lag = 0.5 if point.index == 1 else 0.01  # p99 is 1.0 ms in record()
        summary = store.RunSummary(100.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0, 0, 0.01,
                                   False, lag)
        return store.RunRecord(point.index, repetition, 1.0, 2.0, summary, NO_HOST, (), (),
                               (), {})

    run(tmp_path, execute)
    with store.Store(tmp_path / store.FILENAME) as s:
        lags = [r[0] for r in s.conn.execute("SELECT send_lag_p99_ms FROM run")]
        late = methodology.late_runs(s)
    assert sorted(lags) == [0.01, 0.01, 0.5, 0.5]
    assert [(r.point, r.repetition, r.send_lag_p99_ms) for r in late] == [(1, 1, 0.5),
                                                                          (1, 2, 0.5)]
    # The report lists them with what to do about it.
    from cachelab.report import write_report
    html = write_report(tmp_path).read_text()
    assert "sent late" in html and "load.busy_poll_us" in html


def _verdict(cvs, *, repetitions=3, max_repetitions=3, max_replacements=3):
    outcomes = [validate.RunOutcome(100.0, c) for c in cvs]
    return validate.assess(outcomes, threshold=0.05, repetitions=repetitions,
                           max_repetitions=max_repetitions, max_replacements=max_replacements)


def test_an_unsteady_run_is_replaced_beyond_max_repetitions():
    # r = 3 with max_repetitions = 3, as a factorial experiment sets it: one unsteady run.
    assert _verdict([0.01, 0.20, 0.01]).more
    assert not _verdict([0.01, 0.20, 0.01], max_replacements=0).more   # the old rule
    v = _verdict([0.01, 0.20, 0.01, 0.02])
    assert (v.stable, v.more, v.steady) == (True, False, (0, 2, 3))
    # Replacements are bounded: r + max_replacements runs in all.
    assert _verdict([0.2] * 5).more
    v = _verdict([0.2] * 6)
    assert not v.more and "after 6 runs (the bound)" in v.reason
    assert not _verdict([0.01, 0.2, 0.2, 0.2], max_replacements=1).more


def test_replacements_do_not_extend_runs_for_a_wide_cv_between():
    outcomes = [validate.RunOutcome(x, 0.01) for x in (100, 150, 100)]
    v = validate.assess(outcomes, threshold=0.05, repetitions=3, max_repetitions=3,
                        max_replacements=3)
    assert (v.stable, v.more) == (False, False)


def test_replace_unsteady_defaults_to_the_repetitions():
    from cachelab.spec import experiment
    base = 'name = "x"\nrepetitions = 4\n[validation]\nmax_repetitions = 4\n'
    assert experiment.parse(base).max_replacements == 4
    assert experiment.parse(base + "replace_unsteady = 0\n").max_replacements == 0
    with pytest.raises(UserError, match="validation.replace_unsteady"):
        experiment.parse(base + "replace_unsteady = -1\n")


DESIGN = """
name = "design"
order = "sweep"
repetitions = 2
run_time_s = 10
warmup_s = 2
cooldown_s = 1
[validation]
cv_threshold = 0.05
max_repetitions = 2
{extra}
[sweep.factors]
"load.clients" = [1, 2]
"middleware.workers" = [4, 8]
"""


def test_a_design_keeps_r_when_a_run_is_unsteady_and_include_unsteady_keeps_it(tmp_path):
    from cachelab.commands import factorial
    throughputs = {i: [100.0 * (i + 1) + rep for rep in range(4)] for i in range(4)}
    cvs = {i: [0.01] * 4 for i in range(4)}
    cvs[1] = [0.3, 0.01, 0.01, 0.01]  # point 1's first run is unsteady
    execute = fake_executor(throughputs, cvs)
    run(tmp_path / "a", execute, DESIGN.format(extra=""))
    assert [c for c in execute.calls if c[0] == 1] == [(1, 1), (1, 2), (1, 3)]
    out = factorial.run(tmp_path / "a", ["throughput"])
    assert "r = 2" in out and "1 unsteady run(s) left out: #2 rep 1" in out
    # Without replacements the design drops to r = 1; --include-unsteady keeps r = 2.
    execute = fake_executor(throughputs, cvs)
    run(tmp_path / "b", execute, DESIGN.format(extra="replace_unsteady = 0"))
    assert len(execute.calls) == 8
    assert "r = 1" in factorial.run(tmp_path / "b", ["throughput"])
    out = factorial.run(tmp_path / "b", ["throughput"], include_unsteady=True)
    assert "r = 2" in out and "unsteady runs are included" in out
    assert "1 unsteady run(s) included (--include-unsteady): #2 rep 1" in out
    with pytest.raises(UserError, match="--include-unsteady select runs of a stored"):
        factorial.run(tmp_path / "x.csv", ["throughput"], include_unsteady=True)
