"""The report as a person meets it, in a real browser: Debian's chromium, headless, at
1280 px, opens a report built from stored fixtures (a 2^3 sweep whose runs replay one
load generator report and one middleware stats file) and measures the laid-out page with
browser_checks.js: the findings come before any other section, every image renders, no
element runs past the window outside a scroll box, no table cell is narrower than its
longest word."""

import dataclasses
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cachelab import store
from cachelab.hosts.hostinfo import HostInfo
from cachelab.readers import loadgen, proxy_stats
from cachelab.report import write_report
from cachelab.run import validate
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

DATA = Path(__file__).parent / "data"
CHROMIUM = shutil.which("chromium")
WIDTH = 1280

pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="Debian's chromium is not installed (`make test` installs it: "
                             "apt-get install chromium)")

EXPERIMENT = """
name = "browser"
order = "sweep"
repetitions = 2
run_time_s = 16
warmup_s = 2
cooldown_s = 1
[validation]
max_repetitions = 2
[servers]
count = 1
[sweep.factors]
"workload.ratio" = ["0:1", "1:9"]
"middleware.workers" = [8, 32]
"load.clients" = [1, 4]

[study]
source = "a study made up for this test"

[[study.effects]]
cite = "Table 1"
where = { "workload.ratio" = "0:1" }
response = "throughput"
factors = { W = "middleware.workers", C = "load.clients" }
variation_pct = { W = 60.0, C = 30.0, WC = 5.0, error = 5.0 }
effects = { I = 5000, W = 1000, C = 700, WC = 100 }

[[study.points]]
cite = "Table 2"
where = { "middleware.workers" = 8 }
throughput = 5000
at = "max"
"""


def stats_file(tmp: Path) -> Path:
    """The stored stats fixture with the start line's `pools` (added after it was taken)."""
    lines = (DATA / "proxy-stats.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["pools"] = [{"name": "default", "listen": head["listen"], "mode": "replicate",
                      "replicas": 1, "hash": "fnv1a_64", "distribution": "ketama",
                      "servers": head["servers"]}]
    path = tmp / "proxy-stats.jsonl"
    path.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    return path


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("browser")
    stats = proxy_stats.load(stats_file(out))
    load = loadgen.load(DATA / "load-report.json")
    sent = (DATA / "load-report-sent.json").read_bytes()
    start = stats.header.start

    def execute(exp, point, repetition, directory):
        summary = validate.summarise((load,), run_time=16, warmup=2, cooldown=1)
        summary = dataclasses.replace(summary, throughput=summary.throughput
                                      * (1 + point.index), cv_within=0.01)
        return store.RunRecord(point.index, repetition, start, start + 16, summary,
                               HostInfo.from_json({}), (load,), (stats,), (),
                               {"load-0.json": sent})  # the workload section draws it

    run_experiment(spec.parse(EXPERIMENT), out, progress=Progress(io.StringIO()),
                   execute=execute)
    return write_report(out)


def chromium(*args: str) -> str:
    """Runs headless chromium at WIDTH px (no sandbox: tests may run as root)."""
    assert CHROMIUM is not None
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                           "--hide-scrollbars", f"--window-size={WIDTH},1000", *args],
                          capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def measure(page: Path) -> dict:
    """The page laid out by chromium, as browser_checks.js measures it."""
    script = (Path(__file__).parent / "browser_checks.js").read_text()
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", f"<script>{script}</script></body>"))
    dom = chromium("--virtual-time-budget=10000", "--dump-dom", probe.resolve().as_uri())
    found = re.search(r'<pre id="browser-checks">(.*?)</pre>', dom, flags=re.S)
    assert found, dom[-2000:]
    return json.loads(html.unescape(found.group(1)))


def test_the_report_reads_well_in_a_browser_at_1280_px(report):
    checks = measure(report)
    assert checks["width"] == WIDTH
    assert checks["first_section"] == "findings" and checks["before_findings"] == []
    assert checks["images"] >= 6 and checks["broken_images"] == []
    assert checks["overflowing"] == [] and checks["page_width"] <= WIDTH
    assert checks["cells"] > 100 and checks["squeezed"] == []


def test_the_report_is_one_file_with_named_points(report):
    page = report.read_text()
    assert not (report.parent / "report-images").exists()
    assert 'src="data:image/svg+xml;base64,' in page
    # Points named as a reader says them, the raw factor paths as their hover title.
    assert ('<span title="workload.ratio=0:1, middleware.workers=8, load.clients=4">'
            '<span class="level">read-only</span>, <span class="level">8 workers</span>, '
            '<span class="level">4 clients</span></span>') in page
    assert '<span class="level">sets:gets 1:9</span>' in page
    # The study's allocation of variation sits in the findings, beside ours.
    findings = page[page.index('<section id="findings">'):page.index('<section id="throughput">')]
    assert '<table class="findings-study">' in findings and "60.0 / " in findings
    text = re.sub(r"<[^>]+>", " ", re.sub(r'title="[^"]*"', "", page))
    assert "workload.ratio=" not in text
    # Nor does any factor's path show outside the hover titles and the experiment file:
    # axes, headers and sentences use its reader name.
    shown = re.sub(r"<(pre|code)>.*?</\1>", " ", re.sub(r'title="[^"]*"', "", page),
                   flags=re.S)
    shown = re.sub(r"<[^>]+>", " ", shown)
    for path in ("workload.ratio", "middleware.workers", "load.clients"):
        assert path not in shown, path


def test_a_screenshot_of_the_findings(report, tmp_path):
    shot = tmp_path / "report.png"
    chromium(f"--screenshot={shot}", report.resolve().as_uri())
    assert shot.read_bytes()[:4] == b"\x89PNG"
