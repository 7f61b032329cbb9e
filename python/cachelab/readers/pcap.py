"""TCP segments out of a packet capture: tcpdump's classic pcap or pcapng, read by `dpkt`
(a pure-Python reader of both, with the link layers Linux captures have: Ethernet, which
`-i lo` gives, Linux cooked v1 and v2, which `-i any` gives, raw IP and BSD loopback).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import dpkt

from cachelab.errors import UserError

#: The link-layer types read, by their number in the file (LINKTYPE_*).
_ETHERNET, _NULL, _RAW, _LOOP, _SLL, _SLL2 = 1, 0, (12, 14, 101), 108, 113, 276

#: The largest packet read: more is a damaged file (tcpdump's snap length is 262144).
MAX_PACKET = 1 << 20

#: pcapng's magic (a Section Header Block's type), else the file is classic pcap.
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"


@dataclass(frozen=True, kw_only=True)
class Segment:
    """One TCP segment: its capture time, its endpoints and what it carries."""

    time: float
    src: tuple[str, int]
    dst: tuple[str, int]
    seq: int
    syn: bool
    fin: bool
    rst: bool
    payload: bytes


def segments(path: Path) -> Iterator[Segment]:
    """Every TCP segment of the capture at `path`, in capture order; other packets
    (ARP, UDP, fragments) are left out."""
    try:
        f = path.open("rb")
    except OSError as exc:
        raise UserError(f"cannot read the capture {path}: {exc.strerror}") from exc
    with f:
        reader = _open(f, path)
        link = reader.datalink()
        try:
            for ts, frame in reader:
                seg = _segment(float(ts), link, frame)
                if seg is not None:
                    yield seg
        except (dpkt.NeedData, dpkt.UnpackError, ValueError) as exc:
            raise UserError(f"{path}: a truncated or damaged capture ({exc})") from exc


def _open(f: BinaryIO, path: Path) -> Any:
    magic = f.read(4)
    f.seek(0)
    try:
        if magic == _PCAPNG_MAGIC:
            return dpkt.pcapng.Reader(f)
        return _Pcap(f, path)
    except (ValueError, dpkt.NeedData, dpkt.UnpackError) as exc:
        raise UserError(f"{path} is not a pcap or pcapng capture ({exc})") from exc


class _Pcap:
    """Classic pcap, read here rather than by dpkt so that a file cut inside a packet
    is refused rather than read short."""

    _MAGICS = {b"\xd4\xc3\xb2\xa1": ("<", 1e-6), b"\xa1\xb2\xc3\xd4": (">", 1e-6),
               b"\x4d\x3c\xb2\xa1": ("<", 1e-9), b"\xa1\xb2\x3c\x4d": (">", 1e-9)}

    def __init__(self, f: BinaryIO, path: Path) -> None:
        head = f.read(24)
        if len(head) < 24 or head[:4] not in self._MAGICS:
            raise ValueError("no pcap file header")
        self.order, self.unit = self._MAGICS[head[:4]]
        self.f, self.path = f, path
        self.link = struct.unpack(self.order + "I", head[20:24])[0] & 0xFFFF

    def datalink(self) -> int:
        return self.link

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        while header := self.f.read(16):
            if len(header) < 16:
                raise ValueError("the file ends inside a packet header")
            sec, frac, caplen, _ = struct.unpack(self.order + "IIII", header)
            if caplen > MAX_PACKET:
                raise ValueError(f"a packet of {caplen} bytes")
            frame = self.f.read(caplen)
            if len(frame) < caplen:
                raise ValueError("the file ends inside a packet")
            yield sec + frac * self.unit, frame


def _segment(ts: float, link: int, frame: bytes) -> Segment | None:
    ip = _ip(link, frame)
    if not isinstance(ip, dpkt.ip.IP | dpkt.ip6.IP6):
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    family = socket.AF_INET6 if isinstance(ip, dpkt.ip6.IP6) else socket.AF_INET
    flags = tcp.flags
    return Segment(
        time=ts,
        src=(socket.inet_ntop(family, ip.src), tcp.sport),
        dst=(socket.inet_ntop(family, ip.dst), tcp.dport),
        seq=tcp.seq,
        syn=bool(flags & dpkt.tcp.TH_SYN),
        fin=bool(flags & dpkt.tcp.TH_FIN),
        rst=bool(flags & dpkt.tcp.TH_RST),
        payload=bytes(tcp.data),
    )


def _ip(link: int, frame: bytes) -> Any:
    try:
        if link == _ETHERNET:
            return dpkt.ethernet.Ethernet(frame).data
        if link == _SLL:
            return dpkt.sll.SLL(frame).data
        if link == _SLL2:
            return dpkt.sll2.SLL2(frame).data
        if link in (_NULL, _LOOP):
            return dpkt.loopback.Loopback(frame).data
        if link in _RAW:
            version6 = bool(frame) and frame[0] >> 4 == 6
            return dpkt.ip6.IP6(frame) if version6 else dpkt.ip.IP(frame)
    except (dpkt.NeedData, dpkt.UnpackError):
        return None  # a frame cut by the snap length, or not IP
    raise UserError(f"captures of link type {link} are not read (Ethernet, Linux cooked, "
                    "raw IP and loopback are)")
