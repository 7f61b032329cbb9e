"""A packet capture of memcached text or RESP traffic turned into a request trace in
twitter/cache-trace's CSV format (`timestamp,key,key size,value size,client id,operation,
TTL`), with fractional timestamps in seconds from the first request.

Each TCP connection to the server's port is put back in order (`tcp`), its requests and
replies parsed (`memcache_wire`, `resp_wire`): one record per key of a request, the client
id the connection's number (1, 2, ... in order of appearance), the value size the request's
(writes) or the reply's (reads; a miss is 0). A reply is matched to the oldest read (RESP:
command) of its connection still unanswered, unless it came before that request (it then
answers a request sent before the capture began). A request's time is that of the packet
carrying its first byte, never earlier than the connection's previous request.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from cachelab.readers import memcache_wire, resp_wire
from cachelab.readers.pcap import Segment, segments
from cachelab.readers.tcp import Stream
from cachelab.readers.wire import ReplyUnit, WireRequest


@dataclass(frozen=True, kw_only=True)
class TraceRecord:
    time: float
    key: bytes
    value_size: int
    client: int
    op: str
    ttl: int
    #: The request's place in its connection, which orders requests sent together.
    order: int = 0


class _RequestParser(Protocol):
    def feed(self, time: float, data: bytes) -> list[WireRequest]: ...
    def resync(self) -> None: ...


class _ReplyParser(Protocol):
    def feed(self, time: float, data: bytes) -> list[ReplyUnit]: ...
    def resync(self) -> None: ...


@dataclass
class _Connection:
    client: int
    protocol: str
    records: list[TraceRecord]
    requests: _RequestParser | None = None
    replies: _ReplyParser | None = None
    #: Requests whose reply gives value sizes (RESP: every command), oldest first.
    waiting: deque[tuple[int, WireRequest]] = field(default_factory=deque)
    last_time: float = 0.0
    sent: int = 0
    redis: bool = False

    def __post_init__(self) -> None:
        self.up = Stream(self._up, self._resync_up)
        self.down = Stream(self._down, self._resync_down)
        self._up_resync = self._down_resync = False

    def _parsers(self, first: bytes) -> None:
        redis = self.protocol == "redis" or (
            self.protocol == "auto"
            and not memcache_wire.starts_like_memcached(first, self._up_resync))
        if redis:
            self.requests, self.replies = resp_wire.Requests(), resp_wire.Replies()
        else:
            self.requests, self.replies = memcache_wire.Requests(), memcache_wire.Replies()
        if self._up_resync:
            self.requests.resync()
        if self._down_resync:
            self.replies.resync()
        self.redis = redis

    def _resync_up(self) -> None:
        self._up_resync = True
        if self.requests is not None:
            self.requests.resync()

    def _resync_down(self) -> None:
        self._down_resync = True
        if self.replies is not None:
            self.replies.resync()

    def _up(self, time: float, data: bytes) -> None:
        if self.requests is None:
            self._parsers(data)
        assert self.requests is not None
        for request in self.requests.feed(time, data):
            self.last_time = max(self.last_time, request.time)
            request = WireRequest(time=self.last_time, op=request.op, items=request.items,
                                  ttl=request.ttl, reads=request.reads)
            self.sent += 1
            if request.reads or self.redis:
                self.waiting.append((self.sent, request))
            else:
                self._emit(self.sent, request, [size for _, size in request.items])

    def _down(self, time: float, data: bytes) -> None:
        if self.replies is None:
            return  # replies to requests from before the capture
        for unit in self.replies.feed(time, data):
            if not self.waiting or unit.time < self.waiting[0][1].time:
                continue
            order, request = self.waiting.popleft()
            sizes = unit.value_sizes(request) if request.reads else [
                size for _, size in request.items]
            self._emit(order, request, sizes)

    def _emit(self, order: int, request: WireRequest, sizes: list[int]) -> None:
        if not request.op:
            return
        for (key, _), size in zip(request.items, sizes, strict=True):
            self.records.append(TraceRecord(time=request.time, key=key, value_size=size,
                                            client=self.client, op=request.op,
                                            ttl=request.ttl, order=order))

    def finish(self) -> None:
        """The end of the capture: holes given up, reads never answered kept as misses."""
        self.up.give_up_hole()
        self.down.give_up_hole()
        while self.waiting:
            order, request = self.waiting.popleft()
            self._emit(order, request, [size for _, size in request.items])


@dataclass(frozen=True, kw_only=True)
class Capture:
    records: list[TraceRecord]
    connections: int
    #: Records left out: keys with a line end, which the CSV format cannot carry.
    skipped: int


def read_capture(path: Path, port: int, protocol: str = "auto") -> Capture:
    """The requests to `port` in the capture at `path`, in time order."""
    return requests_of(segments(path), port, protocol)


def requests_of(packets: Iterable[Segment], port: int, protocol: str = "auto") -> Capture:
    records: list[TraceRecord] = []
    open_conns: dict[tuple[tuple[str, int], tuple[str, int]], _Connection] = {}
    count = 0
    for seg in packets:
        to_server = seg.dst[1] == port
        if not to_server and seg.src[1] != port:
            continue
        key = (seg.src, seg.dst) if to_server else (seg.dst, seg.src)
        conn = open_conns.get(key)
        if conn is None or (to_server and seg.syn and conn.up.next_seq is not None
                            and (seg.seq + 1) % (1 << 32) != conn.up.next_seq):
            if conn is not None:
                conn.finish()
            count += 1
            conn = open_conns[key] = _Connection(count, protocol, records)
        stream = conn.up if to_server else conn.down
        stream.segment(seg.time, seg.seq, seg.syn, seg.payload)
    for conn in open_conns.values():
        conn.finish()
    kept = [r for r in records if b"\n" not in r.key and b"\r" not in r.key]
    kept.sort(key=lambda r: (r.time, r.client, r.order))
    return Capture(records=kept, connections=count, skipped=len(records) - len(kept))


def write_trace(records: list[TraceRecord], path: Path) -> None:
    """The records as CSV lines, times in seconds from the first record (microseconds)."""
    start = records[0].time if records else 0.0
    with path.open("wb") as f:
        for r in records:
            f.write(b"%.6f,%s,%d,%d,%d,%s,%d\n" % (
                r.time - start, r.key, len(r.key), r.value_size, r.client, r.op.encode(),
                r.ttl))
