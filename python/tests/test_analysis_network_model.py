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
    assert notes[2:4] == ("--pipeline 2: a worker serves batches, so m is not W",
                          "all stations share the host's CPUs; in the model each has its own")
    assert notes[4].startswith("the links were not measured")
    assert len(network_model.assumptions(demands())) == 2


def test_a_station_without_measured_time_is_left_out():
    net = network_model.network(demands(network=-3 * US))
    assert "network" not in [s.name for s in net.stations]
    assert network_model.assumptions(demands(network=-3 * US))[-2].startswith(
        "the measured network time is not positive")
    with pytest.raises(AnalysisError, match="no station"):
        network_model.network(demands(decode=0, worker_processing=0, server_service=(0, 0)))


def netns_demands(links):
    """One middleware, one server 2 ms of round trip away (2 x (0.45 + 0.45) ms plus a
    0.2 ms base), as the middleware measured it: 2,100 µs, of which 100 µs memcached."""
    return network_model.Demands(
        network=0, decode=0, worker_processing=10 * US, server_service=(2100 * US,),
        server_visits=(1.0,), workers=64, server_time=2100 * US, links=links)


def test_a_servers_round_trip_is_a_delay_station_not_service_at_a_queue():
    # Without the links, the round trip is service at the server: X <= 1 / 2.1 ms.
    old = network_model.network(netns_demands(None))
    assert network_model.bounds(old).max_throughput == pytest.approx(1 / (2100 * US))
    links = network_model.Links(server_rtt=(2000 * US,), server_transfer=(0.0,))
    net = network_model.network(netns_demands(links))
    assert [(s.name, s.kind, s.service_time) for s in net.stations] == [
        ("workers", "multi", pytest.approx(10 * US)),
        ("link server 1", "delay", pytest.approx(2000 * US)),
        ("server 1", "queue", pytest.approx(100 * US))]
    # A closed network with a delay Z = 2 ms and queues of D = 110 µs in all: at low N
    # X = N / (D + Z), and at high N the bottleneck's bound 1 / 100 µs (the server).
    low = network_model.predict(net, [1, 2])
    assert low[0].throughput == pytest.approx(1 / (2110 * US))
    assert low[0].response_time == pytest.approx(2110 * US)
    b = network_model.bounds(net)
    assert (b.bottleneck, b.max_throughput) == ("server 1", pytest.approx(10_000))
    assert b.knee == pytest.approx(2110 / 100)
    far = network_model.predict(net, [400])[0]
    assert far.throughput == pytest.approx(10_000)
    assert low[1].throughput == pytest.approx(2 / (2110 * US), rel=0.01)


def test_a_shaped_link_is_a_queue_that_bounds_throughput_like_the_link_bound():
    # 4 KiB replies over a 100 Mbit/s server upload: 4,234 wire bytes / 12.5 MB/s =
    # 338.7 µs per request (study: 99.6 Mbit/s gives 3,040 ops/s, section 2.1.1).
    per_request = 4234 / 12.5e6
    links = network_model.Links(server_rtt=(1600 * US,), server_transfer=(per_request,),
                                transfers=(("server1 up", per_request),))
    net = network_model.network(netns_demands(links))
    names = [s.name for s in net.stations]
    assert names == ["workers", "link server 1", "server 1", "link server1 up"]
    assert net.stations[2].service_time == pytest.approx(2100 * US - 1600 * US - per_request)
    b = network_model.bounds(net)
    assert b.bottleneck == "link server1 up"
    assert b.max_throughput == pytest.approx(12.5e6 / 4234)   # 2,952 ops/s
    notes = network_model.assumptions(netns_demands(links))
    assert any("a shaped link is a queue" in n for n in notes)


def test_the_client_side_transfer_moves_from_the_network_delay_to_the_links():
    d = network_model.Demands(
        network=1000 * US, decode=0, worker_processing=10 * US, server_service=(50 * US,),
        server_visits=(1.0,), workers=4,
        links=network_model.Links(server_rtt=(0.0,), server_transfer=(0.0,),
                                  client_transfer=300 * US,
                                  transfers=(("middleware1 up", 300 * US),)))
    net = network_model.network(d)
    by = {s.name: s for s in net.stations}
    assert by["network"].service_time == pytest.approx(700 * US)
    assert by["link middleware1 up"].demand == pytest.approx(300 * US)
    assert "link server 1" not in by   # no round trip measured: no delay station
    (one,) = network_model.predict(net, [1])
    assert one.response_time == pytest.approx(1060 * US)   # the measured total is kept
    with pytest.raises(AnalysisError, match="one link round trip and transfer time per "
                                            "server"):
        network_model.network(netns_demands(network_model.Links((1 * US, 1 * US), (0, 0))))


def test_a_server_time_within_its_round_trip_leaves_the_server_out_with_a_note():
    links = network_model.Links(server_rtt=(2200 * US,), server_transfer=(0.0,))
    net = network_model.network(netns_demands(links))
    assert [s.name for s in net.stations] == ["workers", "link server 1"]
    # The delay takes no more than the server's measured 2,100 µs: R(1) stays measured.
    assert net.stations[1].service_time == pytest.approx(2100 * US)
    notes = network_model.assumptions(netns_demands(links))
    assert any(n.startswith("server(s) 1: the measured time is no longer") for n in notes)
