"""`cachelab report DIR`: write DIR/report.html (one file, plots inline) from
DIR/results.db; `--image-files` writes the plots as PNG files in DIR/report-images/."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab.report import write_report


def run(directory: Path, image_files: bool = False) -> Path:
    """Writes the report of the experiment in `directory`; returns the page's path."""
    return write_report(directory, image_files=image_files)


@click.command("report")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--image-files", is_flag=True,
              help="Write the plots as PNG files in DIR/report-images/ instead of inline.")
def command(directory: Path, image_files: bool) -> None:
    """Write the HTML report of an experiment directory (finished or not): one file, its
    plots inline."""
    click.echo(f"report: {run(directory, image_files).resolve()}")
