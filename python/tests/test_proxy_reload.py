"""`cachelab proxy reload`: SIGHUP to a running proxy named by pid or pid file."""

import subprocess
import time

import pytest

from cachelab.cli import main
from cachelab.commands.proxy import program
from cachelab.hosts.memcache_client import Client


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


def _pid_file(tmp_path, pid):
    path = tmp_path / "cachelab-proxy.pid"
    path.write_text(f"{pid}\n")
    return path


def test_a_pid_file_whose_pid_went_to_another_program_signals_nothing(tmp_path, capsys):
    # `sleep` dies of a SIGHUP: alive afterwards means it was not signalled.
    other = subprocess.Popen(["sleep", "30"])
    try:
        pid_file = _pid_file(tmp_path, other.pid)
        assert main(["proxy", "reload", str(pid_file)]) == 1
        err = capsys.readouterr().err
        assert err == (f"cachelab: error: {pid_file}: stale pid file: process {other.pid} "
                       "is 'sleep', not cachelab-proxy: nothing was signalled\n")
        assert main(["proxy", "reload", str(other.pid)]) == 1  # by pid, the same check
        assert "is 'sleep', not cachelab-proxy" in capsys.readouterr().err
        with pytest.raises(subprocess.TimeoutExpired):
            other.wait(timeout=0.5)
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_a_pid_file_of_a_process_that_exited_is_stale(tmp_path, capsys):
    gone = subprocess.Popen(["true"])
    gone.wait()
    pid_file = _pid_file(tmp_path, gone.pid)
    assert main(["proxy", "reload", str(pid_file)]) == 1
    assert capsys.readouterr().err == (f"cachelab: error: {pid_file}: stale pid file: no "
                                       f"process {gone.pid} (has the proxy exited?)\n")


def test_pid_0_is_never_signalled(tmp_path, capsys):
    # os.kill(0, ...) would signal this process's whole group, pytest included.
    assert main(["proxy", "reload", str(_pid_file(tmp_path, 0))]) == 1
    assert "stale pid file: no process 0" in capsys.readouterr().err


def test_the_program_is_read_from_proc(proxy_binary, tmp_path):
    proc = subprocess.Popen([str(proxy_binary), "-l", "127.0.0.1", "-p", "0", "-m",
                             "127.0.0.1:1"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        assert program(proc.pid) == "cachelab-proxy"
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert program(proc.pid) is None
