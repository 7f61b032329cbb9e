"""`cachelab factorial FILE.csv|DIR --response COL ...`: analyse a 2^k r factorial design,
from a CSV file or from the steady runs of a stored experiment."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

import click

from cachelab.analysis import factorial
from cachelab.commands._table import num, render
from cachelab.errors import UserError
from cachelab.report import designs
from cachelab.store import Store


def read_design(path: Path, responses: Sequence[str]) -> tuple[dict[str, list[str]],
                                                                dict[str, list[float]]]:
    """Reads a design CSV: the named response columns as numbers, every other column as a
    factor whose values are kept as text (the analysis codes them -1/+1)."""
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.reader(f)
            rows = [(reader.line_num, r) for r in reader if any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {exc}") from exc
    if not rows:
        raise UserError(f"{path}: empty file; expected a header row and one row per run")
    header = [h.strip() for h in rows[0][1]]
    duplicate = next((h for h in header if header.count(h) > 1), None)
    if duplicate is not None:
        raise UserError(f"{path}: column {duplicate!r} appears twice in the header")
    for name in responses:
        if name not in header:
            raise UserError(f"--response {name!r}: no such column in {path} "
                            f"(columns: {', '.join(header)})")
    factor_names = [h for h in header if h not in responses]
    if not factor_names:
        raise UserError(f"{path}: no factor columns; every column is a --response")
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise UserError(f"{path} line {line}: {len(row)} fields, the header has "
                            f"{len(header)}")
    columns = {h: [row[c].strip() for _, row in rows[1:]] for c, h in enumerate(header)}
    for name in factor_names:
        distinct = len(set(columns[name]))
        if distinct > 2:
            raise UserError(f"{path}: column {name!r} has {distinct} different values, so it "
                            "is not a two-level factor; if it is a response, name it with "
                            "--response")
    lines = [line for line, _ in rows[1:]]
    values = {name: [_number(path, line, name, cell)
                     for line, cell in zip(lines, columns[name], strict=True)]
              for name in responses}
    return {h: columns[h] for h in factor_names}, values


def run(path: Path, responses: Sequence[str], confidence: float = 0.9,
        as_json: bool = False, *, factors: Sequence[str] | None = None,
        where: Sequence[str] = (), include_unsteady: bool = False) -> str:
    """Analyses each response of the design in `path`, a CSV file or an experiment
    directory; returns the text to print.

    As text, one table per response, separated by blank lines. As JSON, one document per
    line (JSON Lines), one per response in the order given, each naming its response.
    """
    if Path(path).is_dir():
        return run_stored(Path(path), responses, confidence, as_json, factors=factors,
                          where=parse_where(where), include_unsteady=include_unsteady)
    if factors or where or include_unsteady:
        raise UserError("--factors, --where and --include-unsteady select runs of a stored "
                        "experiment; give its directory instead of a CSV file")
    columns, values = read_design(path, responses)
    results = [(name, factorial.analyse(columns, values[name], confidence=confidence))
               for name in responses]
    if as_json:
        return "\n".join(json.dumps(to_json(name, res)) for name, res in results)
    return "\n\n".join(format_table(name, res) for name, res in results)


def parse_where(items: Sequence[str]) -> dict[str, str]:
    """["ratio=0:1", ...] -> {"ratio": "0:1", ...}."""
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise UserError(f"--where {item!r}: expected FACTOR=LEVEL, e.g. ratio=0:1")
        out[name.strip()] = value.strip()
    return out


def run_stored(directory: Path, responses: Sequence[str], confidence: float = 0.9,
               as_json: bool = False, *, factors: Sequence[str] | None = None,
               where: dict[str, str] | None = None, include_unsteady: bool = False) -> str:
    """The designs of a stored experiment (`report.designs`, the report's own analysis),
    steady runs only (every run with `include_unsteady`), one table per design and
    response."""
    with Store.open_existing(directory) as s:
        found = designs.analyse(s, responses, factors=factors, where=where,
                                confidence=confidence, include_unsteady=include_unsteady)
        scaled = designs.scales(s)
    plan = found.plan
    if not found.analysed:
        raise UserError("no design could be analysed: " + "; ".join(plan.skipped))
    steady = (f"{plan.steady_runs} of {plan.runs} runs are steady; "
              + ("unsteady runs are included (--include-unsteady)" if include_unsteady
                 else "only steady runs are used"))
    if as_json:
        return "\n".join(json.dumps({
            **to_json(name, res), "design": a.design.label, "factor_paths": a.design.letters,
            "runs": plan.runs, "steady_runs": plan.steady_runs, "notes": list(a.design.notes),
            "scale": list(scaled),
            "skipped": list(plan.skipped)}) for a in found.analysed
            for name, res in a.results.items())
    head = [f"{directory}: {steady}"]
    if scaled:
        head.append(f"scale model (topology.scale = {', '.join(f'{k:g}' for k in scaled)}): "
                    "the runs are taken at full speed, throughput x k and times / k")
    head += [f"not analysed: {reason}" for reason in plan.skipped]
    parts = ["\n".join(head)]
    for a in found.analysed:
        letters = ", ".join(f"{k} = {v}" for k, v in a.design.letters.items())
        lines = [f"design: {a.design.label}; factors {letters}; r = {a.design.replications}",
                 *a.design.notes]
        parts.append("\n".join(lines) + "\n\n" + "\n\n".join(
            format_table(name, res) for name, res in a.results.items()))
    return "\n\n".join(parts)


def format_table(response: str, res: factorial.FactorialResult) -> str:
    """A table laid out like Jain's: one row per effect, then the error and the total."""
    k = len(res.factors)
    pct = ".2f"
    if res.t_quantile is None:
        about = f"2^{k} design, r = 1: no repetitions, so no error estimate or intervals"
    else:
        level = 0.5 + res.confidence / 2
        about = (f"2^{k} design, r = {res.replications}, {res.confidence * 100:g}% confidence, "
                 f"t[{level:g}; {res.dof}] = {res.t_quantile:.4f}")
    levels = "; ".join(f"{f}: {lo} = -1, {hi} = +1" for f, (lo, hi) in res.levels.items())
    rows = []
    for e in res.effects:
        lo, hi = e.ci if e.ci is not None else (None, None)
        significant = "-" if e.significant is None else ("yes" if e.significant else "no")
        rows.append([e.name, num(e.estimate), num(e.ss), num(e.variation_pct, pct),
                     num(lo), num(hi), significant])
    if res.t_quantile is not None:
        rows.append(["error", "", num(res.sse), num(res.error_pct, pct), "", "", ""])
    rows.append(["total", "", num(res.sst), num(100.0 if res.sst > 0 else 0.0, pct),
                 "", "", ""])
    headers = ["effect", "estimate q", "sum of squares", "variation %", "ci low", "ci high",
               "significant"]
    return "\n".join([f"response: {response} ({about})", f"levels: {levels}",
                      render(headers, rows)])


def to_json(response: str, res: factorial.FactorialResult) -> dict[str, object]:
    """The result as plain data; `ss` and `variation_pct` leave out I, which explains none."""
    return {
        "response": response,
        "factors": list(res.factors),
        "levels": {f: list(pair) for f, pair in res.levels.items()},
        "replications": res.replications,
        "confidence": res.confidence,
        "effects": {e.name: e.estimate for e in res.effects},
        "ss": {e.name: e.ss for e in res.effects if e.ss is not None},
        "variation_pct": {e.name: e.variation_pct for e in res.effects
                          if e.variation_pct is not None},
        "ci": {e.name: list(e.ci) if e.ci is not None else None for e in res.effects},
        "significant": {e.name: e.significant for e in res.effects},
        "sse": res.sse,
        "sst": res.sst,
        "error_pct": res.error_pct,
    }


def _number(path: Path, line: int, column: str, cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise UserError(f"{path} line {line}, column {column!r}: {cell!r} is not a number") \
            from None


@click.command("factorial", short_help="Analyse a 2^k r factorial design (CSV file or "
               "stored experiment).")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--response", "responses", multiple=True, required=True, metavar="COL",
              help="A response column (repeat for several); in a CSV file every other "
                   "column is a factor. In an experiment: throughput, response_ms, p50_ms, "
                   "p90_ms, p99_ms, p999_ms or max_ms.")
@click.option("--factors", default=None, metavar="F,F,...",
              help="Experiment only: the design's factors, by path or last part "
                   "(workers for middleware.workers) [default: every factor that varies, "
                   "workload ones splitting the runs into one design each].")
@click.option("--where", "where", multiple=True, metavar="FACTOR=LEVEL",
              help="Experiment only: keep the runs at this level (repeat for several), "
                   "e.g. ratio=0:1.")
@click.option("--include-unsteady", is_flag=True,
              help="Experiment only: analyse runs flagged unsteady (within-run CV above "
                   "the threshold) too, instead of leaving them out.")
@click.option("--confidence", default=0.9, show_default=True, type=float,
              help="Confidence level of the intervals for the effects.")
@click.option("--json", "as_json", is_flag=True,
              help="One JSON document per line, one per response, each with a "
                   "\"response\" key, instead of tables.")
def command(file: Path, responses: tuple[str, ...], factors: str | None,
            where: tuple[str, ...], include_unsteady: bool, confidence: float,
            as_json: bool) -> None:
    """Analyse a 2^k r factorial design (Jain, ch. 18) from a CSV file or an experiment.

    A CSV FILE has one row per run and one column per factor (levels -1/+1, or any two
    labels: the smaller number, or else the label met first, is coded -1); runs with the
    same levels are repetitions. An experiment directory (`cachelab run --out DIR`) gives
    its steady runs, the factors named A, B, C, ... in order. Prints the effects, the
    variation each explains and their confidence intervals.
    """
    names = [f.strip() for f in factors.split(",") if f.strip()] if factors else None
    click.echo(run(file, list(dict.fromkeys(responses)), confidence, as_json,
                   factors=names, where=where, include_unsteady=include_unsteady))
