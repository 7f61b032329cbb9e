"""What the protocol readers of a capture give: requests as a trace keeps them, and whole
replies with the value sizes a read got back."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class WireRequest:
    """One request: its capture time, its trace operation ("" when not kept), and its
    items (key, value size); `reads` when its reply gives the value sizes."""

    time: float
    op: str
    items: tuple[tuple[bytes, int], ...] = ()
    ttl: int = 0
    reads: bool = False


@dataclass(frozen=True, kw_only=True)
class ReplyUnit:
    """One whole reply and its capture time. For a read, the value size of each key hit:
    by key (memcached's VALUE lines name it) or by position (a RESP bulk or array of
    bulks, None for a miss)."""

    time: float
    values: dict[bytes, int] | None = None
    sizes: tuple[int | None, ...] | None = None

    def value_sizes(self, request: WireRequest) -> list[int]:
        """The value size of each of `request`'s keys: 0 for a miss."""
        keys = [k for k, _ in request.items]
        if self.values is not None:
            return [self.values.get(k, 0) for k in keys]
        sizes = list(self.sizes or ())
        return [(sizes[i] if i < len(sizes) else None) or 0 for i in range(len(keys))]
