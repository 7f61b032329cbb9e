"""2^k r factorial designs, checked against Jain's worked examples (ch. 17 and 18)."""

import random

import numpy as np
import pytest

from cachelab.analysis.errors import AnalysisError
from cachelab.analysis.factorial import analyse, code_levels, effect_columns, sign_table
from cachelab.errors import UserError

# Jain, Table 18.1: the memory-cache study, a 2^2 3 design. A = memory (4M/16M words),
# B = cache (1K/2K words); three repetitions per combination.
JAIN_A = ["4M"] * 3 + ["16M"] * 3 + ["4M"] * 3 + ["16M"] * 3
JAIN_B = ["1K"] * 6 + ["2K"] * 6
JAIN_Y = [15, 18, 12, 45, 48, 51, 25, 28, 19, 75, 75, 81]


def test_sign_table_for_two_factors_is_jains():
    # Rows in standard order (A alternates fastest), columns I, A, B, AB.
    assert sign_table(2).tolist() == [
        [1, -1, -1, 1],
        [1, 1, -1, -1],
        [1, -1, 1, -1],
        [1, 1, 1, 1],
    ]


def test_effects_are_listed_in_jains_order():
    result = analyse({"A": [-1, 1] * 4, "B": [-1, -1, 1, 1] * 2, "C": [-1] * 4 + [1] * 4},
                     [1.0] * 8)
    assert [e.name for e in result.effects] == ["I", "A", "B", "C", "AB", "AC", "BC", "ABC"]
    assert effect_columns(2) == [(), (0,), (1,), (0, 1)]


def test_jain_memory_cache_2_2_3_design():
    result = analyse({"A": JAIN_A, "B": JAIN_B}, JAIN_Y)
    # Cell means: (15+18+12)/3 = 15, (45+48+51)/3 = 48, (25+28+19)/3 = 24, (75+75+81)/3 = 77.
    # q_I = (15+48+24+77)/4 = 41, q_A = (-15+48-24+77)/4 = 21.5,
    # q_B = (-15-48+24+77)/4 = 9.5, q_AB = (15-48-24+77)/4 = 5.
    estimates = {e.name: e.estimate for e in result.effects}
    assert estimates == pytest.approx({"I": 41, "A": 21.5, "B": 9.5, "AB": 5})
    # SS = 2^2 * 3 * q^2: 12 * 462.25 = 5547, 12 * 90.25 = 1083, 12 * 25 = 300.
    assert result.effect("A").ss == pytest.approx(5547)
    assert result.effect("B").ss == pytest.approx(1083)
    assert result.effect("AB").ss == pytest.approx(300)
    assert result.effect("I").ss is None
    # SSE: cell by cell (0+9+9) + (9+0+9) + (1+16+25) + (4+4+16) = 102; SST = 7032
    # = 5547 + 1083 + 300 + 102.
    assert result.sse == pytest.approx(102)
    assert result.sst == pytest.approx(7032)
    # Variation explained: 5547/7032 = 78.88%, 15.40%, 4.27%, error 1.45%.
    assert result.effect("A").variation_pct == pytest.approx(78.882, abs=1e-3)
    assert result.effect("B").variation_pct == pytest.approx(15.401, abs=1e-3)
    assert result.effect("AB").variation_pct == pytest.approx(4.266, abs=1e-3)
    assert result.error_pct == pytest.approx(1.451, abs=1e-3)
    # s_e = sqrt(102 / 8) = 3.5707, s_q = s_e / sqrt(12) = 1.0308; t[0.95; 8] = 1.860
    # (Jain's Table A.4), so q -/+ 1.917: A in (19.58, 23.42), AB in (3.08, 6.92).
    assert result.replications == 3
    assert result.dof == 8
    assert result.t_quantile == pytest.approx(1.860, abs=5e-4)
    half = result.t_quantile * (102 / 8) ** 0.5 / 12**0.5
    assert half == pytest.approx(1.917, abs=5e-4)
    for e in result.effects:
        assert e.ci == pytest.approx((e.estimate - half, e.estimate + half))
        assert e.significant is True
    assert result.levels == {"A": ("4M", "16M"), "B": ("1K", "2K")}


def test_order_of_runs_does_not_matter():
    # Coded -1/+1, so the coding cannot depend on which label comes first.
    a = [{"4M": -1, "16M": 1}[v] for v in JAIN_A]
    b = [{"1K": -1, "2K": 1}[v] for v in JAIN_B]
    runs = list(zip(a, b, JAIN_Y, strict=True))
    random.Random(5).shuffle(runs)
    shuffled = analyse({"A": [r[0] for r in runs], "B": [r[1] for r in runs]},
                       [r[2] for r in runs])
    original = analyse({"A": JAIN_A, "B": JAIN_B}, JAIN_Y)
    assert [e.estimate for e in shuffled.effects] == pytest.approx(
        [e.estimate for e in original.effects])
    assert shuffled.sse == pytest.approx(original.sse)


def test_single_replication_has_no_intervals():
    # Jain, Example 17.1: y = 15, 45, 25, 75 gives q = 40, 20, 10, 5; SST = 2100 split
    # 1600 (76.2%), 400 (19.0%), 100 (4.8%).
    result = analyse({"A": [-1, 1, -1, 1], "B": [-1, -1, 1, 1]}, [15, 45, 25, 75])
    assert [e.estimate for e in result.effects] == pytest.approx([40, 20, 10, 5])
    assert result.sst == pytest.approx(2100)
    assert [e.variation_pct for e in result.effects[1:]] == pytest.approx(
        [100 * 1600 / 2100, 100 * 400 / 2100, 100 * 100 / 2100])
    assert result.sse == 0
    assert result.error_pct is None and result.t_quantile is None
    assert all(e.ci is None and e.significant is None for e in result.effects)


def test_three_factor_model_recovers_its_coefficients():
    # y = 1 + 2 x_A + 3 x_B x_C exactly, so q_I = 1, q_A = 2, q_BC = 3, the rest 0.
    levels = [(a, b, c) for c in (-1, 1) for b in (-1, 1) for a in (-1, 1)]
    y = [1 + 2 * a + 3 * b * c for a, b, c in levels]
    result = analyse({"A": [x[0] for x in levels], "B": [x[1] for x in levels],
                      "C": [x[2] for x in levels]}, y)
    assert {e.name: e.estimate for e in result.effects} == pytest.approx(
        {"I": 1, "A": 2, "B": 0, "C": 0, "AB": 0, "AC": 0, "BC": 3, "ABC": 0})


def test_sums_of_squares_add_up_to_sst():
    rng = np.random.default_rng(7)
    levels = [(a, b, c) for c in (-1, 1) for b in (-1, 1) for a in (-1, 1)] * 4
    y = rng.normal(10, 3, size=len(levels))
    result = analyse({"A": [x[0] for x in levels], "B": [x[1] for x in levels],
                      "C": [x[2] for x in levels]}, y, confidence=0.95)
    assert sum(e.ss for e in result.effects[1:]) + result.sse == pytest.approx(result.sst)
    assert sum(e.variation_pct for e in result.effects[1:]) + result.error_pct == \
        pytest.approx(100)
    assert result.dof == 8 * 3
    assert result.t_quantile == pytest.approx(2.064, abs=5e-4)  # t[0.975; 24]


def test_numeric_levels_code_the_smaller_as_minus_one():
    codes, labels = code_levels("W", ["32", "8", "32", "8"])
    assert labels == ("8", "32")
    assert codes.tolist() == [1, -1, 1, -1]
    codes, labels = code_levels("G", ["multi", "single", "single"])
    assert labels == ("multi", "single")
    assert codes.tolist() == [-1, 1, 1]
    assert code_levels("A", ["+1", "-1"])[1] == ("-1", "+1")


def test_a_factor_with_three_levels_is_refused():
    with pytest.raises(AnalysisError, match="factor 'A' has 3 level.*exactly two"):
        analyse({"A": [1, 2, 3, 1]}, [1, 2, 3, 4])


def test_a_factor_with_one_level_is_refused():
    with pytest.raises(AnalysisError, match="factor 'B' has 1 level"):
        analyse({"A": [-1, 1], "B": [1, 1]}, [1, 2])


def test_missing_combination_is_named():
    with pytest.raises(AnalysisError, match=r"combination A=\+1, B=\+1 has no runs"):
        analyse({"A": ["-1", "+1", "-1"], "B": ["-1", "-1", "+1"]}, [1, 2, 3])


def test_unequal_repetitions_are_named():
    a = JAIN_A[:-1]
    b = JAIN_B[:-1]
    with pytest.raises(AnalysisError, match="unbalanced design.*A=16M, B=2K has 2") as info:
        analyse({"A": a, "B": b}, JAIN_Y[:-1])
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)


def test_colliding_effect_names_are_refused():
    with pytest.raises(AnalysisError, match="'AB'"):
        analyse({"A": [-1, 1] * 4, "B": [-1, -1, 1, 1] * 2, "AB": [-1] * 4 + [1] * 4}, [0] * 8)


def test_columns_of_different_lengths_are_refused():
    with pytest.raises(AnalysisError, match="factor 'B' has 3 values but there are 4 runs"):
        analyse({"A": [-1, 1, -1, 1], "B": [-1, -1, 1]}, [1, 2, 3, 4])


def test_constant_response_explains_nothing():
    result = analyse({"A": [-1, 1, -1, 1]}, [5, 5, 5, 5])
    assert result.sst == 0
    assert result.effect("A").variation_pct == 0
    assert result.effect("A").significant is False
