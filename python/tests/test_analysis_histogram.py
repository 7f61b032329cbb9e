"""Freedman-Diaconis buckets with an overflow bucket, against hand-computed widths."""

import numpy as np
import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.histogram import MAX_BUCKETS, freedman_diaconis_width, histogram


def test_freedman_diaconis_width_by_hand():
    # 1..8 with linear percentiles: Q1 = 1 + 0.25 * 7 = 2.75, Q3 = 1 + 0.75 * 7 = 6.25,
    # IQR = 3.5; n^(1/3) = 2, so the width is 2 * 3.5 / 2 = 3.5.
    assert freedman_diaconis_width(range(1, 9)) == pytest.approx(3.5)


def test_buckets_by_hand():
    # Width 3.5 from 1 to 8: ceil(7 / 3.5) = 2 buckets, [1, 4.5) and [4.5, 8].
    h = histogram(range(1, 9))
    assert h.width == pytest.approx(3.5)
    assert h.edges == pytest.approx((1, 4.5, 8))
    assert h.counts == (4, 4)
    assert h.overflow == 0 and h.cutoff == 8


def test_values_above_the_cutoff_overflow():
    h = histogram([*range(1, 9), 100, 250], cutoff=8)
    assert h.counts == (4, 4)
    assert h.overflow == 2
    assert h.total == 10


def test_cutoff_percentile():
    # 0..100: the 90th percentile is 90, so 91..100 (ten values) overflow.
    h = histogram(range(101), cutoff_percentile=90)
    assert h.cutoff == pytest.approx(90)
    assert h.overflow == 10
    assert sum(h.counts) == 91
    assert h.edges[0] == 0 and h.edges[-1] >= 90


def test_zero_iqr_falls_back_to_sturges():
    # Q1 = Q3 = 5, so FD gives 0; Sturges: range 4 / (log2 8 + 1) = 4 / 4 = 1.
    values = [5, 5, 5, 5, 5, 5, 5, 9]
    assert freedman_diaconis_width(values) == 0
    h = histogram(values)
    assert h.width == pytest.approx(1)
    assert h.counts == (7, 0, 0, 1)


@pytest.mark.parametrize("values", [[2.5], [3, 3, 3]])
def test_constant_values_make_one_zero_width_bucket(values):
    h = histogram(values)
    assert h.counts == (len(values),)
    assert h.edges == (values[0], values[0]) and h.width == 0 and h.overflow == 0


def test_every_value_is_counted_once():
    rng = np.random.default_rng(3)
    values = np.concatenate([rng.exponential(1.0, 5000), rng.exponential(50.0, 50)])
    h = histogram(values, cutoff_percentile=99)
    assert h.total == len(values)
    assert h.overflow == int(np.sum(values > h.cutoff))
    assert all(b - a == pytest.approx(h.width) for a, b in zip(h.edges, h.edges[1:-1],
                                                               strict=False))


def test_shared_width_and_start_line_two_histograms_up():
    a = histogram([0.1, 0.4, 0.5, 0.9], width=0.25, start=0.0, cutoff=1.0)
    b = histogram([0.2, 0.3, 0.95, 1.5], width=0.25, start=0.0, cutoff=1.0)
    assert a.edges == b.edges == pytest.approx((0, 0.25, 0.5, 0.75, 1.0))
    assert a.counts == (1, 1, 1, 1)
    assert b.counts == (1, 1, 0, 1) and b.overflow == 1


def test_tiny_width_is_capped():
    h = histogram([0.0, 1.0], width=1e-9)
    assert len(h.counts) == MAX_BUCKETS
    assert sum(h.counts) == 2


@pytest.mark.parametrize(("values", "kwargs", "message"), [
    ([], {}, "at least one value"),
    ([1.0, float("nan")], {}, "finite"),
    ([1.0, 2.0], {"cutoff": 3, "cutoff_percentile": 90}, "not both"),
    ([1.0, 2.0], {"cutoff_percentile": 0}, "percentile"),
    ([1.0, 2.0], {"start": 1.5}, "above the smallest value"),
    ([1.0, 2.0], {"cutoff": 0.5}, "below its start"),
    ([1.0, 2.0], {"width": -1}, "width must be positive"),
])
def test_bad_arguments_are_refused(values, kwargs, message):
    with pytest.raises(AnalysisError, match=message):
        histogram(values, **kwargs)
