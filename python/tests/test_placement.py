"""Placing load instances over middlewares (spec/placement.py), the load generator's
arguments that follow from it, and the link bound of the actual placement."""

import json

import pytest

from cachelab.analysis import linkbound
from cachelab.errors import UserError
from cachelab.readers import loadgen
from cachelab.spec import experiment as spec
from cachelab.spec import placement, topology

BASE = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
link_mbit = 100
delay_ms = 0.45
"""


def config(extra: str):
    return spec.parse(BASE + extra + '\n[sweep.factors]\n"load.clients" = [8]').points[0].config


@pytest.mark.parametrize(("instances", "threads", "clients", "targets", "expected"), [
    (3, 1, 8, 2, (6, 12, 6)),       # 24 clients: 12 to each middleware
    (3, 2, 8, 2, (6, 12, 6)),       # per thread: 2 x (6 + 6) = 2 x 12 = 24 each
    (5, 1, 3, 2, (3, 4, 3, 3, 2)),  # 15 clients: 8 and 7, as even as whole ones allow
    (4, 1, 8, 2, (8, 8, 8, 8)),     # already even
    (1, 1, 8, 3, (8,)),             # fewer instances than targets: each its own
    (3, 1, 1, 2, (1, 1, 1)),        # one client each: cannot be split, stays round-robin
])
def test_even_placement_keeps_the_clients_and_splits_them_evenly(instances, threads,
                                                                  clients, targets,
                                                                  expected):
    p = placement.place(instances, threads, clients, targets)
    assert p.clients == expected
    assert p.targets == tuple(i % targets for i in range(instances))
    assert sum(p.clients) == instances * clients   # the clients in all are kept


def test_shares_of_even_and_round_robin_placements():
    even = placement.place(3, 1, 8, 2)
    assert even.shares(2) == (0.5, 0.5)
    assert even.instance_shares() == (0.25, 0.5, 0.25)
    rr = placement.place(3, 1, 8, 2, "round-robin")
    assert rr.clients == (8, 8, 8)
    assert rr.shares(2) == pytest.approx((2 / 3, 1 / 3))
    assert placement.place(1, 1, 8, 3).shares(3) == (1.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="placement must be one of"):
        placement.place(3, 1, 8, 2, "random")


def test_the_load_generators_get_their_share_of_connections_and_of_an_open_loop_rate():
    c = config("[middleware]\ncount = 2\n[load]\ninstances = 3\n")
    assert c.load.placement == "even"
    argv = [loadgen.run_argv(c, "h", 1, test_time=3, warmup=0.5, cooldown=0.5, seed=1,
                             json_out="x.json", instance=i) for i in range(3)]
    assert [a[a.index("--clients") + 1] for a in argv] == ["6", "12", "6"]
    opened = config('[middleware]\ncount = 2\n[load]\ninstances = 3\nmode = "open"\n'
                    "rate = 1200\n")
    rates = [loadgen.run_argv(opened, "h", 1, test_time=3, warmup=0.5, cooldown=0.5,
                              seed=1, json_out="x.json", instance=i) for i in range(3)]
    assert [a[a.index("--rate") + 1] for a in rates] == ["300", "600", "300"]
    with pytest.raises(UserError, match="load.placement: must be one of even, round-robin"):
        config('[load]\nplacement = "random"\n')


def test_a_database_from_before_even_placement_reads_as_round_robin():
    c = config("[middleware]\ncount = 2\n[load]\ninstances = 3\n")
    stored = json.loads(json.dumps(spec.config_dict(c)))   # as the database keeps it
    assert spec.config_from_dict(stored).load.placement == "even"
    del stored["load"]["placement"]
    assert spec.config_from_dict(stored).load.placement == "round-robin"


def test_the_link_bound_follows_the_placement_the_busier_middleware_sets_it():
    # 4 KiB reads through 2 middlewares from 3 servers, only uploads shaped (the cloud's
    # egress caps): a middleware's upload carries every reply of its clients.
    text = ('[topology]\negress_mbit = 100\ningress_mbit = 0\n'.replace("[topology]\n", "")
            + '[servers]\ncount = 3\n[middleware]\ncount = 2\n'
            '[workload]\nratio = "0:1"\ndata_size = 4096\n')
    even = config(text + "[load]\ninstances = 3\n")
    rr = config(text + '[load]\ninstances = 3\nplacement = "round-robin"\n')
    bounds = {}
    for name, c in (("even", even), ("rr", rr)):
        layout = topology.plan(c)
        bounds[name] = linkbound.bound(c, layout, 11, linkbound.configured_rates(layout))
    assert bounds["rr"].limit == "middleware1 up"
    # Round-robin: middleware 1 carries 2/3 of the replies, so the bound is 3/4 of the
    # even one's, where both carry 1/2.
    assert bounds["rr"].ops_per_s == pytest.approx(0.75 * bounds["even"].ops_per_s)
    reply = linkbound.wire(6 + 11 + 3 + 4 + 2 + 4096 + 2 + 5)
    get_q = linkbound.wire(4 + 12 + 1)
    assert bounds["even"].ops_per_s == pytest.approx(100e6 / 8 / ((reply + get_q) / 2))
