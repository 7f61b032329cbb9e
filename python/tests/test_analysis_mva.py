"""Exact MVA against networks solved by hand, open-model limits, an independent
normalising-constant solution, and the properties every solution must have."""

import math

import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from cachelab.analysis import mva
from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.mva import Network, Station
from cachelab.analysis.queueing import mm1, mmm


def net(*stations, think=0.0):
    return Network(tuple(stations), think)


def test_one_queue_with_think_time_by_hand():
    # D = 1, Z = 2. N = 1: R = 1, X = 1/3, Q = 1/3.
    # N = 2: R = 1 (1 + 1/3) = 4/3, X = 2 / (2 + 4/3) = 3/5, Q = 3/5 * 4/3 = 4/5.
    # N = 3: R = 1 (1 + 4/5) = 9/5, X = 3 / (2 + 9/5) = 15/19, Q = 15/19 * 9/5 = 27/19.
    points = mva.solve(net(Station("q", "queue", 1, 1.0), think=2.0), 3)
    assert [p.throughput for p in points] == pytest.approx([1 / 3, 3 / 5, 15 / 19])
    assert [p.response_time for p in points] == pytest.approx([1, 4 / 3, 9 / 5])
    assert [p.stations["q"].queue_length for p in points] == pytest.approx([1 / 3, 4 / 5, 27 / 19])
    assert [p.stations["q"].utilization for p in points] == pytest.approx([1 / 3, 3 / 5, 15 / 19])


def test_two_queues_by_hand():
    # D1 = 1 (V = 2, S = 0.5), D2 = 2, no think time.
    # N = 1: R1 = 1, R2 = 2, X = 1/3, Q1 = 1/3, Q2 = 2/3.
    # N = 2: R1 = 4/3, R2 = 2 (5/3) = 10/3, X = 2 / (14/3) = 3/7, Q1 = 4/7, Q2 = 10/7.
    # N = 3: R1 = 11/7, R2 = 2 (17/7) = 34/7, X = 3 / (45/7) = 7/15, Q1 = 11/15, Q2 = 34/15.
    points = mva.solve(net(Station("a", "queue", 2, 0.5), Station("b", "queue", 1, 2.0)), 3)
    assert [p.throughput for p in points] == pytest.approx([1 / 3, 3 / 7, 7 / 15])
    assert [p.stations["a"].residence_time for p in points] == pytest.approx([1, 4 / 3, 11 / 7])
    assert [p.stations["b"].queue_length for p in points] == pytest.approx([2 / 3, 10 / 7, 34 / 15])


def test_two_server_station_by_hand():
    # m = 2, S = 1, Z = 1. A customer arriving to j - 1 others is served at min(j, 2).
    # N = 1: R = p(0|0) = 1, X = 1/2; p(1|1) = X D / 1 = 1/2, p(0|1) = 1/2.
    # N = 2: R = 1 p(0|1) + 1 p(1|1) = 1, X = 2/2 = 1; p(1|2) = 1 * 1/2 = 1/2,
    #   p(2|2) = 1 * 1/2 * 1/2 = 1/4, p(0|2) = 1/4.
    # N = 3: R = p(0|2) + p(1|2) + 3/2 p(2|2) = 1/4 + 1/2 + 3/8 = 9/8, X = 3 / (17/8) = 24/17.
    # Check by product form: G(3) = 1/3! + 1/2! + 1/2 + 1/4 = 17/12, G(2) = 1/2 + 1 + 1/2 = 2,
    # X(3) = G(2) / G(3) = 24/17.
    network = net(Station("w", "multi", 1, 1.0, servers=2), think=1.0)
    points = mva.solve(network, 3)
    assert [p.throughput for p in points] == pytest.approx([1 / 2, 1, 24 / 17])
    assert [p.response_time for p in points] == pytest.approx([1, 1, 9 / 8])
    assert [p.stations["w"].utilization for p in points] == pytest.approx([1 / 4, 1 / 2, 12 / 17])
    assert mva.marginals(network, 2)["w"].tolist() == pytest.approx([1 / 4, 1 / 2, 1 / 4])


def test_large_think_time_approaches_mm1():
    # N clients thinking Z = N / lambda approach a Poisson stream of rate lambda as N grows;
    # lambda = 0.5, mu = 1: M/M/1 gives R = 1 / (1 - 0.5) = 2.
    target = mm1(0.5, 1.0).response_time
    errors = []
    for n in (100, 1000, 4000):
        last = mva.solve(net(Station("q", "queue", 1, 1.0), think=n / 0.5), n)[-1]
        errors.append(abs(last.response_time - target))
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 1e-2 * target


def test_large_think_time_approaches_erlang_c():
    # The same limit for a 4-server station at lambda = 3, mu = 1: M/M/4 gives R = 1.5094.
    target = mmm(3.0, 1.0, 4).response_time
    last = mva.solve(net(Station("w", "multi", 1, 1.0, servers=4), think=4000 / 3), 4000)[-1]
    assert last.response_time == pytest.approx(target, rel=1e-2)


def test_one_server_multi_is_a_queue_and_many_servers_a_delay():
    z = 0.3
    queue = mva.solve(net(Station("s", "queue", 1, 0.2), Station("d", "delay", 1, 1), think=z), 20)
    multi1 = mva.solve(net(Station("s", "multi", 1, 0.2, 1), Station("d", "delay", 1, 1),
                           think=z), 20)
    assert [p.throughput for p in multi1] == pytest.approx([p.throughput for p in queue])
    delay = mva.solve(net(Station("s", "delay", 1, 0.2), Station("d", "delay", 1, 1), think=z), 20)
    multi = mva.solve(net(Station("s", "multi", 1, 0.2, 20), Station("d", "delay", 1, 1),
                          think=z), 20)
    assert [p.response_time for p in multi] == pytest.approx([p.response_time for p in delay])


def log_f(station, nmax):
    """log of the product-form factor D^j / prod_{i<=j} min(i, m) for j = 0..nmax."""
    j = np.arange(nmax + 1)
    if station.kind == "delay":
        return j * math.log(station.demand) - gammaln(j + 1)
    m = 1 if station.kind == "queue" else station.servers
    log_rates = np.concatenate([[0.0], np.cumsum(np.log(np.minimum(j[1:], m)))])
    return j * math.log(station.demand) - log_rates


def log_g(factors, nmax):
    """log G(n), n = 0..nmax, by convolving the stations' factors in log space."""
    g = np.full(nmax + 1, -np.inf)
    g[0] = 0.0
    for f in factors:
        g = np.array([logsumexp(f[: n + 1] + g[n::-1]) for n in range(nmax + 1)])
    return g


def test_m128_n400_matches_normalising_constants_and_stays_a_distribution():
    # The textbook p(0|n) = 1 - sum p(j|n) goes wildly negative on this network (the
    # station saturates at N = 128 and the subtraction cancels); the product form does not.
    network = net(
        Station("network", "delay", 1, 0.2),
        Station("net-layer", "queue", 1, 0.001),
        Station("workers", "multi", 1, 1.0, servers=128),
        think=0.05,
    )
    n = 400
    p = mva.marginals(network, n)["workers"]
    assert np.all(p >= 0) and np.all(p <= 1)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)

    factors = [log_f(s, n) for s in network.stations]
    think = Station("think", "delay", 1, network.think_time)
    others = log_g([factors[0], factors[1], log_f(think, n)], n)
    everything = log_g([factors[0], factors[1], factors[2], log_f(think, n)], n)
    expected = np.exp(factors[2] + others[::-1] - everything[n])
    assert p == pytest.approx(expected, rel=1e-9, abs=1e-300)

    points = mva.solve(network, n)
    x_expected = np.exp(everything[:-1] - everything[1:])
    assert [pt.throughput for pt in points] == pytest.approx(x_expected.tolist(), rel=1e-9)
    # Little's law on the station, with its queue length from the distribution.
    workers = points[-1].stations["workers"]
    assert float(np.arange(n + 1) @ p) == pytest.approx(workers.queue_length, rel=1e-9)


@pytest.fixture
def middleware():
    return net(
        Station("network", "delay", 1, 0.2),
        Station("net-layer", "queue", 1, 0.005),
        Station("workers", "multi", 1, 0.15, servers=16),
        Station("backend", "multi", 2, 0.05, servers=4),
        Station("servers", "delay", 1, 0.1),
        think=0.05,
    )


def test_solution_properties(middleware):
    points = mva.solve(middleware, 200)
    xs = [p.throughput for p in points]
    assert all(b >= a - 1e-12 for a, b in zip(xs, xs[1:], strict=False))
    # Bottleneck bound: min m / D over the queueing stations (workers: 16 / 0.15 = 106.7,
    # backend: 4 / 0.1 = 40, net layer: 1 / 0.005 = 200); and N / (Z + sum D).
    bound = min(s.servers / s.demand for s in middleware.stations if s.kind != "delay")
    assert bound == pytest.approx(40)
    total_demand = sum(s.demand for s in middleware.stations)
    for p in points:
        assert p.throughput <= bound * (1 + 1e-12)
        assert p.throughput <= p.clients / (middleware.think_time + total_demand) * (1 + 1e-12)
        for name, s in p.stations.items():
            assert s.utilization is None or 0 <= s.utilization <= 1 + 1e-12, name
            assert s.queue_length == pytest.approx(p.throughput * s.residence_time)
        # Everyone is somewhere: at a station or thinking.
        in_stations = sum(s.queue_length for s in p.stations.values())
        assert in_stations + p.throughput * middleware.think_time == pytest.approx(p.clients)
        assert p.response_time == pytest.approx(
            sum(s.residence_time for s in p.stations.values()))
    assert xs[-1] == pytest.approx(bound, rel=1e-3)
    assert points[-1].stations["network"].utilization is None
    for name, p in mva.marginals(middleware, 200).items():
        assert np.all((p >= 0) & (p <= 1)), name
        assert p.sum() == pytest.approx(1.0, abs=1e-12), name
        q = points[-1].stations[name].queue_length
        assert float(np.arange(len(p)) @ p) == pytest.approx(q, rel=1e-9), name


@pytest.mark.parametrize(("network", "message"), [
    (net(), "at least one station"),
    (net(Station("a", "queue", 1, 1), Station("a", "delay", 1, 1)), "two stations"),
    (net(Station("a", "fifo", 1, 1)), "kind must be one of delay, queue, multi"),
    (net(Station("a", "queue", 0, 1)), "visits must be a positive number"),
    (net(Station("a", "queue", 1, -1)), "service time must be a positive number"),
    (net(Station("a", "multi", 1, 1, servers=0)), "servers must be an integer >= 1"),
    (net(Station("a", "queue", 1, 1, servers=2)), "only a multi station has servers"),
    (net(Station("a", "queue", 1, 1), think=-1), "think time"),
])
def test_bad_networks_are_refused(network, message):
    with pytest.raises(AnalysisError, match=message):
        mva.solve(network, 3)


def test_population_must_be_positive():
    with pytest.raises(AnalysisError, match="clients"):
        mva.solve(net(Station("a", "queue", 1, 1)), 0)
