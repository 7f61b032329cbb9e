"""Emulated cores (`thread_quota`): the rules of the field, how a scale model and the role
profiles resolve it, and what is written to a per-thread cgroup on v1 and v2 (against a
directory standing in for the cgroup mounts)."""

from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.hosts import cgroups
from cachelab.spec import cores, topology
from cachelab.spec import experiment as spec

BASE = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[servers]
instances = 2
[middleware]
count = 0
[load]
instances = 1
[topology]
kind = "netns"
"""


def config(extra: str):
    return spec.parse(BASE + extra + '\n[sweep.factors]\n"load.clients" = [1]\n'
                      ).points[0].config


def refused(extra: str) -> str:
    with pytest.raises(UserError) as err:
        config(extra)
    return str(err.value).removeprefix("sweep point 1 (load.clients=1): ")


def test_the_thesis_server_is_six_cores_of_one_core_threads_at_scale():
    c = config("scale = 10\ncpu_period_ms = 1\n[topology.server]\ncpu_quota = 6\n"
               "thread_quota = 1\n")
    layout = topology.plan(c)
    server, load = layout.host("server", 0), layout.host("load", 0)
    assert (server.cpu_quota, server.thread_quota) == pytest.approx((0.6, 0.1))
    assert (load.cpu_quota, load.thread_quota) == (0, 0)
    assert layout.cpu_period_us == 10_000  # 1 ms per thread per period: the kernel's least


def test_a_host_takes_its_own_thread_quota_over_its_roles():
    c = config('cpu_quota = 1\nthread_quota = 0.25\n[[topology.host]]\nname = "s"\n'
               'roles = ["server"]\nthread_quota = 0.5\n[[topology.host]]\nname = "l"\n'
               'roles = ["load"]\n')
    layout = topology.plan(c)
    assert (layout.host("server", 1).thread_quota, layout.host("load", 0).thread_quota) == (
        0.5, 0.25)


def test_a_thread_cannot_have_more_than_its_host():
    assert refused("[topology.server]\ncpu_quota = 0.5\nthread_quota = 1\n") == (
        "topology.server.thread_quota: 1 cores per thread is more than the host's "
        "cpu_quota of 0.5 (a thread runs inside its host's quota)")


def test_a_host_level_thread_quota_is_checked_against_the_topologys_cpu_quota():
    message = refused('cpu_quota = 0.5\n[[topology.host]]\nname = "s"\nroles = ["server", '
                      '"load"]\nthread_quota = 0.8\n')
    assert message.startswith("topology.host[1].thread_quota: 0.8 cores per thread")


def test_one_thread_uses_at_most_one_core_of_this_machine():
    assert refused("thread_quota = 1.5\n").startswith(
        "topology.thread_quota: 1.5 cores per thread at topology.scale 1 is 1.5 cores")


def test_a_thread_quota_below_the_kernels_runtime_minimum_names_the_field():
    assert refused("thread_quota = 0.05\n").startswith(
        "topology.thread_quota: 0.05 core over a 10 ms period is 0.5 ms per period")


def test_a_host_quota_above_the_machine_is_allowed_when_the_scale_brings_it_under():
    assert topology.plan(config("scale = 10\ncpu_quota = 6\n")).hosts[0].cpu_quota == 0.6
    assert refused("scale = 2\ncpu_quota = 6\n") == (
        "topology.cpu_quota: 6 cores (3 at topology.scale 2), this machine has "
        f"{__import__('os').cpu_count()}")


def test_real_hosts_refuse_thread_quota():
    text = ('thread_quota = 1\n[[topology.host]]\nname = "s"\n'
            'address = "10.0.0.1"\nroles = ["server", "load"]\n')
    with pytest.raises(UserError, match='topology.thread_quota: only for kind = "netns"'):
        spec.parse(BASE.replace('kind = "netns"', 'kind = "ssh"') + text
                   + '\n[sweep.factors]\n"load.clients" = [1]\n')


def test_v1_writes_the_period_before_the_quota_and_moves_one_thread_by_tasks():
    assert cgroups.thread_writes(1, 1000, 10_000) == [
        ("cpu.cfs_period_us", "10000"), ("cpu.cfs_quota_us", "1000")]
    assert cgroups.thread_join_file(1) == "tasks"


def test_v2_makes_the_child_threaded_before_its_cpu_max():
    assert cgroups.thread_writes(2, 1000, 10_000) == [
        ("cgroup.type", "threaded"), ("cpu.max", "1000 10000")]
    assert cgroups.thread_join_file(2) == "cgroup.threads"


def fake_v1(root: Path) -> cgroups.Hierarchies:
    for c in ("cpu", "cpuacct", "cpuset"):
        (root / c).mkdir()
    (root / "cpuset" / "cpuset.mems").write_text("0\n")
    (root / "cpuset" / "cpuset.cpus").write_text("0-1\n")
    return cgroups.Hierarchies(None, {c: root / c for c in ("cpu", "cpuacct", "cpuset")})


def test_each_thread_gets_a_group_in_the_cpu_hierarchy_and_all_go_with_the_host(tmp_path):
    h = fake_v1(tmp_path)
    group = cgroups.CpuGroup("cachelab-1-1-server1", quota=0.6, hierarchies=h,
                             period_us=10_000, nice=0)
    made = group.cap_threads([101, 102], 0.1)
    assert [d.name for d in made] == ["cachelab-thread0", "cachelab-thread1"]
    assert all(d.parent == tmp_path / "cpu" / "cachelab-1-1-server1" for d in made)
    assert (made[1] / "tasks").read_text() == "102"
    assert (made[0] / "cpu.cfs_quota_us").read_text() == "1000"
    for d in made:  # a real cgroup's files vanish with it; a test directory's do not
        for f in d.iterdir():
            f.unlink()
    for d in group.dirs:
        for f in d.iterdir():
            if f.is_file():
                f.unlink()
    group.remove(timeout=0.1)
    assert not any((tmp_path / c / "cachelab-1-1-server1").exists()
                   for c in ("cpu", "cpuacct", "cpuset"))


def test_a_thread_quota_below_the_kernels_minimum_is_refused_before_any_group(tmp_path):
    group = cgroups.CpuGroup("cachelab-1-2-server1", hierarchies=fake_v1(tmp_path),
                             period_us=10_000, nice=0)
    with pytest.raises(UserError):
        group.cap_threads([101], 0.05)
    assert not list((tmp_path / "cpu" / "cachelab-1-2-server1").glob("cachelab-thread*"))


def test_the_quotas_period_below_a_millisecond_needs_a_scale_that_stretches_it():
    assert topology.plan(config("scale = 30\ncpu_period_ms = 0.6\n")).cpu_period_us == 18_000
    assert refused("cpu_period_ms = 0.6\n") == (
        "topology.cpu_period_ms: 0.6 ms at topology.scale 1 is a 0.6 ms period; the "
        "kernel's is 1 .. 1000 ms")


def test_on_ssh_hosts_the_cpus_to_pin_to_are_the_hosts_not_this_machines():
    text = ('[servers]\ncpus = [0, 5, 11]\n[[topology.host]]\nname = "s"\n'
            'address = "10.0.0.1"\nroles = ["server", "load"]\n')
    doc = BASE.replace('kind = "netns"', 'kind = "ssh"').replace("[servers]\ninstances = 2\n", "")
    c = spec.parse(doc + text + '\n[sweep.factors]\n"load.clients" = [1]\n').points[0].config
    assert c.servers.cpus == (0, 5, 11)


def test_a_hosts_limit_is_its_serving_threads_quotas_where_they_bind_first():
    c = config("scale = 30\ncpu_period_ms = 0.6\n[topology.server]\ncpu_quota = 10.8\n"
               "thread_quota = 1.8\n")
    layout = topology.plan(c)   # 2 Redis instances on server1: 2 emulated cores of 6
    limits = cores.host_limits(layout, threads_per_server=1)
    assert limits["server1"] == pytest.approx(0.12) and limits["load1"] == 0
    assert cores.host_limits(layout, threads_per_server=4)["server1"] == pytest.approx(0.36)
