"""`cachelab capacity --server` against a real memcached: the search runs, the answer is
printed in one line, and every trial is written to capacity.json with a plot."""

import json

from cachelab import cli
from cachelab.hosts.binaries import find_binary


def test_capacity_of_a_running_memcached(memcached, tmp_path, capsys):
    find_binary("cachelab-load")
    code = cli.main(["capacity", "--server", memcached.address, "--out", str(tmp_path),
                     "--trial-s", "0.5", "--repetitions", "1", "--start-rate", "2000",
                     "--max-rate", "8000", "--tolerance", "0.5", "--target-ms", "50",
                     "--ratio", "0:1"])
    assert code == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1].startswith("capacity: ")
    doc = json.loads((tmp_path / "capacity.json").read_text())
    assert doc["schema"] == "cachelab-capacity/1" and doc["percentile"] == 99
    rates = [t["rate"] for t in doc["trials"]]
    judged = {j["rate"]: j for j in doc["judgements"]}
    assert rates[0] == 2000 and set(rates) == set(judged)
    assert all(t["trial_s"] >= 0.5 for t in doc["trials"])
    # Whatever this shared machine allowed, the answer is the best passing rate, and the
    # search grew the rate while rates passed (a 50 ms target: only a load generator that
    # falls behind, a void rate, stops it before the maximum).
    passed = [r for r, j in judged.items() if j["passed"]]
    assert doc["capacity"] == (max(passed) if passed else None)
    for j in judged.values():
        assert j["passed"] or j["void"] or j["latency_ms"] > 50 or "answered" in j["reason"]
    if not any(j["void"] for j in judged.values()):
        assert doc["capacity"] == 8000 and "maximum" in doc["reason"]
    assert (tmp_path / "capacity.png").stat().st_size > 0


def test_capacity_needs_exactly_one_target(capsys):
    assert cli.main(["capacity"]) == 1
    assert "give an experiment file or --server" in capsys.readouterr().err


CAPACITY_EXPERIMENT = """
name = "cap"
order = "interleaved"
repetitions = 2
run_time_s = 2
warmup_s = 0.5
cooldown_s = 0.5
qos_target_ms = 50
[validation]
cv_threshold = 10
max_repetitions = 2
[capacity]
trial_s = 0.5
trial_warmup_s = 0.25
trial_repetitions = 1
start_rate = 1000
max_rate = 2000
[servers]
memory_mb = 64
[middleware]
count = 0
[load]
mode = "capacity"
clients = 4
[workload]
ratio = "1:10"
data_size = 64
key_maximum = 500
[[sweep.points]]
"load.threads" = 1
"""


def test_a_capacity_experiment_stores_its_trials_and_reports_them(tmp_path, capsys):
    import sqlite3

    find_binary("cachelab-load")
    (tmp_path / "cap.toml").write_text(CAPACITY_EXPERIMENT)
    assert cli.main(["capacity", str(tmp_path / "cap.toml"), "--out",
                     str(tmp_path / "out")]) == 0
    with sqlite3.connect(tmp_path / "out" / "results.db") as db:
        answers = db.execute("SELECT capacity, reason FROM capacity_answer").fetchall()
        trials = db.execute("SELECT count(*) FROM capacity_trial").fetchone()[0]
        runs = db.execute("SELECT throughput FROM run ORDER BY id").fetchall()
    assert len(answers) == 2 and trials >= 2
    # each run's throughput is its search's answer
    assert [r[0] for r in runs] == [a[0] or 0.0 for a in answers]
    html = (tmp_path / "out" / "report.html").read_text()
    assert "Capacity under the latency target" in html
    assert "Run order: interleaved" in html
    assert '<figure id="fig-capacity-1">' in html and '<figure id="fig-timeline">' in html


def test_a_capacity_file_must_be_in_capacity_mode(tmp_path, capsys):
    (tmp_path / "x.toml").write_text(CAPACITY_EXPERIMENT.replace('mode = "capacity"', ""))
    assert cli.main(["capacity", str(tmp_path / "x.toml")]) == 1
    assert 'set load.mode = "capacity"' in capsys.readouterr().err
