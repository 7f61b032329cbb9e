"""`load.shard`: the "direct" baseline of a pool without a middleware. The spec's rules,
the load generator's command line, and a run against three real memcached servers in
which one load generator places every key on its server as twemproxy would."""

import io
import json

import pytest
from test_spec import MINIMAL, parse_error

from cachelab.readers import loadgen
from cachelab.run.progress import Progress
from cachelab.spec import experiment as spec

DIRECT = """
name = "direct"
description = "three servers, sharded by the load generator"
repetitions = 1
run_time_s = 2
warmup_s = 0.5
cooldown_s = 0
[validation]
cv_threshold = 10   # stability is the machine's to say; the bound is tested elsewhere
max_repetitions = 1
[servers]
count = 3
memory_mb = 64
[middleware]
count = 0
[load]
shard = true
clients = 2
[workload]
ratio = "1:4"
data_size = 50
key_maximum = 10000
"""


def test_a_sharded_pool_is_one_target_for_one_load_generator():
    c = spec.parse(DIRECT).points[0].config
    assert (c.targets, c.instances) == (1, 1)
    plain = spec.parse(DIRECT.replace("shard = true", "shard = false")).points[0].config
    assert (plain.targets, plain.instances) == (3, 3)


@pytest.mark.parametrize("extra, expected", [
    ("[load]\nshard = true\n", "load.shard: only with middleware.count = 0"),
    ("[middleware]\ncount = 0\n[load]\nshard = true\n[workload]\nmultiget_keys = 4\n",
     "load.shard: not with workload.multiget_keys > 1"),
])
def test_sharding_where_it_cannot_hold_is_refused_in_one_line(extra, expected):
    assert expected in parse_error(MINIMAL + extra)


def test_the_load_generator_is_given_every_server_of_the_pool():
    pool = loadgen.Transport(shard=("127.0.0.1:11311", "/tmp/cachelab-sock/server-1.sock"))
    assert pool.argv("ignored", 1) == [
        "--shard", "127.0.0.1:11311,/tmp/cachelab-sock/server-1.sock"]
    assert loadgen.Transport().argv("h", 2) == ["--server", "h", "--port", "2"]


def test_a_direct_run_spreads_the_keys_over_every_server(proxy_binary, tmp_path):
    from cachelab.commands import run as run_cmd

    path = tmp_path / "direct.toml"
    path.write_text(DIRECT)
    out = tmp_path / "out"
    outcome, _ = run_cmd.run(path, out, progress=Progress(io.StringIO()), report=False)
    assert outcome.runs_done == 1
    (report_path,) = sorted(out.glob("runs/*/load-0.json"))
    report = json.loads(report_path.read_text())
    shard = report["configuration"]["shard"]
    assert len(shard["servers"]) == 3
    assert (shard["hash"], shard["distribution"]) == ("fnv1a_64", "ketama")
    assert shard["names"] == shard["servers"], "named host:port as the middleware names them"
    sent = [s["sent"] for s in report["servers"]]
    # fnv1a_64 (its low 32 bits on the ring) moves a key by about 435^k for a change
    # in its k-th last byte, so keys that differ only in their last three digits land
    # close together: with key-0..key-300 every key fell on one server in some runs,
    # the ring's points depending on the servers' free ports. From the fourth digit on
    # the keys spread over the ring, and every server gets a share (three runs: 21-32k
    # requests each). twemproxy places them the same way
    # (crates/cachelab-load/tests/shard.rs holds the placement to nutcracker's).
    assert all(n > 0 for n in sent), sent
    assert sum(sent) == report["totals"]["sent"]
    assert report["summary"]["total"]["misses"] == 0 and report["totals"]["errors"] == 0
