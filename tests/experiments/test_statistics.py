"""The two reductions every study verdict uses: mean +- population std, and "separated"."""

import math
import random

import pytest

from gradlab.experiments.statistics import mean_std, separated


def _mean_pstd_loop(values):
    kept = [v for v in values if v == v]  # NaN is the only value unequal to itself
    mean = sum(kept) / len(kept)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in kept) / len(kept))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_mean_std_is_the_population_std_of_the_finite_seeds(seed):
    rng = random.Random(seed)
    values = [rng.uniform(-3, 3) for _ in range(rng.randint(2, 7))]
    with_nans = [*values[:1], math.nan, *values[1:], math.nan]
    assert mean_std(with_nans) == pytest.approx(_mean_pstd_loop(values), abs=1e-12)


def test_mean_std_of_one_seed_has_no_spread_and_of_none_is_nan():
    assert mean_std([0.25]) == (0.25, 0.0)
    assert mean_std([3]) == (3.0, 0.0)  # integers are read as floats
    for nothing in ([], [math.nan], [math.nan, math.nan]):
        mean, std = mean_std(nothing)
        assert math.isnan(mean) and math.isnan(std)


def test_two_seeds_use_the_population_not_the_sample_std():
    # 1 and 3: population std 1, sample std sqrt(2)
    assert mean_std([1.0, 3.0]) == (2.0, 1.0)


def test_separated_needs_a_gap_larger_than_the_summed_spreads_in_either_order():
    wide, point = [0.0, 2.0], [2.0, 2.0]  # 1 +- 1 and 2 +- 0: gap 1 equals the spread
    assert not separated(wide, point) and not separated(point, wide)
    beyond = [2.25, 2.25]  # gap 1.25 > 1
    assert separated(wide, beyond) and separated(beyond, wide)
    below = [-0.25, -0.25]  # the gap counts in either direction
    assert separated(wide, below) and separated(below, wide)
    # Both spreads count: 1 +- 1 against 3.5 +- 1 (gap 2.5 > 2), then 3.5 +- 2 (gap 2.5 < 3)
    assert separated(wide, [2.5, 4.5])
    assert not separated(wide, [1.5, 5.5])


def test_separated_ignores_nan_seeds_and_never_separates_an_empty_setting():
    assert separated([0.0, math.nan, 2.0], [2.25, math.nan])
    assert not separated([math.nan], [5.0, 5.0])
    assert not separated([5.0, 5.0], [])
