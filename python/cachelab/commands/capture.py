"""`cachelab capture PCAP --port PORT [--protocol auto|memcache|redis] [-o TRACE]`: a packet
capture of memcached text or RESP traffic turned into a trace that `cachelab-load --trace`
replays (twitter/cache-trace's CSV, fractional timestamps)."""

from __future__ import annotations

from pathlib import Path

import click

from cachelab.errors import UserError
from cachelab.readers.capture import Capture, read_capture, write_trace


def run(pcap: Path, port: int, protocol: str = "auto", out: Path | None = None
        ) -> tuple[Path, Capture]:
    """Reads the capture, writes the trace (beside it, `.csv`, unless `out` is given)."""
    if not 0 < port < 65536:
        raise UserError(f"--port {port} is not a TCP port")
    capture = read_capture(pcap, port, protocol)
    if not capture.records:
        raise UserError(f"{pcap}: no memcached or Redis request to port {port} in the capture")
    out = out or pcap.with_suffix(".csv")
    write_trace(capture.records, out)
    return out, capture


@click.command("capture")
@click.argument("pcap", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--port", type=int, required=True,
              help="The server's TCP port: traffic to it is requests, from it replies.")
@click.option("--protocol", type=click.Choice(["auto", "memcache", "redis"]), default="auto",
              show_default=True,
              help="memcached's text protocol or RESP; auto: memcached when a "
                   "connection's first word is a memcached command, else RESP.")
@click.option("-o", "--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="The trace to write [default: PCAP with the suffix .csv].")
def command(pcap: Path, port: int, protocol: str, out: Path | None) -> None:
    """Turn a packet capture (tcpdump's pcap or pcapng) of memcached text or Redis traffic
    into a request trace: one line per key requested, with its time, sizes, connection
    and operation, in the CSV format `cachelab-load --trace` replays."""
    path, capture = run(pcap, port, protocol, out)
    skipped = f" ({capture.skipped} left out: keys with a line end)" if capture.skipped else ""
    click.echo(f"{path}: {len(capture.records)} requests from {capture.connections} "
               f"connections{skipped}")
