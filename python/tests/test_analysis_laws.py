"""The interactive response-time law and Little's law."""

import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.laws import (
    check_interactive_law,
    interactive_response_time,
    littles_law,
    littles_law_error,
)


def test_interactive_law_by_hand():
    # 32 clients at 64000 requests/s with no think time: R = 32 / 64000 = 0.5 ms.
    assert interactive_response_time(32, 64000) == pytest.approx(0.0005)
    # 10 clients at 2/s thinking 3 s: R = 10 / 2 - 3 = 2 s.
    assert interactive_response_time(10, 2, 3) == pytest.approx(2)


def test_error_per_point_is_measured_minus_expected():
    # Middleware figures: Z = measured round trip 0.1 ms; times in ms, rates per ms.
    checks = check_interactive_law([(32, 64.0, 0.41), (64, 100.0, 0.50)], think_time=0.1)
    assert [c.expected for c in checks] == pytest.approx([0.4, 0.54])
    assert [c.error for c in checks] == pytest.approx([0.01, -0.04])
    assert checks[0].clients == 32 and checks[1].throughput == 100.0


def test_littles_law():
    # 2000 requests/s staying 5 ms: 10 requests inside on average.
    assert littles_law(2000, 0.005) == pytest.approx(10)
    assert littles_law_error(10.5, 2000, 0.005) == pytest.approx(0.5)


@pytest.mark.parametrize(("args", "message"), [
    ((10, 0), "throughput must be positive"),
    ((-1, 5), "clients"),
    ((10, 5, -0.1), "think time"),
])
def test_interactive_law_refuses_bad_inputs(args, message):
    with pytest.raises(AnalysisError, match=message):
        interactive_response_time(*args)


def test_littles_law_refuses_negative_times():
    with pytest.raises(AnalysisError, match="response time"):
        littles_law(10, -1)
