"""The warm-up phase of a run (`[load.warmup]`, issue 35 part 7): before the measured
window, the run's load generators load the cache in phases of one window each, the same
workload against the same targets, until the rule of analysis/warmup.py says the cache is
warm or the bound passes. Each phase's report stays in the run directory
(`warmup-PHASE-INSTANCE.json`, stored with the run's files).

Why separate runs rather than the first seconds of the measured one: the measured run's
length, warm-up cut and seeds stay what the file says whatever the cache's state, and a
run that never warms still measures its full window, flagged (the verdict becomes the
run's `warm-up` self-check, stored and shown in the report's validity section).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from cachelab.analysis import trust
from cachelab.analysis import warmup as rule
from cachelab.hosts import local
from cachelab.hosts.host import Host
from cachelab.hosts.procs import Managed
from cachelab.readers import loadgen
from cachelab.run import transport
from cachelab.spec.experiment import LoadMode, RunConfig

#: Seconds beyond a phase's length allowed for its load generators to end.
PHASE_GRACE_S = 30.0
#: Seeds of the warm-up phases, apart from the measured run's.
SEED_OFFSET = 50_000


def seconds(reports: Sequence[loadgen.Report]) -> list[rule.Second]:
    """The instances' whole seconds added together (a last, partial second left out)."""
    length = min((int(r.duration_s) for r in reports), default=0)
    out = [[0, 0, 0] for _ in range(length)]
    for r in reports:
        for row in r.series:
            if row.second < length:
                acc = out[row.second]
                acc[0] += row.ops
                acc[1] += row.hits
                acc[2] += row.misses
    return [rule.Second(*acc) for acc in out]


def warm_up(c: RunConfig, targets: Sequence[Managed], wiring: transport.Wiring,
            place: Callable[[str, int], Host], directory: Path,
            seed: int) -> trust.Check | None:
    """Loads the cache until warm or the bound passes; the verdict as a self-check, or
    None when the run has no warm-up (a capacity search, or a bound of 0)."""
    w = c.load.warmup
    bound = w.bound_s(c.workload.populate, c.workload.trace is not None)
    if bound <= 0 or c.load.mode == LoadMode.CAPACITY:
        return None
    judged: list[rule.Second] = []
    verdict = rule.judge(judged, w)
    begun = time.monotonic()
    phase = 0
    while len(judged) < bound and time.monotonic() - begun < bound + PHASE_GRACE_S:
        length = min(w.window_s, max(bound - len(judged), 1.0))
        judged += seconds(_phase(c, targets, wiring, place, directory, seed, phase, length))
        phase += 1
        verdict = rule.judge(judged, w)
        if verdict.warm:
            break
    return verdict.check()


def _phase(c: RunConfig, targets: Sequence[Managed], wiring: transport.Wiring,
           place: Callable[[str, int], Host], directory: Path, seed: int, phase: int,
           length: float) -> list[loadgen.Report]:
    """One phase: every load instance for `length` seconds, nothing cut."""
    to = c.placement.targets
    files = [directory / f"warmup-{phase + 1:02d}-{i}.json" for i in range(c.instances)]
    with ExitStack() as stack:
        loads = [stack.enter_context(local.start_load(
            loadgen.run_argv(c, targets[to[i]].host, targets[to[i]].port,
                             seed=seed + SEED_OFFSET + 100 * phase + i, json_out=files[i],
                             instance=i, transport=wiring.to_targets(targets[to[i]]),
                             test_time=length, warmup=0, cooldown=0),
            cpus=local.pinned(c.load.cpus, i),
            out=directory / f"warmup-{phase + 1:02d}-{i}.out", host=place("load", i)))
            for i in range(c.instances)]
        local.wait_all(loads, length + PHASE_GRACE_S)
    return [loadgen.load(f) for f in files]
