"""Reading HdrHistogram's compressed V2 encoding (base64), as the load generator and the
middleware write it, so the harness can merge the histograms of several instances, runs or
windows and take exact percentiles of the merged distribution.

Format (HdrHistogram's "V2 + deflate"): a big-endian header (cookie 0x1c849304, length)
around a zlib stream holding a second header (cookie 0x1c849303, payload length,
normalising offset, significant digits, lowest discernible value, highest trackable value,
integer-to-double ratio) and the counts as ZigZag LEB128 varints, where a negative number
n stands for -n empty buckets. Percentiles follow the Rust `hdrhistogram` crate's
`value_at_quantile` (the highest value equivalent to the bucket that reaches the quantile),
so they equal the ones the tools print. Writers set bits 4-7 of both cookies to the word
size (0x10 for 8 bytes); those bits are ignored.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
import zlib
from collections import Counter
from dataclasses import dataclass

COMPRESSED_COOKIE = 0x1C849304
V2_COOKIE = 0x1C849303
_HEADER = struct.Struct(">iiiiqqd")


class HdrError(ValueError):
    """Bytes that are not a V2 compressed histogram."""


@dataclass(frozen=True)
class Layout:
    """The bucket structure fixed by the lowest value and the significant digits."""

    lowest: int
    digits: int

    @property
    def unit_magnitude(self) -> int:
        return int(math.floor(math.log2(self.lowest)))

    @property
    def half_magnitude(self) -> int:
        return max(int(math.ceil(math.log2(2 * 10**self.digits))), 1) - 1

    def value_for(self, index: int) -> int:
        half = 1 << self.half_magnitude
        bucket = (index >> self.half_magnitude) - 1
        sub = (index & (half - 1)) + half
        if bucket < 0:
            sub -= half
            bucket = 0
        return sub << (bucket + self.unit_magnitude)

    def highest_equivalent(self, value: int) -> int:
        count = 1 << (self.half_magnitude + 1)
        mask = (count - 1) << self.unit_magnitude
        bucket = (value | mask).bit_length() - self.unit_magnitude - (self.half_magnitude + 1)
        sub = value >> (bucket + self.unit_magnitude)
        lowest = sub << (bucket + self.unit_magnitude)
        size = 1 << (self.unit_magnitude + bucket + (1 if sub >= count else 0))
        return lowest + size - 1


@dataclass(frozen=True)
class Histogram:
    """Counts per value (the lowest value of each non-empty bucket)."""

    layout: Layout
    counts: dict[int, int]

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def merge(self, other: Histogram) -> Histogram:
        if other.layout != self.layout:
            raise HdrError(f"cannot merge histograms of layouts {self.layout} and "
                           f"{other.layout}")
        return Histogram(self.layout, dict(Counter(self.counts) + Counter(other.counts)))

    def quantile(self, q: float) -> int:
        """The value at quantile q in [0, 1]; 0 for an empty histogram."""
        total = self.total
        if total == 0:
            return 0
        target = max(math.ceil(min(q, 1.0) * total), 1)
        seen = 0
        for value in sorted(self.counts):
            seen += self.counts[value]
            if seen >= target:
                return self.layout.highest_equivalent(value)
        return self.layout.highest_equivalent(max(self.counts))

    def max(self) -> int:
        return self.layout.highest_equivalent(max(self.counts)) if self.counts else 0


def decode(text: str) -> Histogram:
    """A histogram from its base64 V2 compressed encoding."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise HdrError(f"not base64: {exc}") from None
    if len(raw) < 8:
        raise HdrError("too short for a compressed histogram")
    cookie, length = struct.unpack_from(">ii", raw)
    if cookie & ~0xF0 != COMPRESSED_COOKIE:
        raise HdrError(f"cookie {cookie:#x} is not a V2 compressed histogram")
    try:
        body = zlib.decompress(raw[8:8 + length])
    except zlib.error as exc:
        raise HdrError(f"bad deflate stream: {exc}") from None
    if len(body) < _HEADER.size:
        raise HdrError("truncated histogram header")
    cookie, payload, offset, digits, lowest, _highest, _ratio = _HEADER.unpack_from(body)
    if cookie & ~0xF0 != V2_COOKIE:
        raise HdrError(f"cookie {cookie:#x} is not a V2 histogram")
    if offset != 0:
        raise HdrError("normalising index offsets are not supported")
    layout = Layout(max(lowest, 1), digits)
    counts: dict[int, int] = {}
    index = 0
    for n in _varints(body[_HEADER.size:_HEADER.size + payload]):
        if n < 0:
            index += -n
            continue
        if n:
            counts[layout.value_for(index)] = counts.get(layout.value_for(index), 0) + n
        index += 1
    return Histogram(layout, counts)


def _varints(data: bytes):
    """ZigZag LEB128 with at most 9 bytes, the 9th carrying 8 bits (HdrHistogram's form)."""
    pos = 0
    while pos < len(data):
        value = 0
        for i in range(9):
            if pos >= len(data):
                raise HdrError("truncated varint")
            byte = data[pos]
            pos += 1
            if i == 8:
                value |= byte << 56
                break
            value |= (byte & 0x7F) << (7 * i)
            if not byte & 0x80:
                break
        yield (value >> 1) ^ -(value & 1)


def merge_all(encoded: list[str]) -> Histogram | None:
    """The merge of several encoded histograms; None when there are none."""
    merged = None
    for text in encoded:
        h = decode(text)
        merged = h if merged is None else merged.merge(h)
    return merged
