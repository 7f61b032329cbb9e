"""`cachelab run`, `report` and `export` end to end against real memcached, the middleware
and the load generator: a tiny experiment fills the database, the report renders with its
images, the export reads back, and a killed runner resumes without redoing its runs."""

import csv
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time

import psutil
import pyarrow.parquet as pq
import pytest

from cachelab import store
from cachelab.cli import main
from cachelab.commands import export as export_cmd
from cachelab.commands import report as report_cmd
from cachelab.commands import run as run_cmd
from cachelab.run.progress import Progress

TINY = """
name = "tiny"
description = "two points, two repetitions"
repetitions = 2
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0
[validation]
cv_threshold = 0.5   # a loaded test machine is noisy; the bound is tested elsewhere
max_repetitions = 2
replace_unsteady = 0  # the run counts below are exact (replacement: test_store_validate)
[servers]
count = 2
memory_mb = 64
[middleware]
workers = 4
sharded = true
[workload]
ratio = "1:4"
multiget_keys = 3
data_size = 100
key_maximum = 300
[sweep.factors]
"load.clients" = [1, 3]
"""

BASELINE = """
name = "baseline"
repetitions = 1
run_time_s = 2
warmup_s = 0.5
cooldown_s = 0
[servers]
count = 2
memory_mb = 64
[middleware]
count = 0
[workload]
ratio = "0:1"
data_size = 50
key_maximum = 200
[sweep.factors]
"load.clients" = [1, 2]
"""


@pytest.fixture
def binaries(proxy_binary):
    from cachelab.hosts.binaries import find_binary

    return find_binary("cachelab-load")


def count(db, table):
    return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


@pytest.mark.parametrize(("body", "expected"), [
    ("colour = 1\n", "colour: unknown field"),
    ("[servers]\nthreads = \"two\"\n", "servers.threads: expected an integer"),
    ("[servers]\nkind = \"mongodb\"\n", "servers.kind: must be one of memcached, redis"),
    ("[sweep.factors]\n\"load.clients\" = []\n", "sweep.factors.load.clients: empty list"),
])
def test_a_mistake_in_the_file_is_one_line_and_exit_1(tmp_path, capsys, body, expected):
    path = tmp_path / "bad.toml"
    path.write_text('name = "bad"\nrun_time_s = 3\nwarmup_s = 1\ncooldown_s = 1\n' + body)
    assert main(["run", str(path), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected in err and "bad.toml" in err
    assert not (tmp_path / "out").exists()


def test_a_tiny_experiment_fills_the_database_and_renders(binaries, tmp_path):
    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    out = tmp_path / "out"
    outcome, page = run_cmd.run(path, out, progress=Progress(io.StringIO()))
    assert outcome.runs_done == 4
    # Stability is timing: on a loaded machine a tiny run may be marked unstable, and the
    # report must then say which (the bound itself is tested in test_store_validate).
    assert all(label.startswith("load.clients=") for label, _ in outcome.unstable)
    db = sqlite3.connect(out / store.FILENAME)
    db.row_factory = sqlite3.Row
    assert (count(db, "experiment"), count(db, "point"), count(db, "run")) == (1, 2, 4)
    runs = db.execute("SELECT * FROM run ORDER BY id").fetchall()
    # every point's two repetitions, in the experiment's (randomized) order
    assert sorted((r["point_id"], r["repetition"]) for r in runs) == [(1, 1), (1, 2), (2, 1),
                                                                       (2, 2)]
    for r in runs:
        assert r["throughput"] > 100 and 0 < r["p50_ms"] <= r["p99_ms"] <= r["max_ms"]
        assert r["hits"] > 0 and r["misses"] == 0 and r["errors"] == 0  # populated
        assert r["cv_within"] is not None
        assert '"memcached": "1.' in r["host"] and '"kernel"' in r["host"]
    assert count(db, "client_summary") == 4 * 4  # 1 instance x 4 op types per run
    assert count(db, "client_second") >= 4 * 3 * 3
    for table in ("mw_window", "mw_op", "mw_server", "mw_histogram"):
        assert count(db, table) >= 4, table
    # sharded multi-GETs of 3 keys over 2 servers: both servers serve every multi-GET
    servers = db.execute("SELECT DISTINCT server FROM mw_server WHERE op = 'multiget'")
    assert sorted(r[0] for r in servers) == [0, 1]
    keys = db.execute("SELECT min(keys_mean), max(keys_mean) FROM mw_op WHERE op = 'multiget'")
    assert tuple(keys.fetchone()) == (3.0, 3.0)
    assert db.execute("SELECT count(*) FROM cpu_sample WHERE cpu = 'all'").fetchone()[0] >= 8
    # every run's and point's percentiles carry intervals that hold their estimates
    assert count(db, "run_percentile") == 4 * 4 and count(db, "point_percentile") == 2 * 4
    for x in db.execute("SELECT * FROM run_percentile JOIN run ON run.id = run_id"):
        assert x["low_ms"] <= x["estimate_ms"] <= x["high_ms"] and x["samples"] > 100
        if x["name"] == "p99":  # the run's own p99 is the interval's estimate
            assert x["estimate_ms"] == x["p99_ms"]
    # each instance's clock, kernel stamps and CPU; a closed loop checks the client's CPU
    clocks = db.execute("SELECT DISTINCT role, latency_clock FROM client_instance")
    assert [tuple(r) for r in clocks] == [("load", "intended->kernel_rx")]
    assert count(db, "client_timing") == 4 * 5
    checks = db.execute("SELECT name, count(*) FROM run_check GROUP BY name").fetchall()
    assert [tuple(r) for r in checks] == [("client CPU", 4)]  # 2 steady s: too few for more
    names = {r[0] for r in db.execute("SELECT name FROM artifact WHERE run_id = 1")}
    assert {"load-0.json", "middleware-0.stats.jsonl", "middleware-0.log"} <= names

    html = page.read_text()
    assert "tiny" in html and "unfinished" not in html
    if outcome.unstable:
        assert "Points that stayed unstable" in html
    else:
        assert "Every point is stable" in html
    for image in ("throughput", "response-time", "percentiles", "decomposition",
                  "queue-length", "server-service", "cpu"):
        assert f'<figure id="fig-{image}">' in html  # inline: the page is one file
    assert 'src="data:image/svg+xml;base64,' in html and not (out / "report-images").exists()
    assert "memcached" in html and "Interactive response-time law" in html
    assert "order statistics" in html and "intended-&gt;kernel_rx" in html

    files = export_cmd.run(out, "csv")
    with open(out / "export" / "runs.csv", newline="") as f:
        exported = list(csv.DictReader(f))
    assert [float(r["throughput"]) for r in exported] == [r["throughput"] for r in runs]
    assert sorted(r["load.clients"] for r in exported) == ["1", "1", "3", "3"]
    with open(out / "export" / "cpu_sample.csv", newline="") as f:
        assert len(list(csv.reader(f))) - 1 == count(db, "cpu_sample")
    assert len(files) == 15
    export_cmd.run(out, "parquet", tmp_path / "pq")
    table = pq.read_table(tmp_path / "pq" / "client_second.parquet").to_pydict()
    assert len(table["ops"]) == count(db, "client_second")
    assert sum(table["ops"]) == db.execute("SELECT sum(ops) FROM client_second").fetchone()[0]
    assert main(["export", str(out), "--format", "xml"]) == 1


def _children_of(out):
    """Processes whose command line names a file in `out` (the load generators' JSON
    files, the middleware's stats file), or that hold one open (the servers, whose
    output goes to their logs there and whose command lines name no file)."""
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if p.pid == os.getpid():  # the test itself reads the results database
            continue
        try:
            if (any(str(out) in arg for arg in (p.info["cmdline"] or []))
                    or any(f.path.startswith(str(out)) for f in p.open_files())):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            pass
    return found


def test_a_killed_runner_resumes_without_redoing_finished_runs(binaries, tmp_path):
    path = tmp_path / "baseline.toml"
    path.write_text(BASELINE)
    out = tmp_path / "out"
    with open(tmp_path / "log", "w") as log:
        runner = subprocess.Popen([sys.executable, "-m", "cachelab.cli", "run", str(path),
                                   "--out", str(out), "--no-report"], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        done = 0
        while done < 1 and time.monotonic() < deadline and runner.poll() is None:
            time.sleep(0.1)
            if (out / store.FILENAME).exists():
                try:
                    with sqlite3.connect(out / store.FILENAME, timeout=5) as db:
                        done = count(db, "run")
                except sqlite3.OperationalError:
                    pass  # the schema is not created yet
        assert done == 1, (tmp_path / "log").read_text()
        runner.send_signal(signal.SIGKILL)
        runner.wait(10)
    finally:
        runner.kill()
    deadline = time.monotonic() + 10
    while _children_of(out) and time.monotonic() < deadline:
        time.sleep(0.1)  # the parent-death signal stops servers and load generators
    assert _children_of(out) == []

    with sqlite3.connect(out / store.FILENAME) as db:
        first = db.execute("SELECT id, started_at, throughput FROM run").fetchall()
    assert len(first) == 1
    page = report_cmd.run(out)  # the report of an unfinished experiment
    html = page.read_text()
    assert "unfinished" in html and "not run yet" in html
    assert '<figure id="fig-throughput">' in html
    report_cmd.run(out, image_files=True)  # PNG files beside the page, when asked
    assert (out / "report-images" / "throughput.png").read_bytes()[:4] == b"\x89PNG"
    assert "report-images/throughput.png" in page.read_text()

    assert main(["run", str(path), "--out", str(out), "--no-report"]) == 1  # needs --resume
    outcome, _ = run_cmd.run(path, out, resume=True, report=False,
                             progress=Progress(io.StringIO()))
    assert outcome.runs_done == 1
    with sqlite3.connect(out / store.FILENAME) as db:
        rows = db.execute("SELECT id, started_at, throughput, point_id, repetition FROM run "
                          "ORDER BY id").fetchall()
    assert [r[:3] for r in rows[:1]] == first
    assert sorted((r[3], r[4]) for r in rows) == [(1, 1), (2, 1)]
    with sqlite3.connect(out / store.FILENAME) as db:  # servers populated directly
        assert db.execute("SELECT sum(misses), min(hits) FROM run").fetchone()[0] == 0

    # The resumed experiment equals one run in one go: the same points and runs, the same
    # rows in every table that does not depend on timing, and rows for every run in the
    # tables sampled over time.
    whole = tmp_path / "whole"
    run_cmd.run(path, whole, report=False, progress=Progress(io.StringIO()))
    exact = ("experiment", "point", "run", "client_summary")
    sampled = ("client_second", "cpu_sample", "artifact")
    with sqlite3.connect(out / store.FILENAME) as a, sqlite3.connect(whole / store.FILENAME) as b:
        points = "SELECT id, label FROM point ORDER BY id"
        assert a.execute(points).fetchall() == b.execute(points).fetchall()
        for table in exact:
            assert count(a, table) == count(b, table), table
        for table in sampled:
            per_run = f"SELECT count(DISTINCT run_id) FROM {table}"
            assert a.execute(per_run).fetchone() == b.execute(per_run).fetchone() == (2,), table
