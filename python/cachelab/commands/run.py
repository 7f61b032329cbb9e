"""`cachelab run EXPERIMENT.toml [--out DIR] [--resume]`: run an experiment, store every run
in DIR/results.db, and write the report."""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from cachelab.errors import UserError
from cachelab.run.progress import Progress, for_terminal
from cachelab.run.runner import Outcome, run_experiment
from cachelab.spec import experiment as spec
from cachelab.spec.naming import name_of


def run(path: Path, out: Path | None = None, *, resume: bool = False, again: bool = False,
        progress: Progress | None = None, report: bool = True) -> tuple[Outcome, Path | None]:
    """Runs the experiment in `path` into `out` (default: results/NAME); returns the outcome
    and the report's path (None with report=False).

    With `again`, a finished experiment in `out` (or another one) is moved aside to
    `OUT.previous` (replacing an older one there) and the experiment starts over, and an
    unfinished run of the same file is resumed: what `make demo` needs to work every time."""
    exp = spec.load(path)
    out = out or Path("results") / exp.name
    outcome = run_experiment(exp, out, resume=resume, again=again, move_aside=_move_aside,
                             progress=progress or for_terminal())
    page = None
    if report:
        from cachelab.report import write_report

        page = write_report(out)
    return outcome, page


@click.command("run")
@click.argument("experiment", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for results.db, the run files and the report "
                   "[default: results/NAME].")
@click.option("--resume", is_flag=True,
              help="Continue an interrupted experiment in --out, keeping its finished runs.")
@click.option("--again", is_flag=True,
              help="Start over if --out holds a finished experiment (it is moved to "
                   "OUT.previous); resume it if unfinished.")
@click.option("--no-report", is_flag=True, help="Do not write the report at the end.")
def command(experiment: Path, out: Path | None, resume: bool, again: bool,
            no_report: bool) -> int:
    """Run an experiment file: every point of its sweep, repeated and validated."""
    outcome, page = run(experiment, out, resume=resume, again=again, report=not no_report)
    names = {p.label: name_of(p) for p in spec.load(experiment).points}  # as progress says
    for label, reason in outcome.unstable:
        click.echo(f"unstable: [{names.get(label, label)}] {reason}")
    click.echo(f"results: {outcome.database.resolve()}")
    if page is not None:
        click.echo(f"report: {page.resolve()}")
    return 0


def _move_aside(out: Path) -> None:
    previous = out.with_name(out.name + ".previous")
    try:
        if previous.exists():
            shutil.rmtree(previous)
        out.rename(previous)
    except OSError as exc:
        raise UserError(f"{out}: cannot move it aside to {previous} "
                        f"({exc.strerror or exc})") from None
    click.echo(f"the previous results in {out} are now in {previous}")
