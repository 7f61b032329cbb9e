"""The stats file's contract: the Rust writer is held to `stats-file.golden.jsonl`
(crates/cachelab-proxy/src/stats_file.rs); here the same golden file is checked against
the JSON Schema with a real validator and read with the harness's reader."""

import json
import typing
from pathlib import Path

import jsonschema
import pytest

from cachelab.errors import UserError
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
    assert stats.header.workers == 2
    assert stats.header.pools[0].mode == "replicate"
    assert len(stats.windows) == 1 and len(stats.worker_windows) == 2
    assert [w.worker for w in stats.worker_windows] == [0, 1]
    assert stats.summary is not None and stats.summary.arrivals == 3
    rows = {r.op: r for r in proxy_stats.stage_rows(stats.windows[0].ops)}
    assert rows["get"].count == 2 and rows["get"].hits == 1 and rows["get"].misses == 1
    assert rows["set"].p99 == 1220
    # The decomposition adds up: response = decode + queue + server + worker.
    for r in rows.values():
        total = r.decode + r.queue_wait + r.server_service + r.worker_processing
        assert total == pytest.approx(r.response)
    merged = stats.worker_windows[0].queue_len.merge(stats.worker_windows[1].queue_len)
    assert merged == stats.windows[0].queue_len


#: The records the reader makes of each definition of the schema, and the properties they
#: leave out: the line's kind (`type`, `scope`) picks the record, and a total window's
#: `worker` is always null.
RECORDS = [
    (proxy_stats.Welford, "welford", set()),
    (proxy_stats.Percentiles, "percentiles", set()),
    (proxy_stats.OpStats, "op", set()),
    (proxy_stats.Pool, "pool", set()),
    (proxy_stats.Start, "start", {"type"}),
    (proxy_stats.WorkerWindow, "worker_window", {"type", "scope"}),
    (proxy_stats.TotalWindow, "total_window", {"type", "scope", "worker"}),
    (proxy_stats.Summary, "summary", {"type"}),
]


@pytest.mark.parametrize(("record", "definition", "left_out"), RECORDS,
                         ids=[d for _, d, _ in RECORDS])
def test_each_record_has_the_schemas_fields_and_types(record, definition, left_out):
    schema = json.loads((SCHEMA_DIR / "stats-file.schema.json").read_text())
    props = schema["$defs"][definition]["properties"]
    hints = typing.get_type_hints(record)
    assert set(hints) == set(props) - left_out
    assert set(schema["$defs"][definition]["required"]) >= set(hints)  # never absent
    kinds = {"integer": int, "number": float, "string": str, "boolean": bool}
    for name, hint in hints.items():
        prop = props[name]
        if "$ref" in prop:  # another definition: the record made of it
            ref = prop["$ref"].rsplit("/", 1)[1]
            want = {d: r for r, d, _ in RECORDS}.get(ref, dict)
            assert hint is want or typing.get_origin(hint) is want, name
        elif prop.get("type") == "array":
            assert typing.get_origin(hint) is tuple, name
        elif "enum" in prop or "const" in prop:
            assert hint in (str, int), name
        else:
            assert hint is kinds[prop["type"]], name


def test_a_line_missing_a_field_is_one_line_naming_it(tmp_path):
    lines = GOLDEN.read_text().splitlines()
    window = json.loads(lines[1])
    del window["ops"]["get"]["rt_percentiles_us"]["p99"]
    path = tmp_path / "stats.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(window), *lines[2:]]) + "\n")
    with pytest.raises(UserError) as info:
        proxy_stats.load(path)
    assert str(info.value) == f"{path}:2: window.ops.get.rt_percentiles_us: no field 'p99'"
    window["queue_len"]["count"] = "2"
    path.write_text("\n".join([lines[0], json.dumps(window)]) + "\n")
    with pytest.raises(UserError, match=r":2: window.queue_len.count: expected int, got '2'"):
        proxy_stats.load(path)


def test_a_file_from_before_loops_reads_as_one_loop(tmp_path):
    lines = GOLDEN.read_text().splitlines()
    start = json.loads(lines[0])
    assert start["loops"] == 1
    start["loops"] = 3
    path = tmp_path / "stats.jsonl"
    path.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    assert proxy_stats.load(path).header.loops == 3
    del start["loops"]
    path.write_text("\n".join([json.dumps(start), *lines[1:]]) + "\n")
    assert proxy_stats.load(path).header.loops == 1
