"""The capacity search on a synthetic system whose latency is known: it brackets the true
capacity within its tolerance, says why it stopped, and is not fooled by a load
generator that falls behind."""

import pytest

from cachelab.analysis import capacity as cap


def system(limit: float, *, lag_from: float | None = None):
    """p99 = 0.2 ms below `limit` ops/s; beyond it the queue grows: 5 ms and 90% answered."""
    def trial(rate: float, repetition: int) -> cap.Trial:
        over = rate > limit
        lag = 5.0 if lag_from is not None and rate >= lag_from else 0.01
        return cap.Trial(rate, repetition, 5.0 if over else 0.2,
                         0.9 * rate if over else rate, lag, lag > 1)
    return trial


def search(trial, policy: cap.Policy, repetitions: int = 3) -> cap.Answer:
    s = cap.Search(policy)
    while (rate := s.next_rate()) is not None:
        s.record(cap.judge([trial(rate, r) for r in range(repetitions)], policy))
    return cap.answer(s), s


@pytest.mark.parametrize("limit", [3_000.0, 17_500.0, 123_000.0, 900.0])
def test_the_answer_brackets_the_true_capacity_within_the_tolerance(limit):
    policy = cap.Policy(target_ms=1.0, start=1000, tolerance=0.05)
    answer, s = search(system(limit), policy)
    assert answer.capacity <= limit < answer.capacity + answer.uncertainty
    assert answer.uncertainty <= 0.05 * answer.capacity
    assert not answer.limited_by_generator
    assert "failed" in answer.reason
    assert len(s.judgements) <= policy.max_rates


def test_a_generator_that_falls_behind_stops_the_search_and_says_so():
    answer, s = search(system(50_000, lag_from=8_000), cap.Policy(start=1000))
    assert answer.limited_by_generator
    assert answer.capacity == 4000  # 1000, 2000, 4000 passed; 8000 was void
    assert "load generator" in answer.reason
    assert s.judgements[-1].void


def test_latency_over_the_target_fails_even_when_the_system_keeps_up():
    j = cap.judge([cap.Trial(100, 0, 1.5, 100, 0.0, False)], cap.Policy(target_ms=1.0))
    assert not j.passed and not j.void and "over the 1 ms target" in j.reason


def test_the_median_of_the_repetitions_decides():
    trials = [cap.Trial(100, r, x, 100, 0.0, False) for r, x in enumerate([0.5, 2.0, 0.6])]
    assert cap.judge(trials, cap.Policy(target_ms=1.0)).passed


def test_when_nothing_passes_the_answer_says_so():
    answer, _ = search(system(5.0), cap.Policy(start=1000, min_rate=10))
    assert answer.capacity is None and "no rate" in answer.reason


def test_one_starved_trial_among_three_is_noise_not_a_void_rate():
    trials = [cap.Trial(100, 0, 0.3, 100, 0.1, False), cap.Trial(100, 1, 4.0, 100, 3.5, True),
              cap.Trial(100, 2, 0.4, 100, 0.1, False)]
    j = cap.judge(trials, cap.Policy(target_ms=1.0))
    assert j.passed and not j.void
    trials[2] = cap.Trial(100, 2, 4.0, 100, 3.5, True)
    assert cap.judge(trials, cap.Policy(target_ms=1.0)).void


def test_a_saturated_system_that_backs_up_the_client_fails_rather_than_voids():
    # 600/s offered to a link good for 578/s: latency 657 ms, the client's sends wait
    # for a full socket (2.4 ms late), and most of the requests were not answered in time
    trials = [cap.Trial(600, 1, 657.0, 480, 2.4, True)]
    j = cap.judge(trials, cap.Policy(target_ms=20.0))
    assert not j.passed and not j.void


def test_each_rate_gets_the_verdict_its_judgement_says():
    policy = cap.Policy(target_ms=1.0)
    passed = cap.judge([system(5_000)(1_000, r) for r in range(3)], policy)
    failed = cap.judge([system(5_000)(8_000, r) for r in range(3)], policy)
    void = cap.judge([system(50_000, lag_from=1_000)(8_000, r) for r in range(3)], policy)
    assert (passed.verdict, failed.verdict, void.verdict) == (
        cap.Verdict.PASS, cap.Verdict.FAIL, cap.Verdict.VOID)
    assert [str(v) for v in cap.Verdict] == ["pass", "fail", "void", "?"]  # as stored
