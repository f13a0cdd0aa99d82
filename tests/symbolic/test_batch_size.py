"""The batch-size conjecture is decided from a measurement dict: rising, flat, noisy, saturated."""

import warnings

import numpy as np
import pytest

from gradlab.symbolic import Form
from gradlab.symbolic.batch_size import FLAT_BAND, SATURATED, decide_trend, setting_trend
from gradlab.symbolic.supplementary_claims import check_batch_size_conjecture

SIZES = [16, 32, 64, 128, 256]


def measurement(rows_by_setting):
    return {"batch_sizes": SIZES, "per_class": 4, "seeds": [0, 1, 2],
            "settings": {name: {"P": rows} for name, rows in rows_by_setting.items()}}


def rows(start, stop, noise, seed=0):
    rng = np.random.default_rng(seed)
    base = np.linspace(start, stop, len(SIZES))
    return [list(base + rng.normal(scale=noise, size=len(SIZES))) for _ in range(3)]


def test_rising_in_every_setting_holds_and_its_mutants_are_killed():
    data = measurement({"fixed_untrained": rows(0.30, 0.45, 0.005),
                        "trained_at_m": rows(0.2, 0.3, 0.005, 1)})
    assert decide_trend(data, "rises")[0] == "holds"
    assert decide_trend(data, "falls")[0] == "fails"
    assert decide_trend(data, "flat")[0] == "fails"
    verdict = check_batch_size_conjecture(Form({"P over m": "rises"}), measurement=data)
    assert verdict.verdict == "holds" and "fixed_untrained: rises" in verdict.detail


def test_flat_setting_refutes_the_conjecture():
    data = measurement({"fixed_untrained": rows(0.40, 0.401, 0.001),
                        "trained_at_m": rows(0.2, 0.3, 0.005)})
    assert setting_trend(data["settings"]["fixed_untrained"]["P"])[0] == "flat"
    assert decide_trend(data, "rises")[0] == "fails"


def test_falling_refutes_it():
    data = measurement({"fixed_trained": rows(0.5, 0.3, 0.005)})
    assert decide_trend(data, "rises")[0] == "fails"


def test_noise_larger_than_the_trend_is_inconclusive():
    data = measurement({"fixed_trained": rows(0.30, 0.32, 0.05, 3)})
    assert setting_trend(data["settings"]["fixed_trained"]["P"])[0] == "unclear"
    assert decide_trend(data, "rises")[0] == "inconclusive"
    assert decide_trend(data, "falls")[0] == "inconclusive"


@pytest.mark.parametrize("level", [1.0, 0.0])
def test_saturated_p_says_nothing(level):
    data = measurement({"fixed_untrained": [[level] * len(SIZES)] * 3})
    assert decide_trend(data, "rises")[0] == "inconclusive"


def test_one_seed_has_no_spread():
    assert setting_trend([[0.1, 0.2, 0.3]])[0] == "unclear"


def test_without_a_measurement_the_verdict_says_it_was_not_measured():
    verdict = check_batch_size_conjecture(Form({"P over m": "rises"}))
    assert verdict.verdict == "inconclusive"
    assert verdict.detail.startswith("not measured: ")


def test_the_seeds_pair_the_two_ends():
    # Every seed falls by 0.05 while the seeds sit 0.1 apart: unpaired, the seed spread (0.1)
    # hides the change; paired, every seed shows it.
    data = [[0.30 + 0.1 * s, 0.25 + 0.1 * s] for s in range(3)]
    data[1][1] -= 0.004
    assert setting_trend(data)[0] == "falls"
    data[0][1], data[0][0] = data[0][0], data[0][1]  # one seed now rises
    assert setting_trend(data)[0] == "unclear"


def test_a_significant_change_inside_the_flat_band_is_flat():
    data = [[0.300, 0.303], [0.310, 0.3131], [0.290, 0.2929]]
    assert setting_trend(data)[0] == "flat"


# --- the decision's edges, one by one (mutation-testing survivors) ---------------------------


def test_a_measurement_without_settings_is_inconclusive():
    assert decide_trend({}) == ("inconclusive", "the measurement holds no setting")


def test_the_detail_names_the_sizes_and_the_per_class_count_when_given():
    data = measurement({"fixed_trained": rows(0.5, 0.3, 0.005)})
    assert decide_trend(data)[1].startswith("m = 16..256, 4 per class: fixed_trained: falls (")
    del data["per_class"]
    assert decide_trend(data)[1].startswith("m = 16..256, ? per class: fixed_trained: falls (")
    del data["batch_sizes"]
    assert decide_trend(data)[1].startswith("fixed_trained: falls (mean P ")


@pytest.mark.parametrize("p_per_seed", [[[0.1]], [[0.1], [0.2]], [0.1, 0.2]])
def test_fewer_than_two_batch_sizes_say_so(p_per_seed):
    shape = np.asarray(p_per_seed).shape
    assert setting_trend(p_per_seed) == (
        "unclear", f"needs P at >= 2 batch sizes per seed; got shape {shape}"
    )  # fmt: skip


def test_the_detail_counts_seeds_not_batch_sizes():
    two_seeds = [[0.30, 0.32, 0.34, 0.40], [0.31, 0.33, 0.35, 0.42]]
    trend, why = setting_trend(two_seeds)
    assert trend == "rises" and why.endswith("2 seeds)")
    assert "standard error 0.005 " in why  # changes 0.10, 0.11: std 0.00707 / sqrt(2)


def test_one_seed_says_it_has_no_spread():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy "degrees of freedom <= 0" on the way
        trend, why = setting_trend([[0.1, 0.2, 0.3]])
    assert trend == "unclear" and why.endswith("1 seeds): no seed spread")


@pytest.mark.parametrize("level", [1 - SATURATED, SATURATED])
def test_saturation_includes_its_threshold(level):
    trend, why = setting_trend([[level, level]] * 3)
    assert trend == "unclear" and why.endswith("the measurement cannot show a trend")


def test_a_change_of_exactly_the_flat_band_is_neither_a_trend_nor_flat():
    # first and last P differ by exactly FLAT_BAND in every seed (0.01 - 0.0), no spread
    values = [[0.0, 0.5, FLAT_BAND]] * 3
    assert setting_trend(values)[0] == "unclear"


def test_a_small_change_with_a_large_spread_is_not_flat():
    values = [[0.30, 0.35], [0.30, 0.25], [0.30, 0.305]]  # mean change +0.0017, SE 0.029
    assert setting_trend(values)[0] == "unclear"


def test_the_default_prediction_is_the_seeds_rising_p():
    assert decide_trend(measurement({"fixed_trained": rows(0.3, 0.5, 0.005)}))[0] == "holds"
