"""The TLS section's pure parts: which hops a configuration encrypts, which plain point is a
TLS point's pair, and CPU per request from the processes' CPU seconds (hand-checked)."""

from __future__ import annotations

import json

import pytest

from cachelab.report import tls
from cachelab.report.data import PointResult
from cachelab.spec import experiment as spec
from cachelab.store import ClientTiming, ProcessCpu

BASE = 'name = "t"\nrun_time_s = 3\nwarmup_s = 0.5\ncooldown_s = 0.5\n'


def config(sections: str) -> dict:
    """A point's configuration as the store holds it (JSON)."""
    return json.loads(json.dumps(spec.config_dict(spec.parse(BASE + sections).points[0].config)))


@pytest.mark.parametrize(("sections", "hops"), [
    ("[middleware]\ncount = 0\n", ()),
    ("[middleware]\ncount = 0\ntls = true\n", ()),  # no middleware, nothing of its own
    ("[middleware]\ncount = 0\n[servers]\ntls = true\n", ("load->server",)),
    ("[middleware]\ntls = true\n", ("load->middleware",)),
    ("[servers]\ntls = true\n", ("middleware->server",)),
    ("[middleware]\ntls = true\n[servers]\ntls = true\n",
     ("load->middleware", "middleware->server")),
])
def test_the_encrypted_hops_of_a_configuration(sections, hops):
    assert tls.encrypted_hops(config(sections)) == hops


def test_a_tls_point_pairs_with_the_same_configuration_without_tls():
    both = config("[middleware]\ntls = true\n[servers]\ntls = true\n[load]\nclients = 4\n")
    plain = config("[load]\nclients = 4\n")
    other = config("[load]\nclients = 8\n")
    assert tls._key(tls._without_tls(both)) == tls._key(plain)
    assert tls._key(tls._without_tls(both)) != tls._key(other)
    # load.tls written out or left to follow the target is the same configuration.
    stated = config("[middleware]\ntls = true\n[load]\ntls = true\nclients = 4\n")
    followed = config("[middleware]\ntls = true\n[load]\nclients = 4\n")
    assert tls._key(stated) == tls._key(followed)


def test_a_stored_configuration_from_before_tls_pairs_too():
    plain = config("[load]\nclients = 4\n")
    old = {section: {k: v for k, v in values.items() if k not in ("tls", "unix_socket")}
           if isinstance(values, dict) else values for section, values in plain.items()}
    assert tls._key(old) == tls._key(plain)


def test_cpu_per_request_is_each_roles_cpu_over_every_clients_requests():
    runs = [
        # 2 load generators, 1000 + 3000 requests; 2 servers; 1 middleware.
        [ProcessCpu("load", 0, 0.01, 0.01, 1000), ProcessCpu("load", 1, 0.03, 0.03, 3000),
         ProcessCpu("server", 0, 0.02, 0.02, None), ProcessCpu("server", 1, 0.02, 0.02, None),
         ProcessCpu("middleware", 0, 0.1, 0.02, None)],
        # A run without the middleware's figure (a remote host) and other numbers.
        [ProcessCpu("load", 0, 0.02, 0.0, 2000), ProcessCpu("server", 0, 0.01, 0.01, None)],
        # A run without client figures says nothing.
        [ProcessCpu("server", 0, 1.0, 1.0, None)],
    ]
    found = tls.cpu_per_request(runs)
    # load: (0.08 s / 4000 = 20 us + 0.02 s / 2000 = 10 us) / 2; server: (0.08 / 4000 =
    # 20 us + 0.02 / 2000 = 10 us) / 2; middleware: 0.12 / 4000 = 30 us, one run.
    assert found["load"] == pytest.approx(15.0)
    assert found["server"] == pytest.approx(15.0)
    assert found["middleware"] == pytest.approx(30.0)
    assert tls.cpu_per_request([]) == {"load": None, "middleware": None, "server": None}


def point(timings=(), p50=9.0, p99=99.0) -> PointResult:
    return PointResult(index=0, label="p", factors={}, config={}, clients=1, runs=1,
                       steady_runs=1, verdict=None, throughput=1.0,
                       percentiles_ms={"p50": p50, "p90": p50, "p99": p99},
                       timings=tuple(timings))


def test_a_pair_compares_latencies_on_the_programs_read_clock():
    timings = [ClientTiming(0, "load", "wire", "kernel_tx->kernel_rx", 0.01, 0.02, 1),
               ClientTiming(0, "measure", "user_latency", "intended->user_read", 5.0, 6.0, 1),
               ClientTiming(0, "load", "user_latency", "intended->user_read", 0.04, 0.2, 1)]
    assert (tls.latency_ms(point(timings), "p50"), tls.latency_ms(point(timings), "p99")) \
        == (0.04, 0.2)
    # Without the figure (an older report): the summary's percentiles.
    assert tls.latency_ms(point(), "p99") == 99.0
