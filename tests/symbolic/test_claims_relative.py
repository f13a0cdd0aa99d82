"""Relative error beside absolute in the deciding helpers' details (opt-in: ``relative=True``)."""

import math

import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.claims import numeric_agreement, symbolic_equality
from tests.helpers.witness import witness as witness_of

x = sp.Symbol("x")


def test_numeric_agreement_gives_the_relative_error_at_the_worst_case():
    # printed = 1.01 * true: the worst absolute error is at the largest true value, 3.0 -> 0.03,
    # and the relative error is 1 % there
    verdict = numeric_agreement(lambda c: 1.01 * c, lambda c: c, [1.0, 3.0, 2.0],
                                tolerance=1e-3, relative=True)  # fmt: skip
    assert verdict.verdict == "fails"
    assert verdict.detail == ("max |printed - true| = 0.03 (case 2 of 3); relative error 0.01 "
                              "(1 %) there.")  # fmt: skip


def test_numeric_agreement_calls_a_difference_from_zero_infinite_and_stays_quiet_when_off():
    verdict = numeric_agreement(lambda c: 1.0, lambda c: 0.0, [0], tolerance=0.5, relative=True)
    assert verdict.detail.endswith("relative error infinite there.")
    plain = numeric_agreement(lambda c: 1.0, lambda c: 0.0, [0], tolerance=0.5)
    assert plain.detail == "max |printed - true| = 1 (case 1 of 1)."


def test_symbolic_equality_gives_the_true_value_and_the_relative_error_at_its_witness():
    verdict = symbolic_equality(3 * x, 2 * x, [x], relative=True)  # printed is 1.5 times true
    witness, _, relative = verdict.detail.rpartition("; ")
    point = sp.Rational(witness_of(witness)[1]["x"])
    assert relative == f"true value {sp.N(2 * point, 8)}, relative error 0.5 (50 %)."
    assert symbolic_equality(2 * x, 2 * x, [x], relative=True).verdict == "holds"


def test_an_infinite_difference_has_an_infinite_relative_error():
    # was: "printed minus true is zoo at n = 5 (exact evaluation); true value 2.2833333, relative
    # error nan (nan %)": the sum from k = 0 has the term 1/0; H_5 = 1 + 1/2 + ... + 1/5 = 137/60
    k = sp.Symbol("k", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    verdict = symbolic_equality(sp.Sum(1 / k, (k, 0, n)), sp.harmonic(n), [n], relative=True,
                                sampler=lambda generator: {n: 5})  # fmt: skip
    assert verdict.detail == ("printed minus true is infinite at n = 5 (exact evaluation); true "
                              "value 2.2833333, relative error infinite.")  # fmt: skip


def test_a_relative_error_against_an_infinite_true_value_of_an_infinite_difference_is_undefined():
    # 2/x against 1/x at x = 0: both the difference and the true value are 1/0
    verdict = symbolic_equality(2 / x, 1 / x, [x], relative=True,
                                sampler=lambda generator: {x: 0})  # fmt: skip
    assert verdict.detail == ("printed minus true is infinite at x = 0 (exact evaluation); true "
                              "value infinite, relative error undefined.")  # fmt: skip


def test_a_true_value_under_a_deep_cancellation_is_printed_with_its_own_digits():
    # exp(s) - 1 - s at s = 3e-80 cancels about 160 digits: its value is s^2/2 + s^3/6 + ...,
    # 4.5e-160. Printed twice the truth, the relative error is exactly 1. A 50-digit evaluation
    # of the truth printed 5.6902624e-160 and a relative error of 0.791.
    import mpmath

    s = sp.Symbol("s", real=True)
    truth = sp.exp(s) - 1 - s
    point = sp.Rational(3, 10**80)
    verdict = symbolic_equality(2 * truth, truth, [s], sampler=lambda _: {s: point},
                                relative=True)  # fmt: skip
    _, _, relative = verdict.detail.rpartition("; ")
    with mpmath.workdps(400):  # brute force: 400 digits leave 240 after the cancellation
        reference = mpmath.exp(mpmath.mpf(3) / 10**80) - 1 - mpmath.mpf(3) / 10**80
    shown = float(relative.split(",")[0].removeprefix("true value "))
    assert abs(shown - float(reference)) <= 1e-7 * float(reference)
    assert relative.endswith("relative error 1 (100 %).")


def test_a_nan_printed_value_has_an_undefined_relative_error():
    verdict = numeric_agreement(lambda c: math.nan, lambda c: 2.0, [0], tolerance=0.1,
                                relative=True)  # fmt: skip
    assert verdict.detail == ("max |printed - true| = nan (case 1 of 1); relative error "
                              "undefined there.")  # fmt: skip


def test_a_true_value_that_cancels_to_zero_reads_0_with_an_infinite_relative_error():
    # sin^2 + cos^2 - 1 is 0 at every point, but its evaluation leaves the residue of a
    # cancellation: the true value at the witness is 0, so the relative error is infinite
    p = sp.Symbol("p", positive=True)
    truth = sp.sin(p) ** 2 + sp.cos(p) ** 2 - 1
    assert sp.simplify(truth) == 0
    verdict = symbolic_equality(truth + 1, truth, [p], relative=True)
    _, _, relative = verdict.detail.rpartition("; ")
    assert relative == "true value 0, relative error infinite."


@pytest.mark.parametrize("sampled", [False, True])
def test_a_symbol_of_the_truth_that_cancels_in_the_difference_is_asked_for_when_relative(
        sampled):  # fmt: skip
    # was: TypeError (Cannot convert expression to float) after the witness was found: the
    # true value 3 + y has a symbol that printed - true = x does not
    p, y = sp.Symbol("p", positive=True), sp.Symbol("y", positive=True)
    sampler = (lambda generator: {p: 3}) if sampled else None
    assert symbolic_equality(2 * p + y, p + y, [p], sampler=sampler).verdict == "fails"
    with pytest.raises(GradlabError, match=r"^symbols must include every free symbol of printed "
                                           r"and truth; missing y \(given: p\)$"):  # fmt: skip
        symbolic_equality(2 * p + y, p + y, [p], sampler=sampler, relative=True)
    point = {p: 3, y: sp.Rational(1, 2)}
    verdict = symbolic_equality(2 * p + y, p + y, [p, y], sampler=lambda generator: point,
                                relative=True)  # fmt: skip
    assert verdict.detail == (f"printed minus true is {sp.N(3, 8)} at p = 3, y = 1/2 (exact "
                              f"evaluation); true value {sp.N(sp.Rational(7, 2), 8)}, relative "
                              f"error {3 / 3.5:.3g} ({100 * 3 / 3.5:.3g} %).")  # fmt: skip
