"""`cachelab compare DIR_A DIR_B [...] [--out DIR]`: one report overlaying experiments."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab.errors import UserError
from cachelab.report import compare


def run(directories: list[Path], out: Path, level: float = 0.05) -> tuple[Path,
                                                                          compare.Comparison]:
    """Writes OUT/compare.html (its plots inline) and OUT/compare.csv."""
    if not 0 < level < 1:
        raise UserError(f"--level: must be between 0 and 1, got {level}")
    return compare.write(directories, out, level)


@click.command("compare")
@click.argument("directories", nargs=-1, required=True,
                type=click.Path(file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("compare-out"), show_default=True,
              help="Directory for compare.html (its plots inline) and compare.csv.")
@click.option("--level", default=0.05, show_default=True, type=float,
              help="Significance level of Welch's t-test for each difference.")
def command(directories: tuple[Path, ...], out: Path, level: float) -> None:
    """Compare stored experiments: their curves overlaid, point by point ratios to the
    first, and whether each difference is larger than the repetitions' noise.

    Points are matched on every factor any of the experiments sweeps; what cannot be
    matched is listed, one line per point.
    """
    page, comparison = run(list(directories), out, level)
    click.echo(f"matched {len(comparison.rows)} configuration(s) of "
               f"{', '.join(e.name for e in comparison.experiments)}")
    for message in comparison.unmatched:
        click.echo(f"not matched: {message}")
    click.echo(f"compare: {page.resolve()}")
