"""Starting servers, middlewares and load generators as processes on a `Host`: this host
on loopback (the `local` topology), or an emulated host of the `netns` topology (its
command prefix enters the host's namespace and cgroup), optionally pinned to CPUs.

Every process is started in its own session, so a Ctrl-C in the terminal reaches only the
harness, which then stops them in order; and with a parent-death signal (`setpriv
--pdeathsig`), so that if the harness itself is killed they do not outlive it. Pinning goes
through `taskset`, before exec, so every thread the process creates inherits it.
"""

from __future__ import annotations

import os
import random
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cachelab.errors import UserError
from cachelab.hosts import tls
from cachelab.hosts.binaries import find_binary
from cachelab.hosts.host import LOOPBACK, Host
from cachelab.hosts.procs import (
    START_TIMEOUT_S,
    Managed,
    free_port,
    listens,
    require_command,
    wait_for_port,
    wait_for_socket,
)
from cachelab.spec.cores import ThreadShare

HOST = LOOPBACK.address


def wrap(argv: Sequence[str], cpus: Sequence[int] = (), host: Host = LOOPBACK) -> list[str]:
    """The command line as `host` runs it (parent-death signal, prefix, pinning)."""
    return host.command(argv, cpus)


def pinned(cpus: Sequence[int], i: int) -> tuple[int, ...]:
    """Process i of a group pinned round-robin over `cpus` (empty: not pinned)."""
    return (cpus[i % len(cpus)],) if cpus else ()


@dataclass(frozen=True)
class ServerOptions:
    """How to start one memcached or Redis (spec.Servers, per process)."""

    kind: str = "memcached"
    threads: int = 1
    memory_mb: int = 64
    #: memcached -R.
    group_size: int | None = None
    extra_args: tuple[str, ...] = ()
    #: Redis: "off", "rdb" or "aof".
    persistence: str = "off"
    #: Serve TLS with these certificates (None: plain).
    certificates: tls.TlsFiles | None = None
    #: Listen on this Unix socket instead of TCP (None: TCP).
    socket: Path | None = None


def server_argv(kind: str, port: int, threads: int, memory_mb: int,
                listen: str = HOST, as_root: bool | None = None,
                options: ServerOptions | None = None, data_dir: Path | None = None
                ) -> list[str]:
    o = options or ServerOptions(kind, threads, memory_mb)
    if kind == "redis":
        if o.socket is not None:
            transport = ["--port", "0", "--unixsocket", str(o.socket),
                         "--unixsocketperm", "700"]
        elif o.certificates is not None:
            transport = tls.redis_args(o.certificates, port)
        else:
            transport = ["--port", str(port)]
        argv = [require_command("redis-server"), *transport, "--bind", listen,
                "--protected-mode", "no", "--maxmemory", f"{memory_mb}mb",
                "--io-threads", str(threads)]
        argv += ["--io-threads-do-reads", "yes"] if threads > 1 else []
        if o.persistence == "off":
            argv += ["--save", "", "--appendonly", "no"]
        else:
            argv += ["--dir", str(data_dir or ".")]
            argv += (["--appendonly", "yes", "--appendfsync", "everysec", "--save", ""]
                     if o.persistence == "aof" else
                     ["--appendonly", "no", "--save", "3600 1 300 100 60 10000"])
        return argv + list(o.extra_args)
    transport = (["-s", str(o.socket)] if o.socket is not None
                 else ["-l", listen, "-p", str(port)])
    if o.certificates is not None:
        transport += tls.memcached_args(o.certificates.server)
    argv = [require_command("memcached"), *transport, "-U", "0",
            "-t", str(threads), "-m", str(memory_mb)]
    argv += ["-R", str(o.group_size)] if o.group_size else []
    as_root = os.geteuid() == 0 if as_root is None else as_root
    argv += ["-u", "root"] if as_root else []
    return argv + list(o.extra_args)


def start_server(kind: str, *, threads: int, memory_mb: int, cpus: Sequence[int],
                 log: Path, host: Host = LOOPBACK, options: ServerOptions | None = None
                 ) -> Managed:
    """A fresh memcached or Redis on a free port of `host`; returns once it accepts. Its
    command line is written beside its log (`.cmdline`), so the run records it."""
    options = options or ServerOptions(kind, threads, memory_mb)
    data_dir = log.with_suffix(".data")
    if kind == "redis" and options.persistence != "off":
        data_dir.mkdir(exist_ok=True)
    for _ in range(5):
        port = _port(host)
        argv = server_argv(kind, port, threads, memory_mb, host.address, host.root, options,
                           data_dir)
        log.with_suffix(".cmdline").write_text(" ".join(argv) + "\n")
        proc = host.spawn(argv, log, cpus)
        if options.socket is not None:
            if wait_for_socket(options.socket):
                return Managed(kind, proc, host.address, 0, {"log": log}, options.socket)
        elif wait_for_port(host.address, port) and (host.remote or listens(proc, port)):
            return Managed(kind, proc, host.address, port, {"log": log})
        proc.kill()
        proc.wait()
        if options.socket is not None:
            break  # a socket path is not taken by another process as a port is
    where = options.socket or host.address
    raise UserError(f"{kind} did not start listening on {where}; see {log}")


#: The threads that serve requests, by their names in /proc/PID/task/*/comm.
SERVER_THREADS = {"memcached": ("mc-worker",), "redis": ("redis-server", "io_thd_")}


def server_threads(pid: int, kind: str, proc_root: Path = Path("/proc")) -> list[int]:
    """The thread ids of a server's request-serving threads, in thread-id order."""
    names = SERVER_THREADS[kind]
    found = []
    for task in sorted((proc_root / str(pid) / "task").iterdir(), key=lambda p: int(p.name)):
        try:
            comm = (task / "comm").read_text().strip()
        except OSError:
            continue
        if any(comm == n or (n.endswith("_") and comm.startswith(n)) for n in names):
            found.append(int(task.name))
    return found


def wait_threads(pid: int, kind: str, expected: int = 1, timeout: float = 5.0
                 ) -> list[int]:
    """The serving threads of server `pid` once it has started `expected` of them
    (bounded wait); a UserError if it has none."""
    deadline = time.monotonic() + timeout
    while len(threads := server_threads(pid, kind)) < expected and \
            time.monotonic() < deadline:
        time.sleep(0.02)
    if not threads:
        raise UserError(f"{kind} (pid {pid}): no serving threads found")
    return threads


def cap_threads(pid: int, kind: str, host: Host, record: Path, expected: int = 1,
                share: ThreadShare | None = None) -> None:
    """Each serving thread of server `pid` on an emulated core of its own: a cgroup inside
    its host's, limited to the host's thread_quota, or to `share` where the host's
    threads time-share its emulated cores (docs/topologies.md, "Emulated cores"); which
    thread went where is written to `record`."""
    if host.group is None:
        raise UserError(f"host {host.name}: thread_quota needs the host's own cgroup")
    share = share or ThreadShare(host.thread_quota)
    tids = wait_threads(pid, kind, expected)
    groups = host.group.cap_threads(tids, share.quota, share.period_us)
    period = share.period_us or host.group.period_us
    record.write_text("".join(f"thread {tid} -> {g} ({share.quota:g} core per {period} us)\n"
                              for tid, g in zip(tids, groups, strict=True)))


def pin_threads(pid: int, kind: str, cpus: Sequence[int], first: int = 0,
                expected: int = 1, timeout: float = 5.0) -> dict[int, int]:
    """Pins each serving thread of server `pid` to its own CPU, round-robin over `cpus`
    starting at `first`; returns {thread id: cpu}. Waits (bounded) until the server has
    started its `expected` threads."""
    threads = wait_threads(pid, kind, expected, timeout)
    placed = {}
    for j, tid in enumerate(threads):
        cpu = cpus[(first + j) % len(cpus)]
        os.sched_setaffinity(tid, {cpu})
        placed[tid] = cpu
    return placed


@dataclass(frozen=True)
class MiddlewareTransport:
    """How a middleware meets its clients and its servers: TLS certificates for its
    listener and/or towards its servers (None: plain), or a Unix socket to listen on."""

    listener_tls: tls.TlsFiles | None = None
    server_tls: tls.TlsFiles | None = None
    socket: Path | None = None

    def argv(self) -> list[str]:
        argv = tls.proxy_listener_args(self.listener_tls) if self.listener_tls else []
        argv += tls.proxy_server_args(self.server_tls) if self.server_tls else []
        return argv


#: What a middleware's pool speaks to its clients and its servers (`--protocol`), by the
#: servers' kind; memcached is the proxy's default and is left off its command line.
PROXY_PROTOCOLS = ("memcached", "redis")


@dataclass(frozen=True)
class ProxySettings:
    """How one cachelab-proxy serves (spec.Middleware, and the servers' protocol)."""

    workers: int
    sharded: bool = False
    #: `--loops`: event-loop threads, each with `workers` workers of its own.
    loops: int = 1
    pipeline: int = 1
    busy_poll_us: int = 0
    #: "memcached" or "redis": a Redis pool's clients and servers speak RESP.
    protocol: str = "memcached"
    #: Seconds per statistics window.
    window_s: float = 1.0
    #: `--share-connections`: the workers share one connection per server.
    share_connections: bool = False
    #: `--merge-gets`: a batch's gets for one server go out as one line.
    merge_gets: bool = False

    def __post_init__(self) -> None:
        if self.protocol not in PROXY_PROTOCOLS:
            raise ValueError(f"protocol must be one of {', '.join(PROXY_PROTOCOLS)}, "
                             f"got {self.protocol!r}")


def middleware_argv(servers: Sequence[str], settings: ProxySettings, *,
                    listen: Sequence[str], stats_file: Path, log_file: Path,
                    transport: MiddlewareTransport = MiddlewareTransport()) -> list[str]:
    """cachelab-proxy's arguments (after the program) for a pool of `servers`: a Redis
    pool gets `--protocol redis`, and everything else (workers, sharded MGET, stats, TLS,
    sockets) is as for memcached."""
    s = settings
    argv = [*listen, *transport.argv()]
    argv += ["--protocol", s.protocol] if s.protocol != "memcached" else []
    argv += ["-t", str(s.workers), "--stats-window", f"{s.window_s:g}",
             "--stats-file", str(stats_file), "--log-file", str(log_file), "-m", *servers]
    argv += ["-s"] if s.sharded else []
    argv += ["--loops", str(s.loops)] if s.loops != 1 else []
    argv += ["--pipeline", str(s.pipeline)] if s.pipeline > 1 else []
    argv += ["--busy-poll-us", str(s.busy_poll_us)] if s.busy_poll_us else []
    argv += ["--share-connections"] if s.share_connections else []
    argv += ["--merge-gets"] if s.merge_gets else []
    return argv


def start_middleware(servers: Sequence[str], settings: ProxySettings, *,
                     cpus: Sequence[int], stats_file: Path, log_file: Path, out: Path,
                     host: Host = LOOPBACK,
                     transport: MiddlewareTransport = MiddlewareTransport()) -> Managed:
    """cachelab-proxy on a free port (it prints `listening on ADDR` first on stdout; on a
    remote host, where its output is not at hand, on a port chosen here), or on the
    transport's Unix socket (`middleware_argv`). Its command line is written beside `out`
    (`.cmdline`), so the run records it."""
    port = _port(host) if host.remote else 0
    listen = (["--unix-socket", str(transport.socket)] if transport.socket is not None
              else ["-l", host.address, "-p", str(port)])
    argv = [str(find_binary("cachelab-proxy")),
            *middleware_argv(servers, settings, listen=listen, stats_file=stats_file,
                             log_file=log_file, transport=transport)]
    out.with_suffix(".cmdline").write_text(" ".join(argv) + "\n")
    proc = host.spawn(argv, out, cpus)
    files = {"stats": stats_file, "log": log_file}
    if host.remote:
        if wait_for_port(host.address, port):
            return Managed("cachelab-proxy", proc, host.address, port, files)
        proc.kill()
        proc.wait()
        raise UserError(f"cachelab-proxy did not start on host {host.name}; see {out}")
    deadline = time.monotonic() + START_TIMEOUT_S
    prefix = "listening on "
    while time.monotonic() < deadline:
        first = out.read_text().partition("\n")
        if first[1]:
            if not first[0].startswith(prefix):
                break
            if transport.socket is not None:
                return Managed("cachelab-proxy", proc, host.address, 0, files,
                               transport.socket)
            address, _, listening = first[0][len(prefix):].rpartition(":")
            return Managed("cachelab-proxy", proc, address, int(listening), files)
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    raise UserError(f"cachelab-proxy did not start; see {out} and {log_file}")


def start_load(args: Sequence[str], *, cpus: Sequence[int], out: Path,
               host: Host = LOOPBACK) -> Managed:
    """A cachelab-load instance; its human summary and errors go to `out`."""
    proc = host.spawn([str(find_binary("cachelab-load")), *args], out, cpus)
    return Managed("cachelab-load", proc, "", 0, {"out": out})


def _port(host: Host) -> int:
    """A port for a listener on `host`: free here a moment ago (the namespaces of emulated
    hosts start empty), or a random high one on a remote host (checked when it starts)."""
    if host.remote:
        return random.randint(20000, 59999)
    return free_port()


def wait_all(loads: Sequence[Managed], timeout: float) -> None:
    """Waits for every load generator; one that fails or overruns is an error naming its
    output file (the caller stops everything)."""
    deadline = time.monotonic() + timeout
    for load in loads:
        try:
            code = load.process.wait(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            raise UserError(f"cachelab-load did not finish within {timeout:g} s; see "
                            f"{load.files['out']}") from None
        if code != 0:
            tail = load.files["out"].read_text(errors="replace").strip().splitlines()[-1:]
            raise UserError(f"cachelab-load exited with status {code}: "
                            f"{tail[0] if tail else ''} (see {load.files['out']})")
