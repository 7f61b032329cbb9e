"""`cachelab proxy ARGS...`: runs the middleware binary with the given arguments."""

from __future__ import annotations

import os

import click

from cachelab.binaries import find_binary


def exec_proxy(args: list[str]) -> None:
    """Replaces this process with `cachelab-proxy ARGS`, so signals reach the proxy directly."""
    binary = find_binary("cachelab-proxy")
    os.execv(binary, [str(binary), *args])


@click.command(
    "proxy",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                      "help_option_names": []},
    add_help_option=False,
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def command(args: tuple[str, ...]) -> None:
    """Run the cachelab middleware (all arguments go to cachelab-proxy; try --help)."""
    exec_proxy(list(args))
