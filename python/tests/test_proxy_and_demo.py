"""The proxy through the Python process control and the CLI wrapper."""

import subprocess
import sys

from cachelab.cli import main
from cachelab.hosts.local import ProxySettings, start_middleware
from cachelab.hosts.memcache_client import Client
from cachelab.readers import proxy_stats


def test_proxy_started_from_python_replicates_and_reports_its_stats(
    three_memcached, proxy_binary, tmp_path
):
    stats_file = tmp_path / "stats.jsonl"
    proxy = start_middleware([s.address for s in three_memcached],
                             ProxySettings(workers=4, window_s=0.5), cpus=(),
                             stats_file=stats_file, log_file=tmp_path / "proxy.log",
                             out=tmp_path / "proxy.out")
    with proxy, Client(proxy.host, proxy.port) as c:
        assert c.set("k", b"v") == "STORED"
        for _ in range(30):
            assert c.get("k") == b"v"
    assert proxy.stop() == 0
    for server in three_memcached:
        with Client(server.host, server.port) as direct:
            assert direct.get("k") == b"v"
            assert direct.stats()["cmd_get"] == "11"  # 30 GETs round-robin, plus ours
    stats = proxy_stats.load(stats_file)
    counts = {r.op: r.count for r in proxy_stats.stage_rows(stats.summary.ops)}
    assert counts == {"get": 30, "set": 1}


def test_the_pipeline_depth_busy_polling_and_sharing_reach_the_proxy(three_memcached, proxy_binary,
                                                            tmp_path):
    settings = ProxySettings(workers=2, sharded=True, loops=1, pipeline=8, busy_poll_us=50,
                             window_s=0.5, share_connections=True)
    before = []
    for server in three_memcached:
        with Client(server.host, server.port) as direct:
            before.append(int(direct.stats()["curr_connections"]))
    proxy = start_middleware([s.address for s in three_memcached], settings, cpus=(),
                             stats_file=tmp_path / "s.jsonl", log_file=tmp_path / "proxy.log",
                             out=tmp_path / "proxy.out")
    with proxy, Client(proxy.host, proxy.port) as c:
        assert c.set("k", b"v") == "STORED"
        assert c.get("k") == b"v"
        stats = c.stats()
        assert (stats["pipeline"], stats["workers"], stats["sharded"]) == ("8", "2", "1")
        assert stats["busy_poll_us"] == "50"
        assert stats["share_connections"] == "1"
        for server, was in zip(three_memcached, before, strict=True):
            with Client(server.host, server.port) as direct:  # the two workers share one
                assert int(direct.stats()["curr_connections"]) == was + 1
    assert proxy.stop() == 0


def test_cachelab_proxy_runs_the_binary(proxy_binary):
    result = subprocess.run([sys.executable, "-m", "cachelab.cli", "proxy", "--help"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 0
    assert "--workers" in result.stdout and "--sharded" in result.stdout


def test_a_missing_binary_is_one_line_and_exit_1(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("CACHELAB_BIN_DIR", str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("cachelab.hosts.binaries.REPO_ROOT", tmp_path)
    assert main(["proxy", "--version"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cachelab-proxy not found" in err

