"""M/M/1 and M/M/m predictions for the middleware, beside what it measured. No I/O.

The middleware is one FCFS queue in front of W workers (SPEC section 1), so with M
middlewares of W workers it is modelled two ways (SPEC section 4):

    M/M/1:  lambda = measured arrival rate (all middlewares),
            mu     = the highest throughput measured in this configuration,
            so the whole middleware is one server as fast as it ever was;
    M/M/m:  lambda = measured arrival rate,  m = M W,
            mu     = 1 / S, S = the measured mean worker service time
                     (dequeued to reply sent: one worker's time per request).

Measured, over the steady windows (times per request, rates per second):

    U   = X S / m                   (utilisation law; X = measured completions per second)
    Wq  = mean queue wait           (enqueued to dequeued)
    R   = Wq + S                    (the station's response time: queue and service; the
                                     few µs of decoding before the queue are left out,
                                     as the models have no such stage)
    Lq  = mean queue length seen by the workers as they take a request, summed over the
          middlewares

Each prediction is set beside its measurement with the ratio predicted / measured. The
models assume Poisson arrivals, exponential service and one shared queue; `assumptions`
lists, per point, the ones the measurements or the configuration contradict.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cachelab.analysis import queueing
from cachelab.analysis.errors import AnalysisError

#: A service-time coefficient of variation this far from 1 (the exponential's) is reported.
CV_TOLERANCE = 0.5
#: Arrivals and completions further apart than this mean the middleware fell behind.
RATE_TOLERANCE = 0.05


@dataclass(frozen=True)
class Measured:
    """What the middlewares measured at one point (seconds, per second), and the
    configuration the models need."""

    arrival_rate: float
    throughput: float
    service_time: float
    queue_wait: float
    queue_length: float
    workers: int
    middlewares: int = 1
    #: Std / mean of the worker service time; None when unknown.
    service_cv: float | None = None
    #: The middleware's --pipeline depth.
    pipeline: int = 1
    #: Closed loop: requests outstanding (clients x pipeline); None in open loop.
    closed_population: int | None = None
    #: Whether the workers share CPUs with the servers or the load generators.
    shares_cpus: bool = False

    @property
    def servers(self) -> int:
        return self.workers * self.middlewares

    @property
    def response_time(self) -> float:
        return self.queue_wait + self.service_time

    @property
    def utilization(self) -> float:
        return self.throughput * self.service_time / self.servers


@dataclass(frozen=True)
class Compared:
    measured: float
    predicted: float | None

    @property
    def ratio(self) -> float | None:
        """predicted / measured; None without a prediction or when nothing was measured."""
        if self.predicted is None or self.measured <= 0:
            return None
        return self.predicted / self.measured


@dataclass(frozen=True)
class ModelRow:
    """One model ("M/M/1" or "M/M/m") at one point. `utilization` is the model's
    rho = lambda / (m mu);
    `measured_utilization` is X / mu for M/M/1 and X S / m for M/M/m."""

    model: str
    arrival_rate: float
    service_rate: float
    servers: int
    utilization: float
    measured_utilization: float
    queue_length: Compared
    queue_wait: Compared
    response_time: Compared
    assumptions: tuple[str, ...]

    @property
    def stable(self) -> bool:
        return self.utilization < 1


def mm1_row(m: Measured, capacity: float) -> ModelRow:
    """M/M/1 with mu = `capacity`, the highest throughput measured in the configuration."""
    _check(m)
    if not math.isfinite(capacity) or capacity <= 0:
        raise AnalysisError(f"M/M/1 service rate must be positive, got {capacity!r}")
    notes = _common(m)
    if m.servers > 1:
        notes.append(f"{m.servers} workers act as one server of rate mu = the highest "
                     "throughput measured")
    return _row("M/M/1", m, m.arrival_rate, capacity, 1, m.throughput / capacity, notes)


def mmm_row(m: Measured) -> ModelRow:
    """M/M/m with m = M W workers and mu = 1 / S per worker."""
    _check(m)
    notes = _common(m)
    if m.pipeline > 1:
        notes.append(f"--pipeline {m.pipeline}: a worker serves up to {m.pipeline} requests "
                     f"at once, so m is not W and S includes the batch")
    if m.middlewares > 1:
        notes.append(f"{m.middlewares} middlewares have a queue each; the model pools them")
    if m.closed_population is not None and m.closed_population <= m.servers:
        notes.append(f"N = {m.closed_population} requests for m = {m.servers} workers: "
                     "none can wait in the real system")
    if m.service_cv is not None and abs(m.service_cv - 1) > CV_TOLERANCE:
        notes.append(f"service time CV {m.service_cv:.2f} (exponential: 1)")
    return _row("M/M/m", m, m.arrival_rate, 1 / m.service_time, m.servers,
                m.utilization, notes)


def _row(name: str, m: Measured, lam: float, mu: float, servers: int, measured_u: float,
         notes: list[str]) -> ModelRow:
    rho = lam / (servers * mu)
    predicted = None
    if rho < 1:
        predicted = queueing.mmm(lam, mu, servers)
    else:
        notes.insert(0, f"rho = {rho:.3f} >= 1: the model has no steady state")
    return ModelRow(
        model=name, arrival_rate=lam, service_rate=mu, servers=servers, utilization=rho,
        measured_utilization=measured_u,
        queue_length=Compared(m.queue_length,
                              None if predicted is None else predicted.mean_in_queue),
        queue_wait=Compared(m.queue_wait, None if predicted is None else predicted.waiting_time),
        response_time=Compared(m.response_time,
                               None if predicted is None else predicted.response_time),
        assumptions=tuple(notes),
    )


def _common(m: Measured) -> list[str]:
    notes = []
    if m.closed_population is not None:
        notes.append(f"closed loop (N = {m.closed_population}): arrivals depend on the "
                     "requests in the system, so they are not Poisson")
    if m.throughput > 0 and abs(m.arrival_rate - m.throughput) / m.throughput > RATE_TOLERANCE:
        notes.append(f"arrivals {m.arrival_rate:,.0f}/s against completions "
                     f"{m.throughput:,.0f}/s: not in steady state")
    if m.shares_cpus:
        notes.append("the workers share CPUs with other processes")
    return notes


def _check(m: Measured) -> None:
    for name, value in (("arrival rate", m.arrival_rate), ("throughput", m.throughput),
                        ("service time", m.service_time)):
        if not math.isfinite(value) or value <= 0:
            raise AnalysisError(f"measured {name} must be positive, got {value!r}")
    if m.workers < 1 or m.middlewares < 1:
        raise AnalysisError("the middleware needs at least one worker")


def shares_cpus(middleware: tuple[int, ...], others: tuple[tuple[int, ...], ...]) -> bool:
    """Whether the middleware's workers can run on a CPU the other processes use: true
    unless the middleware and every other role are pinned, to disjoint CPUs."""
    if not middleware or any(not cpus for cpus in others):
        return True
    return any(set(middleware) & set(cpus) for cpus in others)
