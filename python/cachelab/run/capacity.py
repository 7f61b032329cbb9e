"""Running a capacity search (analysis/capacity.py decides the rates) against a system
that is up: each trial starts the run's load generators in open loop at the trial's
rate, split evenly over them, and reads their reports back.

A trial's latency is the chosen percentile of the load generators' merged HDR histograms
(every request of the window, all instances); its completed rate is the sum of their
answered rates; its send lag is the worst instance's p99. A trial lasts `trial_s`, or
long enough to hold `MIN_TAIL_SAMPLES` requests beyond the percentile, whichever is
longer, so a p99 rests on at least that many slow requests' worth of data.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from cachelab.analysis import capacity as cap
from cachelab.hosts import local
from cachelab.hosts.host import LOOPBACK, Host
from cachelab.readers import hdr, loadgen
from cachelab.spec.experiment import Experiment, LoadMode, RunConfig

#: A load generator's target: host, port and how to reach it (TLS, a Unix socket).
Target = tuple[str, int, loadgen.Transport]

#: Requests beyond the percentile a trial must hold (20 above p99 means 2,000 requests).
MIN_TAIL_SAMPLES = 20
TRIAL_GRACE_S = 30.0


@dataclasses.dataclass(frozen=True)
class Outcome:
    answer: cap.Answer
    trials: tuple[cap.Trial, ...]
    #: The judgement of every rate tried, in order.
    judgements: tuple[cap.Judgement, ...]
    #: The load generators' reports of the trials at the capacity (empty if none passed).
    reports: tuple[loadgen.Report, ...]
    #: Each trial's run time (the length the percentile needed).
    trial_s: dict[float, float]


def policy(exp: Experiment) -> cap.Policy:
    c = exp.capacity
    return cap.Policy(target_ms=c.target_ms or exp.qos_target_ms, start=c.start_rate,
                      max_rate=c.max_rate, tolerance=c.tolerance, growth=c.growth)


def trial_length(exp: Experiment, rate: float) -> float:
    c = exp.capacity
    needed = MIN_TAIL_SAMPLES / (1 - c.percentile / 100) / rate
    return max(c.trial_s, needed) + c.trial_warmup_s


def search(exp: Experiment, config: RunConfig, targets: Sequence[Target],
           directory: Path, *, place: Callable[[int], Host] = lambda i: LOOPBACK,
           seed: int = 1, log: Callable[[str], None] = lambda line: None) -> Outcome:
    """Searches the highest rate meeting the target; trial n's files are
    `directory/capacity-tNNN-load-I.json` (and `.out`)."""
    pol = policy(exp)
    s = cap.Search(pol)
    trials: list[cap.Trial] = []
    reports_at: dict[float, list[loadgen.Report]] = {}
    lengths: dict[float, float] = {}
    step = 0
    while (rate := s.next_rate()) is not None:
        at_rate = []
        for repetition in range(1, exp.capacity.trial_repetitions + 1):
            step += 1
            length = trial_length(exp, rate)
            lengths[rate] = length
            reports = _trial(exp, config, targets, directory, f"capacity-t{step:03d}-",
                             rate, length, place, seed + step)
            trial = _measure(reports, rate, repetition, exp.capacity.percentile)
            trials.append(trial)
            at_rate.append(trial)
            reports_at.setdefault(rate, []).extend(reports)
        judgement = cap.judge(at_rate, pol)
        s.record(judgement)
        log(f"{rate:>12,.0f}/s  p{exp.capacity.percentile:g} {judgement.latency_ms:.3f} ms  "
            f"{judgement.verdict}: "
            f"{judgement.reason}")
    answer = cap.answer(s)
    at_capacity = tuple(reports_at.get(answer.capacity, ())) if answer.capacity else ()
    return Outcome(answer, tuple(trials), tuple(s.judgements), at_capacity, lengths)


def _trial(exp: Experiment, config: RunConfig, targets: Sequence[Target],
           directory: Path, prefix: str, rate: float, length: float,
           place: Callable[[int], Host], seed: int) -> list[loadgen.Report]:
    directory.mkdir(parents=True, exist_ok=True)
    open_loop = dataclasses.replace(config, load=dataclasses.replace(
        config.load, mode=LoadMode.OPEN, rate=rate))
    warmup = exp.capacity.trial_warmup_s
    loads = []
    try:
        for i in range(config.instances):
            host, port, transport = targets[config.placement.targets[i]]
            argv = loadgen.run_argv(open_loop, host, port, transport=transport,
                                    test_time=length, warmup=warmup,
                                    cooldown=0, seed=seed * 100 + i,
                                    json_out=directory / f"{prefix}load-{i}.json",
                                    instance=i)
            loads.append(local.start_load(argv, cpus=local.pinned(config.load.cpus, i),
                                          out=directory / f"{prefix}load-{i}.out",
                                          host=place(i)))
        local.wait_all(loads, length + TRIAL_GRACE_S)
    finally:
        for load in loads:
            load.stop()
    for where in {id(place(i)): place(i) for i in range(config.instances)}.values():
        where.collect(directory)
    return [loadgen.load(directory / f"{prefix}load-{i}.json")
            for i in range(config.instances)]


def _measure(reports: list[loadgen.Report], rate: float, repetition: int,
             percentile: float) -> cap.Trial:
    merged = hdr.merge_all([r.histograms["total"] for r in reports])
    latency_ms = merged.quantile(percentile / 100) / 1000 if merged else float("inf")
    loops = [r.open_loop or {} for r in reports]
    completed = sum(o.get("completed_rate", 0.0) for o in loops)
    lag = max((o.get("send_lag_ms", {}).get("p99", 0.0) for o in loops), default=0.0)
    behind = any(o.get("fell_behind", False) for o in loops)
    return cap.Trial(rate, repetition, latency_ms, completed, lag, behind)
