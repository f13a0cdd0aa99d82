"""Each kind of check must fail a deliberately wrong claim and pass the right one."""

import sympy as sp

from gradlab.symbolic.claims import numeric_agreement, predicate, symbolic_equality

x, y, tau = sp.symbols("x y tau", positive=True)


def test_symbolic_equality_detects_a_flipped_sign():
    truth = sp.diff(1 / (1 + sp.exp(-x / tau)), x)
    g = 1 / (1 + sp.exp(-x / tau))
    assert symbolic_equality(g * (1 - g) / tau, truth, [x, tau]).verdict == "holds"
    wrong = symbolic_equality(-g * (1 - g) / tau, truth, [x, tau])
    assert wrong.verdict == "fails" and "printed minus true" in wrong.detail


def test_symbolic_equality_detects_a_dropped_factor_and_accepts_a_correction():
    g = 1 / (1 + sp.exp(-x / tau))
    truth = sp.diff(g, x)
    assert symbolic_equality(g * (1 - g), truth, [x, tau]).verdict == "fails"
    fixed = symbolic_equality(g * (1 - g), truth, [x, tau], corrected=g * (1 - g) / tau)
    assert fixed.verdict == "holds-with-correction"


def test_symbolic_equality_handles_abstract_functions():
    f, h = sp.Function("f")(x), sp.Function("h")(x)
    truth = sp.diff(f / h, x)
    reversed_rule = (f * sp.diff(h, x) - h * sp.diff(f, x)) / h**2
    assert symbolic_equality(reversed_rule, truth, [x]).verdict == "fails"
    assert symbolic_equality(-reversed_rule, truth, [x]).verdict == "holds"


def test_numeric_agreement_detects_a_wrong_value():
    cases = [1.0, 2.0, 3.5]
    assert (
        numeric_agreement(lambda c: c * c, lambda c: c**2, cases, tolerance=1e-12).verdict
        == "holds"
    )
    assert (
        numeric_agreement(lambda c: 2 * c * c, lambda c: c**2, cases, tolerance=1e-12).verdict
        == "fails"
    )
    corrected = numeric_agreement(
        lambda c: 2 * c * c, lambda c: c**2, cases, tolerance=1e-12, corrected=lambda c: c * c
    )
    assert corrected.verdict == "holds-with-correction"


def test_predicate_verdicts():
    assert predicate(True, "ok", "no").verdict == "holds"
    assert predicate(False, "ok", "no").verdict == "fails"
    assert predicate(False, "ok", "no", correction="fix").verdict == "holds-with-correction"
