"""What the network of queues takes from a point's links (report/links.py), and when M/M/1
has a service rate measured apart from the point (report/models.py)."""

import json

import pytest

from cachelab.analysis import linkbound
from cachelab.report import links, models
from cachelab.report.data import PointResult
from cachelab.spec import experiment as spec
from cachelab.store import LinkRecord

NETNS = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
egress_mbit = 100
ingress_mbit = 0
delay_ms = 0.45
[workload]
ratio = "0:1"
data_size = 4096
key_maximum = 10000
[sweep.factors]
"load.clients" = [8]
"""


def point(text: str, records=(), scale: float = 1.0) -> PointResult:
    config = json.loads(json.dumps(spec.config_dict(spec.parse(text).points[0].config)))
    return PointResult(0, "p", {}, config, 8, 1, 1, None, links=tuple(records), scale=scale)


def record(src, dst, p50, expected):
    return LinkRecord(src, dst, p50, p50, p50, expected, None, None)


def test_an_emulated_servers_round_trip_and_transfers_come_from_the_configured_links():
    p = point(NETNS, [record("load1", "middleware1", 1900.0, 1800.0),
                      record("middleware1", "server1", 1900.0, 1800.0)])
    found = links.links_of(p)
    # 2 x (0.45 + 0.45) ms configured, plus the 100 µs the measured RTT has beyond it.
    assert found.server_rtt == (pytest.approx(1.9e-3),)
    key = 9  # "key-" + the 5 digits of key_maximum = 10000
    gq, gr, _, _ = (linkbound.wire(x) for x in linkbound.message_sizes(
        spec.config_from_dict(p.config), key))
    rate = 100e6 / 8
    # Only uploads are shaped: the request on the middleware's, the reply on the server's.
    assert found.server_transfer == (pytest.approx((gq + gr) / rate),)
    assert found.client_transfer == pytest.approx((gq + gr) / rate)
    assert dict(found.transfers) == {"load1 up": pytest.approx(gq / rate),
                                     "middleware1 up": pytest.approx((gr + gq) / rate),
                                     "server1 up": pytest.approx(gr / rate)}


def test_a_scale_model_takes_its_links_at_full_speed():
    scaled = NETNS.replace('kind = "netns"', 'kind = "netns"\nscale = 4')
    p = point(scaled, [record("middleware1", "server1", 7600.0, 7200.0)], scale=4.0)
    found = links.links_of(p)
    assert found.server_rtt == (pytest.approx(1.9e-3),)   # (7.2 ms + 0.4 ms) / 4
    assert dict(found.transfers)["server1 up"] == pytest.approx(
        dict(links.links_of(point(NETNS)).transfers)["server1 up"])


def test_a_local_run_has_its_loopback_round_trip_and_nothing_else():
    local = NETNS.replace('kind = "netns"', 'kind = "local"').replace(
        "egress_mbit = 100\ningress_mbit = 0\ndelay_ms = 0.45\n", "")
    local = local.replace("[workload]", "[servers]\ncount = 2\n[workload]")
    assert links.links_of(point(local)) is None   # not measured (an older database)
    found = links.links_of(point(local, [record("loopback", "loopback", 20.0, 0.0)]))
    assert found.server_rtt == (pytest.approx(20e-6),) * 2
    assert found.server_transfer == (0.0, 0.0) and found.transfers == ()
    assert links.links_of(point(local.replace("[workload]",
                                              "[middleware]\ncount = 0\n[workload]"))) is None


def test_mm1_needs_a_service_rate_measured_apart_from_the_point():
    assert models.mm1_capacity("clients", [900.0, 1200.0, 1100.0]) == (1200.0, None)
    assert models.mm1_capacity("load.rate", [900.0, 1200.0]) == (1200.0, None)
    mu, reason = models.mm1_capacity("middleware.workers", [900.0, 1200.0])
    assert mu is None and "no sweep over the load" in reason and "rho = 1" in reason
    assert "(its x axis, workers per middleware, is not a load)" in reason  # no raw path
    mu, reason = models.mm1_capacity("clients", [1200.0])
    assert mu is None and reason.startswith("one load level in this configuration")


@pytest.mark.parametrize(("kind", "threads", "counted", "noted"), [
    ("memcached", 4, 4, False),
    ("redis", 4, 1, True),   # --io-threads read and write; commands run on one thread
    ("redis", 1, 1, False),
])
def test_a_server_serves_as_many_requests_at_once_as_its_kind_runs_commands(
        kind, threads, counted, noted):
    config = point(NETNS + f'[servers]\nkind = "{kind}"\nthreads = {threads}\n').config
    assert models.server_threads(config) == counted
    notes = models.server_notes(config)
    assert bool(notes) == noted
    assert all(f"its {threads} I/O threads" in n for n in notes)
