"""`cachelab export DIR [--table NAME ...] [--format csv|parquet] [--dest DIR]`: the raw
tables, or any of them and of the report's tables by name, for notebooks."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab.report import export


def run(directory: Path, fmt: str = "csv", dest: Path | None = None,
        tables: list[str] | None = None) -> list[Path]:
    return export.write(directory, fmt, dest, tables)


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--format", "fmt", default="csv", show_default=True,
              help="csv or parquet (one file per table).")
@click.option("--dest", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where to write the files [default: DIRECTORY/export].")
@click.option("--table", "tables", multiple=True, metavar="NAME",
              help="Only this table (repeat for several): a raw table or one of the "
                   "report's (factorial, queueing, mva, histograms, ...).")
def command(directory: Path, fmt: str, dest: Path | None, tables: tuple[str, ...]) -> None:
    """Export an experiment's raw data (points, runs, series, windows, CPU samples), or
    the named tables, raw or the report's, one file each.

    Raw tables: points, runs (with `steady` and one column per factor), client_summary,
    client_second, mw_window, mw_op, mw_server, mw_histogram, cpu_sample, client_instance,
    client_timing, run_percentile, run_check, run_tls, process_cpu. Report tables:
    point_means, percentile_intervals, decomposition, qos, interactive_law, per_op,
    utilisation, factorial, factorial_runs, study, phenomena, queueing, mva, mva_stations,
    histograms, links, tls_cost.
    """
    files = run(directory, fmt, dest, list(tables) or None)
    for f in files:
        click.echo(str(f))
