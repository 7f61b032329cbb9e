"""`cachelab export DIR --format csv|parquet [--dest DIR]`: the raw tables for notebooks."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab import export


def run(directory: Path, fmt: str = "csv", dest: Path | None = None) -> list[Path]:
    return export.write(directory, fmt, dest)


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", default="csv", show_default=True,
              help="csv or parquet (one file per table).")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write the files [default: DIRECTORY/export].")
def command(directory: Path, fmt: str, dest: Path | None) -> None:
    """Export an experiment's raw data (points, runs, series, windows, CPU samples)."""
    files = run(directory, fmt, dest)
    for f in files:
        click.echo(str(f))
