"""`cachelab proxy reload`: SIGHUP to a running proxy named by pid or pid file."""

import subprocess
import time

import pytest

from cachelab.cli import main
from cachelab.memcache_client import Client


def _config(servers, mode):
    listed = ", ".join(f'"{s.address}"' for s in servers)
    return (f'[pools.main]\nlisten = "127.0.0.1:0"\nmode = "{mode}"\nhash = "md5"\n'
            f"servers = [{listed}]\n")


def _wait_for(path, text, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text():
            return True
        time.sleep(0.02)
    return False


def test_reload_by_pid_file_gives_the_proxy_its_new_pool(three_memcached, proxy_binary,
                                                          tmp_path, capsys):
    config = tmp_path / "proxy.toml"
    config.write_text(_config(three_memcached[:1], "replicate"))
    pid_file, log = tmp_path / "proxy.pid", tmp_path / "proxy.log"
    proc = subprocess.Popen([str(proxy_binary), "--config", str(config), "-t", "2",
                             "--pid-file", str(pid_file), "--log-file", str(log)],
                            stdout=subprocess.PIPE, text=True)
    try:
        host, port = proc.stdout.readline().split()[-1].rsplit(":", 1)
        assert pid_file.read_text().strip() == str(proc.pid)
        config.write_text(_config(three_memcached[1:], "replicate"))
        assert main(["proxy", "reload", str(pid_file)]) == 0
        assert f"cachelab-proxy {proc.pid}" in capsys.readouterr().out
        assert _wait_for(log, "configuration reloaded")
        with Client(host, int(port)) as c:
            assert c.set("after", b"1") == "STORED"
        for server, expected in zip(three_memcached, (None, b"1", b"1"), strict=True):
            with Client(server.host, server.port) as direct:
                assert direct.get("after") == expected
        # By pid too; a broken file is refused and the proxy keeps serving.
        config.write_text("[pools.main]\nlisten = 1\n")
        assert main(["proxy", "reload", str(proc.pid)]) == 0
        assert _wait_for(log, "reload refused")
        with Client(host, int(port)) as c:
            assert c.get("after") == b"1"
    finally:
        proc.terminate()
        assert proc.wait(timeout=20) == 0
    assert not pid_file.exists(), "the pid file goes with the proxy"


@pytest.mark.parametrize("target, message", [
    ("nope.pid", "neither a pid nor a readable pid file"),
    ("99999999", "no process 99999999"),
])
def test_reload_of_nothing_is_one_line_and_exit_1(target, message, tmp_path, capsys,
                                                  monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["proxy", "reload", target]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
