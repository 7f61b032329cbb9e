"""Migrations are history: each must give every new database the schema it gave the first.

`golden/schema-0001.json` is `sqlite_master` after migration 0001 as the original code (an
f-string over live constants) produced it, recorded before the migration was frozen as text.
"""

import json
import sqlite3
from pathlib import Path

from cachelab import store

GOLDEN = Path(__file__).parent / "golden" / "schema-0001.json"


def _schema(migrations) -> list[list]:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    store.migrate(conn, migrations)
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master "
                        "ORDER BY type, name").fetchall()
    return [list(row) for row in rows]


def test_migration_0001_gives_a_fresh_database_exactly_the_original_schema():
    assert _schema(store.MIGRATIONS[:1]) == json.loads(GOLDEN.read_text())


def test_migration_0001_is_literal_text_not_built_from_live_constants():
    # The text itself, not just its effect: no placeholder left to be filled in later.
    sql = store.schema._INITIAL
    assert "{" not in sql and "}" not in sql
    assert "usr REAL NOT NULL, nice REAL NOT NULL" in sql


def test_every_migration_applies_in_order_on_a_fresh_database():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    assert store.migrate(conn) == len(store.MIGRATIONS)
    names = [r[0] for r in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]
    assert names == [m.name for m in store.MIGRATIONS]
