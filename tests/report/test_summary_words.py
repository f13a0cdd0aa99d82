"""The report's cells and trend words (gradlab.report.summaries): mean ± population std of the
seeds, the verb a trend gets against the seed spread, and the verdicts in words.
Expected cells come from a float64 loop here, never from the module's helpers."""

from __future__ import annotations

import math

import pytest

from gradlab.report.summaries import VERDICT_WORDS, cell, trend, with_verb


def _mean_std(values):
    kept = [v for v in values if not math.isnan(v)]
    mean = sum(kept) / len(kept)
    return mean, math.sqrt(sum((v - mean) ** 2 for v in kept) / len(kept))


@pytest.mark.parametrize("digits", [1, 3, 5])
def test_a_cell_is_the_mean_and_population_std_at_the_asked_digits(digits):
    values = [0.125, 0.5, 0.75, math.nan]  # a seed left out where its value is undefined
    mean, std = _mean_std(values)
    assert cell(values, digits) == f"{mean:.{digits}f} ± {std:.{digits}f} (3 of 4 seeds)"
    assert cell([math.nan] * 2, digits) == "undefined (every seed)"  # was "nan ± nan"
    assert cell([0.25, 0.375]) == f"{0.3125:.3f} ± {0.0625:.3f}"  # three digits by default


@pytest.mark.parametrize(("values", "digits", "shown"), [
    ([0.6160, 0.6168], 3, "0.616 ± <0.001"),  # std 0.0004: below the last digit
    ([0.61, 0.614], 2, "0.61 ± <0.01"),
    ([0.5, 0.5 + 2e-9], 8, "0.50000000 ± <0.00000001"),  # 1e-9: the bound is 10^-8 exactly
    ([0.5, 0.5], 3, "0.500 ± 0.000"),  # no spread at all: measured zero, said so
    ([0.5, 0.5012], 3, "0.501 ± 0.001"),  # 0.0006 rounds up to the last digit
    ([0.25], 3, "0.250"),  # one seed: no spread to show
])  # fmt: skip
def test_a_spread_below_the_last_digit_is_said_as_below_it(values, digits, shown):
    # "± 0.000" read as a measured spread of zero where the seeds differed
    mean, std = _mean_std(values)
    assert shown.startswith(f"{mean:.{digits}f}")
    assert (0 < std < 0.5 * 10.0**-digits) == ("<" in shown)
    assert cell(values, digits) == shown


SIZES = [16, 64, 1024]


def _cells(values):
    return [f"{m:.3f} ± {s:.3f}" for m, s in map(_mean_std, values)]


@pytest.mark.parametrize(("curves", "verb"), [
    ([[0.30, 0.9, 0.20], [0.32, 0.1, 0.21]], "falls"),
    ([[0.20, 0.9, 0.30], [0.21, 0.1, 0.32]], "rises"),
])  # fmt: skip
def test_a_trend_beyond_the_spread_says_which_way_from_first_to_last(curves, verb):
    first, last = _cells([[c[0] for c in curves], [c[-1] for c in curves]])
    assert trend(curves, SIZES, "P") == (
        f"P {verb} from {first} (m=16) to {last} (m=1024), more than the seed spread"
    )


def test_a_trend_within_the_spread_names_no_direction():
    # 0.2 ± 0.1 at m = 16 against 0.35 ± 0.05 at the end: gap 0.15, not above the summed 0.15
    curves = [[0.1, 0.9, 0.3], [0.3, 0.0, 0.4]]
    first, last = _cells([[0.1, 0.3], [0.3, 0.4]])
    assert trend(curves, SIZES, "the share") == (
        f"the share stays within the seed spread: {first} at m=16, {last} at m=1024"
    )


def test_every_verdict_has_its_words():
    # hyphens read as spaces; a correction takes its article
    verdicts = ["holds", "holds-with-correction", "fails", "inconclusive", "reproduced",
                "not-reproduced", "not-testable-here"]  # fmt: skip
    expected = {v: v.replace("-", " ").replace("with correction", "with a correction")
                for v in verdicts}  # fmt: skip
    assert VERDICT_WORDS == expected


def test_a_curve_pinned_at_its_bound_with_alike_seeds_is_saturated_not_a_trend():
    # both seeds 0.5 at m = 16 and exactly 1 at m = 1024: no spread, so "more than the seed
    # spread" would hold for any gap; the bound, not a trend, fixes the end
    curves = [[0.5, 0.7, 1.0], [0.5, 0.9, 1.0]]
    first, last = _cells([[0.5, 0.5], [1.0, 1.0]])
    assert trend(curves, SIZES, "P") == (
        f"P is saturated, so it shows no trend: {first} at m=16, {last} at m=1024"
    )


@pytest.mark.parametrize(("count", "said"), [(0, "0 are"), (1, "1 is"), (2, "2 are"),
                                             (37, "37 are")])  # fmt: skip
def test_a_count_takes_the_verb_that_agrees_with_it(count, said):
    assert with_verb(count, "is", "are") == said
