"""The slips the audit's review named, each applied to its record's accepted form and rejected.

Each test takes the claim from its module, builds the slip from the accepted form's own value
(the printed form when it holds, else the correction), and runs the record's check: the
accepted form holds and the slip does not. The SmoothAP chain's slips (Bleeker & de Rijke,
2022: Eq. 14 / 18 without the ``- 1`` of ``C``, ``R`` for ``R^2``, a dropped ``1 +``) are in
``test_smoothap_slips.py``; here: a log factor added to an order (Brown et al., 2020, Table S2;
He et al., 2018, the cost of Eq. 37) and Eq. 21's last step in place of Eq. 20 (He et al., 2018).
"""

import pytest
import sympy as sp

from gradlab.symbolic import minibatch_claims, supplementary_claims, tie_aware_claims
from gradlab.symbolic.claims import Claim, Form, mutant


def _claim(module, label: str) -> Claim:
    return next(claim for claim in module.claims() if claim.label == label)


def _assert_rejected(claim: Claim, slip_value, name: str) -> None:
    accepted = claim.accepted()
    slip = mutant(accepted, slip_value, name)
    assert slip.text() not in {accepted.text(), claim.printed.text()}
    assert claim.check(accepted).verdict == "holds"
    verdict = claim.check(slip)
    assert verdict.verdict == "fails", verdict.detail


def _variable(form: Form, name: str) -> sp.Symbol:
    (symbol,) = [s for s in sp.sympify(form.value).free_symbols if s.name == name]
    return symbol


def test_m_squared_log_m_for_smooth_aps_m_squared_is_rejected():
    claim = _claim(supplementary_claims, "claim-table-s2-complexity")  # O(M^2) per query
    order = claim.accepted().value
    assert order == _variable(claim.accepted(), "M") ** 2
    _assert_rejected(claim, order * sp.log(_variable(claim.accepted(), "M")), "M^2 log M")


@pytest.mark.slow
def test_m_log_squared_m_for_blackbox_aps_m_log_m_is_rejected():
    claim = _claim(supplementary_claims, "claim-table-s2-blackbox")  # corrected: O(M log M)
    size = _variable(claim.accepted(), "M")
    assert claim.accepted().value == size * sp.log(size)
    _assert_rejected(claim, size * sp.log(size) ** 2, "M log^2 M")


def test_an_extra_log_m_in_the_cost_of_eq37_is_rejected():
    claim = _claim(minibatch_claims, "claim-complexity")  # O(b |V| M^2)
    order = claim.accepted().value
    size = _variable(Form(order.expr), "M")
    _assert_rejected(claim, sp.O(order.expr * sp.log(size), *order.args[1:]), "b |V| M^2 log M")


@pytest.mark.slow
def test_eq21s_last_step_in_place_of_eq20_is_rejected():
    claim = _claim(tie_aware_claims, "eq20")  # 1/(2 N_(d-1)) - 1/(2 N_d)
    before, after = _variable(claim.accepted(), "N_prev"), _variable(claim.accepted(), "N_d")
    assert sp.simplify(claim.accepted().value - (1 / (2 * before) - 1 / (2 * after))) == 0
    _assert_rejected(claim, (after - before) / (2 * before**2), "n_d / (2 N_(d-1)^2)")


@pytest.mark.parametrize("label", ["claim-table-s2-complexity", "claim-table-s2-blackbox"])
@pytest.mark.slow
def test_a_power_of_m_too_many_is_rejected_too(label):
    claim = _claim(supplementary_claims, label)
    size = _variable(claim.accepted(), "M")
    _assert_rejected(claim, claim.accepted().value * size, "a power of M too many")


def test_blackbox_aps_order_without_its_log_is_rejected():
    claim = _claim(supplementary_claims, "claim-table-s2-blackbox")
    _assert_rejected(claim, _variable(claim.accepted(), "M"), "log dropped (M)")
