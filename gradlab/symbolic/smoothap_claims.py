"""Audit of the SmoothAP derivation of Bleeker & de Rijke (2022), appendix A: short and long version.

Both versions print the same chain with different numbers (the long one's = the short one's + 4
from Eq. 1 on), so each claim is built once per version and every detail cites that version's own
numbers (short: Eq. 1-14, long: Eq. 1-18). The true SmoothAP is the rank-counting definition
of the long version, Eq. 2, smoothed: candidate ``j`` counts against positive ``i`` through
``G(s_j - s_i)``; its true gradient is autograd of that definition, transcribed here (not taken
from gradlab.functional).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import sympy as sp
import torch
from scipy.special import expit
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational

from gradlab.errors import GradlabError
from gradlab.symbolic.claims import (
    Claim,
    Form,
    Verdict,
    all_hold,
    decide,
    mutant,
    negated,
    numeric_agreement,
    scaled,
    substituted,
    symbolic_equality,
    undecided,
    with_parameters,
)
from gradlab.symbolic.seeds import SEEDS

SEED_000 = "000_e0f8edb24a02ffe3"
SEED_001 = "001_69c8c92ba6da9a08"

tau, z = sp.symbols("tau z", positive=True)
x = sp.Symbol("x", real=True)
f = sp.Function("f")(x)
s_i, s_j = sp.symbols("s_i s_j", real=True)
A_, B_, C_, D_ = sp.symbols("A B C D")
R_N = sp.Symbol("R(i,S_N)")
P_sum, N_sum = sp.symbols("sum_P_G sum_N_G", positive=True)

# the chain's equation numbers in the short appendix; the long one adds 4
SIGN_CONVENTION = "sign-convention D_ij = s_i - s_j"
"""The one root cause of the records that fail with the stated ``D_ij = s_i - s_j``."""

CHAIN = {"def": 1, "G": 2, "dG": 3, "D": 4, "dD": 5, "dGD": 6, "sim": 7, "R_omega": 8,
         "R_p": 9, "dR": 10, "quotient": 11, "labels": 12, "final": 13, "negatives": 14}  # fmt: skip


def sigmoid(value, temperature=tau):
    return 1 / (1 + sp.exp(-value / temperature))


# --- the chain as SymPy sums over index ranges ------------------------------------------------
#
# The sets are index ranges: the query's positives are j = 1..n_P (S_P), its negatives
# j = n_P + 1..n_P + n_N (S_N); "j != i" is the factor (1 - KroneckerDelta(i, j)). ``G`` and
# ``sim`` stay undefined functions of ``D[i, j]`` (Eq. 2 / 6 and Eq. 7 / 11 define them), ``D[i, j]``
# is whatever the form's ``D_ij`` piece says, and ``R(i, S)`` is whatever the form's ``R(i, S)``
# piece says: the checks evaluate exactly the printed expression, sums, 1 + and exponents included.

i_, j_ = sp.symbols("i j")  # summation indices: not shifted as free integers
n_pos, n_neg = sp.symbols("n_P n_N", integer=True, positive=True)
s_ix, v_ix, D_ix = sp.IndexedBase("s"), sp.IndexedBase("v"), sp.IndexedBase("D")
G_, sim_, R_ = sp.Function("G"), sp.Function("sim"), sp.Function("R")
S_OMEGA, S_P, S_N = sp.symbols("S_Omega S_P S_N")
SETS = {"R(i, S_Omega)": S_OMEGA, "R(i, S_P)": S_P, "R(i, S_N)": S_N}
RANGES = ("S_P: j = 1..n_P, S_N: j = n_P + 1..n_P + n_N, KroneckerDelta(i, j) for j != i; "
          "sim(x) = G(x)(1 - G(x))/tau, v one coordinate of a candidate")  # fmt: skip


def over_positives(term: sp.Expr) -> sp.Expr:
    """``sum_(j in S_P, j != i) term`` with the positives at ``j = 1..n_P``.

    Example:
        >>> over_positives(G_IJ)
        Sum((1 - KroneckerDelta(i, j))*G(D[i, j]), (j, 1, n_P))
    """
    return sp.Sum((1 - sp.KroneckerDelta(i_, j_)) * term, (j_, 1, n_pos))


def over_negatives(term: sp.Expr) -> sp.Expr:
    """``sum_(j in S_N) term`` with the negatives at ``j = n_P + 1..n_P + n_N``.

    Example:
        >>> over_negatives(G_IJ)
        Sum(G(D[i, j]), (j, n_P + 1, n_N + n_P))
    """
    return sp.Sum(term, (j_, n_pos + 1, n_pos + n_neg))


G_IJ = G_(D_ix[i_, j_])
SIM_IJ = sim_(D_ix[i_, j_]) * (v_ix[i_] - v_ix[j_])
D_PRINTED, D_RANK = s_ix[i_] - s_ix[j_], s_ix[j_] - s_ix[i_]
R_OMEGA_SUMS = 1 + over_positives(G_IJ) + over_negatives(G_IJ)
R_P_SUMS = 1 + over_positives(G_IJ)
R_N_SUMS = 1 + over_negatives(G_IJ)
AP_SUMS = sp.Sum(R_P_SUMS / R_OMEGA_SUMS, (i_, 1, n_pos)) / n_pos


def _final_expression(c_term: sp.Expr) -> sp.Expr:
    """Eq. 13 / 17 (``c_term`` the brace C) or Eq. 14 / 18 (``c_term = R(i, S_N) - 1``)."""
    numerator = R_(i_, S_P) * over_negatives(SIM_IJ) - c_term * over_positives(SIM_IJ)
    return sp.Sum(numerator / R_(i_, S_OMEGA) ** 2, (i_, 1, n_pos)) / n_pos


class _NotEvaluableError(ValueError):
    """A (mutated) form whose expression does not reduce to a number on a concrete problem."""


_MAX_DEPTH = 64
"""Levels of nesting the evaluator follows before it calls the definitions circular."""


class _Evaluator:
    """Evaluates a form's pieces numerically, straight from the SymPy tree, vectorised over cases.

    ``scores [cases, count]`` (and ``coordinates [cases, count, d]``, one coordinate per column)
    are the candidates' values of ``s[k]`` and ``v[k]`` (``k = 1..count``); every ``Sum`` is a
    loop over its (evaluated) bounds, ``KroneckerDelta`` and relations compare evaluated values,
    ``G``, ``sim``, ``R(., S)`` and ``D[., .]`` are looked up as described above. Anything else
    (a symbol without a value, an index out of range, an unknown function) is not evaluable.
    """

    def __init__(self, pieces: dict, sizes: dict, temperature: float, scores, coordinates=None):
        self.pieces, self.sizes, self.temperature = pieces, sizes, temperature
        self.count = scores.shape[1]
        self.s = scores[:, :, None] if coordinates is not None else scores
        self.v = coordinates
        self.depth = 0

    def index(self, node, env) -> int:
        value = self.value(node, env)
        if np.ndim(value) or value != int(value) or not 1 <= int(value) <= self.count:
            raise _NotEvaluableError(f"index {node} = {value} is outside 1..{self.count}")
        return int(value)

    def integer(self, node, env) -> int:
        value = self.value(node, env)
        if np.ndim(value) or value != int(value):
            raise _NotEvaluableError(f"bound {node} = {value} is not an integer")
        return int(value)

    def value(self, node, env):
        # The forms of the audit nest about 20 levels deep; definitions that refer to each
        # other recurse without end. 64 levels stay far below Python's recursion limit even
        # when every call is wrapped (a tracer, a mutation tool).
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _NotEvaluableError("definitions refer to each other")
        try:
            return self._value(node, env)
        finally:
            self.depth -= 1

    def _value(self, node, env):
        if isinstance(node, sp.Number):
            return float(node)
        if isinstance(node, sp.Symbol):
            if node in env:
                return env[node]
            if node in self.sizes:
                return self.sizes[node]
            raise _NotEvaluableError(f"{node} has no value")
        if isinstance(node, sp.Indexed):
            if node.base in (s_ix, v_ix) and len(node.indices) == 1:
                k = self.index(node.indices[0], env) - 1
                if node.base == s_ix:
                    return self.s[:, k]
                if self.v is None:
                    raise _NotEvaluableError("v has no value in this check")
                return self.v[:, k]
            if node.base == D_ix and len(node.indices) == 2 and "D_ij" in self.pieces:
                a, b = (self.index(k, env) for k in node.indices)
                return self.value(self.pieces["D_ij"], {**env, i_: a, j_: b})
            raise _NotEvaluableError(f"{node} has no definition in the form")
        if isinstance(node, sp.Add):
            return sum((self.value(a, env) for a in node.args[1:]), self.value(node.args[0], env))
        if isinstance(node, sp.Mul):
            product = self.value(node.args[0], env)
            for factor in node.args[1:]:
                product = product * self.value(factor, env)
            return product
        if isinstance(node, sp.Pow):
            base, power = self.value(node.base, env), self.value(node.exp, env)
            with np.errstate(all="ignore"):
                return np.power(np.asarray(base, dtype=float), power)
        if isinstance(node, sp.Sum):
            return self.sum(node.function, list(node.limits), env)
        if isinstance(node, sp.KroneckerDelta):
            a, b = (self.integer(k, env) for k in node.args)
            return float(a == b)
        if isinstance(node, sp.Piecewise):
            conditions = [np.asarray(self.value(c, env), dtype=bool) for _, c in node.args]
            values = [self.value(e, env) for e, _ in node.args]
            return np.select(np.broadcast_arrays(*conditions), np.broadcast_arrays(*values), np.nan)
        if node is sp.true or node is sp.false:
            return bool(node)
        if isinstance(node, Relational):
            left, right = self.value(node.lhs, env), self.value(node.rhs, env)
            return _RELATIONS[type(node)](left, right)
        if isinstance(node, (sp.exp, sp.log)):
            with np.errstate(all="ignore"):
                return (np.exp if isinstance(node, sp.exp) else np.log)(self.value(node.args[0], env))
        if isinstance(node, AppliedUndef):
            return self.function(node, env)
        raise _NotEvaluableError(f"{type(node).__name__} cannot be evaluated here")

    def sum(self, body, limits, env):
        (variable, low, high), rest = limits[0], limits[1:]
        total = 0.0
        for k in range(self.integer(low, env), self.integer(high, env) + 1):
            inner = {**env, variable: k}
            total = total + (self.sum(body, rest, inner) if rest else self.value(body, inner))
        return total

    def function(self, node, env):
        name = node.func.__name__
        if name in ("G", "sim") and len(node.args) == 1:
            g = expit(self.value(node.args[0], env) / self.temperature)
            return g if name == "G" else g * (1 - g) / self.temperature
        if name == "R" and len(node.args) == 2:
            definition = {SETS[k]: v for k, v in self.pieces.items() if k in SETS}.get(node.args[1])
            if definition is None:
                raise _NotEvaluableError(f"{node} has no definition in the form")
            return self.value(definition, {**env, i_: self.index(node.args[0], env)})
        raise _NotEvaluableError(f"{node} has no definition in the form")


_RELATIONS = {sp.StrictLessThan: np.less, sp.LessThan: np.less_equal, sp.StrictGreaterThan: np.greater,
              sp.GreaterThan: np.greater_equal, sp.Equality: np.equal, sp.Unequality: np.not_equal}  # fmt: skip


def _numeric(form: Form, key: str, sizes: dict, temperature: float, scores, coordinates=None,
             indices=(None,)):  # fmt: skip
    """The form's ``key`` piece evaluated on ``scores [cases, count]`` (and ``coordinates
    [cases, count, d]``): ``[len(indices), cases(, d)]``; ``sizes`` gives ``n_pos``, ``n_neg`` (or
    ``m``), ``indices`` the values of ``i`` (``None``: ``i`` is bound in the piece).

    Example:
        >>> form = Form({"R(i, S_P)": R_P_SUMS, "D_ij": D_RANK})
        >>> _numeric(form, "R(i, S_P)", {n_pos: 3, n_neg: 0}, 1e-4, np.array([[0.1, 0.3, 0.2]]),
        ...          indices=(1, 2, 3)).ravel().tolist()
        [3.0, 1.0, 2.0]
    """
    if not isinstance(form.value, dict) or key not in form.value:
        raise _NotEvaluableError(f"the form has no {key!r} piece")
    evaluator = _Evaluator(form.value, sizes, temperature, scores, coordinates)
    shape = scores.shape[:1] + (() if coordinates is None else coordinates.shape[2:])
    out = []
    for i in indices:
        with np.errstate(all="ignore"):
            value = evaluator.value(form.value[key], {} if i is None else {i_: i})
        out.append(np.broadcast_to(np.asarray(value, dtype=float), shape))
    return np.stack(out)


def _evaluated(build):
    """Run ``build()``; a form that does not evaluate fails (with the reason) instead of raising."""
    try:
        return build(), None
    except (_NotEvaluableError, TypeError, ValueError, KeyError, IndexError, AttributeError,
            NameError, ZeroDivisionError) as error:  # fmt: skip
        return None, undecided(f"the form does not evaluate on a concrete problem: {error}")


def _problem(seed: int, positives: int = 3, negatives: int = 4, dims: int = 3):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=dims) * 0.4
    vectors = rng.normal(size=(positives + negatives, dims)) * 0.4
    mask = np.array([True] * positives + [False] * negatives)
    return query, vectors, mask


def _true_gradient(query, vectors, mask, temperature):
    """Autograd of SmoothAP (rank convention: Eq. 2 of Bleeker & de Rijke (2022, long version),
    smoothed) w.r.t. the query, float64."""
    q = torch.tensor(query, requires_grad=True)
    scores = torch.tensor(vectors) @ q
    total = torch.zeros((), dtype=torch.float64)
    for i in np.flatnonzero(mask):
        g = torch.sigmoid((scores - scores[i]) / temperature)
        g = torch.where(torch.arange(len(scores)) == int(i), 0.0, g)
        total = total + (1.0 + g[torch.tensor(mask)].sum()) / (1.0 + g.sum())
    (grad,) = torch.autograd.grad(total / mask.sum(), q)
    return grad.numpy()


def _smooth_rank(scores, i: int, keep, temperature: float) -> float:
    """``1 + sum_(j in keep, j != i) sigmoid((s_j - s_i) / tau)``: Eq. 2 of Bleeker & de Rijke
    (2022, long version) with the indicator replaced by the sigmoid (A.1's last sentence), a
    float64 loop."""
    return 1.0 + sum(1.0 / (1.0 + np.exp(-(scores[j] - scores[i]) / temperature))
                     for j in keep if j != i)  # fmt: skip


def _smooth_ap(scores, positives: int, temperature: float) -> float:
    """SmoothAP from :func:`_smooth_rank`, the positives first: a float64 loop."""
    everyone = range(len(scores))
    return float(np.mean([_smooth_rank(scores, i, range(positives), temperature)
                          / _smooth_rank(scores, i, everyone, temperature)
                          for i in range(positives)]))  # fmt: skip


AP_PROBLEMS = 10
FINITE_TAU = 0.5


def _ap_references():
    """Scores ``[10, 7]`` of the AP problems, their AP (scikit-learn) and SmoothAP at tau = 0.5."""
    from sklearn.metrics import average_precision_score  # the reference: imported when used

    problems = [_problem(seed) for seed in range(AP_PROBLEMS)]
    scores = np.array([vectors @ query for query, vectors, _ in problems])
    exact = np.array([average_precision_score(mask, row) for (_, _, mask), row in zip(problems, scores, strict=True)])
    smooth = np.array([_smooth_ap(row, 3, FINITE_TAU) for row in scores])
    return scores, exact, smooth


def _gradient_references(temperature: float = 0.2):
    """Scores ``[8, 7]``, coordinates ``[8, 7, 3]`` and autograd gradients ``[8, 3]``."""
    problems = [_problem(seed) for seed in range(8)]
    scores = np.array([vectors @ query for query, vectors, _ in problems])
    vectors = np.array([vectors for _, vectors, _ in problems])
    gradients = np.array([_true_gradient(*problem, temperature) for problem in problems])
    return scores, vectors, gradients


def _agreement(printed, truth, tolerance: float, what: str) -> Verdict:
    """:func:`numeric_agreement` of two precomputed arrays, case by case (``what`` says which)."""
    verdict = numeric_agreement(lambda k: printed[k], lambda k: truth[k], range(len(truth)),
                                tolerance=tolerance)  # fmt: skip
    return replace(verdict, detail=f"{what}: {verdict.detail}")


# --- the checks: each is a function of the printed form ----------------------------------------


def check_definition(form: Form) -> Verdict:
    """Eq. 1 / 5 written out for 3 positives and 4 negatives: at tau = 1e-4 against scikit-learn
    AP, at tau = 0.5 against SmoothAP (Eq. 2's rank with the sigmoid) from a float64 loop."""
    scores, exact, smooth = _ap_references()
    sizes = {n_pos: 3, n_neg: 4}
    values, failed = _evaluated(lambda: [_numeric(form, "AP_q", sizes, t, scores)[0]
                                         for t in (1e-4, FINITE_TAU)])  # fmt: skip
    if failed:
        return failed
    return all_hold([_agreement(values[0], exact, 1e-6, "tau = 1e-4 vs AP"),
                     _agreement(values[1], smooth, 1e-12, "tau = 0.5 vs SmoothAP")])  # fmt: skip


def check_sigmoid_limit(form: Form) -> Verdict:
    """Eq. 2 / 6: a step at 0 in the limit tau -> 0+, symmetric (``G(z) + G(-z) = 1``, so a pair
    of candidates shares one unit of rank), finite with ``G(0) = 1/2``, a function of ``z / tau``.
    """
    g = sp.Lambda(z, form.value)
    upper = sp.limit(g(z), tau, 0, "+")
    lower = sp.limit(g(-z), tau, 0, "+")
    step = decide(
        upper == 1 and lower == 0,
        "lim_{tau->0+} G(z) = 1 and G(-z) = 0 for z > 0 (sympy.limit): a smooth step.",
        f"lim_(tau->0+) G(z) = {upper} and G(-z) = {lower} for z > 0: not a step up at 0.",
    )
    w, c = sp.Symbol("w", real=True), sp.Symbol("c", positive=True)
    at_zero = sp.limit(g(w), w, 0)
    return all_hold([
        step,
        decide(at_zero == sp.Rational(1, 2), "G(0) = 1/2.", f"G(z) -> {at_zero} as z -> 0, not 1/2."),
        symbolic_equality(g(w) + g(-w), sp.Integer(1), [w, tau]),
        symbolic_equality(form.value.subs({z: c * w, tau: c * tau}), g(w), [w, tau, c]),
    ], "step at 0, G(0) = 1/2, G(z) + G(-z) = 1, G(c z; c tau) = G(z; tau): ")  # fmt: skip


def check_sigmoid_derivative(form: Form) -> Verdict:
    return symbolic_equality(form.value, sp.diff(sigmoid(f), x), [x, tau])


_q = sp.symbols("q1:4", real=True)
_vi = sp.symbols("vi1:4", real=True)
_vj = sp.symbols("vj1:4", real=True)


def _dot(a, b):
    return sum(p * r for p, r in zip(a, b, strict=True))


def check_score_difference(form: Form) -> Verdict:
    """Eq. 4 / 8: with ``s_k = q . v_k``, is ``s_i - s_j`` the printed ``q v_i - q v_j``?"""
    scores = {s_i: _dot(_q, _vi), s_j: _dot(_q, _vj)}
    printed = form.value.subs({sp.Symbol("qv_i"): scores[s_i], sp.Symbol("qv_j"): scores[s_j]})
    return symbolic_equality(printed, (s_i - s_j).subs(scores), [*_q, *_vi, *_vj])


def check_difference_gradient(form: Form) -> Verdict:
    d_ij = _dot(_q, _vi) - _dot(_q, _vj)
    return all_hold(
        [
            symbolic_equality(form.value.subs({s_i: _vi[k], s_j: _vj[k]}), sp.diff(d_ij, _q[k]),
                              [*_q, *_vi, *_vj])
            for k in range(3)
        ],
        "each component of dD_ij/dq: ",
    )


def check_sigmoid_of_difference_gradient(form: Form) -> Verdict:
    q1, v1, w1 = sp.symbols("q1 v1 w1", real=True)
    d = q1 * v1 - q1 * w1
    g = sp.Symbol("G")
    printed = form.value.subs({g: sigmoid(d), s_i: v1, s_j: w1})
    return symbolic_equality(printed, sp.diff(sigmoid(d), q1), [q1, v1, w1, tau])


def check_sim_definition(form: Form) -> Verdict:
    g = sp.Symbol("G")
    return symbolic_equality(form.value.subs(g, sigmoid(z)), sp.diff(sigmoid(z), z), [z, tau])


RANK_SIZES = (5, 7)


def _rank_cases(seed: int = 1):
    """20 orders of 5 positives (first) and 7 negatives, scores 0.1 apart, each positive as i."""
    rng = np.random.default_rng(seed)
    orders = [rng.permutation(sum(RANK_SIZES)) * 0.1 for _ in range(20)]
    return [(scores, i) for scores in orders for i in range(RANK_SIZES[0])]


def _check_rank(form: Form, key: str) -> Verdict:
    """``R(i, S)`` of Eq. 8-9 / 12-13 written out for every positive i: at tau = 1e-4 against
    the count of candidates (of S) scored above i, at tau = 0.5 against the smoothed rank."""
    cases = _rank_cases()
    orders = np.array([scores for scores, i in cases[:: RANK_SIZES[0]]])
    sizes, positives = {n_pos: RANK_SIZES[0], n_neg: RANK_SIZES[1]}, range(1, RANK_SIZES[0] + 1)
    values, failed = _evaluated(lambda: [_numeric(form, key, sizes, t, orders, indices=tuple(positives))
                                         for t in (1e-4, FINITE_TAU)])  # fmt: skip
    if failed:
        return failed
    counted = range(sum(RANK_SIZES) if SETS[key] == S_OMEGA else RANK_SIZES[0])
    exact = [1.0 + np.sum(scores[list(counted)] > scores[i]) for scores, i in cases]
    smooth = [_smooth_rank(scores, i, counted, FINITE_TAU) for scores, i in cases]

    def printed(value):  # [positive, order] -> the cases' order (order, positive)
        return value.T.ravel()

    return all_hold([_agreement(printed(values[0]), exact, 1e-6, "tau = 1e-4 vs exact ranks"),
                     _agreement(printed(values[1]), smooth, 1e-12, "tau = 0.5 vs smoothed ranks")])  # fmt: skip


def check_rank_all(form: Form) -> Verdict:
    return _check_rank(form, "R(i, S_Omega)")


def check_rank_positives(form: Form) -> Verdict:
    return _check_rank(form, "R(i, S_P)")


def check_rank_gradient(form: Form) -> Verdict:
    """Eq. 10 / 14 relative to Eq. 4 / 8's ``D_ij = s_i - s_j``: sum of the printed terms."""
    q1, q2 = sp.symbols("q1 q2", real=True)
    v = [sp.symbols(f"v{k}_1 v{k}_2", real=True) for k in range(3)]
    scores = [q1 * a + q2 * b for a, b in v]
    rank = 1 + sum(sigmoid(scores[0] - scores[j]) for j in (1, 2))
    symbols = [q1, q2, tau, *[s for pair in v for s in pair]]
    g = sp.Symbol("G")
    verdicts = []
    for component, q in enumerate((q1, q2)):
        printed = sum(
            form.value.subs({g: sigmoid(scores[0] - scores[j]), s_i: v[0][component],
                             s_j: v[j][component]})
            for j in (1, 2)
        )
        verdicts.append(symbolic_equality(printed, sp.diff(rank, q), symbols))
    return all_hold(verdicts)


QUOTIENT_EXAMPLE = {"R_P": 1 + x, "R_Omega": 3 + x + x**2}
"""Rank-like functions (positive, growing) at which a wrong quotient rule's error is measured."""


def check_quotient_rule(form: Form) -> Verdict:
    """Eq. 11 / 15 against ``d(R_P / R_Omega)/dx`` for abstract ``R_P(x)``, ``R_Omega(x)``.

    A failure also gives the error relative to the true derivative, at x = 1, 2, 3 for the
    functions of :data:`QUOTIENT_EXAMPLE`: an absolute difference alone can look like rounding.
    """
    num, den = sp.Function("R_P")(x), sp.Function("R_Omega")(x)
    printed = form.value.subs({sp.Symbol("R_P"): num, sp.Symbol("R_Omega"): den,
                               sp.Symbol("dR_P"): sp.diff(num, x),
                               sp.Symbol("dR_Omega"): sp.diff(den, x)})  # fmt: skip
    truth = sp.diff(num / den, x)
    verdict = symbolic_equality(printed, truth, [x])
    concrete = {num: QUOTIENT_EXAMPLE["R_P"], den: QUOTIENT_EXAMPLE["R_Omega"]}
    relative, ratios = [], set()
    for point in (1, 2, 3):
        got, want = (sp.nsimplify(e.subs(concrete).doit().subs(x, point)) for e in (printed, truth))
        relative.append(abs(float((got - want) / want)))
        ratios.add(sp.simplify(got / want))
    sign_error = ratios == {-1}
    example = ", ".join(f"{k}(x) = {sp.sstr(v)}" for k, v in QUOTIENT_EXAMPLE.items())
    return decide(
        verdict.verdict == "holds",
        verdict.detail,
        f"{verdict.detail[:-1]}; relative to the true derivative that is an error of "
        f"{100 * max(relative):.0f} % (x = 1, 2, 3 with {example})"
        + (": printed = -true, a sign error, not rounding." if sign_error else "."),
    )


def check_labelled_rewrite(form: Form) -> Verdict:
    """The braces of Eq. 12 / 16 substituted into Eq. 11 / 15 with Eq. 10 / 14's labels."""
    r_p, r_o, d_o, d_p = sp.symbols("R_P R_Omega dR_Omega dR_P")
    eq11 = r_p * d_o - r_o * d_p
    by_definition = eq11.subs({r_p: A_, r_o: A_ + C_, d_o: B_ + D_, d_p: B_})
    return symbolic_equality(form.value, by_definition, [A_, B_, C_, D_])


def check_ad_cb_rewrite(form: Form) -> Verdict:
    return symbolic_equality(form.value, sp.expand(A_ * (B_ + D_) - (A_ + C_) * B_), [A_, B_, C_, D_])


def check_final_form(form: Form) -> Verdict:
    """Eq. 13-14 / 17-18 written out (3 positives, 4 negatives, 3 coordinates, tau = 0.2) for 8
    random problems, against autograd of SmoothAP."""
    scores, vectors, gradients = _gradient_references()
    printed, failed = _evaluated(
        lambda: _numeric(form, "dAP_q/dq", {n_pos: 3, n_neg: 4}, 0.2, scores, vectors)[0]
    )
    if failed:
        return failed
    errors = np.abs(printed - gradients).max(axis=1)
    worst = float(np.nanmax(errors)) if not np.isnan(errors).any() else float("nan")
    return decide(
        worst < 1e-10,
        f"equals autograd of SmoothAP to {worst:.1e} (8 random problems, tau = 0.2).",
        f"differs from autograd of SmoothAP by up to {worst:.3g} (8 random problems).",
    )


def check_a_label_001(form: Form) -> Verdict:
    """Bleeker & de Rijke (2022, long version): Eq. 16-17 use ``R(i,S_Omega) = A + C`` and
    ``R(i,S_P) = A`` with Eq. 12-13's A."""
    a = form.value["A"]
    r_omega, r_p = 1 + P_sum + N_sum, 1 + P_sum
    return all_hold([symbolic_equality(a + N_sum, r_omega, [P_sum, N_sum]),
                     symbolic_equality(a, r_p, [P_sum, N_sum])])  # fmt: skip


def check_a_label_000(form: Form) -> Verdict:
    """Bleeker & de Rijke (2022, short version): the A of Eq. 8, the A of Eq. 9 and the A that
    Eq. 12-13 use are one quantity."""
    a8, a9 = form.value["A (Eq. 8)"], form.value["A (Eq. 9)"]
    return all_hold([
        symbolic_equality(a8, a9, [P_sum, N_sum]),
        symbolic_equality(a8 + N_sum, 1 + P_sum + N_sum, [P_sum, N_sum]),
    ], "A of Eq. 8 against A of Eq. 9, then R(i,S_Omega) = A + C as Eq. 12 uses it: ")  # fmt: skip


def check_ap_with_ranks(form: Form) -> Verdict:
    ratio = sp.lambdify(sp.symbols("R_P R_Omega"), form.value, "numpy")
    rng = np.random.default_rng(3)
    cases = []
    for _ in range(20):
        scores = rng.normal(size=15)
        mask = rng.random(15) < 0.4
        mask[0] = True
        cases.append((scores, mask))

    def printed(case):
        scores, mask = case
        ranks_all = 1 + np.array([np.sum(scores > s) for s in scores])
        ranks_pos = 1 + np.array([np.sum((scores > s) & mask) for s in scores])
        return np.mean(ratio(ranks_pos[mask], ranks_all[mask]))

    from sklearn.metrics import average_precision_score  # the reference: imported when used

    return numeric_agreement(printed, lambda c: average_precision_score(c[1], c[0]), cases,
                             tolerance=1e-12)  # fmt: skip


m_ = sp.Symbol("m", integer=True, positive=True)
INDICATOR_SIZE = 10


def indicator(relation: sp.Basic) -> sp.Piecewise:
    """``1{relation}`` as a SymPy ``Piecewise``.

    Example:
        >>> indicator(sp.StrictLessThan(s_ix[i_] - s_ix[j_], 0))
        Piecewise((1, s[i] - s[j] < 0), (0, True))
    """
    return sp.Piecewise((1, relation), (0, True))


def _tied_rank_cases(seed: int):
    """20 score vectors of 10 candidates with ties (integers 0..5), every candidate as i."""
    rng = np.random.default_rng(seed)
    vectors = [rng.integers(0, 6, size=INDICATOR_SIZE).astype(float) for _ in range(20)]
    return [(scores, i) for scores in vectors for i in range(INDICATOR_SIZE)]


def _check_indicator_rank(form: Form, seed: int) -> Verdict:
    """``R(i, S)`` written out for 10 candidates, every i, scores with ties, against the rank
    read off a descending sort: 1 + the position of the first score equal to ``s_i``. A
    sigmoid ``G`` in the form is evaluated at tau = 1."""
    cases = _tied_rank_cases(seed)
    vectors = np.array([scores for scores, _ in cases[::INDICATOR_SIZE]])
    everyone = tuple(range(1, INDICATOR_SIZE + 1))
    value, failed = _evaluated(lambda: _numeric(form, "R(i, S)", {m_: INDICATOR_SIZE}, 1.0, vectors,
                                                indices=everyone))  # fmt: skip
    if failed:
        return failed
    truth = [1 + int(np.flatnonzero(np.sort(scores)[::-1] == scores[i])[0]) for scores, i in cases]
    verdict = numeric_agreement(lambda k: value.T.ravel()[k], lambda k: truth[k],
                                range(len(truth)), tolerance=0.0)  # fmt: skip
    return verdict


def check_exact_rank(form: Form) -> Verdict:
    """Eq. 2 of Bleeker & de Rijke (2022, long version) against the rank read off a sort (ties
    share the best rank)."""
    return _check_indicator_rank(form, 6)


def check_matrix_difference(form: Form) -> Verdict:
    matrix, stated = form.value["D"], form.value["D_ij"]
    s = sp.symbols("s1:4")
    try:
        verdicts = [
            symbolic_equality(stated.subs({s_i: s[i], s_j: s[j]}, simultaneous=True), matrix[i, j],
                              list(s))
            for i in range(3) for j in range(3) if i != j
        ]
    except (GradlabError, TypeError) as error:  # a symbol other than s_i, s_j, s1..s3 left
        return undecided(f"the form does not evaluate for s1..s3: {error}")
    return all_hold(verdicts, "entry (i, j) of the printed matrix against the stated D_ij: ")  # fmt: skip


def check_indicator_rank(form: Form) -> Verdict:
    """Eq. 4 of Bleeker & de Rijke (2022, long version): ``1 + sum 1{D_ij > 0}`` against Eq. 2's
    rank, and the form's ``D_ij`` against entry (i, j) of Eq. 3's matrix as drawn (rows of scores
    minus columns of scores)."""
    scores = np.random.default_rng(5).normal(size=(1, INDICATOR_SIZE))
    ones = np.ones((INDICATOR_SIZE, 1))
    drawn = ones @ scores - scores.T @ ones.T
    pairs = [(a, b) for a in range(1, INDICATOR_SIZE + 1) for b in range(1, INDICATOR_SIZE + 1)]

    def entries():
        evaluator = _Evaluator(form.value, {m_: INDICATOR_SIZE}, 1.0, scores)
        return [float(np.asarray(evaluator.value(D_ix[a, b], {})).ravel()[0]) for a, b in pairs]

    printed, failed = _evaluated(entries)
    if failed:
        return failed
    matrix = _agreement(printed, [drawn[a - 1, b - 1] for a, b in pairs], 1e-12,
                        "D_ij against Eq. 3's matrix as drawn")  # fmt: skip
    return all_hold([_check_indicator_rank(form, 4), matrix])


# --- plausible slips: mutants of the accepted form that a reader of the chain would make ------


def _ap_slips(ap: Form) -> tuple[Form, ...]:
    """Eq. 1 / 5 (accepted form) with the 1 + of the numerator dropped, with j = i counted, with
    the negatives' sum starting at the last positive, without the 1/|S_P|."""
    positives_all = sp.Sum(G_IJ, (j_, 1, n_pos))
    negatives_from = sp.Sum(G_IJ, (j_, n_pos, n_pos + n_neg))
    return (
        with_parameters(ap, "1 + dropped from the numerator",
                        AP_q=sp.Sum(over_positives(G_IJ) / R_OMEGA_SUMS, (i_, 1, n_pos)) / n_pos),
        with_parameters(ap, "j = i counted", AP_q=sp.Sum(
            (1 + positives_all) / (1 + positives_all + over_negatives(G_IJ)), (i_, 1, n_pos)) / n_pos),
        with_parameters(ap, "negatives' sum from j = n_P", AP_q=sp.Sum(
            R_P_SUMS / (1 + over_positives(G_IJ) + negatives_from), (i_, 1, n_pos)) / n_pos),
        with_parameters(ap, "1/|S_P| dropped", AP_q=AP_SUMS * n_pos),
    )  # fmt: skip


def _rank_slips(rank: Form, key: str) -> tuple[Form, ...]:
    """Eq. 8-9 / 12-13 (accepted form) with the 1 + dropped, with j = i counted, with the sum
    over the positives stopping one short."""
    expression = rank.value[key]
    return (
        with_parameters(rank, "1 + dropped", **{key: expression - 1}),
        with_parameters(rank, "j = i counted",
                        **{key: expression.xreplace({1 - sp.KroneckerDelta(i_, j_): 1})}),
        with_parameters(rank, "positives' sum stops at n_P - 1",
                        **{key: expression.xreplace({(j_, 1, n_pos): (j_, 1, n_pos - 1)})}),
    )  # fmt: skip


def _final_slips(final: Form) -> tuple[Form, ...]:
    """Eq. 13-14 / 17-18 (accepted form) with R for R^2, with the 1 + of R(i, S_P) dropped, with
    B and D swapped; Eq. 14 / 18 also with C = R(i, S_N), without the -1."""
    expression = final.value["dAP_q/dq"]
    slips = [
        with_parameters(final, "R(i, S_Omega) for R(i, S_Omega)^2", **{
            "dAP_q/dq": expression.xreplace({R_(i_, S_OMEGA) ** -2: 1 / R_(i_, S_OMEGA)})}),
        with_parameters(final, "1 + dropped from R(i, S_P)", **{"R(i, S_P)": R_P_SUMS - 1}),
        with_parameters(final, "B and D swapped", **{"dAP_q/dq": expression.xreplace({
            over_positives(SIM_IJ): over_negatives(SIM_IJ),
            over_negatives(SIM_IJ): over_positives(SIM_IJ)})}),
    ]
    if R_(i_, S_N) in expression.atoms(sp.Function):
        slips.append(with_parameters(final, "C = R(i, S_N), the -1 dropped", **{
            "dAP_q/dq": expression.xreplace({R_(i_, S_N) - 1: R_(i_, S_N)})}))
    return tuple(slips)


def _indicator_slip(form: Form, relation: sp.Basic, name: str) -> Form:
    """Eq. 2 / 4 with the indicator's relation replaced."""
    rank = form.value["R(i, S)"]
    (old,) = rank.atoms(sp.Piecewise)  # SymPy folds the j != i factor into its first piece
    new = sp.Piecewise((old.args[0][0], relation), (0, True))
    return with_parameters(form, name, **{"R(i, S)": rank.xreplace({old: new})})


# --- the claims ------------------------------------------------------------------------------


def _chain(seed: str, offset: int) -> list[Claim]:
    n = {key: number + offset for key, number in CHAIN.items()}
    sj_si = {"D_ij": D_RANK}

    def label(key):
        return f"eq{n[key]}"

    def form(value, name_of_lhs="", context=""):
        return Form(value, lhs=name_of_lhs, context=context)

    definition = form({"AP_q": AP_SUMS, "D_ij": D_PRINTED},
                      context=f"SmoothAP (Eq. {n['def']}); {RANGES}")  # fmt: skip
    g_form = form(sigmoid(z), "G(z; tau)")
    g = sigmoid(f)
    dg_form = form(g * (1 - g) / tau * sp.diff(f, x), "dG(f(x); tau)/dx")
    qv_i, qv_j = sp.symbols("qv_i qv_j")
    d_form = form(qv_i - qv_j, "D_ij = s_i - s_j")
    dd_form = form(s_i - s_j, "dD_ij/dq (componentwise, s -> v)")
    gsym = sp.Symbol("G")
    dgd_form = form(gsym * (1 - gsym) / tau * (s_i - s_j), "dG(D_ij)/dq (componentwise, s -> v)")
    sim_form = form(gsym * (1 - gsym) / tau, "sim(D_ij, tau)")
    r_omega = form({"R(i, S_Omega)": R_OMEGA_SUMS, "D_ij": D_PRINTED},
                   context=f"Eq. {n['R_omega']}, D_ij of Eq. {n['D']}; {RANGES}")  # fmt: skip
    r_p = form({"R(i, S_P)": R_P_SUMS, "D_ij": D_PRINTED},
               context=f"Eq. {n['R_p']}, D_ij of Eq. {n['D']}; {RANGES}")  # fmt: skip
    dr_form = form(gsym * (1 - gsym) / tau * (s_i - s_j),
                   f"summand of dR(i,S_Omega)/dq = B + D (Eq. {n['dR']}), s -> v")  # fmt: skip
    r_p_s, r_o_s, dr_p, dr_o = sp.symbols("R_P R_Omega dR_P dR_Omega")
    quotient = form((r_p_s * dr_o - r_o_s * dr_p) / r_o_s**2, "dAP_i/dq")
    labelled = form(A_ * (B_ + D_) - (A_ + C_) * D_, f"numerator of Eq. {n['labels']} by its braces")
    final_context = (f"A = R(i, S_P), C = sum_N G(D_ij), B and D the sums over S_P and S_N of "
                     f"sim(D_ij)(v_i - v_j), R(i, S) as Eq. {n['R_omega']}-{n['R_p']} define it, "
                     f"D_ij of Eq. {n['D']}; {RANGES}")  # fmt: skip
    ranks = {"R(i, S_Omega)": R_OMEGA_SUMS, "R(i, S_P)": R_P_SUMS}
    # built here, not at import: a module constant or a cache would be computed once before a
    # mutation run forks its workers, so no mutant of these helpers would ever run
    final_13, final_14 = (_final_expression(over_negatives(G_IJ)),
                          _final_expression(R_(i_, S_N) - 1))  # fmt: skip
    final = form({"dAP_q/dq": final_13, **ranks, "D_ij": D_PRINTED},
                 context=f"Eq. {n['final']}: {final_context}")  # fmt: skip
    negatives = form({"dAP_q/dq": final_14, **ranks, "R(i, S_N)": R_N_SUMS, "D_ij": D_PRINTED},
                     context=f"Eq. {n['negatives']}, C written as R(i, S_N) - 1: "
                     f"{final_context}")  # fmt: skip
    rank_note = ("The tau -> 0 limit is checked at tau = 1e-4 (and tau = 0.5 against the "
                 f"sigmoid-smoothed rank); with D_ij = s_i - s_j (Eq. {n['D']}) "
                 "G(D_ij) ~ 1 when j ranks *below* i, so the sum counts the wrong side.")  # fmt: skip
    if seed == SEED_000:
        rn_note = ("The short version never defines R(i, S_N); read like Eq. 8-9 as "
                   "1 + sum_N G(D_ij) (as the long version's Eq. 2 defines R(i, S) for any set), "
                   "so C = R(i, S_N) - 1 and Eq. 14 has the status of Eq. 13.")  # fmt: skip
    else:
        long = SEEDS[SEED_001]
        rn_note = (f"Eq. 2 of {long.authors} ({long.year}, {long.part}) defines R(i, S) for any "
                   "set S, so R(i, S_N) - 1 = C is defined and "
                   "Eq. 18 has the status of Eq. 17.")  # fmt: skip
    swap = {s_i: s_j, s_j: s_i}
    ap, r_o, r_p_c = (with_parameters(f, "corrected", **sj_si) for f in (definition, r_omega, r_p))
    final_c, negatives_c = (with_parameters(f, "corrected", **sj_si) for f in (final, negatives))
    claims = [
        Claim(seed, label("def"), "SmoothAP is a smooth approximation of AP", definition,
              check_definition, "float64: tau = 1e-4 vs scikit-learn AP, tau = 0.5 vs SmoothAP",
              correction=ap, mutants=_ap_slips(ap), cause=SIGN_CONVENTION,
              note=rank_note),
        Claim(seed, label("G"), "G is a smooth step in z / tau, symmetric about 0", g_form, check_sigmoid_limit, "sympy.limit",
              mutants=(mutant(g_form, 1 / (1 + sp.exp(z / tau)), "exponent sign flipped"),)),
        Claim(seed, label("dG"), "derivative of G", dg_form, check_sigmoid_derivative,
              "sympy.diff + simplify", mutants=(negated(dg_form), scaled(dg_form, tau))),
        Claim(seed, label("D"), "score difference", d_form, check_score_difference,
              "sympy identity with s_k = q . v_k",
              mutants=(substituted(d_form, {qv_i: qv_j, qv_j: qv_i}, "v_i and v_j swapped"),),
              note=f"An identity of the definitions; its sign makes G(D_ij) ~ 1 when j ranks below "
              f"i, which Eq. {n['R_omega']}-{n['R_p']} get wrong."),
        Claim(seed, label("dD"), "gradient of the score difference", dd_form,
              check_difference_gradient, "sympy.diff",
              mutants=(substituted(dd_form, swap, "v_i and v_j swapped"), scaled(dd_form, 2))),
        Claim(seed, label("dGD"), "gradient of G(D_ij)", dgd_form,
              check_sigmoid_of_difference_gradient, "sympy.diff + simplify",
              mutants=(negated(dgd_form), scaled(dgd_form, tau))),
        Claim(seed, label("sim"), "definition of sim = dG/dD", sim_form, check_sim_definition,
              "sympy.diff", mutants=(scaled(sim_form, tau), negated(sim_form))),
        Claim(seed, label("R_omega"), "R(i, S_Omega) is the rank of i among all candidates",
              r_omega, check_rank_all, "float64: tau = 1e-4 vs exact ranks, tau = 0.5 vs smoothed ranks",
              correction=r_o, mutants=_rank_slips(r_o, "R(i, S_Omega)"), cause=SIGN_CONVENTION,
              note=rank_note),
        Claim(seed, label("R_p"), "R(i, S_P) is the rank of i among positives", r_p,
              check_rank_positives, "float64: tau = 1e-4 vs exact ranks, tau = 0.5 vs smoothed ranks",
              correction=r_p_c, mutants=_rank_slips(r_p_c, "R(i, S_P)"), note=rank_note,
              cause=SIGN_CONVENTION),
        Claim(seed, label("dR"), "gradient of R(i, S_Omega)", dr_form, check_rank_gradient,
              "sympy.diff + simplify (3 candidates, d = 2)",
              mutants=(substituted(dr_form, swap, "v_i and v_j swapped"),),
              note=f"Relative to Eq. {n['D']}'s D_ij = s_i - s_j; under the rank convention "
              "D_ij = s_j - s_i the gradient is -(B + D)."),
        Claim(seed, label("quotient"), "quotient rule for dAP/dq", quotient, check_quotient_rule,
              "sympy.diff on abstract functions",
              correction=negated(quotient), cause="quotient rule reversed", mutants=(
                  scaled(negated(quotient), r_o_s), substituted(
                      negated(quotient), {dr_p: dr_o, dr_o: dr_p}, "dR_P and dR_Omega swapped"),
                  mutant(quotient, (r_o_s * dr_p - r_p_s * dr_o) / r_p_s**2, "R_P^2 below")),
              note=f"The printed numerator R_P dR_Omega - R_Omega dR_P of Eq. {n['quotient']} is the "
              "negative of the quotient rule for d(R_P / R_Omega)/dq."),
        Claim(seed, label("labels"), f"Eq. {n['quotient']} with the A, B, C, D braces", labelled,
              check_labelled_rewrite, "sympy identity",
              correction=mutant(labelled, A_ * (B_ + D_) - (A_ + C_) * B_, "corrected"),
              cause="brace B labelled D", mutants=(
                  mutant(labelled, A_ * (B_ + D_) - A_ * B_, "A for the brace A + C"),
                  mutant(labelled, A_ * B_ - (A_ + C_) * B_, "B for the brace B + D"),
                  mutant(labelled, A_ * (B_ + D_) - (A_ + C_) * (B_ + D_), "B + D for B")),
              note=f"Eq. {n['dR']} calls sum_(j in P, j != i) sim(D_ij)(v_i - v_j) B; the last "
              f"brace of Eq. {n['labels']} calls it D."),
        Claim(seed, label("final"), "final AD - CB form of dAP/dq", final, check_final_form,
              "float64 vs autograd of SmoothAP",
              correction=final_c, mutants=_final_slips(final_c), cause=SIGN_CONVENTION,
              note=f"With ranks G(s_j - s_i) for A, C, R and B, D exactly as printed the form is "
              f"exact: the sign slip of Eq. {n['D']} and the reversed quotient rule of Eq. "
              f"{n['quotient']} cancel."),
        Claim(seed, label("negatives"), "final form with R(i, S_N)", negatives, check_final_form,
              "float64 vs autograd of SmoothAP",
              correction=negatives_c, mutants=_final_slips(negatives_c), cause=SIGN_CONVENTION,
              note=rn_note),
    ]  # fmt: skip
    rewrite = Form(A_ * D_ - C_ * B_, lhs="A (B + D) - (A + C) B")
    claims.append(
        Claim(seed, "claim-ad-cb-rewrite", f"the rewrite of Eq. {n['labels']}", rewrite,
              check_ad_cb_rewrite, "sympy.expand",
              mutants=(mutant(rewrite, A_ * D_ + C_ * B_, "CB sign flipped"), negated(rewrite)))
    )  # fmt: skip
    return claims


def claims() -> list[Claim]:
    """The audited claims of Bleeker & de Rijke (2022), appendix A and appendices A-B."""
    records = _chain(SEED_000, 0) + _chain(SEED_001, 4)
    a000 = Form({"A (Eq. 8)": 1 + P_sum, "A (Eq. 9)": P_sum},
                context="the brace A over R(i, S_Omega) (Eq. 8) and over R(i, S_P) (Eq. 9)")  # fmt: skip
    a001 = Form({"A": P_sum}, context="the brace A of Eq. 12-13 (over the sum alone), used as "
                "R(i,S_P) = A and R(i,S_Omega) = A + C in Eq. 16-17")  # fmt: skip
    ap = Form(sp.Symbol("R_P") / sp.Symbol("R_Omega"), lhs="summand of AP_q (Eq. 1)")
    over_s = (j_, 1, m_)
    rank = Form({"R(i, S)": 1 + sp.Sum((1 - sp.KroneckerDelta(i_, j_))
                                       * indicator(sp.StrictLessThan(s_ix[i_] - s_ix[j_], 0)), over_s)},
                context="Eq. 2; S: j = 1..m, KroneckerDelta(i, j) for i != j")  # fmt: skip
    s = sp.symbols("s1:4")
    ones = sp.ones(3, 1)
    matrix = ones * sp.Matrix([list(s)]) - sp.Matrix(s) * ones.T
    d3 = Form({"D": sp.ImmutableMatrix(matrix), "D_ij": s_i - s_j},
              context="Eq. 3 for m = 3, stated D_ij")  # fmt: skip
    d4 = Form({"R(i, S)": 1 + sp.Sum((1 - sp.KroneckerDelta(i_, j_))
                                     * indicator(sp.StrictGreaterThan(D_ix[i_, j_], 0)), over_s),
               "D_ij": D_RANK},
              context="Eq. 4 with D as Eq. 3 draws it (entry (i, j) = s_j - s_i); S: j = 1..m, "
              "KroneckerDelta(i, j) for i != j")  # fmt: skip
    records += [
        Claim(SEED_000, "claim-label-a", "the short version labels A consistently (Eq. 8, 9, 12-13)",
              a000, check_a_label_000, "sympy identity",
              correction=with_parameters(a000, "corrected", **{"A (Eq. 9)": 1 + P_sum}),
              cause="brace A over the sum without its 1", mutants=(
                  with_parameters(a000, "Eq. 8 brace over the sum alone",
                                  **{"A (Eq. 8)": P_sum, "A (Eq. 9)": 1 + P_sum}),
                  with_parameters(a000, "both braces over the sum alone", **{"A (Eq. 8)": P_sum}),
                  with_parameters(a000, "Eq. 9 brace over 1 + sum_P + sum_N",
                                  **{"A (Eq. 8)": 1 + P_sum, "A (Eq. 9)": 1 + P_sum + N_sum})),
              note="Eq. 8 puts A over 1 + sum_P G(D_ij), Eq. 9 over the sum alone; Eq. 12-13 use "
              "R(i, S_P) = A, which is Eq. 8's reading."),
        Claim(SEED_001, "claim-label-a", "the brace A of Eq. 12-13 is the A of Eq. 16-17", a001,
              check_a_label_001, "sympy identity",
              correction=with_parameters(a001, "corrected", A=1 + P_sum),
              cause="brace A over the sum without its 1", mutants=(
                  with_parameters(a001, "A over the whole rank", A=1 + P_sum + N_sum),
                  with_parameters(a001, "A over 1 + sum_N", A=1 + N_sum)),
              note="Eq. 16-17 need A = 1 + sum_P G(D_ij), not the sum alone as Eq. 12-13 label it "
              "(the short version's Eq. 8 has it right, its Eq. 9 does not)."),
        Claim(SEED_001, "eq1", "AP from ranks", ap, check_ap_with_ranks,
              "float64 vs scikit-learn AP (exact ranks, no ties)",
              mutants=(mutant(ap, sp.Symbol("R_Omega") / sp.Symbol("R_P"), "ratio inverted"),)),
        Claim(SEED_001, "eq2", "the rank", rank, check_exact_rank,
              "exact integer ranks vs sorting (scores with ties)", mutants=(
                  _indicator_slip(rank, sp.StrictLessThan(s_ix[j_] - s_ix[i_], 0),
                                  "s_i and s_j swapped"),
                  _indicator_slip(rank, sp.LessThan(s_ix[i_] - s_ix[j_], 0), "<= for <: ties count"),
                  with_parameters(rank, "1 + dropped", **{"R(i, S)": rank.value["R(i, S)"] - 1}))),
        Claim(SEED_001, "eq3", "the difference matrix has D_ij = s_i - s_j", d3,
              check_matrix_difference, "sympy.Matrix",
              correction=with_parameters(d3, "corrected", D_ij=s_j - s_i), cause=SIGN_CONVENTION,
              mutants=(
                  with_parameters(d3, "matrix transposed", D=sp.ImmutableMatrix(matrix.T),
                                  D_ij=s_j - s_i),
                  with_parameters(d3, "D_ij = s_j", D_ij=s_j)),
              note="The printed matrix has entry (i, j) = s_j - s_i, not the s_i - s_j the text "
              "states; the matrix is the rank convention that Eq. 4 needs."),
        Claim(SEED_001, "eq4", "rank from D", d4, check_indicator_rank,
              "exact integer ranks vs sorting (scores with ties)", mutants=(
                  with_parameters(d4, "D_ij as the text states it", D_ij=D_PRINTED),
                  _indicator_slip(d4, sp.GreaterThan(D_ix[i_, j_], 0), ">= for >: ties count"),
                  with_parameters(d4, "1 + dropped", **{"R(i, S)": d4.value["R(i, S)"] - 1})),
              note="Not charged: with D as Eq. 3 draws it (entry (i, j) = s_j - s_i) Eq. 4 "
              "reproduces Eq. 2's rank, ties included. The clash with the text's D_ij = s_i - s_j "
              "is Eq. 3's, and counted there."),
    ]  # fmt: skip
    return records
