"""The checker that builds a frozen dataclass from a TOML table, naming the field at fault
in one line: unknown keys, wrong types (with what was given), each field's own check
(`kinds.setting`), enums by their words, and the small helpers the parser shares with it.
Why not pydantic: see `experiment`."""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from enum import StrEnum
from typing import Any

from cachelab.errors import UserError


def build(cls: type, table: dict, section: str) -> Any:
    """One dataclass from its TOML table: unknown keys, types and ranges checked."""
    hints = typing.get_type_hints(cls)
    known = tuple(f.name for f in dataclasses.fields(cls))
    no_unknown(f"{section}.", table, known)
    values = {}
    for f in dataclasses.fields(cls):
        if f.name not in table:
            continue
        where = f"{section}.{f.name}"
        if "section" in f.metadata:  # a table of its own ([section.name])
            if not isinstance(table[f.name], dict):
                raise UserError(f"{where}: must be a table ([{where}]), got "
                                f"{kind(table[f.name])} {table[f.name]!r}")
            values[f.name] = build(f.metadata["section"], table[f.name], where)
            continue
        if "table" in f.metadata:  # an array of tables ([[section.name]])
            items = table[f.name]
            if not isinstance(items, list) or not all(isinstance(t, dict) for t in items):
                raise UserError(f"{where}: must be an array of tables ([[{where}]])")
            values[f.name] = tuple(build(f.metadata["table"], t, f"{where}[{i}]")
                                   for i, t in enumerate(items, start=1))
            continue
        value = coerce(table[f.name], hints[f.name], where)
        problem = f.metadata.get("check") and f.metadata["check"](value)
        if problem:
            raise UserError(f"{where}: {problem}")
        values[f.name] = value
    return cls(**values)


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Checks a TOML value against a field's annotation (int, float, str, bool, one of a
    StrEnum's words, optional, tuple of ints); ints are accepted for floats."""
    args = typing.get_args(hint)
    if isinstance(hint, enum.EnumType) and issubclass(hint, StrEnum):
        if isinstance(value, str) and value in hint._value2member_map_:
            return hint(value)
        if isinstance(value, str):
            raise UserError(f"{where}: must be one of {', '.join(hint)}, got {value!r}")
        raise UserError(f"{where}: expected a string, got {kind(value)} {value!r}")
    if isinstance(hint, types.UnionType) and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return coerce(value, inner, where)
    if typing.get_origin(hint) is tuple:
        if not isinstance(value, list):
            raise UserError(f"{where}: expected a list, got {kind(value)}")
        return tuple(coerce(v, args[0], where) for v in value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UserError(f"{where}: expected a finite number, got {value!r}")
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint in (str, bool) and isinstance(value, hint):
        return value
    expected = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}
    raise UserError(f"{where}: expected {expected[hint]}, got {kind(value)} {value!r}")


def get(table: dict, key: str, kind: type, default: Any, prefix: str = "") -> Any:
    if key not in table:
        return default
    return coerce(table[key], kind, prefix + key)


def table(doc: dict, key: str, prefix: str = "") -> dict:
    value = doc.get(key, {})
    if not isinstance(value, dict):
        raise UserError(f"{prefix}{key}: must be a table ([{prefix}{key}]), got {kind(value)}")
    return value


def flatten(table: dict, prefix: str = "") -> dict[str, object]:
    """{"load": {"clients": [1, 2]}} and {"load.clients": [1, 2]} both give the path
    "load.clients" (TOML's dotted keys make nested tables; quoted keys do not)."""
    flat: dict[str, object] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[prefix + key] = value
    return flat


#: Fields that were removed, with what replaced them.
REPLACED = {
    "middleware.threads": "removed with the proxy's tokio shell; its data path is the "
                          "event loop (middleware.loops sets how many)",
}


def no_unknown(prefix: str, table: dict, known: tuple[str, ...]) -> None:
    for key in table:
        if f"{prefix}{key}" in REPLACED:
            raise UserError(f"{prefix}{key}: {REPLACED[prefix + key]}")
        if key not in known:
            raise UserError(f"{prefix}{key}: unknown field (expected one of {', '.join(known)})")


def kind(value: object) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
            list: "a list", dict: "a table"}.get(type(value), type(value).__name__)


def plain(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def show(value: object) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
