"""Running an experiment: for every point and repetition, the original method (SPEC 3).

1. start the servers fresh; 2. populate every key; 3. start the middlewares; 4. start the
load generators for the run time, sampling the CPU every second; 5. stop everything and
collect; 6. store the run in one transaction. Then `validate.assess` decides whether the
point needs another repetition.

Processes are stopped in `finally` (an ExitStack), whatever happens: a failed start, a
load generator that crashed, Ctrl-C. Finished runs are already committed, so Ctrl-C or a
crash loses only the run in progress, and `resume=True` continues with it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from cachelab import paths
from cachelab.errors import UserError
from cachelab.hosts import hostinfo, local, netns, tls
from cachelab.readers import hdr, loadgen, proxy_stats, selfcheck
from cachelab.readers.cpu import GroupSampler, Sampler, process_usage
from cachelab.run import capacity, processes, transport, validate, warmup
from cachelab.run.progress import Progress, Status
from cachelab.spec import order, topology
from cachelab.spec.experiment import (
    Experiment,
    LoadMode,
    Point,
    RunConfig,
    ServerKind,
    TopologyKind,
)
from cachelab.spec.order import Order
from cachelab.store import (
    FILENAME,
    EmulatorCpuSample,
    HostCpuSample,
    ProcessCpu,
    RunHost,
    RunRecord,
    Store,
    StoredRun,
    TlsSession,
)

#: Seconds allowed, beyond the run time, for a run to end.
RUN_GRACE_S = 30.0
#: How far ahead the common --start-at instant is set, by topology: a fixed part and a part
#: per client instance, enough to start every instance and let it connect (a process here
#: or on an emulated host starts in milliseconds, tens on a busy machine; over SSH each
#: takes a channel and a few hundred), so all of them start their clocks on it together.
#: An instance that connects after the instant is refused by cachelab-load, never late.
START_LEAD_S = {"local": (0.5, 0.1), "netns": (0.5, 0.1), "ssh": (3.0, 0.5)}

Execute = Callable[[Experiment, Point, int, Path], RunRecord]


def start_lead_s(c: RunConfig, layout: topology.Layout | None) -> float:
    """How far ahead the common --start-at instant is set: START_LEAD_S's parts and, on
    delayed links, two round trips per connection of a load thread (a thread opens its
    connections one after another, each a TCP handshake over the link; with 70 of them
    over a 15 ms round trip that took longer than the fixed lead)."""
    fixed, each = START_LEAD_S[c.topology.kind]
    lead = fixed + each * (c.instances + c.measures)
    if layout is not None:
        by_name = {h.name: h for h in layout.hosts}
        rtt_ms = max((topology.round_trip_ms(by_name[a], by_name[b])
                      for a, b in layout.pairs()), default=0.0)
        lead += 2 * rtt_ms / 1000 * c.load.clients
    return lead


def run_dir(out: Path, point: int, repetition: int) -> Path:
    return out / "runs" / f"p{point + 1:03d}-r{repetition:02d}"


def execute_run(exp: Experiment, point: Point, repetition: int, directory: Path, *,
                certificates: tls.TlsFiles | None = None) -> RunRecord:
    """One run of one point: on this host (topology `local`) or on emulated hosts (`netns`,
    built for the run and removed after it). A run with TLS uses `certificates` (the
    experiment's), or makes its own throw-away ones for itself."""
    c = point.config
    if directory.exists():
        shutil.rmtree(directory)  # left by a run that was interrupted
    directory.mkdir(parents=True)
    host = hostinfo.collect()
    layout = topology.plan(c) if c.topology.kind != TopologyKind.LOCAL else None
    with ExitStack() as stack:
        if c.tls and certificates is None:
            certificates = stack.enter_context(tls.throwaway())
        sockets = None
        if c.servers.unix_socket or (c.middleware.count and c.middleware.unix_socket):
            # Short, private and removed on every exit path (a socket path has ~100 bytes).
            sockets = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="cachelab-sock-", dir=transport.socket_directory())))
        wiring = transport.Wiring(c, certificates if c.tls else None, sockets)
        place = processes.hosts(c, layout, directory, stack)
        if place.versions:
            host = dataclasses.replace(host, hosts=place.versions)
        links = (() if repetition != 1 else processes.measure_links(c, layout, place) if layout
                 else processes.loopback(c))
        servers = processes.start_servers(c, directory, place, stack, wiring)
        wiring = wiring.sharding(servers)
        seed = c.workload.seed + 1000 * (repetition - 1)
        processes.populate(c, servers, directory, stack, wiring, seed)
        middlewares = [stack.enter_context(local.start_middleware(
            [s.address for s in servers], processes.proxy_settings(c, exp.stats_window_s),
            cpus=local.pinned(c.middleware.cpus, i),
            stats_file=directory / f"middleware-{i}.stats.jsonl",
            log_file=directory / f"middleware-{i}.log", out=directory / f"middleware-{i}.out",
            host=place("middleware", i), transport=wiring.middleware(i)))
            for i in range(c.middleware.count)]
        targets = middlewares or (servers[:1] if c.load.shard else servers)
        sessions: tuple[TlsSession, ...] = ()
        if certificates is not None and c.middleware.count and c.servers.tls:
            sessions = transport.server_sessions(c, servers, certificates,
                                                 place("middleware", 0))
        measured = [("server", i, s) for i, s in enumerate(servers)]
        measured += [("middleware", i, m) for i, m in enumerate(middlewares)]
        cpu_before = processes.cpu_seconds(measured)
        groups = {} if layout is None else {
            h.name: reader for h in layout.hosts
            if (reader := place.hosts[h.name].cpu_reader()) is not None}
        emulator: dict[str, Callable[[], tuple[float, float]]] = {
            f"cachelab-delay[{pid}]": functools.partial(process_usage, pid)
            for pid in place.emulator_pids}
        placements = processes.client_placements(c, layout, place)
        start_at = None
        warm = warmup.warm_up(c, targets, wiring, place, directory, seed)
        with Sampler() as sampler, GroupSampler(groups) as host_sampler, \
                GroupSampler(emulator) as emulator_sampler:
            started = time.time()
            if c.load.mode == LoadMode.CAPACITY:
                searched = capacity.search(
                    exp, c, [(t.host, t.port, wiring.to_targets(t)) for t in targets],
                    directory,
                    place=lambda i: place("load", i), seed=seed)
            else:
                start_at = int(1000 * (time.time() + start_lead_s(c, layout)))
            timing: dict[str, Any] = dict(test_time=exp.run_time_s, warmup=exp.warmup_s,
                                          cooldown=exp.cooldown_s, start_at_ms=start_at)
            to = c.placement.targets  # instance i -> target i mod T, connections even
            searching = c.load.mode == LoadMode.CAPACITY
            loads = [] if searching else [stack.enter_context(local.start_load(
                loadgen.run_argv(c, targets[to[i]].host, targets[to[i]].port, seed=seed + i,
                                 json_out=directory / f"load-{i}.json", instance=i,
                                 transport=wiring.to_targets(targets[to[i]]),
                                 **timing),
                cpus=local.pinned(c.load.cpus, i), out=directory / f"load-{i}.out",
                host=place("load", i)))
                for i in range(c.instances)]
            if c.load.measure_rate is not None and c.load.mode != LoadMode.CAPACITY:
                loads.append(stack.enter_context(local.start_load(
                    loadgen.measure_argv(c, targets[0].host, targets[0].port,
                                         transport=wiring.to_targets(targets[0]),
                                         rate=c.load.measure_rate, seed=seed + 999,
                                         json_out=directory / "measure-0.json", **timing),
                    cpus=(), out=directory / "measure-0.out", host=place("measure", 0))))
            local.wait_all(loads, exp.run_time_s + RUN_GRACE_S)
            ended = time.time()
            cpu_after = processes.cpu_seconds(measured)
        for mw in middlewares:  # SIGTERM: it flushes its last window and its summary
            if mw.stop() != 0:
                raise UserError(f"cachelab-proxy exited with status {mw.process.returncode}; "
                                f"see {mw.files['log']}")
        for server in servers:  # nothing to keep, and memcached takes ~1 s over SIGTERM
            server.stop(signal.SIGKILL)
        place.collect()
    stats = tuple(proxy_stats.load(mw.files["stats"]) for mw in middlewares)
    capacity_record = None
    process_cpu: tuple[ProcessCpu, ...] = ()  # a capacity search's spans many rates
    measures: tuple[loadgen.Report, ...] = ()
    checks: tuple = ()
    if c.load.mode == LoadMode.CAPACITY:
        reports, summary, capacity_record = processes.capacity_result(exp, searched)
    else:
        reports = tuple(loadgen.load(directory / f"load-{i}.json")
                        for i in range(c.instances))
        measures = tuple(loadgen.load(directory / f"measure-{i}.json")
                         for i in range(c.measures))
        offsets = [(p.clock_offset_us or 0.0) / 1e6 for p in placements if p.role == "load"]
        window: dict[str, Any] = dict(
            run_time=exp.run_time_s, warmup=exp.warmup_s, cooldown=exp.cooldown_s,
            offsets_s=offsets, start_s=None if start_at is None else start_at / 1000)
        summary = validate.summarise(reports, **window)
        checks = selfcheck.checks(reports, mode=c.load.mode, **window)
        sessions = transport.client_sessions(c, reports) + sessions
        process_cpu = processes.cpu_per_process(cpu_before, cpu_after, reports)
    intervals = (selfcheck.intervals([r.histograms["total"] for r in reports])
                 + selfcheck.intervals([r.histograms["total"] for r in measures], "measure"))
    artifacts = {f.name: f.read_bytes() for f in sorted(directory.iterdir())
                 if f.is_file() and not f.name.startswith("populate-")}
    hosts = () if layout is None else tuple(
        RunHost(h.name, ",".join(h.roles), place.hosts[h.name].address,
                max(h.egress_mbit, h.ingress_mbit), h.delay_ms, h.cpu_quota, h.cpus,
                h.egress_mbit, h.ingress_mbit) for h in layout.hosts)
    if layout is not None and c.topology.kind == TopologyKind.NETNS:
        lead = 0.0 if start_at is None else max(0.0, start_at / 1000 - started)
        serving = c.servers.threads if c.servers.kind == ServerKind.MEMCACHED else 1
        checks += (processes.machine_check(exp, layout, sampler, host_sampler, emulator_sampler,
                                  lead, serving),)
    checks += (warm,) if warm is not None else ()
    return RunRecord(point.index, repetition, started, ended, summary, host, reports, stats,
                     tuple(sampler.samples), artifacts, hosts,
                     tuple(HostCpuSample(*x) for x in host_sampler.samples), links,
                     capacity_record, measures, placements, start_at, intervals, checks,
                     tuple(EmulatorCpuSample(*x) for x in emulator_sampler.samples),
                     sessions, process_cpu)


@dataclass(frozen=True)
class Outcome:
    experiment_id: int
    runs_done: int
    #: (point label, reason) of every point that stayed unstable.
    unstable: tuple[tuple[str, str], ...]
    database: Path


@dataclass(frozen=True)
class _Plan:
    """What the runs of an opened experiment follow: its id in the store, the run order
    and its seed, and the runs each point already has."""

    exp_id: int
    order: Order
    seed: int
    outcomes: dict[int, list[validate.RunOutcome]]


def run_experiment(exp: Experiment, out: Path, *, resume: bool = False, again: bool = False,
                   progress: Progress | None = None, execute: Execute = execute_run,
                   move_aside: Callable[[Path], None] | None = None) -> Outcome:
    """Runs every point until validation is satisfied, storing each run as it finishes.

    With `again`, a finished experiment in `out` (or another one) is handed to
    `move_aside` (default: deleted) and the experiment starts over in an empty `out`, and
    an unfinished run of the same file is resumed."""
    netns_points = any(p.config.topology.kind == TopologyKind.NETNS for p in exp.points)
    if execute is execute_run and netns_points:
        netns.require_support()  # before anything starts: one clear line if it cannot run
        netns.remove_stale()
    paths.writable_dir(out, "results")
    progress = progress or Progress()
    with ExitStack() as certificates, _opened(exp, out, resume=resume, again=again,
                                              move_aside=move_aside or shutil.rmtree) \
            as (store, plan):
        if execute is execute_run and any(p.config.tls for p in exp.points):
            # One throw-away CA and its certificates for the whole experiment, removed
            # when it ends however it ends.
            execute = functools.partial(execute_run,
                                        certificates=certificates.enter_context(
                                            tls.throwaway()))
        status = Status(exp, plan.outcomes)
        progress.begin(status)
        by_index = {p.index: p for p in exp.points}

        def run_next(index: int) -> None:
            point, runs = by_index[index], plan.outcomes[index]
            repetition = len(runs) + 1
            status.start(point, repetition)
            progress.started(status)
            record = execute(exp, point, repetition, run_dir(out, point.index, repetition))
            store.save_run(plan.exp_id, record)
            runs.append(validate.RunOutcome(
                record.summary.throughput, record.summary.cv_within,
                tuple(r.histograms["total"] for r in record.loads),
                tuple(r.histograms["total"] for r in record.measures)))
            verdict = _assess(exp, runs)
            _save_point_intervals(store, plan.exp_id, index, runs, verdict)
            status.finish(point, record)
            progress.finished(status, record, verdict)

        try:
            for index in schedule(exp, plan.outcomes, plan.order, plan.seed):
                run_next(index)
        finally:
            progress.end(status)
    unstable = [(p.label, v.reason) for p in exp.points
                if not (v := _assess(exp, plan.outcomes[p.index])).stable]
    return Outcome(plan.exp_id, status.runs_this_session, tuple(unstable), out / FILENAME)


@contextmanager
def _opened(exp: Experiment, out: Path, *, resume: bool, again: bool,
            move_aside: Callable[[Path], None]) -> Iterator[tuple[Store, _Plan]]:
    """The store of `out` and the plan to follow: a new experiment's (its seed drawn here
    unless the file gives one), or a resumed one's as stored."""
    with Store(out / FILENAME) as store:
        existing = store.experiment()
        same = existing is not None and existing.digest == exp.digest
        outcomes = stored_outcomes(exp, store.runs_by_point(existing.id), store) \
            if existing is not None and same else {}
        if again and existing is not None:
            resume = same and _pending(exp, outcomes)
        if existing is None or resume or not again:
            if existing is not None and not resume:
                raise UserError(f"{out} already holds the experiment {existing.name!r}; "
                                "continue it with --resume, or choose another --out")
            if existing is not None and not same:
                raise UserError(f"--resume: the experiment file differs from the one {out} "
                                "was started with; undo the change or choose another --out")
            yield store, _plan(exp, store) if existing is None else _Plan(
                # An experiment stored before orders existed ran in sweep order, no seed.
                existing.id, existing.order, existing.order_seed or 0, outcomes)
            return
    move_aside(out)  # --again: finished, or another experiment
    paths.writable_dir(out, "results")
    with Store(out / FILENAME) as store:
        yield store, _plan(exp, store)


def _plan(exp: Experiment, store: Store) -> _Plan:
    """A new experiment: stored with its seed, no runs yet."""
    seed = exp.order_seed if exp.order_seed is not None else order.new_seed()
    return _Plan(store.create_experiment(exp, seed), exp.order, seed,
                 {p.index: [] for p in exp.points})


def schedule(exp: Experiment, outcomes: dict[int, list[validate.RunOutcome]],
             run_order: Order, seed: int) -> Iterator[int]:
    """The point of each next run, in the experiment's order (order.py), as validation
    goes: `sweep` runs each point until it is settled, then the next; the others first run
    every planned repetition in their order, then add rounds of one more run per point
    that validation asks for. Runs already stored (a resumed experiment) are skipped in
    place, so the order continues where it stopped."""
    indices = [p.index for p in exp.points]
    if run_order == Order.SWEEP:
        for index in indices:
            while _assess(exp, outcomes[index]).more:
                yield index
        return
    stored = {index: len(outcomes[index]) for index in indices}
    slots: dict[int, int] = {}
    for index, _ in order.plan(indices, exp.repetitions, run_order, seed):
        slots[index] = slots.get(index, 0) + 1
        if slots[index] > stored[index] and _assess(exp, outcomes[index]).more:
            yield index
    for round_ in itertools.count(1):
        wanting = [(i, len(outcomes[i]) + 1) for i in indices if _assess(exp, outcomes[i]).more]
        if not wanting:
            return
        for index, _ in order.extra_round(wanting, run_order, seed, round_):
            yield index


class StoredState(StrEnum):
    """What an output directory holds for an experiment."""

    #: Nothing yet.
    EMPTY = "empty"
    #: Another experiment, or this one's file changed since.
    OTHER = "other"
    #: Some point wants more runs.
    UNFINISHED = "unfinished"
    FINISHED = "finished"


def stored_state(exp: Experiment, out: Path) -> StoredState:
    """What `out` holds for `exp`."""
    if not (out / FILENAME).exists():
        return StoredState.EMPTY
    with Store.open_existing(out) as store:
        existing = store.experiment()
        if existing is None:
            return StoredState.EMPTY
        if existing.digest != exp.digest:
            return StoredState.OTHER
        outcomes = stored_outcomes(exp, store.runs_by_point(existing.id), store)
    return StoredState.UNFINISHED if _pending(exp, outcomes) else StoredState.FINISHED


def stored_outcomes(exp: Experiment, runs: dict[int, list[StoredRun]],
                    store: Store | None = None) -> dict[int, list[validate.RunOutcome]]:
    """What validation needs of each point's stored runs (their histograms too when
    `validation.stop_when` asks for an interval, read from `store`)."""
    hists: dict[int, tuple[str, ...]] = {}
    if store is not None and exp.validation.stop_when.p99_width_ms is not None:
        hists = store.run_histograms([r.id for rs in runs.values() for r in rs])
    return {p.index: [validate.RunOutcome(r.throughput, r.cv_within, hists.get(r.id, ()))
                      for r in runs.get(p.index, [])] for p in exp.points}


def _save_point_intervals(store: Store, exp_id: int, point: int,
                          runs: list[validate.RunOutcome], verdict: validate.Verdict) -> None:
    """The point's percentiles with their intervals over the merged histograms of the runs
    its aggregates use (the steady ones, or all when none is), per role."""
    used = [runs[i] for i in verdict.steady] or runs
    try:
        found = (selfcheck.intervals([h for r in used for h in r.histograms])
                 + selfcheck.intervals([h for r in used for h in r.measure_histograms],
                                       "measure"))
    except hdr.HdrError:
        return  # a damaged histogram: the point keeps the intervals it had
    store.save_point_intervals(exp_id, point, found, len(used))


def _pending(exp: Experiment, outcomes: dict[int, list[validate.RunOutcome]]) -> bool:
    return any(_assess(exp, runs).more for runs in outcomes.values())


def _assess(exp: Experiment, runs: list[validate.RunOutcome]) -> validate.Verdict:
    return validate.assess(runs, threshold=exp.validation.cv_threshold,
                           repetitions=exp.repetitions, max_repetitions=exp.max_repetitions,
                           max_replacements=exp.max_replacements,
                           stop_width_ms=exp.validation.stop_when.p99_width_ms)
