"""Operational laws that hold for any measurement, used to validate the measurements.

Both laws hold without assumptions about distributions, so a measurement that breaks one by
more than its noise points at a bug in the measuring (a timer started in the wrong place,
requests lost from the count), not at the system. Times and rates may be in any unit as long
as they agree (e.g. requests per second with seconds, or per millisecond with milliseconds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from cachelab.analysis.errors import AnalysisError


@dataclass(frozen=True)
class InteractiveCheck:
    """One point checked against the interactive law.

    `error` is measured - expected: positive when the clients saw a longer response time than
    their own throughput implies.
    """

    clients: float
    throughput: float
    measured: float
    expected: float

    @property
    def error(self) -> float:
        return self.measured - self.expected


def interactive_response_time(clients: float, throughput: float, think_time: float = 0.0) -> float:
    """The interactive response-time law for a closed system: R = N / X - Z.

    N clients that each wait Z between a reply and their next request, served at throughput
    X, must see a mean response time of N / X - Z (Little's law applied to the whole loop).
    """
    if not math.isfinite(clients) or clients < 0:
        raise AnalysisError(f"number of clients must be >= 0, got {clients!r}")
    if not math.isfinite(throughput) or throughput <= 0:
        raise AnalysisError(f"throughput must be positive, got {throughput!r}")
    if not math.isfinite(think_time) or think_time < 0:
        raise AnalysisError(f"think time must be >= 0, got {think_time!r}")
    return clients / throughput - think_time


def check_interactive_law(
    points: Iterable[tuple[float, float, float]], think_time: float = 0.0
) -> list[InteractiveCheck]:
    """Checks each (clients, throughput, measured response time) against R = N / X - Z.

    Z is 0 when checking what the clients saw, or the measured round-trip time when checking
    the middleware's own figures (its clients "think" while the reply travels back).
    """
    return [
        InteractiveCheck(n, x, r, interactive_response_time(n, x, think_time))
        for n, x, r in points
    ]


def littles_law(throughput: float, response_time: float) -> float:
    """Little's law: the mean number in a system is its throughput times its response time."""
    if not math.isfinite(throughput) or throughput < 0:
        raise AnalysisError(f"throughput must be >= 0, got {throughput!r}")
    if not math.isfinite(response_time) or response_time < 0:
        raise AnalysisError(f"response time must be >= 0, got {response_time!r}")
    return throughput * response_time


def littles_law_error(mean_number: float, throughput: float, response_time: float) -> float:
    """The measured mean number minus X R: how far a measured queue length is from the law."""
    return mean_number - littles_law(throughput, response_time)
