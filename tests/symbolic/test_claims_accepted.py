"""Which form a claim's mutants come from, how often each form is checked, and the tolerance of
a numeric check.

Each claim here is tiny and its truth is written by hand (``R - 1`` for a count that printed
``R``), so every expected verdict and form is known before the code under test runs.
"""

import math

import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.claims import (
    Claim,
    Form,
    Verdict,
    audit_claim,
    claim_mutants,
    decide,
    evaluate,
    numeric_agreement,
    symbolic_equality,
)

R, x, y = sp.symbols("R x y")


def _count_claim(printed, correction, calls=None) -> Claim:
    """``C = printed`` checked against the truth ``C = R - 1``; ``calls`` counts each form's
    checks by its text."""

    def check(form):
        if calls is not None:
            calls[form.text()] = calls.get(form.text(), 0) + 1
        return symbolic_equality(form.value, R - 1, [R])

    fix = None if correction is None else Form(correction, lhs="C", name="corrected")
    return Claim("mine", "eq1", "C counts the others", Form(printed, lhs="C"), check,
                 correction=fix)  # fmt: skip


@pytest.mark.parametrize(
    ("printed", "correction", "expected"),
    [(R, R - 1, "correction"),   # the printed form fails: the correction is accepted
     (R - 1, R, "printed"),      # the printed form holds: kept, whatever the correction says
     (R, None, "printed")],      # no correction known: the printed form, failing or not
)  # fmt: skip
def test_the_accepted_form_is_the_printed_one_when_it_holds_else_the_correction(
    printed, correction, expected
):
    claim = _count_claim(printed, correction)
    assert claim.accepted() is getattr(claim, expected)


def test_a_verdict_given_to_accepted_is_used_without_a_new_check():
    calls: dict = {}
    claim = _count_claim(R, R - 1, calls)  # the printed form fails its check
    told_holds = Verdict("holds", "already decided elsewhere")
    assert claim.accepted(told_holds) is claim.printed
    assert claim.accepted(Verdict("fails", "already decided")) is claim.correction
    assert calls == {}  # neither call ran the check


def test_a_printed_form_that_holds_keeps_its_verdict_though_a_correction_is_given():
    calls: dict = {}
    claim = _count_claim(R - 1, R - 1, calls)  # a correction equal to it
    verdict = evaluate(claim)
    assert verdict.verdict == "holds" and "Corrected:" not in verdict.detail
    assert verdict.detail.endswith("The correction given was not checked (only a printed form "
                                   "that fails is corrected; this one holds).")
    assert calls == {"C = R - 1": 1}  # the correction is never checked
    failing_fix = _count_claim(R - 1, 2 * R)  # a correction that would fail its check
    assert evaluate(failing_fix).verdict == "holds"
    assert "does not hold" not in evaluate(failing_fix).detail


def test_the_audit_mutates_the_printed_form_when_it_holds_though_a_correction_is_given():
    record = audit_claim(_count_claim(R - 1, 2 * R), mutants=True)
    assert record["verdict"] == "holds" and record["mutated_form"] == "printed"
    # the correction's own slips (2 R -> -2 R) are not mutants of the printed form
    assert "C = -2*R" not in [m["formula"] for m in record["mutant_results"]]


def test_claim_mutants_are_made_from_the_form_they_are_given():
    claim = _count_claim(R, None)
    other = Form(x + 7, lhs="C", name="given")
    texts = [form.text() for _, form in claim_mutants(claim, other)]
    assert "C = x + 8" in texts and all("R" not in text for text in texts)
    assert any("R" in form.text() for _, form in claim_mutants(claim))  # default: the printed


def test_an_audit_checks_the_printed_form_and_the_correction_once_each():
    calls: dict = {}
    audit_claim(_count_claim(R, R - 1, calls), mutants=True)
    assert calls["C = R"] == 1 and calls["C = R - 1"] == 1
    assert all(count == 1 for count in calls.values())  # each mutant once as well


def test_a_mutant_the_check_does_not_accept_is_kept_though_proven_equal_under_the_domain():
    # x * y with y fixed at 1 by the source's definitions: the dropped factor (x alone) equals
    # it there, but a check that leaves it undecided has not accepted it, so it is no equivalent
    def check(form):
        if form.value == x * y:
            return decide(True, "the printed product", "")
        return Verdict("inconclusive", "only the printed product is known")

    claim = Claim("mine", "eq2", "a product", Form(x * y), check, domain={y: sp.Integer(1)})
    record = audit_claim(claim, mutants=True)
    formulas = {m["formula"]: m for m in record["mutant_results"]}
    assert formulas["x"]["verdict"] == "inconclusive" and formulas["x"]["killed"]
    assert record["equivalent_mutants_dropped"] == []


@pytest.mark.parametrize("tolerance", [-1e-12, math.nan, math.inf, "0.1", None, True])
def test_numeric_agreement_refuses_a_tolerance_that_is_not_a_finite_number_at_least_0(tolerance):
    ran = []
    refused = (r"^tolerance must be a finite number in \[0, inf\) \(the largest \|printed - "
               r"true\| that agrees\); got ")
    with pytest.raises(GradlabError, match=refused):
        numeric_agreement(lambda c: ran.append(c) or c, float, [1.0], tolerance=tolerance)
    assert ran == []  # refused before any case ran


def test_numeric_agreement_with_tolerance_0_holds_only_for_exact_agreement():
    assert numeric_agreement(float, float, [0.5, 2.0], tolerance=0).verdict == "holds"
    shifted = numeric_agreement(lambda c: c + 2.0**-40, float, [0.5, 2.0], tolerance=0)
    assert shifted.verdict == "fails" and "(case 1 of 2)" in shifted.detail
    empty = numeric_agreement(float, float, [], tolerance=0)
    assert (empty.verdict, empty.detail) == ("inconclusive", "no cases: nothing was compared.")
