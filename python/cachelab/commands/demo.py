"""`cachelab demo`: three memcached servers behind the middleware, a few thousand real
requests from several clients, and the middleware's per-stage timings.
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click

from cachelab import proxy_stats
from cachelab.memcache_client import Client
from cachelab.procs import start_memcached, start_proxy

KEYS = 1000
VALUE_SIZE = 100


@dataclass(frozen=True)
class DemoResult:
    report: Path
    requests: int
    errors: int
    table: str


def _client_loop(host: str, port: int, requests: int, seed: int) -> tuple[int, int]:
    """10% sets, 70% gets, 20% multi-gets of 3-9 keys; returns (requests, wrong replies)."""
    rng = random.Random(seed)
    errors = 0
    with Client(host, port) as c:
        for _ in range(requests):
            roll = rng.random()
            if roll < 0.1:
                key = rng.randrange(KEYS)
                errors += c.set(f"key{key}", _value(key)) != "STORED"
            elif roll < 0.8:
                key = rng.randrange(KEYS)
                errors += c.get(f"key{key}") != _value(key)
            else:
                keys = rng.sample(range(KEYS), rng.randint(3, 9))
                got = c.get_multi([f"key{k}" for k in keys])
                errors += got != {f"key{k}": _value(k) for k in keys}
    return requests, errors


def _value(key: int) -> bytes:
    return (f"value-{key}-".encode() * VALUE_SIZE)[:VALUE_SIZE]


def run_demo(out: Path, requests: int = 6000, clients: int = 4, workers: int = 8,
             sharded: bool = True) -> DemoResult:
    out.mkdir(parents=True, exist_ok=True)
    stats_file, log_file = out / "proxy-stats.jsonl", out / "proxy.log"
    servers = [start_memcached() for _ in range(3)]
    try:
        proxy = start_proxy([s.address for s in servers], workers, sharded=sharded,
                            stats_file=stats_file, log_file=log_file, stats_window=1.0)
        with proxy:
            click.echo(f"3 memcached servers ({', '.join(s.address for s in servers)}) behind "
                       f"cachelab-proxy at {proxy.address}, {workers} workers, "
                       f"{'sharded' if sharded else 'non-sharded'} multi-GETs")
            with Client(proxy.host, proxy.port) as c:
                for key in range(KEYS):
                    c.set(f"key{key}", _value(key))
            click.echo(f"populated {KEYS} keys; {clients} clients send {requests} requests")
            started = time.monotonic()
            per_client = requests // clients
            with ThreadPoolExecutor(clients) as pool:
                results = list(pool.map(
                    lambda i: _client_loop(proxy.host, proxy.port, per_client, seed=i),
                    range(clients)))
            elapsed = time.monotonic() - started
        sent = sum(r[0] for r in results)
        errors = sum(r[1] for r in results)
    finally:
        for s in servers:
            s.stop()
    stats = proxy_stats.load(stats_file)
    if stats.summary is None:
        raise click.ClickException("the proxy did not write its summary; see " + str(log_file))
    table = proxy_stats.format_stage_table(proxy_stats.stage_rows(stats.summary["ops"]))
    report = out / "report.txt"
    report.write_text(
        f"cachelab demo, {time.strftime('%Y-%m-%d %H:%M:%S')}\n"
        f"{sent} requests from {clients} clients in {elapsed:.2f} s "
        f"({sent / elapsed:.0f} ops/s), {errors} wrong replies\n"
        f"proxy: {workers} workers, 3 servers, sharded={sharded}\n\n"
        "middleware per-stage mean times (microseconds), whole run incl. populate:\n"
        f"{table}\n\nraw data: {stats_file.name} (schema: docs/stats-file.md), log: "
        f"{log_file.name}\n"
    )
    return DemoResult(report, sent, errors, table)


@click.command("demo")
@click.option("--out", type=click.Path(path_type=Path), default=Path("demo-out"),
              show_default=True, help="Directory for the stats file, log and report.")
@click.option("--requests", default=6000, show_default=True, help="Requests after populate.")
@click.option("--clients", default=4, show_default=True, help="Concurrent client connections.")
@click.option("--workers", default=8, show_default=True, help="Middleware workers.")
def command(out: Path, requests: int, clients: int, workers: int) -> int:
    """Run a short real experiment on this machine and print the middleware's timings."""
    result = run_demo(out, requests=requests, clients=clients, workers=workers)
    click.echo(result.table)
    click.echo(f"{result.requests} requests, {result.errors} wrong replies")
    click.echo(f"report: {result.report.resolve()}")
    return 0 if result.errors == 0 else 1
