"""`cachelab capacity --server` against a real memcached: the search runs, the answer is
printed in one line, and every trial is written to capacity.json with a plot."""

import json

from cachelab import cli
from cachelab.binaries import find_binary


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
