"""The middleware's network of queues built from measured demands, checked by hand."""

import pytest

from cachelab.analysis import network_model
from cachelab.analysis.errors import AnalysisError

US = 1e-6


def demands(**kw):
    base = dict(network=50 * US, decode=2 * US, worker_processing=20 * US,
                server_service=(40 * US, 40 * US), server_visits=(0.5, 0.5), workers=4,
                server_time=40 * US)
    return network_model.Demands(**{**base, **kw})


def test_stations_follow_the_measured_structure():
    net = network_model.network(demands())
    assert [(s.name, s.kind, s.visits, s.servers) for s in net.stations] == [
        ("network", "delay", 1.0, 1), ("net layer", "queue", 1.0, 1),
        ("workers", "multi", 1.0, 4), ("server 1", "queue", 0.5, 1),
        ("server 2", "queue", 0.5, 1)]
    two = network_model.network(demands(middlewares=2, server_threads=4))
    assert [(s.name, s.kind, s.visits, s.servers) for s in two.stations][1:5] == [
        ("net layer 1", "queue", 0.5, 1), ("workers 1", "multi", 0.5, 4),
        ("net layer 2", "queue", 0.5, 1), ("workers 2", "multi", 0.5, 4)]
    assert two.stations[-1].kind == "multi" and two.stations[-1].servers == 4


def test_one_client_sees_the_sum_of_the_demands_and_the_bounds_are_hand_checked():
    net = network_model.network(demands())
    (one,) = network_model.predict(net, [1])
    # D = 50 + 2 + 20 + 0.5 * 40 + 0.5 * 40 = 112 µs; X(1) = 1 / 112 µs.
    assert one.response_time == pytest.approx(112 * US)
    assert one.throughput == pytest.approx(1 / (112 * US))
    # D / m: net layer 2 µs, workers 20 / 4 = 5 µs, each server 20 µs: the servers are
    # the bottleneck (the first of the two), X <= 1 / 20 µs = 50,000/s, N* = 112 / 20.
    b = network_model.bounds(net)
    assert b.bottleneck == "server 1"
    assert b.max_throughput == pytest.approx(50_000)
    assert b.knee == pytest.approx(5.6)
    # Two equal bottlenecks share the queue, so X approaches the bound slowly from below.
    far = network_model.predict(net, [1, 200])[-1]
    assert 49_000 < far.throughput < 50_000


def test_replicated_writes_break_the_sequential_visits():
    d = demands(server_visits=(1.0, 1.0))  # every set goes to both servers at once
    notes = network_model.assumptions(d, pipeline=2, shares_cpus=True)
    assert notes[1] == ("requests visit several servers at once (replicated writes, "
                        "sharded multi-GETs): the model adds their times, 80 µs per request "
                        "against 40 µs measured")
    assert notes[2:] == ("--pipeline 2: a worker serves batches, so m is not W",
                         "all stations share the host's CPUs; in the model each has its own")
    assert len(network_model.assumptions(demands())) == 1


def test_a_station_without_measured_time_is_left_out():
    net = network_model.network(demands(network=-3 * US))
    assert "network" not in [s.name for s in net.stations]
    assert network_model.assumptions(demands(network=-3 * US))[-1].startswith(
        "the measured network time is not positive")
    with pytest.raises(AnalysisError, match="no station"):
        network_model.network(demands(decode=0, worker_processing=0, server_service=(0, 0)))
