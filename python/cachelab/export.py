"""The raw data of an experiment as flat tables for notebooks (CSV or Parquet), and the
report's tables by name.

One file per table. Every per-run table carries the point's index and the repetition next
to `run_id`, and `points` and `runs` carry one column per swept factor, so a table can be
grouped by factor without joins. `runs.steady` is 1 for a run whose within-run CV is at
most the experiment's threshold (or could not be judged): the runs the report's means and
designs use.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

from cachelab import paths, validate
from cachelab.errors import UserError
from cachelab.store import Store

#: Per-run tables of the database, exported as they are stored.
RUN_TABLES = ("client_summary", "client_second", "mw_window", "mw_op", "mw_server",
              "mw_histogram", "cpu_sample")
FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    rows: list[tuple]


def tables(s: Store) -> list[Table]:
    exp = s.experiment()
    if exp is None:
        raise UserError(f"{s.path}: no experiment stored yet")
    settings = json.loads(exp["settings"])
    factors = settings["factors"]
    c = s.conn
    points = c.execute("SELECT idx AS point, label, clients, factors, config FROM point "
                       "WHERE experiment_id = ? ORDER BY idx", (exp["id"],)).fetchall()
    values = {p["point"]: json.loads(p["factors"]) for p in points}
    out = [Table("points", ("point", "label", "clients", *factors, "config"),
                 [(p["point"], p["label"], p["clients"],
                   *(values[p["point"]].get(f) for f in factors), p["config"])
                  for p in points])]
    runs = c.execute("SELECT point.idx AS point, run.* FROM run JOIN point ON point.id = "
                     "run.point_id WHERE point.experiment_id = ? ORDER BY run.id",
                     (exp["id"],)).fetchall()
    run_columns = tuple("run_id" if k == "id" else k
                        for k in (runs[0].keys() if runs else ("point", "id")))
    out.append(Table("runs", (*run_columns, "steady", *factors),
                     [(*r, int(_steady(r, settings["cv_threshold"])),
                       *(values[r["point"]].get(f) for f in factors)) for r in runs]))
    for name in RUN_TABLES:
        cur = c.execute(f"SELECT point.idx AS point, run.repetition, t.* FROM {name} t "
                        "JOIN run ON run.id = t.run_id JOIN point ON point.id = run.point_id "
                        "WHERE point.experiment_id = ? ORDER BY t.rowid", (exp["id"],))
        out.append(Table(name, tuple(d[0] for d in cur.description),
                         [tuple(r) for r in cur.fetchall()]))
    return out


def _steady(run, threshold: float) -> bool:
    return validate.is_steady(validate.RunOutcome(run["throughput"], run["cv_within"]),
                              threshold)


def raw_names() -> tuple[str, ...]:
    return ("points", "runs", *RUN_TABLES)


def report_names() -> tuple[str, ...]:
    from cachelab.report.tables import TABLES

    return tuple(TABLES)


def named(s: Store, names: list[str]) -> list[Table]:
    """The tables with the given names: raw ones (`raw_names`) or the report's
    (`report_names`); an unknown name is a UserError listing both."""
    from cachelab.report import sections
    from cachelab.report.tables import TABLES

    unknown = [n for n in names if n not in raw_names() and n not in TABLES]
    if unknown:
        raise UserError(f"--table {unknown[0]!r}: no such table; raw tables: "
                        f"{', '.join(raw_names())}; report tables: {', '.join(TABLES)}")
    raw = {t.name: t for t in tables(s)} if any(n in raw_names() for n in names) else {}
    built = sections.build(s) if any(n in TABLES for n in names) else None
    return [raw[n] if n in raw else TABLES[n](built) for n in names]


def write(directory: Path, fmt: str, dest: Path | None = None,
          names: list[str] | None = None) -> list[Path]:
    """Writes the experiment's raw tables, or the named tables, to `dest` (default
    DIR/export/); returns the files written."""
    if fmt not in FORMATS:
        raise UserError(f"--format: must be one of {', '.join(FORMATS)}, got {fmt!r}")
    with Store.open_existing(directory) as s:
        found = named(s, list(dict.fromkeys(names))) if names else tables(s)
    dest = paths.writable_dir(dest or Path(directory) / "export", "the exported tables")
    writer = _write_csv if fmt == "csv" else _write_parquet
    with paths.writing(dest, "the exported tables"):
        return [writer(t, dest / f"{t.name}.{fmt}") for t in found]


def _write_csv(table: Table, path: Path) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(table.columns)
        w.writerows(table.rows)
    return path


def _write_parquet(table: Table, path: Path) -> Path:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise UserError("--format parquet needs pyarrow (`make deps` installs it); "
                        "--format csv works without it") from None
    columns = {name: [row[i] for row in table.rows] for i, name in enumerate(table.columns)}
    pq.write_table(pa.table(columns), path)
    return path
