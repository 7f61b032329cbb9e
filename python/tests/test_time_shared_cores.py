"""Time-shared emulated cores: more serving threads than a host's emulated cores each get
cores / threads of one per CFS scheduling period of that host (cores.thread_share), the
checks that name the field, and what reaches a per-thread cgroup."""

from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.hosts import cgroups
from cachelab.run import processes
from cachelab.spec import cores, topology
from cachelab.spec import experiment as spec

THESIS = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[servers]
kind = "{kind}"
threads = {threads}
instances = {instances}
[middleware]
count = 0
[load]
instances = 1
[topology]
kind = "netns"
scale = {scale}
cpu_period_ms = {period}
[topology.server]
cpu_quota = 10.8
thread_quota = 1.8
"""


def config(kind="memcached", threads=1, instances=1, scale=30, period=0.6):
    text = THESIS.format(kind=kind, threads=threads, instances=instances, scale=scale,
                         period=period)
    return spec.parse(text + '\n[sweep.factors]\n"load.clients" = [1]\n').points[0].config


def refused(**kw) -> str:
    with pytest.raises(UserError) as err:
        config(**kw)
    return str(err.value).removeprefix("sweep point 1 (load.clients=1): ")


def test_cfs_period_is_its_latency_scaled_by_the_log_of_the_cpus():
    assert cores.sched_period_ms(1, 1) == 6
    assert cores.sched_period_ms(6, 2) == 18      # the thesis's 6 cores: factor 3
    assert cores.sched_period_ms(8, 1) == 24
    assert cores.sched_period_ms(64, 1) == 24     # the factor stops at 8 CPUs


def test_cfs_period_stretches_to_a_minimum_slice_per_runnable_task():
    assert cores.sched_period_ms(6, 10) == pytest.approx(22.5)


def test_threads_within_the_emulated_cores_keep_a_core_each_at_the_hosts_period():
    for threads in (1, 4, 6):
        assert cores.thread_share(0.36, 0.06, threads, 30) == cores.ThreadShare(0.06)


def test_twelve_threads_on_six_cores_get_half_a_core_per_stretched_cfs_period():
    share = cores.thread_share(0.36, 0.06, 12, 30)
    assert share.quota == pytest.approx(0.03)
    assert share.period_us == 540_000   # 18 ms on the thesis's 6 cores, x 30


def test_the_shares_of_time_shared_threads_add_up_to_the_hosts_cores():
    for threads in (7, 8, 10, 12):
        share = cores.thread_share(0.36, 0.06, threads, 30)
        assert share.quota * threads == pytest.approx(0.36)


def test_without_a_host_quota_there_are_no_cores_to_share():
    assert cores.thread_share(0.0, 0.06, 12, 30) == cores.ThreadShare(0.06)


def test_each_server_host_gets_the_share_of_all_its_serving_threads():
    c = config(kind="redis", instances=8)
    shares = processes.thread_shares(c, topology.plan(c))
    assert shares["server1"].quota == pytest.approx(0.045)
    assert shares["server1"].period_us == 540_000
    assert processes.thread_shares(c, None) == {}


def test_a_shared_period_above_the_kernels_longest_names_servers_threads():
    assert refused(threads=12, scale=60, period=1) == (
        "servers.threads: 12 serving threads on server1's 6 emulated cores time-share "
        "them over a 1080 ms period (at topology.scale 60), above the kernel's 1000 ms")


def test_redis_instances_beyond_the_cores_name_servers_instances():
    assert refused(kind="redis", instances=12, scale=60, period=1).startswith(
        "servers.instances: 12 serving threads")


def test_the_shared_period_and_runtime_reach_the_threads_cgroup(tmp_path: Path):
    for c in ("cpu", "cpuacct", "cpuset"):
        (tmp_path / c).mkdir()
    (tmp_path / "cpuset" / "cpuset.mems").write_text("0\n")
    (tmp_path / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    h = cgroups.Hierarchies(None, {c: tmp_path / c for c in ("cpu", "cpuacct", "cpuset")})
    group = cgroups.CpuGroup("cachelab-1-3-server1", quota=0.36, hierarchies=h,
                             period_us=18_000, nice=0)
    made = group.cap_threads([101], 0.03, 540_000)
    assert (made[0] / "cpu.cfs_period_us").read_text() == "540000"
    assert (made[0] / "cpu.cfs_quota_us").read_text() == "16200"
    assert (group.cap_threads([102], 0.06)[0] / "cpu.cfs_period_us").read_text() == "18000"
