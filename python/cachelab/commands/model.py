"""`cachelab model mm1|mmm|mva`: queueing-model predictions to set beside measurements.

Rates are per second; times are printed in milliseconds, the unit the measurements use.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cachelab.analysis import mva, queueing
from cachelab.commands._network import load_network
from cachelab.commands._table import num, render
from cachelab.errors import UserError

#: Exact MVA costs O(N^2) per multi-server station, so a typo like 1,2,40000000 is refused.
MAX_CLIENTS = 10_000


def run_queue(arrival_rate: float, service_rate: float, servers: int,
              as_json: bool = False) -> str:
    """M/M/1 (servers = 1) or M/M/m: rates per second in, times in ms out."""
    m = queueing.mmm(arrival_rate, service_rate, servers)
    name = "M/M/1" if servers == 1 else f"M/M/{servers}"
    if as_json:
        return json.dumps({
            "model": name, "lambda": m.arrival_rate, "mu": m.service_rate,
            "servers": m.servers, "utilization": m.utilization, "p_queue": m.p_queue,
            "mean_in_system": m.mean_in_system, "mean_in_queue": m.mean_in_queue,
            "response_ms": m.response_time * 1e3, "waiting_ms": m.waiting_time * 1e3,
        })
    rows = [
        ["utilisation (per server)", num(m.utilization, ".6f")],
        ["probability of queueing", num(m.p_queue, ".6f")],
        ["mean number in system", num(m.mean_in_system, ".6f")],
        ["mean number in queue", num(m.mean_in_queue, ".6f")],
        ["mean response time (ms)", num(m.response_time * 1e3, ".6f")],
        ["mean waiting time (ms)", num(m.waiting_time * 1e3, ".6f")],
    ]
    title = (f"{name}: lambda = {arrival_rate:g}/s, mu = {service_rate:g}/s per server, "
             f"{servers} server{'s' if servers > 1 else ''}")
    return title + "\n" + render(["metric", "value"], rows)


def parse_clients(spec: str) -> list[int]:
    """Parses "1,2,4,8" into sorted distinct populations, each 1..MAX_CLIENTS."""
    result = set()
    for part in spec.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_CLIENTS:
            raise UserError(f"--clients: {part!r} is not an integer from 1 to {MAX_CLIENTS}")
        result.add(int(part))
    return sorted(result)


def run_mva(path: Path, clients: str, as_json: bool = False) -> str:
    """Solves the network in `path` (times in ms) for each population in `clients`."""
    populations = parse_clients(clients)
    network = load_network(path)
    solved = mva.solve(network, populations[-1])
    points = [solved[n - 1] for n in populations]
    if as_json:
        return json.dumps({"points": [{
            "clients": p.clients,
            "throughput": p.throughput * 1e3,
            "response_ms": p.response_time,
            "stations": {name: {"utilization": s.utilization, "queue": s.queue_length}
                         for name, s in p.stations.items()},
        } for p in points]})
    queues = [s for s in network.stations if s.kind != "delay"]
    headers = ["clients", "X (/s)", "R (ms)",
               *[f"U {s.name}" for s in queues],
               *[f"Q {s.name}" for s in network.stations]]
    rows = [[str(p.clients), num(p.throughput * 1e3, ".1f"), num(p.response_time, ".4f"),
             *[num(p.stations[s.name].utilization, ".4f") for s in queues],
             *[num(p.stations[s.name].queue_length, ".4f") for s in network.stations]]
            for p in points]
    stations = render(["station", "kind", "servers", "demand D = V S (ms)"], [
        [s.name, s.kind, str(s.servers) if s.kind == "multi" else "-", num(s.demand)]
        for s in network.stations], left=2)
    return "\n".join([f"exact MVA, think time {network.think_time:g} ms", stations, "",
                      render(headers, rows, left=0)])


@click.group("model")
def command() -> None:
    """Queueing-model predictions: M/M/1, M/M/m and exact MVA of a closed network."""


_json = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
_lam = click.option("--lam", type=float, required=True,
                    help="Arrival rate lambda, requests per second.")
_mu = click.option("--mu", type=float, required=True,
                   help="Service rate mu of ONE server, requests per second.")


@command.command("mm1")
@_lam
@_mu
@_json
def mm1_command(lam: float, mu: float, as_json: bool) -> None:
    """M/M/1: utilisation, queueing probability, mean numbers and times (ms)."""
    click.echo(run_queue(lam, mu, 1, as_json))


@command.command("mmm")
@_lam
@_mu
@click.option("-m", "servers", type=int, required=True, help="Number of servers m.")
@_json
def mmm_command(lam: float, mu: float, servers: int, as_json: bool) -> None:
    """M/M/m (Erlang C): utilisation, queueing probability, mean numbers and times (ms)."""
    click.echo(run_queue(lam, mu, servers, as_json))


@command.command("mva")
@click.argument("network", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--clients", required=True, metavar="N,N,...",
              help=f"Populations to report, e.g. 1,2,4,8 (each 1..{MAX_CLIENTS}).")
@_json
def mva_command(network: Path, clients: str, as_json: bool) -> None:
    """Exact MVA of the closed network in NETWORK (TOML; times in ms).

    Prints per population the throughput (per second), the response time (ms, without the
    think time) and each station's utilisation per server and mean queue length (number
    present, in service or waiting). With --json:
    {"points": [{"clients", "throughput", "response_ms", "stations": {name: {"utilization",
    "queue"}}}]}; a delay station's utilization is null.
    """
    click.echo(run_mva(network, clients, as_json))
