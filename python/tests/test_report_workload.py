"""The report's workload section (report/workload.py) from stored load generator reports:
one that carries `sent` and send intervals (an open-loop ETC run with lookaside against an
empty memcached: data/load-report-sent.json) and one from before `sent` existed."""

import dataclasses
import io
import json
import re
from pathlib import Path

import pytest

from cachelab import store
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen
from cachelab.report import workload as work
from cachelab.report import write_report
from cachelab.run import validate
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

DATA = Path(__file__).parent / "data"
SENT = DATA / "load-report-sent.json"
OLD = DATA / "load-report.json"


class Point:
    index, name, label, run_ids = 0, "base", "base", (1,)


def test_sizes_popularity_and_gaps_come_from_what_was_sent():
    w = work.from_reports(Point(), [json.loads(SENT.read_text())])
    assert w.mode == "open" and w.values is not None and w.values.source == "sent"
    assert w.values.described == "fb_value"
    assert [(b.low, b.high) for b in w.values.buckets][:3] == [(0, 1), (2, 3), (4, 7)]
    assert sum(b.count for b in w.values.buckets) == 1067
    assert w.keys is not None and {(b.low, b.high) for b in w.keys.buckets} == {
        (16, 31), (32, 63), (64, 127)}
    assert len(w.top) == 996 and w.top[0] == 286 and list(w.top) == sorted(w.top, reverse=True)
    assert w.distinct == 996 and not w.capped
    assert len(w.gaps_ns) == 1000
    ratios = [h for _, h in w.hit_ratio]
    assert ratios[0] < 0.55 < 0.8 < ratios[-1]  # lookaside on an empty server warms


def test_a_report_without_sent_shows_the_configured_sizes():
    w = work.from_reports(Point(), [json.loads(OLD.read_text())])
    assert w.values == work.Sizes((work.Bucket(64, 127, 1.0),), "configured", "100 B")
    assert w.keys is not None and w.keys.source == "configured"
    assert w.top == () and w.distinct is None and w.gaps_ns == ()
    assert w.hit_ratio and all(h == 1.0 for _, h in w.hit_ratio)


def test_power_buckets_weigh_a_uniform_range_by_the_sizes_each_holds():
    assert work.power_buckets(3, 9) == (work.Bucket(2, 3, 1.0), work.Bucket(4, 7, 4.0),
                                        work.Bucket(8, 15, 2.0))


ONE = """name = "sent"
repetitions = 2
run_time_s = 4
warmup_s = 0.5
cooldown_s = 0.5
[validation]
max_repetitions = 2
[sweep.factors]
"load.clients" = [1, 2]
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("workload")
    reports = {0: (SENT.read_bytes(), loadgen.load(SENT)), 1: (OLD.read_bytes(),
                                                               loadgen.load(OLD))}

    def execute(exp, point, repetition, directory):
        raw, load = reports[point.index]
        summary = validate.summarise((load,), run_time=4, warmup=0.5, cooldown=0.5)
        summary = dataclasses.replace(summary, cv_within=0.01)
        return store.RunRecord(point.index, repetition, 1.0e9, 1.0e9 + 4, summary,
                               HostInfo.from_json({}), (load,), (), (),
                               {"load-0.json": raw})

    run_experiment(spec.parse(ONE), out, progress=Progress(io.StringIO()), execute=execute)
    return write_report(out).read_text()


def test_the_report_has_a_workload_section_with_a_figure_per_point(page):
    section = page[page.index('<section id="workload">'):page.index('<section id="analysis">')]
    assert '<a href="#workload">The workload sent</a>' in page
    assert '<figure id="fig-workload-1">' in section and '<figure id="fig-workload-2">' in section
    rows = re.findall(r'<tr data-point="(\d)">(.*?)</tr>', section, flags=re.S)
    assert [r[0] for r in rows] == ["0", "1"]
    assert "fb_value (sent)" in rows[0][1] and "open" in rows[0][1]
    assert "100 B (configured)" in rows[1][1] and "closed" in rows[1][1]
    assert "1.00 → 1.00" in rows[1][1]
