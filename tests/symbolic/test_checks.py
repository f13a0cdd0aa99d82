"""Each deciding helper fails a deliberately wrong form and passes the right one; corrections
count only when checked; a check may not hand out holds-with-correction itself."""

import math
import re

import numpy as np
import pytest
import sympy as sp
import torch

from gradlab.errors import GradlabError
from gradlab.symbolic import (
    Claim,
    Form,
    Verdict,
    audit_claim,
    decide,
    evaluate,
    mutant,
    negated,
    numeric_agreement,
    scaled,
    substituted,
    symbolic_equality,
)
from tests.helpers.witness import witness

x, y, tau = sp.symbols("x y tau", positive=True)
g = 1 / (1 + sp.exp(-x / tau))


@pytest.mark.slow
def test_symbolic_equality_detects_a_flipped_sign():
    truth = sp.diff(g, x)
    assert symbolic_equality(g * (1 - g) / tau, truth, [x, tau]).verdict == "holds"
    wrong = symbolic_equality(-g * (1 - g) / tau, truth, [x, tau])
    assert wrong.verdict == "fails" and "printed minus true" in wrong.detail


def test_symbolic_equality_handles_abstract_functions():
    f, h = sp.Function("f")(x), sp.Function("h")(x)
    reversed_rule = (f * sp.diff(h, x) - h * sp.diff(f, x)) / h**2
    assert symbolic_equality(reversed_rule, sp.diff(f / h, x), [x]).verdict == "fails"
    assert symbolic_equality(-reversed_rule, sp.diff(f / h, x), [x]).verdict == "holds"


def test_numeric_agreement_detects_a_wrong_value_and_nan():
    cases = [1.0, 2.0, 3.5]
    right = numeric_agreement(lambda c: c * c, lambda c: c**2, cases, tolerance=1e-12)
    wrong = numeric_agreement(lambda c: 2 * c * c, lambda c: c**2, cases, tolerance=1e-12)
    assert (right.verdict, wrong.verdict) == ("holds", "fails")
    nan = numeric_agreement(lambda c: float("nan"), lambda c: c, cases, tolerance=1e-12)
    assert (nan.verdict, nan.detail) == ("fails", "max |printed - true| = nan (case 1 of 3).")


def test_numeric_agreement_keeps_a_nan_case_that_later_cases_agree_with():
    # NaN on the middle case only: the agreeing last case must not replace it as the worst
    printed = {1.0: 1.0, 2.0: float("nan"), 3.5: 12.25}
    verdict = numeric_agreement(printed.get, lambda c: c**2, [1.0, 2.0, 3.5], tolerance=1e-12)
    assert (verdict.verdict, verdict.detail) == (
        "fails", "max |printed - true| = nan (case 2 of 3).")


def test_decide_follows_the_computed_condition():
    assert decide(1 + 1 == 2, "ok", "no") == Verdict("holds", "ok")
    assert decide(1 + 1 == 3, "ok", "no") == Verdict("fails", "no")


def _derivative_claim(printed_value, correction_value=None):
    printed = Form(printed_value, lhs="dG/dx")

    def check(form):
        return symbolic_equality(form.value, sp.diff(g, x), [x, tau])

    correction = (None if correction_value is None
                  else mutant(printed, correction_value, "corrected"))  # fmt: skip
    return Claim("mine", "eq1", "derivative of G", printed, check, correction=correction,
                 mutants=(negated(printed), scaled(printed, tau)))


@pytest.mark.slow
def test_a_correction_counts_only_when_the_same_check_holds_on_it():
    right = g * (1 - g) / tau
    assert evaluate(_derivative_claim(g * (1 - g), right)).verdict == "holds-with-correction"
    # a wrong correction (a dropped factor, a flipped sign) leaves the verdict at fails
    assert evaluate(_derivative_claim(g * (1 - g), g * (1 - g))).verdict == "fails"
    assert evaluate(_derivative_claim(g * (1 - g), -right)).verdict == "fails"
    detail = evaluate(_derivative_claim(g * (1 - g), right)).detail
    assert "Corrected:" in detail and "checked:" in detail


def test_a_check_cannot_return_holds_with_correction_itself():
    printed = Form(x)
    cheat = Verdict("holds-with-correction", "")
    claim = Claim("mine", "eq1", "cheat", printed, lambda form: cheat)
    with pytest.raises(ValueError, match="may not return"):
        evaluate(claim)


@pytest.mark.slow
def test_mutants_are_run_and_counted():
    record = audit_claim(_derivative_claim(g * (1 - g) / tau), mutants=True)
    assert record["verdict"] == "holds"
    assert record["mutants"] == record["mutants_killed"] > 2  # 2 slips + the operators' mutants
    # a check that cannot tell the printed form from its mutants kills none
    blind = Claim("mine", "eq2", "blind", Form(x), lambda form: decide(True, "ok", ""),
                  mutants=(negated(Form(x)),))
    assert audit_claim(blind, mutants=True)["mutants_killed"] == 0


def test_display_is_generated_from_the_checked_value():
    form = Form(g * (1 - g) / tau, lhs="dG/dx")
    assert form.text().startswith("dG/dx = ") and "exp(-x/tau)" in form.text()
    assert "\\frac" in form.latex()
    swapped = substituted(form, {x: y}, "x -> y")
    assert "y" in swapped.text() and swapped.name == "x -> y"


def test_a_difference_that_is_nan_at_every_point_is_inconclusive_not_holds():
    # 0/0 at every point: nothing was compared, so it may not read as "holds"
    z = sp.Symbol("z", real=True)
    verdict = symbolic_equality(sp.nan * z, 0, [z])
    assert verdict.verdict == "inconclusive"
    assert "nan (not a number) at 12 of 12 random points" in verdict.detail


def test_a_pole_of_the_printed_side_only_is_a_witness():
    # printed is complex infinity (zoo) where the true value is 0: they differ
    z = sp.Symbol("z", real=True)
    verdict = symbolic_equality(1 / (z - z), 0, [z])
    assert verdict.verdict == "fails" and "printed minus true is infinite" in verdict.detail


def test_a_symbol_declared_integer_is_evaluated_at_integers_only():
    # floor(n/2) + ceiling(n/2) = n holds for every integer n and for no non-integer n/2 + k/2
    n = sp.Symbol("n", integer=True, positive=True)
    assert symbolic_equality(sp.floor(n / 2) + sp.ceiling(n / 2), n, [n]).verdict == "holds"
    # ... and a slip that holds at no integer is still caught
    wrong = symbolic_equality(sp.floor(n / 2) + sp.floor(n / 2), n, [n])
    odd = [k for k in range(1, 98, 2)]  # brute force: the slip differs exactly at odd n
    assert wrong.verdict == "fails" and int(witness(wrong.detail)[1]["n"]) in odd


def test_numeric_agreement_without_a_true_value_compares_nothing_there():
    # the truth is 0/0 at c = 0 (sin(c)/c unextended): that case cannot say holds
    def truth(c):
        return math.sin(c) / c if c else math.nan

    verdict = numeric_agreement(lambda c: math.sin(c) / c if c else 1.0, truth, [0.0, 0.5, 1.0],
                                tolerance=1e-15)  # fmt: skip
    assert verdict.verdict == "inconclusive"
    assert verdict.detail.startswith("the true value is nan at 1 of 3 cases (first: case 1)")
    every = numeric_agreement(float, lambda c: math.nan, [1.0, 2.0], tolerance=1e-9)
    assert (every.verdict, every.detail) == (
        "inconclusive", "the true value is nan at every one of the 2 cases: nothing was compared.")
    # a printed value that is wrong where the truth is defined still fails
    wrong = numeric_agreement(lambda c: 2.0, truth, [0.0, 0.5], tolerance=1e-9)
    assert wrong.verdict == "fails" and "(case 2 of 2)" in wrong.detail


def test_numeric_agreement_over_one_case_says_case():
    # was: "over 1 cases" and "at every one of the 1 cases"
    one = numeric_agreement(float, float, [2.0], tolerance=0.0)
    assert (one.verdict, one.detail) == ("holds", "max |printed - true| = 0.00e+00 over 1 case.")
    undefined = numeric_agreement(float, lambda c: math.nan, [2.0], tolerance=1e-9)
    assert (undefined.verdict, undefined.detail) == (
        "inconclusive", "the true value is nan at its one case: nothing was compared.")


def test_numeric_agreement_equal_infinities_agree_and_the_detail_counts_them():
    # a user read "max |printed - true| = 0.00e+00" of two infinities as a difference of 0
    verdict = numeric_agreement(lambda c: math.inf, lambda c: math.inf, [1.0], tolerance=0)
    assert verdict.verdict == "holds"
    assert verdict.detail == ("max |printed - true| = 0.00e+00 over 1 case; printed and true "
                              "are the same infinity at 1 of them (taken as agreeing).")
    poles = [1.0, 2.0, 3.0]  # one of three cases at a pole of both sides
    both = numeric_agreement(lambda c: 1 / (c - 2) if c != 2 else -math.inf,
                             lambda c: 1 / (c - 2) if c != 2 else -math.inf, poles, tolerance=0)
    assert both.detail.endswith("the same infinity at 1 of them (taken as agreeing).")
    finite = numeric_agreement(float, float, poles, tolerance=0)
    assert finite.detail == "max |printed - true| = 0.00e+00 over 3 cases."
    # with relative errors asked for, both remarks are kept
    off = numeric_agreement(lambda c: 2 * c if c != 2 else math.inf,
                            lambda c: c if c != 2 else math.inf, poles, tolerance=0,
                            relative=True)  # fmt: skip
    assert off.detail == ("max |printed - true| = 3 (case 3 of 3); relative error 1 (100 %) "
                          "there; printed and true are the same infinity at 1 of them (taken as "
                          "agreeing).")
    assert numeric_agreement(lambda c: -math.inf, lambda c: math.inf, [1.0],
                             tolerance=1e300).verdict == "fails"  # fmt: skip


@pytest.mark.parametrize(("printed", "truth", "cases", "relative", "message"), [
    (3, float, [1.0], False, r"^printed must be a function of a case returning a number; got int"),
    (float, None, [1.0], False, r"^truth must be a function of a case returning a number; got "),
    (float, float, None, False, r"^cases must be an iterable of cases \(a list\); got NoneType"),
    (float, float, "123", False, r"^cases must be an iterable of cases \(a list\); got str"),
    (float, float, [1.0], "yes", r"^relative must be True or False; got 'yes'"),
])
def test_numeric_agreement_names_a_wrong_argument_before_any_case_runs(
        printed, truth, cases, relative, message):
    with pytest.raises(GradlabError, match=message):
        numeric_agreement(printed, truth, cases, tolerance=1e-9, relative=relative)


@pytest.mark.parametrize(("returned", "shown"), [
    (lambda c: [c, c], "list [1.0, 1.0]"),
    (lambda c: np.array([c]), "ndarray array([1.])"),
    (lambda c: 1j, "complex 1j"),
])
def test_numeric_agreement_refuses_a_value_that_is_not_one_real_number(returned, shown):
    refused = rf"^printed\(case\) must return one real number; got {re.escape(shown)} at case 1 of"
    with pytest.raises(GradlabError, match=refused):
        numeric_agreement(returned, float, [1.0], tolerance=1e-9)


def test_numeric_agreement_names_the_function_and_the_case_that_returned_no_number():
    # truth runs first at each case; each refusal names which one returned what, and where
    def vector_at_two(c):
        return [c, c] if c == 2.0 else c

    cases = [1.0, 2.0, 3.0]
    for printed, truth, name in ((float, vector_at_two, "truth"),
                                 (vector_at_two, float, "printed")):
        with pytest.raises(GradlabError) as refused:
            numeric_agreement(printed, truth, cases, tolerance=1e-9)
        assert str(refused.value) == (
            f"{name}(case) must return one real number; got list [2.0, 2.0] at case 2 of 3 "
            "(compare a vector entry by entry: one case each)")


@pytest.mark.parametrize(("condition", "shown"), [
    (math.nan, "float nan"),  # truthy: it read as holds
    (1e-3, "float 0.001"),
    (sp.Symbol("s", real=True) > 0, "StrictGreaterThan s > 0"),
    (None, "NoneType None"),
])
def test_decide_refuses_a_condition_that_is_not_a_computed_bool(condition, shown):
    with pytest.raises(GradlabError, match=rf"^condition must be a computed bool \(True or False\)"
                                           rf".*; got {re.escape(shown)}$"):  # fmt: skip
        decide(condition, "holds", "fails")


def test_decide_takes_numpy_and_sympy_booleans_and_refuses_a_detail_that_is_not_text():
    assert decide(np.float64(0.5) < 1, "a", "b").verdict == "holds"
    assert decide(sp.Integer(2) > 3, "a", "b").verdict == "fails"
    with pytest.raises(GradlabError, match=r"^detail_if_fails must be a str .*; got int 2$"):
        decide(True, "a", 2)


def test_decide_s_refusals_word_for_word():
    # a SymPy relation with free symbols is told how to get a truth value; other values not
    with pytest.raises(GradlabError) as relation:
        decide(sp.Symbol("s", real=True) > 0, "holds", "fails")
    assert str(relation.value) == (
        "condition must be a computed bool (True or False) (a SymPy relation with free symbols "
        "has no truth value: substitute numbers first); got StrictGreaterThan s > 0")
    with pytest.raises(GradlabError) as number:
        decide(math.nan, "holds", "fails")
    assert str(number.value) == "condition must be a computed bool (True or False); got float nan"
    with pytest.raises(GradlabError) as detail:
        decide(True, 3, "fails")
    assert str(detail.value) == ("detail_if_holds must be a str (what supports the verdict); "
                                 "got int 3")


@pytest.mark.parametrize(("printed", "listed", "words"), [
    # SymPy derives the rest: an integer that is negative is real and nonpositive too
    (sp.Symbol("x", integer=True, negative=True), sp.Symbol("x", nonnegative=True, real=True),
     "x (real, integer, negative, nonpositive) in printed or truth, x (real, nonnegative)"),
    (sp.Symbol("z", nonpositive=True), sp.Symbol("z"),
     "z (real, nonpositive) in printed or truth, z (no assumptions)"),
    (sp.Symbol("w", positive=True), sp.Symbol("w", integer=True),
     "w (real, positive, nonnegative) in printed or truth, w (real, integer)"),
])  # fmt: skip
def test_two_symbols_of_one_name_are_told_apart_by_their_declarations(printed, listed, words):
    with pytest.raises(GradlabError) as raised:
        symbolic_equality(printed**2, printed, [listed])
    assert str(raised.value) == (
        f"symbols must include every free symbol of printed and truth; missing {printed} "
        f"({words} in symbols: two symbols with one name; declare each once and use it on "
        "both sides)")


def test_two_symbol_name_clashes_are_named_in_one_refusal():
    # x and y undeclared in printed, declared real in symbols: both left out, both named
    plain_x, plain_y = sp.symbols("x y")
    with pytest.raises(GradlabError) as raised:
        symbolic_equality(plain_x + plain_y, sp.Integer(0), list(sp.symbols("x y", real=True)))
    assert str(raised.value) == (
        "symbols must include every free symbol of printed and truth; missing x, y (x (no "
        "assumptions) in printed or truth, x (real) in symbols; y (no assumptions) in printed or "
        "truth, y (real) in symbols: two symbols with one name; declare each once and use it on "
        "both sides)")


def test_an_undefined_difference_is_inconclusive_and_its_first_point_is_named():
    # printed minus true is NaN where x > 1 and 0 elsewhere; the sampler hands 3, 1/2, 5,
    # 1/3, ... in turn: NaN at 6 of the 12 points, the first of them x = 3
    x = sp.Symbol("x", positive=True)
    printed = sp.Piecewise((sp.nan, x > 1), (0, True))
    values = iter([sp.Integer(3), sp.Rational(1, 2), sp.Integer(5), sp.Rational(1, 3)] * 3)
    verdict = symbolic_equality(printed, sp.Integer(0), [x], sampler=lambda rng: {x: next(values)})
    assert verdict.verdict == "inconclusive"
    assert verdict.detail.startswith(
        "printed minus true is nan (not a number) at 6 of 12 random points (the first: x = 3), "
        "and vanishes at the others; sympy.simplify does not reduce it to 0")
    everywhere = symbolic_equality(sp.Piecewise((sp.nan, x > 0), (0, True)), sp.Integer(0), [x],
                                   sampler=lambda rng: {x: sp.Integer(7)})  # fmt: skip
    assert everywhere.detail == (
        "printed minus true is nan (not a number) at 12 of 12 random points (the first: x = 7); "
        "sympy.simplify does not reduce it to 0: the random points cannot decide (pass a "
        "sampler that avoids the points where printed or true is undefined).")


@pytest.mark.parametrize("value", ["1", b"1", True, np.True_, np.array(True), torch.tensor(True)],
                         ids=["str", "bytes", "bool", "numpy bool", "numpy bool array",
                              "torch bool"])  # fmt: skip
def test_numeric_agreement_refuses_a_value_that_is_no_number(value):
    # float() reads '1' and True as 1.0: they agreed with a true value of 1
    with pytest.raises(GradlabError) as raised:
        numeric_agreement(lambda c: value, lambda c: 1.0, [0], tolerance=0.0)
    assert str(raised.value).startswith(
        f"printed(case) must return one real number; got {type(value).__name__} {value!r} at "
        "case 1 of 1")
