"""Relative error beside absolute in the deciding helpers' details (opt-in: ``relative=True``)."""

import sympy as sp

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
    assert verdict.detail.endswith("relative error inf (inf %) there.")
    plain = numeric_agreement(lambda c: 1.0, lambda c: 0.0, [0], tolerance=0.5)
    assert plain.detail == "max |printed - true| = 1 (case 1 of 1)."


def test_symbolic_equality_gives_the_true_value_and_the_relative_error_at_its_witness():
    verdict = symbolic_equality(3 * x, 2 * x, [x], relative=True)  # printed is 1.5 times true
    witness, _, relative = verdict.detail.rpartition("; ")
    point = sp.Rational(witness_of(witness)[1]["x"])
    assert relative == f"true value {sp.N(2 * point, 8)}, relative error 0.5 (50 %)."
    assert symbolic_equality(2 * x, 2 * x, [x], relative=True).verdict == "holds"
