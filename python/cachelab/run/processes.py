"""What one run starts and gathers around its measurement: the hosts it runs on, the
servers (started fresh and populated), the proxy's settings, the links measured, where the
clients sit, and the CPU its processes used; `runner.execute_run` puts them in order."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from cachelab.analysis import trust
from cachelab.analysis.capacity import Verdict
from cachelab.errors import UserError
from cachelab.hosts import linkprobe, local, netns
from cachelab.hosts.host import LOOPBACK, Host
from cachelab.hosts.procs import Managed
from cachelab.readers import loadgen
from cachelab.readers.cpu import GroupSampler, Sampler, process_seconds
from cachelab.run import capacity, machine, transport, validate
from cachelab.spec import cores, rules, topology
from cachelab.spec.experiment import (
    Experiment,
    Pinning,
    RunConfig,
    TopologyKind,
)
from cachelab.store import (
    CapacityRecord,
    CapacityTrial,
    ClientPlacement,
    LinkRecord,
    ProcessCpu,
    RunSummary,
)

#: Seconds allowed for the populate step.
POPULATE_TIMEOUT_S = 300.0

def proxy_settings(c: RunConfig, window_s: float) -> local.ProxySettings:
    """How the run's middlewares serve: the middleware section's settings, and the
    servers' protocol (a Redis pool speaks RESP to its clients and its servers)."""
    m = c.middleware
    return local.ProxySettings(m.workers, m.sharded, m.loops, m.pipeline, m.busy_poll_us,
                               c.servers.kind.value, window_s,
                               share_connections=m.share_connections,
                               merge_gets=m.merge_gets)


Measured = list[tuple[str, int, Managed]]


def cpu_seconds(measured: Measured) -> dict[tuple[str, int], tuple[float, float]]:
    """(user, system) CPU seconds so far of each server and middleware process that runs
    on this machine (its own or an emulated host; a remote host's are not read)."""
    out = {}
    for role, i, m in measured:
        pid = getattr(m.process, "pid", None)
        found = process_seconds(pid) if isinstance(pid, int) else None
        if found is not None:
            out[(role, i)] = found
    return out


def cpu_per_process(before: dict[tuple[str, int], tuple[float, float]],
                 after: dict[tuple[str, int], tuple[float, float]],
                 reports: tuple[loadgen.Report, ...]) -> tuple[ProcessCpu, ...]:
    """The CPU each process used while the load ran: servers and middlewares by the
    kernel's counters, load generators by their own report."""
    out = [ProcessCpu(role, i, after[(role, i)][0] - user, after[(role, i)][1] - system, None)
           for (role, i), (user, system) in before.items() if (role, i) in after]
    out += [ProcessCpu("load", i, r.client_cpu.user_s, r.client_cpu.system_s,
                       r.totals["completed"])
            for i, r in enumerate(reports) if r.client_cpu is not None]
    return tuple(out)


def machine_check(exp: Experiment, layout: topology.Layout, sampler: Sampler,
                   host_sampler: GroupSampler, emulator_sampler: GroupSampler,
                   lead: float, serving: int = 1) -> trust.Check:
    """Whether this machine, rather than the emulated hosts, was the limit (machine.py),
    over the steady part of the run (`lead`: seconds from the samplers' start to the
    load generators'); a server host's limit counts its `serving` threads per process
    at their thread_quota (cores.host_limits)."""
    low, high = lead + exp.warmup_s, lead + exp.run_time_s - exp.cooldown_s
    busy = machine.steady_mean([(x.t, 100.0 - x.idle) for x in sampler.samples
                                if x.cpu == "all"], low, high)
    emulator: dict[float, float] = {}
    for t, _, usr, sys_ in emulator_sampler.samples:
        emulator[t] = emulator.get(t, 0.0) + usr + sys_
    hosts = {h.name: machine.steady_mean([(t, usr + sys_) for t, name, usr, sys_
                                          in host_sampler.samples if name == h.name],
                                         low, high) for h in layout.hosts}
    return machine.check(machine.MachineUse(
        os.cpu_count() or 1, busy or 0.0,
        machine.steady_mean(sorted(emulator.items()), low, high) or 0.0,
        {name: pct for name, pct in hosts.items() if pct is not None},
        cores.host_limits(layout, serving)))


def client_placements(c: RunConfig, layout: topology.Layout | None,
                       place: Placer) -> tuple[ClientPlacement, ...]:
    """Where each client instance runs and, on hosts of their own, the offset of each
    such host's clock (measured once per host, before the run)."""
    roles = [("load", i) for i in range(c.instances)]
    roles += [("measure", i) for i in range(c.measures)]
    if layout is None:
        return tuple(ClientPlacement(role, i, None, None) for role, i in roles)
    offsets: dict[str, float] = {}
    out = []
    for role, i in roles:
        host = place(role, i)
        if host.name not in offsets:
            offsets[host.name] = linkprobe.clock_offset(host)
        out.append(ClientPlacement(role, i, host.name, offsets[host.name]))
    return tuple(out)


def capacity_result(exp: Experiment, searched: capacity.Outcome
                     ) -> tuple[tuple[loadgen.Report, ...], RunSummary, CapacityRecord]:
    """A capacity run's record: its throughput is the capacity found, its latencies and
    client tables those of the trials at that rate (none if no rate passed)."""
    answer = searched.answer
    verdicts = {j.rate: j.verdict for j in searched.judgements}
    record = CapacityRecord(
        tuple(CapacityTrial(t.rate, t.repetition, t.latency_ms, t.completed_rate,
                            t.send_lag_p99_ms, t.fell_behind,
                            verdicts.get(t.rate, Verdict.UNJUDGED), searched.trial_s[t.rate])
              for t in searched.trials),
        answer.capacity, answer.uncertainty, answer.latency_ms, exp.capacity.percentile,
        exp.capacity.target_ms or exp.qos_target_ms, answer.reason,
        answer.limited_by_generator)
    reports = searched.reports
    if reports:
        length = max(r.duration_s for r in reports)
        summary = validate.summarise(reports, run_time=length,
                                     warmup=exp.capacity.trial_warmup_s, cooldown=0)
        # Trials of one rate overlap second by second, so a CV within them means nothing;
        # the capacity's spread over repetitions is what validation checks.
        summary = dataclasses.replace(summary, throughput=answer.capacity or 0.0,
                                      cv_within=None)
    else:
        summary = RunSummary(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, None, None)
    return reports, summary, record


def start_servers(c: RunConfig, directory: Path, place: Placer,
                   stack: ExitStack, wiring: transport.Wiring) -> list[Managed]:
    """Every server process (count x instances), pinned as `servers.pinning` says: by
    process to `servers.cpus`, or each serving thread to its own CPU (the placement is
    written to server-i.pinning)."""
    s = c.servers
    cpus = {"process": s.cpus, "thread": (), "none": ()}[s.pinning]
    shares = thread_shares(c, place.layout)
    servers = []
    for i in range(s.processes):
        host = place("server", i)
        options = local.ServerOptions(s.kind, s.threads, s.memory_mb, s.group_size,
                                      s.extra_args, s.redis_persistence, wiring.server_tls(),
                                      wiring.server_socket(i))
        server = stack.enter_context(local.start_server(
            s.kind, threads=s.threads, memory_mb=s.memory_mb, cpus=local.pinned(cpus, i),
            log=directory / f"server-{i}.log", host=host, options=options))
        if not host.remote and host.thread_quota:  # an emulated core per serving thread
            local.cap_threads(server.process.pid, s.kind, host, directory / f"server-{i}.cores",
                              expected=rules.serving_threads(c), share=shares.get(host.name))
        if s.pinning == Pinning.THREAD:
            if host.remote:
                raise UserError('servers.pinning = "thread" is not supported on ssh hosts')
            pool = list(s.cpus) or sorted(os.sched_getaffinity(0))
            expected = rules.serving_threads(c)
            placed = local.pin_threads(server.process.pid, s.kind, pool,
                                       first=i * expected, expected=expected)
            (directory / f"server-{i}.pinning").write_text(
                "".join(f"thread {tid} -> cpu {cpu}\n" for tid, cpu in placed.items()))
        servers.append(server)
    return servers


def thread_shares(c: RunConfig, layout: topology.Layout | None
                  ) -> dict[str, cores.ThreadShare]:
    """Each server host's share per serving thread: an emulated core each, or, with more
    threads than emulated cores, the time-shared slice of one (cores.thread_share)."""
    if layout is None:
        return {}
    return {layout.hosts[i].name: cores.thread_share(
        layout.hosts[i].cpu_quota, layout.hosts[i].thread_quota, n, layout.scale)
        for i, n in cores.serving_threads(layout, rules.serving_threads(c)).items() if n}


class Placer:
    """Where instance i of a role runs: the emulated host the layout gives it, or this
    host on loopback. `hosts` holds `Host`s, or `ssh.SshHost`s, which have the same
    methods (duck-typed: their processes are paramiko channels, not Popen objects)."""

    def __init__(self, hosts: Mapping[str, Any], layout: topology.Layout | None,
                 collect: Callable[[], None] = lambda: None,
                 versions: dict[str, dict[str, str]] | None = None,
                 emulator_pids: tuple[int, ...] = ()) -> None:
        self.hosts = hosts
        #: The delay line's process(es), whose CPU is sampled beside the hosts'.
        self.emulator_pids = emulator_pids
        self.layout = layout
        #: Brings the files remote processes wrote into the run directory.
        self.collect = collect
        #: Per remote host, the versions of what runs there.
        self.versions = versions or {}

    def __call__(self, role: str, i: int) -> Host:
        if self.layout is None:
            return LOOPBACK
        return self.hosts[self.layout.host(role, i).name]


def hosts(c: RunConfig, layout: topology.Layout | None, directory: Path,
           stack: ExitStack) -> Placer:
    if layout is None:
        return Placer({}, None)
    if c.topology.kind == TopologyKind.SSH:
        from cachelab.hosts import ssh  # paramiko loads slowly; only SSH experiments need it

        cluster = stack.enter_context(ssh.Cluster(c.topology, layout, directory))
        return Placer(cluster.hosts, layout, cluster.collect, cluster.versions())
    centre = stack.enter_context(netns.DataCentre(layout, log_dir=directory))
    return Placer(centre.hosts, layout, emulator_pids=centre.emulator_pids)


def measure_links(c: RunConfig, layout: topology.Layout,
                   place: Placer) -> tuple[LinkRecord, ...]:
    """Round trip (and bandwidth where a link is shaped) of every pair of hosts that will
    carry traffic; emulated pairs whose links are configured alike are measured once (real
    hosts are each measured)."""
    measured: dict[tuple, LinkRecord] = {}
    records = []
    by_name = {h.name: h for h in layout.hosts}
    for src, dst in layout.pairs():
        a, b = by_name[src], by_name[dst]
        key: tuple[object, ...] = (a.link_key(), b.link_key())
        if c.topology.kind == TopologyKind.SSH:
            key = (src, dst)
        if key not in measured:
            m = linkprobe.measure(place.hosts[src], place.hosts[dst],
                                  bandwidth=a.shaped or b.shaped)
            measured[key] = LinkRecord(src, dst, m.rtt_p50_us, m.rtt_p99_us, m.rtt_min_us,
                                       1000 * topology.round_trip_ms(a, b), m.mbit_forward,
                                       m.mbit_reverse)
            records.append(measured[key])
    return tuple(records)


def loopback(c: RunConfig) -> tuple[LinkRecord, ...]:
    """A `local` run's round trip (loopback), which every hop of it takes and the network
    of queues takes out of the servers' measured times; only with a middleware that
    reaches its servers over TCP (a Unix socket has no loopback round trip)."""
    if not c.middleware.count or c.servers.unix_socket:
        return ()
    m = linkprobe.loopback()
    return (LinkRecord(m.src, m.dst, m.rtt_p50_us, m.rtt_p99_us, m.rtt_min_us, 0.0, None,
                       None),)


def populate(c: RunConfig, servers: list[Managed], directory: Path,
              stack: ExitStack, wiring: transport.Wiring, seed: int) -> None:
    """Writes every key into every server directly (the middleware would replicate them
    to all servers anyway), in parallel; a populate error stops the experiment. With
    workload.populate = false the servers start empty (a cold cache). With the seed of the
    run's first instance: a key-size distribution draws each key's size from the seed,
    so other seeds would write keys the run never asks for."""
    if not c.workload.populate:
        return
    jobs = [stack.enter_context(local.start_load(
        loadgen.populate_argv(c, s.host, s.port, directory / f"populate-{i}.json",
                              wiring.to_servers(s), seed=seed),
        cpus=(), out=directory / f"populate-{i}.out")) for i, s in enumerate(servers)]
    local.wait_all(jobs, POPULATE_TIMEOUT_S)
    for i in range(len(servers)):
        report = loadgen.load(directory / f"populate-{i}.json")
        if report.totals["errors"]:
            raise UserError(f"populating server {i} failed: {report.totals['errors']} errors "
                            f"(see {directory / f'populate-{i}.out'})")
