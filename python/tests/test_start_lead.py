"""The common start instant's lead: enough for every load thread to open its connections
over the emulated links' delay before the clocks start."""

import pytest

from cachelab.run import runner
from cachelab.spec import experiment as spec
from cachelab.spec import topology

DOC = """
name = "t"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[servers]
kind = "memcached"
[middleware]
count = 0
[load]
instances = 3
clients = 70
[topology]
kind = "netns"
scale = 30
[topology.load]
delay_ms = {delay}
"""


def config(delay: float):
    text = DOC.format(delay=delay) + '\n[sweep.factors]\n"load.threads" = [1]\n'
    return spec.parse(text).points[0].config


def test_without_delay_the_lead_is_the_fixed_part_and_one_per_instance():
    c = config(0)
    assert runner.start_lead_s(c, topology.plan(c)) == pytest.approx(0.5 + 0.1 * 3)


def test_a_delayed_link_adds_two_round_trips_per_connection_of_a_thread():
    c = config(0.25)   # 7.5 ms one-way at scale 30: a 15 ms round trip
    assert runner.start_lead_s(c, topology.plan(c)) == pytest.approx(0.8 + 2 * 0.015 * 70)


def test_on_this_host_alone_there_are_no_links_to_wait_for():
    c = config(0)
    assert runner.start_lead_s(c, None) == pytest.approx(0.8)
