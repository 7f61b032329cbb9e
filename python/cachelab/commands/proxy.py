"""`cachelab proxy ARGS...`: runs the middleware binary with the given arguments.

`cachelab proxy reload PID|PIDFILE` asks a running proxy to reread its `--config` file
(SIGHUP): new requests use the new pools, requests in flight finish on the old ones, no
connection is dropped, and a bad file is refused (the proxy's log says why). Only a
process running cachelab-proxy is signalled (checked through /proc); a stale pid file
(no such process, or its pid reused by another program) is one line and exit 1.
"""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import click

from cachelab.errors import UserError
from cachelab.hosts.binaries import find_binary

PROXY = "cachelab-proxy"
#: The largest pid Linux can give (PID_MAX_LIMIT on 64-bit); 0 would signal our own group.
PID_MAX_LIMIT = 4_194_304


def exec_proxy(args: list[str]) -> None:
    """Replaces this process with `cachelab-proxy ARGS`, so signals reach the proxy directly."""
    binary = find_binary(PROXY)
    os.execv(binary, [str(binary), *args])


def proxy_pid(target: str) -> int:
    """The pid in `target`: a number, or a pid file (`cachelab-proxy --pid-file`)."""
    if target.isdigit():
        return int(target)
    path = Path(target)
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise UserError(f"{target} is neither a pid nor a readable pid file "
                        f"({exc.strerror})") from None
    if not text.isdigit():
        raise UserError(f"{target}: not a pid file (it holds {text[:40]!r})")
    return int(text)


def reload(target: str) -> int:
    """Sends SIGHUP to the proxy `target` names; returns its pid. Only a cachelab-proxy is
    signalled: a pid file outlives its proxy when the proxy is killed, and its pid may
    since have gone to another program."""
    pid = proxy_pid(target)
    stale = "" if target.isdigit() else f"{target}: stale pid file: "
    gone = UserError(f"{stale}no process {pid} (has the proxy exited?)")
    if not 0 < pid <= PID_MAX_LIMIT:
        raise gone
    handle = None
    try:
        handle = _pidfd(pid)
        name = program(pid)
        # The pidfd holds the process whose /proc entry was just read: if it is still alive,
        # the pid was not reused in between, so the check and the signal see one process.
        _signal(handle, pid, 0)
        if name != PROXY:
            raise UserError(f"{stale}process {pid} is {name!r}, not {PROXY}: nothing was "
                            "signalled")
        _signal(handle, pid, signal.SIGHUP)
    except ProcessLookupError:
        raise gone from None
    except PermissionError:
        raise UserError(f"not allowed to signal process {pid}") from None
    finally:
        if handle is not None:
            os.close(handle)
    return pid


def program(pid: int, proc: Path = Path("/proc")) -> str | None:
    """The program process `pid` runs: the file name of its executable (/proc/PID/exe) or,
    where that cannot be read (another user's process, a zombie), its command name
    (/proc/PID/comm); None if there is no such process."""
    try:
        return Path(os.readlink(proc / str(pid) / "exe").removesuffix(" (deleted)")).name
    except OSError:
        pass
    try:
        return (proc / str(pid) / "comm").read_text().strip()
    except FileNotFoundError:
        return None


def _pidfd(pid: int) -> int | None:
    """A handle on process `pid` that cannot come to mean another process (None where the
    kernel has no pidfd_open: then os.kill, with the pid-reuse race it has)."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        return os.pidfd_open(pid)
    except OSError as exc:
        if exc.errno == errno.ENOSYS:
            return None
        raise


def _signal(handle: int | None, pid: int, sig: int) -> None:
    if handle is None:
        os.kill(pid, sig)
    else:
        signal.pidfd_send_signal(handle, sig)


@click.command(
    "proxy",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                      "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Run the cachelab middleware (all arguments go to cachelab-proxy; try --help).

    `cachelab proxy reload PID|PIDFILE` reloads a running proxy's --config file."""
    if args[:1] == ("reload",):
        if len(args) != 2:
            raise UserError("usage: cachelab proxy reload PID|PIDFILE")
        pid = reload(args[1])
        click.echo(f"sent SIGHUP to cachelab-proxy {pid}: it rereads its --config file "
                   "(its log says whether the new one was taken)")
        return
    exec_proxy(list(args))
