"""The CPU sampler's arithmetic and the host metadata parsers, on fixtures."""

import time

import pytest

from cachelab.hosts import hostinfo
from cachelab.readers import cpu


def counters(text: str) -> cpu.Counters:
    """Counters from lines `NAME user nice system idle ...` (jiffies here; psutil gives
    seconds, and only the ratios matter), missing states read as 0."""
    out = {}
    for line in text.strip().splitlines():
        name, *values = line.split()
        numbers = [float(v) for v in values]
        out[name] = tuple(numbers + [0.0] * (len(cpu.COLUMNS) - len(numbers)))
    return out


BEFORE = """all  1000 10 500 8000 100 5 45 0 0 0
0 600 10 250 4000 50 5 25 0 0 0
1 400 0 250 4000 50 0 20 0 0 0
"""
# One second later, 100 jiffies per CPU: cpu0 busy (60 usr, 30 sys, 10 softirq), cpu1 idle.
AFTER = """all  1060 10 530 8100 100 5 55 0 0 0
0 660 10 280 4000 50 5 35 0 0 0
1 400 0 250 4100 50 0 20 0 0 0
"""


def test_read_counters_gives_all_and_every_cpu_from_psutil_in_kernel_order():
    import psutil

    first = cpu.read_counters()
    assert set(first) == {"all", *(str(i) for i in range(psutil.cpu_count()))}
    assert all(len(v) == len(cpu.COLUMNS) for v in first.values())
    time.sleep(0.05)
    second = cpu.read_counters()
    assert sum(second["all"]) >= sum(first["all"]) > 0  # cumulative since boot
    assert sum(first["all"]) == pytest.approx(sum(sum(first[k]) for k in first if k != "all"),
                                              rel=0.01)


def test_utilisation_is_the_share_of_each_state_in_the_delta():
    samples = {s.cpu: s for s in cpu.utilisation(counters(BEFORE), counters(AFTER), t=1.0)}
    busy, idle, both = samples["0"], samples["1"], samples["all"]
    assert (busy.usr, busy.sys, busy.softirq, busy.idle) == (60.0, 30.0, 10.0, 0.0)
    assert idle.idle == 100.0 and idle.usr == 0.0
    assert (both.usr, both.sys, both.softirq, both.idle) == (30.0, 15.0, 5.0, 50.0)
    for s in samples.values():
        assert sum(getattr(s, k) for k in cpu.SHARES) == pytest.approx(100.0)
        assert s.t == 1.0


def test_guest_time_is_not_counted_twice():
    before = counters("all 100 0 0 100 0 0 0 0 0 0")
    after = counters("all 180 0 0 120 0 0 0 0 40 0")  # 80 user of which 40 guest
    (s,) = cpu.utilisation(before, after, t=1.0)
    assert s.usr == pytest.approx(100 * 40 / 60) and s.idle == pytest.approx(100 * 20 / 60)


def test_a_cpu_that_did_not_move_or_went_backwards_gives_no_sample():
    before = counters("0 10 0 0 10 0 0 0 0 0 0\n1 10 0 0 10 0 0 0 0 0 0")
    after = counters("0 10 0 0 10 0 0 0 0 0 0\n1 5 0 0 10 0 0 0 0 0 0")
    assert cpu.utilisation(before, after, t=1.0) == []


def test_the_sampler_thread_reads_the_counters_each_interval():
    readings = iter([counters(BEFORE)] + [counters(AFTER)] * 100)
    clock = iter([0.0, 1.0, 2.0, 3.0, 4.0] + [5.0] * 100).__next__
    sampler = cpu.Sampler(interval=0.05, read=lambda: next(readings), clock=clock)
    with sampler:
        deadline = time.monotonic() + 5
        while not sampler.samples and time.monotonic() < deadline:
            time.sleep(0.01)
    first = [s for s in sampler.samples if s.cpu == "0"][0]
    assert first.usr == 60.0 and first.t == 1.0


def test_host_metadata_parsers():
    assert hostinfo.cpu_model("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n") == "AMD EPYC 7B13"
    assert hostinfo.cpu_model("Hardware\t: BCM2835\n") == "BCM2835"
    assert hostinfo.cpu_model("") is None
    assert hostinfo.memcached_version("memcached 1.6.18\n") == "1.6.18"
    assert hostinfo.redis_version("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc") \
        == "7.0.15"
    assert hostinfo.tool_version("cachelab-proxy 0.1.0\n") == "0.1.0"


def test_collect_stamps_versions_kernel_and_cpu():
    info = hostinfo.collect()
    assert info.kernel and info.cpu_count and info.cpu_count >= 1
    assert set(info.versions) == {"cachelab", "cachelab-proxy", "cachelab-load",
                                  "memcached", "redis"}
    assert info.versions["memcached"]  # installed by `make deps`


def test_host_info_is_stored_as_the_plain_data_it_always_was():
    # The `run.host` column's JSON, as hostinfo.collect's dict wrote it before HostInfo:
    # the same keys, `hosts` only with remote hosts, and read back equal.
    row = {"hostname": "h", "kernel": "6.1.0", "os": "Linux-6.1.0", "cpu_model": "Xeon",
           "cpu_count": 2, "memory_mb": 3900, "loadavg": [0.5, 0.25, 0.0],
           "python": "3.11.7", "versions": {"cachelab": "0.1.0", "redis": None}}
    info = hostinfo.HostInfo.from_json(row)
    assert info.loadavg == (0.5, 0.25, 0.0) and info.hosts == {}
    assert info.to_json() == row
    remote = {**row, "hosts": {"server1": {"memcached": "memcached 1.6.18"}}}
    assert hostinfo.HostInfo.from_json(remote).to_json() == remote
    # a row from before a fact existed reads with that fact None
    assert hostinfo.HostInfo.from_json({"kernel": "x"}).cpu_model is None
    assert set(hostinfo.collect().to_json()) == set(row)
