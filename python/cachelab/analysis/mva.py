"""Exact mean value analysis (MVA) of a closed, single-class network of queues.

Stations are delay centres (no queueing: clients, network), load-independent queues (one
server: the net layer) and multi-server stations whose service rate with j customers is
min(j, m) / S (the workers). Each has a visit ratio V and a service time S, so a demand
D = V S per request; an optional think time Z is spent outside the response time.

For a multi-server station, exact MVA needs the probabilities p(j | n) of finding j customers
there. The textbook recursion gets p(j | n), j >= 1, from p(j - 1 | n - 1) (a product, which
is harmless) but p(0 | n) as 1 - sum_j p(j | n): near saturation that difference of nearly
equal numbers cancels, turns negative, and the error then multiplies through every later
population (it breaks down well before m = 128, N = 400). Here p(0 | n) comes from a product
instead: p(0 | n) = p(0 | n - 1) X(n) / X'(n), where X' is the throughput of the same network
without that station (both are ratios of normalising constants: p(0 | n) = G'(n) / G(n) and
X(n) = G(n - 1) / G(n)). Every step multiplies non-negative numbers, so the probabilities stay
in [0, 1] and still sum to 1. The price is one extra solution per subset of multi-server
stations (2^M for M of them, computed once each), which is cheap for the few a model has.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from cachelab.analysis.errors import AnalysisError

KINDS = ("delay", "queue", "multi")


@dataclass(frozen=True)
class Station:
    """A station; `servers` matters only for kind "multi". Times in any one unit."""

    name: str
    kind: str
    visits: float
    service_time: float
    servers: int = 1

    @property
    def demand(self) -> float:
        """The service demand per request, D = V S."""
        return self.visits * self.service_time


@dataclass(frozen=True)
class Network:
    stations: tuple[Station, ...]
    think_time: float = 0.0


@dataclass(frozen=True)
class StationPoint:
    """One station at one population. `utilization` is per server (X D / m), None for a
    delay centre, which has no servers to keep busy; `residence_time` is the time a request
    spends there over all its visits."""

    utilization: float | None
    queue_length: float
    residence_time: float


@dataclass(frozen=True)
class MvaPoint:
    """The network with `clients` customers; the response time excludes the think time."""

    clients: int
    throughput: float
    response_time: float
    stations: dict[str, StationPoint]


@dataclass(frozen=True)
class _Trace:
    throughput: np.ndarray  # X(n) for n = 0..N (X(0) = 0)
    residence: np.ndarray  # R_k(n), shape (N + 1, K)
    marginals: dict[int, np.ndarray]  # p_k(j | N), j = 0..N, for each multi station k


def solve(network: Network, max_clients: int) -> list[MvaPoint]:
    """Solves the network for every population N = 1..max_clients."""
    check_network(network)
    _check_clients(max_clients)
    trace = _solve(network.stations, network.think_time, max_clients, {})
    points = []
    for n in range(1, max_clients + 1):
        x = float(trace.throughput[n])
        per_station = {
            s.name: StationPoint(
                utilization=None if s.kind == "delay" else x * s.demand / s.servers,
                queue_length=x * float(trace.residence[n, k]),
                residence_time=float(trace.residence[n, k]),
            )
            for k, s in enumerate(network.stations)
        }
        points.append(MvaPoint(n, x, float(trace.residence[n].sum()), per_station))
    return points


def marginals(network: Network, clients: int) -> dict[str, np.ndarray]:
    """The queue-length distribution p(j | N), j = 0..N, of every multi-server station."""
    check_network(network)
    _check_clients(clients)
    trace = _solve(network.stations, network.think_time, clients, {})
    return {network.stations[k].name: p for k, p in trace.marginals.items()}


def check_network(network: Network) -> None:
    """Raises AnalysisError naming the first station field a model cannot take."""
    if not network.stations:
        raise AnalysisError("a network needs at least one station")
    if not _is_number(network.think_time) or network.think_time < 0:
        raise AnalysisError(f"think time must be >= 0, got {network.think_time!r}")
    seen = set()
    for s in network.stations:
        where = f"station {s.name!r}"
        if s.name in seen:
            raise AnalysisError(f"{where}: two stations have this name")
        seen.add(s.name)
        if s.kind not in KINDS:
            raise AnalysisError(f"{where}: kind must be one of {', '.join(KINDS)}")
        for field, value in (("visits", s.visits), ("service time", s.service_time)):
            if not _is_number(value) or value <= 0:
                raise AnalysisError(f"{where}: {field} must be a positive number, got {value!r}")
        if (isinstance(s.servers, bool) or not isinstance(s.servers, numbers.Integral)
                or s.servers < 1):
            raise AnalysisError(f"{where}: servers must be an integer >= 1, got {s.servers!r}")
        if s.kind != "multi" and s.servers != 1:
            raise AnalysisError(f"{where}: only a multi station has servers (kind is {s.kind})")


def _solve(stations: tuple[Station, ...], think: float, nmax: int,
           cache: dict[tuple[Station, ...], _Trace]) -> _Trace:
    """MVA for n = 0..nmax, memoised per subnetwork (the complements share subnetworks)."""
    if stations in cache:
        return cache[stations]
    populations = np.arange(nmax + 1, dtype=float)
    if not stations:
        # Only the think time is left: X(n) = n / Z, or unbounded when Z = 0, which makes
        # the p(0 | n) of the station removed to get here 0, as it must be (G'(n) = 0).
        with np.errstate(divide="ignore", invalid="ignore"):
            x = populations / think if think > 0 else np.where(populations > 0, np.inf, 0.0)
        trace = _Trace(x, np.zeros((nmax + 1, 0)), {})
        cache[stations] = trace
        return trace

    multi = [k for k, s in enumerate(stations) if s.kind == "multi"]
    without = {k: _solve(stations[:k] + stations[k + 1:], think, nmax, cache).throughput
               for k in multi}
    demand = np.array([s.demand for s in stations])
    jobs = np.arange(1, nmax + 1)
    rate_factor = {k: np.minimum(jobs, stations[k].servers).astype(float) for k in multi}
    p = {k: np.ones(1) for k in multi}  # p(j | 0): the empty network
    queue = np.zeros(len(stations))
    x = np.zeros(nmax + 1)
    residence = np.zeros((nmax + 1, len(stations)))
    for n in range(1, nmax + 1):
        r = demand.copy()
        for k, s in enumerate(stations):
            if s.kind == "queue":
                r[k] = demand[k] * (1.0 + queue[k])
            elif s.kind == "multi":
                # An arrival that finds j - 1 customers is served at min(j, m) / S.
                r[k] = demand[k] * np.dot(jobs[:n] / rate_factor[k][:n], p[k])
        x[n] = n / (think + r.sum())
        queue = x[n] * r
        residence[n] = r
        for k in multi:
            nxt = np.empty(n + 1)
            nxt[1:] = x[n] * demand[k] / rate_factor[k][:n] * p[k]
            nxt[0] = p[k][0] * (x[n] / without[k][n])
            p[k] = nxt
    trace = _Trace(x, residence, p)
    cache[stations] = trace
    return trace


def _check_clients(clients: int) -> None:
    if isinstance(clients, bool) or not isinstance(clients, numbers.Integral) or clients < 1:
        raise AnalysisError(f"number of clients must be an integer >= 1, got {clients!r}")


def _is_number(value: object) -> bool:
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(value))
