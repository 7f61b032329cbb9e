"""The `ssh` topology end to end, the way a user meets it: sshd (Debian's openssh-server)
runs inside network-namespace hosts this test creates, with keys it generates, and a
small experiment runs over SSH: servers, middleware and load generator each on its own
"remote" host, binaries copied there, files collected, versions recorded."""

from __future__ import annotations

import glob
import io
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import pytest

from cachelab.errors import UserError
from cachelab.hosts import netns
from cachelab.hosts.procs import wait_for_port
from cachelab.hosts.ssh import SshHost
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec
from cachelab.spec import topology

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("sshd") is None,
    reason="needs root (network namespaces) and sshd (make deps installs openssh-server)")

HOSTS = """
name = "hosts"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
[[topology.host]]
name = "db"
roles = ["server"]
[[topology.host]]
name = "mw"
roles = ["middleware"]
[[topology.host]]
name = "client"
roles = ["load"]
[sweep.factors]
"load.clients" = [1]
"""

SSHD_CONFIG = """Port 22
ListenAddress {address}
HostKey {dir}/host_key
PidFile {dir}/sshd-{name}.pid
AuthorizedKeysFile {dir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
LogLevel ERROR
"""


@pytest.fixture
def ssh_hosts(tmp_path):
    """Three netns hosts, each running its own sshd; yields (addresses, private key)."""
    keys = Path(tempfile.mkdtemp(prefix="cachelab-ssh-test-"))
    try:
        for name in ("host_key", "client_key"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                            str(keys / name)], check=True)
        shutil.copy(keys / "client_key.pub", keys / "authorized_keys")
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege-separation directory
        layout = topology.plan(spec.parse(HOSTS).points[0].config)
        with netns.DataCentre(layout, log_dir=tmp_path) as centre:
            for name, host in centre.hosts.items():
                config = keys / f"sshd-{name}.conf"
                config.write_text(SSHD_CONFIG.format(address=host.address, dir=keys,
                                                     name=name))
                host.spawn([shutil.which("sshd"), "-D", "-e", "-f", str(config)],
                           tmp_path / f"sshd-{name}.out")
            for name, host in centre.hosts.items():
                assert wait_for_port(host.address, 22), (tmp_path / f"sshd-{name}.out"
                                                         ).read_text()
            yield {n: h.address for n, h in centre.hosts.items()}, keys / "client_key"
    finally:
        shutil.rmtree(keys, ignore_errors=True)


EXPERIMENT = """
name = "over-ssh"
repetitions = 1
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "ssh"
user = "root"
key = "{key}"
copy_binaries = true
strict_host_keys = false
[[topology.host]]
name = "db"
roles = ["server"]
address = "{db}"
[[topology.host]]
name = "mw"
roles = ["middleware"]
address = "{mw}"
[[topology.host]]
name = "client"
roles = ["load"]
address = "{client}"
[servers]
count = 2
memory_mb = 64
[middleware]
workers = 4
[workload]
ratio = "1:1"
data_size = 512
key_maximum = 500
[sweep.factors]
"load.clients" = [2]
"""


def test_an_experiment_runs_over_ssh_on_remote_hosts(ssh_hosts, tmp_path):
    addresses, key = ssh_hosts
    exp = spec.parse(EXPERIMENT.format(key=key, **addresses))
    out = tmp_path / "out"
    outcome = run_experiment(exp, out, progress=Progress(io.StringIO()))
    assert outcome.runs_done == 1
    with sqlite3.connect(out / "results.db") as db:
        throughput, misses, errors, host = db.execute(
            "SELECT throughput, misses, errors, host FROM run").fetchone()
        hosts = dict(db.execute("SELECT host, address FROM run_host"))
        rtt = db.execute("SELECT count(*), min(rtt_p50_us) FROM link").fetchone()
        names = {r[0] for r in db.execute("SELECT name FROM artifact")}
    assert throughput > 0 and misses == 0 and errors == 0
    assert hosts == addresses
    assert rtt[0] == 2 and rtt[1] > 0  # client -> mw, mw -> db
    versions = json.loads(host)["hosts"]
    assert versions["db"]["memcached"].startswith("memcached 1.")
    assert versions["mw"]["cachelab-proxy"].startswith("cachelab-proxy")
    # files written on the remote hosts came back and were stored
    assert {"load-0.json", "middleware-0.stats.jsonl", "server-0.log"} <= names
    # nothing of this harness is left on the hosts
    assert not glob.glob(f"/tmp/cachelab-ssh-*-{os.getpid()}-*")


def test_an_unreachable_host_is_one_clear_error(ssh_hosts):
    addresses, key = ssh_hosts
    with pytest.raises(UserError, match=r"host nowhere: cannot connect over SSH to "
                                         r"root@198\.1[89]\."):
        SshHost("nowhere", addresses["db"].rsplit(".", 1)[0] + ".250", user="root",
                key=str(key), strict_host_keys=False)


def test_a_missing_binary_names_the_host_and_the_fix(ssh_hosts):
    addresses, key = ssh_hosts
    host = SshHost("db", addresses["db"], user="root", key=str(key), strict_host_keys=False)
    try:
        with pytest.raises(UserError, match="host db: cachelab-proxy not found; install it "
                                            "or set topology.copy_binaries = true"):
            host.resolve("/nonexistent/cachelab-proxy")
    finally:
        host.close()
