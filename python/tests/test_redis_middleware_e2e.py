"""Redis servers behind the middleware, end to end: a tiny experiment against real
redis-server on loopback, with cachelab-proxy in front speaking RESP (`--protocol redis`)
and cachelab-load sending SET, GET and MGET to it. The runs are stored without misses or
errors, the proxy's stats file has every stage for both operation types (SET, and MGET as
the multi-GET, split over both servers), and the report decomposes the response time and
models the middleware as it does for memcached."""

from __future__ import annotations

import io
import sqlite3

from cachelab import store
from cachelab.commands import run as run_cmd
from cachelab.hosts.binaries import find_binary
from cachelab.readers import proxy_stats
from cachelab.report import sections
from cachelab.report.data import STAGES
from cachelab.run import runner
from cachelab.run.progress import Progress
from cachelab.store import Store

TINY = """
name = "tiny-redis"
description = "two Redis servers behind one middleware, sharded MGET, two loads"
repetitions = 1
run_time_s = 2
warmup_s = 0.5
cooldown_s = 0
[validation]
cv_threshold = 10   # stability is the machine's to say; the bound is tested elsewhere
max_repetitions = 1
[servers]
kind = "redis"
count = 2
memory_mb = 64
[middleware]
workers = 2
sharded = true
[workload]
ratio = "1:4"
multiget_keys = 3
data_size = 100
key_maximum = 300
[sweep.factors]
"load.clients" = [1, 3]
"""


def test_a_tiny_redis_experiment_through_the_middleware(proxy_binary, tmp_path):
    find_binary("cachelab-load")
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "out"
    outcome, page = run_cmd.run(path, out, progress=Progress(io.StringIO()))
    assert outcome.runs_done == 2 and outcome.unstable == ()
    with Store.open_existing(out) as s:
        exp = s.require_experiment()
        runs = [run for rs in s.runs_by_point(exp.id).values() for run in rs]
        assert len(runs) == 2
        for run in runs:
            assert run.throughput > 0 and run.hits > 0
            assert run.misses == 0 and run.errors == 0  # populated; every MGET routed
            proxy_cmd = s.artifact(run.id, "middleware-0.cmdline").decode()
            assert "--protocol redis" in proxy_cmd and " -s" in proxy_cmd
            assert "redis-server" in s.artifact(run.id, "server-0.cmdline").decode()
        sec = sections.build(s)
    # The stats file, as the proxy wrote it for the run with 3 clients.
    stats = proxy_stats.load(runner.run_dir(out, 1, 1) / "middleware-0.stats.jsonl")
    rows = {r.op: r for r in proxy_stats.stage_rows(stats.summary.ops)}
    assert set(rows) == {"set", "multiget"}  # every GET is an MGET of 3 keys
    for r in rows.values():
        assert r.count > 0 and r.errors == 0 and r.misses == 0
        assert 0 < r.server_service < r.response and r.decode > 0
        assert r.worker_processing > 0 and r.queue_wait >= 0
    db = sqlite3.connect(out / store.FILENAME)
    # sharded MGETs of 3 keys over 2 servers: both servers serve every one
    servers = db.execute("SELECT DISTINCT server FROM mw_server WHERE op = 'multiget'")
    assert sorted(r[0] for r in servers) == [0, 1]
    keys = db.execute("SELECT min(keys_mean), max(keys_mean) FROM mw_op WHERE op = 'multiget'")
    assert tuple(keys.fetchone()) == (3.0, 3.0)
    db.close()
    # The report treats it as for memcached: a decomposition per point, M/M/1 and M/M/m
    # beside each, and the network of queues over the sweep of clients.
    for p in sec.data.points:
        assert p.decomposition is not None and set(p.decomposition) == set(STAGES)
        assert p.decomposition["server"] > 0 and p.decomposition["worker"] > 0
    assert len(sec.queueing) == 2 and {q.mmm.model for q in sec.queueing} == {"M/M/m"}
    assert len(sec.mva) == 1, sec.mva_note
    html = page.read_text()
    assert "redis" in html and '<figure id="fig-decomposition">' in html

