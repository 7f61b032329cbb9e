"""`cachelab capacity`: the highest offered rate whose latency percentile stays under a
target, found in open loop (analysis/capacity.py).

Two targets:
- `cachelab capacity EXPERIMENT.toml [--out DIR]`: the experiment's own system, started
  by the harness for every point of its sweep (its points run with `load.mode =
  "capacity"`), stored and reported like any experiment;
- `cachelab capacity --server HOST:PORT [options]`: a server or proxy that is already
  running; the trials go to DIR/capacity.json (and a plot, DIR/capacity.png).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cachelab.analysis import capacity as cap
from cachelab.errors import UserError
from cachelab.readers import loadgen
from cachelab.run import capacity as capacity_io
from cachelab.spec import experiment as spec


def server_experiment(*, protocol: str, ratio: str, data_size: int, key_maximum: int,
                      threads: int, clients: int, target_ms: float, percentile: float,
                      trial_s: float, repetitions: int, start_rate: float,
                      max_rate: float, tolerance: float) -> spec.Experiment:
    """The experiment a `--server` search stands for, checked like any experiment file."""
    kind = "redis" if protocol == "redis" else "memcached"
    text = f"""name = "capacity"
order = "sweep"
run_time_s = 2
warmup_s = 0.5
cooldown_s = 0.5
qos_target_ms = {target_ms}
[capacity]
percentile = {percentile}
trial_s = {trial_s}
trial_repetitions = {repetitions}
start_rate = {start_rate}
max_rate = {max_rate}
tolerance = {tolerance}
[servers]
kind = "{kind}"
[middleware]
count = 0
[load]
mode = "capacity"
instances = 1
threads = {threads}
clients = {clients}
protocol = "{'binary' if protocol == 'memcache_binary' else 'text'}"
[workload]
ratio = "{ratio}"
data_size = {data_size}
key_maximum = {key_maximum}
"""
    return spec.parse(text)


def search_server(address: str, out: Path, exp: spec.Experiment,
                  log: Callable[[str], None] = click.echo) -> capacity_io.Outcome:
    match = re.fullmatch(r"(.+):(\d+)", address)
    if not match:
        raise UserError(f"--server: expected HOST:PORT, got {address!r}")
    out.mkdir(parents=True, exist_ok=True)
    config = exp.points[0].config
    outcome = capacity_io.search(exp, config,
                                 [(match[1], int(match[2]), loadgen.PLAIN)], out, log=log)
    write_outcome(out, exp, outcome, address)
    return outcome


def write_outcome(out: Path, exp: spec.Experiment, outcome: capacity_io.Outcome,
                  target: str) -> None:
    a = outcome.answer
    doc = {
        "schema": "cachelab-capacity/1",
        "target": target,
        "percentile": exp.capacity.percentile,
        "target_ms": exp.capacity.target_ms or exp.qos_target_ms,
        "capacity": a.capacity, "uncertainty": a.uncertainty, "latency_ms": a.latency_ms,
        "reason": a.reason, "limited_by_generator": a.limited_by_generator,
        "trials": [t.__dict__ | {"trial_s": outcome.trial_s[t.rate]}
                   for t in outcome.trials],
        "judgements": [j.__dict__ for j in outcome.judgements],
    }
    (out / "capacity.json").write_text(json.dumps(doc, indent=2) + "\n")
    from cachelab.report.plots import plot_capacity_trials, render

    render(out / "capacity.png", lambda ax: plot_capacity_trials(
        ax, [(t.rate, t.latency_ms) for t in outcome.trials],
        exp.capacity.target_ms or exp.qos_target_ms, exp.capacity.percentile, a.capacity))


def describe(answer: cap.Answer, percentile: float, target_ms: float) -> str:
    if answer.capacity is None:
        return f"capacity: none found ({answer.reason})"
    spread = f" (+{answer.uncertainty:,.0f})" if answer.uncertainty else ""
    return (f"capacity: {answer.capacity:,.0f} ops/s{spread} with p{percentile:g} "
            f"{answer.latency_ms:.3f} ms <= {target_ms:g} ms; {answer.reason}")


@click.command("capacity")
@click.argument("experiment", required=False,
                type=click.Path(dir_okay=False, path_type=Path))
@click.option("--server", help="Search a running server or proxy at HOST:PORT.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Directory for the results [default: results/NAME, or results/capacity].")
@click.option("--again", is_flag=True, help="As for `cachelab run`.")
@click.option("--protocol", type=click.Choice(["memcache_text", "memcache_binary", "redis"]),
              default="memcache_text", show_default=True)
@click.option("--target-ms", type=float, default=1.0, show_default=True)
@click.option("--percentile", type=float, default=99.0, show_default=True)
@click.option("--ratio", default="1:10", show_default=True, help="sets:gets")
@click.option("--data-size", type=int, default=64, show_default=True)
@click.option("--key-maximum", type=int, default=10000, show_default=True)
@click.option("--threads", type=int, default=1, show_default=True)
@click.option("--clients", type=int, default=8, show_default=True,
              help="Connections per thread.")
@click.option("--trial-s", type=float, default=3.0, show_default=True)
@click.option("--repetitions", type=int, default=3, show_default=True,
              help="Trials per rate (the median decides).")
@click.option("--start-rate", type=float, default=1000.0, show_default=True)
@click.option("--max-rate", type=float, default=2_000_000.0, show_default=True)
@click.option("--tolerance", type=float, default=0.05, show_default=True)
def command(experiment: Path | None, server: str | None, out: Path | None, again: bool,
            **options: Any) -> int:
    """Find the highest rate whose latency percentile stays under a target."""
    if (experiment is None) == (server is None):
        raise UserError("give an experiment file or --server HOST:PORT (one of them)")
    if server is not None:
        exp = server_experiment(**options)
        outcome = search_server(server, out or Path("results") / "capacity", exp)
        click.echo(describe(outcome.answer, exp.capacity.percentile,
                            exp.capacity.target_ms or exp.qos_target_ms))
        return 0
    from cachelab.commands import run as run_cmd

    assert experiment is not None  # one of the two, checked above
    ran, page = run_cmd.run(_as_capacity(experiment), out, again=again)
    click.echo(f"results: {ran.database.resolve()}")
    if page is not None:
        click.echo(f"report: {page.resolve()}")
    return 0


def _as_capacity(path: Path) -> Path:
    """The experiment file, checked: every point must be in capacity mode."""
    exp = spec.load(path)
    modes = {p.config.load.mode for p in exp.points}
    if modes == {"capacity"}:
        return path
    raise UserError(f"{path}: set load.mode = \"capacity\" in [load] (its points are in "
                    f"{', '.join(sorted(modes))} mode); `cachelab run` runs it as it is")
