"""`[study]`: the original's values in an experiment file (spec/study.py), validated with
errors naming the field, and set beside the measured ones by the report (report/study.py),
effect by effect and point by point, on a small design stored here."""

import io
from pathlib import Path

import pytest

from cachelab import store
from cachelab.errors import UserError
from cachelab.hosts.hostinfo import HostInfo
from cachelab.report import sections, write_report
from cachelab.report.tables import TABLES
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

BASE = """
name = "cited"
order = "sweep"
repetitions = 2
run_time_s = 10
warmup_s = 2
cooldown_s = 1
[validation]
max_repetitions = 2
[sweep.factors]
"servers.count" = [1, 3]
"middleware.workers" = [8, 32]
"""

STUDY = """
[study]
source = "study/001_8336769a2c321254.txt (ASL report)"

[[study.effects]]
cite = "section 6, Table 4"
response = "throughput"
factors = { S = "servers.count", W = "middleware.workers" }
variation_pct = { S = 95.5, W = 0.8, SW = 0.7, error = 0.0 }
effects = { I = 5638, S = 2692, W = 239, SW = 237 }

[[study.points]]
cite = "section 6, Table 3, i = 2"
where = { "servers.count" = 3, "middleware.workers" = 8 }
throughput = 6902
response_ms = 26.8

[[study.points]]
cite = "section 2.3"
where = { "servers.count" = 1 }
throughput = 2962
at = "max"

[[study.points]]
cite = "section 3.3"
where = { "middleware.count" = 2 }
throughput = 2869
"""


def test_a_study_section_is_parsed():
    found = spec.parse(BASE + STUDY).study
    assert found.source == "study/001_8336769a2c321254.txt (ASL report)"
    (e,) = found.effects
    assert e.cite == "section 6, Table 4" and e.response == "throughput"
    assert e.factors == (("S", "servers.count"), ("W", "middleware.workers"))
    assert dict(e.variation_pct) == {"S": 95.5, "W": 0.8, "SW": 0.7, "error": 0.0}
    assert e.paths_of("WS") == frozenset({"servers.count", "middleware.workers"})
    assert [p.at for p in found.points] == ["each", "max", "each"]
    assert found.points[0].where == (("servers.count", 3), ("middleware.workers", 8))
    assert spec.parse(BASE).study is None


@pytest.mark.parametrize(("change", "message"), [
    (("SW = 0.7", "SX = 0.7"),
     "study.effects[1].variation_pct.SX: not an effect of S, W (effects: error, S, W, SW)"),
    (("S = 95.5", "S = 195.5"),
     "study.effects[1].variation_pct.S: a percentage between 0 and 100, got 195.5"),
    (('S = "servers.count"', 'S = "servers.threads"'),
     "study.effects[1].factors.S: 'servers.threads' is not a factor of this experiment "
     "(factors: servers.count, middleware.workers)"),
    (('S = "servers.count"', 'SV = "servers.count"'),
     "study.effects[1].factors.SV: a factor is named by one capital letter"),
    (('response = "throughput"', 'response = "p42"'),
     "study.effects[1].response: must be one of throughput, response_ms, got 'p42'"),
    (('cite = "section 6, Table 4"\n', ""), "study.effects[1].cite: missing (text)"),
    (("throughput = 6902\n", "throughput = 0\n"), "study.points[1].throughput: must be > 0"),
    (('at = "max"', 'at = "min"'), "study.points[2].at: must be one of each, max, got 'min'"),
    (('where = { "servers.count" = 1 }', 'where = { "servers.cuont" = 1 }'),
     "study.points[2].where.servers.cuont: not a field of this experiment"),
    (("throughput = 2869", 'cite2 = "x"'), "study.points[3].cite2: unknown field"),
    (('source = "study', 'sauce = "study'), "study.sauce: unknown field"),
])
def test_mistakes_in_the_study_section_name_the_field(change, message):
    old, new = change
    text = BASE + STUDY
    assert old in text
    with pytest.raises(UserError) as caught:
        spec.parse(text.replace(old, new, 1))
    assert message in str(caught.value)


def record(point: int, repetition: int, throughput: float):
    summary = store.RunSummary(throughput, 1000 * 24 / throughput, 1.0, 1.0, 1.0, 1.0, 1.0,
                               0, 0, 0, 0.01)
    return store.RunRecord(point, repetition, 1.0, 2.0, summary, HostInfo.from_json({}), (), (),
                           (), {})


def test_the_report_sets_the_study_beside_the_design_and_the_points(tmp_path):
    # Point order: (S, W) = (1, 8), (1, 32), (3, 8), (3, 32); S dominates as in Table 4.
    levels = {0: 2900.0, 1: 2950.0, 2: 6800.0, 3: 8700.0}

    def execute(exp, point, repetition, directory):
        return record(point.index, repetition, levels[point.index] + 10 * repetition)

    run_experiment(spec.parse(BASE + STUDY), tmp_path, progress=Progress(io.StringIO()),
                   execute=execute)
    with store.Store.open_existing(tmp_path) as s:
        sec = sections.build(s)
        table = TABLES["study"](sec)
    st = sec.study
    (e,) = st.effects
    assert e.design == "all runs"
    rows = {r.study_name: r for r in e.rows}
    assert [r.study_name for r in e.rows] == ["I", "S", "W", "SW", "error"]
    assert rows["S"].ours_name == "A" and rows["SW"].ours_name == "AB"
    assert rows["W"].ours_name == "B"
    # Effects by hand: q_S = (-2905 - 2955 + 6805 + 8705) / 4 = 2412.5, and so on.
    assert rows["S"].ours_estimate == pytest.approx(2412.5)
    assert rows["W"].ours_estimate == pytest.approx((-2905 + 2955 - 6805 + 8705) / 4)
    assert rows["SW"].ours_estimate == pytest.approx((2905 - 2955 - 6805 + 8705) / 4)
    assert rows["S"].same_sign and rows["SW"].same_sign
    assert rows["S"].study_pct == 95.5 and 80 < rows["S"].ours_pct < 100
    ys = [2910, 2920, 2960, 2970, 6810, 6820, 8710, 8720]   # each point +10 and +20
    sst = sum((y - sum(ys) / 8) ** 2 for y in ys)
    assert rows["error"].ours_pct == pytest.approx(100 * 8 * 25 / sst)   # SSE = 8 x 5^2
    first, biggest, missing = st.points
    assert first.point.index == 2 and first.throughput_ratio == pytest.approx(6815 / 6902)
    assert first.response_ratio == pytest.approx(1000 * 24 / 6815 / 26.8, rel=0.01)
    assert biggest.at == "max" and biggest.point.index == 1   # (1, 32): 2965 > 2915
    assert missing.point is None and missing.where == "middleware.count=2"
    assert table.columns[0] == "kind" and len(table.rows) == 5 + 3
    assert table.rows[6][:4] == ("point", "section 2.3", None, "servers.count=1")
    html = write_report(tmp_path).read_text()
    section = html[html.index('id="study"'):html.index('id="models"')]
    assert "section 6, Table 4" in section and "our design: all runs" in section
    assert "<td>S</td><td>A</td>" in section and "95.5" in section
    assert "not measured" in section   # the point no configuration matches


def test_the_ready_experiments_that_re_create_the_study_cite_it():
    cited = {}
    for name in ("netns-factorial-2k", "factorial-2k", "netns-baseline",
                 "baseline-no-middleware", "baseline-middleware"):
        exp = spec.load(EXPERIMENTS / f"{name}.toml")
        assert exp.study is not None, name
        assert exp.study.source.startswith("study/001_8336769a2c321254.txt")
        cited[name] = exp.study
    table4 = next(e for e in cited["netns-factorial-2k"].effects
                  if "Table 4" in e.cite and e.response == "throughput")
    assert dict(table4.variation_pct)["S"] == 95.5
    assert cited["factorial-2k"].effects == cited["netns-factorial-2k"].effects


def test_a_scale_models_design_is_analysed_at_full_speed(tmp_path):
    # The same design run as a scale model k = 4: the stored runs are 4 times slower; the
    # report's effects (and `cachelab factorial DIR`) are the full-speed ones, as its
    # points are, so they stand beside the study's. The % of variation does not change.
    from cachelab.commands import factorial as factorial_cmd
    levels = {0: 2900.0, 1: 2950.0, 2: 6800.0, 3: 8700.0}

    def execute(exp, point, repetition, directory):
        return record(point.index, repetition, (levels[point.index] + 10 * repetition) / 4)

    text = BASE.replace("[validation]", '[topology]\nkind = "netns"\nscale = 4\n[validation]')
    run_experiment(spec.parse(text + STUDY), tmp_path, progress=Progress(io.StringIO()),
                   execute=execute)
    with store.Store.open_existing(tmp_path) as s:
        rows = {r.study_name: r for r in sections.build(s).study.effects[0].rows}
    assert rows["S"].ours_estimate == pytest.approx(2412.5)
    assert rows["I"].ours_estimate == pytest.approx((2915 + 2965 + 6815 + 8715) / 4)
    printed = factorial_cmd.run(tmp_path, ["throughput", "response_ms"])
    assert "scale model (topology.scale = 4): the runs are taken at full speed" in printed
    assert "2412.5" in printed
