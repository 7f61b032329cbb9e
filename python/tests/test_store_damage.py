"""A results database cachelab does not fully understand, or a directory it cannot write:
`report`, `export`, `compare` and `run` say so in one line naming the file, exit 1, and
leave the database as it was.

The databases are damaged as the hostile-input review of issue 26 did: 4 KiB of garbage
in the middle, a migration from a newer cachelab, a renamed or dropped column. The
read-only directories are real: mode 0555 (for root, run with the capabilities that
override it dropped), and a read-only bind mount in a mount namespace of its own.
"""

import hashlib
import io
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

import cachelab
from cachelab import store
from cachelab.cli import main
from cachelab.errors import UserError
from cachelab.hosts import hostinfo
from cachelab.run.progress import Progress
from cachelab.run.runner import run_experiment
from cachelab.spec import experiment as spec

EXPERIMENT = """
name = "damaged"
order = "sweep"
repetitions = 2
run_time_s = 10
warmup_s = 2
cooldown_s = 1
[validation]
cv_threshold = 0.05
max_repetitions = 2
[sweep.factors]
"load.clients" = [1, 2]
"""


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> Path:
    """A finished experiment stored by the runner (runs from a synthetic executor), its
    write-ahead log checkpointed away, as a copied directory would be."""
    out = tmp_path_factory.mktemp("cachelab-stored") / "exp"
    host = hostinfo.collect()

    def execute(exp, point, repetition, directory):
        summary = store.RunSummary(100.0 + repetition, 1.0, 0.5, 0.9, 1.2, 1.5, 2.0,
                                   10, 0, 0, 0.01)
        return store.RunRecord(point.index, repetition, time.time(), time.time() + 10,
                               summary, host, (), (), (), {"note.txt": b"x" * 3000})

    run_experiment(spec.parse(EXPERIMENT), out, progress=Progress(io.StringIO()),
                   execute=execute)
    edit(out / store.FILENAME)
    (out / "experiment.toml").write_text(EXPERIMENT)
    return out


@pytest.fixture
def exp(stored, tmp_path) -> Path:
    return Path(shutil.copytree(stored, tmp_path / "exp"))


def edit(db: Path, *statements: str) -> None:
    """Runs the statements on the database and leaves nothing in its write-ahead log."""
    with closing(sqlite3.connect(db, isolation_level=None)) as conn:
        for sql in statements:
            conn.execute(sql)
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def corrupt(db: Path) -> str:
    """4 KiB of garbage over the page in the middle of the file."""
    size = db.stat().st_size
    with open(db, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(random.Random(26).randbytes(4096))
    return "the database is corrupt"


def newer(db: Path) -> str:
    edit(db, "INSERT INTO _migrations VALUES ('0006_from_a_newer_cachelab', 0)",
         "PRAGMA user_version = 6")
    return "written by a newer cachelab (its migration '0006_from_a_newer_cachelab'"


def same_count_other_name(db: Path) -> str:
    # As many migrations as this cachelab has, but not the same ones.
    edit(db, "UPDATE _migrations SET name = '0005_another_branch' "
             "WHERE name = '0005_run_send_lag'")
    return "written by a newer cachelab (its migration '0005_another_branch' is unknown"


def renamed_column(db: Path) -> str:
    edit(db, "ALTER TABLE run RENAME COLUMN throughput TO tput")
    return "table run has no column 'throughput' (it has 'tput' instead: renamed?)"


def dropped_column(db: Path) -> str:
    edit(db, "ALTER TABLE mw_op DROP COLUMN rt_hdr")
    return "table mw_op has no column 'rt_hdr'"


def foreign(db: Path) -> str:
    db.unlink()
    edit(db, "CREATE TABLE notes (text TEXT)")
    return "not a cachelab results database (it has tables notes"


def commands(d: Path, elsewhere: Path) -> dict[str, list[str]]:
    return {
        "report": ["report", str(d)],
        "export": ["export", str(d)],
        "compare": ["compare", str(d), str(d), "--out", str(elsewhere / "cmp")],
        "run --resume": ["run", str(d / "experiment.toml"), "--out", str(d), "--resume"],
        "run --again": ["run", str(d / "experiment.toml"), "--out", str(d), "--again"],
    }


def digest(db: Path) -> str:
    """The database's content: the file and its write-ahead log (not the `-shm` index,
    which readers write)."""
    wal = db.with_name(db.name + "-wal")
    return hashlib.sha256(db.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
                          ).hexdigest()


def one_line(err: str, *fragments: str) -> None:
    assert err.startswith("cachelab: error: ") and err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err, err


@pytest.mark.parametrize("damage", [corrupt, newer, same_count_other_name, renamed_column,
                                    dropped_column, foreign])
@pytest.mark.parametrize("command", ["report", "export", "compare", "run --resume",
                                     "run --again"])
def test_a_database_cachelab_does_not_understand_is_one_line_and_left_alone(
        damage, command, exp, tmp_path, capsys):
    db = exp / store.FILENAME
    what = damage(db)
    before = digest(db)
    capsys.readouterr()
    assert main(commands(exp, tmp_path)[command]) == 1
    one_line(capsys.readouterr().err, f"{db}: {what}")
    assert digest(db) == before
    assert not (exp / "report.html").exists() and not (exp / "export").exists()
    assert not (exp / "runs").exists() and not (tmp_path / "cmp").exists()


def test_the_same_commands_work_on_the_undamaged_copy(exp, tmp_path, capsys):
    # The control for the test above: each command gets past the database.
    assert main(["report", str(exp)]) == 0
    assert main(["export", str(exp)]) == 0
    assert main(commands(exp, tmp_path)["compare"]) == 0
    assert (exp / "report.html").exists() and (exp / "export" / "runs.csv").exists()


def test_reading_does_not_write_the_database(exp):
    db = exp / store.FILENAME
    before = digest(db)
    with store.Store.open_existing(exp) as s:
        assert s.read_only and s.experiment().name == "damaged"
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            s.conn.execute("DELETE FROM run")
    assert digest(db) == before


def test_a_read_error_past_the_checks_is_one_line_naming_the_file(exp):
    message = f"^{re.escape(str(exp / store.FILENAME))}: no such table: nope$"
    with pytest.raises(UserError, match=message), store.Store.open_existing(exp) as s:
        s.conn.execute("SELECT * FROM nope")


def test_an_older_database_is_migrated_when_first_read(tmp_path):
    conn = sqlite3.connect(tmp_path / store.FILENAME, isolation_level=None)
    store.migrate(conn, store.MIGRATIONS[:2])
    conn.close()
    with store.Store.open_existing(tmp_path) as s:
        assert s.version == len(store.MIGRATIONS) and not s.read_only


def test_migrate_itself_refuses_an_unknown_migration_and_writes_nothing(tmp_path):
    conn = sqlite3.connect(tmp_path / "r.db", isolation_level=None)
    store.migrate(conn, store.MIGRATIONS[:2])
    conn.execute("UPDATE _migrations SET name = '0002_elsewhere' WHERE name = "
                 "'0002_run_fell_behind'")
    with pytest.raises(UserError, match="'0002_elsewhere' is unknown"):
        store.migrate(conn)
    assert conn.execute("SELECT count(*) FROM _migrations").fetchone()[0] == 2
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'run_host'"
                        ).fetchone()[0] == 0


def test_an_extra_column_is_refused_and_an_extra_table_is_not(exp):
    edit(exp / store.FILENAME, "CREATE TABLE my_notes (text TEXT)")
    with store.Store.open_existing(exp) as s:
        assert s.experiment() is not None
    edit(exp / store.FILENAME, "ALTER TABLE cpu_sample ADD COLUMN guest REAL")
    with pytest.raises(UserError, match="table cpu_sample has a column 'guest' this "
                                        "cachelab does not know"):
        store.Store.open_existing(exp)


# Read-only directories, in a child process: as root, a mode cannot stop a write, and a
# mount namespace is a process's own.

#: Runs each argv (JSON lists in argv[1]) through the CLI in one process (imports are slow)
#: and prints [exit status, stderr] for each.
CLI_SCRIPT = """
import contextlib, io, json, sys
from cachelab.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        results.append((main(argv), err.getvalue()))
print(json.dumps(results))
"""


def _cachelab(prefix: list[str], argvs: list[list[str]], cwd: Path) -> list[tuple[int, str]]:
    env = {**os.environ, "PYTHONPATH": str(Path(cachelab.__file__).parents[1])}
    done = subprocess.run([*prefix, sys.executable, "-c", CLI_SCRIPT, json.dumps(argvs)],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return [tuple(r) for r in json.loads(done.stdout.splitlines()[-1])]


def _usable(prefix: list[str], probe: Path) -> list[str]:
    """`prefix`, if a write into `probe` fails under it (else the test is skipped)."""
    done = subprocess.run([*prefix, "touch", str(probe / "cachelab-probe")],
                          capture_output=True, text=True)
    if done.returncode == 0 or "cannot touch" not in done.stderr:
        pytest.skip(f"{' '.join(prefix[:3])}: cannot make a read-only directory here "
                    f"({done.stderr.strip() or 'the write succeeded'})")
    return prefix


def without_write_permission(d: Path) -> list[str]:
    """Mode 0555; root runs without the capabilities that let it write anyway."""
    d.chmod(0o555)
    if os.geteuid() != 0:
        return _usable([], d)
    return _usable(["setpriv", "--bounding-set", "-dac_override,-dac_read_search"], d)


def on_a_read_only_file_system(d: Path) -> list[str]:
    """A read-only bind mount of `d` over itself, in a mount namespace of its own."""
    mount = 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$@"'
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    return _usable([*unshare, "sh", "-c", mount, str(d)], d)


@pytest.mark.parametrize(("make_read_only", "reason"), [
    (without_write_permission, "Permission denied"),
    (on_a_read_only_file_system, "Read-only file system"),
])
def test_an_output_directory_that_cannot_be_written_is_one_line(make_read_only, reason, exp,
                                                                tmp_path):
    db = exp / store.FILENAME
    before = digest(db)
    try:
        prefix = make_read_only(exp)
        cases = [
            (["report", str(exp)], f"{exp}: cannot write the report here ({reason})"),
            (["export", str(exp)], f"{exp / 'export'}: cannot create a directory for the "
                                   f"exported tables ({reason})"),
            (["compare", str(exp), str(exp), "--out", str(exp / "cmp")],
             f"{exp / 'cmp'}: cannot create a directory for the comparison ({reason})"),
            (["run", str(exp / "experiment.toml"), "--out", str(exp), "--resume"],
             f"{exp}: cannot write results here ({reason})"),
            (["run", str(exp / "experiment.toml"), "--out", str(exp / "new")],
             f"{exp / 'new'}: cannot create a directory for results ({reason})"),
        ]
        readable = ["export", str(exp), "--dest", str(tmp_path / "out")]
        results = _cachelab(prefix, [argv for argv, _ in cases] + [readable], tmp_path)
        for (argv, message), (code, err) in zip(cases, results[:-1], strict=True):
            assert code == 1, (argv, err)
            one_line(err, message)
            assert "not a cachelab results database" not in err
        # Reading it there works: its tables go to a directory that can be written.
        assert results[-1] == (0, "")
        assert (tmp_path / "out" / "runs.csv").read_text().count("\n") == 5
    finally:
        exp.chmod(0o755)
    assert digest(db) == before
    assert sorted(p.name for p in exp.iterdir()) == ["experiment.toml", "results.db"]
