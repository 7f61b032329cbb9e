"""The delay line of the emulated hosts (`cachelab-delay`): its CPU per packet and the
jitter it adds.

Two emulated hosts, each link with a 0.45 ms one-way delay (1.8 ms added per round trip),
unshaped. Measured:
- added round trip: p50 and p99 of (RTT with the delay - configured 1.8 ms), where the RTT
  of the same path without delay (the base) is measured first and subtracted at p50;
- CPU per packet: the delay line's CPU seconds (getrusage, from its statistics line: one
  process serves every link) over the frames it forwarded, for paced round trips (the
  request-response traffic of an experiment: one 64-byte echo every few hundred
  microseconds, where a busy-waiting line paid its spin on every frame), for a 3 s iperf3
  bulk transfer (GSO frames of up to 64 KiB), and for 64-byte UDP at 100k packets/s.
The figures are also written to bench/results/delay.json.
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


def line_stats(log: Path) -> dict:
    """The delay line's statistics line (every link's, and the process's CPU)."""
    return json.loads((log / "delay.json").read_text())


def rtts(delay_ms: float, log: Path) -> list[float]:
    with netns.DataCentre(layout(delay_ms), log_dir=log) as centre:
        return linkprobe.round_trips(centre.hosts["load1"], centre.hosts["server1"], SAMPLES)


def bulk(log: Path) -> tuple[float, float, float]:
    """(packets/s, CPU us per packet, Mbit/s) of the delay lines under an iperf3 transfer."""
    with netns.DataCentre(layout(DELAY_MS), log_dir=log) as centre:
        mbit = linkprobe.iperf(centre.hosts["load1"], centre.hosts["server1"], reverse=False,
                               seconds=3)
    stats = line_stats(log)
    return stats["packets"] / stats["elapsed_s"], stats["cpu_us_per_packet"], mbit


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
    stats = line_stats(log)
    load1 = next(x for x in stats["links"] if x["name"] == "load1")
    return (load1["ab"]["packets"] / 2.0, loss, load1["ab"]["lateness_us"]["p99"],
            stats["cpu_us_per_packet"])


def main() -> int:
    if os.geteuid() != 0:
        print("delay_bench: needs root (network namespaces)")
        return 1
    with tempfile.TemporaryDirectory(prefix="cachelab-bench-") as tmp:
        base_rtts = rtts(0, Path(tmp))
        base = linkprobe.percentile(base_rtts, 0.5)
        delayed = rtts(DELAY_MS, Path(tmp))
        paced = line_stats(Path(tmp))
        configured = 2 * (DELAY_MS + DELAY_MS) * 1000
        added = [x - base - configured for x in delayed]
        rate, cpu_per_packet, mbit = bulk(Path(tmp))
        small = small_packets(Path(tmp))
    print(f"delay line: configured {configured:.0f} us per round trip, base {base:.0f} us "
          f"(p99 {linkprobe.percentile(base_rtts, 0.99):.0f} us without the delay lines)")
    print(f"  added beyond configured: p50 {linkprobe.percentile(added, 0.5):+.1f} us, "
          f"p99 {linkprobe.percentile(added, 0.99):+.1f} us (target within 5% + 20 us = "
          f"{0.05 * configured + 20:.0f} us at p50)")
    print(f"  paced round trips: {paced['cpu_us_per_packet']:.2f} us CPU per frame "
          f"({paced['packets']:,} frames, {paced['cpu_s']:.3f} s CPU in "
          f"{paced['elapsed_s']:.1f} s)")
    print(f"  bulk TCP through two delay lines: {mbit:,.0f} Mbit/s, {rate:,.0f} packets/s, "
          f"{cpu_per_packet:.2f} us CPU per packet")
    print(f"  64-byte UDP at 100k packets/s offered: {small[0]:,.0f} packets/s through one "
          f"line, loss {small[1]:.2f}%, its send lateness p99 {small[2]:.0f} us, "
          f"{small[3]:.2f} us CPU per packet (target >= 50k packets/s per link)")
    results = Path(__file__).parent / "results"
    results.mkdir(exist_ok=True)
    (results / "delay.json").write_text(json.dumps({
        "added_rtt_us": {"p50": linkprobe.percentile(added, 0.5),
                         "p99": linkprobe.percentile(added, 0.99)},
        "cpu_us_per_packet": {"paced_round_trips": paced["cpu_us_per_packet"],
                              "bulk_tcp": cpu_per_packet, "udp_64b": small[3]},
        "bulk_tcp": {"mbit": mbit, "packets_per_s": rate},
        "udp_64b": {"packets_per_s": small[0], "loss_pct": small[1],
                    "lateness_p99_us": small[2]}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
