"""`[[study.findings]]`: a study's phenomena in an experiment file (spec/findings.py),
validated with errors naming the field, and judged on measured points by the report
(report/phenomena.py): peak, QoS knee, ratio and CPU breakdown, on hand-made points."""

import io
from pathlib import Path

import pytest

from cachelab import store
from cachelab.errors import UserError
from cachelab.hosts.hostinfo import HostInfo
from cachelab.report import phenomena, sections, write_report
from cachelab.report.data import PointResult
from cachelab.report.study import config_value
from cachelab.report.tables import TABLES
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

BASE = """
name = "instances"
order = "sweep"
repetitions = 1
run_time_s = 10
warmup_s = 2
cooldown_s = 1
[validation]
max_repetitions = 1
[sweep.factors]
"servers.instances" = [1, 2, 4, 6, 12]
"""

FINDINGS = """
[study]
source = "study/000_a4705b339fd194d4.txt (the thesis)"

[[study.findings]]
cite = "3.2.1 peak"
what = "peak"
along = "servers.instances"
level = 6
throughput = 512000
appears = [6]

[[study.findings]]
cite = "3.2.1 doubling"
what = "ratio"
along = "servers.instances"
from = 1
to = 2
ratio = 2.0
appears = [1.6, 2.6]

[[study.findings]]
cite = "3.2.1 beyond"
what = "ratio"
along = "servers.instances"
from = 6
to = 12
appears = [0.0, 1.05]

[[study.findings]]
cite = "3.2.1 knee"
what = "knee"
along = "servers.instances"
level = 6
appears = [6]

[[study.findings]]
cite = "3.2.2 cpu"
what = "cpu"
where = { "servers.instances" = 6 }
usr = 14
sys = 51
"""


def point(i: int, instances: int, throughput: float, p99: float,
          cpu: tuple[float, float] = (5.0, 40.0)) -> PointResult:
    return PointResult(i, f"servers.instances={instances}", {"servers.instances": instances},
                       {"servers": {"instances": instances}}, 168, 1, 1, None,
                       throughput=throughput, percentiles_ms={"p99": p99},
                       host_cpu={"server1": cpu})


POINTS = (point(0, 1, 100_000, 3.0), point(1, 2, 210_000, 1.4), point(2, 4, 400_000, 0.9),
          point(3, 6, 560_000, 0.7), point(4, 12, 480_000, 1.2))


def judged(text: str = FINDINGS, points=POINTS):
    found = spec.parse(BASE + text).study.findings
    return {r.cite: r for r in phenomena.compare(found, points, config_value, 1.0)}


def test_each_kind_is_judged_by_its_rule():
    rows = judged()
    assert rows["3.2.1 peak"].appears and rows["3.2.1 peak"].ours == (
        "at 6, 560k ops/s, p99 0.70 ms")
    assert rows["3.2.1 peak"].study == "at 6, 512k ops/s"
    assert rows["3.2.1 doubling"].appears and "x2.10" in rows["3.2.1 doubling"].ours
    assert rows["3.2.1 beyond"].appears and rows["3.2.1 beyond"].study == "6 -> 12: (no figure)"
    assert rows["3.2.1 knee"].appears   # 6 is the last level with p99 under 1 ms
    cpu = rows["3.2.2 cpu"]
    assert cpu.appears and cpu.ours.startswith("server1: usr 5.0%, sys 40.0% of a core")
    assert cpu.study == "usr 14%, sys 51% (kernel 51% vs user 14%)"


def test_a_peak_elsewhere_and_growth_beyond_the_cores_do_not_appear():
    points = POINTS[:4] + (point(4, 12, 700_000, 0.8, cpu=(30.0, 20.0)),)
    points = points[:3] + (point(3, 6, 560_000, 0.7, cpu=(30.0, 20.0)),) + points[4:]
    rows = judged(points=points)
    assert rows["3.2.1 peak"].appears is False
    assert rows["3.2.1 peak"].ours == (
        "at 12, 700k ops/s, p99 0.80 ms; at 6: 560k ops/s (80.0% of it)")
    assert rows["3.2.1 beyond"].appears is False
    assert rows["3.2.1 knee"].appears is False and rows["3.2.1 knee"].ours.startswith("at 12")
    assert rows["3.2.2 cpu"].appears is False   # user above system time


def test_a_knee_never_under_the_target_and_a_missing_level_are_said_so():
    points = tuple(point(q.index, q.factors["servers.instances"], q.throughput, 2.0)
                   for q in POINTS[1:])
    rows = judged(points=points)
    assert rows["3.2.1 knee"].appears is False
    assert rows["3.2.1 knee"].ours == "never under 1 ms (lowest p99 2.00 ms)"
    assert rows["3.2.1 doubling"].appears is None
    assert rows["3.2.1 doubling"].ours == "1 -> 2: not measured"


@pytest.mark.parametrize(("change", "message"), [
    (('what = "peak"', 'what = "top"'),
     "study.findings[1].what: must be one of peak, knee, ratio, cpu, got 'top'"),
    (('along = "servers.instances"\nlevel = 6\nthroughput',
      'along = "servers.threads"\nlevel = 6\nthroughput'),
     "study.findings[1].along: 'servers.threads' is not a factor of this experiment"),
    (("appears = [1.6, 2.6]", "appears = [2.6, 1.6]"),
     "study.findings[2].appears: low 2.6 above high 1.6"),
    (("appears = [1.6, 2.6]", "appears = [1.6]"),
     "study.findings[2].appears: a ratio's [low, high], got [1.6]"),
    (("from = 1\n", ""), "study.findings[2].from: missing (what = 'ratio' needs from, to"),
    (("usr = 14", "usr = 14\nlevel = 3"),
     "study.findings[5].level: unknown field for what = 'cpu'"),
    (('where = { "servers.instances" = 6 }', 'where = { "servers.instancs" = 6 }'),
     "study.findings[5].where.servers.instancs: not a field of this experiment"),
    (("sys = 51", 'sys = "51"'), "study.findings[5].sys: expected a number, got '51'"),
])
def test_mistakes_in_a_finding_name_the_field(change, message):
    old, new = change
    text = BASE + FINDINGS
    assert old in text
    with pytest.raises(UserError) as caught:
        spec.parse(text.replace(old, new, 1))
    assert message in str(caught.value)


def test_the_report_shows_the_phenomena_and_exports_them(tmp_path):
    rates = {0: 100_000.0, 1: 210_000.0, 2: 400_000.0, 3: 560_000.0, 4: 480_000.0}

    def execute(exp, p, repetition, directory):
        x = rates[p.index]
        summary = store.RunSummary(x, 1000 * 168 / x, 1.0, 1.0, 1.0, 1.0, 1.0, 0, 0, 0, 0.01)
        return store.RunRecord(p.index, repetition, 1.0, 2.0, summary, HostInfo.from_json({}),
                               (), (), (), {})

    run_experiment(spec.parse(BASE + FINDINGS), tmp_path, progress=Progress(io.StringIO()),
                   execute=execute)
    with store.Store.open_existing(tmp_path) as s:
        sec = sections.build(s)
        table = TABLES["phenomena"](sec)
    rows = {r[0]: r for r in table.rows}
    assert table.columns == ("cite", "what", "study", "ours", "appears", "rule")
    assert rows["3.2.1 peak"][4] == "yes" and rows["3.2.1 beyond"][4] == "yes"
    assert rows["3.2.2 cpu"][4] is None   # no emulated host, no host CPU: not measured
    html = write_report(tmp_path).read_text()
    assert 'id="phenomena"' in html and 'id="finding-phenomena"' in html
    assert "appears: 3.2.1 peak: the study at 6, 512k ops/s; ours at 6, 560k ops/s" in html


@pytest.mark.parametrize("name", ["thesis-memcached-connections", "thesis-memcached-threads",
                                  "thesis-memcached-group-size", "thesis-redis-connections",
                                  "thesis-redis-instances", "thesis-object-size"])
def test_the_ready_thesis_experiments_cite_it_on_the_scale_model(name):
    exp = spec.load(EXPERIMENTS / f"{name}.toml")
    assert exp.study.source.startswith("study/000_a4705b339fd194d4.txt")
    c = exp.points[0].config
    assert (c.topology.scale, c.topology.server.cpu_quota, c.topology.server.thread_quota) == (
        30, 10.8, 1.8)
    assert exp.study.findings or exp.study.points


@pytest.mark.parametrize("name", ["thesis-memcached-threads-ssh", "thesis-redis-instances-ssh"])
def test_the_ssh_companions_run_the_thesis_on_real_hosts_unscaled(name):
    exp = spec.load(EXPERIMENTS / f"{name}.toml")
    c = exp.points[0].config
    assert c.topology.kind == "ssh" and c.topology.scale == 1 and c.topology.thread_quota == 0
    assert sum("load" in h.roles for h in c.topology.host) == 7
    assert exp.study.source.startswith("study/000_a4705b339fd194d4.txt")
