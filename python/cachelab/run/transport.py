"""How the processes of a run reach each other: plain TCP, TLS with the experiment's
throw-away certificates (tls.py), or Unix sockets, as `servers.tls`, `middleware.tls`,
`servers.unix_socket` and `middleware.unix_socket` say; and what each encrypted hop
negotiated, recorded with the run.

The load generators speak TLS to whatever they talk to when it serves TLS (the
middleware, or the servers without one); the middleware speaks TLS to the servers when
they serve it. So the hops are `load->server` (direct), or `load->middleware` and
`middleware->server`, each encrypted or not on its own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError
from cachelab.hosts import tls
from cachelab.hosts.host import Host
from cachelab.hosts.local import MiddlewareTransport
from cachelab.hosts.procs import Managed
from cachelab.readers import loadgen
from cachelab.spec.experiment import RunConfig
from cachelab.store import TlsSession

#: Seconds allowed for the probe of one server's TLS.
PROBE_TIMEOUT_S = 10.0

#: The longest path a Unix socket may have: sun_path holds 108 bytes, the NUL included.
SUN_PATH_MAX = 107

#: The longest name below the temporary directory that `socket_directory` makes room for.
LONGEST_SOCKET_NAME = "/cachelab-sock-xxxxxxxx/middleware-9999.sock"


def socket_directory(temp_dir: str | None = None) -> str:
    """Where a run's private socket directory goes: the temporary directory, or /tmp when
    that directory's path leaves no room for a socket's name (a deep TMPDIR, or pytest's
    per-test directories), since a longer socket path cannot be bound at all."""
    base = temp_dir if temp_dir is not None else tempfile.gettempdir()
    if len(os.fsencode(base)) + len(LONGEST_SOCKET_NAME) > SUN_PATH_MAX:
        return "/tmp"
    return base


@dataclass(frozen=True)
class Wiring:
    """The transports of one run: the certificates (None without TLS) and the directory
    its Unix sockets are made in (None without them)."""

    config: RunConfig
    certificates: tls.TlsFiles | None = None
    sockets: Path | None = None
    #: With `load.shard`: every server's address, once they are started (`sharding`).
    pool: tuple[str, ...] = ()

    def sharding(self, servers: Sequence[Managed]) -> Wiring:
        """The wiring with the servers the load generators shard over (with `load.shard`,
        else itself). Named as the middleware names them, so keys land where it puts them."""
        if not self.config.load.shard or self.config.middleware.count:
            return self
        return dataclasses.replace(self, pool=tuple(s.address for s in servers))

    def _certificates(self, field: str) -> tls.TlsFiles:
        if self.certificates is None:
            raise UserError(f"{field}: this run has no certificates (a bug: the runner "
                            "makes them for every run with TLS)")
        return self.certificates

    def server_tls(self) -> tls.TlsFiles | None:
        return self._certificates("servers.tls") if self.config.servers.tls else None

    def server_socket(self, i: int) -> Path | None:
        """Server i's Unix socket, or None (TCP)."""
        if not self.config.servers.unix_socket:
            return None
        assert self.sockets is not None
        return self.sockets / f"server-{i}.sock"

    def middleware(self, i: int) -> MiddlewareTransport:
        m = self.config.middleware
        socket = None
        if m.unix_socket:
            assert self.sockets is not None
            socket = self.sockets / f"middleware-{i}.sock"
        return MiddlewareTransport(
            listener_tls=self._certificates("middleware.tls") if m.tls else None,
            server_tls=self.server_tls(), socket=socket)

    def to_servers(self, server: Managed) -> loadgen.Transport:
        """How a load generator (the populate step, or the load without a middleware)
        reaches a server."""
        files = self.server_tls()
        return loadgen.Transport(server.socket, files.ca if files else None, tls.SERVER_NAME)

    def to_targets(self, target: Managed) -> loadgen.Transport:
        """How the load generators reach their target (a middleware, a server, or every
        server with `load.shard`)."""
        if not self.config.middleware.count:
            return dataclasses.replace(self.to_servers(target), shard=self.pool)
        files = (self._certificates("middleware.tls") if self.config.middleware.tls
                 else None)
        return loadgen.Transport(target.socket, files.ca if files else None,
                                 tls.MIDDLEWARE_NAME)


def client_sessions(c: RunConfig, reports: Sequence[loadgen.Report]) -> tuple[TlsSession, ...]:
    """What each load generator's TLS handshake agreed on (its first connection's), from
    its report. A TLS run whose report names no version is an error: it did not speak
    TLS, or could not say."""
    if not c.client_tls:
        return ()
    hop = "load->middleware" if c.middleware.count else "load->server"
    out = []
    for i, report in enumerate(reports):
        setup = report.connection_setup
        if setup is None or setup.tls_version is None or setup.cipher_suite is None:
            raise UserError(f"load generator {i} spoke TLS but its report names no TLS "
                            "version (cachelab-load too old? rebuild it)")
        out.append(TlsSession(hop, i, setup.tls_version, setup.cipher_suite, "cachelab-load"))
    return tuple(out)


def server_sessions(c: RunConfig, servers: Sequence[Managed], certificates: tls.TlsFiles,
                    host: Host) -> tuple[TlsSession, ...]:
    """What each server negotiates with a client on the middleware's host: one probe
    connection per server (Python's ssl, verified as the middleware verifies them), since
    the middleware does not report its handshakes. None without a middleware or without
    TLS to the servers."""
    if not (c.middleware.count and c.servers.tls):
        return ()
    out = []
    for i, server in enumerate(servers):
        found = _probe(server.host, server.port, certificates.ca, host)
        out.append(TlsSession("middleware->server", i, found.version, found.cipher, "probe"))
    return tuple(out)


def _probe(address: str, port: int, ca: Path, host: Host) -> tls.Negotiated:
    """The probe from `host`: in this process when it is this host's own network, else
    as `python -m cachelab.hosts.tls probe` through the host's command prefix (its namespace)."""
    try:
        if not getattr(host, "prefix", ()) and not host.remote:
            return tls.probe(address, port, ca, tls.SERVER_NAME)
        done = host.run([sys.executable, "-m", "cachelab.hosts.tls", "probe", address, str(port),
                         str(ca), tls.SERVER_NAME], timeout=PROBE_TIMEOUT_S)
        if done.returncode != 0:
            raise OSError(done.stderr.strip().splitlines()[-1:] or "failed")
        found = json.loads(done.stdout)
        return tls.Negotiated(found["version"], found["cipher"])
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"TLS probe of the server at {address}:{port} failed: {exc}") from None
