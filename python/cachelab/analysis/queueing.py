"""Open queueing models: M/M/1 and M/M/m (Erlang C).

The report sets lambda to the measured arrival rate and mu to the highest measured throughput
of one worker, then puts these predictions next to the measured utilisation, queue length and
response time. Rates may be in any unit; times come out in its inverse (rates per second give
seconds).

Erlang C is computed from the Erlang B recursion B(k) = a B(k-1) / (k + a B(k-1)), whose
every step stays in [0, 1], instead of the textbook sum of a^k / k!, which overflows a
float for a few hundred servers and loses precision well before that.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from cachelab.analysis.errors import AnalysisError


@dataclass(frozen=True)
class QueueMetrics:
    """Steady-state means of an M/M/m queue (m = 1 for M/M/1).

    `utilization` is per server, lambda / (m mu); `p_queue` is the probability that an
    arrival finds all servers busy and waits (Erlang C); the response time is the waiting
    time plus one service time.
    """

    arrival_rate: float
    service_rate: float
    servers: int
    utilization: float
    p_queue: float
    mean_in_system: float
    mean_in_queue: float
    response_time: float
    waiting_time: float


def erlang_b(servers: int, offered_load: float) -> float:
    """The Erlang B blocking probability for `servers` servers and load a = lambda / mu."""
    _check_servers(servers)
    if not math.isfinite(offered_load) or offered_load < 0:
        raise AnalysisError(f"offered load must be >= 0, got {offered_load!r}")
    b = 1.0
    for k in range(1, servers + 1):
        b = offered_load * b / (k + offered_load * b)
    return b


def erlang_c(servers: int, offered_load: float) -> float:
    """The Erlang C probability of waiting, from Erlang B: C = B / (1 - rho (1 - B)).

    Needs rho = a / m < 1: at rho >= 1 the queue has no steady state.
    """
    _check_servers(servers)
    rho = offered_load / servers
    if rho >= 1:
        raise AnalysisError(f"unstable queue: utilisation a/m = {rho:.6g} >= 1")
    b = erlang_b(servers, offered_load)
    return b / (1.0 - rho * (1.0 - b))


def mm1(arrival_rate: float, service_rate: float) -> QueueMetrics:
    """M/M/1: rho = lambda / mu, R = 1 / (mu - lambda), N = rho / (1 - rho)."""
    return mmm(arrival_rate, service_rate, 1)


def mmm(arrival_rate: float, service_rate: float, servers: int) -> QueueMetrics:
    """M/M/m with `service_rate` the rate of ONE server (so capacity is m mu).

    W = C / (m mu - lambda), R = W + 1 / mu, and the mean numbers follow by Little's law.
    """
    _check_rate("arrival rate (lambda)", arrival_rate)
    _check_rate("service rate (mu)", service_rate)
    _check_servers(servers)
    rho = arrival_rate / (servers * service_rate)
    if rho >= 1:
        raise AnalysisError(
            f"unstable queue: utilisation rho = lambda / (m mu) = {arrival_rate:g} / "
            f"({servers} * {service_rate:g}) = {rho:.6g} >= 1; the queue grows without bound"
        )
    p_queue = erlang_c(servers, arrival_rate / service_rate)
    waiting = p_queue / (servers * service_rate - arrival_rate)
    response = waiting + 1.0 / service_rate
    return QueueMetrics(
        arrival_rate=arrival_rate,
        service_rate=service_rate,
        servers=servers,
        utilization=rho,
        p_queue=p_queue,
        mean_in_system=arrival_rate * response,
        mean_in_queue=arrival_rate * waiting,
        response_time=response,
        waiting_time=waiting,
    )


def _check_rate(name: str, value: float) -> None:
    if not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise AnalysisError(f"{name} must be a positive number, got {value!r}")


def _check_servers(servers: int) -> None:
    if isinstance(servers, bool) or not isinstance(servers, numbers.Integral) or servers < 1:
        raise AnalysisError(f"number of servers must be an integer >= 1, got {servers!r}")
