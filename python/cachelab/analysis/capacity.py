"""Capacity under a latency target: the highest offered rate whose percentile latency
stays under the target, found in open loop by a search over rates. Pure: the caller runs
the trials, this decides which rate comes next and what the answer is.

Each rate is tried `repetitions` times. A rate **passes** when the median of its trials'
percentile is at or under the target and the system kept up (median completed rate at
least `keep_up` of the offered rate: a system past its capacity answers less than it is
offered and its queue, and so its latency, grows with the trial's length). A rate is
**void** when the load generator could not hold its schedule (it fell behind in most of
the trials, or their median p99 send lag exceeded `lag_share` of the target) and that
lateness is a visible part (`lag_of_latency`) of the latency measured: its latencies then
measure the client. (Past its capacity a system stops reading and the client's sends wait
for the socket too; a lag that small beside the latency is the system's, and fails.) One
starved trial among three is noise, which the median already discounts.

The search grows the rate by `growth` from `start` until a rate fails (or shrinks it
until one passes), then bisects between the highest pass and the lowest failure until
they are within `tolerance` of each other. The answer is that bracket:

    capacity = highest passing rate,   uncertainty = lowest failing rate - capacity

so the true capacity lies in [capacity, capacity + uncertainty) at the trials' noise; a
void rate stops the search and the answer says the load generator, not the system, set
the limit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from enum import StrEnum


@dataclass(frozen=True)
class Trial:
    rate: float
    repetition: int
    #: The latency percentile searched on, in milliseconds.
    latency_ms: float
    #: Requests answered per second in the trial's window.
    completed_rate: float
    #: The load generator's p99 send lag, in milliseconds.
    send_lag_p99_ms: float
    fell_behind: bool


class Verdict(StrEnum):
    """A rate's verdict, as printed and stored."""

    PASS = "pass"
    FAIL = "fail"
    VOID = "void"
    #: A trial whose rate was never judged (a search cut short before its last trial).
    UNJUDGED = "?"


@dataclass(frozen=True)
class Judgement:
    rate: float
    passed: bool
    void: bool
    latency_ms: float
    reason: str

    @property
    def verdict(self) -> Verdict:
        return Verdict.PASS if self.passed else Verdict.VOID if self.void else Verdict.FAIL


@dataclass(frozen=True)
class Policy:
    target_ms: float = 1.0
    start: float = 1000.0
    growth: float = 2.0
    tolerance: float = 0.05
    min_rate: float = 10.0
    max_rate: float = 2_000_000.0
    keep_up: float = 0.95
    lag_share: float = 0.5
    lag_of_latency: float = 0.25
    max_rates: int = 24


def judge(trials: list[Trial], policy: Policy) -> Judgement:
    rate = trials[0].rate
    latency = statistics.median(t.latency_ms for t in trials)
    lag = statistics.median(t.send_lag_p99_ms for t in trials)
    behind = sum(t.fell_behind for t in trials)
    late = 2 * behind > len(trials) or lag > policy.lag_share * policy.target_ms
    # A system past its capacity stops reading, so the client's sends wait for the socket
    # and its lag grows too; that is the system's doing when the lag is a small part of
    # the latency measured. Only a lag that makes up a visible share of it voids a rate.
    if late and lag > policy.lag_of_latency * latency:
        return Judgement(rate, False, True, latency,
                         f"the load generator fell behind (send lag p99 {lag:.3f} ms)")
    completed = statistics.median(t.completed_rate for t in trials)
    if completed < policy.keep_up * rate:
        return Judgement(rate, False, False, latency,
                         f"answered {completed:,.0f}/s of {rate:,.0f}/s offered")
    if latency > policy.target_ms:
        return Judgement(rate, False, False, latency,
                         f"latency {latency:.3f} ms over the {policy.target_ms:g} ms target")
    return Judgement(rate, True, False, latency, "under the target")


@dataclass
class Search:
    """Which rate to try next, from the judgements so far."""

    policy: Policy
    judgements: list[Judgement] = field(default_factory=list)

    @property
    def best(self) -> Judgement | None:
        passes = [j for j in self.judgements if j.passed]
        return max(passes, key=lambda j: j.rate) if passes else None

    @property
    def lowest_failure(self) -> Judgement | None:
        best = self.best
        fails = [j for j in self.judgements if not j.passed and not j.void
                 and (best is None or j.rate > best.rate)]
        return min(fails, key=lambda j: j.rate) if fails else None

    @property
    def void(self) -> Judgement | None:
        return next((j for j in self.judgements if j.void), None)

    def record(self, judgement: Judgement) -> None:
        self.judgements.append(judgement)

    def next_rate(self) -> float | None:
        """The next rate to try, or None when the search is over."""
        p = self.policy
        if not self.judgements:
            return p.start
        if self.void is not None or len(self.judgements) >= p.max_rates:
            return None
        best, fail = self.best, self.lowest_failure
        if fail is None:  # everything so far passed: grow
            assert best is not None  # judged, none failed or void: one passed
            rate = best.rate * p.growth
            return rate if rate <= p.max_rate and best.rate < p.max_rate else None
        if best is None:  # everything failed: shrink
            rate = fail.rate / p.growth
            return rate if rate >= p.min_rate else None
        if fail.rate - best.rate <= p.tolerance * best.rate:
            return None
        return (best.rate + fail.rate) / 2


@dataclass(frozen=True)
class Answer:
    #: The highest rate that passed (None: none did).
    capacity: float | None
    #: The lowest failing rate above it minus the capacity (None: no failure above).
    uncertainty: float | None
    #: The percentile latency at the capacity, in milliseconds.
    latency_ms: float | None
    #: Why the search stopped where it did.
    reason: str
    limited_by_generator: bool


def answer(search: Search) -> Answer:
    best, fail, void = search.best, search.lowest_failure, search.void
    if void is not None:
        reason = f"stopped at {void.rate:,.0f}/s: {void.reason}; the capacity is at least " \
                 "the answer, but the load generator, not the system, set the limit"
    elif best is None:
        reason = "no rate down to the minimum met the target"
    elif fail is None:
        reason = "every rate up to the maximum met the target"
    else:
        reason = f"{fail.rate:,.0f}/s failed: {fail.reason}"
    return Answer(best.rate if best else None,
                  (fail.rate - best.rate) if best and fail else None,
                  best.latency_ms if best else None, reason, void is not None)
