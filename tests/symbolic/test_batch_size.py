"""The batch-size decision rule on synthetic measurements: rising, falling, flat, noisy, saturated.

Every expectation comes from a t statistic computed by hand in the test (mean, sample standard
deviation and standard error of the per-seed changes, written out) against Student's t quantile
read from a printed table: t_(0.975, 2) = 4.303 and t_(0.975, 3) = 3.182.
"""

import inspect
import math
import warnings
from fractions import Fraction

import pytest
from scipy.stats import sem
from scipy.stats import t as student_t

from gradlab import GradlabError
from gradlab.symbolic import Form
from gradlab.symbolic.batch_size import (
    FLAT_BAND,
    SATURATED,
    conjecture_verdict,
    decide_trend,
    paired_t,
    part_trends,
    saturation,
    setting_name,
    setting_trend,
)
from gradlab.symbolic.supplementary_claims import check_batch_size_conjecture

TABLE_T = {2: 4.303, 3: 3.182}  # two-sided 5 %, from a printed table of Student's t


def by_hand(changes):
    """(mean, standard error, t) of per-seed changes, written out."""
    n = len(changes)
    mean = sum(changes) / n
    sd = math.sqrt(sum((c - mean) ** 2 for c in changes) / (n - 1))
    return mean, sd / math.sqrt(n), mean / (sd / math.sqrt(n))


def ends(changes, start=0.30):
    """P at two batch sizes per seed with the given per-seed changes (seeds 0.01 apart)."""
    return [[start + 0.01 * s, start + 0.01 * s + c] for s, c in enumerate(changes)]


def measurement(**settings):
    return {"batch_sizes": [16, 256], "per_class": 4, "seeds": [0, 1, 2],
            "data": "3-digit strings", "model": "a small CNN",
            "settings": {name: {"P": rows, "epochs": 1} for name, rows in settings.items()}}


RISING = [0.10, 0.11, 0.12]  # mean 0.11, sd 0.01: t = 0.11 / (0.01 / sqrt 3) = 19.05
FALLING = [-0.05, -0.06, -0.08]  # mean -0.0633, sd 0.0153: t = -7.18
FLAT = [0.001, -0.001, 0.002]  # mean 0.00067, se 0.00088: interval +-0.0038, inside +-0.01
NOISY = [0.10, -0.05, 0.02]  # mean 0.0233, se 0.0433: t = 0.54
BORDERLINE = [0.07, 0.12, 0.17]  # mean 0.12, sd 0.05: t = 4.157, above 3 but below 4.303


def test_the_t_statistic_matches_the_hand_computation():
    for changes in (RISING, FALLING, FLAT, NOISY, BORDERLINE):
        mean, error, t = by_hand(changes)
        test = paired_t(changes)
        assert test["mean"] == pytest.approx(mean, abs=1e-15)
        assert test["standard_error"] == pytest.approx(error, rel=1e-12)
        assert test["t"] == pytest.approx(t, rel=1e-12)
        assert test["df"] == 2
        assert test["critical"] == pytest.approx(TABLE_T[2], abs=5e-4)
    assert paired_t([0.1, 0.2, 0.3, 0.4])["critical"] == pytest.approx(TABLE_T[3], abs=5e-4)


@pytest.mark.parametrize(("changes", "trend"), [
    (RISING, "rises"), (FALLING, "falls"), (FLAT, "flat"), (NOISY, "unclear"),
    (BORDERLINE, "unclear"),
])  # fmt: skip
def test_each_trend_follows_from_its_t_statistic(changes, trend):
    mean, error, t = by_hand(changes)
    if trend in ("rises", "falls"):
        assert abs(t) > TABLE_T[2] and abs(mean) > FLAT_BAND
    elif trend == "flat":
        assert -FLAT_BAND < mean - TABLE_T[2] * error and mean + TABLE_T[2] * error < FLAT_BAND
    else:
        assert abs(t) < TABLE_T[2]
    assert setting_trend(ends(changes))[0] == trend


def test_three_standard_errors_are_not_enough_with_two_degrees_of_freedom():
    # t = 4.157: a rule of "3 standard errors" calls this a rise (p about 0.06 two-sided);
    # with df = 2 the 5 % threshold is 4.303. Four seeds with t = 5.63 clear df = 3's 3.182.
    assert by_hand(BORDERLINE)[2] > 3
    assert setting_trend(ends(BORDERLINE))[0] == "unclear"
    four = [0.07, 0.105, 0.135, 0.17]  # t = 5.63
    assert by_hand(four)[2] > TABLE_T[3]
    assert setting_trend(ends(four))[0] == "rises"


def test_a_significant_change_inside_the_flat_band_is_flat_not_a_trend():
    changes = [0.003, 0.0031, 0.0029]  # t = 52, but a change of 0.003 is flat for the claim
    assert by_hand(changes)[2] > TABLE_T[2]
    assert setting_trend(ends(changes))[0] == "flat"


def test_identical_changes_in_every_seed_have_infinite_t():
    trend, why = setting_trend(ends([0.05, 0.05, 0.05]))
    assert trend == "rises" and "t = inf" in why
    assert setting_trend(ends([0.0, 0.0, 0.0]))[0] == "flat"


@pytest.mark.parametrize("level", [1.0, 1 - SATURATED, 0.0, SATURATED])
def test_a_saturated_setting_is_uninformative_and_says_so(level):
    trend, why = setting_trend([[level, level]] * 3)
    assert trend == "saturated" and "uninformative" in why


def test_one_seed_has_no_spread():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy "degrees of freedom <= 0" on the way
        trend, why = setting_trend([[0.1, 0.2, 0.3]])
    assert trend == "unclear" and why.endswith("no seed spread, no t-test")


@pytest.mark.parametrize("p_per_seed", [[[0.1]], [[0.1], [0.2]], [0.1, 0.2]])
def test_fewer_than_two_batch_sizes_say_so(p_per_seed):
    trend, why = setting_trend(p_per_seed)
    assert trend == "unclear" and why.startswith("needs P at >= 2 batch sizes per seed")


# --- the outcome on the named setting -------------------------------------------------------


@pytest.mark.parametrize(("changes", "predicted", "outcome"), [
    (RISING, "rises", "reproduced"), (RISING, "falls", "not-reproduced"),
    (FALLING, "rises", "not-reproduced"), (FALLING, "falls", "reproduced"),
    (FLAT, "rises", "not-reproduced"), (FLAT, "flat", "reproduced"),
    (NOISY, "rises", "inconclusive"), (NOISY, "falls", "inconclusive"),
])  # fmt: skip
def test_every_outcome_on_the_protocol_setting(changes, predicted, outcome):
    got, detail = decide_trend(measurement(trained_at_m=ends(changes)), predicted)
    assert got == outcome
    assert detail.startswith("On networks fine-tuned at each m: 3-digit strings, a small CNN, "
                             "m = 16..256, one network trained per m for 1 epoch(s), 3 seeds: "
                             "P ")  # fmt: skip


def test_the_setting_is_named_with_its_optimizer_steps_when_measured():
    data = measurement(trained_at_m=ends(RISING))
    data["settings"]["trained_at_m"]["steps"] = [376, 6]
    assert decide_trend(data)[1].startswith(
        "On networks fine-tuned at each m: 3-digit strings, a small CNN, m = 16..256, one network "
        "trained per m for 1 epoch(s) (376 to 6 optimizer steps), 3 seeds: P rises ("
    )  # fmt: skip


def test_the_saturated_untrained_setting_does_not_block_a_rise():
    data = measurement(fixed_untrained=[[1.0, 1.0]] * 3, trained_at_m=ends(RISING))
    outcome, detail = decide_trend(data, "rises")
    assert outcome == "reproduced"
    assert "Context, not deciding: one untrained network at every m: saturated" in detail


def test_a_context_setting_that_disagrees_does_not_vote():
    data = measurement(fixed_trained=ends(FALLING), trained_at_m=ends(RISING))
    assert decide_trend(data, "rises")[0] == "reproduced"
    data = measurement(fixed_trained=ends(RISING), trained_at_m=ends(NOISY))
    assert decide_trend(data, "rises")[0] == "inconclusive"


def test_a_measurement_without_the_deciding_setting_is_inconclusive():
    assert decide_trend({}) == ("inconclusive", "the measurement holds no setting")
    outcome, detail = decide_trend(measurement(fixed_trained=ends(RISING)))
    assert outcome == "inconclusive"
    assert detail.startswith("the measurement lacks the deciding setting trained_at_m.")


def test_a_prediction_that_is_no_trend_is_refused():
    with pytest.raises(GradlabError, match="predicted must be 'rises', 'falls' or 'flat'; got"):
        decide_trend(measurement(trained_at_m=ends(RISING)), "up")


@pytest.mark.parametrize(("changes", "alpha"), [([0.1], 0.05), ([0.1, 0.2], 0.0)])
def test_paired_t_refuses_what_it_cannot_test(changes, alpha):
    with pytest.raises(GradlabError):
        paired_t(changes, alpha)


# --- the claim's verdict: not testable here, the miniature as context -----------------------


def test_the_conjecture_is_not_testable_here_whatever_the_miniature_shows():
    for changes in (RISING, FALLING, NOISY):
        verdict, detail = conjecture_verdict(measurement(trained_at_m=ends(changes)))
        assert verdict == "not-testable-here"
        assert detail.startswith("needs Stanford Online Products with a ResNet-50, one epoch")
        assert "`gradlab study p-vs-batch-size` runs that protocol" in detail  # where it can be
    verdict, detail = conjecture_verdict(None)
    assert verdict == "not-testable-here" and "`gradlab audit --measure`" in detail
    assert "`gradlab study p-vs-batch-size` runs that protocol" in detail


def test_the_detail_shows_the_miniatures_outcome_and_the_parts_of_p():
    rows = ends(RISING)
    diagonal = [[1 / 16, 1 / 256]] * 3  # 1/m: falls by 0.0586 in every seed
    data = measurement(trained_at_m=rows)
    data["settings"]["trained_at_m"]["P_diagonal"] = diagonal
    trends = part_trends(data)
    assert trends["P_diagonal"][0] == "falls"
    assert trends["P without the diagonal"][0] == "rises"  # changes 0.1586, 0.1686, 0.1786
    _, detail = conjecture_verdict(data)
    assert "(its outcome: reproduced)" in detail
    assert "the diagonal: falls (" in detail
    # the one part measured here is counted and its setting named; P without the diagonal is
    # listed after the parts, not counted among them
    assert (" P's parts on the networks fine-tuned at each m (shares of the m^2 entries; 1 of "
            "the 4 parts that add up to P), and P without the diagonal: the diagonal: falls (") \
        in detail
    for part in ("P_own_row_column", "P_positive_rows", "P_negative_rows"):
        data["settings"]["trained_at_m"][part] = diagonal
    _, detail = conjecture_verdict(data)
    assert " (shares of the m^2 entries; the 4 parts add up to P), and P without" in detail


def test_the_check_carries_the_forms_prediction():
    data = measurement(trained_at_m=ends(RISING))
    verdict = check_batch_size_conjecture(Form({"P over m": "falls"}), measurement=data)
    assert verdict.verdict == "not-testable-here"
    assert "(its outcome: not-reproduced)" in verdict.detail


SETTING_NAMES = {
    "nothing named": ({}, "trained_at_m", "networks fine-tuned at each m: data not named, model "
                      "not named, 0 seeds"),
    "a setting described by its training": (
        {"data": "digits", "model": "an MLP", "batch_sizes": [8, 16, 64], "seeds": [0, 1],
         "settings": {"fixed": {"training": "trained once at m = 32"}}}, "fixed",
        "fixed: digits, an MLP, m = 8..64, trained once at m = 32, 2 seeds"),
    "epochs with their optimizer steps": (
        {"data": "digits", "model": "an MLP", "seeds": [0],
         "settings": {"trained_at_m": {"epochs": 2, "steps": [40, 10]}}}, "trained_at_m",
        "networks fine-tuned at each m: digits, an MLP, one network trained per m for 2 epoch(s) "
        "(40 to 10 optimizer steps), 1 seeds"),
    "a setting the measurement lacks": (
        {"data": "digits", "model": "an MLP", "seeds": [0], "settings": {"other": {}}},
        "trained_at_m", "networks fine-tuned at each m: digits, an MLP, 1 seeds"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(SETTING_NAMES))
def test_a_setting_is_named_in_words_with_what_the_measurement_records(case):
    """The words a verdict quotes for its setting, written out: what is missing says so."""
    measurement, setting, expected = SETTING_NAMES[case]
    assert setting_name(measurement, setting) == expected


def test_a_verdict_names_its_setting_and_lists_the_others_as_context():
    rising, falling = [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]], [[0.4, 0.3], [0.42, 0.31]]
    measurement = {"data": "digits", "model": "an MLP", "seeds": [0, 1, 2],
                   "settings": {"trained_at_m": {"P": rising}, "fixed": {"P": falling}}}
    outcome, detail = decide_trend(measurement)
    assert outcome == "reproduced"
    assert "networks fine-tuned at each m: digits, an MLP, 3 seeds" in detail
    assert " Context, not deciding: fixed: falls (" in detail
    alone = decide_trend({"settings": {"trained_at_m": {"P": rising}}})[1]
    assert "Context" not in alone and alone.endswith("; predicted: rises.")  # nothing after it
    assert decide_trend({"settings": {"trained_at_m": {"P": rising}}}, "flat")[0] == (
        "not-reproduced")
    assert decide_trend({}) == ("inconclusive", "the measurement holds no setting")


# --- boundaries of the rule, defaults and the measurement's wording --------------------------


def test_paired_t_names_what_it_refuses():
    with pytest.raises(GradlabError, match=r"changes must hold one change per seed, at least 2; "
                       r"got \[0\.1\]"):  # fmt: skip
        paired_t([0.1])
    for alpha in (1.0, 1.5, 0.0):
        with pytest.raises(GradlabError, match=rf"alpha must lie in \(0, 1\); got {alpha!r}"):
            paired_t([0.1, 0.2], alpha)


def test_paired_t_takes_any_real_numbers_as_floats():
    floats = paired_t([0.1, 0.2, 0.4])
    assert paired_t([Fraction(1, 10), Fraction(2, 10), Fraction(4, 10)]) == floats
    assert paired_t([1, 2, 4]) == paired_t([1.0, 2.0, 4.0])


@pytest.mark.parametrize(("changes", "t"), [([0.0, 0.0, 0.0], 0.0), ([1.0, 1.0], math.inf),
                                            ([-0.5, -0.5, -0.5], -math.inf)])
def test_changes_without_spread_give_t_0_or_infinite(changes, t):
    assert paired_t(changes)["t"] == t


def test_the_interval_is_scipys_students_t_interval():
    changes = [0.07, 0.12, 0.17, 0.05]
    test = paired_t(changes, alpha=0.1)
    mean = sum(changes) / len(changes)
    low, high = student_t.interval(0.9, len(changes) - 1, loc=mean, scale=sem(changes))
    assert test["low"] == pytest.approx(low, rel=1e-12)
    assert test["high"] == pytest.approx(high, rel=1e-12)


def test_the_level_alpha_reaches_the_t_test():
    # t = 3 with 2 degrees of freedom: above t_(0.9, 2) = 1.886 (alpha 0.2), below 4.303 (0.05)
    spread = 0.1 / 3 * math.sqrt(3)  # sd of the changes so that se = 0.1 / 3
    changes = [0.1 - spread, 0.1, 0.1 + spread]
    assert by_hand(changes)[2] == pytest.approx(3.0)
    assert setting_trend(ends(changes))[0] == "unclear"
    trend, why = setting_trend(ends(changes), alpha=0.2)
    assert trend == "rises" and "two-sided 0.2" in why


EXACT_START = 2.0**-8
"""A start whose sum with 0.01 is exact in float64 (both on the 2^-59 grid below 2^-6), so that
the change of P is the float 0.01 itself."""


@pytest.mark.parametrize("sign", [1, -1])
def test_a_change_of_exactly_the_flat_band_is_neither_a_trend_nor_flat(sign):
    start, end = EXACT_START, EXACT_START + FLAT_BAND
    rows = [[start, end]] * 2 if sign > 0 else [[end, start]] * 2
    assert rows[0][1] - rows[0][0] == sign * FLAT_BAND  # every seed changes by exactly the band
    trend, why = setting_trend(rows)
    assert trend == "unclear", why  # "beyond" the band and "inside" it are both strict


def test_a_t_equal_to_the_critical_value_is_not_significant(monkeypatch):
    from gradlab.symbolic import batch_size

    at_the_line = {"mean": 0.5, "standard_error": 0.1, "t": 4.0, "df": 2, "critical": 4.0,
                   "low": 0.1, "high": 0.9}  # fmt: skip
    monkeypatch.setattr(batch_size, "paired_t", lambda changes, alpha: at_the_line)
    assert setting_trend(ends(RISING))[0] == "unclear"


def test_the_verdict_names_the_setting_it_was_asked_about():
    data = measurement(other=ends(RISING))
    outcome, detail = decide_trend(data, "rises", setting="other")
    assert outcome == "reproduced" and detail.startswith("On other: ")


@pytest.mark.parametrize("data", [{}, {"settings": {}}, {"settings": {"other": {"P": [[0.1]]}}}])
def test_parts_of_a_setting_the_measurement_lacks_are_none(data):
    assert part_trends(data) == {}


def test_the_unmeasured_detail_describes_the_quick_miniature_it_offers():
    from gradlab.experiments import p_vs_batch_size

    quick = p_vs_batch_size.settings(quick=True)
    seeds = inspect.signature(p_vs_batch_size.measure).parameters["seeds"].default
    sizes, epochs = quick["batch_sizes"], quick["epochs"]
    model = p_vs_batch_size.MODEL.split("(")[-1].rstrip(")")  # "a small CNN"
    expected = (f"`gradlab audit --measure` takes the quick one ({quick['num_digits']}-digit "
                f"strings, {model}, m = {sizes[0]}..{sizes[-1]}, "
                f"{'one epoch' if epochs == 1 else f'{epochs} epochs'} per m, {len(seeds)} "
                f"seeds), shown here as context.")  # fmt: skip
    assert conjecture_verdict(None)[1].endswith(expected)


def test_a_measurement_without_ps_parts_shows_none():
    detail = conjecture_verdict(measurement(trained_at_m=ends(RISING)))[1]
    assert "P's parts" not in detail and detail.endswith("predicted: rises.")


def test_seeds_that_change_alike_say_why_t_is_infinite():
    # every seed falls by exactly 0.25: no spread, t = -inf; the reason says so in words
    trend, why = setting_trend([[0.5, 0.25], [0.75, 0.5], [0.625, 0.375]])
    assert trend == ("falls" if 0.25 > FLAT_BAND else "flat")
    assert "t = -inf (every seed changed by the same amount: no spread, so t is infinite)" in why
    _, noisy = setting_trend(ends(NOISY))
    assert "no spread" not in noisy


# P pinned at a bound at one end in every seed, the seeds alike: the paired changes have zero
# variance because P cannot pass 1 (or 0), and t = change / 0 would read as a certain trend.
PINNED = [
    [[0.5, 1.0], [0.5, 1.0], [0.5, 1.0]],  # at 1 at the largest m
    [[0.25, 0.5, 1.0], [0.25, 0.75, 1.0]],  # at 1 at the largest m, middle m varies
    [[1.0, 0.5], [1.0, 0.5], [1.0, 0.5]],  # at 1 at the smallest m
    [[0.0, 0.4], [0.0, 0.4], [0.0, 0.4]],  # at 0 at the smallest m
    [[0.6, 0.0], [0.6, 0.0]],  # at 0 at the largest m
]


@pytest.mark.parametrize("rows", PINNED)
def test_p_pinned_at_a_bound_with_alike_seeds_is_saturated_not_a_trend(rows):
    changes = [row[-1] - row[0] for row in rows]
    assert len(set(changes)) == 1 and changes[0] != 0  # zero variance, a non-zero change
    trend, why = setting_trend(rows)
    assert trend == "saturated"
    assert "a t-test is undefined" in why and "inf" not in why
    outcome, detail = decide_trend(measurement(trained_at_m=rows))
    assert outcome == "inconclusive" and "P saturated" in detail


def test_pinned_says_which_end_and_which_bound():
    assert saturation([[0.5, 1.0]] * 3).startswith("P is 1 at the largest m in every seed")
    assert saturation([[0.0, 0.4]] * 3).startswith("P is 0 at the smallest m in every seed")


@pytest.mark.parametrize("rows", [
    [[0.4, 1.0], [0.5, 1.0], [0.6, 1.0]],  # at 1, but the seeds start apart: a real rise
    [[0.5, 0.99], [0.5, 0.99], [0.5, 0.99]],  # alike, but short of the bound
    [[1.0, 1.0], [0.5, 0.5]],  # no change in any seed, P at 1 in one seed only
    [[0.5, 1.0]],  # one seed: no spread to speak of
])  # fmt: skip
def test_a_bound_alone_or_alike_seeds_alone_are_not_saturation(rows):
    assert saturation(rows) is None
    assert setting_trend(rows)[0] != "saturated"


def test_a_bound_reached_by_seeds_that_vary_still_rises():
    rows = [[0.4, 1.0], [0.5, 1.0], [0.6, 1.0]]  # changes 0.6, 0.5, 0.4: t = 0.5 / 0.0577 = 8.7
    assert by_hand([0.6, 0.5, 0.4])[2] > TABLE_T[2]
    assert setting_trend(rows)[0] == "rises"


@pytest.mark.parametrize("rows", [
    [1.0, 1.0],  # one dimension: not one row per seed
    [[1.0]] * 3,  # one batch size: no change to read
    [[], []],  # no batch size
])  # fmt: skip
def test_saturation_needs_p_per_seed_at_two_batch_sizes_or_more(rows):
    assert saturation(rows) is None


def test_no_seed_is_no_saturation():
    import numpy as np

    assert saturation(np.zeros((0, 3))) is None


def test_one_seed_pinned_everywhere_is_saturated_but_one_seed_has_no_spread_to_read():
    assert saturation([[1.0, 1.0]]).startswith("P saturated at every m and seed")
    assert saturation([[0.5, 1.0]]) is None  # the zero-variance reading needs two seeds


def test_saturation_reads_0_1_integers_and_booleans_as_shares():
    text = "P is 0 at the smallest m in every seed"  # both ends pinned: the smallest m first
    assert saturation([[0, 1]] * 3).startswith(text)
    assert saturation([[False, True]] * 3).startswith(text)


def test_the_reason_quotes_the_mean_p_at_the_first_and_the_last_batch_size():
    rows = [[0.25, 0.5, 1.0], [0.25, 0.75, 1.0], [0.25, 0.125, 1.0]]  # pinned at m = last
    trend, why = setting_trend(rows)
    assert trend == "saturated"
    assert why.startswith("mean P 0.250 -> 1.000: P is 1 at the largest m in every seed")
