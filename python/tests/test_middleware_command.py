"""The middleware's command line from a run's configuration (no process started): the
protocol its pool speaks follows the servers' kind, and everything else (workers, sharded
MGET, statistics, TLS on either hop) is built alike for both kinds."""

from __future__ import annotations

from pathlib import Path

import pytest

from cachelab.hosts import tls
from cachelab.hosts.local import ProxySettings, middleware_argv
from cachelab.run import transport
from cachelab.run.processes import proxy_settings
from cachelab.spec import experiment as spec

FILES = tls.TlsFiles(Path("/t"), Path("/t/ca.pem"), tls.Pair(Path("/t/s.pem"), Path("/t/s.key")),
                     tls.Pair(Path("/t/m.pem"), Path("/t/m.key")))
SERVERS = ["127.0.0.1:7001", "127.0.0.1:7002"]
LISTEN = ["-l", "127.0.0.1", "-p", "0"]


def config(servers: str, middleware: str = "") -> spec.RunConfig:
    text = f"""name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[servers]
{servers}
[middleware]
{middleware}
"""
    (point,) = spec.parse(text).points
    return point.config


def argv(c: spec.RunConfig, certificates: tls.TlsFiles | None = None) -> list[str]:
    """What the runner gives cachelab-proxy for middleware 0 of a run of `c`."""
    wiring = transport.Wiring(c, certificates)
    return middleware_argv(SERVERS, proxy_settings(c, 2.0), listen=LISTEN,
                           stats_file=Path("/r/middleware-0.stats.jsonl"),
                           log_file=Path("/r/middleware-0.log"), transport=wiring.middleware(0))


def test_a_redis_pool_gets_the_redis_protocol_and_the_rest_as_for_memcached():
    assert argv(config('kind = "redis"\ncount = 2', "workers = 8\nsharded = true")) == [
        *LISTEN, "--protocol", "redis", "-t", "8", "--stats-window", "2",
        "--stats-file", "/r/middleware-0.stats.jsonl", "--log-file", "/r/middleware-0.log",
        "-m", *SERVERS, "-s"]


def test_a_memcached_pool_keeps_the_command_line_it_always_had():
    assert argv(config('kind = "memcached"\ncount = 2', "workers = 8\nsharded = true")) == [
        *LISTEN, "-t", "8", "--stats-window", "2",
        "--stats-file", "/r/middleware-0.stats.jsonl", "--log-file", "/r/middleware-0.log",
        "-m", *SERVERS, "-s"]


@pytest.mark.parametrize("kind", ["memcached", "redis"])
def test_tls_on_both_hops_is_the_same_for_both_kinds(kind):
    found = argv(config(f'kind = "{kind}"\ntls = true', "tls = true\nloops = 2\n"
                        "pipeline = 4\nbusy_poll_us = 20"), FILES)
    assert found[found.index("--tls-cert") + 1] == "/t/m.pem"
    assert found[found.index("--tls-key") + 1] == "/t/m.key"
    assert found[found.index("--server-tls-ca") + 1] == "/t/ca.pem"
    assert found[found.index("--server-tls-sni") + 1] == tls.SERVER_NAME
    assert ("--protocol" in found) == (kind == "redis")
    assert found[-6:] == ["--loops", "2", "--pipeline", "4", "--busy-poll-us", "20"]


def test_the_settings_follow_the_configuration():
    c = config('kind = "redis"', "workers = 3\nsharded = true\nloops = 1\npipeline = 2")
    assert proxy_settings(c, 0.5) == ProxySettings(3, True, 1, 2, 0, "redis", 0.5)
    assert type(proxy_settings(c, 0.5).protocol) is str  # the word, not the enum member


def test_shared_connections_follow_the_configuration():
    c = config("", "share_connections = true")
    assert proxy_settings(c, 0.5).share_connections
    assert argv(c, FILES)[-1] == "--share-connections"
    assert "--share-connections" not in argv(config("", "workers = 2"), FILES)


def test_merged_gets_follow_the_configuration():
    c = config("", "pipeline = 16\nmerge_gets = true")
    assert proxy_settings(c, 0.5).merge_gets
    assert argv(c, FILES)[-1] == "--merge-gets"
    assert "--merge-gets" not in argv(config("", "pipeline = 16"), FILES)


def test_an_unknown_protocol_is_refused():
    with pytest.raises(ValueError, match="protocol must be one of memcached, redis"):
        ProxySettings(4, protocol="mongodb")


def test_the_removed_threads_field_is_refused_saying_what_replaced_it():
    with pytest.raises(spec.UserError, match=r"^middleware\.threads: removed with the proxy's "
                                             r"tokio shell.*middleware\.loops"):
        config('kind = "memcached"', "threads = 2")
