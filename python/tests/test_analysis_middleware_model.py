"""M/M/1 and M/M/m beside the middleware's measurements, from stored lambda and mu only,
checked against values worked out by hand."""

import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.middleware_model import Measured, mm1_row, mmm_row, shares_cpus


def measured(**kw):
    base = dict(arrival_rate=3000.0, throughput=3000.0, service_time=0.001,
                queue_wait=0.0004, queue_length=1.2, workers=4)
    return Measured(**{**base, **kw})


def test_mmm_prediction_from_lambda_and_mu_by_hand():
    # lambda = 3000/s; S = 1 ms, so mu = 1000/s per worker; m = 4: a = 3, rho = 0.75.
    # Erlang C: (a^4/4!) / (1 - rho) = 3.375 / 0.25 = 13.5 over 1 + 3 + 4.5 + 4.5 + 13.5
    # = 26.5: C = 0.509434. Wq = C / (m mu - lambda) = 0.509434 / 1000 s = 0.509434 ms;
    # R = Wq + 1/mu = 1.509434 ms; Lq = lambda Wq = 1.528302.
    row = mmm_row(measured())
    assert (row.model, row.servers, row.service_rate) == ("M/M/m", 4, pytest.approx(1000))
    assert row.utilization == pytest.approx(0.75)
    assert row.queue_wait.predicted == pytest.approx(0.509434e-3, rel=1e-6)
    assert row.response_time.predicted == pytest.approx(1.509434e-3, rel=1e-6)
    assert row.queue_length.predicted == pytest.approx(1.528302, rel=1e-6)
    # Measured: Wq = 0.4 ms, R = Wq + S = 1.4 ms, Lq = 1.2; U = X S / m = 3 / 4.
    assert row.queue_wait.measured == pytest.approx(0.0004)
    assert row.response_time.measured == pytest.approx(0.0014)
    assert row.measured_utilization == pytest.approx(0.75)
    assert row.queue_wait.ratio == pytest.approx(0.509434 / 0.4, rel=1e-6)
    assert row.response_time.ratio == pytest.approx(1.509434 / 1.4, rel=1e-6)
    assert row.queue_length.ratio == pytest.approx(1.528302 / 1.2, rel=1e-6)
    assert row.assumptions == ()


def test_two_middlewares_pool_their_workers():
    # 2 x 2 workers are m = 4 as above, but the two queues are separate.
    row = mmm_row(measured(workers=2, middlewares=2))
    assert row.servers == 4 and row.queue_wait.predicted == pytest.approx(0.509434e-3,
                                                                         rel=1e-6)
    assert row.assumptions == ("2 middlewares have a queue each; the model pools them",)


def test_mm1_takes_mu_from_the_highest_throughput():
    # lambda = 800, mu = 1000 (the configuration's best throughput): rho = 0.8,
    # R = 1 / (mu - lambda) = 5 ms, Wq = rho / (mu - lambda) = 4 ms, Lq = rho^2/(1-rho) = 3.2.
    row = mm1_row(measured(arrival_rate=800.0, throughput=800.0, workers=1), 1000.0)
    assert (row.model, row.servers) == ("M/M/1", 1)
    assert row.utilization == pytest.approx(0.8) and row.measured_utilization == 0.8
    assert row.response_time.predicted == pytest.approx(0.005)
    assert row.queue_wait.predicted == pytest.approx(0.004)
    assert row.queue_length.predicted == pytest.approx(3.2)


def test_an_unstable_model_has_no_prediction_and_says_why():
    row = mm1_row(measured(), 3000.0)
    assert not row.stable and row.response_time.predicted is None
    assert row.response_time.ratio is None
    assert row.assumptions[0] == "rho = 1.000 >= 1: the model has no steady state"


def test_the_assumptions_the_point_breaks_are_listed():
    row = mmm_row(measured(pipeline=4, closed_population=4, service_cv=0.3, shares_cpus=True,
                           arrival_rate=3300.0))
    assert row.assumptions == (
        "closed loop (N = 4): arrivals depend on the requests in the system, so they are "
        "not Poisson",
        "arrivals 3,300/s against completions 3,000/s: not in steady state",
        "the workers share CPUs with other processes",
        "--pipeline 4: a worker serves up to 4 requests at once, so m is not W and S "
        "includes the batch",
        "N = 4 requests for m = 4 workers: none can wait in the real system",
        "service time CV 0.30 (exponential: 1)",
    )


def test_bad_measurements_are_errors():
    with pytest.raises(AnalysisError, match="measured service time must be positive"):
        mmm_row(measured(service_time=0.0))


def test_cpu_sharing():
    assert shares_cpus((), ((0,), (1,)))
    assert shares_cpus((1,), ((0,), ()))
    assert shares_cpus((1,), ((0, 1),))
    assert not shares_cpus((1,), ((0,), (0, 2)))
