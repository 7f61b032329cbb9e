"""`cachelab report DIR`: write DIR/report.html (plots beside it) from DIR/results.db."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab.report import write_report


def run(directory: Path) -> Path:
    """Writes the report of the experiment in `directory`; returns the page's path."""
    return write_report(directory)


@click.command("report")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
def command(directory: Path) -> None:
    """Write the HTML report of an experiment directory (finished or not)."""
    click.echo(f"report: {run(directory).resolve()}")
