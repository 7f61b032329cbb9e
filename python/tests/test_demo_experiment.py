"""`make demo`'s experiment, run in CI through the same code path with shorter runs."""

import io
import re
import shlex
import sqlite3

from cachelab import cli, store
from cachelab.commands import run as run_cmd
from cachelab.hosts.binaries import REPO_ROOT, find_binary
from cachelab.run.progress import Progress

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
    assert html.count('<img src="data:image/svg+xml;base64,') >= 5


def demo_command() -> list[str]:
    """The arguments `make demo` gives `cachelab`, read from the Makefile itself."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    line = re.search(r"^demo:.*\n\t(.*)$", makefile, flags=re.M).group(1)
    argv = shlex.split(line)
    assert argv[0].endswith("/cachelab"), line
    return argv[1:]


def test_make_demo_succeeds_again_and_keeps_the_previous_results(proxy_binary, tmp_path,
                                                                 capsys):
    find_binary("cachelab-load")
    text = (REPO_ROOT / "experiments" / "demo.toml").read_text()
    for key, value in {**SHORTER, "run_time_s": "1", "warmup_s": "0", "cooldown_s": "0"}.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, flags=re.M)
    # Fewer points: this test is about running twice, the test above covers the sweep.
    text = text.replace('"load.clients" = [1, 4, 16]', '"load.clients" = [4]')
    text = text.replace('"middleware.workers" = [8, 32]', '"middleware.workers" = [8]')
    (tmp_path / "demo.toml").write_text(text)
    argv = [str(tmp_path / "demo.toml") if a == "experiments/demo.toml" else
            str(tmp_path / a) if a == "demo-out" else a for a in demo_command()]
    assert str(tmp_path / "demo-out") in argv, argv
    for attempt in range(3):
        assert cli.main(argv) == 0, f"make demo failed on attempt {attempt + 1}"
        assert (tmp_path / "demo-out" / "report.html").exists()
    assert (tmp_path / "demo-out.previous" / store.FILENAME).exists()
    assert "demo-out.previous" in capsys.readouterr().out
