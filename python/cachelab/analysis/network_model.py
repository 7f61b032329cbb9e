"""A closed network of queues for clients, middleware and servers, built from measured
service demands and solved by exact MVA (`mva`). No I/O.

The stations, with visits V, service time S and demand D = V S per request (seconds):

    network      delay   D = client response time - middleware response time
                         (the load generator, the kernel and the wire, both ways)
    net layer i  queue   V = 1/M, S = mean decode time (arrival to enqueued), one per
                         middleware, whose single net layer reads and decodes every request
    workers i    multi   m = W, V = 1/M, S = mean worker processing time (worker service
                         minus server service), one per middleware
    server j     queue   V = n_j / n (server j's answers per middleware request: 1/S for
                         round-robin GETs, 1 for replicated sets), S = server j's mean
                         service time as the middleware measured it; a multi station with
                         m = threads when the servers run several threads

with no think time (Z = 0): each client sends its next request when the reply arrives.
A population N counts requests outstanding: clients x the load generator's pipeline.

With `Links` (the network the run crossed: emulated or real links, or loopback), the
times the middleware measured are split into what the network took and what the servers
took, as the original study's network of queues had the network as delay centres (ASL
report, study/001, section 7.3, Figure 29). A server's measured time runs from the first
byte sent to the last byte of its answer, so it holds the round trip to that server and
the transfer of the request and the reply over the shaped links on the way:

    link server j   delay   V = V_j, S = rtt_j (the round trip middleware <-> server j:
                            the configured delays plus the measured base round trip; at
                            most S_j measured)
    server j        queue   S = S_j measured - rtt_j - transfer_j (bytes / link rate of
                            one request and its reply, per visit)
    link H dir      queue   V = 1, S = B(H, dir) / rate(H, dir): every shaped direction of
                            every host (analysis/linkbound.py's bytes per request), a
                            server that sends one frame at a time
    network         delay   the clients' round trip less the transfer times on the
                            client-side links (those are now their own stations)

So a 2.5 ms round trip to a server is 2.5 ms of delay, not 2.5 ms of service at a queue
that allows at most 400 requests per second, and a shaped link bounds the throughput as
analysis/linkbound.py does. A station whose time comes out not positive is left out.

Asymptotic bounds (Jain, section 33.2): X(N) <= min_k m_k / D_k, the bottleneck being the
station that attains it; the knee N* = (sum_k D_k + Z) X_max is where the two asymptotes,
N / (D + Z) and X_max, cross.
"""

from __future__ import annotations

from dataclasses import dataclass

from cachelab.analysis import mva
from cachelab.analysis.errors import AnalysisError

#: Server demands that add up to more than this factor of the measured server time per
#: request mean that the requests visit the servers in parallel.
PARALLEL_TOLERANCE = 1.1


@dataclass(frozen=True)
class Links:
    """The network the requests crossed, in seconds per visit or per request."""

    #: Per server (the middleware's -m order): the round trip middleware <-> server.
    server_rtt: tuple[float, ...]
    #: Per server: transfer time of one request and its reply on the shaped links between
    #: the middleware and that server, per visit.
    server_transfer: tuple[float, ...]
    #: Transfer time of one request and its reply on the shaped client-side links.
    client_transfer: float = 0.0
    #: Every shaped link direction: (name, seconds of that link per request).
    transfers: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Demands:
    """Mean times per request measured at one point (seconds) and the structure."""

    network: float
    decode: float
    worker_processing: float
    server_service: tuple[float, ...]
    server_visits: tuple[float, ...]
    workers: int
    middlewares: int = 1
    server_threads: int = 1
    #: Measured server time per request, first message sent to last answer.
    server_time: float | None = None
    #: The network in the measured times (None: all of it counted where it was measured).
    links: Links | None = None


@dataclass(frozen=True)
class Bounds:
    bottleneck: str
    max_throughput: float
    knee: float


def network(d: Demands) -> mva.Network:
    """The network of the module doc; stations whose measured time is not positive (a
    network time lost in the noise, say) are left out."""
    if d.workers < 1 or d.middlewares < 1:
        raise AnalysisError("a middleware network needs at least one worker")
    if len(d.server_service) != len(d.server_visits):
        raise AnalysisError("one visit ratio per server is needed")
    links = d.links
    if links is not None and (len(links.server_rtt) != len(d.server_service)
                              or len(links.server_transfer) != len(d.server_service)):
        raise AnalysisError("one link round trip and transfer time per server is needed")
    stations = []
    client_net = d.network - (links.client_transfer if links else 0.0)
    if client_net > 0:
        stations.append(mva.Station("network", "delay", 1.0, client_net))
    for i in range(d.middlewares):
        suffix = f" {i + 1}" if d.middlewares > 1 else ""
        if d.decode > 0:
            stations.append(mva.Station(f"net layer{suffix}", "queue", 1 / d.middlewares,
                                        d.decode))
        if d.worker_processing > 0:
            stations.append(mva.Station(f"workers{suffix}", "multi", 1 / d.middlewares,
                                        d.worker_processing, d.workers))
    for j, (service, visits) in enumerate(zip(d.server_service, d.server_visits,
                                              strict=True)):
        if visits <= 0:
            continue
        if links is not None:
            # Never more than the server's measured time: a round trip probed at another
            # moment (an idle loopback, say) may be longer than the one the run had.
            rtt = min(links.server_rtt[j], max(service, 0.0))
            if rtt > 0:
                stations.append(mva.Station(f"link server {j + 1}", "delay", visits, rtt))
            service -= rtt + links.server_transfer[j]
        if service > 0:
            kind = "multi" if d.server_threads > 1 else "queue"
            stations.append(mva.Station(f"server {j + 1}", kind, visits, service,
                                        d.server_threads if kind == "multi" else 1))
    for name, seconds in links.transfers if links else ():
        if seconds > 0:
            stations.append(mva.Station(f"link {name}", "queue", 1.0, seconds))
    if not any(s.kind != "delay" for s in stations):
        raise AnalysisError("no station with a positive measured service time")
    return mva.Network(tuple(stations))


def bounds(net: mva.Network) -> Bounds:
    """The bottleneck (largest D / m), the throughput it allows and the knee N*."""
    queues = [s for s in net.stations if s.kind != "delay"]
    worst = max(queues, key=lambda s: s.demand / s.servers)
    x_max = worst.servers / worst.demand
    total = sum(s.demand for s in net.stations) + net.think_time
    return Bounds(worst.name, x_max, total * x_max)


def predict(net: mva.Network, populations: list[int]) -> list[mva.MvaPoint]:
    """The MVA solution at each population (sorted, each >= 1)."""
    if not populations:
        return []
    solved = mva.solve(net, max(populations))
    return [solved[n - 1] for n in populations]


def assumptions(d: Demands, *, pipeline: int = 1, shares_cpus: bool = False) -> tuple[str, ...]:
    """The model's assumptions that this middleware's structure or measurements break."""
    notes = ["a worker stays busy while its request is at the servers; the network frees "
             "it, so the W limit on requests at the servers is not modelled"]
    summed = sum(s * v for s, v in zip(d.server_service, d.server_visits, strict=True))
    if (d.server_time is not None and d.server_time > 0
            and summed > PARALLEL_TOLERANCE * d.server_time):
        notes.append(f"requests visit several servers at once (replicated writes, sharded "
                     f"multi-GETs): the model adds their times, {summed * 1e6:.0f} µs per "
                     f"request against {d.server_time * 1e6:.0f} µs measured")
    if pipeline > 1:
        notes.append(f"--pipeline {pipeline}: a worker serves batches, so m is not W")
    if shares_cpus:
        notes.append("all stations share the host's CPUs; in the model each has its own")
    if d.network <= 0:
        notes.append("the measured network time is not positive; that station is left out")
    if d.links is None:
        notes.append("the links were not measured: each server's time includes its round "
                     "trip, counted as service at that server")
    else:
        left = [j + 1 for j, (s, v) in enumerate(zip(d.server_service, d.server_visits,
                                                     strict=True))
                if v > 0 and s - d.links.server_rtt[j] - d.links.server_transfer[j] <= 0]
        if left:
            notes.append("server(s) " + ", ".join(map(str, left)) + ": the measured time "
                         "is no longer than the link's round trip and transfer; the "
                         "server's own time is too small to model and is left out")
        if d.links.transfers:
            notes.append("a shaped link is a queue with one server; its token bucket lets "
                         "bursts through faster, and a worker stays held while its "
                         "request waits there")
    return tuple(notes)

