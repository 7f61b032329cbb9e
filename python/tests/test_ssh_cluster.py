"""The `ssh` topology's hosts are set up, collected and asked for versions all at once, and
a host that cannot be set up leaves none of the others connected. SSH itself is replaced
by a host that takes a known time to connect (test_ssh_topology.py runs the real one)."""

from __future__ import annotations

import threading
import time

import pytest

from cachelab.errors import UserError
from cachelab.hosts import ssh
from cachelab.spec import experiment as spec
from cachelab.spec import topology

EXPERIMENT = """
name = "cluster"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "ssh"
[[topology.host]]
name = "db"
address = "10.0.0.1"
roles = ["server"]
[[topology.host]]
name = "mw"
address = "10.0.0.2"
roles = ["middleware"]
[[topology.host]]
name = "client"
address = "10.0.0.3"
roles = ["load"]
"""

#: How long the fake hosts take to connect, collect and report versions.
STEP_S = 0.4


class FakeHost:
    """SshHost's constructor signature and the methods the cluster calls, each taking
    STEP_S; a host named in `failing` cannot be connected."""

    failing: set[str] = set()
    live: set[str] = set()
    lock = threading.Lock()

    def __init__(self, name, address, **_):
        time.sleep(STEP_S)
        if name in self.failing:
            raise UserError(f"host {name}: cannot connect over SSH")
        self.name = name
        with self.lock:
            self.live.add(name)

    def bind_run(self, directory):
        self.directory = directory

    def collect(self, directory):
        time.sleep(STEP_S)
        (directory / f"{self.name}.out").write_text(self.name)

    def versions(self):
        time.sleep(STEP_S)
        return {"kernel": f"kernel of {self.name}"}

    def close(self):
        with self.lock:
            self.live.discard(self.name)


@pytest.fixture
def cluster(monkeypatch, tmp_path):
    monkeypatch.setattr(ssh, "SshHost", FakeHost)
    monkeypatch.setattr(FakeHost, "failing", set())
    monkeypatch.setattr(FakeHost, "live", set())
    config = spec.parse(EXPERIMENT).points[0].config
    return ssh.Cluster(config.topology, topology.plan(config), tmp_path)


def test_hosts_are_set_up_collected_and_asked_at_once(cluster, tmp_path):
    began = time.monotonic()
    with cluster:
        assert FakeHost.live == {"db", "mw", "client"}
        cluster.collect()
        versions = cluster.versions()
    took = time.monotonic() - began
    # three steps of STEP_S each whatever the number of hosts; one by one would be 9
    assert took < 6 * STEP_S, took
    assert list(versions) == ["db", "mw", "client"]  # the layout's order
    assert versions["mw"] == {"kernel": "kernel of mw"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["client.out", "db.out", "mw.out"]
    assert FakeHost.live == set()


def test_a_host_that_fails_leaves_no_other_connected(cluster):
    FakeHost.failing = {"mw"}
    with pytest.raises(UserError, match="host mw: cannot connect"), cluster:
        pass
    assert FakeHost.live == set()
