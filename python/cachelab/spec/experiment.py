"""Experiment files (TOML) parsed into frozen dataclasses; every mistake names its field.

The file describes one run configuration (sections `servers`, `middleware`, `load`,
`workload`) and a sweep over it (`[sweep.factors]`: the cross product of the levels of
each factor, and/or `[[sweep.points]]`: an explicit list of partial configurations, each
crossed with the factors); a file without a sweep is one point, the configuration itself.
docs/experiments.md is the reference for every field.

Parsing is two steps: the document's fields are checked against the dataclasses (in
`sections` and below; unknown key, wrong type, out of range), then each sweep point is the
base configuration with the point's values written over it, checked the same way plus the
rules that tie fields together (`rules.check_run`).

Why dataclasses and this small checker (`fields.build`, `fields.coerce`) rather than
pydantic: the messages are the product here, one line a user acts on, naming the field
path and what was given (`servers.kind: must be one of memcached, redis, got 'mongodb'`,
`colour: unknown field (expected one of ...)`). pydantic v2 names the path too, but its
messages ("Input should be a valid integer, unable to parse string as an integer") say
neither what was given nor what is allowed without a translation layer per error type,
and its lax mode would accept what this file refuses (`true` for 1, "2" for 2) unless
every model is made strict; the sweep's per-level and per-point checks and the rules
between fields stay hand-written either way. So pydantic would add a dependency and about
as much code for vaguer errors.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from cachelab.errors import UserError
from cachelab.spec import fields
from cachelab.spec import study as study_mod
from cachelab.spec import sweep as sweep_mod
from cachelab.spec.kinds import (
    KEY_PATTERNS,
    ROLES,
    Check,
    LoadMode,
    Persistence,
    Pinning,
    ServerKind,
    Timestamps,
    TopologyKind,
    WireProtocol,
    at_least,
    positive,
    setting,
)
from cachelab.spec.order import Order
from cachelab.spec.placement import Placement, PlacementPolicy
from cachelab.spec.rules import MAX_CLIENTS, MAX_HOSTS, MAX_PROCESSES, MIN_QUOTA_MS, check_run
from cachelab.spec.sections import (
    LINK_FIELDS,
    Host,
    LinkProfile,
    Load,
    Middleware,
    RunConfig,
    Servers,
    Topology,
    Workload,
)
from cachelab.spec.warmup import Warmup

# The sections and their words live in `sections` and `kinds`, the rules between fields in
# `rules`; they are named here too, where the package has always found them.
__all__ = [
    "KEY_PATTERNS", "LINK_FIELDS", "MAX_CLIENTS", "MAX_HOSTS", "MAX_PROCESSES", "MIN_QUOTA_MS",
    "ROLES", "Capacity", "Check", "Experiment", "Host", "LinkProfile", "Load", "LoadMode",
    "Middleware", "Persistence", "Pinning", "Placement", "PlacementPolicy", "Point",
    "RunConfig", "ServerKind", "Servers", "StopWhen", "Timestamps", "Topology",
    "TopologyKind", "Validation", "Warmup", "WireProtocol", "Workload", "config_dict",
    "config_from_dict", "field_paths", "load", "parse",
]


@dataclass(frozen=True)
class StopWhen:
    """`[validation.stop_when]`: what must hold before a point needs no more runs."""

    #: The p99's order-statistic interval (95%, over the merged histograms of the point's
    #: steady runs) at most this wide, in ms.
    p99_width_ms: float | None = setting(None, positive)


@dataclass(frozen=True)
class Validation:
    #: Largest coefficient of variation of throughput accepted, as a fraction.
    cv_threshold: float = setting(0.05, positive)
    #: Bound on the runs of one point; None: repetitions + 2.
    max_repetitions: int | None = setting(None, at_least(1))
    #: Extra runs a point may get, beyond max_repetitions, to replace unsteady runs until it
    #: has `repetitions` steady ones (so one bad run does not shrink a factorial design);
    #: None: as many as `repetitions`; 0: none.
    replace_unsteady: int | None = setting(None, at_least(0))
    #: Repeat a point until these hold too (bounded by max_repetitions), as Lancet does.
    stop_when: StopWhen = field(default=StopWhen(), metadata={"check": None,
                                                               "section": StopWhen})


@dataclass(frozen=True)
class Capacity:
    """The capacity search of `load.mode = "capacity"` points and `cachelab capacity`
    (analysis/capacity.py)."""

    #: The latency target in ms (None: the experiment's qos_target_ms).
    target_ms: float | None = setting(None, positive)
    #: The latency percentile held to the target.
    percentile: float = setting(99.0, lambda v: None if 0 < v < 100 else
                           f"must be between 0 and 100 (exclusive), got {v!r}")
    #: Seconds of measured load per trial (longer when the percentile needs more samples).
    trial_s: float = setting(3.0, positive)
    trial_warmup_s: float = setting(0.5, at_least(0))
    #: Trials per rate; the median decides.
    trial_repetitions: int = setting(3, at_least(1))
    start_rate: float = setting(1000.0, positive)
    max_rate: float = setting(2_000_000.0, positive)
    growth: float = setting(2.0, lambda v: None if v > 1 else f"must be > 1, got {v!r}")
    #: The search ends when the bracket is this narrow (a share of the capacity).
    tolerance: float = setting(0.05, positive)


@dataclass(frozen=True)
class Point:
    """One point of the sweep: the factor values that define it, and its configuration."""

    index: int
    factors: tuple[tuple[str, object], ...]
    config: RunConfig

    @property
    def label(self) -> str:
        return ", ".join(f"{path}={fields.show(v)}" for path, v in self.factors) or "base"


@dataclass(frozen=True)
class Experiment:
    name: str
    description: str
    topology: str
    repetitions: int
    run_time_s: float
    warmup_s: float
    cooldown_s: float
    stats_window_s: float
    qos_target_ms: float
    validation: Validation
    #: The factor on the report's x axis (a path such as `load.clients`), or None to choose.
    report_x: str | None
    points: tuple[Point, ...]
    #: The file as written (stored with the results) and its hash (checked by --resume).
    source: str
    #: The order of the runs (order.py) and its seed (None: drawn when the experiment is
    #: first stored, then kept).
    order: Order = Order.RANDOMIZED
    order_seed: int | None = None
    capacity: Capacity = Capacity()
    #: The original study's values this experiment re-creates (`[study]`, spec/study.py).
    study: study_mod.Study | None = None

    @property
    def max_repetitions(self) -> int:
        return max(self.validation.max_repetitions or self.repetitions + 2, self.repetitions)

    @property
    def max_replacements(self) -> int:
        """validation.replace_unsteady, its default (the repetitions) filled in."""
        extra = self.validation.replace_unsteady
        return self.repetitions if extra is None else extra

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()

    @property
    def factor_paths(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for pt in self.points for p, _ in pt.factors))


_SECTIONS: dict[str, type] = {"servers": Servers, "middleware": Middleware, "load": Load,
                              "workload": Workload, "topology": Topology}
_TOP = {"name", "description", "topology", "repetitions", "run_time_s", "warmup_s",
        "order", "order_seed", "capacity",
        "cooldown_s", "stats_window_s", "qos_target_ms", "validation", "report", "sweep",
        "study", *_SECTIONS}


def load(path: Path) -> Experiment:
    """Reads an experiment file; every mistake is a UserError `FILE: field: problem`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    try:
        return parse(text)
    except UserError as exc:
        raise UserError(f"{path}: {exc}") from None


def parse(text: str) -> Experiment:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"invalid TOML: {exc}") from None
    for key in doc:
        if key not in _TOP:
            raise UserError(f"{key}: unknown field (expected one of {', '.join(sorted(_TOP))})")
    name = fields.get(doc, "name", str, None)
    if not name or not name.strip():
        raise UserError("name: missing (every experiment needs a name)")
    if isinstance(doc.get("topology"), str):  # `topology = "netns"`: the kind alone
        doc["topology"] = {"kind": doc["topology"]}
    run_time = fields.get(doc, "run_time_s", float, 60.0)
    warmup = fields.get(doc, "warmup_s", float, 10.0)
    cooldown = fields.get(doc, "cooldown_s", float, 5.0)
    for key, value in (("run_time_s", run_time), ("warmup_s", warmup),
                       ("cooldown_s", cooldown)):
        if value < 0 or (key == "run_time_s" and value <= 0):
            raise UserError(f"{key}: must be {'> 0' if key == 'run_time_s' else '>= 0'}, "
                            f"got {value!r}")
    if warmup + cooldown >= run_time:
        raise UserError(f"warmup_s: warm-up ({warmup:g} s) plus cool-down ({cooldown:g} s) "
                        f"must be shorter than run_time_s ({run_time:g} s)")
    repetitions = fields.get(doc, "repetitions", int, 3)
    if repetitions < 1:
        raise UserError(f"repetitions: must be >= 1, got {repetitions}")
    window = fields.get(doc, "stats_window_s", float, 1.0)
    qos = fields.get(doc, "qos_target_ms", float, 1.0)
    for key, value in (("stats_window_s", window), ("qos_target_ms", qos)):
        if value <= 0:
            raise UserError(f"{key}: must be > 0, got {value!r}")
    validation = fields.build(Validation, fields.table(doc, "validation"), "validation")
    report = fields.table(doc, "report")
    fields.no_unknown("report.", report, ("x",))
    report_x = fields.get(report, "x", str, None, "report.")
    raw = {s: fields.table(doc, s) for s in _SECTIONS}
    _fields(raw, "")
    sweep_mod.check_size(fields.table(doc, "sweep"), repetitions, run_time)
    points = _expand(raw, fields.table(doc, "sweep"))
    if report_x is not None and report_x not in _paths():
        raise UserError(f"report.x: {report_x!r} is not a field (e.g. \"load.clients\")")
    run_order = fields.get(doc, "order", Order, Order.RANDOMIZED)
    order_seed = fields.get(doc, "order_seed", int, None)
    capacity = fields.build(Capacity, fields.table(doc, "capacity"), "capacity")
    topology = ", ".join(dict.fromkeys(p.config.topology.kind for p in points))
    factor_paths = tuple(dict.fromkeys(p for pt in points for p, _ in pt.factors))
    study = (study_mod.parse(doc["study"], factor_paths, _paths()) if "study" in doc
             else None)
    return Experiment(name.strip(), fields.get(doc, "description", str, ""), topology, repetitions,
                      run_time, warmup, cooldown, window, qos, validation, report_x,
                      points, text, run_order, order_seed, capacity, study)


def _expand(raw: dict[str, dict], sweep: dict) -> tuple[Point, ...]:
    """The points of the sweep: each explicit point crossed with every factor combination;
    without either, the base configuration alone is the one point."""
    fields.no_unknown("sweep.", sweep, ("factors", "points", "max_points"))
    factors = fields.flatten(fields.table(sweep, "factors", "sweep."))
    explicit = sweep.get("points", [])
    if not isinstance(explicit, list):
        raise UserError("sweep.points: must be an array of tables ([[sweep.points]])")
    levels: list[tuple[str, list]] = []
    for path, values in factors.items():
        where = f"sweep.factors.{path}"
        if not isinstance(values, list):
            raise UserError(f"{where}: must be a list of levels, got {values!r}")
        if not values:
            raise UserError(f"{where}: empty list of levels")
        for i, value in enumerate(values):
            _fields(_override(raw, {path: value}, "sweep.factors"), f"{where}[{i}]: ")
        levels.append((path, values))
    overrides = []
    for i, table in enumerate(explicit, start=1):
        if not isinstance(table, dict):
            raise UserError(f"sweep.points[{i}]: must be a table")
        flat = fields.flatten(table)
        if not flat:
            raise UserError(f"sweep.points[{i}]: empty point (give at least one field)")
        clash = next((p for p in flat if p in factors), None)
        if clash:
            raise UserError(f"sweep.points[{i}].{clash}: also a factor in [sweep.factors]")
        _fields(_override(raw, flat, f"sweep.points[{i}]"), f"sweep.points[{i}]: ")
        overrides.append(flat)
    points = []
    for index, values in enumerate(sweep_mod.expand(overrides, levels)):
        label = ", ".join(f"{p}={fields.show(v)}" for p, v in values.items())
        config = _config(_override(raw, values, ""), f"sweep point {index + 1} ({label}): ")
        points.append(Point(index, tuple((p, fields.plain(v)) for p, v in values.items()), config))
    return tuple(points)


def _override(raw: dict[str, dict], values: dict[str, object], where: str) -> dict[str, dict]:
    merged = copy.deepcopy(raw)
    for path, value in values.items():
        section, _, name = path.partition(".")
        if path not in _paths():
            raise UserError(f"{where}.{path}: unknown field (a factor is a field such as "
                            "load.clients or middleware.workers)")
        *inner, leaf = name.split(".")
        table = merged[section]
        for key in inner:
            table = table.setdefault(key, {})
        table[leaf] = value
    return merged


def _fields(raw: dict[str, dict], prefix: str) -> RunConfig:
    """The configuration with every field checked on its own (type, range)."""
    try:
        return RunConfig(**{s: fields.build(cls, raw[s], s) for s, cls in _SECTIONS.items()})
    except UserError as exc:
        raise UserError(f"{prefix}{exc}") from None


def _config(raw: dict[str, dict], prefix: str) -> RunConfig:
    """The configuration with its fields and the rules between them checked."""
    config = _fields(raw, prefix)
    try:
        check_run(config)
    except UserError as exc:
        raise UserError(f"{prefix}{exc}") from None
    return config


def field_paths() -> set[str]:
    """Every configuration field by its path (what a sweep may vary)."""
    return _paths()


def _paths() -> set[str]:
    """The fields a sweep may vary (every field but the list of hosts; a field of a
    section inside a section by its full path, `topology.server.egress_mbit`)."""
    def of(prefix: str, cls: type) -> set[str]:
        found = set()
        for f in dataclasses.fields(cls):
            if "section" in f.metadata:
                found |= of(f"{prefix}{f.name}.", f.metadata["section"])
            elif "table" not in f.metadata:
                found.add(prefix + f.name)
        return found

    return {p for s, cls in _SECTIONS.items() for p in of(f"{s}.", cls)}


def config_from_dict(d: dict) -> RunConfig:
    """The configuration back from `config_dict`'s plain data (as stored with a point);
    sections missing from an older database take their defaults."""
    def plain(table: dict) -> dict:
        return {k: [plain(x) if isinstance(x, dict) else x for x in v] if isinstance(v, list)
                else plain(v) if isinstance(v, dict) else v
                for k, v in table.items() if v is not None}

    tables = {s: plain(d.get(s, {})) for s in _SECTIONS}
    if "load" in d and "placement" not in d["load"]:
        tables["load"]["placement"] = "round-robin"  # stored before "even" was the default
    return RunConfig(**{s: fields.build(cls, tables[s], s) for s, cls in _SECTIONS.items()})


def config_dict(config: RunConfig) -> dict:
    """The configuration as plain data (for the database and the report)."""
    return dataclasses.asdict(config)
