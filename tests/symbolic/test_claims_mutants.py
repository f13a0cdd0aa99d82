"""Mutants in a claim's record: made from the accepted form, judged by the check alone.

The claims here are small and their truths are written independently of the code under test
(expanded polynomials, hand-computed corrections), so each expected verdict is known in advance.
"""

import warnings

import numpy as np
import pytest
import sympy as sp

from gradlab.symbolic.claims import (
    SLIP,
    Claim,
    Form,
    audit_claim,
    claim_mutants,
    decide,
    evaluate,
    mutant,
    symbolic_equality,
)

a, b, R, x = sp.symbols("a b R x")


def _rank_claim(**extra) -> Claim:
    """A printed ``C = R`` whose truth is ``C = R - 1`` (the -1 of 000:eq14's count)."""
    def check(form):
        return symbolic_equality(form.value, R - 1, [R])

    return Claim("mine", "eq14", "C counts the positives ranked above", Form(R, lhs="C"), check,
                 correction=Form(R - 1, lhs="C", name="corrected"), **extra)  # fmt: skip


def test_a_mutant_of_a_corrected_claim_is_never_turned_into_holds_with_correction():
    claim = _rank_claim()
    assert evaluate(claim).verdict == "holds-with-correction"  # the printed form's verdict
    slip = mutant(claim.printed, 2 * R, "doubled")
    assert evaluate(claim, slip).verdict == "fails"  # its own verdict, not the printed form's


def test_mutants_are_made_from_the_correction_when_the_printed_form_fails():
    record = audit_claim(_rank_claim(), mutants=True)
    formulas = [m["formula"] for m in record["mutant_results"]]
    assert record["mutated_form"] == "correction"
    # the -1 dropped from the correction is the printed form itself: never a mutant
    assert "C = R" not in formulas and "C = R - 1" not in formulas
    # sign of -1 flipped, the constant moved, R - 1 -> 1 - R: slips of the correction
    assert {"C = R + 1", "C = R - 2", "C = 1 - R"} <= set(formulas)
    assert record["mutants_killed"] == record["mutants"] >= 3 and record["mutant_operators"] >= 2


def test_a_hand_written_slip_equal_to_the_printed_form_or_correction_is_dropped():
    claim = _rank_claim(mutants=(Form(R, lhs="C", name="the -1 dropped"),
                                 Form(R - 1, lhs="C", name="no change"),
                                 Form(R - 2, lhs="C", name="one too many subtracted")))  # fmt: skip
    pairs = claim_mutants(claim)
    slips = [(op, form.name) for op, form in pairs if op == SLIP]
    assert slips == [(SLIP, "one too many subtracted")]
    assert [form.text() for _, form in pairs].count("C = R - 2") == 1  # not generated again


def test_a_check_that_accepts_everything_kills_no_mutant():
    claim = Claim("mine", "eq1", "anything goes", Form(a - b),
                  lambda form: decide(True, "accepted", "never"))  # fmt: skip
    record = audit_claim(claim, mutants=True)
    assert record["mutants"] >= 3 and record["mutants_killed"] == 0
    assert all(m["verdict"] == "holds" and not m["killed"] for m in record["mutant_results"])


def test_a_mutant_proven_equal_to_the_form_is_dropped_and_named():
    def check(form):
        return symbolic_equality(form.value, a**2 - 2 * a * b + b**2, [a, b])

    record = audit_claim(Claim("mine", "eq2", "a square", Form((a - b) ** 2), check), mutants=True)
    # a - b -> b - a gives (b - a)^2: equal, so no check could reject it
    assert "a and b swapped in a difference" in record["equivalent_mutants_dropped"]
    assert "(-a + b)**2" not in [m["formula"] for m in record["mutant_results"]]
    assert record["mutants_killed"] == record["mutants"]


def test_a_check_that_raises_on_a_mutant_rejects_it_and_says_so():
    def check(form):
        if form.value != x:
            raise ZeroDivisionError("no")
        return decide(True, "x is x", "")

    record = audit_claim(Claim("mine", "eq3", "x", Form(x), check), mutants=True)
    assert record["verdict"] == "holds" and record["mutants"] >= 1
    first = record["mutant_results"][0]
    assert first["killed"] and first["verdict"] == "inconclusive"
    assert first["mutant"] and "ZeroDivisionError" not in first["formula"]
    # why it was not decided travels with it: not evaluated is told apart from rejected
    assert first["detail"] == "the check raised ZeroDivisionError on this mutant: no"


def test_a_mutant_detail_names_lambdifys_code_without_its_counter():
    # lambdify numbers the file name of each function it makes (<lambdifygenerated-7>): the
    # count depends on what the process evaluated before, so the record drops it
    def check(form):
        if form.value != x:
            generated = sp.lambdify(x, form.value, "math")
            raise ValueError(f"math domain error in {generated.__code__.co_filename}")
        return decide(True, "x is x", "")

    counted = sp.lambdify(x, x).__code__.co_filename
    assert counted.startswith("<lambdifygenerated-") and counted != "<lambdifygenerated>"
    record = audit_claim(Claim("mine", "eq3", "x", Form(x), check), mutants=True)
    details = {m["detail"] for m in record["mutant_results"]}
    assert details == {"the check raised ValueError on this mutant: math domain error in "
                       "<lambdifygenerated>"}  # fmt: skip


def test_a_rejected_mutant_carries_no_detail():
    record = audit_claim(_rank_claim(), mutants=True)
    assert all(m["verdict"] == "fails" and "detail" not in m for m in record["mutant_results"])


def test_a_record_carries_cause_and_inapplicable_reasons():
    claim = Claim("mine", "claim-code", "code", Form("s1 - s2", render=str),
                  lambda form: decide(form.value == "s1 - s2", "same", "differs"),
                  mutants=(Form("s2 - s1", name="sign flipped", render=str),),
                  inapplicable={"sign": "code string: no SymPy tree"},
                  cause="sign convention")  # fmt: skip
    record = audit_claim(claim, mutants=True)
    assert record["cause"] == "sign convention"
    assert record["inapplicable"] == {"sign": "code string: no SymPy tree"}
    assert record["mutant_results"] == [
        {"operator": "slip", "mutant": "sign flipped", "formula": "s2 - s1", "verdict": "fails",
         "killed": True}
    ]  # fmt: skip
    assert (record["mutants"], record["mutant_operators"], record["mutants_killed"]) == (1, 1, 1)


@pytest.mark.slow  # proves the mutant equal on the domain with SymPy: about 7 CPU-seconds
def test_a_mutant_equal_only_under_the_claims_domain_is_dropped_with_the_domain_named():
    # a ramp up to b then down to b + w: at x = b both pieces give 1 only when the ramp's width
    # is w too; a check that samples only equal widths accepts the strict top either way
    low, top, width = sp.symbols("l b w", real=True)
    positive = sp.Symbol("w_(>0)", positive=True)

    def ramp(top_condition):
        return sp.Piecewise(((x - low) / width, (x >= low) & top_condition),
                            ((top + width - x) / width, (x >= top) & (x <= top + width)),
                            (0, True))  # fmt: skip

    def check(form):  # the ramp 0 -> 1 -> 0 over [0, 2], its hand-written values at x = k/4
        value = sp.lambdify((x, low, top, width), form.value, "math")
        truth = [max(0.0, 1 - abs(k / 4 - 1)) for k in range(-2, 11)]
        got = [float(value(k / 4, 0.0, 1.0, 1.0)) for k in range(-2, 11)]
        return decide(got == truth, "agrees on the grid", "differs on the grid")

    printed = Form(ramp(x <= top), lhs="w(x)")
    strict = mutant(printed, ramp(x < top), "strict top")
    domain = {low: top - positive, width: positive}
    plain = audit_claim(Claim("mine", "eq3", "ramp", printed, check), mutants=True)
    given = audit_claim(Claim("mine", "eq3", "ramp", printed, check, domain=domain), mutants=True)
    assert check(strict).verdict == "holds"  # the check cannot tell them apart
    survivor = [m for m in plain["mutant_results"] if m["formula"] == strict.text()]
    assert len(survivor) == 1 and not survivor[0]["killed"]
    assert (f"{survivor[0]['mutant']} (given l = b - w_(>0), w = w_(>0))"
            in given["equivalent_mutants_dropped"])  # fmt: skip
    assert strict.text() not in [m["formula"] for m in given["mutant_results"]]


def test_a_mutant_that_divides_by_zero_is_judged_without_printing_a_warning():
    # The check takes 1 / (form at x = 1): 1/2 for the printed x + 1. Its mutant x - 1 (the
    # constant's sign flipped) divides by zero there, where NumPy warns, which said nothing
    # about the claim; the check compares the value (inf fails), so it is still rejected.
    def check(form):
        inverse = np.float64(1.0) / np.float64(form.value.subs(x, 1))
        return decide(inverse == 0.5, "1 / (1 + 1)", f"1 / value = {inverse}")

    claim = Claim("mine", "eq3", "a quotient", Form(x + 1), check)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = audit_claim(claim, mutants=True)
    assert record["verdict"] == "holds"
    assert "x - 1" in [m["formula"] for m in record["mutant_results"]]
    assert record["mutants_killed"] == record["mutants"]
    assert [w for w in caught if issubclass(w.category, RuntimeWarning)] == []
    # the printed form's own check is not silenced: only the mutants are
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert evaluate(Claim("mine", "eq4", "at a pole", Form(x - 1), check)).verdict == "fails"
    assert any(issubclass(w.category, RuntimeWarning) for w in caught)


def test_names_two_mutants_share_are_numbered_in_the_order_they_are_checked():
    # (1 + a) / (1 + b): the 1 added twice, so "sign of term 1 flipped" and its like occur twice
    def check(form):
        return symbolic_equality(form.value, (1 + a) / (1 + b), [a, b])

    claim = Claim("mine", "eq2", "a ratio", Form((1 + a) / (1 + b), lhs="r"), check,
                  mutants=(Form(a, lhs="r", name="halved"), Form(b, lhs="r", name="halved"),
                           Form(a * b, lhs="r", name="product")))  # fmt: skip
    names = [form.name for _, form in claim_mutants(claim)]
    assert len(set(names)) == len(names), names
    assert names[:3] == ["halved (1 of 2)", "halved (2 of 2)", "product"]
    for change in ("sign of term 1 flipped", "constant 1 -> 2"):
        assert [n for n in names if n.startswith(change)] == [
            f"{change} (1 of 2)", f"{change} (2 of 2)"], names  # fmt: skip
    assert "sign of term b flipped" in names  # a name no other mutant has is kept
    record = audit_claim(claim, mutants=True)
    assert [m["mutant"] for m in record["mutant_results"]] == names
