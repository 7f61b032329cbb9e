import math
import random
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.readers import proxy_stats
from cachelab.readers.proxy_stats import Welford


def welford_of(xs):
    w = Welford(0, 0.0, 0.0)
    for x in xs:
        w = w.merge(Welford(1, x, 0.0))
    return w


def test_welford_merge_matches_direct_mean_and_variance():
    rng = random.Random(7)
    a = [rng.gauss(100, 15) for _ in range(500)]
    b = [rng.gauss(130, 5) for _ in range(300)]
    merged = welford_of(a).merge(welford_of(b))
    xs = a + b
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    assert merged.count == 800
    assert merged.mean == pytest.approx(mean, rel=1e-12)
    assert merged.variance == pytest.approx(var, rel=1e-9)


def test_variance_of_fewer_than_two_values_is_nan():
    assert math.isnan(Welford(1, 3.0, 0.0).variance)


GOLDEN = (Path(__file__).resolve().parents[2] / "crates" / "cachelab-proxy" / "schema"
          / "stats-file.golden.jsonl")


def test_a_torn_last_line_is_ignored_and_complete_windows_kept(tmp_path):
    path = tmp_path / "stats.jsonl"
    start, worker, _, total, _ = GOLDEN.read_text().splitlines()
    path.write_text("\n".join([start, worker, total]) + '\n{"type": "wind')
    stats = proxy_stats.load(path)
    assert len(stats.windows) == 1 and len(stats.worker_windows) == 1
    assert stats.summary is None
    rows = proxy_stats.stage_rows(stats.windows[0].ops)
    assert rows[0].op == "get" and rows[0].count == 2 and rows[0].p99 == 250


@pytest.mark.parametrize("content, message", [
    ('{"type": "window"}\n', "does not start with a proxy stats header"),
    ('{"type": "start", "schema": 99}\n', "schema 99 is not supported"),
    ('{"type": "start", "schema": 1}\nnot json\n{"type": "summary"}\n', "2: not a JSON object"),
    ('{"type": "start", "schema": 1}\n', "1: start: no field 'version'"),
])
def test_bad_stats_files_are_user_errors(tmp_path, content, message):
    path = tmp_path / "stats.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        proxy_stats.load(path)


def test_a_missing_stats_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        proxy_stats.load(tmp_path / "nope.jsonl")
