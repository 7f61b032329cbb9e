"""Pure parts of the host topologies: placement, the link bound, TBF settings, cgroup
detection and per-host CPU shares."""

from pathlib import Path

import pytest

from cachelab.analysis import linkbound
from cachelab.hosts import cgroups
from cachelab.hosts.netns import tbf_args
from cachelab.readers.cpu import core_percent
from cachelab.spec import experiment as spec
from cachelab.spec import topology

BASE = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
link_mbit = 100
delay_ms = 0.45
"""


def config(extra: str, factors: str = '"load.clients" = [1]'):
    return spec.parse(BASE + extra + "\n[sweep.factors]\n" + factors).points[0].config


def test_without_hosts_every_instance_gets_a_host_of_its_own():
    c = config("[servers]\ncount = 3\n[middleware]\ncount = 2\n[load]\ninstances = 3\n")
    layout = topology.plan(c)
    assert [h.name for h in layout.hosts] == ["server1", "server2", "server3", "middleware1",
                                              "middleware2", "load1", "load2", "load3"]
    assert all(h.egress_mbit == h.ingress_mbit == 100 and h.delay_ms == 0.45
               for h in layout.hosts)
    assert layout.host("load", 2).name == "load3"
    # load i talks to middleware i % 2; each middleware to every server
    assert layout.pairs() == [("load1", "middleware1"), ("load2", "middleware2"),
                              ("load3", "middleware1")] + [
        (f"middleware{m}", f"server{s}") for m in (1, 2) for s in (1, 2, 3)]


def test_explicit_hosts_take_instances_round_robin_and_override_the_defaults():
    c = config('[servers]\ncount = 3\n[[topology.host]]\nname = "a"\nroles = ["server"]\n'
               'link_mbit = 50\n[[topology.host]]\nname = "b"\nroles = ["server", "load"]\n'
               '[[topology.host]]\nname = "c"\nroles = ["middleware"]\ncpu_quota = 0.5\n')
    layout = topology.plan(c)
    assert [layout.host("server", i).name for i in range(3)] == ["a", "b", "a"]
    assert layout.host("load", 0).name == "b" and layout.host("middleware", 0).name == "c"
    a, b, c_ = layout.hosts
    assert (a.egress_mbit, b.ingress_mbit, c_.cpu_quota, a.cpu_quota) == (50, 100, 0.5, 0)


def test_round_trip_is_twice_the_sum_of_both_delays():
    a = topology.PlannedHost("a", ("load",), 0, 0, 0.45, 0, None)
    b = topology.PlannedHost("b", ("server",), 0, 0, 0.2, 0, None)
    assert topology.round_trip_ms(a, b) == pytest.approx(1.3)


def test_addresses_stay_inside_the_benchmarking_range():
    assert topology.address(0, 0) == "198.18.0.2"
    assert topology.address(511, 249) == "198.19.255.251"
    assert topology.controller_address(300) == "198.19.44.1"


def test_a_4k_read_only_load_is_capped_by_the_servers_upload():
    c = config("[servers]\ncount = 1\n[middleware]\ncount = 0\n"
               '[workload]\nratio = "0:1"\ndata_size = 4096\n')
    layout = topology.plan(c)
    found = linkbound.bound(c, layout, 11, linkbound.configured_rates(layout))
    # reply: "VALUE <11-byte key> 0 4096\r\n" + 4096 + "\r\n" + "END\r\n" = 4129 bytes in
    # three segments of 66 header bytes: 4327 bytes on the wire per GET
    assert found.limit in ("server1 up", "load1 down")  # the same bytes cross both links
    assert found.ops_per_s == pytest.approx(100e6 / 8 / 4327)
    two = config("[servers]\ncount = 2\n[middleware]\ncount = 0\n"
                 '[workload]\nratio = "0:1"\ndata_size = 4096\n')
    layout2 = topology.plan(two)
    assert linkbound.bound(two, layout2, 11, linkbound.configured_rates(layout2)
                           ).ops_per_s == pytest.approx(2 * found.ops_per_s)


def test_writes_through_a_middleware_are_capped_by_its_upload_to_every_server():
    c = config('[servers]\ncount = 3\n[workload]\nratio = "1:0"\ndata_size = 4096\n')
    layout = topology.plan(c)
    found = linkbound.bound(c, layout, 11, linkbound.configured_rates(layout))
    assert found.limit == "middleware1 up"
    set_wire = linkbound.wire(4 + 11 + 5 + 4 + 2 + 4096 + 2)
    assert found.ops_per_s == pytest.approx(100e6 / 8 / (8 + 66 + 3 * set_wire))


def test_redis_messages_are_resp_arrays_of_bulk_strings():
    one = config('[servers]\nkind = "redis"\n[workload]\ndata_size = 4096\n')
    # "*2\r\n$3\r\nGET\r\n$11\r\n<key>\r\n" = 4 + 9 + 18; "$4096\r\n<data>\r\n";
    # "*3\r\n$3\r\nSET\r\n$11\r\n<key>\r\n$4096\r\n<data>\r\n"; "+OK\r\n"
    assert linkbound.message_sizes(one, 11) == (31, 4105, 4136, 5)
    three = config('[servers]\nkind = "redis"\n[workload]\ndata_size = 100\n'
                   "multiget_keys = 3\n")
    # "*4\r\n$4\r\nMGET\r\n" + 3 x 18; "*3\r\n" + 3 x "$100\r\n<data>\r\n"
    assert linkbound.message_sizes(three, 11)[:2] == (4 + 10 + 3 * 18, 4 + 3 * 108)


def test_redis_writes_through_a_middleware_are_capped_by_its_upload_to_every_server():
    c = config('[servers]\ncount = 3\nkind = "redis"\n'
               '[workload]\nratio = "1:0"\ndata_size = 4096\n')
    layout = topology.plan(c)
    found = linkbound.bound(c, layout, 11, linkbound.configured_rates(layout))
    assert found.limit == "middleware1 up"
    assert found.ops_per_s == pytest.approx(100e6 / 8 / (5 + 66 + 3 * (4136 + 3 * 66)))


def test_nothing_shaped_means_no_bound():
    c = spec.parse(BASE.replace("link_mbit = 100", "link_mbit = 0")
                   + '[sweep.factors]\n"load.clients" = [1]').points[0].config
    layout = topology.plan(c)
    assert linkbound.bound(c, layout, 11, linkbound.configured_rates(layout)) is None


def test_tbf_bucket_holds_a_gso_packet_and_two_milliseconds():
    args = tbf_args(100)
    assert args[:3] == ["tbf", "rate", "100mbit"]
    assert int(args[4]) == 65536 + 1514
    assert int(tbf_args(1000)[4]) == 250000


MOUNTS_V1 = """cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/cpuset cgroup rw,relatime,cpuset 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0
"""


def test_v1_is_used_when_the_v2_mount_has_no_cpu_controller():
    h = cgroups.parse_mounts(MOUNTS_V1, read=lambda p: "memory pids\n")
    assert h.version == 1 and h.v2 is None
    assert h.v1["cpuacct"] == Path("/sys/fs/cgroup/cpuacct")


def test_v2_is_used_when_it_has_the_cpu_controller():
    h = cgroups.parse_mounts("cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n",
                             read=lambda p: "cpuset cpu io memory\n")
    assert h.version == 2 and h.v2 == Path("/sys/fs/cgroup")
    assert cgroups.parse_mounts("", read=lambda p: "").version is None


def test_combined_v1_mounts_count_for_each_controller():
    h = cgroups.parse_mounts("cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n"
                             "cgroup /sys/fs/cgroup/cpuset cgroup rw,cpuset 0 0\n")
    assert h.version == 1 and h.v1["cpu"] == h.v1["cpuacct"]


def test_core_percent_is_cpu_seconds_per_second():
    assert core_percent((1.0, 0.5), (1.5, 1.0), 0.5) == (100.0, 100.0)
    assert core_percent((1.0, 0.5), (1.0, 0.5), 0.0) == (0.0, 0.0)
