"""Writes `synthetic.csv` beside this script: a small request trace in twitter/cache-trace's
CSV format (timestamp,key,key size,value size,client id,operation,TTL), made up here so the
repository ships a trace to replay without downloading one.

4,000 requests over about 10 seconds (Poisson arrivals at 400 per second, fractional
timestamps), from 8 clients, over 1,000 keys whose popularity is zipf (exponent 0.99); 80%
get, 2% gets, 14% set, 1% add, 3% delete. Each key has one value size, log-uniform between
32 B and 4 KiB, which its writes send and its reads report; a set's TTL is 0, 60, 300 or
3600 s. Deterministic: the same seed gives the same file, byte for byte, on any Python 3
(only `random.random()` draws, whose sequence for a seed is fixed).

    python3 experiments/traces/make_synthetic_trace.py [OUT]
"""

from __future__ import annotations

import bisect
import math
import random
import sys
from pathlib import Path

SEED = 35
REQUESTS = 4000
RATE = 400.0
CLIENTS = 8
KEYS = 1000
ZIPF = 0.99
OPS = [("get", 0.80), ("gets", 0.02), ("set", 0.14), ("add", 0.01), ("delete", 0.03)]
TTLS = [0, 60, 300, 3600]


def _cumulative(weights: list[float]) -> list[float]:
    total, out = sum(weights), []
    running = 0.0
    for w in weights:
        running += w
        out.append(running / total)
    return out


def _pick(rng: random.Random, cumulative: list[float]) -> int:
    return min(bisect.bisect_right(cumulative, rng.random()), len(cumulative) - 1)


def lines(seed: int = SEED) -> list[str]:
    """The trace's lines, without their newlines."""
    rng = random.Random(seed)
    popularity = _cumulative([1.0 / (rank + 1) ** ZIPF for rank in range(KEYS)])
    ops = _cumulative([w for _, w in OPS])
    # Key ranks shuffled onto key names, so the popular keys are not key:000000, 1, 2...
    names = list(range(KEYS))
    for i in range(KEYS - 1, 0, -1):
        j = int(rng.random() * (i + 1))
        names[i], names[j] = names[j], names[i]
    sizes = [int(2 ** (5 + 7 * rng.random())) for _ in range(KEYS)]
    out, now = [], 0.0
    for _ in range(REQUESTS):
        now += -math.log(1.0 - rng.random()) / RATE
        rank = _pick(rng, popularity)
        key = f"key:{names[rank]:06d}"
        op = OPS[_pick(rng, ops)][0]
        client = 1 + int(rng.random() * CLIENTS)
        ttl = TTLS[int(rng.random() * len(TTLS))] if op in ("set", "add") else 0
        value = 0 if op == "delete" else sizes[rank]
        out.append(f"{now:.6f},{key},{len(key)},{value},{client},{op},{ttl}")
    return out


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("synthetic.csv")
    out.write_text("".join(line + "\n" for line in lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
