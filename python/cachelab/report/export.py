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
from pathlib import Path

from cachelab import paths
from cachelab.errors import UserError
from cachelab.report import sections
from cachelab.report.tables import TABLES
from cachelab.run import validate
from cachelab.store import RUN_TABLES, Store, Table

FORMATS = ("csv", "parquet")


def tables(s: Store) -> list[Table]:
    exp = s.require_experiment()
    factors = exp.settings["factors"]
    points = s.points(exp.id)
    values = {p.index: p.factors for p in points}
    out = [Table("points", ("point", "label", "clients", *factors, "config"),
                 [(p.index, p.label, p.clients, *(p.factors.get(f) for f in factors),
                   json.dumps(p.config, sort_keys=True)) for p in points])]
    runs = s.raw_table(exp.id, "run")
    columns = tuple("run_id" if k == "id" else k for k in runs.columns)
    point, throughput, cv = (columns.index(k) for k in ("point", "throughput", "cv_within"))
    out.append(Table("runs", (*columns, "steady", *factors), [
        (*r, int(validate.is_steady(validate.RunOutcome(r[throughput], r[cv]),
                                    exp.settings["cv_threshold"])),
         *(values[r[point]].get(f) for f in factors)) for r in runs.rows]))
    out += [s.raw_table(exp.id, name) for name in RUN_TABLES]
    return out


def raw_names() -> tuple[str, ...]:
    return ("points", "runs", *RUN_TABLES)


def report_names() -> tuple[str, ...]:
    return tuple(TABLES)


def named(s: Store, names: list[str]) -> list[Table]:
    """The tables with the given names: raw ones (`raw_names`) or the report's
    (`report_names`); an unknown name is a UserError listing both."""
    unknown = [n for n in names if n not in raw_names() and n not in TABLES]
    if unknown:
        raise UserError(f"--table {unknown[0]!r}: no such table; raw tables: "
                        f"{', '.join(raw_names())}; report tables: {', '.join(TABLES)}")
    raw = {t.name: t for t in tables(s)} if any(n in raw_names() for n in names) else {}
    built = sections.build(s) if any(n in TABLES for n in names) else None
    return [raw[n] if n in raw or built is None else TABLES[n](built) for n in names]


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
