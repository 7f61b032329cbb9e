"""`make demo`'s experiment, run in CI through the same code path with shorter runs."""

import io
import re
import sqlite3

from cachelab import store
from cachelab.binaries import REPO_ROOT, find_binary
from cachelab.commands import run as run_cmd
from cachelab.progress import Progress

SHORTER = {"repetitions": "1", "run_time_s": "2", "warmup_s": "0.5", "cooldown_s": "0.5"}


def test_the_demo_experiment_runs_and_writes_its_report(proxy_binary, tmp_path):
    find_binary("cachelab-load")
    text = (REPO_ROOT / "experiments" / "demo.toml").read_text()
    for key, value in SHORTER.items():
        text, n = re.subn(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
        assert n == 1, key
    path = tmp_path / "demo.toml"
    path.write_text(text)
    outcome, page = run_cmd.run(path, tmp_path / "out", progress=Progress(io.StringIO()))
    with sqlite3.connect(tmp_path / "out" / store.FILENAME) as db:
        assert db.execute("SELECT count(*) FROM point").fetchone()[0] == 12
        assert db.execute("SELECT count(*) FROM run").fetchone()[0] >= 12
        assert db.execute("SELECT min(throughput) FROM run").fetchone()[0] > 0
        assert db.execute("SELECT sum(misses) FROM run").fetchone()[0] == 0
    html = page.read_text()
    assert "QoS" in html or "qos" in html
    images = list((tmp_path / "out" / "report-images").glob("*.png"))
    assert len(images) >= 5
