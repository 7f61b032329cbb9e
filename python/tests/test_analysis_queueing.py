"""M/M/1 and M/M/m against values worked out by hand, and Erlang C at large m."""

import math

import pytest
from scipy import stats
from scipy.special import logsumexp

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.queueing import erlang_b, erlang_c, mm1, mmm
from cachelab.errors import UserError


def test_mm1_by_hand():
    # lambda = 800/s, mu = 1000/s: rho = 0.8, R = 1 / (1000 - 800) = 5 ms,
    # W = rho / (mu - lambda) = 4 ms, N = rho / (1 - rho) = 4, Nq = rho^2 / (1 - rho) = 3.2.
    m = mm1(800, 1000)
    assert m.utilization == pytest.approx(0.8)
    assert m.p_queue == pytest.approx(0.8)
    assert m.response_time == pytest.approx(0.005)
    assert m.waiting_time == pytest.approx(0.004)
    assert m.mean_in_system == pytest.approx(4.0)
    assert m.mean_in_queue == pytest.approx(3.2)


def test_erlang_b_and_c_for_two_servers_by_hand():
    # m = 2, a = lambda / mu = 1 (rho = 0.5).
    # Erlang B recursion: B(1) = 1*1 / (1 + 1) = 1/2, B(2) = 1 * 1/2 / (2 + 1/2) = 1/5.
    # Textbook B: (a^2/2!) / (1 + a + a^2/2!) = 0.5 / 2.5 = 1/5.
    # C = B / (1 - rho (1 - B)) = (1/5) / (1 - 0.5 * 4/5) = (1/5) / (3/5) = 1/3.
    # Textbook C: (a^2/2! / (1 - rho)) / (1 + a + a^2/2! / (1 - rho)) = 1 / (1 + 1 + 1) = 1/3.
    assert erlang_b(2, 1.0) == pytest.approx(1 / 5)
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)
    # W = C / (m mu - lambda) = (1/3) / (2 - 1) = 1/3, R = W + 1/mu = 4/3,
    # Nq = lambda W = 1/3, N = lambda R = 4/3.
    m = mmm(1.0, 1.0, 2)
    assert m.utilization == pytest.approx(0.5)
    assert m.p_queue == pytest.approx(1 / 3)
    assert m.waiting_time == pytest.approx(1 / 3)
    assert m.response_time == pytest.approx(4 / 3)
    assert m.mean_in_queue == pytest.approx(1 / 3)
    assert m.mean_in_system == pytest.approx(4 / 3)


def test_erlang_c_for_three_servers_by_hand():
    # m = 3, a = 2 (lambda = 2, mu = 1, rho = 2/3). Terms a^k/k!: 1, 2, 2; a^3/3! = 4/3,
    # divided by (1 - rho) = 1/3 gives 4. C = 4 / (1 + 2 + 2 + 4) = 4/9.
    # W = (4/9) / (3 - 2) = 4/9, R = 13/9, Nq = 2 * 4/9 = 8/9, N = 2 * 13/9 = 26/9.
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9)
    m = mmm(2.0, 1.0, 3)
    assert m.waiting_time == pytest.approx(4 / 9)
    assert m.response_time == pytest.approx(13 / 9)
    assert m.mean_in_queue == pytest.approx(8 / 9)
    assert m.mean_in_system == pytest.approx(26 / 9)


def test_one_server_mmm_is_mm1():
    assert mmm(300, 1000, 1) == mm1(300, 1000)


@pytest.mark.parametrize(("servers", "load"), [(128, 120.0), (128, 64.0), (1000, 990.0)])
def test_erlang_b_at_large_m_matches_the_poisson_form(servers, load):
    # Erlang B is the Poisson(a) pmf at m over its cdf at m, which scipy computes without
    # the recursion; a^m / m! itself overflows a float here.
    expected = stats.poisson.pmf(servers, load) / stats.poisson.cdf(servers, load)
    assert erlang_b(servers, load) == pytest.approx(expected, rel=1e-9)


def test_erlang_c_at_128_servers_matches_the_log_space_sum():
    m, a = 128, 120.0
    rho = a / m
    log_terms = [k * math.log(a) - math.lgamma(k + 1) for k in range(m)]
    log_last = m * math.log(a) - math.lgamma(m + 1) - math.log(1 - rho)
    expected = math.exp(log_last - logsumexp([*log_terms, log_last]))
    assert erlang_c(m, a) == pytest.approx(expected, rel=1e-9)
    assert 0 < erlang_c(m, a) < 1


def test_erlang_c_falls_as_servers_are_added_at_the_same_utilisation():
    values = [erlang_c(m, 0.9 * m) for m in (1, 2, 4, 16, 64, 128)]
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(0.9)


@pytest.mark.parametrize(("lam", "mu", "m"), [(1000, 1000, 1), (1200, 1000, 1), (9, 2, 4)])
def test_unstable_queues_are_refused(lam, mu, m):
    with pytest.raises(AnalysisError, match="unstable.*>= 1") as info:
        mmm(lam, mu, m)
    assert isinstance(info.value, ValueError) and isinstance(info.value, UserError)


@pytest.mark.parametrize(("lam", "mu", "name"), [
    (0, 1, "arrival rate"), (-1, 1, "arrival rate"), (1, 0, "service rate"),
    (1, -2, "service rate"), (math.nan, 1, "arrival rate"), (1, math.inf, "service rate"),
])
def test_non_positive_rates_are_refused(lam, mu, name):
    with pytest.raises(AnalysisError, match=name):
        mm1(lam, mu)


@pytest.mark.parametrize("servers", [0, -3, 2.5, True])
def test_bad_server_counts_are_refused(servers):
    with pytest.raises(AnalysisError, match="servers"):
        mmm(1, 1, servers)
