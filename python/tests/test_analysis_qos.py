"""The QoS throughput, with and without interpolation, on a hand-made sweep."""

import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.qos import Point, max_throughput_under

# (clients, throughput/s, p99 ms); p99 crosses 1 ms between 2 and 4 clients.
SWEEP = [Point(1, 100, 0.5), Point(2, 190, 0.8), Point(4, 300, 1.4), Point(8, 310, 3.0)]


def test_best_measured_point_under_the_target():
    result = max_throughput_under(SWEEP, 1.0)
    assert result.throughput == 190 and result.point == SWEEP[1]
    assert not result.interpolated and result.beyond is None


def test_interpolation_between_the_straddling_points():
    # p99 reaches 1.0 a third of the way from 0.8 (2 clients) to 1.4 (4 clients):
    # load 2 + 2/3 = 2.667, throughput 190 + 110/3 = 226.667.
    result = max_throughput_under(reversed(SWEEP), 1.0, interpolate=True)
    assert result.load == pytest.approx(8 / 3)
    assert result.throughput == pytest.approx(190 + 110 / 3)
    assert result.latency == 1.0
    assert result.point == SWEEP[1] and result.beyond == SWEEP[2]
    assert result.interpolated


def test_a_point_exactly_at_the_target_counts():
    assert max_throughput_under(SWEEP, 1.4).point == SWEEP[2]


def test_none_when_no_point_meets_the_target():
    assert max_throughput_under(SWEEP, 0.1) is None
    assert max_throughput_under(SWEEP, 0.1, interpolate=True) is None
    assert max_throughput_under([], 1.0) is None


def test_a_later_recovery_wins_if_it_is_faster():
    # A noisy sweep: p99 spikes at 4 clients but is back under the target at 8.
    sweep = [Point(2, 190, 0.8), Point(4, 300, 1.2), Point(8, 350, 0.9)]
    assert max_throughput_under(sweep, 1.0).point == sweep[2]
    # Interpolation: crossing 2->4 at 190 + 0.5 * 110 = 245; 4->8 at 300 + 50 * 2/3.
    assert max_throughput_under(sweep, 1.0, interpolate=True).throughput == 350


def test_ties_go_to_the_lower_load():
    sweep = [Point(8, 300, 0.9), Point(4, 300, 0.7)]
    assert max_throughput_under(sweep, 1.0).load == 4


@pytest.mark.parametrize(("points", "target", "message"), [
    (SWEEP, 0, "target must be a positive number"),
    (SWEEP, float("nan"), "target"),
    ([Point(1, float("inf"), 0.5)], 1, "non-finite"),
    ([Point(1, -5, 0.5)], 1, "negative"),
])
def test_bad_inputs_are_refused(points, target, message):
    with pytest.raises(AnalysisError, match=message):
        max_throughput_under(points, target)
