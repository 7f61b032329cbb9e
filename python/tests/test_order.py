"""Run order: permutations, reproducible from the seed, the interleaved and sweep
layouts."""

import pytest

from cachelab.spec import order


def test_randomized_is_a_permutation_reproducible_from_its_seed():
    a = order.plan(range(6), 3, "randomized", seed=42)
    assert sorted(a) == [(p, r) for p in range(6) for r in (1, 2, 3)]
    assert a == order.plan(range(6), 3, "randomized", seed=42)
    assert a != order.plan(range(6), 3, "randomized", seed=43)
    assert a != sorted(a)


def test_sweep_keeps_the_file_order_and_interleaved_goes_repetition_by_repetition():
    assert order.plan([0, 1], 2, "sweep", 1) == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert order.plan([0, 1, 2], 2, "interleaved", 1) == [
        (0, 1), (1, 1), (2, 1), (0, 2), (1, 2), (2, 2)]


def test_extra_rounds_are_drawn_per_round():
    wanting = [(0, 4), (1, 4), (2, 4), (3, 4), (4, 4)]
    first = order.extra_round(wanting, "randomized", 7, 1)
    assert sorted(first) == wanting
    assert first == order.extra_round(wanting, "randomized", 7, 1)
    assert order.extra_round(wanting, "sweep", 7, 1) == wanting


def test_an_unknown_order_is_an_error():
    with pytest.raises(ValueError):
        order.plan([0], 1, "alphabetical", 1)
