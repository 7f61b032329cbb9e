"""memcached's text protocol as a capture shows it: requests (with their data blocks) out
of the client's bytes, and replies out of the server's, parsed as they arrive. No I/O.

Requests kept in a trace: get, gets (and gat, gats as get and gets), one item per key;
set, add, replace, append, prepend, cas with their value size and expiry; delete; incr;
decr. Every other command (touch, meta commands, stats, ...) is read past and not kept.
"""

from __future__ import annotations

import re

from cachelab.readers.tcp import TimedBuffer
from cachelab.readers.wire import ReplyUnit, WireRequest

#: memcached's largest relative expiry: a larger one is a Unix time.
MAX_RELATIVE_EXPIRY = 60 * 60 * 24 * 30
#: A line with no end after this many bytes is not memcached's: look for the next request.
MAX_LINE = 8192
#: A data block larger than this is taken as a misread: look for the next request.
MAX_DATA = 1 << 30

_STORAGE = {b"set", b"add", b"replace", b"append", b"prepend", b"cas"}
_READS = {b"get": "get", b"gets": "gets", b"gat": "get", b"gats": "gets"}
_OTHERS = {b"delete", b"incr", b"decr", b"touch", b"stats", b"version", b"flush_all",
           b"verbosity", b"quit", b"mg", b"ms", b"md", b"ma", b"mn", b"me", b"shutdown",
           b"cache_memlimit", b"slabs", b"lru_crawler", b"watch", b"misbehave"}
_COMMANDS = _STORAGE | set(_READS) | _OTHERS
_LINE_START = re.compile(rb"(?:^|\n)(?:" + b"|".join(sorted(_COMMANDS)) + rb") ")
_REPLY_WORDS = (b"VALUE ", b"END", b"STORED", b"NOT_STORED", b"EXISTS", b"NOT_FOUND",
                b"DELETED", b"TOUCHED", b"OK", b"ERROR", b"CLIENT_ERROR", b"SERVER_ERROR",
                b"STAT ", b"VERSION ", b"HD", b"VA ", b"EN", b"NF", b"NS", b"EX", b"MN")


def starts_like_memcached(data: bytes, midstream: bool = False) -> bool:
    """Whether a connection's first bytes are memcached's: a memcached command (its names
    are lower case; RESP starts with `*`, or an inline command such as `PING`). Caught
    mid-stream, the first line that starts as a memcached request does, unless a RESP
    array starts before it."""
    words = data.split(None, 1)
    if words and words[0] in _COMMANDS:
        return True
    if not midstream:
        return False
    memcached = _LINE_START.search(data)
    resp = re.search(rb"(?:^|\n)\*\d+\r\n\$", data)
    return memcached is not None and (resp is None or memcached.start() < resp.start())


def ttl_of(exptime: int, now: float) -> int:
    """A request's expiry as a time to live in seconds: larger than 30 days it is a Unix
    time; 0 or negative (already expired) gives 0."""
    if exptime > MAX_RELATIVE_EXPIRY:
        return max(0, exptime - int(now))
    return max(0, exptime)


class _Parser:
    def __init__(self, words: tuple[bytes, ...]) -> None:
        self.buf = TimedBuffer()
        self.syncing = False
        self.words = words

    def resync(self) -> None:
        """The next bytes may start mid-message: drop what is held, and skip to the next
        line that starts as a message does."""
        self.buf = TimedBuffer()
        self.syncing = True

    def _line(self) -> tuple[bytes, int] | None:
        """The line at the front (without its end) and its length with its end, once
        whole; None until then."""
        data = self.buf.data
        end = data.find(b"\n")
        if end < 0:
            if len(data) > MAX_LINE:
                self.resync()
            return None
        return bytes(data[:end]).rstrip(b"\r"), end + 1

    def _synced(self) -> bool:
        while self.syncing:
            whole = self._line()
            if whole is None:
                return False
            if whole[0].startswith(self.words):
                self.syncing = False
            else:
                self.buf.consume(whole[1])
        return True


class Requests(_Parser):
    """The client's side of one connection."""

    def __init__(self) -> None:
        super().__init__(tuple(w + b" " for w in _COMMANDS))

    def feed(self, time: float, data: bytes) -> list[WireRequest]:
        self.buf.append(time, data)
        out: list[WireRequest] = []
        while self._synced():
            whole = self._line()
            if whole is None:
                break
            request, used = self._request(*whole)
            if used == 0:
                break
            if request is not None:
                out.append(request)
            self.buf.consume(used)
        return out

    def _request(self, line: bytes, line_len: int) -> tuple[WireRequest | None, int]:
        """The request at the front and the bytes it takes (0: its data is not all here)."""
        time = self.buf.time_at(0)
        tokens = line.split()
        cmd = tokens[0] if tokens else b""
        try:
            if cmd in _STORAGE or cmd == b"ms":
                size = int(tokens[4] if cmd in _STORAGE else tokens[2])
                if not 0 <= size <= MAX_DATA:
                    raise ValueError(size)
                used = line_len + size + 2
                if len(self.buf.data) < used:
                    return None, 0
                if cmd == b"ms":
                    return None, used
                ttl = ttl_of(int(tokens[3]), time)
                return WireRequest(time=time, op=cmd.decode(), items=((tokens[1], size),),
                                   ttl=ttl), used
            if cmd in _READS:
                keys = tokens[2:] if cmd.startswith(b"gat") else tokens[1:]
                return WireRequest(time=time, op=_READS[cmd], items=tuple((k, 0) for k in keys),
                                   reads=True), line_len
            if cmd in (b"delete", b"incr", b"decr"):
                return WireRequest(time=time, op=cmd.decode(), items=((tokens[1], 0),)), line_len
        except (IndexError, ValueError):
            pass  # not a request memcached would take: read past its line
        return None, line_len


class Replies(_Parser):
    """The server's side of one connection."""

    def __init__(self) -> None:
        super().__init__(_REPLY_WORDS)
        self._values: dict[bytes, int] | None = None
        self._stats = False
        self._time = 0.0

    def feed(self, time: float, data: bytes) -> list[ReplyUnit]:
        self.buf.append(time, data)
        out: list[ReplyUnit] = []
        while self._synced():
            whole = self._line()
            if whole is None:
                break
            line, line_len = whole
            if self._values is None and not self._stats:
                self._time = self.buf.time_at(0)
            used = line_len
            if line.startswith((b"VALUE ", b"VA ")):
                tokens = line.split()
                try:
                    size = int(tokens[3] if tokens[0] == b"VALUE" else tokens[1])
                except (IndexError, ValueError):
                    self.resync()
                    break
                used = line_len + size + 2
                if len(self.buf.data) < used:
                    break
                if tokens[0] == b"VALUE":
                    self._values = self._values or {}
                    self._values[tokens[1]] = size
                else:
                    out.append(ReplyUnit(time=self._time))
            elif line.startswith(b"STAT "):
                self._stats = True
            elif line == b"END":
                values = self._values if self._values is not None else (
                    None if self._stats else {})
                out.append(ReplyUnit(time=self._time, values=values))
                self._values, self._stats = None, False
            else:
                out.append(ReplyUnit(time=self._time))
            self.buf.consume(used)
        return out
