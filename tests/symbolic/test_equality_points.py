"""What ``symbolic_equality``'s default points can tell apart: false identities that a trial
found accepted as ``holds``: identities true only for the quadratics that stood in for abstract
functions, a slip visible only where ``x / tau`` is of order one, and a threshold shifted
between two sample points. Each false form here fails, and its true form still holds."""

from __future__ import annotations

import pytest
import sympy as sp

from gradlab.symbolic import symbolic_equality

X = sp.Symbol("x", real=True)
F, G = sp.Function("f"), sp.Function("g")


def _verdict(printed, truth, symbols=(X,)):
    return symbolic_equality(printed, truth, list(symbols)).verdict


def _taylor(order):
    return sum(sp.diff(F(X), X, i).subs(X, 0) * X**i / sp.factorial(i)
               for i in range(order + 1))  # fmt: skip


@pytest.mark.parametrize(("printed", "truth"), [
    (_taylor(2), F(X)),  # a second-order expansion claimed exact
    (_taylor(5), F(X)),
    (sp.Integer(0), sp.diff(F(X), X, 3)),  # f''' = 0
    (sp.diff(F(X), X, 2) * sp.diff(G(X), X),  # d/dx (f'' g) with the f''' g term dropped
     sp.diff(sp.diff(F(X), X, 2) * G(X), X)),
    (3 * sp.diff(F(X), X, 2) * sp.diff(G(X), X) + 3 * sp.diff(F(X), X) * sp.diff(G(X), X, 2),
     sp.diff(F(X) * G(X), X, 3)),  # Leibniz's third derivative without its two end terms
])  # fmt: skip
def test_an_identity_true_only_for_low_degree_stand_ins_fails(printed, truth):
    # was: holds ("vanishes at 12 random points"): every abstract function stood for a quadratic
    assert _verdict(printed, truth) == "fails"


def test_the_true_forms_with_abstract_functions_still_hold():
    leibniz = sum(sp.binomial(3, i) * sp.diff(F(X), X, i) * sp.diff(G(X), X, 3 - i)
                  for i in range(4))  # fmt: skip
    assert _verdict(leibniz, sp.diff(F(X) * G(X), X, 3)) == "holds"
    y = sp.Symbol("y", real=True)
    mixed = sp.diff(F(X, y), X, y)  # a function of two arguments: its mixed partial is no 0
    assert _verdict(sp.Integer(0), mixed, (X, y)) == "fails"
    assert _verdict(sp.diff(F(X, y), y, X), mixed, (X, y)) == "holds"


@pytest.mark.parametrize("tau", [sp.Rational(1, 10), sp.Rational(1, 1000), sp.Rational(1, 10**4)])
def test_a_sigmoid_slope_slip_fails_at_every_temperature(tau):
    # was: holds at tau = 1/1000, where every default point lay in the sigmoid's tails
    sigmoid = 1 / (1 + sp.exp(-X / tau))
    true_slope = sp.diff(sigmoid, X)
    assert _verdict(sigmoid * (1 - sigmoid) ** 2 / tau, true_slope) == "fails"
    assert _verdict(sigmoid * (1 - sigmoid) / tau, true_slope) == "holds"


@pytest.mark.parametrize(("printed", "truth"), [
    (sp.Piecewise((-1, X < 2), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((-1, X < 0), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((-1, X <= 1), (0, True)), sp.Piecewise((-1, X < 1), (0, True))),
    (sp.Piecewise((X, X < 5), (0, True)), sp.Piecewise((X, X < 3), (0, True))),
    (X, sp.Min(X, 200)),
    (sp.Max(X, 1), sp.Max(X, 2)),
])  # fmt: skip
def test_a_shifted_threshold_fails(printed, truth):
    # was: holds: the thresholds lay between two of the 12 fixed points
    assert _verdict(printed, truth) == "fails"
    assert _verdict(truth, truth) == "holds"
