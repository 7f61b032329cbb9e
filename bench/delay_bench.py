"""The delay line of the emulated hosts (`cachelab-delay`): its CPU per packet and the
jitter it adds.

Two emulated hosts, each link with a 0.45 ms one-way delay (1.8 ms added per round trip),
unshaped. Measured:
- added round trip: p50 and p99 of (RTT with the delay - configured 1.8 ms), where the RTT
  of the same path without delay (the base) is measured first and subtracted at p50;
- CPU per packet: a 3 s iperf3 bulk transfer through the delay lines, the delay processes'
  CPU seconds (getrusage, from their statistics lines) over the packets they forwarded,
  and the packet rate reached.
Run as root: `python bench/delay_bench.py` (make bench).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from cachelab.hosts import linkprobe, netns
from cachelab.spec import experiment as spec
from cachelab.spec import topology

DELAY_MS = 0.45
SAMPLES = 2000


def layout(delay_ms: float) -> topology.Layout:
    text = f"""name = "bench"
run_time_s = 3
warmup_s = 0.5
cooldown_s = 0.5
[topology]
kind = "netns"
delay_ms = {delay_ms}
[middleware]
count = 0
[sweep.factors]
"load.clients" = [1]
"""
    return topology.plan(spec.parse(text).points[0].config)


def rtts(delay_ms: float, log: Path) -> list[float]:
    with netns.DataCentre(layout(delay_ms), log_dir=log) as centre:
        return linkprobe.round_trips(centre.hosts["load1"], centre.hosts["server1"], SAMPLES)


def bulk(log: Path) -> tuple[float, float, float]:
    """(packets/s, CPU us per packet, Mbit/s) of the delay lines under an iperf3 transfer."""
    with netns.DataCentre(layout(DELAY_MS), log_dir=log) as centre:
        mbit = linkprobe.iperf(centre.hosts["load1"], centre.hosts["server1"], reverse=False,
                               seconds=3)
    packets = cpu = elapsed = 0.0
    for name in ("load1", "server1"):
        stats = json.loads((log / f"delay-{name}.json").read_text())
        packets += stats["ab"]["packets"] + stats["ba"]["packets"]
        cpu += stats["cpu_s"]
        elapsed = max(elapsed, stats["elapsed_s"])
    return packets / elapsed, 1e6 * cpu / max(packets, 1), mbit


def small_packets(log: Path, pps: int = 100_000) -> tuple[float, float, float, float]:
    """64-byte UDP datagrams through one delay line at `pps` for 2 s: (packets/s it
    forwarded, loss %, lateness p99 us, CPU us per packet)."""
    with netns.DataCentre(layout(DELAY_MS), log_dir=log) as centre:
        a, b = centre.hosts["load1"], centre.hosts["server1"]
        server = b.spawn_piped(["iperf3", "-s", "-1", "-B", b.address, "-p", "5302"])
        try:
            for _ in range(50):
                result = a.run(["iperf3", "-c", b.address, "-p", "5302", "-u", "-l", "64",
                                "-b", str(pps * 64 * 8), "-t", "2", "-J"], timeout=30)
                if '"sum"' in result.stdout:
                    break
                time.sleep(0.1)
        finally:
            server.kill()
            server.wait()
    loss = json.loads(result.stdout)["end"]["sum"]["lost_percent"]
    stats = json.loads((log / "delay-load1.json").read_text())
    forwarded = stats["ab"]["packets"] + stats["ba"]["packets"]
    return (stats["ab"]["packets"] / 2.0, loss, stats["ab"]["lateness_us"]["p99"],
            1e6 * stats["cpu_s"] / max(forwarded, 1))


def main() -> int:
    if os.geteuid() != 0:
        print("delay_bench: needs root (network namespaces)")
        return 1
    with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
        base_rtts = rtts(0, Path(tmp))
        base = linkprobe.percentile(base_rtts, 0.5)
        delayed = rtts(DELAY_MS, Path(tmp))
        configured = 2 * (DELAY_MS + DELAY_MS) * 1000
        added = [x - base - configured for x in delayed]
        rate, cpu_per_packet, mbit = bulk(Path(tmp))
        small = small_packets(Path(tmp))
    print(f"delay line: configured {configured:.0f} us per round trip, base {base:.0f} us "
          f"(p99 {linkprobe.percentile(base_rtts, 0.99):.0f} us without the delay lines)")
    print(f"  added beyond configured: p50 {linkprobe.percentile(added, 0.5):+.1f} us, "
          f"p99 {linkprobe.percentile(added, 0.99):+.1f} us (target within 5% + 20 us = "
          f"{0.05 * configured + 20:.0f} us at p50)")
    print(f"  bulk TCP through two delay lines: {mbit:,.0f} Mbit/s, {rate:,.0f} packets/s, "
          f"{cpu_per_packet:.2f} us CPU per packet")
    print(f"  64-byte UDP at 100k packets/s offered: {small[0]:,.0f} packets/s through one "
          f"line, loss {small[1]:.2f}%, its send lateness p99 {small[2]:.0f} us, "
          f"{small[3]:.2f} us CPU per packet (target >= 50k packets/s per link)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
