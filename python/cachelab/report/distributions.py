"""Response-time distributions per operation type, client side and middleware side (the
original study's Fig. 23), for the point of highest throughput of each configuration.

Both sides come from HDR histograms (µs resolution below 2 ms): the client's from the load
generators' JSON reports of the point's steady runs (their steady window), the
middleware's from the windows in the steady part of those runs. Buckets follow
Freedman-Diaconis on the client's values up to their 99th percentile (rounded up to a
whole microsecond, the resolution of the recorded values, so that no bucket can hold more
distinct values than another), and the middleware's histogram uses the same buckets, so
the two compare bar by bar; what lies beyond the cutoff is counted in an overflow bucket.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from cachelab.analysis import histogram
from cachelab.readers import hdr
from cachelab.report import measure
from cachelab.report.data import Curve, PointResult
from cachelab.store import Store

#: Histograms are drawn for at most this many configurations.
MAX_POINTS = 6
CUTOFF_PERCENTILE = 99.0
#: The recorded values' resolution (ms): HDR histograms keep microseconds below 2 ms.
RESOLUTION_MS = 0.001


@dataclass(frozen=True)
class OpDistribution:
    """One operation type at one point; values in ms."""

    curve: str
    point: PointResult
    op: str
    client: histogram.Histogram
    middleware: histogram.Histogram | None


def distributions(s: Store, found: list[Curve],
                  settings: dict[str, Any]) -> list[OpDistribution]:
    out = []
    for c in found[:MAX_POINTS]:
        p = max(c.points, key=lambda q: q.throughput or 0.0)
        try:
            client = _client_counts(s, p.run_ids)
            mw = _middleware_counts(s, p.run_ids, settings)
        except (hdr.HdrError, KeyError, ValueError):
            continue  # a damaged stored histogram: the other points still get theirs
        for op in measure.CLIENT_OPS:
            if client.get(op) and client[op].total:
                out.append(_pair(c.label, p, op, client[op], mw.get(op)))
    return out


def _pair(curve: str, p: PointResult, op: str, client: hdr.Histogram,
          mw: hdr.Histogram | None) -> OpDistribution:
    values = _values_ms(client)
    mw_values = _values_ms(mw) if mw is not None and mw.total else None
    start = float(values.min()) if mw_values is None else float(min(values.min(),
                                                                    mw_values.min()))
    cutoff = float(np.percentile(values, CUTOFF_PERCENTILE))
    width = bucket_width(values[values <= cutoff])
    ch = histogram.histogram(values, cutoff=cutoff, width=width, start=start)
    mh = None
    if mw_values is not None:
        mh = histogram.histogram(mw_values, cutoff=max(cutoff, start), width=width or None,
                                 start=start)
    return OpDistribution(curve, p, op, ch, mh)


def bucket_width(values: np.ndarray) -> float | None:
    """Freedman-Diaconis, rounded up to a whole RESOLUTION_MS; None when the IQR is 0 (the
    histogram then falls back to Sturges' rule)."""
    fd = histogram.freedman_diaconis_width(values)
    return math.ceil(fd / RESOLUTION_MS - 1e-9) * RESOLUTION_MS if fd > 0 else None


def _values_ms(h: hdr.Histogram) -> np.ndarray:
    """Every recorded value (the low end of its HDR bucket) in ms, repeated by count."""
    values = np.fromiter(h.counts.keys(), dtype=float, count=len(h.counts))
    counts = np.fromiter(h.counts.values(), dtype=np.int64, count=len(h.counts))
    return np.repeat(values / 1000.0, counts)


def _client_counts(s: Store, run_ids: tuple[int, ...]) -> dict[str, hdr.Histogram]:
    merged: dict[str, list[str]] = {}
    for content in s.load_reports(run_ids):
        doc = json.loads(content)
        for op in measure.CLIENT_OPS:
            merged.setdefault(op, []).append(doc["histograms"][op])
    return {op: h for op, encoded in merged.items()
            if (h := hdr.merge_all(encoded)) is not None}


def _middleware_counts(s: Store, run_ids: tuple[int, ...],
                       settings: dict[str, Any]) -> dict[str, hdr.Histogram]:
    keys = measure.steady_windows(s, s.runs(run_ids), settings)
    if not keys:
        return {}
    merged: dict[str, list[str]] = {}
    for o in s.middleware_ops(keys):
        merged.setdefault(o.op, []).append(o.rt_hdr)
    return {op: h for op, encoded in merged.items()
            if (h := hdr.merge_all(encoded)) is not None}
