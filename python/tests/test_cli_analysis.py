"""`cachelab factorial` and `cachelab model`: golden text, JSON shape and one-line errors.

Golden files live in tests/golden/ and are compared byte for byte. After a deliberate change
to the output, rewrite them with CACHELAB_UPDATE_GOLDEN=1 and review the diff.
"""

import json
import os
from pathlib import Path

import pytest

from cachelab.cli import main
from cachelab.commands import factorial as factorial_cmd
from cachelab.commands import model as model_cmd

HERE = Path(__file__).parent
DATA = HERE / "data"
EXAMPLES = HERE.parents[1] / "experiments" / "models"


def check_golden(name: str, text: str) -> None:
    path = HERE / "golden" / name
    if os.environ.get("CACHELAB_UPDATE_GOLDEN") == "1":
        path.write_text(text)
    assert text == path.read_text()


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("golden", "argv"), [
    ("factorial-jain.txt",
     ["factorial", str(DATA / "jain-memory-cache.csv"), "--response", "time"]),
    ("factorial-two-responses.txt",
     ["factorial", str(DATA / "two-responses.csv"), "--response", "mips", "--response",
      "watts"]),
    ("model-mm1.txt", ["model", "mm1", "--lam", "800", "--mu", "1000"]),
    ("model-mmm.txt", ["model", "mmm", "--lam", "3000", "--mu", "1000", "-m", "4"]),
    ("model-mva.txt", ["model", "mva", str(DATA / "network.toml"), "--clients", "1,2,4,8,16,32"]),
])
def test_golden_output(capsys, golden, argv):
    code, out, err = run_cli(capsys, *argv)
    assert (code, err) == (0, "")
    check_golden(golden, out)


def test_factorial_json_has_one_document_per_response(capsys):
    code, out, _ = run_cli(capsys, "factorial", str(DATA / "two-responses.csv"),
                           "--response", "mips", "--response", "watts", "--json")
    assert code == 0
    docs = [json.loads(line) for line in out.splitlines()]
    assert [d["response"] for d in docs] == ["mips", "watts"]
    mips = docs[0]
    # Jain, Example 17.1: q = 40, 20, 10, 5; SS 1600, 400, 100 of SST 2100.
    assert mips["effects"] == {"I": 40, "memory": 20, "cache": 10, "memorycache": 5}
    assert mips["ss"] == {"memory": 1600, "cache": 400, "memorycache": 100}
    assert mips["sst"] == 2100 and mips["sse"] == 0 and mips["error_pct"] is None
    assert mips["ci"]["memory"] is None and mips["significant"]["memory"] is None
    assert mips["levels"] == {"memory": ["4", "16"], "cache": ["1", "2"]}


def test_factorial_json_fields_with_repetitions(capsys):
    code, out, _ = run_cli(capsys, "factorial", str(DATA / "jain-memory-cache.csv"),
                           "--response", "time", "--json", "--confidence", "0.95")
    doc = json.loads(out)
    assert code == 0
    assert set(doc) >= {"effects", "ss", "variation_pct", "ci", "significant", "sse", "sst",
                        "error_pct"}
    # t[0.975; 8] = 2.306, s_q = sqrt(102 / 8 / 12) = 1.0308: half-width 2.377.
    lo, hi = doc["ci"]["AB"]
    assert (hi - lo) / 2 == pytest.approx(2.306 * (102 / 8 / 12) ** 0.5, abs=1e-3)
    assert doc["significant"] == {"I": True, "A": True, "B": True, "AB": True}


def test_model_json(capsys):
    code, out, _ = run_cli(capsys, "model", "mm1", "--lam", "800", "--mu", "1000", "--json")
    doc = json.loads(out)
    assert code == 0
    assert doc["utilization"] == pytest.approx(0.8)
    assert doc["response_ms"] == pytest.approx(5.0)
    code, out, _ = run_cli(capsys, "model", "mva", str(DATA / "network.toml"),
                           "--clients", "4,1", "--json")
    doc = json.loads(out)
    assert [p["clients"] for p in doc["points"]] == [1, 4]
    first = doc["points"][0]
    # One client: X = 1 / (Z + sum D) = 1 / 1.72 ms = 581.4/s; R = 0.72 ms.
    assert first["throughput"] == pytest.approx(1000 / 1.72)
    assert first["response_ms"] == pytest.approx(0.72)
    assert first["stations"]["network"]["utilization"] is None
    assert first["stations"]["workers"]["utilization"] == pytest.approx(0.5 / 1.72 / 4)
    assert set(first["stations"]["workers"]) == {"utilization", "queue"}


def test_example_files_in_experiments_are_valid():
    out = factorial_cmd.run(EXAMPLES / "factorial-example.csv",
                            ["throughput", "response_ms"], as_json=True)
    assert [json.loads(line)["response"] for line in out.splitlines()] == [
        "throughput", "response_ms"]
    doc = json.loads(model_cmd.run_mva(EXAMPLES / "middleware-network.toml", "1,64,512",
                                       as_json=True))
    # The 16 workers at 0.15 ms are the bottleneck: at most 16 / 0.15 ms = 106667/s.
    assert doc["points"][-1]["throughput"] == pytest.approx(16 / 0.15e-3, rel=1e-6)
    assert doc["points"][-1]["stations"]["workers"]["utilization"] == pytest.approx(1.0)


def assert_one_line_error(code: int, out: str, err: str, *fragments: str) -> None:
    assert code == 1
    assert out == ""
    assert err.endswith("\n") and err.count("\n") == 1, err
    assert err.startswith("cachelab: error: ")
    for fragment in fragments:
        assert fragment in err


def test_unstable_mm1_is_one_line(capsys):
    code, out, err = run_cli(capsys, "model", "mm1", "--lam", "1200", "--mu", "1000")
    assert_one_line_error(code, out, err, "unstable", "1.2 >= 1")


def test_negative_rate_is_one_line(capsys):
    code, out, err = run_cli(capsys, "model", "mmm", "--lam", "10", "--mu", "-1", "-m", "2")
    assert_one_line_error(code, out, err, "service rate (mu) must be a positive number")


def test_unbalanced_design_is_one_line(capsys, tmp_path):
    csv = tmp_path / "design.csv"
    csv.write_text("A,B,y\n-1,-1,1\n+1,-1,2\n-1,+1,3\n+1,+1,4\n+1,+1,5\n")
    code, out, err = run_cli(capsys, "factorial", str(csv), "--response", "y")
    assert_one_line_error(code, out, err, "unbalanced design", "A=+1, B=+1 has 2")


def test_missing_combination_is_one_line(capsys, tmp_path):
    csv = tmp_path / "design.csv"
    csv.write_text("A,B,y\n-1,-1,1\n+1,-1,2\n-1,+1,3\n")
    code, out, err = run_cli(capsys, "factorial", str(csv), "--response", "y")
    assert_one_line_error(code, out, err, "A=+1, B=+1 has no runs")


@pytest.mark.parametrize(("content", "fragments"), [
    ("A,B,y\n-1,-1,1\n+1,-1,x\n", ["line 3, column 'y'", "'x' is not a number"]),
    ("A,B,y\n-1,-1\n", ["line 2: 2 fields, the header has 3"]),
    ("A,A,y\n-1,-1,1\n", ["column 'A' appears twice"]),
    ("y\n1\n", ["no factor columns"]),
    ("A,t,y\n-1,5,1\n1,6,2\n-1,7,3\n", ["column 't' has 3 different values",
                                          "name it with --response"]),
    ("", ["empty file"]),
])
def test_bad_design_files_are_one_line(capsys, tmp_path, content, fragments):
    csv = tmp_path / "design.csv"
    csv.write_text(content)
    code, out, err = run_cli(capsys, "factorial", str(csv), "--response", "y")
    assert_one_line_error(code, out, err, *fragments)


def test_unknown_response_column_is_one_line(capsys):
    code, out, err = run_cli(capsys, "factorial", str(DATA / "jain-memory-cache.csv"),
                             "--response", "latency")
    assert_one_line_error(code, out, err, "--response 'latency': no such column",
                          "columns: A, B, time")


NETWORK_OK = """
[[station]]
name = "clients"
kind = "delay"
visits = 1
service_ms = 0.1
"""


@pytest.mark.parametrize(("extra", "fragments"), [
    ('[[station]]\nname = "w"\nkind = "mult"\nvisits = 1\nservice_ms = 1\n',
     ["station[2].kind: must be one of delay, queue, multi, got 'mult'"]),
    ('[[station]]\nname = "w"\nkind = "multi"\nvisits = 1\nservice_ms = 1\n',
     ["station[2].servers: missing"]),
    ('[[station]]\nname = "w"\nkind = "multi"\nservers = 0\nvisits = 1\nservice_ms = 1\n',
     ["station[2].servers: must be an integer >= 1, got 0"]),
    ('[[station]]\nname = "w"\nkind = "queue"\nservers = 2\nvisits = 1\nservice_ms = 1\n',
     ["station[2].servers: only a multi station has servers"]),
    ('[[station]]\nname = "w"\nkind = "queue"\nvisits = 1\nservce_ms = 1\n',
     ["station[2].servce_ms: unknown field"]),
    ('[[station]]\nname = "w"\nkind = "queue"\nvisits = 1\n', ["station[2].service_ms: missing"]),
    ('[[station]]\nname = "w"\nkind = "queue"\nvisits = 0\nservice_ms = 1\n',
     ["station[2].visits: must be a positive number, got 0"]),
    ('[[station]]\nname = "w"\nkind = "queue"\nvisits = true\nservice_ms = 1\n',
     ["station[2].visits: must be a positive number, got True"]),
    ('[[station]]\nname = "clients"\nkind = "queue"\nvisits = 1\nservice_ms = 1\n',
     ["station[2].name: 'clients' is already the name of station[1]"]),
    ("think_ms = -2\n", ["think_ms: must be a number >= 0"]),
    ("think_ms = \n", ["invalid TOML"]),
])
def test_bad_network_fields_are_one_line(capsys, tmp_path, extra, fragments):
    toml = tmp_path / "net.toml"
    if extra.startswith("think_ms"):
        toml.write_text(extra + NETWORK_OK)
    else:
        toml.write_text(NETWORK_OK + extra)
    code, out, err = run_cli(capsys, "model", "mva", str(toml), "--clients", "1,2")
    assert_one_line_error(code, out, err, str(toml), *fragments)


def test_network_without_stations_is_one_line(capsys, tmp_path):
    toml = tmp_path / "net.toml"
    toml.write_text("think_ms = 1\nstations = 3\n")
    code, out, err = run_cli(capsys, "model", "mva", str(toml), "--clients", "1")
    assert_one_line_error(code, out, err, "stations: unknown field")
    toml.write_text("think_ms = 1\n")
    code, out, err = run_cli(capsys, "model", "mva", str(toml), "--clients", "1")
    assert_one_line_error(code, out, err, "station: at least one [[station]] table")


@pytest.mark.parametrize("clients", ["0", "1,x", "1,,2", "20000"])
def test_bad_client_lists_are_one_line(capsys, clients):
    code, out, err = run_cli(capsys, "model", "mva", str(DATA / "network.toml"),
                             "--clients", clients)
    assert_one_line_error(code, out, err, "--clients")


def test_missing_network_file_is_one_line(capsys, tmp_path):
    code, out, err = run_cli(capsys, "model", "mva", str(tmp_path / "nope.toml"),
                             "--clients", "1")
    assert_one_line_error(code, out, err, "cannot read", "nope.toml")


def test_export_help_names_every_report_table(capsys):
    from cachelab.report.export import raw_names, report_names

    code, out, _ = run_cli(capsys, "export", "--help")
    text = " ".join(out.split())
    assert code == 0
    assert all(name in text for name in (*raw_names(), *report_names()))
