"""Whether a results database is one this cachelab fully understands, checked before
anything else reads or writes it.

Understood means: intact (`PRAGMA quick_check`), its `_migrations` a prefix of this
cachelab's migrations by name and in order (not merely as many: a newer cachelab's
`0006_x` is not our `0006_y`), and every table those migrations create present with
exactly their columns, in their order. Anything else is a
`UserError` that names the file and what is wrong, so a corrupt database, one from a newer
cachelab or one edited by hand is refused in one line and never written to.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from cachelab.errors import UserError


class Migration(Protocol):
    """What the checks need of a migration (schema.py's `Migration`, which imports this
    module): its name, and how to apply it, to learn the columns it makes."""

    @property
    def name(self) -> str: ...

    @property
    def apply(self) -> Callable[[sqlite3.Connection], None]: ...

MIGRATIONS_TABLE = ("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, "
                    "applied_at REAL NOT NULL)")

#: What an SQLite error means to a user, by its primary result code.
_MEANINGS = {
    "SQLITE_CORRUPT": "the database is corrupt; restore it from a copy",
    "SQLITE_NOTADB": "not an SQLite database",
    "SQLITE_READONLY": "cannot write to it (read-only file or file system)",
    "SQLITE_CANTOPEN": "cannot open it",
    "SQLITE_FULL": "the disk is full",
    "SQLITE_IOERR": "input/output error",
    "SQLITE_BUSY": "locked by another process",
    "SQLITE_PERM": "permission denied",
}


def describe(path: Path, exc: sqlite3.Error) -> str:
    """One line naming the file and what SQLite found wrong with it."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    meaning = _MEANINGS.get("_".join(code.split("_")[:2]))
    detail = _one_line(str(exc))
    return f"{path}: {meaning} ({detail})" if meaning else f"{path}: {detail}"


def check(conn: sqlite3.Connection, path: Path, migrations: Sequence[Migration]) -> int:
    """Raises a UserError unless the database is one these migrations made (or an empty
    one); returns how many of them it has. Reads only."""
    intact(conn, path)
    applied = applied_names(conn, path)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if not applied:
        others = [t for t in _tables(conn) if t != "_migrations"]
        if others:
            raise UserError(f"{path}: not a cachelab results database (it has tables "
                            f"{', '.join(others[:3])} but no cachelab migrations)")
    known_prefix(applied, [m.name for m in migrations], version, path)
    if applied:
        _same_columns(conn, path, expected_columns(tuple(migrations[:len(applied)])))
    return len(applied)


def intact(conn: sqlite3.Connection, path: Path) -> None:
    """`PRAGMA quick_check`: every page of every table and index read once (0.7 s for
    420 MB in the page cache), which a malformed page cannot pass."""
    try:
        problems = [row[0] for row in conn.execute("PRAGMA quick_check")]
    except sqlite3.DatabaseError as exc:
        raise UserError(describe(path, exc)) from None
    if problems != ["ok"]:
        first = _one_line(problems[0].replace("*** in database main ***", ""))
        raise UserError(f"{path}: the database is corrupt; restore it from a copy "
                        f"(PRAGMA quick_check found {len(problems)} problem(s), the first: "
                        f"{first})")


def applied_names(conn: sqlite3.Connection, path: Path | str) -> list[str]:
    """The names in `_migrations`, in the order they were applied ([] without the table)."""
    columns = _columns(conn, "_migrations")
    if not columns:
        return []
    if columns != ("name", "applied_at"):
        raise UserError(f"{path}: table _migrations has columns {', '.join(columns)}, not "
                        "name, applied_at: not a database this cachelab wrote")
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def known_prefix(applied: list[str], known: list[str], version: int,
                 path: Path | str) -> None:
    """Refuses migrations this cachelab does not know, or knows in another order."""
    unknown = [name for name in applied if name not in known]
    if unknown:
        raise UserError(f"{path}: written by a newer cachelab (its migration {unknown[0]!r} "
                        "is unknown to this one); upgrade cachelab to use it")
    if version > len(known):
        raise UserError(f"{path}: schema version {version}, newer than this cachelab knows "
                        f"({len(known)}); upgrade cachelab to use it")
    if applied != known[:len(applied)] or version != len(applied):
        raise UserError(f"{path}: its migrations ({', '.join(applied) or 'none'}, schema "
                        f"version {version}) are not in this cachelab's order: not a database "
                        "it can read or write safely")


@functools.lru_cache(maxsize=8)
def expected_columns(migrations: tuple[Migration, ...]) -> dict[str, tuple[str, ...]]:
    """Every table and its columns, as these migrations create them on an empty database."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        conn.execute(MIGRATIONS_TABLE)
        for migration in migrations:
            migration.apply(conn)
        return {table: _columns(conn, table) for table in _tables(conn)}
    finally:
        conn.close()


def _same_columns(conn: sqlite3.Connection, path: Path,
                  expected: dict[str, tuple[str, ...]]) -> None:
    for table, want in expected.items():
        found = _columns(conn, table)
        if not found:
            raise UserError(f"{path}: table {table} is missing: not the schema this cachelab "
                            "wrote")
        missing = [c for c in want if c not in found]
        extra = [c for c in found if c not in want]
        if missing:
            instead = f" (it has {extra[0]!r} instead: renamed?)" if extra else ""
            raise UserError(f"{path}: table {table} has no column {missing[0]!r}{instead}: "
                            "not the schema this cachelab wrote")
        if extra:
            raise UserError(f"{path}: table {table} has a column {extra[0]!r} this cachelab "
                            "does not know: not the schema it wrote")
        if found != want:
            raise UserError(f"{path}: table {table} has its columns in another order than "
                            "this cachelab's: not the schema it wrote")


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [row[0] for row in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "ORDER BY name")]


def _columns(conn: sqlite3.Connection, table: str) -> tuple[str, ...]:
    return tuple(row[0] for row in conn.execute(
        "SELECT name FROM pragma_table_info(?) ORDER BY cid", (table,)))


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
