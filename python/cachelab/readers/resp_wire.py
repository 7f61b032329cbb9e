"""Redis's protocol (RESP) as a capture shows it: commands (arrays of bulk strings, or
inline) out of the client's bytes, replies out of the server's. No I/O.

Commands kept in a trace, as `cachelab-load` maps Redis MONITOR output: GET (get), MGET
(a get per key), SET (set; add with NX, replace with XX; EX/PX as the TTL), SETEX and
PSETEX (set), SETNX (add), MSET (a set per pair), APPEND (append), DEL and UNLINK (a
delete per key), INCR, INCRBY (incr), DECR, DECRBY (decr). Others are read past, not kept;
every command has one reply.
"""

from __future__ import annotations

import re

from cachelab.readers.tcp import TimedBuffer
from cachelab.readers.wire import ReplyUnit, WireRequest

#: A bulk or an array larger than this, or a line longer, is taken as a misread.
MAX_LEN = 1 << 30
MAX_LINE = 64 * 1024

_REQUEST_START = re.compile(rb"(?:^|\n)\*\d+\r\n\$")
_REPLY_START = re.compile(rb"(?:^|\n)[+\-:$*_,#%~=(!>]")


class Misread(ValueError):
    """The bytes are not RESP."""


def _line(data: bytearray, pos: int) -> tuple[bytes, int] | None:
    end = data.find(b"\r\n", pos)
    if end < 0:
        if len(data) - pos > MAX_LINE:
            raise Misread("no line end")
        return None
    return bytes(data[pos:end]), end + 2


def _int(text: bytes) -> int:
    try:
        n = int(text)
    except ValueError as exc:
        raise Misread(text[:20]) from exc
    if n > MAX_LEN:
        raise Misread(n)
    return n


def parse_value(data: bytearray, pos: int) -> tuple[object, int] | None:
    """The RESP2/RESP3 value at `pos` and where it ends: a bulk is its length (None when
    null), an array a list, any other value its line. None when not all here."""
    head = _line(data, pos)
    if head is None:
        return None
    line, pos = head
    kind, rest = line[:1], line[1:]
    if kind in (b"$", b"=", b"!"):
        n = _int(rest)
        if n < 0:
            return None, pos
        return (n, pos + n + 2) if len(data) >= pos + n + 2 else None
    if kind in (b"*", b"~", b">", b"%"):
        n = _int(rest) * (2 if kind == b"%" else 1)
        items = []
        for _ in range(max(n, 0)):
            got = parse_value(data, pos)
            if got is None:
                return None
            item, pos = got
            items.append(item)
        return items, pos
    if kind in (b"+", b"-", b":", b"_", b",", b"#", b"("):
        return line, pos
    raise Misread(line[:20])


def command_request(time: float, args: list[bytes]) -> WireRequest:
    """The trace request a command is, or one with no operation when not kept."""
    name = args[0].upper() if args else b""
    keys = args[1:]

    def one(op: str, size: int = 0, ttl: int = 0) -> WireRequest:
        return WireRequest(time=time, op=op, items=((args[1], size),), ttl=ttl)

    try:
        if name in (b"GET", b"MGET") and keys:
            return WireRequest(time=time, op="get", items=tuple((k, 0) for k in keys), reads=True)
        if name == b"SET":
            op, ttl, options = "set", 0, [a.upper() for a in args[3:]]
            for i, option in enumerate(options):
                if option in (b"NX", b"XX"):
                    op = "add" if option == b"NX" else "replace"
                elif option in (b"EX", b"PX"):
                    n = int(options[i + 1])
                    ttl = n if option == b"EX" else -(-n // 1000)
            return one(op, len(args[2]), ttl)
        if name in (b"SETEX", b"PSETEX"):
            n = int(args[2])
            return one("set", len(args[3]), n if name == b"SETEX" else -(-n // 1000))
        if name in (b"SETNX", b"APPEND"):
            return one("add" if name == b"SETNX" else "append", len(args[2]))
        if name == b"MSET" and keys:
            return WireRequest(time=time, op="set", items=tuple(
                (keys[i], len(keys[i + 1]) if i + 1 < len(keys) else 0)
                for i in range(0, len(keys), 2)))
        if name in (b"DEL", b"UNLINK") and keys:
            return WireRequest(time=time, op="delete", items=tuple((k, 0) for k in keys))
        if name in (b"INCR", b"INCRBY", b"DECR", b"DECRBY"):
            return one("incr" if name.startswith(b"INCR") else "decr")
    except (IndexError, ValueError):
        pass  # Redis would answer an error: nothing is done to the cache
    return WireRequest(time=time, op="")


class _Parser:
    def __init__(self, start: re.Pattern[bytes]) -> None:
        self.buf = TimedBuffer()
        self.syncing = False
        self.start = start

    def resync(self) -> None:
        """The next bytes may start mid-message: drop what is held, skip to the next
        line that starts as a message does."""
        self.buf = TimedBuffer()
        self.syncing = True

    def _synced(self) -> bool:
        if self.syncing:
            found = self.start.search(self.buf.data)
            if found is None:
                keep = min(len(self.buf.data), 16)
                self.buf.consume(len(self.buf.data) - keep)
                return False
            at = found.start() + (self.buf.data[found.start()] == ord("\n"))
            self.buf.consume(at)
            self.syncing = False
        return True


class Requests(_Parser):
    """The client's side of one connection."""

    def __init__(self) -> None:
        super().__init__(_REQUEST_START)

    def feed(self, time: float, data: bytes) -> list[WireRequest]:
        self.buf.append(time, data)
        out = []
        while self._synced() and self.buf.data:
            try:
                got = self._command()
            except Misread:
                self.resync()
                continue
            if got is None:
                break
            args, used = got
            if args:
                out.append(command_request(self.buf.time_at(0), args))
            self.buf.consume(used)
        return out

    def _command(self) -> tuple[list[bytes], int] | None:
        data = self.buf.data
        if data[:1] != b"*":
            end = data.find(b"\n")
            if end < 0:
                if len(data) > MAX_LINE:
                    raise Misread("inline")
                return None
            return bytes(data[:end]).split(), end + 1
        got = parse_value(data, 0)
        if got is None:
            return None
        items, used = got
        if not isinstance(items, list) or not all(isinstance(i, int) for i in items):
            raise Misread("not an array of bulk strings")
        args, pos = [], data.find(b"\r\n") + 2
        for n in items:
            pos = data.find(b"\r\n", pos) + 2
            args.append(bytes(data[pos:pos + n]))
            pos += n + 2
        return args, used


class Replies(_Parser):
    """The server's side of one connection."""

    def __init__(self) -> None:
        super().__init__(_REPLY_START)

    def feed(self, time: float, data: bytes) -> list[ReplyUnit]:
        self.buf.append(time, data)
        out = []
        while self._synced() and self.buf.data:
            try:
                got = parse_value(self.buf.data, 0)
            except Misread:
                self.resync()
                continue
            if got is None:
                break
            value, used = got
            sizes: tuple[int | None, ...] | None = None
            if value is None or isinstance(value, int):
                sizes = (value,)
            elif isinstance(value, list):
                sizes = tuple(v if isinstance(v, int) else None for v in value)
            out.append(ReplyUnit(time=self.buf.time_at(0), sizes=sizes))
            self.buf.consume(used)
        return out
