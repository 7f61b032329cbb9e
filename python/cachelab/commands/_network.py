"""Reading a queueing network for `cachelab model mva` from TOML.

    think_ms = 0.0            # optional
    [[station]]
    name = "workers"
    kind = "multi"            # delay | queue | multi
    servers = 16              # multi only
    visits = 1.0
    service_ms = 0.25

Errors name the field as `station[i].field`, counting stations from 1 in file order.
"""

from __future__ import annotations

import math
import tomllib
from pathlib import Path
from typing import TypeGuard

from cachelab.analysis.mva import KINDS, Network, Station
from cachelab.errors import UserError

_TOP_FIELDS = ("station", "think_ms")
_STATION_FIELDS = ("name", "kind", "servers", "visits", "service_ms")


def load_network(path: Path) -> Network:
    """Reads and checks a network file; every mistake is a UserError naming file and field."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: invalid TOML: {exc}") from exc
    try:
        return parse_network(doc)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from exc


def parse_network(doc: dict[str, object]) -> Network:
    """Builds the network from a parsed TOML document (times stay in milliseconds)."""
    _no_unknown("", doc, _TOP_FIELDS)
    think = doc.get("think_ms", 0.0)
    if not _is_number(think) or think < 0:
        raise UserError(f"think_ms: must be a number >= 0, got {think!r}")
    tables = doc.get("station")
    if not isinstance(tables, list) or not tables:
        raise UserError("station: at least one [[station]] table is required")
    stations: list[Station] = []
    for i, table in enumerate(tables, start=1):
        stations.append(_station(f"station[{i}]", table, stations))
    return Network(tuple(stations), float(think))


def _station(where: str, table: object, earlier: list[Station]) -> Station:
    if not isinstance(table, dict):
        raise UserError(f"{where}: must be a table ([[station]])")
    _no_unknown(f"{where}.", table, _STATION_FIELDS)
    for field in ("name", "kind", "visits", "service_ms"):
        if field not in table:
            raise UserError(f"{where}.{field}: missing")
    name = table["name"]
    if not isinstance(name, str) or not name.strip():
        raise UserError(f"{where}.name: must be a non-empty string")
    for j, other in enumerate(earlier, start=1):
        if other.name == name:
            raise UserError(f"{where}.name: {name!r} is already the name of station[{j}]")
    kind = table["kind"]
    if kind not in KINDS:
        raise UserError(f"{where}.kind: must be one of {', '.join(KINDS)}, got {kind!r}")
    servers = table.get("servers")
    if kind == "multi":
        if servers is None:
            raise UserError(f"{where}.servers: missing (a multi station needs its number "
                            "of servers)")
        if isinstance(servers, bool) or not isinstance(servers, int) or servers < 1:
            raise UserError(f"{where}.servers: must be an integer >= 1, got {servers!r}")
    elif servers is not None:
        raise UserError(f"{where}.servers: only a multi station has servers (kind is {kind})")
    for field in ("visits", "service_ms"):
        value = table[field]
        if not _is_number(value) or value <= 0:
            raise UserError(f"{where}.{field}: must be a positive number, got {value!r}")
    return Station(name, kind, float(table["visits"]), float(table["service_ms"]),
                   1 if servers is None else servers)


def _no_unknown(prefix: str, table: dict[str, object], known: tuple[str, ...]) -> None:
    """Rejects unknown keys, so a typo (servce_ms) is an error rather than a silent default."""
    for key in table:
        if key not in known:
            raise UserError(f"{prefix}{key}: unknown field (expected one of {', '.join(known)})")


def _is_number(value: object) -> TypeGuard[float]:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value))
