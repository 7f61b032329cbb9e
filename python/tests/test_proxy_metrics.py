"""The proxy's metrics endpoint, scraped over HTTP and read with a real Prometheus
exposition parser (prometheus_client's OpenMetrics parser, strict about the format)."""

import socket
import subprocess
import time
import urllib.request

from prometheus_client.openmetrics.parser import text_string_to_metric_families

from cachelab.hosts.memcache_client import Client


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as reply:
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        return {f.name: f for f in text_string_to_metric_families(reply.read().decode())}


def _scrape_settled(port, requests):
    """A scrape once `requests` gets are counted (at most 5 s): the loop records a
    request's sample just after its reply is written, so the client can read the last
    reply a moment before the sample lands."""
    deadline = time.monotonic() + 5
    while True:
        families = _scrape(port)
        count = _samples(families["cachelab_proxy_response_seconds"],
                         "cachelab_proxy_response_seconds_count", op="get")
        if (count and count[0].value >= requests) or time.monotonic() > deadline:
            return families
        time.sleep(0.02)


def _samples(family, name, **labels):
    return [s for s in family.samples
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]


def test_a_scrape_parses_and_its_histograms_count_every_request(three_memcached,
                                                                 proxy_binary, tmp_path):
    port = _free_port()
    servers = [s.address for s in three_memcached]
    proc = subprocess.Popen([str(proxy_binary), "-p", "0", "-t", "2", "--metrics-addr",
                             f"127.0.0.1:{port}", "--log-file", str(tmp_path / "log"),
                             "-m", *servers], stdout=subprocess.PIPE, text=True)
    try:
        host, proxy_port = proc.stdout.readline().split()[-1].rsplit(":", 1)
        with Client(host, int(proxy_port)) as c:
            assert c.set("k", b"v") == "STORED"
            for _ in range(30):
                assert c.get("k") == b"v"
        families = _scrape_settled(port, 30)

        requests = families["cachelab_proxy_requests"]
        assert _samples(requests, "cachelab_proxy_requests_total", op="get")[0].value == 30
        response = families["cachelab_proxy_response_seconds"]
        assert response.type == "histogram"
        count = _samples(response, "cachelab_proxy_response_seconds_count", op="get")
        assert count[0].value == 30
        buckets = _samples(response, "cachelab_proxy_response_seconds_bucket", op="get")
        assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 30
        values = [b.value for b in buckets]
        assert values == sorted(values), "cumulative buckets"

        # Per server: the set went to all three, the 30 gets round-robin (10 each).
        per_server = families["cachelab_proxy_server_seconds"]
        for server in servers:
            n = _samples(per_server, "cachelab_proxy_server_seconds_count", server=server)
            assert n[0].value == 11, server
        up = families["cachelab_proxy_server_up"]
        assert {s.labels["server"]: s.value for s in up.samples} == dict.fromkeys(servers, 1)
        assert families["cachelab_proxy_server_ejections"].type == "counter"
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
