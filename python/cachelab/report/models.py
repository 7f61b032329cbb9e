"""The report's queueing models, from the stored measurements only: M/M/1 and M/M/m beside
every middleware point (`analysis.middleware_model`), and for each closed-loop sweep over
clients the network of queues built from measured demands (`analysis.network_model`).

The network is built from the demands measured at each configuration's lowest load, where
nothing queues, so the measured times are service demands proper. At higher loads the
times the middleware measures include waiting it cannot see (in the servers, in the kernel,
for a CPU), which the model would then count a second time in its own queues.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from cachelab.analysis import middleware_model, mva, network_model
from cachelab.analysis.errors import AnalysisError
from cachelab.report.data import LOAD_AXES, Curve, PointResult, known
from cachelab.report.links import links_of
from cachelab.spec import naming

US = 1e-6




@dataclass(frozen=True)
class QueueingPoint:
    curve: str
    x: float
    point: PointResult
    measured: middleware_model.Measured
    #: None when no service rate is measured apart from the point (`mm1_reason` says why).
    mm1: middleware_model.ModelRow | None
    mmm: middleware_model.ModelRow
    mm1_reason: str | None = None
    #: The configuration as a reader says it (`curve` keeps the raw factor paths).
    curve_name: str = ""

    @property
    def rows(self) -> tuple[middleware_model.ModelRow, ...]:
        return (self.mm1, self.mmm) if self.mm1 is not None else (self.mmm,)


@dataclass(frozen=True)
class MvaBasis:
    """The network built from one point's measured demands (its `name` says which),
    solved at the sweep's populations (`predicted`) and at every population up to the
    largest (`dense`)."""

    name: str
    point: PointResult
    demands: network_model.Demands
    network: mva.Network
    bounds: network_model.Bounds
    predicted: tuple[mva.MvaPoint, ...]
    dense: tuple[mva.MvaPoint, ...]


@dataclass(frozen=True)
class MvaSection:
    curve: str
    populations: tuple[int, ...]
    points: tuple[PointResult, ...]
    basis: MvaBasis
    assumptions: tuple[str, ...]
    #: At the largest population, with that point's own demands: the busiest station and
    #: its utilisation X D / m, and the host's CPU busy share (percent) if sampled.
    busiest: tuple[str, float] | None
    cpu_busy: float | None
    #: The configuration as a reader says it (`curve` keeps the raw factor paths).
    name: str = ""


def measured(p: PointResult) -> middleware_model.Measured | None:
    """The point's middleware measurements in seconds; None without a middleware."""
    mw = p.middleware
    if mw is None or mw.throughput <= 0 or mw.arrival_rate <= 0:
        return None
    service = mw.stages["worker_service"]
    if service.mean <= 0:
        return None
    load = p.config["load"]
    return middleware_model.Measured(
        arrival_rate=mw.arrival_rate, throughput=mw.throughput,
        service_time=service.mean * US, queue_wait=mw.mean_us("queue_wait") * US,
        queue_length=mw.queue_len_total or 0.0,
        workers=p.config["middleware"]["workers"], middlewares=stations(p.config, mw.middlewares),
        service_cv=service.std / service.mean if service.count > 1 else None,
        pipeline=p.config["middleware"]["pipeline"],
        closed_population=(p.clients * load["pipeline"] if load["mode"] == "closed"
                           else None),
        shares_cpus=shares_cpus(p.config),
    )


def mm1_capacity(x_path: str, throughputs: list[float]) -> tuple[float | None, str | None]:
    """M/M/1's service rate for a configuration: the highest throughput its middlewares
    measured over a sweep of the load (as the original study did, ASL report, study/001,
    section 7.1), or None with the reason. Without such a sweep the only throughput is
    the point's own, and mu = X makes rho = lambda / X = 1: no prediction at all."""
    if x_path not in LOAD_AXES:
        return None, (f"no sweep over the load in this configuration (its x axis, "
                      f"{naming.factor_name(x_path)}, is not a load): mu would be the "
                      "point's own throughput (rho = 1)")
    if len(throughputs) < 2:
        return None, ("one load level in this configuration: mu would be the point's own "
                      "throughput (rho = 1)")
    return max(throughputs), None


def queueing_points(curves: list[Curve], x_path: str = "clients") -> list[QueueingPoint]:
    """M/M/1 and M/M/m for every middleware point; M/M/1's mu is the highest throughput
    the middlewares measured on the point's curve (its configuration) when the curve
    sweeps the load (`mm1_capacity`), else M/M/1 is left out with the reason."""
    out = []
    for c in curves:
        found = [(x, p, m) for x, p in zip(c.x, c.points, strict=True)
                 if (m := measured(p)) is not None]
        if not found:
            continue
        capacity, reason = mm1_capacity(x_path, [m.throughput for _, _, m in found])
        out += [QueueingPoint(c.label, x, p, m,
                              None if capacity is None else
                              middleware_model.mm1_row(m, capacity),
                              middleware_model.mmm_row(m), reason, c.name)
                for x, p, m in found]
    return out


def population(p: PointResult) -> int:
    """Requests outstanding in a closed loop: clients x the load generator's pipeline."""
    return p.clients * p.config["load"]["pipeline"]


def demands(p: PointResult) -> network_model.Demands:
    mw = p.middleware
    assert mw is not None
    return network_model.Demands(
        network=known(p.response_ms) * 1e-3 - mw.mean_us("response") * US,
        decode=mw.mean_us("decode") * US,
        worker_processing=mw.mean_us("worker_processing") * US,
        server_service=tuple(s.service.mean * US for s in mw.servers),
        server_visits=tuple(mw.visits(j) for j in range(len(mw.servers))),
        workers=p.config["middleware"]["workers"], middlewares=stations(p.config, mw.middlewares),
        server_threads=server_threads(p.config),
        server_time=mw.mean_us("server_service") * US,
        links=links_of(p),
    )


def server_threads(config: dict) -> int:
    """The requests one server serves at once, as the network of queues counts its
    servers (a multi station of that many, or a queue): memcached's worker threads (`-t`),
    and 1 for Redis, which runs every command on its main thread; its `--io-threads` (the
    same `servers.threads`) only read and write the sockets."""
    servers = config["servers"]
    return 1 if servers.get("kind") == "redis" else servers["threads"]


def server_notes(config: dict) -> tuple[str, ...]:
    """What the network of queues assumes about the servers that the run's settings
    could make a reader expect otherwise."""
    servers = config["servers"]
    if servers.get("kind") == "redis" and servers["threads"] > 1:
        return (f"Redis runs commands on one thread: its {servers['threads']} I/O threads "
                "read and write sockets in parallel, so each server is one queue",)
    return ()


def mva_sections(curves: list[Curve], x_path: str) -> tuple[list[MvaSection], str | None]:
    """One section per closed-loop curve over clients with middleware measurements, and
    a note naming the curves left out and why (None when none was)."""
    if x_path != "clients":
        return [], (f"the network of queues needs a closed-loop sweep over clients; this "
                    f"report's x axis, {naming.factor_name(x_path)}, is not clients")
    out, reasons = [], []
    for c in curves:
        if all(p.config["middleware"]["count"] == 0 for p in c.points):
            reasons.append(f"{c.name}: no middleware, whose per-stage times the network "
                           "needs")
            continue
        points = [p for p in c.points if p.config["load"]["mode"] == "closed"
                  and p.middleware is not None and p.throughput]
        if len(points) < 2:
            reasons.append(f"{c.name}: fewer than two closed-loop points with middleware "
                           "statistics")
            continue
        try:
            out.append(dataclasses.replace(_section(c.label, points), name=c.name))
        except AnalysisError as exc:
            reasons.append(f"{c.name}: {exc}")
    return out, "; ".join(reasons) or None


def _section(label: str, points: list[PointResult]) -> MvaSection:
    points = sorted(points, key=population)
    populations = tuple(population(p) for p in points)
    d = demands(points[0])
    net = network_model.network(d)
    solved = mva.solve(net, populations[-1])
    basis = MvaBasis(f"lowest load (N = {populations[0]})", points[0], d, net,
                     network_model.bounds(net), tuple(solved[n - 1] for n in populations),
                     tuple(solved))
    last = points[-1]
    notes = network_model.assumptions(demands(last), pipeline=last.config["middleware"][
        "pipeline"], shares_cpus=shares_cpus(last.config)) + server_notes(last.config)
    own = network_model.network(demands(last))
    busy = [(s.name, known(last.middleware).throughput * s.demand / s.servers)
            for s in own.stations if s.kind != "delay"]
    return MvaSection(label, populations, tuple(points), basis, notes,
                      max(busy, key=lambda b: b[1]) if busy else None,
                      100.0 - last.cpu["idle"] if last.cpu else None)


def shares_cpus(config: dict) -> bool:
    """Whether the middleware's workers may run on CPUs the servers or load generators
    use: on `local`, unless the roles are pinned to disjoint CPUs; with hosts, unless
    every middleware host has a cpuset disjoint from the other hosts' (`ssh` hosts are
    separate machines, so only a host that also runs another role shares)."""
    topology = config.get("topology", {"kind": "local", "host": []})
    if topology["kind"] == "local":
        return middleware_model.shares_cpus(
            tuple(config["middleware"]["cpus"]),
            (tuple(config["servers"]["cpus"]), tuple(config["load"]["cpus"])))
    hosts = topology.get("host") or []
    mine = [h for h in hosts if "middleware" in h["roles"]]
    if not mine:
        return topology["kind"] != "ssh"
    if any(len(h["roles"]) > 1 for h in mine):
        return True
    if topology["kind"] == "ssh":
        return False
    others = tuple(_cpuset(h.get("cpus")) for h in hosts if "middleware" not in h["roles"])
    return any(middleware_model.shares_cpus(_cpuset(h.get("cpus")), others) for h in mine)


def _cpuset(text: str | None) -> tuple[int, ...]:
    """"0-1,3" -> (0, 1, 3); None or "" -> () (every CPU)."""
    out: list[int] = []
    for part in (text or "").split(","):
        if part:
            low, _, high = part.partition("-")
            out += range(int(low), int(high or low) + 1)
    return tuple(out)


def utilisation(p: PointResult) -> dict[str, float]:
    """Utilisation at a point, by the utilisation law U = X D / m over the middlewares'
    throughput X: the workers (D = S, the worker service time; m = M W) and each server
    (D = V_j S_j; as S_j is the time the middleware waited for server j, this is the
    number of requests in service or waiting there, which is the utilisation only when
    nothing queues); and the host's CPUs, busy share of all cores (100 - idle)."""
    out = {}
    mw = p.middleware
    if mw is not None and mw.throughput > 0:
        m = p.config["middleware"]["workers"] * mw.middlewares
        out["workers"] = mw.throughput * mw.mean_us("worker_service") * US / m
        for j, server in enumerate(mw.servers):
            out[f"server {j + 1}"] = mw.throughput * mw.visits(j) * server.service.mean * US
    if p.cpu:
        out["host CPU"] = (100.0 - p.cpu["idle"]) / 100.0
    return out


def stations(config: dict, middlewares: int) -> int:
    """The M/M/m stations in parallel: each middleware's event loops (`middleware.loops`,
    each with its own queue and `workers` workers; 1 in results from before it existed)."""
    return middlewares * int(config["middleware"].get("loops", 1))
