"""Audit of the SmoothAP derivation of Bleeker & de Rijke (2022), appendix A: short and long version.

Both versions print the same chain with different numbers (the long one's = the short one's + 4
from Eq. 1 on), so each claim is built once per version and every detail cites that version's own
numbers (short: Eq. 1-14, long: Eq. 1-18). The true SmoothAP is the rank-counting definition
of the long version, Eq. 2, smoothed: candidate ``j`` counts against positive ``i`` through
``G(s_j - s_i)``; its true gradient is autograd of that definition, transcribed here (not taken
from gradlab.functional).
"""

from __future__ import annotations

import numpy as np
import sympy as sp
import torch
from scipy.special import expit
from sklearn.metrics import average_precision_score

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
    with_parameters,
)

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
CHAIN = {"def": 1, "G": 2, "dG": 3, "D": 4, "dD": 5, "dGD": 6, "sim": 7, "R_omega": 8,
         "R_p": 9, "dR": 10, "quotient": 11, "labels": 12, "final": 13, "negatives": 14}  # fmt: skip


def sigmoid(value, temperature=tau):
    return 1 / (1 + sp.exp(-value / temperature))


# --- numeric transcriptions (float64) ------------------------------------------------------


def _problem(seed: int, positives: int = 3, negatives: int = 4, dims: int = 3):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=dims) * 0.4
    vectors = rng.normal(size=(positives + negatives, dims)) * 0.4
    mask = np.array([True] * positives + [False] * negatives)
    return query, vectors, mask


def _difference(form: Form):
    """``D(s_i, s_j)`` as printed, vectorised over ``s_j``."""
    function = sp.lambdify((s_i, s_j), form.value["D_ij"], "numpy")
    return lambda scores, i: np.asarray(function(scores[i], scores), dtype=float)


def _smooth_ap(scores, mask, temperature, difference):
    """Eq. 1 (000) / Eq. 5 (001) with the printed ``D_ij``."""
    total = 0.0
    for i in np.flatnonzero(mask):
        g = expit(difference(scores, i) / temperature)
        g[i] = 0.0
        total += (1.0 + g[mask].sum()) / (1.0 + g.sum())
    return total / mask.sum()


def _true_gradient(query, vectors, mask, temperature):
    """Autograd of SmoothAP (rank convention, 001 Eq. 2 smoothed) w.r.t. the query, float64."""
    q = torch.tensor(query, requires_grad=True)
    scores = torch.tensor(vectors) @ q
    total = torch.zeros((), dtype=torch.float64)
    for i in np.flatnonzero(mask):
        g = torch.sigmoid((scores - scores[i]) / temperature)
        g = torch.where(torch.arange(len(scores)) == int(i), 0.0, g)
        total = total + (1.0 + g[torch.tensor(mask)].sum()) / (1.0 + g.sum())
    (grad,) = torch.autograd.grad(total / mask.sum(), q)
    return grad.numpy()


def _final_form(form: Form, query, vectors, mask, temperature):
    """Eq. 13 (000) / 17 (001), or 14 / 18 with ``C`` written through ``R(i, S_N)``.

    ``A``, ``C`` (and ``R(i, S_N) = 1 + sum_N G``, the set rank of 001 Eq. 2) use the printed
    ``D_ij``; ``B``, ``D`` use ``sim (v_i - v_j)`` as printed; the numerator is the printed one.
    """
    difference = _difference(form)
    numerator = sp.lambdify((A_, B_, C_, D_), form.value["numerator"], "numpy")
    c_of = sp.lambdify((C_, R_N), form.value.get("C", C_), "numpy")
    scores = vectors @ query
    grad = np.zeros_like(query)
    for i in np.flatnonzero(mask):
        g = expit(difference(scores, i) / temperature)
        slope = g * (1 - g) / temperature
        positive, negative = mask & (np.arange(len(scores)) != i), ~mask
        a = 1.0 + g[positive].sum()
        c_true = g[negative].sum()
        c = c_of(c_true, 1.0 + c_true)
        b_vec = (slope[positive, None] * (vectors[i] - vectors[positive])).sum(axis=0)
        d_vec = (slope[negative, None] * (vectors[i] - vectors[negative])).sum(axis=0)
        grad += numerator(a, b_vec, c, d_vec) / (a + c_true) ** 2
    return grad / mask.sum()


def _exact_rank_cases(seed: int = 1):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(20):
        scores = rng.permutation(12) * 0.1
        mask = rng.random(12) < 0.5
        mask[0] = True
        cases.append((scores, mask, int(np.flatnonzero(mask)[0])))
    return cases


# --- the checks: each is a function of the printed form ----------------------------------------


def check_definition(form: Form) -> Verdict:
    difference = _difference(form)
    cases = [_problem(seed) for seed in range(10)]
    return numeric_agreement(
        lambda c: _smooth_ap(c[1] @ c[0], c[2], 1e-4, difference),
        lambda c: average_precision_score(c[2], c[1] @ c[0]),
        cases,
        tolerance=1e-6,
    )


def check_sigmoid_limit(form: Form) -> Verdict:
    g = sp.Lambda(z, form.value)
    upper = sp.limit(g(z), tau, 0, "+")
    lower = sp.limit(g(-z), tau, 0, "+")
    return decide(
        upper == 1 and lower == 0,
        "lim_{tau->0+} G(z) = 1 and G(-z) = 0 for z > 0 (sympy.limit): a smooth step.",
        f"lim_(tau->0+) G(z) = {upper} and G(-z) = {lower} for z > 0: not a step up at 0.",
    )


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


def _check_rank(form: Form, only_positives: bool) -> Verdict:
    difference = _difference(form)

    def printed(case):
        scores, mask, i = case
        keep = mask if only_positives else np.ones_like(mask)
        g = expit(difference(scores, i) / 1e-4)
        g[i] = 0.0
        return 1.0 + g[keep].sum()

    def true_rank(case):
        scores, mask, i = case
        keep = mask if only_positives else np.ones_like(mask)
        return 1.0 + np.sum((scores > scores[i]) & keep)

    return numeric_agreement(printed, true_rank, _exact_rank_cases(), tolerance=1e-6)


def check_rank_all(form: Form) -> Verdict:
    return _check_rank(form, only_positives=False)


def check_rank_positives(form: Form) -> Verdict:
    return _check_rank(form, only_positives=True)


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


def check_quotient_rule(form: Form) -> Verdict:
    num, den = sp.Function("R_P")(x), sp.Function("R_Omega")(x)
    printed = form.value.subs({sp.Symbol("R_P"): num, sp.Symbol("R_Omega"): den,
                               sp.Symbol("dR_P"): sp.diff(num, x),
                               sp.Symbol("dR_Omega"): sp.diff(den, x)})  # fmt: skip
    return symbolic_equality(printed, sp.diff(num / den, x), [x])


def check_labelled_rewrite(form: Form) -> Verdict:
    """The braces of Eq. 12 / 16 substituted into Eq. 11 / 15 with Eq. 10 / 14's labels."""
    r_p, r_o, d_o, d_p = sp.symbols("R_P R_Omega dR_Omega dR_P")
    eq11 = r_p * d_o - r_o * d_p
    by_definition = eq11.subs({r_p: A_, r_o: A_ + C_, d_o: B_ + D_, d_p: B_})
    return symbolic_equality(form.value, by_definition, [A_, B_, C_, D_])


def check_ad_cb_rewrite(form: Form) -> Verdict:
    return symbolic_equality(form.value, sp.expand(A_ * (B_ + D_) - (A_ + C_) * B_), [A_, B_, C_, D_])


def check_final_form(form: Form) -> Verdict:
    cases = [(*_problem(seed), 0.2) for seed in range(8)]
    worst = max(
        float(np.max(np.abs(_final_form(form, *c) - _true_gradient(*c)))) for c in cases
    )
    return decide(
        worst < 1e-10,
        f"equals autograd of SmoothAP to {worst:.1e} (8 random problems, tau = 0.2).",
        f"differs from autograd of SmoothAP by up to {worst:.3g} (8 random problems).",
    )


def check_a_label_001(form: Form) -> Verdict:
    """001: Eq. 16-17 use ``R(i,S_Omega) = A + C`` and ``R(i,S_P) = A`` with Eq. 12-13's A."""
    a = form.value["A"]
    r_omega, r_p = 1 + P_sum + N_sum, 1 + P_sum
    return all_hold([symbolic_equality(a + N_sum, r_omega, [P_sum, N_sum]),
                     symbolic_equality(a, r_p, [P_sum, N_sum])])  # fmt: skip


def check_a_label_000(form: Form) -> Verdict:
    """000: the A of Eq. 8, the A of Eq. 9 and the A that Eq. 12-13 use are one quantity."""
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

    return numeric_agreement(printed, lambda c: average_precision_score(c[1], c[0]), cases,
                             tolerance=1e-12)  # fmt: skip


def _indicator_rank(relation):
    function = sp.lambdify((s_i, s_j), relation, "numpy")
    return lambda scores, i: 1 + int(np.sum(function(scores[i], np.delete(scores, i))))


def check_exact_rank(form: Form) -> Verdict:
    rank = _indicator_rank(form.value)
    rng = np.random.default_rng(6)
    cases = [(rng.normal(size=12), int(rng.integers(12))) for _ in range(20)]

    def from_sorting(case):
        scores, i = case
        return 1 + int(np.flatnonzero(np.argsort(-scores, kind="stable") == i)[0])

    return numeric_agreement(lambda c: rank(*c), from_sorting, cases, tolerance=0.0)


def check_matrix_difference(form: Form) -> Verdict:
    matrix, stated = form.value["D"], form.value["D_ij"]
    s = sp.symbols("s1:4")
    return all_hold([
        symbolic_equality(stated.subs({s_i: s[i], s_j: s[j]}, simultaneous=True), matrix[i, j], list(s))
        for i in range(3) for j in range(3) if i != j
    ], "entry (i, j) of the printed matrix against the stated D_ij: ")  # fmt: skip


def check_indicator_rank(form: Form) -> Verdict:
    """001 Eq. 4: ``1 + sum 1{D_ij > 0}`` with the stated ``D_ij`` against Eq. 2's rank."""
    relation = sp.StrictGreaterThan(form.value["D_ij"], 0)
    rank = _indicator_rank(relation)
    rng = np.random.default_rng(4)
    cases = [(rng.permutation(10).astype(float), int(rng.integers(10))) for _ in range(20)]
    return numeric_agreement(lambda c: rank(*c), lambda c: 1 + np.sum(c[0] > c[0][c[1]]), cases,
                             tolerance=0.0)  # fmt: skip


# --- the claims ------------------------------------------------------------------------------


def _chain(seed: str, offset: int) -> list[Claim]:
    n = {key: number + offset for key, number in CHAIN.items()}
    sj_si = {"D_ij": s_j - s_i}

    def label(key):
        return f"eq{n[key]}"

    def form(value, name_of_lhs="", context=""):
        return Form(value, lhs=name_of_lhs, context=context)

    definition = form({"D_ij": s_i - s_j}, context=f"AP_q = 1/|S_P| sum_i (1 + sum_P G(D_ij)) / "
                      f"(1 + sum_P G(D_ij) + sum_N G(D_ij)) (Eq. {n['def']})")  # fmt: skip
    g_form = form(sigmoid(z), "G(z; tau)")
    g = sigmoid(f)
    dg_form = form(g * (1 - g) / tau * sp.diff(f, x), "dG(f(x); tau)/dx")
    qv_i, qv_j = sp.symbols("qv_i qv_j")
    d_form = form(qv_i - qv_j, "D_ij = s_i - s_j")
    dd_form = form(s_i - s_j, "dD_ij/dq (componentwise, s -> v)")
    gsym = sp.Symbol("G")
    dgd_form = form(gsym * (1 - gsym) / tau * (s_i - s_j), "dG(D_ij)/dq (componentwise, s -> v)")
    sim_form = form(gsym * (1 - gsym) / tau, "sim(D_ij, tau)")
    r_omega = form({"D_ij": s_i - s_j}, context=f"R(i, S_Omega) = 1 + sum_P G(D_ij) + sum_N "
                   f"G(D_ij) (Eq. {n['R_omega']}), D_ij of Eq. {n['D']}")  # fmt: skip
    r_p = form({"D_ij": s_i - s_j}, context=f"R(i, S_P) = 1 + sum_P G(D_ij) (Eq. {n['R_p']}), "
               f"D_ij of Eq. {n['D']}")  # fmt: skip
    dr_form = form(gsym * (1 - gsym) / tau * (s_i - s_j),
                   f"summand of dR(i,S_Omega)/dq = B + D (Eq. {n['dR']}), s -> v")  # fmt: skip
    r_p_s, r_o_s, dr_p, dr_o = sp.symbols("R_P R_Omega dR_P dR_Omega")
    quotient = form((r_p_s * dr_o - r_o_s * dr_p) / r_o_s**2, "dAP_i/dq")
    labelled = form(A_ * (B_ + D_) - (A_ + C_) * D_, f"numerator of Eq. {n['labels']} by its braces")
    final_context = (f"dAP/dq = 1/|S_P| sum_i numerator / R(i,S_Omega)^2, A, C, R with Eq. "
                     f"{n['D']}'s D_ij; B, D with sim (v_i - v_j)")  # fmt: skip
    final = form({"D_ij": s_i - s_j, "numerator": A_ * D_ - C_ * B_}, context=final_context)
    negatives = form({"D_ij": s_i - s_j, "numerator": A_ * D_ - C_ * B_, "C": R_N - 1},
                     context=final_context + "; C written as R(i, S_N) - 1")  # fmt: skip
    rank_note = (f"The tau -> 0 limit is checked at tau = 1e-4; with D_ij = s_i - s_j (Eq. {n['D']}) "
                 "G(D_ij) ~ 1 when j ranks *below* i, so the sum counts the wrong side.")  # fmt: skip
    if seed == SEED_000:
        rn_note = ("000 never defines R(i, S_N); read like Eq. 8-9 as 1 + sum_N G(D_ij) (as 001 "
                   "Eq. 2 defines R(i, S) for any set), so C = R(i, S_N) - 1 and Eq. 14 has the "
                   "status of Eq. 13.")  # fmt: skip
    else:
        rn_note = ("001 Eq. 2 defines R(i, S) for any set S, so R(i, S_N) - 1 = C is defined and "
                   "Eq. 18 has the status of Eq. 17.")  # fmt: skip
    swap = {s_i: s_j, s_j: s_i}
    claims = [
        Claim(seed, label("def"), "SmoothAP is a smooth approximation of AP", definition,
              check_definition, "float64, tau -> 0 vs scikit-learn AP",
              correction=mutant(definition, sj_si, "corrected"),
              mutants=(with_parameters(definition, "D_ij arguments swapped", **sj_si),),
              note=rank_note),
        Claim(seed, label("G"), "G is a smooth step", g_form, check_sigmoid_limit, "sympy.limit",
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
              r_omega, check_rank_all, "float64 (tau = 1e-4) vs exact ranks",
              correction=mutant(r_omega, sj_si, "corrected"),
              mutants=(with_parameters(r_omega, "D_ij arguments swapped", **sj_si),),
              note=rank_note),
        Claim(seed, label("R_p"), "R(i, S_P) is the rank of i among positives", r_p,
              check_rank_positives, "float64 (tau = 1e-4) vs exact ranks",
              correction=mutant(r_p, sj_si, "corrected"),
              mutants=(with_parameters(r_p, "D_ij arguments swapped", **sj_si),), note=rank_note),
        Claim(seed, label("dR"), "gradient of R(i, S_Omega)", dr_form, check_rank_gradient,
              "sympy.diff + simplify (3 candidates, d = 2)",
              mutants=(substituted(dr_form, swap, "v_i and v_j swapped"),),
              note=f"Relative to Eq. {n['D']}'s D_ij = s_i - s_j; under the rank convention "
              "D_ij = s_j - s_i the gradient is -(B + D)."),
        Claim(seed, label("quotient"), "quotient rule for dAP/dq", quotient, check_quotient_rule,
              "sympy.diff on abstract functions",
              correction=negated(quotient), mutants=(negated(quotient),),
              note=f"The printed numerator R_P dR_Omega - R_Omega dR_P of Eq. {n['quotient']} is the "
              "negative of the quotient rule for d(R_P / R_Omega)/dq."),
        Claim(seed, label("labels"), f"Eq. {n['quotient']} with the A, B, C, D braces", labelled,
              check_labelled_rewrite, "sympy identity",
              correction=mutant(labelled, A_ * (B_ + D_) - (A_ + C_) * B_, "corrected"),
              mutants=(mutant(labelled, A_ * (B_ + D_) - (A_ + C_) * B_, "last brace B"),),
              note=f"Eq. {n['dR']} calls sum_(j in P, j != i) sim(D_ij)(v_i - v_j) B; the last "
              f"brace of Eq. {n['labels']} calls it D."),
        Claim(seed, label("final"), "final AD - CB form of dAP/dq", final, check_final_form,
              "float64 vs autograd of SmoothAP",
              correction=with_parameters(final, "corrected", **sj_si),
              mutants=(with_parameters(final, "D_ij arguments swapped", **sj_si),),
              note=f"With ranks G(s_j - s_i) for A, C, R and B, D exactly as printed the form is "
              f"exact: the sign slip of Eq. {n['D']} and the reversed quotient rule of Eq. "
              f"{n['quotient']} cancel."),
        Claim(seed, label("negatives"), "final form with R(i, S_N)", negatives, check_final_form,
              "float64 vs autograd of SmoothAP",
              correction=with_parameters(negatives, "corrected", **sj_si),
              mutants=(with_parameters(negatives, "D_ij arguments swapped", **sj_si),),
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
    """The audited claims of seeds 000 and 001."""
    records = _chain(SEED_000, 0) + _chain(SEED_001, 4)
    a000 = Form({"A (Eq. 8)": 1 + P_sum, "A (Eq. 9)": P_sum},
                context="the brace A over R(i, S_Omega) (Eq. 8) and over R(i, S_P) (Eq. 9)")  # fmt: skip
    a001 = Form({"A": P_sum}, context="the brace A of Eq. 12-13 (over the sum alone), used as "
                "R(i,S_P) = A and R(i,S_Omega) = A + C in Eq. 16-17")  # fmt: skip
    ap = Form(sp.Symbol("R_P") / sp.Symbol("R_Omega"), lhs="summand of AP_q (Eq. 1)")
    rank = Form(sp.StrictLessThan(s_i - s_j, 0), lhs="counted term of R(i, S) (Eq. 2)")
    s = sp.symbols("s1:4")
    ones = sp.ones(3, 1)
    matrix = ones * sp.Matrix([list(s)]) - sp.Matrix(s) * ones.T
    d3 = Form({"D": sp.ImmutableMatrix(matrix), "D_ij": s_i - s_j},
              context="Eq. 3 for m = 3, stated D_ij")  # fmt: skip
    d4 = Form({"D_ij": s_i - s_j}, context="R(i, S) = 1 + sum_j 1{D_ij > 0} (Eq. 4)")
    records += [
        Claim(SEED_000, "claim-label-a", "000 labels A consistently (Eq. 8, Eq. 9, Eq. 12-13)",
              a000, check_a_label_000, "sympy identity",
              correction=with_parameters(a000, "corrected", **{"A (Eq. 9)": 1 + P_sum}),
              mutants=(with_parameters(a000, "Eq. 9 brace over 1 + sum", **{"A (Eq. 9)": 1 + P_sum}),),
              note="Eq. 8 puts A over 1 + sum_P G(D_ij), Eq. 9 over the sum alone; Eq. 12-13 use "
              "R(i, S_P) = A, which is Eq. 8's reading."),
        Claim(SEED_001, "claim-label-a", "the brace A of Eq. 12-13 is the A of Eq. 16-17", a001,
              check_a_label_001, "sympy identity",
              correction=with_parameters(a001, "corrected", A=1 + P_sum),
              mutants=(with_parameters(a001, "A over 1 + sum", A=1 + P_sum),),
              note="Eq. 16-17 need A = 1 + sum_P G(D_ij), not the sum alone as Eq. 12-13 label it "
              "(000 Eq. 8 has it right, 000 Eq. 9 does not)."),
        Claim(SEED_001, "eq1", "AP from ranks", ap, check_ap_with_ranks,
              "float64 vs scikit-learn AP (exact ranks, no ties)",
              mutants=(mutant(ap, sp.Symbol("R_Omega") / sp.Symbol("R_P"), "ratio inverted"),)),
        Claim(SEED_001, "eq2", "the rank", rank, check_exact_rank,
              "exact integer ranks vs sorting",
              mutants=(mutant(rank, sp.StrictLessThan(s_j - s_i, 0), "s_i and s_j swapped"),)),
        Claim(SEED_001, "eq3", "the difference matrix has D_ij = s_i - s_j", d3,
              check_matrix_difference, "sympy.Matrix",
              correction=with_parameters(d3, "corrected", D_ij=s_j - s_i),
              mutants=(with_parameters(d3, "stated D_ij swapped", D_ij=s_j - s_i),),
              note="The printed matrix has entry (i, j) = s_j - s_i, not the s_i - s_j the text "
              "states; the matrix is the rank convention that Eq. 4 needs."),
        Claim(SEED_001, "eq4", "rank from D", d4, check_indicator_rank, "exact integer ranks",
              correction=with_parameters(d4, "corrected", D_ij=s_j - s_i),
              mutants=(with_parameters(d4, "D_ij swapped", D_ij=s_j - s_i),),
              note="With the matrix's D_ij = s_j - s_i (Eq. 3 as drawn) Eq. 4 reproduces Eq. 2."),
    ]  # fmt: skip
    return records
