"""Which target (middleware, or server without one) each load generator instance talks to,
and how many connections it opens: pure planning, no I/O.

Instance i talks to target i mod T. With `load.placement = "round-robin"` every instance
opens `load.clients` connections per thread, so when T does not divide the instances the
targets are unevenly loaded: 3 instances over 2 middlewares put 2/3 of the clients on the
first, which then sets the throughput the links allow (its link carries 2/3 of the bytes).

`"even"` (the default) keeps the total number of clients, instances x threads x clients,
and spreads it over the targets as evenly as whole connections per thread allow: the
U = instances x clients connections per thread are split over the targets (U // T each,
one more for the first U mod T), and each target's share over its instances (the first
ones one more). 3 instances x 8 clients over 2 middlewares: 12 and 12 connections, the
first middleware's two instances opening 6 each and the second's one instance 12. Where a
share would leave an instance without a connection, the placement stays round-robin.
An open-loop rate is split in proportion to the connections, so every target is offered
the same rate too.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class PlacementPolicy(StrEnum):
    """`load.placement`."""

    EVEN = "even"
    ROUND_ROBIN = "round-robin"


PLACEMENTS = tuple(PlacementPolicy)


@dataclass(frozen=True)
class Placement:
    #: Per instance: the index of its target and its connections per thread.
    targets: tuple[int, ...]
    clients: tuple[int, ...]
    threads: int

    def shares(self, count: int) -> tuple[float, ...]:
        """Each of `count` targets' share of all client connections (0 for a target no
        instance talks to)."""
        total = sum(self.clients)
        out = [0.0] * count
        for target, clients in zip(self.targets, self.clients, strict=True):
            out[target] += clients / total
        return tuple(out)

    def instance_shares(self) -> tuple[float, ...]:
        """Each instance's share of all client connections (its share of the load)."""
        total = sum(self.clients)
        return tuple(c / total for c in self.clients)


def place(instances: int, threads: int, clients: int, targets: int,
          placement: str = "even") -> Placement:
    """The module doc's rule; `targets` >= 1, `instances` >= 1."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement must be one of {', '.join(PLACEMENTS)}, got {placement!r}")
    of = tuple(i % targets for i in range(instances))
    uniform = Placement(of, (clients,) * instances, threads)
    if placement == PlacementPolicy.ROUND_ROBIN or instances % targets == 0 or instances < targets:
        return uniform  # already even, or each instance a target of its own
    units = instances * clients
    per_target = [units // targets + (t < units % targets) for t in range(targets)]
    members = [[i for i in range(instances) if of[i] == t] for t in range(targets)]
    out = [0] * instances
    for t, mine in enumerate(members):
        if not mine:
            continue
        base, extra = divmod(per_target[t], len(mine))
        if base < 1:
            return uniform
        for k, i in enumerate(mine):
            out[i] = base + (k < extra)
    return Placement(of, tuple(out), threads)
