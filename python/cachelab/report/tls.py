"""What TLS costs: every measured point with an encrypted hop set beside the point of the
same configuration with none (its pair), and the differences: latency added at p50 and
p99 (the clients' percentiles on one clock for both, `latency_ms`), and CPU per request
added to the load generators, the middlewares and the servers.

CPU per request of a role is the CPU seconds its processes used while the load ran over
the requests every load generator completed (store.ProcessCpu), averaged over the
point's runs; a server's or middleware's CPU includes the connections' set-up and
handshakes (a few per run), a load generator's does not.
"""

from __future__ import annotations

import copy
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from cachelab.report.data import PointResult, ReportData, percentile_ms
from cachelab.spec import experiment as spec
from cachelab.store import HOPS, ProcessCpu, Store, TlsSession

#: Roles whose CPU per request is shown, in the table's order.
ROLES = ("load", "middleware", "server")


@dataclass(frozen=True)
class TlsCost:
    """A point with TLS on some hop beside its pair without."""

    point: PointResult
    baseline: PointResult
    #: The encrypted hops (HOPS' names), in HOPS' order.
    hops: tuple[str, ...]
    p50_ms: float
    p99_ms: float
    baseline_p50_ms: float
    baseline_p99_ms: float
    #: CPU µs per request by role, with and without TLS (None: not measured, or the
    #: role has no process in this configuration).
    cpu_us: dict[str, float | None]
    baseline_cpu_us: dict[str, float | None]
    #: What the encrypted hops negotiated.
    sessions: tuple[TlsSession, ...]

    @property
    def p50_added_ms(self) -> float:
        return self.p50_ms - self.baseline_p50_ms

    @property
    def p99_added_ms(self) -> float:
        return self.p99_ms - self.baseline_p99_ms

    def cpu_added_us(self, role: str) -> float | None:
        with_tls, without = self.cpu_us.get(role), self.baseline_cpu_us.get(role)
        return None if with_tls is None or without is None else with_tls - without


def encrypted_hops(config: dict) -> tuple[str, ...]:
    """The encrypted hops of a configuration (as stored, `spec.config_dict`)."""
    servers, middleware = config["servers"], config["middleware"]
    server_tls = bool(servers.get("tls"))
    if not middleware["count"]:
        return ("load->server",) if server_tls else ()
    hops = {"load->middleware": bool(middleware.get("tls")), "middleware->server": server_tls}
    return tuple(h for h in HOPS if hops.get(h))


def _without_tls(config: dict) -> dict:
    """The configuration with every hop plain: what a point's pair has."""
    plain = copy.deepcopy(config)
    plain["servers"]["tls"] = False
    plain["middleware"]["tls"] = False
    plain["load"]["tls"] = None
    return plain


def cpu_per_request(runs: Sequence[Sequence[ProcessCpu]]) -> dict[str, float | None]:
    """Per role, CPU µs per client request, the mean over the runs that measured it: in
    each run, the role's CPU seconds over the requests of every load generator."""
    per_role: dict[str, list[float]] = {r: [] for r in ROLES}
    for processes in runs:
        requests = sum(p.requests or 0 for p in processes if p.role == "load")
        if requests <= 0:
            continue
        for role in ROLES:
            mine = [p for p in processes if p.role == role]
            if mine:
                per_role[role].append(1e6 * sum(p.cpu_s for p in mine) / requests)
    return {r: statistics.fmean(v) if v else None for r, v in per_role.items()}


def latency_ms(p: PointResult, name: str) -> float:
    """A point's p50 or p99 as the load generators' program read it (`user_latency`:
    intended send to the read of the reply), the mean over its runs' instances. TLS runs
    have no kernel stamps, so their latencies end at the read; a plain run's summary ends
    at the kernel's receipt, earlier by the read delay. Both sides of a pair are taken on
    the read's clock so that the difference is TLS's. Without the figure (a report from
    before it), the summary's percentile."""
    for t in p.timings:
        if t.role == "load" and t.figure == "user_latency":
            return t.p50_ms if name == "p50" else t.p99_ms
    return percentile_ms(p, name)


def costs(s: Store, data: ReportData) -> list[TlsCost]:
    """Every measured point with TLS whose pair without TLS was measured too."""
    measured = [p for p in data.points if p.measured]
    plain = {_key(p.config): p for p in measured if not encrypted_hops(p.config)}
    out = []
    for p in measured:
        hops = encrypted_hops(p.config)
        baseline = plain.get(_key(_without_tls(p.config))) if hops else None
        if baseline is None:
            continue
        cpu = s.process_cpu(list(p.run_ids))
        base_cpu = s.process_cpu(list(baseline.run_ids))
        out.append(TlsCost(
            p, baseline, hops, latency_ms(p, "p50"), latency_ms(p, "p99"),
            latency_ms(baseline, "p50"), latency_ms(baseline, "p99"),
            cpu_per_request(list(cpu.values())), cpu_per_request(list(base_cpu.values())),
            tuple(s.tls_sessions(list(p.run_ids)))))
    return out


def _key(config: dict) -> str:
    """A configuration's identity for pairing: read back through the spec (so a database
    from before a field existed has its default), TLS settings as their effect (a
    middleware's is no part of a configuration without one; `load.tls` follows the
    target)."""
    c = spec.config_dict(spec.config_from_dict(config))
    c["middleware"]["tls"] = bool(c["middleware"]["count"] and c["middleware"]["tls"])
    c["load"]["tls"] = None
    return json.dumps(c, sort_keys=True)
