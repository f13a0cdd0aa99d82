"""The slips a reader of the SmoothAP derivation makes are rejected by the records' checks.

Bleeker & de Rijke (2022) print the chain twice (appendix A, short and long version). Each slip
is applied here, by SymPy substitution in the test, to the form the check accepts (the correction
where the printed form fails): the final form through ``R(i, S_N)`` without its ``- 1``
(Eq. 14 / 18), ``R(i, S_Omega)`` for ``R(i, S_Omega)^2`` (Eq. 13-14 / 17-18), a dropped ``1 +``
(Eq. 1 / 5, Eq. 8-9 / 12-13 and the ``R(i, S_P)`` of the final form). Each test also asserts that
the accepted form itself holds, so it fails if the check rejects everything.
"""

import pytest
import sympy as sp

from gradlab.symbolic.claims import Form, with_parameters
from gradlab.symbolic.smoothap_claims import R_, S_N, S_OMEGA, claims, i_

CLAIMS = {claim.id.split("_")[0] + ":" + claim.label: claim for claim in claims()}
SHORT, LONG = "000", "001"
FINAL = {SHORT: ("eq13", "eq14"), LONG: ("eq17", "eq18")}
WITH_R_N = {SHORT: "eq14", LONG: "eq18"}
DEFINITION = {SHORT: "eq1", LONG: "eq5"}
RANKS = {SHORT: (("eq8", "R(i, S_Omega)"), ("eq9", "R(i, S_P)")),
         LONG: (("eq12", "R(i, S_Omega)"), ("eq13", "R(i, S_P)"))}  # fmt: skip


def _accepted(short_id: str) -> Form:
    claim = CLAIMS[short_id]
    return claim.printed if claim.correction is None else claim.correction


def _assert_rejected(short_id: str, slip: Form) -> None:
    claim, accepted = CLAIMS[short_id], _accepted(short_id)
    assert slip.text() != accepted.text()  # the substitution changed the form
    assert claim.check(accepted).verdict == "holds"
    assert claim.check(slip).verdict == "fails"


def _piece(form: Form, key: str, new: sp.Expr, name: str) -> Form:
    return with_parameters(form, name, **{key: new})


def _without_leading_one(expression: sp.Expr) -> sp.Expr:
    """``1 + rest`` -> ``rest``: the ``1`` taken out of the sum's arguments, not subtracted."""
    assert isinstance(expression, sp.Add) and sp.Integer(1) in expression.args
    return sp.Add(*[term for term in expression.args if term != 1])


@pytest.mark.parametrize("paper", [SHORT, LONG])
def test_the_final_form_through_r_of_s_n_without_its_minus_one_is_rejected(paper):
    short_id = f"{paper}:{WITH_R_N[paper]}"
    accepted = _accepted(short_id)
    value = accepted.value["dAP_q/dq"]
    assert R_(i_, S_N) - 1 in value.atoms(sp.Add)  # the printed C = R(i, S_N) - 1
    slip = _piece(accepted, "dAP_q/dq", value.xreplace({R_(i_, S_N) - 1: R_(i_, S_N)}), "no -1")
    _assert_rejected(short_id, slip)


FINAL_FORMS = [(paper, label) for paper in (SHORT, LONG) for label in FINAL[paper]]


@pytest.mark.parametrize(("paper", "label"), FINAL_FORMS)
def test_r_for_r_squared_in_the_final_form_is_rejected(paper, label):
    accepted = _accepted(f"{paper}:{label}")
    rank, value = R_(i_, S_OMEGA), accepted.value["dAP_q/dq"]
    slip = _piece(accepted, "dAP_q/dq", value.xreplace({rank**-2: rank**-1}), "R for R^2")
    _assert_rejected(f"{paper}:{label}", slip)


@pytest.mark.parametrize("paper", [SHORT, LONG])
@pytest.mark.parametrize("part", ["numerator", "denominator"])
def test_a_dropped_one_plus_in_smoothap_is_rejected(paper, part):
    short_id = f"{paper}:{DEFINITION[paper]}"
    accepted = _accepted(short_id)
    ap = accepted.value["AP_q"]
    (summand,) = [s for s in ap.atoms(sp.Sum) if s.limits[0][0] == i_]
    numerator, denominator = sp.fraction(summand.function)
    if part == "numerator":
        new = summand.func(_without_leading_one(numerator) / denominator, *summand.limits)
    else:
        new = summand.func(numerator / _without_leading_one(denominator), *summand.limits)
    _assert_rejected(short_id, _piece(accepted, "AP_q", ap.xreplace({summand: new}), "no 1 +"))


@pytest.mark.parametrize("paper", [SHORT, LONG])
@pytest.mark.parametrize("which", [0, 1])
def test_a_dropped_one_plus_in_a_rank_is_rejected(paper, which):
    label, key = RANKS[paper][which]
    short_id = f"{paper}:{label}"
    accepted = _accepted(short_id)
    slip = _piece(accepted, key, _without_leading_one(accepted.value[key]), "no 1 +")
    _assert_rejected(short_id, slip)


@pytest.mark.parametrize(("paper", "label"), FINAL_FORMS)
def test_a_dropped_one_plus_in_the_final_forms_r_of_s_p_is_rejected(paper, label):
    accepted = _accepted(f"{paper}:{label}")
    rank = _without_leading_one(accepted.value["R(i, S_P)"])
    slip = _piece(accepted, "R(i, S_P)", rank, "no 1 +")
    _assert_rejected(f"{paper}:{label}", slip)


@pytest.mark.parametrize("short_id", ["000:eq1", "000:eq8", "001:eq12", "001:eq17"])
@pytest.mark.parametrize("shift", [-1, 1])
def test_a_shifted_lower_bound_of_the_negatives_sum_is_rejected(short_id, shift):
    # the negatives' sum starts one early (it counts the last positive) or one late (it misses
    # the first negative)
    accepted = _accepted(short_id)
    key = next(k for k in accepted.value if k != "D_ij")
    value = accepted.value[key]
    sums = [s for s in value.atoms(sp.Sum) if s.limits[0][1] != 1]
    assert sums  # the sum over S_N starts at n_P + 1
    shifted = {s: s.func(s.function, (s.limits[0][0], s.limits[0][1] + shift, s.limits[0][2]))
               for s in sums}  # fmt: skip
    _assert_rejected(short_id, _piece(accepted, key, value.xreplace(shifted), "bound shifted"))
