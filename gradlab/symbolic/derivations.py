"""SymPy derivations of quantities that gradlab.functional computes, lambdified for comparison.

Each function derives its result from the definitions alone (no gradlab code), so a test can
compare the lambdified SymPy result with the torch implementation in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import sympy as sp


def smoothap_gradient(num_positives: int, num_negatives: int, dims: int) -> Callable:
    """``dAP/dq`` of SmoothAP for one query, by ``sympy.diff`` of the rank-counting definition.

    Returns ``f(query [d], candidates [C, d], tau) -> grad [d]`` with the positives first.
    """
    q = sp.symbols(f"q0:{dims}", real=True)
    count = num_positives + num_negatives
    v = sp.Matrix(count, dims, lambda i, k: sp.Symbol(f"v{i}_{k}", real=True))
    tau = sp.Symbol("tau", positive=True)
    scores = [sum(q[k] * v[i, k] for k in range(dims)) for i in range(count)]

    def g(value):
        return 1 / (1 + sp.exp(-value / tau))

    ap = 0
    for i in range(num_positives):
        above = [g(scores[j] - scores[i]) for j in range(count) if j != i]
        positives_above = [g(scores[j] - scores[i]) for j in range(num_positives) if j != i]
        ap += (1 + sum(positives_above)) / (1 + sum(above))
    ap = ap / num_positives
    gradient = [sp.diff(ap, component) for component in q]
    function = sp.lambdify([q, list(v), tau], gradient, "numpy")

    def evaluate(query: np.ndarray, candidates: np.ndarray, temperature: float) -> np.ndarray:
        return np.array(
            function(list(query), list(candidates.reshape(-1)), temperature), dtype=float
        )

    return evaluate


def operating_region_width(tau: float, eps: float) -> float:
    """The half-width ``w`` solving ``G(w)(1 - G(w))/tau = eps`` by ``sympy.solve`` in ``G``."""
    g = sp.Symbol("g", positive=True)
    roots = sp.solve(sp.Eq(g * (1 - g), sp.nsimplify(eps) * sp.nsimplify(tau)), g)
    upper = max(roots, key=lambda r: complex(r).real)
    width = sp.nsimplify(tau) * sp.log(upper / (1 - upper))  # G = sigmoid(w/tau)
    return float(sp.N(width, 30))


def harmonic_gap(a: int, b: int) -> float:
    """``sum_{t=a+1}^b 1/t`` in exact rationals."""
    t = sp.Symbol("t", integer=True, positive=True)
    return float(sp.summation(1 / t, (t, a + 1, b)))


def unit_distance_from_cosine(cosine: float) -> float:
    """``|x - y|`` of unit vectors with cosine ``c``, from ``|x - y|^2 = 2 - 2 x.y`` (sympy)."""
    c = sp.Symbol("c", real=True)
    return float(sp.sqrt(sp.expand(1 + 1 - 2 * c)).subs(c, sp.nsimplify(cosine)))
