"""The benchmarks' target logic (bench/_targets.py): pairing, median, spread, verdicts."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import _proc_cpu  # noqa: E402
import _targets  # noqa: E402
import pgo  # noqa: E402
import proxy_bench  # noqa: E402
import server_cost_bench  # noqa: E402
from _targets import AT_LEAST, AT_MOST, WITHIN, judge  # noqa: E402


def test_ratios_pair_repetition_i_with_repetition_i():
    assert _targets.ratios([1.0, 2.0, 3.0], [2.0, 2.0, 2.0]) == [0.5, 1.0, 1.5]


def test_a_missing_or_zero_side_gives_no_value_for_that_repetition():
    assert _targets.ratios([1.0, None, 3.0], [0.0, 2.0, 3.0]) == [None, None, 1.0]


def test_repetition_counts_must_match():
    with pytest.raises(ValueError, match="repetition counts differ"):
        _targets.ratios([1.0, 2.0], [1.0])


def test_differences_scale_ms_to_us():
    assert _targets.differences([0.300, 0.250], [0.280, 0.260], 1000) == pytest.approx(
        [20.0, -10.0])


def test_verdict_rests_on_the_median_and_spread_is_min_to_max():
    t = judge("T1a", "64 B, get, open 20k/s", [0.90, 0.70, 0.78], AT_MOST, 0.80)
    assert t.ratio == 0.78
    assert t.spread == (0.70, 0.90)
    assert t.verdict == "PASS"
    assert t.conclusive


def test_a_median_over_the_threshold_misses():
    assert judge("T2", "c", [1.01, 1.2, 0.9], AT_MOST, 1.0).verdict == "MISS"
    assert judge("T1b", "c", [1.3, 1.2, 1.24], AT_LEAST, 1.25).verdict == "MISS"
    assert judge("T1b", "c", [1.3, 1.25, 1.0], AT_LEAST, 1.25).verdict == "PASS"


def test_within_compares_the_absolute_value():
    assert judge("L5", "c", [-9.0, -12.0, -8.0], WITHIN, 10, unit="us").verdict == "PASS"
    assert judge("L5", "c", [-11.0, -12.0, 3.0], WITHIN, 10, unit="us").verdict == "MISS"


def test_nothing_measured_is_not_a_pass():
    t = judge("L4", "c", [None, None, None], AT_LEAST, 1.5)
    assert (t.verdict, t.ratio, t.spread, t.conclusive) == ("n/a", None, None, False)


def test_max_steal_ignores_missing_readings():
    assert judge("T2", "c", [1.0], AT_MOST, 1.0, steal=[0.01, None, 0.03]).max_steal == 0.03
    assert judge("T2", "c", [1.0], AT_MOST, 1.0).max_steal is None


def test_one_repetition_is_printed_but_marked_not_a_verdict():
    t = judge("T1a", "64 B, get, open 20k/s", [0.75], AT_MOST, 0.80, steal=[0.002])
    line = _targets.format_target(t)
    assert not t.conclusive
    assert "0.75x" in line and "<= 0.80x" in line and "PASS" in line
    assert "steal max 0.2%" in line
    assert line.endswith("(1 repetition: not a verdict)")
    assert _targets.summary_line([t]) == "targets: 1 PASS, 0 MISS (1 repetition: not a verdict)"


def test_a_line_shows_median_spread_threshold_and_verdict():
    t = judge("T1c", "64 B, 1:1, open 20k/s", [62.0, 48.5, 55.0], AT_MOST, 50, unit="us",
              steal=[0.0, 0.001], note="twemproxy 30 us")
    line = _targets.format_target(t)
    assert "55.0 us (spread 48.5..62.0)" in line
    assert "<= 50 us" in line and "MISS" in line and "steal max 0.1%" in line
    assert line.endswith("; twemproxy 30 us")
    assert "not a verdict" not in line


def test_titles_head_each_group_of_lines_once():
    a1 = judge("T1a", "x", [0.7, 0.7, 0.7], AT_MOST, 0.8)
    a2 = judge("T1a", "y", [0.9, 0.9, 0.9], AT_MOST, 0.8)
    b = judge("T2", "x", [None, None, None], AT_MOST, 1.0)
    lines = _targets.format_targets([a1, a2, b], {"T1a": "T1a title"})
    assert [line for line in lines if not line.startswith("  ")] == ["T1a title", "T2"]
    assert _targets.summary_line([a1, a2, b]) == (
        "targets: 1 PASS, 1 MISS, 1 not measured (median of 3 interleaved repetitions)")


def test_json_record_names_case_ratio_spread_threshold_and_verdict():
    record = judge("T1a", "c", [0.7, 0.9, 0.8], AT_MOST, 0.8).as_json()
    assert {k: record[k] for k in ("name", "case", "ratio", "spread", "threshold", "verdict")} == {
        "name": "T1a", "case": "c", "ratio": 0.8, "spread": [0.7, 0.9], "threshold": "<= 0.8",
        "verdict": "PASS"}


# bench/_proc_cpu.py: a process's user time from /proc.

def test_user_time_is_the_exact_runtime_split_in_the_ratio_of_the_ticks():
    assert _proc_cpu.split_user_ns(4_000_000_000, 300, 100) == 3_000_000_000
    assert _proc_cpu.split_user_ns(1_234_567, 0, 7) == 0


def test_no_tick_or_a_runtime_that_went_backwards_gives_no_user_time():
    assert _proc_cpu.split_user_ns(5_000_000, 0, 0) is None
    assert _proc_cpu.split_user_ns(-1, 3, 1) is None


def test_user_ns_splits_the_runtime_between_two_samples():
    before = _proc_cpu.CpuSample(utime_ticks=100, stime_ticks=50, runtime_ns=1_500_000_000)
    after = _proc_cpu.CpuSample(utime_ticks=130, stime_ticks=60, runtime_ns=1_900_000_000)
    assert _proc_cpu.user_ns(before, after) == pytest.approx(300_000_000)
    assert after.cpu_seconds == pytest.approx(190 / _proc_cpu.CLK_TCK)


# bench/proxy_bench.py: issue 20's targets over results rows.

def row(rate, **configs):
    """A one-backend results row: per configuration, (CPU s/100k, user ns/request) per
    repetition."""
    case = {"backends": 1, "value": 64, "mix": "get",
            "loop": "closed" if rate is None else "open", "rate": rate}
    return {"case": case} | {
        name.replace("_", "-"): {"repetitions": [
            {"proxy_cpu_s_per_100k": cpu, "proxy_user_ns_per_request": user, "steal": 0.0}
            for cpu, user in reps]}
        for name, reps in configs.items()}


def test_issue20_targets_compare_production_with_the_floor_and_default_with_twemproxy():
    closed = row(None, floor=[(1.0, 300.0)] * 3,
                 cachelab_production=[(1.0, 500.0), (1.1, 700.0), (1.02, 550.0)],
                 cachelab_default=[(2.0, 900.0)] * 3, twemproxy=[(1.5, 800.0)] * 3,
                 baseline_production=[(1.25, 650.0)] * 3)
    open20 = row(20_000, floor=[(1.0, None)] * 3, cachelab_production=[(1.04, None)] * 3,
                 cachelab_default=[(1.6, None)] * 3, twemproxy=[(1.5, None)] * 3)
    by_name = {t.name: t for t in proxy_bench.issue20_targets([closed, open20])}
    assert by_name["T20a"].ratio == pytest.approx(1 / 1.02)  # the floor's CPU over ours
    assert by_name["T20a"].verdict == "PASS"
    assert "baseline-production 0.80x" in by_name["T20a"].note
    assert (by_name["T20b"].ratio, by_name["T20b"].verdict) == (pytest.approx(1.04), "PASS")
    assert (by_name["T20c"].ratio, by_name["T20c"].verdict) == (pytest.approx(1.6 / 1.5), "PASS")
    t20d = by_name["T20d"]
    assert (t20d.ratio, t20d.unit, t20d.verdict) == (550.0, "ns", "PASS")
    assert t20d.note == ("cachelab-default 900 ns, floor 300 ns, "
                         "baseline-production 650 ns")


def test_issue34_targets_ask_more_of_production_than_issue_20():
    closed = row(None, floor=[(1.0, 400.0)] * 3,
                 cachelab_production=[(0.96, 560.0), (0.90, 700.0), (0.94, 580.0)],
                 cachelab_default=[(2.0, 900.0)] * 3, twemproxy=[(1.9, 800.0)] * 3)
    open40 = row(40_000, floor=[(1.0, None)] * 3, cachelab_production=[(1.2, None)] * 3,
                 cachelab_default=[(1.7, None)] * 3, twemproxy=[(1.5, None)] * 3)
    by_name: dict[str, list] = {}
    for t in proxy_bench.issue34_targets([closed, open40]):
        by_name.setdefault(t.name, []).append(t)
    (t34a,), (t34b,), (t34c,) = by_name["T34a"], by_name["T34b"], by_name["T34c"]
    assert (t34a.ratio, t34a.verdict) == (pytest.approx(1.2), "MISS")
    assert (t34b.ratio, t34b.verdict) == (pytest.approx(1 / 0.94), "PASS")
    assert (t34c.ratio, t34c.verdict) == (pytest.approx(1.45), "PASS")
    assert t34c.note == "580 ns against 400 ns"
    # the default mode against twemproxy in every loop: closed and open alike
    assert [t.verdict for t in by_name["T34d"]] == ["PASS", "MISS"]


def _reps(**by_name: list[tuple[float, float, float]]) -> dict[str, list[dict]]:
    """Runs by target: (ops/s, p99 ms, server us per request) per repetition."""
    return {name: [{"ops_per_sec": o, "p99_ms": p, "server_us_per_request": us, "errors": 0}
                   for o, p, us in reps] for name, reps in by_name.items()}


def test_the_server_cost_targets_compare_server_cpu_and_capped_throughput():
    coalescing = server_cost_bench.COALESCING
    redis = _reps(direct=[(1, 1, 7.0)] * 3, **{"direct-pipelined": [(1, 1, 0.7)] * 3,
                                            "cachelab-production": [(1, 1, 2.0)] * 3,
                                            coalescing: [(1, 1, 1.4)] * 3},
                  twemproxy=[(1, 1, 2.5)] * 3)
    memcached = _reps(direct=[(1, 1, 7.3)] * 3, **{"direct-pipelined": [(1, 1, 6.0)] * 3,
                                                "cachelab-production": [(1, 1, 6.5)] * 3,
                                                coalescing: [(1, 1, 6.0)] * 3},
                      twemproxy=[(1, 1, 6.0)] * 3)
    capped = _reps(direct=[(45_000, 7.2, 6.0)] * 3,
                   **{"cachelab-production": [(90_000, 3.0, 2.0)] * 3,
                      coalescing: [(135_000, 2.0, 1.5)] * 3})
    by_name = {t.name: t for t in server_cost_bench.targets(redis, memcached, capped)}
    # Judged on the production mode; the coalescing configuration's value is the note.
    assert by_name["S1"].note == "-t 1 --pipeline 64: 0.56x"
    assert by_name["S4"].note == "-t 1 --pipeline 64: 3.00x"
    assert by_name["S5"].note == "-t 1 --pipeline 64: -5.2 ms"
    assert (by_name["S1"].ratio, by_name["S1"].verdict) == (pytest.approx(0.8), "PASS")
    assert (by_name["S2"].ratio, by_name["S2"].verdict) == (pytest.approx(2 / 7), "PASS")
    assert (by_name["S3"].ratio, by_name["S3"].verdict) == (pytest.approx(6.5 / 6), "MISS")
    assert (by_name["S4"].ratio, by_name["S4"].verdict) == (pytest.approx(2.0), "PASS")
    assert (by_name["S5"].ratio, by_name["S5"].verdict) == (pytest.approx(-4.2), "PASS")


def test_the_profile_guided_build_trains_every_mode_proxy_bench_measures():
    """A mode the training never runs would be compiled as cold code and measured slow."""
    trained = [args for _name, args, _protocol, _works in pgo.MODES]
    for mode, args in proxy_bench.CACHELAB_MODES.items():
        assert args in trained, mode
