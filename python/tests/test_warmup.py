"""The warm-up rule (analysis/warmup.py) on synthetic series, `[load.warmup]` in
experiment files, and a cold memcached warmed by a lookaside client before measuring."""

import io
import sqlite3

import pytest

from cachelab import store
from cachelab.analysis import warmup as rule
from cachelab.commands import run as run_cmd
from cachelab.errors import UserError
from cachelab.hosts.binaries import find_binary
from cachelab.run.progress import Progress
from cachelab.spec import experiment
from cachelab.spec.warmup import EMPTY_SERVER_MAX_S, Warmup


def series(hit_ratios, rate=1000):
    """One second per hit ratio, `rate` requests a second, every request a GET."""
    return [rule.Second(rate, round(rate * h), rate - round(rate * h)) for h in hit_ratios]


def rising(seconds, tau=3.0, top=0.9):
    import math
    return [top * (1 - math.exp(-t / tau)) for t in range(seconds)]


def test_a_hit_ratio_that_levels_off_is_warm_once_it_stops_rising():
    rule_ = Warmup(window_s=5)
    assert not rule.judge(series(rising(10)), rule_).warm  # 0 .. 0.86: still rising
    verdict = rule.judge(series(rising(30)), rule_)
    assert verdict.warm and verdict.hit_ratio == pytest.approx(0.9, abs=0.01)
    assert verdict.reason.startswith("warm after 30 s")


def test_a_hit_ratio_that_keeps_rising_never_warms():
    verdict = rule.judge(series([t / 100 for t in range(60)]), Warmup(window_s=5))
    assert not verdict.warm
    assert "hit ratio still rising" in verdict.reason


def test_a_given_target_is_held_to_its_share_as_dcperf_does():
    flat = series([0.5] * 20)
    assert rule.judge(flat, Warmup(window_s=5)).warm  # steady at 0.5: warm by estimate
    verdict = rule.judge(flat, Warmup(window_s=5, hit_ratio_target=0.9))
    assert not verdict.warm and "under 0.95 of the target 0.900" in verdict.reason
    assert rule.judge(series([0.86] * 5), Warmup(window_s=5, hit_ratio_target=0.9)).warm


def test_an_unsteady_rate_is_not_warm_whatever_the_hit_ratio():
    seconds = [rule.Second(ops, ops, 0) for ops in [1000, 1500, 700, 1300, 600] * 4]
    verdict = rule.judge(seconds, Warmup(window_s=5))
    assert not verdict.warm and "rate CV" in verdict.reason
    assert verdict.rate_cv is not None and verdict.rate_cv > 0.05


def test_too_few_seconds_are_not_warm_and_writes_have_no_hit_ratio():
    assert not rule.judge(series([1.0] * 9), Warmup(window_s=5)).warm
    writes = [rule.Second(1000, 0, 0)] * 10
    verdict = rule.judge(writes, Warmup(window_s=5))
    assert verdict.warm and verdict.hit_ratio is None and "no GETs" in verdict.reason
    check = verdict.check()
    assert check.name == "warm-up" and check.passed and check.statistic == -1.0


BASE = 'name = "w"\nrun_time_s = 4\nwarmup_s = 1\ncooldown_s = 1\n'


def test_warmup_fields_parse_with_their_defaults():
    exp = experiment.parse(BASE + "[workload]\npopulate = false\n")
    w = exp.points[0].config.load.warmup
    assert w == Warmup() and w.hit_ratio_share == 0.95 and w.steady_cv == 0.05
    assert w.bound_s(populated=False, trace=False) == EMPTY_SERVER_MAX_S
    assert w.bound_s(populated=True, trace=False) == 0
    exp = experiment.parse(BASE + "[load.warmup]\nmax_s = 20\nhit_ratio_target = 0.8\n")
    assert exp.points[0].config.load.warmup.bound_s(populated=True, trace=False) == 20


@pytest.mark.parametrize("line, message", [
    ("hit_ratio_share = 1.5", "load.warmup.hit_ratio_share: must be in (0, 1], got 1.5"),
    ("steady_cv = -1", "load.warmup.steady_cv: must be >= 0, got -1.0"),
    ("window_s = 1", "load.warmup.window_s: must be >= 2 (seconds), got 1.0"),
    ("max_s = \"long\"", "load.warmup.max_s: expected a number, got a string 'long'"),
    ("colour = 1", "load.warmup.colour: unknown field"),
])
def test_a_bad_warmup_field_is_refused_in_one_line_naming_it(line, message):
    with pytest.raises(UserError) as err:
        experiment.parse(BASE + f"[load.warmup]\n{line}\n")
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


LOOKASIDE = """name = "cold-lookaside"
repetitions = 1
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
order = "sweep"
[validation]
cv_threshold = 5.0
[servers]
kind = "memcached"
[middleware]
count = 0
[load]
clients = 2
[load.warmup]
window_s = 2
max_s = {max_s}
{extra}
[workload]
populate = false
preset = "twitter-cluster{cluster}"
key_maximum = 2000
"""


def _warmup_rows(out):
    with sqlite3.connect(out / store.FILENAME) as db:
        return db.execute("SELECT passed, statistic, reason FROM run_check "
                          "WHERE name = 'warm-up'").fetchall()


def test_a_cold_memcached_is_warmed_by_lookaside_before_measuring(tmp_path):
    find_binary("cachelab-load")
    path = tmp_path / "cold.toml"
    path.write_text(LOOKASIDE.format(max_s=30, extra="", cluster=4))
    out = tmp_path / "out"
    run_cmd.run(path, out, progress=Progress(io.StringIO()))
    [(passed, hit_ratio, reason)] = _warmup_rows(out)
    assert passed == 1 and hit_ratio > 0.5, reason
    phases = sorted(p.name for p in (out / "runs" / "p001-r01").glob("warmup-*.json"))
    assert phases and phases[0] == "warmup-01-0.json"
    with sqlite3.connect(out / store.FILENAME) as db:
        hits, misses = db.execute("SELECT hits, misses FROM run").fetchone()
    assert hits > 0.5 * (hits + misses)  # measured on a warm cache


def test_a_run_that_never_warms_is_flagged_with_its_reason(tmp_path):
    find_binary("cachelab-load")
    path = tmp_path / "never.toml"
    never = "hit_ratio_target = 1.0\nhit_ratio_share = 1.0"  # lone gets always miss
    path.write_text(LOOKASIDE.format(max_s=4, extra=never, cluster=4))
    out = tmp_path / "out"
    _, page = run_cmd.run(path, out, progress=Progress(io.StringIO()))
    [(passed, _, reason)] = _warmup_rows(out)
    assert passed == 0 and "under 1 of the target 1.000" in reason
    html = page.read_text()
    assert "warm-up" in html and "the cache was not warm" in html
