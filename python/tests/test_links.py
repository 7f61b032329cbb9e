"""Links as the cloud shapes them, the scale model, and the machine check (issue 25):
the pure parts. The kernel side is in test_netns.py."""

from __future__ import annotations

import math
import os
import time

import pytest

from cachelab.analysis import linkbound
from cachelab.errors import UserError
from cachelab.hosts.netns import tbf_args
from cachelab.readers.cpu import process_usage
from cachelab.report import measure
from cachelab.report.data import PointResult, rescaled
from cachelab.run import machine
from cachelab.spec import experiment as spec
from cachelab.spec import topology
from cachelab.store import StoredInterval

BASE = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
{topology}
[servers]
count = 2
[middleware]
count = 1
[workload]
ratio = "0:1"
data_size = 4096
"""


def plan(topo: str, factors: str = '"load.clients" = [1]') -> list[topology.Layout]:
    e = spec.parse(BASE.format(topology=topo) + "[sweep.factors]\n" + factors)
    return [topology.plan(p.config) for p in e.points]


def hosts(layout: topology.Layout) -> dict[str, topology.PlannedHost]:
    return {h.name: h for h in layout.hosts}


def test_link_mbit_is_shorthand_for_both_directions():
    (layout,) = plan("link_mbit = 100")
    assert all((h.egress_mbit, h.ingress_mbit) == (100, 100) for h in layout.hosts)


def test_a_direction_overrides_the_shorthand_at_its_own_level():
    (layout,) = plan("link_mbit = 100\ningress_mbit = 0")
    assert all((h.egress_mbit, h.ingress_mbit) == (100, 0) for h in layout.hosts)


def test_a_role_profile_shapes_only_that_roles_hosts():
    (layout,) = plan("[topology.server]\negress_mbit = 100\negress_burst_kb = 32\n"
                     "egress_queue_ms = 5")
    h = hosts(layout)
    assert (h["server1"].egress_mbit, h["server1"].ingress_mbit) == (100, 0)
    assert (h["server1"].egress_burst_kb, h["server1"].egress_queue_ms) == (32, 5)
    assert (h["server2"].egress_mbit, h["server2"].ingress_queue_ms) == (100, 50)
    assert not h["middleware1"].shaped and not h["load1"].shaped


def test_a_hosts_own_value_beats_its_roles_profile_which_beats_the_topology():
    (layout,) = plan('link_mbit = 10\n[topology.server]\nlink_mbit = 100\n'
                     '[[topology.host]]\nname = "s"\nroles = ["server"]\negress_mbit = 50\n'
                     '[[topology.host]]\nname = "m"\nroles = ["middleware", "load"]\n')
    h = hosts(layout)
    # s: egress its own, ingress from the server profile; m: no profile, the topology's
    assert (h["s"].egress_mbit, h["s"].ingress_mbit) == (50, 100)
    assert (h["m"].egress_mbit, h["m"].ingress_mbit) == (10, 10)


def test_a_profile_field_is_a_sweep_factor_by_its_full_path():
    layouts = plan("", '"topology.server.egress_mbit" = [50, 100]')
    assert [hosts(x)["server1"].egress_mbit for x in layouts] == [50, 100]
    assert [hosts(x)["middleware1"].egress_mbit for x in layouts] == [0, 0]


def test_ssh_hosts_refuse_emulated_links():
    ssh = ('[topology]\nkind = "ssh"\n[[topology.host]]\nname = "a"\naddress = "10.0.0.1"\n'
           '{extra}\n[sweep.factors]\n"load.clients" = [1]\n')
    for extra, field in (("egress_mbit = 5", "topology.host[1].egress_mbit"),
                         ('[topology.server]\negress_mbit = 5', "topology.server")):
        with pytest.raises(UserError, match=field.replace("[", r"\[").replace("]", r"\]")):
            spec.parse('name = "x"\n' + ssh.format(extra=extra))


def test_egress_only_servers_bound_reads_by_their_upload_alone():
    (layout,) = plan("[topology.server]\negress_mbit = 100")
    c = spec.parse(BASE.format(topology="[topology.server]\negress_mbit = 100")
                   + '[sweep.factors]\n"load.clients" = [1]').points[0].config
    rates = linkbound.configured_rates(layout)
    assert set(rates) == {("server1", "up"), ("server2", "up")}
    found = linkbound.bound(c, layout, 11, rates)
    assert found is not None and found.limit.endswith(" up")
    # Two servers share the GETs: each uploads half of the replies.
    assert found.ops_per_s == pytest.approx(2 * 100e6 / 8 / 4327)


def test_ingress_shaping_alone_bounds_by_a_download():
    (layout,) = plan("ingress_mbit = 100")
    rates = linkbound.configured_rates(layout)
    assert {d for _, d in rates} == {"down"}


def test_tbf_takes_a_bucket_and_a_queue_per_direction():
    assert tbf_args(100, 32, 5)[3:] == ["burst", str(32 * 1024), "latency", "5ms"]
    # A bucket below one frame could never send one.
    assert tbf_args(1, 0.5)[4] == "1514"


def test_a_scale_model_slows_rates_quotas_and_stretches_delays_and_queues():
    topo = ("link_mbit = 100\ndelay_ms = 0.45\ncpu_quota = 0.5\ncpu_period_ms = 10\n"
            "egress_burst_kb = 64\nscale = {k}")
    (full,) = plan(topo.format(k=1))
    (slow,) = plan(topo.format(k=4))
    for a, b in zip(full.hosts, slow.hosts, strict=True):
        assert b.egress_mbit == a.egress_mbit / 4 and b.ingress_mbit == a.ingress_mbit / 4
        assert b.cpu_quota == a.cpu_quota / 4 and b.delay_ms == a.delay_ms * 4
        assert b.egress_burst_kb == 16 and b.egress_queue_ms == a.egress_queue_ms * 4
    assert (full.cpu_period_us, slow.cpu_period_us) == (10_000, 40_000)
    assert (full.scale, slow.scale) == (1, 4)


def test_every_time_ratio_is_kept_by_a_scale_model():
    topo = "link_mbit = 100\ndelay_ms = 0.45\nscale = {k}"
    (full,), (slow,) = plan(topo.format(k=1)), plan(topo.format(k=3))
    a, b = full.hosts[0], slow.hosts[0]
    # Transfer time of a frame over delay: (1514 * 8 / rate) / delay
    assert (1514 * 8 / (b.egress_mbit * 1e3)) / b.delay_ms == pytest.approx(
        (1514 * 8 / (a.egress_mbit * 1e3)) / a.delay_ms)


def test_a_quota_below_the_kernels_minimum_runtime_per_period_is_refused():
    with pytest.raises(UserError, match=r"topology.cpu_quota: 0.1 core over a 5 ms period "
                                        r"is 0.5 ms per period.*at least 10\)"):
        plan("cpu_quota = 0.1\ncpu_period_ms = 5")
    with pytest.raises(UserError, match=r"topology.server.cpu_quota: 0.05 core"):
        plan("[topology.server]\ncpu_quota = 0.05")
    (layout,) = plan("cpu_quota = 0.1")  # 1 ms of a 10 ms period: accepted
    assert layout.cpu_period_us == 10_000


def test_a_scale_below_one_is_refused():
    with pytest.raises(UserError, match="topology.scale: must be >= 1"):
        plan("scale = 0.5")


def point(**kw) -> PointResult:
    base = dict(index=0, label="p", factors={}, config={}, clients=1, runs=1, steady_runs=1,
                verdict=None)
    return PointResult(**(base | kw))


def test_rescaling_multiplies_throughput_and_divides_times_by_k():
    i = StoredInterval("load", "p99", 0.99, 8.0, 6.0, 12.0, 0.95, 1000)
    p = point(throughput=500.0, throughput_std=10.0, response_ms=4.0, response_std=0.4,
              percentiles_ms={"p99": 8.0}, decomposition={"network": 3000.0},
              server_service_us=(400.0,), link_bound=linkbound.Bound(700.0, "server1 up"),
              ops={"get": measure.OpResult(500.0, 4.0, 2000)},
              intervals={"load": {"p99": i}})
    r = rescaled(p, 4)
    assert (r.throughput, r.throughput_std, r.response_ms, r.response_std) == (
        2000, 40, 1, 0.1)
    assert r.percentiles_ms == {"p99": 2.0} and r.decomposition == {"network": 750.0}
    assert r.server_service_us == (100.0,) and r.link_bound == linkbound.Bound(2800.0,
                                                                               "server1 up")
    assert r.ops["get"] == measure.OpResult(2000.0, 1.0, 2000)
    got = r.intervals["load"]["p99"]
    assert (got.estimate_ms, got.low_ms, got.high_ms, got.samples) == (2.0, 1.5, 3.0, 1000)
    assert r.scale == 4 and rescaled(p, 1) is p


def test_an_unmeasured_point_rescales_to_itself():
    r = rescaled(point(), 2)
    assert r.throughput is None and r.response_ms is None and r.scale == 2


def use(busy: float, hosts: dict[str, float], quotas: dict[str, float],
        emulator: float = 30.0) -> machine.MachineUse:
    return machine.MachineUse(2, busy, emulator, hosts, quotas)


def test_a_saturated_machine_with_no_host_at_its_quota_is_flagged_with_the_figures():
    k = machine.check(use(96.0, {"server1": 20.0, "load1": 15.0},
                          {"server1": 0.25, "load1": 0.25}, emulator=80.0))
    assert not k.passed and k.name == "machine" and k.statistic == pytest.approx(0.96)
    assert "machine 96% busy over 2 cores" in k.reason
    assert "delay line 80% of a core" in k.reason and "hosts 35% of a core" in k.reason
    assert "busiest server1 20% of its 25% quota" in k.reason
    assert math.isnan(k.p_value)


def test_a_host_at_its_quota_is_the_emulated_systems_own_limit():
    k = machine.check(use(95.0, {"server1": 24.0, "load1": 10.0},
                          {"server1": 0.25, "load1": 0.25}))
    assert k.passed and "at their quota: server1" in k.reason


def test_a_machine_with_room_passes_whatever_the_hosts_do():
    assert machine.check(use(70.0, {"server1": 5.0}, {"server1": 0.25})).passed
    # The limit is inclusive: 90% busy is saturated.
    assert not machine.check(use(90.0, {"server1": 5.0}, {"server1": 0.25})).passed


def test_hosts_without_quota_never_count_as_at_it():
    assert not machine.at_quota(180.0, 0.0)
    assert machine.at_quota(45.0, 0.5) and not machine.at_quota(44.0, 0.5)
    k = machine.check(use(99.0, {"load1": 150.0}, {"load1": 0.0}))
    assert not k.passed and "busiest load1 150% (no quota)" in k.reason


def test_steady_mean_keeps_the_steady_samples_or_all_of_a_short_run():
    samples = [(1.0, 10.0), (2.0, 20.0), (3.0, 90.0)]
    assert machine.steady_mean(samples, 1.5, 2.5) == 20.0
    assert machine.steady_mean(samples, 10, 20) == 40.0
    assert machine.steady_mean([], 0, 1) is None


def test_process_cpu_is_read_past_a_command_name_with_spaces_and_parentheses(tmp_path):
    (tmp_path / "42").mkdir()
    fields = ["S"] + ["0"] * 10 + ["250", "75"] + ["0"] * 30
    (tmp_path / "42" / "stat").write_text("42 (cachelab (x) y) " + " ".join(fields) + "\n")
    tick = os.sysconf("SC_CLK_TCK")
    assert process_usage(42, proc=str(tmp_path)) == (250 / tick, 75 / tick)


def test_process_cpu_of_this_process_grows_with_work():
    before = process_usage(os.getpid())
    end = time.process_time() + 0.05
    while time.process_time() < end:
        pass
    after = process_usage(os.getpid())
    assert sum(after) > sum(before)


def test_the_quota_and_its_period_are_written_for_cgroup_v2_and_v1(tmp_path):
    from cachelab.hosts import cgroups

    v2 = tmp_path / "v2"
    v2.mkdir()
    group = cgroups.CpuGroup("cachelab-t", quota=0.25, period_us=10_000,
                             hierarchies=cgroups.Hierarchies(v2, {}))
    assert (v2 / "cachelab-t" / "cpu.max").read_text() == "2500 10000"
    roots = {c: tmp_path / "v1" / c for c in ("cpu", "cpuacct", "cpuset")}
    for root in roots.values():
        root.mkdir(parents=True)
    (roots["cpuset"] / "cpuset.mems").write_text("0\n")
    (roots["cpuset"] / "cpuset.cpus").write_text("0-1\n")
    group = cgroups.CpuGroup("cachelab-t", quota=0.1, period_us=10_000,
                             hierarchies=cgroups.Hierarchies(None, roots))
    cpu = roots["cpu"] / "cachelab-t"
    assert (cpu / "cpu.cfs_period_us").read_text() == "10000"
    assert (cpu / "cpu.cfs_quota_us").read_text() == "1000"
    assert group.version == 1
    # Below the kernel's 1 ms per period: refused, and nothing left behind.
    with pytest.raises(UserError, match="below the kernel's minimum runtime"):
        cgroups.CpuGroup("cachelab-u", quota=0.05, period_us=10_000,
                         hierarchies=cgroups.Hierarchies(None, roots))
    assert not (roots["cpu"] / "cachelab-u").exists()


def test_a_groups_weight_follows_the_harness_nice_value(tmp_path):
    # A niced harness's hosts must yield to a measurement run's as niced tasks do; the
    # kernel weighs sibling groups by their weight, not by their tasks' nice values.
    from cachelab.hosts import cgroups

    assert cgroups.shares_of_nice(0) == 1024 and cgroups.shares_of_nice(19) == 15
    assert cgroups.shares_of_nice(-20) == 88761 and cgroups.shares_of_nice(40) == 15
    v2 = tmp_path / "v2"
    v2.mkdir()
    cgroups.CpuGroup("cachelab-n", nice=19, hierarchies=cgroups.Hierarchies(v2, {}))
    assert (v2 / "cachelab-n" / "cpu.weight.nice").read_text() == "19"
    cgroups.CpuGroup("cachelab-z", nice=0, hierarchies=cgroups.Hierarchies(v2, {}))
    assert not (v2 / "cachelab-z" / "cpu.weight.nice").exists()   # the default weight
    roots = {c: tmp_path / "v1" / c for c in ("cpu", "cpuacct", "cpuset")}
    for root in roots.values():
        root.mkdir(parents=True)
    (roots["cpuset"] / "cpuset.mems").write_text("0\n")
    (roots["cpuset"] / "cpuset.cpus").write_text("0-1\n")
    cgroups.CpuGroup("cachelab-n", nice=10, quota=0.5, period_us=10_000,
                     hierarchies=cgroups.Hierarchies(None, roots))
    assert (roots["cpu"] / "cachelab-n" / "cpu.shares").read_text() == "110"
    assert cgroups.CpuGroup("cachelab-d", hierarchies=cgroups.Hierarchies(v2, {})).nice \
        == os.getpriority(os.PRIO_PROCESS, 0)


def test_a_groups_usage_is_the_exact_runtime_split_as_the_ticks_split_it(tmp_path):
    """The tick-sampled user and system figures are biased under a short CFS period (a
    throttled loop read 0.62 s where it ran 0.31 s): the total is the kernel's exact
    runtime, and only the ratio comes from the ticks."""
    from cachelab.hosts import cgroups

    v2 = tmp_path / "v2"
    v2.mkdir()
    group = cgroups.CpuGroup("cachelab-t", hierarchies=cgroups.Hierarchies(v2, {}))
    (v2 / "cachelab-t" / "cpu.stat").write_text(
        "usage_usec 310000\nuser_usec 450000\nsystem_usec 150000\n")
    assert group.usage() == pytest.approx((0.2325, 0.0775))
    roots = {c: tmp_path / "v1" / c for c in ("cpu", "cpuacct", "cpuset")}
    for root in roots.values():
        root.mkdir(parents=True)
    (roots["cpuset"] / "cpuset.mems").write_text("0\n")
    (roots["cpuset"] / "cpuset.cpus").write_text("0-1\n")
    group = cgroups.CpuGroup("cachelab-t", hierarchies=cgroups.Hierarchies(None, roots))
    acct = roots["cpuacct"] / "cachelab-t"
    (acct / "cpuacct.usage").write_text("316000000\n")
    (acct / "cpuacct.usage_user").write_text("616000000\n")
    (acct / "cpuacct.usage_sys").write_text("0\n")
    assert group.usage() == pytest.approx((0.316, 0.0))
    # nothing sampled yet: the runtime counts as user time
    assert cgroups.split_total(0.5, 0, 0) == (0.5, 0.0)
