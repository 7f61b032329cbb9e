"""One direction of a TCP connection put back in order, as the receiver read it: segments
out of order are held until the bytes before them arrive, retransmitted bytes are read
once (the first copy wins), and each byte keeps the capture time of the segment that
brought it. No I/O here.

A stream whose SYN was not captured starts mid-stream: its first bytes may be the middle
of a request, so the reader of the stream is told to look for the next request boundary.
So is it after a hole that never fills (a packet the capture lost): once more than
`MAX_HELD` bytes wait behind it, or at the end of the capture.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

#: Out-of-order bytes held behind a hole before the hole is given up as lost.
MAX_HELD = 4 << 20

_MOD = 1 << 32


def _after(a: int, b: int) -> int:
    """How far sequence number `a` is after `b` (negative: before), modulo 2^32."""
    d = (a - b) % _MOD
    return d - _MOD if d >= _MOD // 2 else d


@dataclass
class TimedBuffer:
    """Bytes received and not yet parsed, with the capture time of each chunk."""

    data: bytearray = field(default_factory=bytearray)
    #: (offset in `data`, time) where each chunk starts, in order.
    chunks: list[tuple[int, float]] = field(default_factory=list)

    def append(self, time: float, data: bytes) -> None:
        if data:
            self.chunks.append((len(self.data), time))
            self.data += data

    def time_at(self, offset: int) -> float:
        """The capture time of the byte at `offset`."""
        i = bisect.bisect_right(self.chunks, offset, key=lambda c: c[0]) - 1
        return self.chunks[max(i, 0)][1]

    def consume(self, n: int) -> None:
        """Drops the first `n` bytes (parsed)."""
        if n <= 0:
            return
        rest_time = self.time_at(n) if n < len(self.data) else 0.0
        del self.data[:n]
        later = [(o - n, t) for o, t in self.chunks if o > n]
        self.chunks = [(0, rest_time), *later] if self.data else []


@dataclass
class Stream:
    """One direction's bytes in order. `deliver(time, data)` gets each in-order piece;
    `resync()` is called before the first piece of a stream that starts mid-stream, and
    after a hole that is given up."""

    deliver: Callable[[float, bytes], None]
    resync: Callable[[], None]
    next_seq: int | None = None
    held: dict[int, tuple[float, bytes]] = field(default_factory=dict)

    def segment(self, time: float, seq: int, syn: bool, payload: bytes) -> None:
        if syn:
            if self.next_seq is None:
                self.next_seq = (seq + 1) % _MOD
            return
        if not payload:
            return
        if self.next_seq is None:
            self.next_seq = seq
            self.resync()
        self.held.setdefault(seq, (time, payload))
        self._drain()
        if sum(len(p) for _, p in self.held.values()) > MAX_HELD:
            self.give_up_hole()

    def give_up_hole(self) -> None:
        """Skips to the earliest held bytes (the ones between are lost) and reads on."""
        if not self.held or self.next_seq is None:
            return
        base = self.next_seq
        self.next_seq = min(self.held, key=lambda s: _after(s, base))
        self.resync()
        self._drain()

    def _drain(self) -> None:
        assert self.next_seq is not None
        while self.held:
            seq = min(self.held, key=lambda s: _after(s, self.next_seq or 0))
            ahead = _after(seq, self.next_seq)
            if ahead > 0:
                return
            time, payload = self.held.pop(seq)
            fresh = payload[-ahead:]
            if fresh:
                self.deliver(time, fresh)
                self.next_seq = (self.next_seq + len(fresh)) % _MOD
