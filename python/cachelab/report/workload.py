"""The workload each point sent (issue 35 part 9): value and key sizes, key popularity,
the gaps between sends and the hit ratio over time, from one run's load generator reports.

Sizes come from the reports' `sent` object (power-of-two buckets of what was written and
asked) when the load generator kept it; older reports lack it, and then the sizes are the
configured ones (a fixed size or a range; a named distribution is only named). Popularity
is `sent.keys.top`, the most asked keys' counts: one instance's exactly, several
instances' lists merged by count, which ranks them as one list would when the instances
draw from one key space. Gaps are the open loop's and a replay's `send_intervals_ns` (a
closed loop has none). The hit ratio is every instance's GET hits over GETs, second by
second over the whole run (warm-up and cool-down included).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.report.data import PointResult
from cachelab.store import Store

#: Points shown, at most (the first ones of the sweep).
MAX_POINTS = 6


@dataclass(frozen=True)
class Bucket:
    low: int
    high: int
    count: float


@dataclass(frozen=True)
class Sizes:
    buckets: tuple[Bucket, ...]
    #: "sent" (counted by the load generator) or "configured".
    source: str
    #: What the configuration says, for a reader (`fb_value`, `100 B`, `32-4096 B`).
    described: str


@dataclass(frozen=True)
class PointWorkload:
    point: PointResult
    mode: str
    values: Sizes | None
    keys: Sizes | None
    #: The most asked keys' counts, descending; distinct keys; whether counting stopped.
    top: tuple[int, ...]
    distinct: int | None
    capped: bool
    gaps_ns: tuple[int, ...]
    #: (second, hit ratio) of the seconds that had GETs.
    hit_ratio: tuple[tuple[int, float], ...]
    trace: str | None


def workloads(s: Store, points: Sequence[PointResult]) -> list[PointWorkload]:
    """Each measured point's workload (the first MAX_POINTS), from its first run."""
    out = []
    for p in [p for p in points if p.run_ids][:MAX_POINTS]:
        docs = [json.loads(raw) for raw in s.load_reports(p.run_ids[:1])]
        if docs:
            out.append(from_reports(p, docs))
    return out


def from_reports(point: PointResult, docs: Sequence[dict]) -> PointWorkload:
    """A point's workload from its run's load generator reports (parsed JSON)."""
    conf = docs[0].get("configuration", {})
    sent = [d["sent"] for d in docs if isinstance(d.get("sent"), dict)]
    values = (_merged([x.get("value_bytes", []) for x in sent], "sent", _value_text(conf))
              if sent else _configured_values(conf))
    keys = (_merged([x.get("key_bytes", []) for x in sent], "sent", _key_text(conf))
            if sent else _configured_keys(conf))
    tops = [x.get("keys", {}) for x in sent]
    top = tuple(sorted((int(c) for t in tops for c in t.get("top", [])), reverse=True))
    distinct = sum(int(t.get("distinct", 0)) for t in tops) if tops else None
    gaps = tuple(int(g) for d in docs for g in d.get("send_intervals_ns", ()))
    return PointWorkload(point, str(conf.get("mode", "closed")), values, keys, top,
                         distinct, any(bool(t.get("capped")) for t in tops), gaps,
                         hit_ratio(docs), conf.get("trace"))


def hit_ratio(docs: Sequence[dict]) -> tuple[tuple[int, float], ...]:
    """GET (and multi-GET) hits over hits + misses, each second, every instance."""
    per: dict[int, list[int]] = {}
    for d in docs:
        for row in d.get("series", ()):
            acc = per.setdefault(int(row["second"]), [0, 0])
            for op in ("get", "multiget"):
                acc[0] += int(row.get(op, {}).get("hits", 0))
                acc[1] += int(row.get(op, {}).get("misses", 0))
    return tuple((sec, hits / (hits + misses))
                 for sec, (hits, misses) in sorted(per.items()) if hits + misses)


def _merged(lists: Sequence[Sequence[dict]], source: str, described: str) -> Sizes | None:
    counts: dict[tuple[int, int], float] = {}
    for buckets in lists:
        for b in buckets:
            key = (int(b["from"]), int(b["to"]))
            counts[key] = counts.get(key, 0) + float(b["count"])
    if not any(counts.values()):
        return None
    return Sizes(tuple(Bucket(lo, hi, c) for (lo, hi), c in sorted(counts.items())),
                 source, described)


def power_buckets(low: int, high: int) -> tuple[Bucket, ...]:
    """A uniform size in [low, high] spread over the power-of-two buckets [2^b, 2^(b+1) - 1]
    (bucket 0 also holds 0), each weighted by the sizes it holds."""
    out = []
    b = 0
    while (1 << b) <= max(high, 1):
        lo, hi = (0 if b == 0 else 1 << b), (1 << (b + 1)) - 1
        n = min(hi, high) - max(lo, low) + 1
        if n > 0:
            out.append(Bucket(lo, hi, float(n)))
        b += 1
    return tuple(out)


def _value_text(conf: dict) -> str:
    if conf.get("trace"):
        return "the trace's"
    if conf.get("data_size_dist"):
        return str(conf["data_size_dist"])
    if conf.get("data_size_list"):
        return f"list {conf['data_size_list']}"
    low, high = conf.get("data_size_min"), conf.get("data_size_max")
    return "-" if low is None else f"{low} B" if low == high else f"{low}-{high} B uniform"


def _key_text(conf: dict) -> str:
    if conf.get("trace"):
        return "the trace's"
    if conf.get("key_size_dist"):
        return str(conf["key_size_dist"])
    return f"prefix {conf.get('key_prefix', '')!r} and the key's number"


def _configured_values(conf: dict) -> Sizes | None:
    """Without `sent`: a fixed size or a uniform range as buckets; a named distribution or
    a list only named."""
    low, high = conf.get("data_size_min"), conf.get("data_size_max")
    if conf.get("data_size_dist") or conf.get("data_size_list") or conf.get("trace") \
            or low is None or high is None:
        return Sizes((), "configured", _value_text(conf)) if not conf.get("trace") else None
    return Sizes(power_buckets(int(low), int(high)), "configured", _value_text(conf))


def _configured_keys(conf: dict) -> Sizes | None:
    """Without `sent`: keys are the prefix and a number up to key_maximum."""
    if conf.get("key_size_dist") or conf.get("trace") or conf.get("key_maximum") is None:
        return None
    prefix = len(str(conf.get("key_prefix", "")))
    low = prefix + len(str(conf.get("key_minimum", 0)))
    high = prefix + len(str(conf["key_maximum"]))
    return Sizes(power_buckets(low, high), "configured", _key_text(conf))
