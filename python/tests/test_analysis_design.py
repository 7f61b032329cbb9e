"""Finding 2^k r designs in a sweep (pure), and the residuals of a fitted design."""

import numpy as np
import pytest

from cachelab.analysis import design, factorial
from cachelab.analysis.errors import AnalysisError

FACTORS = ["workload.ratio", "middleware.workers", "load.clients"]


def runs_of(points, reps=2, unsteady=(), extra=()):
    """Runs of the given points (factor dicts), `reps` each; (point, rep) pairs in
    `unsteady` are unsteady, points in `extra` get one more run."""
    out = []
    for i, f in enumerate(points):
        for rep in range(1, reps + 1 + (i in extra)):
            out.append(design.Run(i, rep, f, (i, rep) not in unsteady,
                                  {"throughput": 1000.0 * (i + 1) + rep, "response_ms": 0.1}))
    return out


def sweep(ratios=("0:1", "1:0"), workers=(8, 32), clients=(1, 4)):
    return [{"workload.ratio": r, "middleware.workers": w, "load.clients": c}
            for r in ratios for w in workers for c in clients]


def test_workload_factors_split_the_runs_into_one_design_each():
    found = design.plan(FACTORS, runs_of(sweep()))
    assert found.factors == ("middleware.workers", "load.clients")
    assert found.grouping == ("workload.ratio",)
    assert [d.label for d in found.designs] == ["workload.ratio=0:1", "workload.ratio=1:0"]
    first = found.designs[0]
    assert first.replications == 2 and first.notes == ()
    assert first.letters == {"A": "middleware.workers", "B": "load.clients"}
    assert first.columns() == {"A": ["8", "8", "8", "8", "32", "32", "32", "32"],
                               "B": ["1", "1", "4", "4", "1", "1", "4", "4"]}
    assert first.response("throughput")[:3] == [1001.0, 1002.0, 2001.0]
    assert (found.runs, found.steady_runs) == (16, 16)


def test_where_fixes_a_workload_and_names_may_be_shortened():
    found = design.plan(FACTORS, runs_of(sweep()), where={"ratio": "1:0"},
                        factors=["clients", "workers"])
    assert [d.label for d in found.designs] == ["all runs"]
    assert found.designs[0].letters == {"A": "load.clients", "B": "middleware.workers"}
    with pytest.raises(AnalysisError, match=r"no run has workload.ratio=2:1 \(levels: 0:1, 1:0"):
        design.plan(FACTORS, runs_of(sweep()), where={"ratio": "2:1"})
    with pytest.raises(AnalysisError, match="'threads' is not a factor"):
        design.plan(FACTORS, runs_of(sweep()), factors=["threads"])
    with pytest.raises(AnalysisError, match="could be any of servers.count, middleware.count"):
        design.resolve("count", ["servers.count", "middleware.count"])


def test_with_only_workload_factors_they_are_the_design():
    points = [{"workload.ratio": r, "workload.data_size": s}
              for r in ("0:1", "1:0") for s in (64, 4096)]
    found = design.plan(["workload.ratio", "workload.data_size"], runs_of(points))
    assert found.factors == ("workload.ratio", "workload.data_size") and found.grouping == ()


def test_a_factor_with_three_levels_is_not_a_design():
    with pytest.raises(AnalysisError, match=r"not a 2\^k design: load.clients has 3 level\(s\) "
                                            r"\(1, 4, 16\)"):
        design.plan(FACTORS, runs_of(sweep(clients=(1, 4, 16))))


def test_unsteady_runs_are_left_out_and_r_is_the_smallest_count():
    runs = runs_of(sweep(ratios=("0:1",)), reps=3, unsteady={(1, 2)}, extra={3})
    (d,) = design.plan(FACTORS, runs).designs
    assert d.replications == 2
    assert d.notes == ("1 unsteady run(s) left out: #2 rep 2",
                       "r = 2: the first 2 steady runs of each point are used; "
                       "#1 has 1 more, #3 has 1 more, #4 has 2 more")
    assert [(r.point, r.repetition) for r in d.runs] == [
        (0, 1), (0, 2), (1, 1), (1, 3), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert all(r.steady for r in d.runs)


def test_a_group_missing_a_combination_or_steady_runs_is_skipped_with_the_reason():
    runs = [r for r in runs_of(sweep()) if not (r.factors["workload.ratio"] == "1:0"
                                                and r.factors["load.clients"] == 4
                                                and r.factors["middleware.workers"] == 32)]
    found = design.plan(FACTORS, runs)
    assert [d.label for d in found.designs] == ["workload.ratio=0:1"]
    assert found.skipped == ("workload.ratio=1:0: 3 of the 4 combinations have runs",)
    runs = runs_of(sweep(ratios=("0:1",)), unsteady={(2, 1), (2, 2)})
    found = design.plan(FACTORS, runs)
    assert found.designs == () and found.skipped == ("all runs: point #3 has no steady run",)


# Jain, Table 18.1 (as in test_analysis_factorial.py): cell means 15, 48, 24, 77.
JAIN_A = ["4M"] * 3 + ["16M"] * 3 + ["4M"] * 3 + ["16M"] * 3
JAIN_B = ["1K"] * 6 + ["2K"] * 6
JAIN_Y = [15, 18, 12, 45, 48, 51, 25, 28, 19, 75, 75, 81]


def test_residuals_of_jains_memory_cache_design():
    columns = {"A": JAIN_A, "B": JAIN_B}
    result = factorial.analyse(columns, JAIN_Y)
    predicted, residual = factorial.residuals(result, columns, JAIN_Y)
    # y^ = 41 + 21.5 xA + 9.5 xB + 5 xA xB: 41 - 21.5 - 9.5 + 5 = 15 for (4M, 1K), then 48,
    # 24, 77: each combination's mean. Residuals are the runs minus their mean.
    assert predicted.tolist() == pytest.approx([15] * 3 + [48] * 3 + [24] * 3 + [77] * 3)
    assert residual.tolist() == pytest.approx([0, 3, -3, -3, 0, 3, 1, 4, -5, -2, -2, 4])
    # The squared residuals add up to SSE.
    assert float(np.sum(residual**2)) == pytest.approx(result.sse)


def test_normal_quantiles_are_at_i_minus_half_over_n():
    # n = 4: quantiles at 0.125, 0.375, 0.625, 0.875: -1.1503, -0.3186, 0.3186, 1.1503.
    assert factorial.normal_quantiles(4).tolist() == pytest.approx(
        [-1.1503, -0.3186, 0.3186, 1.1503], abs=1e-4)
    with pytest.raises(AnalysisError):
        factorial.normal_quantiles(0)


def test_include_unsteady_keeps_flagged_runs_in_the_design():
    runs = runs_of(sweep(ratios=("0:1",)), reps=2, unsteady={(1, 2), (2, 1), (2, 2)})
    found = design.plan(FACTORS, runs)
    assert found.designs == () and found.skipped == ("all runs: point #3 has no steady run",)
    (d,) = design.plan(FACTORS, runs, include_unsteady=True).designs
    assert d.replications == 2
    assert d.notes == ("3 unsteady run(s) included (--include-unsteady): #2 rep 2, #3 rep 1, "
                       "#3 rep 2",)
    assert [(r.point, r.repetition) for r in d.runs] == [
        (p, rep) for p in range(4) for rep in (1, 2)]
