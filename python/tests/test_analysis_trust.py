"""The trust checks on hand-checked constants: known intervals, an iid sample that passes,
an AR(1) series with rho 0.9 that fails independence, a linear drift that fails
stationarity, exponential sends that pass the arrival check and fixed ones that fail."""

import numpy as np
import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.trust import (
    client_saturation,
    independence,
    narrow_enough,
    poisson_arrivals,
    quantile_interval,
    stationarity,
)


def test_the_median_of_100_is_bounded_by_the_40th_and_61st_values():
    # The textbook 95% order-statistic interval for the median of n = 100 (Conover).
    values = np.arange(1, 101)
    interval = quantile_interval(values, np.ones(100, dtype=int), 0.5)
    assert (interval.low, interval.estimate, interval.high) == (40, 50, 61)
    assert interval.samples == 100


def test_a_histogram_counts_each_value_as_often_as_it_was_seen():
    # 1000 samples: 990 of 1 ms and 10 of 5 ms; the p99 is the 990th value.
    interval = quantile_interval([1.0, 5.0], [990, 10], 0.99)
    assert interval.estimate == 1.0
    # ranks 983 .. 997 straddle the step from 1 to 5
    assert (interval.low, interval.high) == (1.0, 5.0)


def test_the_interval_covers_the_true_quantile_at_its_confidence():
    rng = np.random.default_rng(7)
    true_p99 = -np.log(0.01)  # exponential with mean 1
    covered = 0
    trials = 300
    for _ in range(trials):
        sample = np.sort(rng.exponential(size=2000))
        interval = quantile_interval(sample, np.ones(len(sample), dtype=int), 0.99)
        covered += interval.low <= true_p99 <= interval.high
    assert covered / trials >= 0.92


def test_bad_histograms_and_quantiles_are_refused():
    with pytest.raises(AnalysisError):
        quantile_interval([], [], 0.5)
    with pytest.raises(AnalysisError):
        quantile_interval([2.0, 1.0], [1, 1], 0.5)
    with pytest.raises(AnalysisError):
        quantile_interval([1.0], [1], 1.0)


def test_an_iid_sample_passes_independence_and_stationarity():
    x = np.random.default_rng(1).normal(size=300)
    assert independence(x).passed
    assert stationarity(x).passed


def test_an_ar1_series_with_rho_0_9_fails_independence():
    rng = np.random.default_rng(2)
    x = np.zeros(300)
    for i in range(1, 300):
        x[i] = 0.9 * x[i - 1] + rng.normal()
    check = independence(x)
    assert not check.passed
    assert check.statistic > 0.7
    assert "correlated" in check.reason


def test_a_linear_drift_fails_stationarity():
    rng = np.random.default_rng(3)
    x = np.linspace(0, 5, 120) + rng.normal(size=120)
    check = stationarity(x)
    assert not check.passed
    assert "drifts" in check.reason


def test_exponential_sends_pass_the_arrival_check_and_fixed_sends_fail_it():
    rng = np.random.default_rng(4)
    assert poisson_arrivals(rng.exponential(scale=0.5, size=2000)).passed
    fixed = np.full(2000, 0.5) + rng.normal(scale=1e-3, size=2000)
    check = poisson_arrivals(fixed)
    assert not check.passed
    assert "not exponential" in check.reason


def test_a_load_generator_over_85_percent_of_its_cpu_is_flagged():
    assert client_saturation(0.5).passed
    assert not client_saturation(0.91).passed


def test_stop_when_compares_the_interval_width():
    interval = quantile_interval(np.arange(1, 101), np.ones(100, dtype=int), 0.5)
    assert narrow_enough(interval, 21)
    assert not narrow_enough(interval, 20)


def test_too_short_series_are_refused():
    with pytest.raises(AnalysisError):
        independence([1.0, 2.0])
