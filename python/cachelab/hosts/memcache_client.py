"""A small blocking memcached text-protocol client (for the demo, checks and tests)."""

from __future__ import annotations

import socket
from dataclasses import dataclass


class ProtocolError(Exception):
    """The server answered something that is not a valid reply."""


@dataclass
class Client:
    host: str
    port: int
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self._sock = socket.create_connection((self.host, self.port), timeout=self.timeout)
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _line(self) -> bytes:
        while b"\r\n" not in self._buf:
            self._fill()
        line, self._buf = self._buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            self._fill()
        data, self._buf = self._buf[:n], self._buf[n:]
        return data

    def _fill(self) -> None:
        chunk = self._sock.recv(65536)
        if not chunk:
            raise ProtocolError("connection closed by the server")
        self._buf += chunk

    def set(self, key: str, value: bytes, flags: int = 0, exptime: int = 0) -> str:
        """Stores a value; returns the reply line (STORED on success)."""
        header = f"set {key} {flags} {exptime} {len(value)}\r\n".encode()
        self._sock.sendall(header + value + b"\r\n")
        return self._line().decode()

    def get_multi(self, keys: list[str]) -> dict[str, bytes]:
        """Values of the keys that hit, in the order the server sent them."""
        self._sock.sendall(f"get {' '.join(keys)}\r\n".encode())
        values: dict[str, bytes] = {}
        while True:
            line = self._line()
            if line == b"END":
                return values
            parts = line.split(b" ")
            if parts[0] != b"VALUE" or len(parts) < 4:
                raise ProtocolError(f"unexpected reply line {line!r}")
            data = self._exactly(int(parts[3]) + 2)
            values[parts[1].decode()] = data[:-2]

    def get(self, key: str) -> bytes | None:
        return self.get_multi([key]).get(key)

    def stats(self) -> dict[str, str]:
        self._sock.sendall(b"stats\r\n")
        stats = {}
        while (line := self._line()) != b"END":
            _, name, value = line.decode().split(" ", 2)
            stats[name] = value
        return stats
