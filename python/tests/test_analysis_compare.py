"""Matching points of experiments and testing their differences (pure)."""

import pytest

from cachelab.analysis.compare import PointKey, difference, match
from cachelab.analysis.errors import AnalysisError

PATHS = ["middleware.workers", "load.clients"]


def points(combos):
    return [PointKey(i, ", ".join(f"{k}={v}" for k, v in zip(PATHS, c, strict=True)),
                     dict(zip(PATHS, c, strict=True))) for i, c in enumerate(combos)]


def test_points_match_on_every_swept_factor_and_the_rest_is_explained():
    a = points([("8", "1"), ("8", "4"), ("32", "1"), ("32", "4")])
    b = points([("8", "1"), ("8", "4"), ("8", "16")])  # B sweeps clients at 8 workers
    m = match(PATHS, ["A", "B"], [a, b])
    assert m.rows == ((0, 0), (1, 1))
    assert m.unmatched == (
        "A #3 (middleware.workers=32, load.clients=1): B has no point with "
        "middleware.workers=32 (it has 8)",
        "A #4 (middleware.workers=32, load.clients=4): B has no point with "
        "middleware.workers=32 (it has 8)",
        "B #3 (middleware.workers=8, load.clients=16): A has no point with load.clients=16 "
        "(it has 1, 4)",
    )


def test_three_experiments_are_matched_with_the_first():
    a = points([("8", "1"), ("8", "4")])
    m = match(PATHS, ["A", "B", "C"], [a, points([("8", "4")]), points([("8", "1"), ("8", "4")])])
    assert m.rows == ((0, None, 0), (1, 0, 1))
    assert m.unmatched == ("A #1 (middleware.workers=8, load.clients=1): B has no point with "
                           "load.clients=1 (it has 4)",)


def test_a_missing_combination_and_no_match_at_all():
    a = points([("8", "1"), ("32", "4")])
    m = match(PATHS, ["A", "B"], [a, points([("8", "4"), ("8", "1")])])
    assert m.unmatched[0] == ("A #2 (middleware.workers=32, load.clients=4): B has no point "
                              "with middleware.workers=32 (it has 8)")
    assert m.unmatched[1] == ("B #1 (middleware.workers=8, load.clients=4): A has each of "
                              "these levels but not this combination")
    m = match(PATHS, ["A", "B"], [a, points([("8", "1"), ("16", "16")])])
    assert m.unmatched[-1] == ("B #2 (middleware.workers=16, load.clients=16): A has no point "
                               "with middleware.workers=16 (it has 8, 32) nor load.clients=16 "
                               "(it has 1, 4)")
    with pytest.raises(AnalysisError, match="the experiments share no point: middleware.workers "
                                            "is 8, 32 in A; 16 in B"):
        match(PATHS, ["A", "B"], [a, points([("16", "1")])])


def test_welch_t_test_by_hand():
    # Means 100 and 110, s = 5 each, 3 runs each: t = 10 / sqrt(25/3 + 25/3) = 2.449 with
    # Welch's nu = (50/3)^2 / (2 (25/3)^2 / 2) = 4. t[0.95; 4] = 2.132 < t < t[0.975; 4]
    # = 2.776, so the two-sided p lies between 0.05 and 0.10 (0.0705): not significant at
    # 5%, significant at 10%.
    d = difference((100, 5, 3), (110, 5, 3))
    assert d.ratio == pytest.approx(1.1)
    assert d.p_value == pytest.approx(0.0705, abs=5e-4) and d.significant is False
    assert difference((100, 5, 3), (110, 5, 3), level=0.10).significant is True
    # 30 apart: t = 7.35, p = 0.0018.
    assert difference((100, 5, 3), (130, 5, 3)).significant is True


def test_no_test_with_one_run_and_no_noise_means_any_difference_counts():
    d = difference((100, 0, 1), (120, 3, 3))
    assert (d.p_value, d.significant) == (None, None) and d.ratio == pytest.approx(1.2)
    assert difference((100, 0, 2), (100, 0, 2)).significant is False
    assert difference((100, 0, 2), (101, 0, 2)).significant is True
