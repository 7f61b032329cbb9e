"""The `cachelab` command: one module per subcommand under `cachelab.commands`.

Each subcommand module exposes a click command named `command`; its logic lives in plain
functions that tests call without argv.
"""

from __future__ import annotations

import importlib
import sys

import click

from cachelab import __version__
from cachelab.errors import UserError

#: Subcommand modules under `cachelab.commands`, in the order `--help` lists them.
COMMAND_MODULES = ["proxy", "factorial", "model", "run", "capacity", "report", "compare",
                   "export", "capture"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cachelab")
def cli() -> None:
    """cachelab: measure memcached and Redis, with or without the cachelab middleware."""


for _name in COMMAND_MODULES:
    cli.add_command(importlib.import_module(f"cachelab.commands.{_name}").command)


def main(argv: list[str] | None = None) -> int:
    """Runs the CLI; a `UserError` becomes one line on stderr and exit status 1."""
    try:
        result = cli.main(args=argv, prog_name="cachelab", standalone_mode=False)
    except UserError as exc:
        click.echo(f"cachelab: error: {exc}", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("cachelab: interrupted", err=True)
        return 130
    return result if isinstance(result, int) else 0


if __name__ == "__main__":
    sys.exit(main())
