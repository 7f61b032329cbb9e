"""The order in which an experiment's runs happen. Pure: indices in, (point, repetition)
pairs out.

Anything that drifts on a shared machine (background load, thermal state, a neighbour's
job) becomes part of a factor's effect when points run in sweep order; in a random order
drift spreads over every point as noise, which the repetitions measure (Jain, ch. 16:
randomisation). Three orders:

- `sweep`: point 1 repetitions 1..r, then point 2, ... (the order of the file);
- `interleaved`: repetition 1 of every point, then repetition 2 of every point, ...;
- `randomized`: every (point, repetition) in a random order drawn from a seed, which is
  stored with the experiment so a resumed run continues the same order.

Runs that validation adds after the planned ones come in further rounds, one run per
point that asks for more, each round ordered the same way (its own draw from the seed).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from enum import StrEnum


class Order(StrEnum):
    """An experiment's `order` (its values are the file's and the database's words)."""

    RANDOMIZED = "randomized"
    SWEEP = "sweep"
    INTERLEAVED = "interleaved"


def plan(points: Sequence[int], repetitions: int, order: Order, seed: int,
         round_: int = 0) -> list[tuple[int, int]]:
    """Round 0: every point's repetitions 1..`repetitions`, in `order`."""
    pairs = [(p, r) for p in points for r in range(1, repetitions + 1)]
    if order == Order.SWEEP:
        return pairs
    if order == Order.INTERLEAVED:
        return sorted(pairs, key=lambda pr: (pr[1], points.index(pr[0])))
    if order == Order.RANDOMIZED:
        rng = random.Random(f"{seed}:{round_}")
        rng.shuffle(pairs)
        return pairs
    raise ValueError(f"unknown order {order!r}")


def extra_round(wanting: Sequence[tuple[int, int]], order: Order, seed: int,
                round_: int) -> list[tuple[int, int]]:
    """One more run for each (point, next repetition) that validation asks for."""
    pairs = list(wanting)
    if order == Order.RANDOMIZED:
        random.Random(f"{seed}:{round_}").shuffle(pairs)
    return pairs


def new_seed() -> int:
    return random.SystemRandom().randrange(1, 2**31)
