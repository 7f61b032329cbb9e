"""Measuring the links between hosts, as the original study did before its experiments:
the round trip with a TCP echo (small messages, Nagle off, one outstanding: the ends are
`cachelab.hosts.echo`, run on the two hosts) and the bandwidth with iperf3 (Debian's package),
each direction."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from cachelab.errors import UserError
from cachelab.hosts.host import Host

MESSAGE = 64
RTT_COUNT = 200
IPERF_SECONDS = 2.0
PORT = 5299


@dataclass(frozen=True)
class LinkMeasurement:
    src: str
    dst: str
    #: Round trip src -> dst -> src over TCP, microseconds.
    rtt_p50_us: float
    rtt_p99_us: float
    rtt_min_us: float
    #: TCP goodput measured by iperf3, Mbit/s: src -> dst and dst -> src (None: the link
    #: is unshaped and the bandwidth was not measured).
    mbit_forward: float | None
    mbit_reverse: float | None


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def round_trips(src: Host, dst: Host, count: int = RTT_COUNT) -> list[float]:
    """`count` TCP round trips src -> dst -> src, in microseconds."""
    server = dst.spawn_piped([*dst.python(), "echo", dst.address, str(PORT)])
    try:
        _wait_ready(server)
        client = src.run([*src.python(), "rtt", dst.address, str(PORT), str(count)],
                         timeout=60 + count / 100)
        if client.returncode != 0:
            raise UserError(f"measuring the round trip {src.name} -> {dst.name} failed: "
                            f"{client.stderr.strip()[-300:]}")
        return json.loads(client.stdout)["rtt_us"]
    finally:
        _stop(server)


def measure(src: Host, dst: Host, *, bandwidth: bool, count: int = RTT_COUNT) -> LinkMeasurement:
    """Round trip (and, with `bandwidth`, iperf3 each way) between two hosts."""
    samples = round_trips(src, dst, count)
    forward = reverse = None
    if bandwidth:
        forward = iperf(src, dst, reverse=False)
        reverse = iperf(src, dst, reverse=True)
    return LinkMeasurement(src.name, dst.name, statistics.median(samples),
                           percentile(samples, 0.99), min(samples), forward, reverse)


def loopback(count: int = RTT_COUNT) -> LinkMeasurement:
    """The loopback round trip of this host (a `local` run's every hop), measured in this
    process: an echo thread on 127.0.0.1 and a port the kernel picks, so concurrent runs
    cannot collide; the same 64-byte exchange as between emulated hosts."""
    import socket
    import threading

    from cachelab.hosts import echo

    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(30)
        port = server.getsockname()[1]

        def serve() -> None:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while block := conn.recv(echo.MESSAGE):
                    conn.sendall(block)

        thread = threading.Thread(target=serve, daemon=True)
        thread.start()
        try:
            samples = echo.rtt("127.0.0.1", port, count)
        except OSError as exc:
            raise UserError(f"measuring the loopback round trip failed: {exc}") from None
        thread.join(5)
    return LinkMeasurement("loopback", "loopback", statistics.median(samples),
                           percentile(samples, 0.99), min(samples), None, None)


#: Exchanges of the clock-offset probe; the shortest round trip's is kept.
OFFSET_COUNT = 50


def clock_offset(host: Host, count: int = OFFSET_COUNT) -> float:
    """How far `host`'s wall clock is ahead of this process's, in µs (echo.offset): a
    clock server on the host, asked from here. Emulated hosts share this kernel's clock,
    so theirs is the probe's own error (a few µs)."""
    from cachelab.hosts import echo

    server = host.spawn_piped([*host.python(), "clock", host.address, str(PORT + 2)])
    try:
        _wait_ready(server)
        return echo.offset(host.address, PORT + 2, count)[0]
    except OSError as exc:
        raise UserError(f"measuring the clock offset of host {host.name} failed: "
                        f"{exc}") from None
    finally:
        _stop(server)


def iperf(src: Host, dst: Host, *, reverse: bool, seconds: float = IPERF_SECONDS) -> float:
    """TCP goodput src -> dst (dst -> src with `reverse`) in Mbit/s, as the receiver saw it."""
    for host in (src, dst):
        if host.which("iperf3") is None:
            raise UserError(f"iperf3 not found on host {host.name}: `make deps` installs it "
                            "from Debian's packages (apt-get install iperf3 on a remote host)")
    server = dst.spawn_piped(["iperf3", "-s", "-1", "-B", dst.address, "-p", str(PORT + 1)])
    try:
        deadline = time.monotonic() + 10
        while True:
            argv = ["iperf3", "-c", dst.address, "-p", str(PORT + 1), "-J",
                    "-t", f"{seconds:g}", "-O", "0.5", *(["-R"] if reverse else [])]
            client = src.run(argv, timeout=seconds + 30)
            try:
                result = json.loads(client.stdout)
                return result["end"]["sum_received"]["bits_per_second"] / 1e6
            except (ValueError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise UserError(f"iperf3 {src.name} -> {dst.name} failed: "
                                f"{(client.stdout + client.stderr).strip()[-300:]}")
            time.sleep(0.1)  # the server was not listening yet
    finally:
        _stop(server)


class _Helper(Protocol):
    """A helper process whose output is read line by line: a local `subprocess.Popen`
    or an SSH host's `PipedRemote`."""

    @property
    def stdout(self) -> Any: ...

    def poll(self) -> int | None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


def _wait_ready(proc: _Helper) -> None:
    line = proc.stdout.readline() if proc.stdout else ""
    if "ready" not in line:
        raise UserError("the link probe's echo server did not start")


def _stop(proc: _Helper) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
