import json
import math
import random

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


def _op(count):
    w = {"count": count, "mean": 10.0, "m2": 1.0}
    return {"count": count, "hits": count, "misses": 0, "errors": 0, "keys": w,
            "response_us": w, "decode_us": w, "queue_wait_us": w, "worker_service_us": w,
            "server_service_us": w, "worker_processing_us": w,
            "rt_percentiles_us": {"p50": 9, "p90": 10, "p99": 12, "p999": 13, "max": 14}}


def test_a_torn_last_line_is_ignored_and_complete_windows_kept(tmp_path):
    path = tmp_path / "stats.jsonl"
    lines = [
        {"type": "start", "schema": 1, "workers": 2},
        {"type": "window", "scope": "worker", "window": 0, "ops": {"get": _op(3)}},
        {"type": "window", "scope": "total", "window": 0, "ops": {"get": _op(3)}},
    ]
    path.write_text("\n".join(json.dumps(x) for x in lines) + '\n{"type": "wind')
    stats = proxy_stats.load(path)
    assert len(stats.windows) == 1 and len(stats.worker_windows) == 1
    assert stats.summary is None
    rows = proxy_stats.stage_rows(stats.windows[0]["ops"])
    assert rows[0].op == "get" and rows[0].count == 3 and rows[0].p99 == 12


@pytest.mark.parametrize("content, message", [
    ('{"type": "window"}\n', "does not start with a proxy stats header"),
    ('{"type": "start", "schema": 99}\n', "schema 99 is not supported"),
    ('{"type": "start", "schema": 1}\nnot json\n{"type": "summary"}\n', "2: not a JSON object"),
])
def test_bad_stats_files_are_user_errors(tmp_path, content, message):
    path = tmp_path / "stats.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        proxy_stats.load(path)


def test_a_missing_stats_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="cannot read"):
        proxy_stats.load(tmp_path / "nope.jsonl")
