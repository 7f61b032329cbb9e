"""experiments/tls-cost.toml end to end, shortened (one repetition of 2 s per point):
real memcached `-Z` and redis-server `--tls-port` with the experiment's throw-away
certificates, directly and behind cachelab-proxy (a memcached pool and a Redis pool) with
TLS on either hop; what each hop negotiated and each process's CPU stored; the report's
TLS table with one row per pair; no key left behind. Then Unix sockets on both hops, and
a failing run that still removes the keys."""

from __future__ import annotations

import io
import os
import re
import tempfile
from pathlib import Path

import pytest

from cachelab.commands import export as export_cmd
from cachelab.commands import run as run_cmd
from cachelab.hosts import netns
from cachelab.hosts.binaries import REPO_ROOT, find_binary
from cachelab.report import sections
from cachelab.run import processes, runner, transport
from cachelab.run.progress import Progress
from cachelab.spec import experiment as spec
from cachelab.store import Store

SHORTER = {"repetitions": "1", "run_time_s": "2", "warmup_s": "0.5", "cooldown_s": "0.5",
           "max_repetitions": "1", "cv_threshold": "10"}
#: What rustls (cachelab-load) and OpenSSL (the probe) call TLS 1.3's suites.
TLS13 = {"cachelab-load": ("TLSv1_3", {"TLS13_AES_256_GCM_SHA384", "TLS13_AES_128_GCM_SHA256",
                                       "TLS13_CHACHA20_POLY1305_SHA256"}),
         "probe": ("TLSv1.3", {"TLS_AES_256_GCM_SHA384", "TLS_AES_128_GCM_SHA256",
                               "TLS_CHACHA20_POLY1305_SHA256"})}


@pytest.fixture
def private_tmp(tmp_path, monkeypatch) -> Path:
    """Where the harness's temporary directories go during the test (checked empty after)."""
    directory = tmp_path / "tmp"
    directory.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(directory))
    return directory


def shortened(tmp_path: Path, name: str) -> Path:
    text = (REPO_ROOT / "experiments" / name).read_text()
    for key, value in SHORTER.items():
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        assert n == 1, key
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_tls_cost_experiment_measures_each_pair(proxy_binary, tmp_path, private_tmp):
    find_binary("cachelab-load")
    out = tmp_path / "out"
    outcome, page = run_cmd.run(shortened(tmp_path, "tls-cost.toml"), out,
                                progress=Progress(io.StringIO()))
    assert outcome.runs_done == 12
    with Store.open_existing(out) as s:
        exp = s.require_experiment()
        points = {p.index: spec.config_from_dict(p.config) for p in s.points(exp.id)}
        runs = s.runs_by_point(exp.id)
        for index, config in points.items():
            (run,) = runs[index]
            assert run.throughput > 0 and run.misses == 0 and run.errors == 0
            found = s.tls_sessions([run.id])
            expected_hops = set()
            if config.client_tls:
                expected_hops.add("load->middleware" if config.middleware.count
                                  else "load->server")
            if config.middleware.count and config.servers.tls:
                expected_hops.add("middleware->server")
            assert {x.hop for x in found} == expected_hops, config
            for x in found:
                version, suites = TLS13[x.source]
                assert x.version == version and x.cipher in suites
                assert x.source == ("probe" if x.hop == "middleware->server"
                                    else "cachelab-load")
            cpu = s.process_cpu([run.id])[run.id]
            roles = sorted(p.role for p in cpu)
            assert roles == sorted(["load", "server"] + ["middleware"] * config.middleware.count)
            assert all(p.cpu_s > 0 for p in cpu)
            assert [p.requests for p in cpu if p.role == "load"][0] > 0
        sec = sections.build(s)
    pairs = {(c.point.index, c.baseline.index) for c in sec.tls}
    assert len(pairs) == 8
    for c in sec.tls:
        tls_config, plain_config = points[c.point.index], points[c.baseline.index]
        assert tls_config.tls and not plain_config.tls
        assert (tls_config.servers.kind, tls_config.middleware.count) == (
            plain_config.servers.kind, plain_config.middleware.count)
        assert c.sessions and {x.hop for x in c.sessions} == set(c.hops)
        # Both sides on the program's read clock (the plain side also has kernel stamps).
        (read,) = [t for t in c.baseline.timings
                   if t.role == "load" and t.figure == "user_latency"]
        assert read.clock == "intended->user_read" and c.baseline_p99_ms == read.p99_ms
        for role in ("load", "server"):
            assert c.cpu_added_us(role) is not None
        assert (c.cpu_added_us("middleware") is None) == (tls_config.middleware.count == 0)
    html = page.read_text()
    assert "What TLS costs" in html and html.count("data-baseline=") == 8
    export_cmd.run(out, "csv", tables=["tls_cost"])
    rows = (out / "export" / "tls_cost.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 8
    assert list(private_tmp.iterdir()) == []  # the keys went with the experiment


def test_unix_sockets_on_both_hops(proxy_binary, tmp_path, private_tmp):
    find_binary("cachelab-load")
    path = tmp_path / "unix.toml"
    path.write_text("""
name = "unix"
repetitions = 1
run_time_s = 1
warmup_s = 0.2
cooldown_s = 0.2
[validation]
cv_threshold = 10   # stability is the machine's to say; the bound is tested elsewhere
max_repetitions = 1
[servers]
memory_mb = 64
unix_socket = true
[middleware]
workers = 2
unix_socket = true
[load]
clients = 2
[workload]
ratio = "1:10"
data_size = 32
key_maximum = 1000
[[sweep.points]]
"servers.kind" = "memcached"
"middleware.count" = 0
[[sweep.points]]
"servers.kind" = "redis"
"middleware.count" = 0
[[sweep.points]]
"servers.kind" = "memcached"
"middleware.count" = 1
""")
    out = tmp_path / "out"
    outcome, _ = run_cmd.run(path, out, progress=Progress(io.StringIO()), report=False)
    assert outcome.runs_done == 3
    with Store.open_existing(out) as s:
        runs = s.runs_by_point(s.require_experiment().id)
        for index, (run,) in sorted(runs.items()):
            assert run.throughput > 0 and run.hits > 0 and run.misses == 0
            assert s.tls_sessions([run.id]) == []
            server_cmd = s.artifact(run.id, "server-0.cmdline").decode()
            assert ("-s " if index != 1 else "--unixsocket ") in server_cmd
            assert "127.0.0.1" not in server_cmd.split("--bind")[0]
        load_out = s.artifact(runs[2][0].id, "load-0.out").decode()
        assert "Unix socket" in load_out  # it reached the middleware's socket
    assert list(private_tmp.iterdir()) == []  # the sockets' directory is gone


def test_a_failed_run_leaves_no_key_behind(tmp_path, private_tmp, monkeypatch):
    path = shortened(tmp_path, "tls-cost.toml")

    def fail(*args, **kwargs):
        raise RuntimeError("populate failed")

    monkeypatch.setattr(processes, "populate", fail)
    with pytest.raises(RuntimeError, match="populate failed"):
        runner.run_experiment(spec.load(path), tmp_path / "out",
                              progress=Progress(io.StringIO()))
    assert list(private_tmp.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="network namespaces need root")
def test_tls_on_both_hops_between_emulated_hosts(proxy_binary, tmp_path, private_tmp):
    """The same certificates serve hosts whose addresses the topology chooses (they name
    roles, not addresses), and the probe of the middleware's hop runs in its namespace."""
    find_binary("cachelab-load")
    exp = spec.parse("""
name = "tls-netns"
repetitions = 1
run_time_s = 1
warmup_s = 0.2
cooldown_s = 0.2
[topology]
kind = "netns"
[servers]
memory_mb = 64
tls = true
[middleware]
workers = 2
tls = true
[load]
clients = 2
[workload]
data_size = 32
key_maximum = 1000
""")
    record = runner.execute_run(exp, exp.points[0], 1, tmp_path / "run")
    assert record.summary.throughput > 0 and record.summary.misses == 0
    assert {h.host for h in record.hosts} == {"server1", "middleware1", "load1"}
    assert {(x.hop, x.source) for x in record.tls} == {
        ("load->middleware", "cachelab-load"), ("middleware->server", "probe")}
    assert all(x.version in ("TLSv1_3", "TLSv1.3") for x in record.tls)
    assert sorted(p.role for p in record.process_cpu) == ["load", "middleware", "server"]
    assert netns.leftovers(os.getpid()) == []
    assert list(private_tmp.iterdir()) == []


def test_a_deep_temporary_directory_leaves_room_for_socket_names():
    """A socket path longer than sun_path cannot be bound: a deep TMPDIR (pytest's own
    directories under xdist are 113 bytes deep here) sends the run's sockets to /tmp."""
    assert transport.socket_directory("/tmp") == "/tmp"
    assert transport.socket_directory("/var/tmp/x") == "/var/tmp/x"
    deep = "/tmp/" + "d" * 80
    assert transport.socket_directory(deep) == "/tmp"
    room = transport.SUN_PATH_MAX - len(transport.LONGEST_SOCKET_NAME)
    assert transport.socket_directory("/" + "e" * (room - 1)) == "/" + "e" * (room - 1)
