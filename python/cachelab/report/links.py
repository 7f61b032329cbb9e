"""The network a point's requests crossed, for the network of queues (network_model.Links):
from the configured links and the round trips measured before the point. No SQL, no plots.

Round trip middleware <-> server j, seconds:

    emulated or remote hosts:  2 x (delay_mw + delay_server)  (configured, full speed)
                               + base, the median over the measured pairs of
                               (measured RTT p50 - what the delays add): the unshaped path
    local:                     the loopback round trip measured before the point

Transfer times are wire bytes (analysis/linkbound.py: the memcached text protocol or
RESP, as the servers speak, plus headers per segment) over the configured rate of each
shaped direction on the way; the middleware's side is the first middleware's host (the
others are configured alike in the ready experiments; their share of the clients is in
the per-link demands). A scale
model's links are taken at full speed, as its figures are rescaled (report/rescale).
"""

from __future__ import annotations

import dataclasses
import statistics

from cachelab.analysis import linkbound, network_model
from cachelab.readers import loadgen
from cachelab.report.data import PointResult
from cachelab.spec import experiment as spec
from cachelab.spec import topology

#: The name the runner gives the loopback round trip of a `local` run.
LOOPBACK = "loopback"


def links_of(p: PointResult) -> network_model.Links | None:
    """The point's links; None when nothing about them is known (a local run from before
    the loopback was measured, or no middleware)."""
    config = spec.config_from_dict(p.config)
    if not config.middleware.count:
        return None
    servers = config.servers.processes
    if config.topology.kind == spec.TopologyKind.LOCAL:
        loop = [link.rtt_p50_us for link in p.links if link.src == link.dst == LOOPBACK]
        if not loop:
            return None
        rtt = statistics.median(loop) * 1e-6 / p.scale
        return network_model.Links((rtt,) * servers, (0.0,) * servers)
    full = dataclasses.replace(config, topology=dataclasses.replace(config.topology,
                                                                    scale=1.0))
    layout = topology.plan(full)
    base = statistics.median([max(link.rtt_p50_us - link.expected_rtt_us, 0.0)
                              for link in p.links]) * 1e-6 / p.scale if p.links else 0.0
    rates = linkbound.configured_rates(layout)
    key_len = len(loadgen.KEY_PREFIX) + len(str(full.workload.key_maximum))
    gq, gr, sq, sr = (linkbound.wire(x) for x in linkbound.message_sizes(full, key_len))
    sets, gets = (int(x) for x in full.workload.ratio.split(":"))
    ws = sets / (sets + gets)
    mw = layout.hosts[layout.middlewares[0]]
    load = layout.hosts[layout.loads[0]]
    n = len(layout.servers)

    def seconds(host: topology.PlannedHost, up: float, down: float) -> float:
        """Time on `host`'s link to send `up` bytes and receive `down` bytes."""
        out = 0.0
        for direction, size in (("up", up), ("down", down)):
            rate = rates.get((host.name, direction), 0.0)
            out += size / rate if rate > 0 else 0.0
        return out

    # A visit to one server is a set (every set visits every server) or a get (one in n).
    set_share = ws / (ws + (1 - ws) / n) if ws + (1 - ws) / n > 0 else 0.0
    q = set_share * sq + (1 - set_share) * gq
    r = set_share * sr + (1 - set_share) * gr
    rtts, transfers = [], []
    for j in range(servers):
        host = layout.hosts[layout.servers[j]]
        rtts.append(1e-3 * topology.round_trip_ms(mw, host) + base)
        transfers.append(seconds(mw, q, r) + seconds(host, r, q))
    cq, cr = ws * sq + (1 - ws) * gq, ws * sr + (1 - ws) * gr
    client = seconds(load, cq, cr) + seconds(mw, cr, cq)
    per_request = linkbound.bytes_per_request(full, layout, key_len)
    shaped = tuple((f"{host} {direction}", size / rates[(host, direction)])
                   for (host, direction), size in per_request.items()
                   if rates.get((host, direction), 0.0) > 0 and size > 0)
    return network_model.Links(tuple(rtts), tuple(transfers), client, shaped)
