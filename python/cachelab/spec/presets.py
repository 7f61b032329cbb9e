"""`workload.preset`: a load-generator preset (`cachelab-load --workload NAME`) that the
experiment's other workload fields override.

The presets live in cachelab-load (crates/cachelab-load/src/presets/, sources cited in
docs/load-generator.md); this module knows their names, so a misspelt one is refused when
the file is read, and which workload fields a file overrides them with: a field the file
leaves at its default is the preset's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

#: Twitter's clusters in twitter/cache-trace's stat/2020Mar.md whose sizes are given
#: (cluster5's are N/A).
_TWITTER = tuple(f"twitter-cluster{n}" for n in range(1, 55) if n != 5)

#: Every preset cachelab-load knows (`cachelab-load --workload list`).
PRESETS: tuple[str, ...] = ("fb-etc", "meta-memcache-reg", *_TWITTER)

#: The workload fields a preset sets; the file's value wins where it differs from the
#: field's default.
OVERRIDABLE = ("ratio", "data_size", "key_pattern", "zipf_exponent")


def check(value: Any) -> str | None:
    """The validator of `workload.preset`: None or one of PRESETS."""
    if value is None or value in PRESETS:
        return None
    return (f"no preset {value!r} (one of fb-etc, meta-memcache-reg, "
            f"twitter-cluster1 .. twitter-cluster54 but 5)")


def given(workload: Any, name: str) -> bool:
    """Whether the load generator should be passed field `name` of `workload`: always
    without a preset; with one, only where the file changed it from its default."""
    if getattr(workload, "preset", None) is None or name not in OVERRIDABLE:
        return True
    default = next(f.default for f in dataclasses.fields(workload) if f.name == name)
    return getattr(workload, name) != default
