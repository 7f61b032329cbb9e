"""The exported point means and per-operation tables, from a small store built here: factor
columns, each operation type's own throughput, and percentiles of the merged HDR histograms
of every load instance (not a mean of the instances' percentiles)."""

import copy
import csv
import io
import json
from pathlib import Path

import pytest
from hdrh.histogram import HdrHistogram

from cachelab import store
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen
from cachelab.report import export
from cachelab.run import validate
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

DATA = Path(__file__).parent / "data"
EXPERIMENT = """
name = "export"
order = "sweep"
repetitions = 1
run_time_s = 3
warmup_s = 1
cooldown_s = 0.5
[workload]
ratio = "1:3"
multiget_keys = 3
[sweep.factors]
"load.clients" = [1, 2]
"""


def histogram(value_us: int, count: int) -> str:
    h = HdrHistogram(1, 60_000_000, 3)
    h.record_value(value_us, count)
    return h.encode().decode()


def instance(latency_us: int, sets_per_s: float, multigets_per_s: float) -> loadgen.Report:
    """One instance's report: 1,000 multi-GETs and 1,000 SETs, every one `latency_us`."""
    doc = copy.deepcopy(json.loads((DATA / "load-report.json").read_text()))
    ms = latency_us / 1000
    lat = {k: ms for k in loadgen.LATENCY_FIELDS} | {"stddev": 0.0}
    for op, n, rate in (("set", 1000, sets_per_s), ("multiget", 1000, multigets_per_s),
                        ("get", 0, 0.0), ("total", 2000, sets_per_s + multigets_per_s)):
        doc["summary"][op] = {**doc["summary"][op], "ops": n, "ops_per_sec": rate,
                              "hits": 0, "misses": 0, "errors": 0,
                              "latency_ms": lat if n else dict.fromkeys(lat, 0.0)}
        doc["histograms"][op] = histogram(latency_us, n) if n else histogram(1, 0)
    return loadgen.parse(json.dumps(doc))


def execute(exp, point, repetition, directory):
    # Instance 0 answers in 100 µs, instance 1 in 1,000 µs: their p50s are 0.1 and 1.0 ms,
    # an ops-weighted mean of them 0.55 ms; the merged histograms' p50 is 0.1 ms (rank
    # 2,000 of 4,000) and its p90 1.0 ms.
    loads = (instance(100, 500.0, 1500.0), instance(1000, 100.0, 300.0))
    summary = validate.summarise(loads, run_time=3, warmup=1, cooldown=0.5)
    artifacts = {f"load-{i}.json": json.dumps(_doc(r)).encode() for i, r in enumerate(loads)}
    return store.RunRecord(point.index, repetition, 1.0, 4.0, summary,
                           HostInfo.from_json({}), loads, (), (), artifacts)


def _doc(r: loadgen.Report) -> dict:
    return {"histograms": r.histograms}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    directory = tmp_path_factory.mktemp("export")
    run_experiment(spec.parse(EXPERIMENT), directory, progress=Progress(io.StringIO()),
                   execute=execute)
    return directory


def read(directory: Path, name: str) -> list[dict[str, str]]:
    (path,) = export.write(directory, "csv", directory / "out", [name])
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_point_means_have_factor_columns_per_op_throughput_and_merged_percentiles(stored):
    rows = read(stored, "point_means")
    assert [r["load.clients"] for r in rows] == ["1", "2"]
    first = rows[0]
    assert float(first["throughput"]) == pytest.approx(2400.0)
    # The multi-GETs alone: 1,500 + 300, no SETs.
    assert float(first["multiget_throughput"]) == pytest.approx(1800.0)
    assert float(first["set_throughput"]) == pytest.approx(600.0)
    assert first["get_throughput"] == ""
    assert float(first["p50_ms"]) == pytest.approx(0.1, rel=0.01)
    assert float(first["p90_ms"]) == pytest.approx(1.0, rel=0.01)


def test_per_op_percentiles_come_from_the_merged_histograms(stored):
    rows = [r for r in read(stored, "per_op") if r["point"] == "0"]
    by_op = {r["op"]: r for r in rows}
    assert set(by_op) == {"set", "multiget"}
    multiget = by_op["multiget"]
    assert multiget["load.clients"] == "1"
    assert float(multiget["throughput"]) == pytest.approx(1800.0)
    assert float(multiget["p50_ms"]) == pytest.approx(0.1, rel=0.01)   # not 0.55
    assert float(multiget["p99_ms"]) == pytest.approx(1.0, rel=0.01)
    assert int(multiget["requests"]) == 2000
