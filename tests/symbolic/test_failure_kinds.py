"""A form wrong as printed says how, as its check found it: a wrong value, no value at a legal
input (undefined), or a result of the wrong shape or type (ill-typed).

Each kind is fed through the claim engine's public functions, and each claim check that can
find more than one kind is fed a form of each: the kind comes from what the check computed,
never from its detail's words."""

import math

import numpy as np
import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic import (
    Claim,
    Form,
    Verdict,
    audit_claim,
    decide,
    evaluate,
    mutant,
    numeric_agreement,
    scaled,
    symbolic_equality,
)
from gradlab.symbolic.claims import FAILURES

count = sp.Symbol("count", nonnegative=True)  # the size of a set: 0 is a legal input
RECIPROCAL = sp.Piecewise((0, sp.Eq(count, 0)), (1 / count, True))
"""1/count, and 0 for an empty set: what a mean's normaliser must be to be defined there."""

i, j = sp.Symbol("i", nonnegative=True, integer=True), sp.Symbol("j", positive=True, integer=True)


def test_the_kinds_are_three_and_a_verdict_that_does_not_fail_has_none():
    assert FAILURES == ("wrong-value", "undefined", "ill-typed")
    assert decide(1 + 1 == 2, "2", "not 2", failure="undefined").failure is None
    assert symbolic_equality(count + 1, 1 + count, [count]).failure is None


# --- wrong-value ---------------------------------------------------------------------------


def test_a_form_that_gives_a_wrong_number_is_a_wrong_value():
    # -x against x: -2x at every x > 0, a number and the wrong one
    x = sp.Symbol("x", positive=True)
    assert symbolic_equality(-x, x, [x]).failure == "wrong-value"
    verdict = numeric_agreement(lambda c: -c, lambda c: c, [1.0, 2.0], tolerance=1e-9)
    assert (verdict.verdict, verdict.failure) == ("fails", "wrong-value")


def test_a_pole_of_the_truth_alone_is_a_wrong_value_of_the_printed_form():
    # at i = 0 log(j/i) is infinite; a form that gives the finite harmonic gap there gives a
    # number, the wrong one (the truth has no finite value there, the form claims one)
    verdict = symbolic_equality(sp.harmonic(j) - sp.harmonic(i), sp.log(j / i), [i, j],
                                sampler=lambda _: {i: 0, j: 3})  # fmt: skip
    assert (verdict.verdict, verdict.failure) == ("fails", "wrong-value")


def test_a_nan_case_beside_a_wrong_number_is_a_wrong_value():
    # case 1: NaN (no value), case 2: 5 for 2 (a wrong number): the wrong number is the finding
    printed = {1.0: math.nan, 2.0: 5.0}
    verdict = numeric_agreement(printed.get, lambda c: c, [1.0, 2.0], tolerance=1e-9)
    assert (verdict.verdict, verdict.failure) == ("fails", "wrong-value")


# --- undefined -----------------------------------------------------------------------------


def test_a_form_with_a_pole_at_a_legal_input_is_undefined():
    # 1/count at count = 0 (an empty set) has no value; the truth there is 0. The threshold of
    # the truth's Piecewise puts a point at count = 0.
    verdict = symbolic_equality(1 / count, RECIPROCAL, [count])
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")
    # the harmonic gap by log(j/i) at the first bin, i = 0: log(3/0) is infinite, H(3) = 11/6
    verdict = symbolic_equality(sp.log(j / i), sp.harmonic(j) - sp.harmonic(i), [i, j],
                                sampler=lambda _: {i: 0, j: 3})  # fmt: skip
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")


@pytest.mark.parametrize("missing", [math.nan, math.inf, -math.inf])
def test_a_case_where_the_printed_value_is_not_a_number_is_undefined(missing):
    # the mean of an empty set as sum / count: no number at count = 0, right elsewhere
    def printed(case):
        total, size = case
        return missing if size == 0 else total / size

    def truth(case):
        total, size = case
        return 0.0 if size == 0 else total / size

    verdict = numeric_agreement(printed, truth, [(3.0, 2), (0.0, 0), (5.0, 5)], tolerance=1e-12)
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")


def test_a_case_off_by_exactly_the_tolerance_agrees_beside_an_undefined_one():
    # case 1 is off by 0.5, the tolerance itself (exact in binary): it agrees, so the one case
    # that fails gives no number and the form is undefined, not a wrong value
    values = {0: (1.5, 1.0), 1: (math.nan, 2.0)}
    verdict = numeric_agreement(lambda c: values[c][0], lambda c: values[c][1], [0, 1],
                                tolerance=0.5)  # fmt: skip
    assert abs(values[0][0] - values[0][1]) == 0.5
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")


def test_a_claim_wrong_as_printed_records_how_and_one_that_holds_records_nothing():
    def check(form):
        return symbolic_equality(form.value, RECIPROCAL, [count])

    printed = Form(1 / count, lhs="1/|N|")
    claim = Claim("my-notes", "eq1", "the normaliser of a mean", printed, check,
                  correction=mutant(printed, RECIPROCAL, "corrected"))  # fmt: skip
    assert (evaluate(claim).verdict, evaluate(claim).failure) == ("holds-with-correction",
                                                                  "undefined")  # fmt: skip
    record = audit_claim(claim)
    assert (record["verdict"], record["failure"]) == ("holds-with-correction", "undefined")
    holding = Claim("my-notes", "eq2", "the normaliser", Form(RECIPROCAL), check)
    assert audit_claim(holding)["failure"] is None
    # a correction that does not hold: the claim fails, and how the printed form failed stays
    wrong_fix = Claim("my-notes", "eq3", "the normaliser", printed, check,
                      correction=mutant(printed, 2 * RECIPROCAL, "doubled"))  # fmt: skip
    assert (evaluate(wrong_fix).verdict, evaluate(wrong_fix).failure) == ("fails", "undefined")


# --- ill-typed -----------------------------------------------------------------------------


def test_a_table_s1_whose_r_pos_is_a_matrix_is_ill_typed():
    from gradlab.symbolic.supplementary_claims import (
        TABLE_S1,
        TABLE_S1_CORRECTED,
        check_table_s1,
    )

    # as printed, R_pos = gt.T * R is a (1, m) by (m,) product: an (m, m) matrix where a rank
    # per item, a vector of m, is meant
    verdict = check_table_s1(Form(TABLE_S1, render=str))
    assert (verdict.verdict, verdict.failure) == ("fails", "ill-typed")
    # R_pos of the right shape, a temperature off: a wrong number, not a wrong shape
    off = TABLE_S1_CORRECTED.replace("tau=0.01", "tau=0.011")
    verdict = check_table_s1(Form(off, render=str))
    assert (verdict.verdict, verdict.failure) == ("fails", "wrong-value")


# --- the API refuses a kind that is not one --------------------------------------------------


def test_a_kind_that_is_not_one_is_refused_by_name():
    with pytest.raises(GradlabError, match=r"failure must be one of .*'wrong-value'.*; got 'nan'"):
        decide(False, "", "no number", failure="nan")
    with pytest.raises(GradlabError, match=r"failure must be one of .*; got 'refuted'"):
        Verdict("fails", "wrong", "refuted")
    with pytest.raises(GradlabError, match=r"failure must be None for the verdict 'holds'"):
        Verdict("holds", "right", "undefined")
    assert Verdict("fails", "wrong").failure == "wrong-value"  # said nothing else: a wrong value


# --- the audit's claim checks: each kind where its check found it ---------------------------


def _claim(module, label):
    return next(claim for claim in module.claims() if claim.label == label)


@pytest.mark.parametrize("label", ["eq11", "claim-eq13-empty-bin", "claim-eq13-first-bin",
                                   "claim-eq13-one-item-bin", "claim-eq16-first-bin"])
def test_a_tie_aware_form_without_a_value_at_a_bin_is_undefined_and_a_doubled_one_wrong(label):
    # He et al. (2018): at the first bin (N_(d-1) = 0), an empty bin (c_d = 0) or a bin of one
    # item (c_d = 1) the printed forms divide by zero or take the logarithm of 0
    from gradlab.symbolic import tie_aware_claims

    claim = _claim(tie_aware_claims, label)
    printed = claim.check(claim.printed)
    assert (printed.verdict, printed.failure) == ("fails", "undefined")
    # the correction, doubled, is a number at every bin, twice the right one at the others
    doubled = claim.check(scaled(claim.correction, 2))
    assert (doubled.verdict, doubled.failure) == ("fails", "wrong-value")


def test_a_tie_aware_form_that_raises_on_the_checks_cases_is_undefined():
    from gradlab.symbolic.tie_aware_claims import check_quadrature_rule

    # nodes 2 left of each cell's right edge: the first term of the sum from N_(d-1) = 1 is
    # 1/(2 - 2), a division by zero
    verdict = check_quadrature_rule(Form({"node offset from the cell's right edge": 2,
                                          "cell width": 1}))  # fmt: skip
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")
    wrong = check_quadrature_rule(Form({"node offset from the cell's right edge": sp.Rational(1, 3),
                                        "cell width": 1}))  # fmt: skip
    assert (wrong.verdict, wrong.failure) == ("fails", "wrong-value")


def test_fappys_divisions_without_negatives_are_undefined():
    # Zhong et al.: 1/|N| with |N| = 0 and L/(number of positive pairs) with none
    from gradlab.symbolic import fappy_claims

    claim = _claim(fappy_claims, "claim-empty-negative-set")
    printed = claim.check(claim.printed)
    assert (printed.verdict, printed.failure) == ("fails", "undefined")
    # defined for none, but the mean's normaliser off by one: a wrong number where there are
    normaliser = 1 / (fappy_claims.Nn + 1)
    off = claim.check(mutant(claim.correction, {**claim.correction.value,
                                                "h normaliser": normaliser}, "1/(|N| + 1)"))
    assert (off.verdict, off.failure) == ("fails", "wrong-value")


def test_fappys_divisions_elsewhere_tell_no_value_for_none_from_a_wrong_one():
    from gradlab.symbolic.fappy_claims import L_scale, Nn, check_divisions_elsewhere, pairs_all

    # the printed divisions are the means where there is something to average, and divide by
    # zero where there is not
    printed = Form({"h normaliser": 1 / Nn, "line 10": L_scale / pairs_all})
    undefined = check_divisions_elsewhere(printed)
    assert (undefined.verdict, undefined.failure) == ("fails", "undefined")
    # guarded, but 1 where the batch has no positive pair, not 0: a number, the wrong one
    one_for_none = sp.Piecewise((1, sp.Eq(pairs_all, 0)), (0, True))
    guarded = Form({"h normaliser": 1 / sp.Max(Nn, 1),
                    "line 10": L_scale / sp.Max(pairs_all, 1) + one_for_none})  # fmt: skip
    wrong = check_divisions_elsewhere(guarded)
    assert (wrong.verdict, wrong.failure) == ("fails", "wrong-value")


def test_fappys_edges_tell_a_value_out_of_range_from_none():
    from gradlab.symbolic.fappy_claims import Nn, check_edges

    undefined = check_edges(Form(1 / (Nn - 1)))  # one negative: 1/0
    assert (undefined.verdict, undefined.failure) == ("fails", "undefined")
    too_large = check_edges(Form(2 / Nn))  # P up to 4, out of [0, 2]
    assert (too_large.verdict, too_large.failure) == ("fails", "wrong-value")


def test_the_committed_records_carry_a_kind_exactly_where_a_claim_is_wrong_as_printed():
    import json

    from tools.readme_audit import AUDIT_JSON
    from tools.readme_blocks import ROOT

    for record in json.loads((ROOT / AUDIT_JSON).read_text()):
        wrong = record["verdict"] in ("holds-with-correction", "fails")
        assert (record["failure"] in FAILURES) if wrong else record["failure"] is None, record["id"]


def test_numeric_agreement_of_numpy_values_tells_nan_from_a_number():
    with np.errstate(all="ignore"):
        verdict = numeric_agreement(lambda c: np.float64(c) / np.float64(0.0) * 0.0,
                                    lambda c: 0.0, [0.0, 1.0], tolerance=1e-9)  # fmt: skip
    assert (verdict.verdict, verdict.failure) == ("fails", "undefined")


# --- several checks in one: the strongest finding is said -----------------------------------


def test_checks_combined_say_a_wrong_number_found_after_a_missing_one():
    from gradlab.symbolic.claims import all_hold

    # the first check finds no value at a case, the second a wrong number: a wrong number is
    # the stronger finding, and the detail said is the one that found it
    missing = numeric_agreement(lambda c: math.nan, lambda c: c, [1.0], tolerance=1e-9)
    wrong = numeric_agreement(lambda c: 2 * c, lambda c: c, [1.0], tolerance=1e-9)
    assert (missing.failure, wrong.failure) == ("undefined", "wrong-value")
    combined = all_hold([missing, wrong])
    assert (combined.verdict, combined.failure, combined.detail) == (
        "fails", "wrong-value", wrong.detail)
    assert all_hold([wrong, missing]).failure == "wrong-value"
    assert all_hold([missing, missing]).detail == missing.detail  # the first of a kind


def test_the_li_relaxation_infinite_at_the_first_bin_alone_is_undefined_and_a_doubled_one_not():
    # He et al. (2018), Eq. 16: Li(C_d + 1) - Li(C_(d-1) + 1) is -Li(1) = +inf at the first bin
    # and relaxes the discount sum on every other bin: no wrong number anywhere
    from gradlab.symbolic.tie_aware_claims import (
        a,
        b,
        check_li_first_bin,
        discount_relaxation_check,
    )

    printed = Form(sp.li(b + 1) - sp.li(a + 1))
    relaxation = discount_relaxation_check(printed)
    assert (relaxation.verdict, relaxation.failure) == ("fails", "undefined")
    # doubled, it is infinite at the first bin and twice the sum at the others: a wrong number
    doubled = check_li_first_bin(Form(2 * (sp.li(b + 1) - sp.li(a + 1))))
    assert (doubled.verdict, doubled.failure) == ("fails", "wrong-value")
