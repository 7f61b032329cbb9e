"""The stats file's contract: the Rust writer is held to `stats-file.golden.jsonl`
(crates/cachelab-proxy/src/stats_file.rs); here the same golden file is checked against
the JSON Schema with a real validator and read with the harness's reader."""

import json
from pathlib import Path

import jsonschema
import pytest

from cachelab.readers import proxy_stats

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "crates" / "cachelab-proxy" / "schema"
GOLDEN = SCHEMA_DIR / "stats-file.golden.jsonl"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads((SCHEMA_DIR / "stats-file.schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_every_golden_line_follows_the_schema(validator):
    lines = [json.loads(x) for x in GOLDEN.read_text().splitlines()]
    assert [x["type"] for x in lines] == ["start", "window", "window", "window", "summary"]
    for line in lines:
        errors = [e.message for e in validator.iter_errors(line)]
        assert errors == [], (line["type"], errors)


def test_the_schema_refuses_what_the_reader_would_misread(validator):
    summary = json.loads(GOLDEN.read_text().splitlines()[-1])
    assert not validator.is_valid({**summary, "extra": 1})
    broken = json.loads(json.dumps(summary))
    del broken["ops"]["get"]["rt_percentiles_us"]["p99"]
    assert not validator.is_valid(broken)


def test_the_reader_reads_the_golden_file():
    stats = proxy_stats.load(GOLDEN)
    assert stats.header["workers"] == 2
    assert stats.header["pools"][0]["mode"] == "replicate"
    assert len(stats.windows) == 1 and len(stats.worker_windows) == 2
    assert stats.summary is not None and stats.summary["arrivals"] == 3
    rows = {r.op: r for r in proxy_stats.stage_rows(stats.windows[0]["ops"])}
    assert rows["get"].count == 2 and rows["get"].hits == 1 and rows["get"].misses == 1
    assert rows["set"].p99 == 1220
    # The decomposition adds up: response = decode + queue + server + worker.
    for r in rows.values():
        total = r.decode + r.queue_wait + r.server_service + r.worker_processing
        assert total == pytest.approx(r.response)
    merged = proxy_stats.Welford.from_json(stats.worker_windows[0]["queue_len"]).merge(
        proxy_stats.Welford.from_json(stats.worker_windows[1]["queue_len"]))
    assert merged == proxy_stats.Welford.from_json(stats.windows[0]["queue_len"])
