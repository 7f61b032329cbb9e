"""`cachelab proxy ARGS...`: runs the middleware binary with the given arguments.

`cachelab proxy reload PID|PIDFILE` asks a running proxy to reread its `--config` file
(SIGHUP): new requests use the new pools, requests in flight finish on the old ones, no
connection is dropped, and a bad file is refused (the proxy's log says why).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import click

from cachelab.binaries import find_binary
from cachelab.errors import UserError


def exec_proxy(args: list[str]) -> None:
    """Replaces this process with `cachelab-proxy ARGS`, so signals reach the proxy directly."""
    binary = find_binary("cachelab-proxy")
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
    """Sends SIGHUP to the proxy `target` names; returns its pid."""
    pid = proxy_pid(target)
    try:
        os.kill(pid, signal.SIGHUP)
    except ProcessLookupError:
        raise UserError(f"no process {pid} (has the proxy exited?)") from None
    except PermissionError:
        raise UserError(f"not allowed to signal process {pid}") from None
    return pid


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
