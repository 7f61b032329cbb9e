"""The report's analysis on real stored experiments: a 2^2 experiment (workers x clients,
short runs) and a second one over clients only, run once for the module.

- the report's factorial tables equal `cachelab factorial DIR` on the same stored runs,
  steady runs only;
- the model tables hold the measured values and the M/M/1 and M/M/m predictions, checked
  against the formulas on numbers read back from the database with SQL of their own;
- the network model at N = 1 is the sum of the measured demands, and the histograms
  count every request;
- `cachelab compare` matches the two experiments' points, says what it cannot match, and
  tests each difference with Welch's t-test on the stored runs.
"""

import csv
import html
import io
import json
import math
import re
import shutil
import sqlite3

import pytest
from scipy import stats

from cachelab import store
from cachelab.cli import main
from cachelab.commands import export as export_cmd
from cachelab.commands import run as run_cmd
from cachelab.report import write_report
from cachelab.run.progress import Progress

COMMON = """
repetitions = 2
run_time_s = 1.5
warmup_s = 0.3
cooldown_s = 0
stats_window_s = 0.25
[validation]
cv_threshold = 0.9   # short runs on a busy machine; steadiness is set by hand below
max_repetitions = 2
[servers]
count = 2
memory_mb = 64
[workload]
ratio = "1:4"
data_size = 100
key_maximum = 300
"""
DESIGN = 'name = "two-by-two"\n' + COMMON + """
[sweep.factors]
"middleware.workers" = [1, 4]
"load.clients" = [1, 4]
"""
CLIENTS = 'name = "clients"\n' + COMMON + """
[middleware]
workers = 4
[sweep.factors]
"load.clients" = [4, 8]
"""


@pytest.fixture(scope="module")
def experiments(tmp_path_factory, proxy_binary):
    from cachelab.hosts.binaries import find_binary

    find_binary("cachelab-load")
    root = tmp_path_factory.mktemp("analysis")
    out = {}
    for name, text in (("design", DESIGN), ("clients", CLIENTS)):
        (root / f"{name}.toml").write_text(text)
        run_cmd.run(root / f"{name}.toml", root / name, report=False,
                    progress=Progress(io.StringIO()))
        out[name] = root / name
    return out


@pytest.fixture
def design_dir(experiments, tmp_path):
    """A copy of the 2^2 experiment in which point 1's second run is unsteady."""
    copy = tmp_path / "design"
    shutil.copytree(experiments["design"], copy)
    with sqlite3.connect(copy / store.FILENAME) as db:
        db.execute("UPDATE run SET cv_within = 0.95 WHERE repetition = 2 AND point_id = "
                   "(SELECT id FROM point WHERE idx = 0)")
    return copy


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def cells(row_html):
    return [html.unescape(re.sub(r"<[^>]+>", "", c)).strip()
            for c in re.findall(r"<td[^>]*>(.*?)</td>", row_html, flags=re.S)]


def num(value, digits=6):
    """The report's number format (report._num)."""
    if abs(value) >= 10**digits:
        return f"{value:,.0f}"
    return f"{value:.{digits}g}"


def test_the_reports_factorial_tables_equal_cachelab_factorial(design_dir, capsys):
    page = write_report(design_dir).read_text()
    assert main(["factorial", str(design_dir), "--response", "throughput", "--response",
                 "response_ms", "--json"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["response"] for d in docs] == ["throughput", "response_ms"]
    for doc in docs:
        assert doc["factor_paths"] == {"A": "middleware.workers", "B": "load.clients"}
        # Steady runs only: the unsteady run leaves point 1 with one, so r = 1 everywhere.
        assert (doc["runs"], doc["steady_runs"], doc["replications"]) == (8, 7, 1)
        assert doc["notes"] == ["1 unsteady run(s) left out: #1 rep 2",
                                "r = 1: the first 1 steady runs of each point are used; "
                                "#2 has 1 more, #3 has 1 more, #4 has 1 more"]
        table = re.search(r'<table class="factorial" data-design="all runs" data-response="'
                          + doc["response"] + r'">(.*?)</table>', page, flags=re.S).group(1)
        rows = {c[0]: c for c in map(cells, re.findall(r"<tr>(.*?)</tr>", table, re.S)) if c}
        for effect, estimate in doc["effects"].items():
            assert rows[effect][1] == num(estimate)
            if effect != "I":
                assert rows[effect][2] == num(doc["ss"][effect])
                assert rows[effect][3] == f"{doc['variation_pct'][effect]:.2f}%"
        assert rows["total"][2] == num(doc["sst"])
    assert "1 unsteady run(s) left out: #1 rep 2" in page
    assert "Steady runs only:\n7 of the 8 runs are steady" in page

    # The exported table holds the same numbers at full precision, and runs.steady says
    # which runs the design used.
    export_cmd.run(design_dir, "csv", design_dir / "x", ["factorial", "runs"])
    exported = read_csv(design_dir / "x" / "factorial.csv")
    for doc in docs:
        mine = {r["effect"]: r for r in exported if r["response"] == doc["response"]}
        assert {e: float(mine[e]["estimate"]) for e in doc["effects"]} == doc["effects"]
        assert mine["AB"]["factors"] == "middleware.workers x load.clients"
        assert float(mine["total"]["sum_of_squares"]) == doc["sst"]
    steady = {(r["point"], r["repetition"]): r["steady"]
              for r in read_csv(design_dir / "x" / "runs.csv")}
    assert steady == {(str(p), str(rep)): "0" if (p, rep) == (0, 2) else "1"
                      for p in range(4) for rep in (1, 2)}

    # The text form says it used steady runs only; a bad selection is one line.
    assert main(["factorial", str(design_dir), "--response", "throughput",
                 "--factors", "clients", "--where", "workers=4"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{design_dir}: 4 of 4 runs are steady; only steady runs are used")
    assert "design: all runs; factors A = load.clients; r = 2" in out
    for argv, message in (
            (["--where", "ratio=0:1"], "'ratio' is not a factor of this experiment"),
            (["--factors", "workers,clients,workers"], "factor middleware.workers is named"),
            (["--where", "workers"], "expected FACTOR=LEVEL")):
        assert main(["factorial", str(design_dir), "--response", "throughput", *argv]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err


def steady_windows(db, run):
    lo = run["started_at"] + 0.3
    hi = run["started_at"] + 1.5
    return db.execute('SELECT * FROM mw_window WHERE run_id = ? AND (start + "end") / 2 '
                      "BETWEEN ? AND ?", (run["id"], lo, hi)).fetchall()


def measured_from_sql(db, point_id):
    """lambda, X, S, Wq and Lq of one point, straight from the stored rows."""
    runs = db.execute("SELECT * FROM run WHERE point_id = ?", (point_id,)).fetchall()
    lam, x, lq = [], [], []
    service = wait = requests = 0.0
    for run in runs:
        windows = steady_windows(db, run)
        seconds = sum(w["duration_s"] for w in windows)
        lam.append(sum(w["arrivals"] for w in windows) / seconds)
        x.append(sum(w["throughput"] * w["duration_s"] for w in windows) / seconds)
        counted = sum(w["queue_len_count"] for w in windows)
        lq.append(sum(w["queue_len_count"] * w["queue_len_mean"] for w in windows) / counted)
        for w in windows:
            for o in db.execute("SELECT * FROM mw_op WHERE run_id = ? AND window = ?",
                                (run["id"], w["window"])):
                service += o["worker_service_count"] * o["worker_service_mean"]
                wait += o["queue_wait_count"] * o["queue_wait_mean"]
                requests += o["worker_service_count"]
    return (sum(lam) / len(lam), sum(x) / len(x), service / requests * 1e-6,
            wait / requests * 1e-6, sum(lq) / len(lq))


def erlang_c(m, a):
    """The textbook sum, independent of the recursion the models use."""
    rho = a / m
    top = a**m / math.factorial(m) / (1 - rho)
    return top / (sum(a**k / math.factorial(k) for k in range(m)) + top)


def test_model_tables_hold_the_measurements_and_the_formulas_on_them(experiments):
    directory = experiments["design"]
    page = write_report(directory).read_text()
    export_cmd.run(directory, "csv", directory / "x", ["queueing"])
    rows = read_csv(directory / "x" / "queueing.csv")
    db = sqlite3.connect(directory / store.FILENAME)
    db.row_factory = sqlite3.Row
    points = {r["idx"]: r for r in db.execute("SELECT * FROM point")}
    assert sorted({int(r["point"]) for r in rows}) == [0, 1, 2, 3]
    measured = {i: measured_from_sql(db, points[i]["id"]) for i in points}
    for r in rows:
        i = int(r["point"])
        lam, x, s, wq, lq = measured[i]
        workers = json.loads(points[i]["factors"])["middleware.workers"]
        assert float(r["lambda"]) == pytest.approx(lam, rel=1e-9)
        assert float(r["queue_wait_measured_ms"]) == pytest.approx(wq * 1e3, rel=1e-9)
        assert float(r["response_measured_ms"]) == pytest.approx((wq + s) * 1e3, rel=1e-9)
        assert float(r["queue_length_measured"]) == pytest.approx(lq, rel=1e-9, abs=1e-12)
        if r["model"] == "M/M/m":
            m, mu = workers, 1 / s
            assert float(r["measured_utilization"]) == pytest.approx(x * s / m, rel=1e-9)
        else:
            same = [j for j in points
                    if json.loads(points[j]["factors"])["middleware.workers"] == workers]
            m, mu = 1, max(measured[j][1] for j in same)
        assert (int(r["servers"]), float(r["mu"])) == (m, pytest.approx(mu, rel=1e-9))
        rho = lam / (m * mu)
        assert float(r["rho"]) == pytest.approx(rho, rel=1e-9)
        html_row = re.search(rf'<tr data-point="{i}" data-model="{r["model"]}">(.*?)</tr>',
                             page, flags=re.S).group(1)
        if rho >= 1:
            assert r["response_predicted_ms"] == "" and "no steady state" in r[
                "assumptions_broken"]
            continue
        wait = erlang_c(m, lam / mu) / (m * mu - lam)
        assert float(r["queue_wait_predicted_ms"]) == pytest.approx(wait * 1e3, rel=1e-9)
        assert float(r["response_predicted_ms"]) == pytest.approx((wait + 1 / mu) * 1e3,
                                                                  rel=1e-9)
        assert float(r["queue_length_predicted"]) == pytest.approx(lam * wait, rel=1e-9)
        assert float(r["response_ratio"]) == pytest.approx((wait + 1 / mu) / (wq + s),
                                                           rel=1e-9)
        assert num((wait + 1 / mu) * 1e3, 3) in cells(html_row)
        assert "the workers share CPUs with other processes" in r["assumptions_broken"]


def test_network_model_and_histograms_from_the_stored_runs(experiments):
    directory = experiments["design"]
    export_cmd.run(directory, "csv", directory / "y", ["mva", "mva_stations", "histograms",
                                                       "point_means"])
    stations = read_csv(directory / "y" / "mva_stations.csv")
    mva = read_csv(directory / "y" / "mva.csv")
    assert {r["curve"] for r in mva} == {"middleware.workers=1", "middleware.workers=4"}
    for curve in ("middleware.workers=1", "middleware.workers=4"):
        basis = "lowest load (N = 1)"
        mine = [s for s in stations if s["curve"] == curve and s["basis"] == basis]
        # The loopback round trip measured before the point is a delay station per
        # server, taken out of the server's measured time (report/links.py); a station
        # whose time is within noise of zero is left out (the network, a server whose
        # time was no longer than its round trip), so only the order is fixed.
        order = ["network", "net layer", "workers", "link server 1", "server 1",
                 "link server 2", "server 2"]
        names = [s["station"] for s in mine]
        assert names == [n for n in order if n in names]
        assert {"net layer", "workers", "link server 1", "link server 2"} <= set(names)
        by_name = {s["station"]: s for s in mine}
        assert by_name["workers"]["servers"] == curve[-1]  # m = W
        # Ratio 1:4 over 2 replicated servers: each answers every set and half the gets.
        for name in ("link server 1", "link server 2", "server 1", "server 2"):
            if name in by_name:
                assert float(by_name[name]["visits"]) == pytest.approx(0.2 + 0.8 / 2,
                                                                       abs=0.02)
        one = next(r for r in mva if r["curve"] == curve and r["basis"] == basis
                   and r["N"] == "1")
        # One client: no queueing anywhere, R(1) = the sum of the demands.
        total = sum(float(s["demand_us"]) for s in mine) / 1000
        assert float(one["response_predicted_ms"]) == pytest.approx(total, rel=1e-9)
        # The network station is client R - middleware R, so R(1) differs from the
        # measured R only by what the model adds at the servers and leaves out (queue).
        assert float(one["response_ratio"]) == pytest.approx(1, abs=0.2)
        assert sum(s["bottleneck"] == "True" for s in mine) == 1

    histograms = read_csv(directory / "y" / "histograms.csv")
    db = sqlite3.connect(directory / store.FILENAME)
    db.row_factory = sqlite3.Row
    for point in {r["point"] for r in histograms}:
        runs = db.execute("SELECT run.* FROM run JOIN point ON point.id = run.point_id "
                          "WHERE point.idx = ?", (int(point),)).fetchall()
        for op in ("get", "set"):
            client = [r for r in histograms if (r["point"], r["op"], r["side"]) ==
                      (point, op, "client")]
            ops = sum(c["ops"] for run in runs for c in db.execute(
                "SELECT ops FROM client_summary WHERE run_id = ? AND op = ?", (run["id"], op)))
            assert sum(int(r["count"]) for r in client) == ops
            mw = [r for r in histograms if (r["point"], r["op"], r["side"]) ==
                  (point, op, "middleware")]
            served = sum(o["count"] for run in runs for w in steady_windows(db, run)
                         for o in db.execute("SELECT count FROM mw_op WHERE run_id = ? AND "
                                             "window = ? AND op = ?",
                                             (run["id"], w["window"], op)))
            assert sum(int(r["count"]) for r in mw) == served
            # Both sides share the buckets; the last one reaches the cutoff, above which
            # the overflow row counts.
            assert [r["low_ms"] for r in client] == [r["low_ms"] for r in mw]
            assert client[-1]["high_ms"] == ""
            assert float(client[-2]["high_ms"]) >= float(client[-1]["low_ms"])


def test_compare_matches_points_across_factor_sets_and_tests_the_differences(
        experiments, tmp_path, capsys):
    a, b = experiments["design"], experiments["clients"]
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == "matched 1 configuration(s) of two-by-two, clients"
    assert printed[1:5] == [
        "not matched: two-by-two #1 (middleware.workers=1, load.clients=1): clients has no "
        "point with middleware.workers=1 (it has 4) nor load.clients=1 (it has 4, 8)",
        "not matched: two-by-two #2 (middleware.workers=1, load.clients=4): clients has no "
        "point with middleware.workers=1 (it has 4)",
        "not matched: two-by-two #3 (middleware.workers=4, load.clients=1): clients has no "
        "point with load.clients=1 (it has 4, 8)",
        "not matched: clients #2 (load.clients=8): two-by-two has no point with "
        "load.clients=8 (it has 1, 4)"]
    rows = read_csv(out / "compare.csv")
    assert [(r["experiment"], r["point"], r["middleware.workers"], r["load.clients"])
            for r in rows] == [("two-by-two", "3", "4", "4"), ("clients", "0", "4", "4")]
    with sqlite3.connect(a / store.FILENAME) as da, sqlite3.connect(b / store.FILENAME) as db:
        ta = [t for (t,) in da.execute("SELECT throughput FROM run WHERE point_id = 4")]
        tb = [t for (t,) in db.execute("SELECT throughput FROM run WHERE point_id = 1")]
    welch = stats.ttest_ind(tb, ta, equal_var=False)
    assert float(rows[1]["throughput_ratio"]) == pytest.approx(
        (sum(tb) / 2) / (sum(ta) / 2), rel=1e-9)
    assert float(rows[1]["throughput_p"]) == pytest.approx(welch.pvalue, rel=1e-9)
    assert rows[1]["throughput_significant"] == str(welch.pvalue < 0.05)
    page = (out / "compare.html").read_text()
    assert "clients has no point with middleware.workers=1" in page
    # One self-contained file: every plot inline as SVG, no image directory beside it.
    images = re.findall(r'<img src="([^"]*)" alt="[^"]*against load', page)
    assert len(images) == 3 and all(i.startswith("data:image/svg+xml;base64,") for i in images)
    assert not (out / "compare-images").exists()
    # The same experiment twice: names come from the directories, every point matches.
    twin = tmp_path / "again"
    shutil.copytree(b, twin)
    assert main(["compare", str(b), str(twin), "--out", str(tmp_path / "same")]) == 0
    assert capsys.readouterr().out.startswith("matched 2 configuration(s) of clients, again")


def test_compare_says_why_nothing_matches(experiments, tmp_path, capsys):
    other = tmp_path / "other"
    shutil.copytree(experiments["clients"], other)
    with sqlite3.connect(other / store.FILENAME) as db:
        for idx, config in db.execute("SELECT idx, config FROM point").fetchall():
            c = json.loads(config)
            c["load"]["clients"] = 16 + idx
            db.execute("UPDATE point SET config = ? WHERE idx = ?", (json.dumps(c), idx))
    assert main(["compare", str(experiments["clients"]), str(other), "--out",
                 str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert err == ("cachelab: error: the experiments share no point: load.clients is 4, 8 "
                   "in clients; 16, 17 in other\n")
    assert main(["compare", str(other)]) == 1
    assert "at least two" in capsys.readouterr().err
