"""Server options reach the running server's command line and are recorded; per-thread
pinning puts each worker thread on its own CPU; the binary protocol has no misses after
a populate; instances per host multiply the server processes."""

from __future__ import annotations

import io
import os
import sqlite3
import zlib
from pathlib import Path

import pytest

from cachelab.hosts import local
from cachelab.hosts.binaries import find_binary
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec
from cachelab.spec import topology


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def test_memcached_options_reach_its_command_line_and_are_recorded(tmp_path):
    options = local.ServerOptions("memcached", 2, 64, group_size=7,
                                  extra_args=("-c", "512"))
    with local.start_server("memcached", threads=2, memory_mb=64, cpus=(),
                            log=tmp_path / "server-0.log", options=options) as server:
        argv = cmdline(server.process.pid)
    assert argv[argv.index("-R") + 1] == "7"
    assert argv[-2:] == ["-c", "512"]
    assert "-R 7" in (tmp_path / "server-0.cmdline").read_text()


def test_redis_persistence_reaches_redis(tmp_path):
    options = local.ServerOptions("redis", 1, 64, persistence="aof")
    with local.start_server("redis", threads=1, memory_mb=64, cpus=(),
                            log=tmp_path / "server-0.log", options=options) as server:
        argv = cmdline(server.process.pid)
    # redis-server rewrites its title, so the command line was checked as written:
    recorded = (tmp_path / "server-0.cmdline").read_text()
    assert "--appendonly yes" in recorded and "--appendfsync everysec" in recorded
    assert (tmp_path / "server-0.data").is_dir()
    assert argv  # the process ran


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_thread_pinning_puts_each_memcached_worker_on_its_own_cpu(tmp_path):
    cpus = sorted(os.sched_getaffinity(0))[:2]
    with local.start_server("memcached", threads=2, memory_mb=64, cpus=(),
                            log=tmp_path / "m.log") as server:
        placed = local.pin_threads(server.process.pid, "memcached", cpus, expected=2)
        assert len(placed) == 2 and sorted(placed.values()) == cpus
        for tid, cpu in placed.items():
            assert os.sched_getaffinity(tid) == {cpu}
            comm = Path(f"/proc/{server.process.pid}/task/{tid}/comm").read_text()
            assert comm.strip() == "mc-worker"


def test_instances_per_host_share_their_host():
    c = spec.parse("""name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
[servers]
count = 2
instances = 3
[middleware]
count = 0
[sweep.factors]
"load.clients" = [1]
""").points[0].config
    layout = topology.plan(c)
    assert c.servers.processes == 6 and c.instances == 6
    assert [layout.host("server", i).name for i in range(6)] == ["server1"] * 3 + \
        ["server2"] * 3
    assert len([h for h in layout.hosts if "server" in h.roles]) == 2


EXPERIMENT = """
name = "binary"
order = "interleaved"
repetitions = 1
run_time_s = 1.5
warmup_s = 0.25
cooldown_s = 0.25
[servers]
count = 2
instances = 2
memory_mb = 64
group_size = 4
extra_args = ["-c", "256"]
pinning = "thread"
threads = 2
[middleware]
count = 0
[load]
protocol = "binary"
[workload]
ratio = "0:1"
data_size = 100
key_maximum = 500
[sweep.factors]
"workload.multiget_keys" = [0, 4]
"""


def test_a_binary_experiment_has_no_misses_and_records_the_servers_command_lines(tmp_path):
    find_binary("cachelab-load")
    outcome = run_experiment(spec.parse(EXPERIMENT), tmp_path / "out",
                             progress=Progress(io.StringIO()))
    assert outcome.runs_done == 2
    with sqlite3.connect(outcome.database) as db:
        assert db.execute("SELECT sum(misses), sum(errors), min(throughput) FROM run"
                          ).fetchone()[:2] == (0, 0)
        lines = [r[0] for r in db.execute(
            "SELECT content FROM artifact WHERE name LIKE 'server-%.cmdline'")]
        pins = db.execute("SELECT count(*) FROM artifact WHERE name LIKE 'server-%.pinning'"
                          ).fetchone()[0]
    assert len(lines) == 2 * 4  # 2 points x (2 servers x 2 instances)
    assert pins == 8
    text = zlib.decompress(lines[0]).decode()
    assert "-R 4" in text and text.rstrip().endswith("-c 256")
