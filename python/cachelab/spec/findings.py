"""`[[study.findings]]`: a study's phenomena as it states them (the thesis's QoS knee, its
peak throughput and where, its scaling ratios, its CPU breakdown), each with the rule that
says whether ours shows it too. Pure parsing; every mistake names its field.

    [[study.findings]]
    cite = "section 3.2.1"
    what = "peak"                      # peak | knee | ratio | cpu
    along = "servers.instances"        # the swept factor it runs along (not for cpu)
    where = { "servers.pinning" = "none" }   # the other factors' levels (optional)
    level = 6                          # peak: where the study's was; knee: its last level
    throughput = 512000                #   under the QoS target (optional for knee, ratio)
    appears = [6]                      # peak, knee: the levels at which ours counts as
                                       # the same; ratio: [low, high] bounds of ours

    what = "ratio": throughput at level `to` over that at level `from` (`ratio`: the
    study's, optional). what = "cpu": the study's shares of its server's CPU in percent
    (`usr`, `sys`, `soft`), ours from the server host's cgroup at the point `where`
    picks (the one of highest throughput); it appears when the kernel's share is above
    the server's own (user) share, as the study found.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from cachelab.errors import UserError

WHAT = ("peak", "knee", "ratio", "cpu")
_FIELDS = {"peak": ("level", "throughput", "appears"),
           "knee": ("level", "throughput", "appears"),
           "ratio": ("from", "to", "ratio", "appears"),
           "cpu": ("usr", "sys", "soft", "host")}
_REQUIRED = {"peak": ("level", "appears"), "knee": ("level", "appears"),
             "ratio": ("from", "to", "appears"), "cpu": ("usr", "sys")}


@dataclass(frozen=True)
class Finding:
    cite: str
    what: str
    #: The factor it runs along (None for cpu), and the other factors' levels.
    along: str | None
    where: tuple[tuple[str, object], ...]
    #: peak/knee: the study's level; ratio: its from and to levels.
    level: object = None
    from_level: object = None
    to_level: object = None
    throughput: float | None = None
    ratio: float | None = None
    #: peak/knee: levels that count as ours showing it; ratio: (low, high).
    appears: tuple[object, ...] = ()
    #: cpu: the study's shares (percent) and our host to read.
    usr: float | None = None
    sys: float | None = None
    soft: float | None = None
    host: str = "server1"


def parse(raw: object, where: str, factor_paths: Sequence[str],
          field_paths: Collection[str]) -> Finding:
    """One finding; `factor_paths` are the experiment's swept factors."""
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a table, got {type(raw).__name__}")
    what = raw.get("what")
    if what not in WHAT:
        raise UserError(f"{where}.what: must be one of {', '.join(WHAT)}, got {what!r}")
    known = ("cite", "what", "along", "where", *_FIELDS[what])
    for key in raw:
        if key not in known:
            raise UserError(f"{where}.{key}: unknown field for what = {what!r} (expected "
                            f"one of {', '.join(known)})")
    for key in ("cite", *_REQUIRED[what]):
        if key not in raw:
            raise UserError(f"{where}.{key}: missing (what = {what!r} needs "
                            f"{', '.join(_REQUIRED[what])})")
    cite = raw["cite"]
    if not isinstance(cite, str) or not cite.strip():
        raise UserError(f"{where}.cite: missing (text)")
    along = raw.get("along")
    if what == "cpu":
        if along is not None:
            raise UserError(f"{where}.along: not for what = \"cpu\" (it reads one point)")
    elif along not in factor_paths:
        raise UserError(f"{where}.along: {along!r} is not a factor of this experiment "
                        f"(factors: {', '.join(factor_paths) or 'none'})")
    fixed = raw.get("where", {})
    if not isinstance(fixed, dict):
        raise UserError(f"{where}.where: expected a table, got {type(fixed).__name__}")
    for path, value in fixed.items():
        if path not in field_paths:
            raise UserError(f"{where}.where.{path}: not a field of this experiment")
        if isinstance(value, dict | list):
            raise UserError(f"{where}.where.{path}: one level, got a {type(value).__name__}")
    numbers = {k: _number(raw[k], f"{where}.{k}") for k in
               ("throughput", "ratio", "usr", "sys", "soft") if k in raw}
    appears = raw.get("appears", [])
    if not isinstance(appears, list) or (what != "cpu" and not appears):
        raise UserError(f"{where}.appears: expected a non-empty list (levels, or "
                        "[low, high] for a ratio)")
    if what == "ratio":
        if len(appears) != 2:
            raise UserError(f"{where}.appears: a ratio's [low, high], got {appears!r}")
        low, high = (_number(v, f"{where}.appears") for v in appears)
        if low > high:
            raise UserError(f"{where}.appears: low {low:g} above high {high:g}")
        appears = [low, high]
    host = raw.get("host", "server1")
    if not isinstance(host, str):
        raise UserError(f"{where}.host: expected a host's name, got {host!r}")
    return Finding(cite.strip(), what, along, tuple(fixed.items()), level=raw.get("level"),
                   from_level=raw.get("from"), to_level=raw.get("to"),
                   throughput=numbers.get("throughput"), ratio=numbers.get("ratio"),
                   appears=tuple(appears), usr=numbers.get("usr"), sys=numbers.get("sys"),
                   soft=numbers.get("soft"), host=host)


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: expected a number, got {value!r}")
    return float(value)
