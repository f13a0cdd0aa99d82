"""The SmoothAP checks (seeds 000 and 001) reject forms that are wrong by a little.

``test_claim_records.py`` pins each claim's record; these tests give the checks forms the seeds
do not print, wrong by an amount a loose tolerance or a coarse sample would let through, and
compare the failures with values derived here (by hand or by sorting, not by the check's code).
"""

import re

import numpy as np
import pytest
import sympy as sp
import torch

from gradlab.symbolic.claims import Form, with_parameters
from gradlab.symbolic.smoothap_claims import (
    A_,
    B_,
    C_,
    D_,
    D_RANK,
    G_IJ,
    R_,
    S_OMEGA,
    S_P,
    SIM_IJ,
    check_ap_with_ranks,
    check_exact_rank,
    check_final_form,
    check_indicator_rank,
    check_rank_all,
    check_rank_gradient,
    check_rank_positives,
    check_sigmoid_limit,
    check_sigmoid_of_difference_gradient,
    claims,
    i_,
    j_,
    m_,
    n_pos,
    over_negatives,
    over_positives,
    s_i,
    s_ix,
    s_j,
    tau,
    z,
)
from tests.helpers.witness import witness

R_P, R_OMEGA = sp.symbols("R_P R_Omega")
CLAIMS = {claim.id.split("_")[0] + ":" + claim.label: claim for claim in claims()}


def _accepted(short_id: str) -> Form:
    claim = CLAIMS[short_id]
    return claim.correction or claim.printed


def _worst(detail: str) -> float:
    return float(re.search(r"max \|printed - true\| = ([-+.e0-9]+)", detail).group(1))


@pytest.mark.parametrize(("check", "short_id"), [(check_rank_all, "000:eq8"),
                                                 (check_rank_positives, "000:eq9")])
def test_a_rank_with_a_hundredfold_flatter_difference_is_no_step_at_tau_1e_4(check, short_id):
    # The exact-rank cases space their scores 0.1 apart: with D_ij / 100 the nearest candidate
    # above i counts G(0.1 / 100 / 1e-4) = G(10) = 1 - 4.54e-5, short of 1 by far more than the
    # 1e-6 tolerance, and at most 11 candidates fall short (< 5.0e-4 in all).
    accepted = _accepted(short_id)
    verdict = check(with_parameters(accepted, "flat", D_ij=D_RANK / 100))
    assert verdict.verdict == "fails" and verdict.detail.startswith("tau = 1e-4 vs exact ranks")
    assert 4.5e-5 < _worst(verdict.detail) < 5.0e-4
    assert check(accepted).verdict == "holds"


def _eq2_with(counted, extra=0):
    """001 Eq. 2 as a form counting ``counted`` for each j != i (a SymPy relation in s[i], s[j]),
    plus ``extra`` per candidate j != i."""
    rank = _accepted("001:eq2")
    other = 1 - sp.KroneckerDelta(i_, j_)
    term = sp.Piecewise((other, counted), (0, True)) + extra * other
    return with_parameters(rank, "test", **{"R(i, S)": 1 + sp.Sum(term, (j_, 1, m_))})


def _tied_cases(seed):
    # 20 vectors of 10 integer scores in 0..5 (ties), every candidate as i (default_rng(seed))
    rng = np.random.default_rng(seed)
    vectors = [rng.integers(0, 6, size=10) for _ in range(20)]
    return [(scores, i) for scores in vectors for i in range(10)]


def test_an_exact_rank_one_and_three_eighths_too_high_everywhere_fails():
    # each of the 9 other candidates adds 1/8 to its indicator: every rank is 9/8 too high
    relation = sp.StrictLessThan(s_ix[i_] - s_ix[j_], 0)
    verdict = check_exact_rank(_eq2_with(relation, sp.Rational(1, 8)))
    expected = "max |printed - true| = 1.12 (case 1 of 200)."  # 9/8 = 1.125, printed to 3 digits
    assert (verdict.verdict, verdict.detail) == ("fails", expected)


def test_the_exact_rank_check_runs_its_200_documented_cases():
    # with s_i and s_j swapped the rank counts the candidates below i instead of above
    errors = [abs(int(np.sum(scores < scores[i])) - int(np.sum(scores > scores[i])))
              for scores, i in _tied_cases(6)]
    worst = max(errors)
    verdict = check_exact_rank(_eq2_with(sp.StrictLessThan(s_ix[j_] - s_ix[i_], 0)))
    expected = f"max |printed - true| = {worst} (case {errors.index(worst) + 1} of 200)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)


def test_a_smooth_rank_is_no_exact_rank_by_its_gap_at_tau_one():
    """1 + sum_(j != i) G(s_j - s_i) with G evaluated at the check's tau = 1: the largest gap
    to the rank read off a sort, from a float64 loop over the same 200 cases."""
    from gradlab.symbolic.smoothap_claims import G_

    other = 1 - sp.KroneckerDelta(i_, j_)
    smooth = 1 + sp.Sum(other * G_(s_ix[j_] - s_ix[i_]), (j_, 1, m_))
    form = with_parameters(_accepted("001:eq2"), "test", **{"R(i, S)": smooth})
    errors = []
    for scores, i in _tied_cases(6):
        soft = 1 + sum(1 / (1 + np.exp(-(float(scores[j]) - float(scores[i]))))
                       for j in range(10) if j != i)  # fmt: skip
        errors.append(abs(soft - (1 + int(np.sum(scores > scores[i])))))
    verdict = check_exact_rank(form)
    assert verdict.verdict == "fails"
    assert _worst(verdict.detail) == pytest.approx(max(errors), rel=5e-3)  # printed to 3 digits
    case = int(re.search(r"case (\d+) of 200", verdict.detail).group(1))
    assert errors[case] == pytest.approx(max(errors), rel=1e-12)


def test_an_exact_rank_that_counts_ties_fails_by_the_number_of_ties():
    errors = [int(np.sum(scores == scores[i])) - 1 for scores, i in _tied_cases(6)]
    worst = max(errors)
    verdict = check_exact_rank(_eq2_with(sp.LessThan(s_ix[i_] - s_ix[j_], 0)))
    expected = f"max |printed - true| = {worst} (case {errors.index(worst) + 1} of 200)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)
    assert check_exact_rank(_accepted("001:eq2")).verdict == "holds"


def test_an_indicator_rank_that_also_counts_the_next_lower_score_fails():
    # D_ij + 2 > 0 also counts the ties and the scores one lower (integer scores)
    errors = [int(np.sum(scores == scores[i])) - 1 + int(np.sum(scores == scores[i] - 1))
              for scores, i in _tied_cases(4)]
    worst = max(errors)
    accepted = _accepted("001:eq4")
    verdict = check_indicator_rank(with_parameters(accepted, "test", D_ij=D_RANK + 2))
    expected = f"max |printed - true| = {worst} (case {errors.index(worst) + 1} of 200)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)
    assert check_indicator_rank(accepted).verdict == "holds"


def test_an_indicator_rank_with_d_doubled_counts_right_but_is_not_eq_3s_matrix():
    # 1{2 D_ij > 0} = 1{D_ij > 0}: the rank part holds, the entries are twice Eq. 3's
    verdict = check_indicator_rank(with_parameters(_accepted("001:eq4"), "test", D_ij=2 * D_RANK))
    assert verdict.verdict == "fails"
    assert verdict.detail.startswith("D_ij against Eq. 3's matrix as drawn")


def test_ap_from_ranks_rejects_a_ratio_off_by_one_part_in_a_billion():
    # AP >= 1/15 here, so the error is at least 6.7e-11, far above the 1e-12 tolerance
    verdict = check_ap_with_ranks(Form(R_P / R_OMEGA * (1 + sp.Rational(1, 10**9))))
    assert verdict.verdict == "fails" and 6.6e-11 < _worst(verdict.detail) < 1.0001e-9


def test_the_ap_check_runs_its_20_documented_cases():
    # 20 cases of 15 N(0, 1) scores, positives where U(0, 1) < 0.4 and the first always
    # (default_rng(3)); the inverted ratio's mean R_Omega / R_P is the mean of 1 / precision@i
    rng = np.random.default_rng(3)
    errors = []
    for _ in range(20):
        scores = rng.normal(size=15)
        positive = rng.random(15) < 0.4
        positive[0] = True
        ranked = positive[np.argsort(-scores)]
        precisions = np.cumsum(ranked)[ranked] / (1 + np.flatnonzero(ranked))
        errors.append(abs(np.mean(1 / precisions) - np.mean(precisions)))
    worst = max(errors)
    verdict = check_ap_with_ranks(Form(R_OMEGA / R_P))
    expected = f"max |printed - true| = {worst:.3g} (case {errors.index(worst) + 1} of 20)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)


@pytest.mark.slow
def test_a_sigmoid_with_its_exponent_flipped_steps_down_and_says_so():
    # 1 / (1 + e^(z / tau)) -> 0 and 1 / (1 + e^(-z / tau)) -> 1 as tau -> 0+, for z > 0
    verdict = check_sigmoid_limit(Form(1 / (1 + sp.exp(z / tau))))
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith(
        ": lim_(tau->0+) G(z) = 0 and G(-z) = 1 for z > 0: not a step up at 0."
    )


@pytest.mark.parametrize(("value", "what"), [
    (1 / (1 - sp.exp(-z / tau)), "G(z) -> oo as z -> 0, not 1/2."),  # a pole at 0
    ((1 + sp.exp(-z / tau)) ** -2, "G(z) -> 1/4 as z -> 0, not 1/2."),  # a step, not symmetric
    (1 / (1 + sp.exp(-z / tau**2)), "printed minus true"),  # a step in z / tau^2
])  # fmt: skip
@pytest.mark.slow
def test_a_step_that_is_not_the_symmetric_step_in_z_over_tau_fails(value, what):
    verdict = check_sigmoid_limit(Form(value))
    assert verdict.verdict == "fails" and what in verdict.detail


@pytest.mark.slow
def test_a_step_that_does_not_reach_0_below_zero_is_no_step():
    # sigma(z / tau) + sigma(-z / tau) / 2 -> 1 + 0 above 0 but 0 + 1/2 below
    sigmoid = 1 / (1 + sp.exp(-z / tau))
    verdict = check_sigmoid_limit(Form(sigmoid + sigmoid.subs(z, -z) / 2))
    assert verdict.verdict == "fails" and "G(-z) = 1/2" in verdict.detail


def _witness_variables(detail: str) -> set[str]:
    """The variable names of a failing symbolic check's counterexample point."""
    return set(witness(detail)[1])


def test_a_wrong_gradient_of_g_is_shown_at_a_point_of_q1_v1_w1_and_tau():
    # the check differentiates G(q1 v1 - q1 w1) in q1: a sign-flipped form fails at a point
    # naming exactly those variables
    g = sp.Symbol("G")
    verdict = check_sigmoid_of_difference_gradient(Form(-g * (1 - g) / tau * (s_i - s_j)))
    assert verdict.verdict == "fails"
    assert _witness_variables(verdict.detail) == {"q1", "v1", "w1", "tau"}


def test_a_wrong_rank_gradient_is_shown_at_a_point_of_the_query_and_three_candidates():
    # 3 candidates of dimension 2 (v0 = i, v1 and v2 the others), the query (q1, q2) and tau
    g = sp.Symbol("G")
    verdict = check_rank_gradient(Form(g * (1 - g) / tau * (s_j - s_i)))
    assert verdict.verdict == "fails"
    names = {"q1", "q2", "tau"} | {f"v{k}_{d}" for k in range(3) for d in (1, 2)}
    assert _witness_variables(verdict.detail) == names


def _smooth_ap_gradient(query, vectors, positive, temperature):
    """d SmoothAP / d query by autograd, the rank written as 1 + sum_(j != i) G(s_j - s_i)."""
    q = torch.tensor(query, requires_grad=True)
    scores = torch.tensor(vectors) @ q
    terms = []
    for i in np.flatnonzero(positive):
        others = torch.tensor([j != i for j in range(len(scores))])
        g = torch.sigmoid((scores[others] - scores[i]) / temperature)
        terms.append((1 + g[torch.tensor(positive)[others]].sum()) / (1 + g.sum()))
    (grad,) = torch.autograd.grad(torch.stack(terms).mean(), q)
    return grad.numpy()


def test_the_final_form_check_runs_its_8_documented_problems():
    # numerator doubled: the form gives 2 grad, so it misses by |grad|; the problems are query
    # N(0, 0.16 I_3), 3 positives and 4 negatives N(0, 0.16 I_3) (default_rng(seed), seeds 0..7)
    worst = 0.0
    for seed in range(8):
        rng = np.random.default_rng(seed)
        query, vectors = rng.normal(size=3) * 0.4, rng.normal(size=(7, 3)) * 0.4
        positive = np.array([True] * 3 + [False] * 4)
        worst = max(worst, np.abs(_smooth_ap_gradient(query, vectors, positive, 0.2)).max())
    accepted = _accepted("000:eq13")
    form = with_parameters(accepted, "test", **{"dAP_q/dq": 2 * accepted.value["dAP_q/dq"]})
    verdict = check_final_form(form)
    expected = f"differs from autograd of SmoothAP by up to {worst:.3g} (8 random problems)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)


def _problem_terms(seed: int, temperature: float = 0.2) -> list[tuple]:
    """``(A, B, C, D)`` of Eq. 12-13 (Brown et al., 2020) per positive i, float64 loops, for the
    check's documented problem ``seed``: query N(0, 0.16 I_3), 3 positives then 4 negatives."""
    rng = np.random.default_rng(seed)
    query, vectors = rng.normal(size=3) * 0.4, rng.normal(size=(7, 3)) * 0.4
    scores, positive, terms = vectors @ query, [True] * 3 + [False] * 4, []
    for i in range(3):
        a, c, b, d = 1.0, 0.0, np.zeros(3), np.zeros(3)
        for j in range(7):
            if j == i:
                continue
            g = 1.0 / (1.0 + np.exp(-(scores[j] - scores[i]) / temperature))
            slope = g * (1.0 - g) / temperature
            if positive[j]:
                a, b = a + g, b + slope * (vectors[i] - vectors[j])
            else:
                c, d = c + g, d + slope * (vectors[i] - vectors[j])
        terms.append((a, b, c, d))
    return terms


@pytest.mark.parametrize(
    ("extra", "worst_seed"),
    [(D_, 7), (B_ / C_**2, 3), (D_ / A_**2, 8)],  # a changed draw moves one of these worsts
)
def test_the_final_form_check_draws_exactly_seeds_0_to_7(extra, worst_seed):
    # A numerator AD - CB + X misses the gradient by mean_i X_i / (A_i + C_i)^2 (the rest is
    # exact): the detail's worst error is that of seeds 0..7; a ninth problem (seed 8) would
    # raise the worst of the last form.
    x = sp.lambdify((A_, B_, C_, D_), extra, "numpy")
    errors = []
    for seed in range(9):
        miss = sum(x(a, b, c, d) / (a + c) ** 2 for a, b, c, d in _problem_terms(seed)) / 3
        errors.append(float(np.abs(miss).max()))
    assert int(np.argmax(errors)) == worst_seed
    # the braces of Eq. 13 as the form's sums: A = R(i, S_P), B, C, D the sums over S_P / S_N
    braces = {A_: R_(i_, S_P), B_: over_positives(SIM_IJ), C_: over_negatives(G_IJ),
              D_: over_negatives(SIM_IJ)}  # fmt: skip
    accepted = _accepted("000:eq13")
    added = sp.Sum(extra.xreplace(braces) / R_(i_, S_OMEGA) ** 2, (i_, 1, n_pos)) / n_pos
    form = with_parameters(accepted, "test", **{"dAP_q/dq": accepted.value["dAP_q/dq"] + added})
    verdict = check_final_form(form)
    worst = max(errors[:8])
    expected = f"differs from autograd of SmoothAP by up to {worst:.3g} (8 random problems)."
    assert (verdict.verdict, verdict.detail) == ("fails", expected)


# --- forms the checks cannot evaluate: inconclusive, with the reason -------------------------


def _unevaluable_forms():
    from gradlab.symbolic import smoothap_claims as claims

    s, v, i, rank, positives = claims.s_ix, claims.v_ix, claims.i_, claims.R_, claims.S_P
    return [
        ({"other": 1}, "the form has no 'AP_q' piece"),
        # R(1, S_P) defined by itself: the evaluation stops instead of recursing without end
        ({"AP_q": rank(1, positives), "R(i, S_P)": rank(i, positives)},
         "definitions refer to each other"),
        ({"AP_q": v[1]}, "v has no value in this check"),  # scores only, no coordinates
        ({"AP_q": rank(1, positives)}, "R(1, S_P) has no definition in the form"),
        ({"AP_q": sp.Symbol("y")}, "y has no value"),
        ({"AP_q": s[9]}, "index 9 = 9.0 is outside 1..7"),  # 3 positives + 4 negatives
        ({"AP_q": s[sp.Rational(3, 2)]}, "index 3/2 = 1.5 is outside 1..7"),
        ({"AP_q": sp.Sum(s[i], (i, 1, sp.Rational(5, 2)))}, "bound 5/2 = 2.5 is not an integer"),
        ({"AP_q": sp.sin(s[1])}, "sin cannot be evaluated here"),
        # functions of one argument other than G and sim, of two other than R
        ({"AP_q": sp.Function("F")(s[1])}, "F(s[1]) has no definition in the form"),
        ({"AP_q": sp.Function("H")(1, positives)}, "H(1, S_P) has no definition in the form"),
        # ... even when R(i, S_P) is defined: only R of two arguments is a rank
        ({"AP_q": sp.Function("H")(1, positives), "R(i, S_P)": sp.Integer(1)},
         "H(1, S_P) has no definition in the form"),
        ({"AP_q": claims_module().D_ix[1, 2]}, "D[1, 2] has no definition in the form"),
        ({"AP_q": s[i]}, "i has no value"),  # i free where no sum binds it
    ]  # fmt: skip


def claims_module():
    from gradlab.symbolic import smoothap_claims

    return smoothap_claims


@pytest.mark.slow
def test_a_form_that_does_not_evaluate_is_inconclusive_and_says_why():
    from gradlab.symbolic.smoothap_claims import check_definition

    for value, reason in _unevaluable_forms():
        verdict = check_definition(Form(value))
        assert (verdict.verdict, verdict.detail) == (
            "inconclusive", f"the form does not evaluate on a concrete problem: {reason}"), value


def test_an_index_or_bound_that_differs_between_problems_is_inconclusive():
    """s[s_1] or a sum up to s_1: the score varies over the problems, so it is no index."""
    from gradlab.symbolic.smoothap_claims import check_definition

    s, i = s_ix, i_
    for value, start in (({"AP_q": s[s[1]]}, "index s[1] = ["),
                         ({"AP_q": sp.Sum(s[i], (i, 1, s[1]))}, "bound s[1] = [")):  # fmt: skip
        verdict = check_definition(Form(value))
        assert verdict.verdict == "inconclusive", verdict.detail
        assert verdict.detail.startswith(
            f"the form does not evaluate on a concrete problem: {start}"), verdict.detail


def test_the_summation_index_reaches_exponents_and_comparisons():
    """sum_(i=1..3) s_1^i [s_1 < s_i] is a number on every problem: the check compares it with
    AP (and it is not AP), rather than finding it unevaluable."""
    from gradlab.symbolic.smoothap_claims import check_definition

    s, i = s_ix, i_
    below = sp.StrictLessThan(s[1], s[i], evaluate=False)
    piece = sp.Sum(s[1] ** i * sp.Piecewise((1, below), (0, True)), (i, 1, 3))
    verdict = check_definition(Form({"AP_q": piece}))
    assert verdict.verdict == "fails", verdict.detail


def test_exp_and_log_in_a_form_evaluate_as_themselves():
    """log(exp(AP_q)) is AP_q, so the definition still holds; exp(AP_q) is not AP_q."""
    from gradlab.symbolic.smoothap_claims import check_definition

    accepted = _accepted("000:eq1")  # AP_q of Brown et al. (2020), Eq. 1
    ap = accepted.value["AP_q"]
    wrapped = sp.log(sp.exp(ap, evaluate=False), evaluate=False)
    assert check_definition(with_parameters(accepted, "test", AP_q=wrapped)).verdict == "holds"
    raised = with_parameters(accepted, "test", AP_q=sp.exp(ap, evaluate=False))
    assert check_definition(raised).verdict == "fails"


def _witness(detail: str) -> tuple[float, dict]:
    """The printed difference and the point of a symbolic_equality witness in ``detail``."""
    difference, point = witness(detail)
    return float(difference), {name: sp.Rational(value) for name, value in point.items()}


@pytest.mark.slow
@pytest.mark.parametrize("law", ["symmetry", "scale"])
def test_a_step_that_breaks_symmetry_or_the_scale_law_fails_at_a_named_point(law):
    """Both forms are steps at 0 with G(0) = 1/2. The first adds an even bump, so
    G(w) + G(-w) != 1; the second adds z to the exponent, so G(c z; c tau) != G(z; tau). The
    witness names the variables w, tau (and c) and the difference there, checked here in
    exact arithmetic."""
    sigmoid = 1 / (1 + sp.exp(-z / tau))
    if law == "symmetry":
        form = sigmoid + z**2 / tau**2 * sp.exp(-(z**2) / tau**2)
    else:
        form = 1 / (1 + sp.exp(-z / tau - z))
    verdict = check_sigmoid_limit(Form(form))
    assert verdict.verdict == "fails"
    printed, point = _witness(verdict.detail)
    w = sp.Symbol("w")
    if law == "symmetry":
        assert set(point) == {"w", "tau"}
        true = form.subs({z: w, tau: point["tau"]}) + form.subs({z: -w, tau: point["tau"]}) - 1
        difference = true.subs(w, point["w"])
    else:
        assert set(point) == {"w", "tau", "c"}
        scaled = form.subs({z: point["c"] * w, tau: point["c"] * point["tau"]})
        difference = (scaled - form.subs({z: w, tau: point["tau"]})).subs(w, point["w"])
    assert float(sp.N(difference, 30)) == pytest.approx(printed, rel=1e-7)


@pytest.mark.slow
def test_a_sigmoid_twice_as_steep_holds_in_the_limit_and_fails_at_tau_one_half():
    """G(2 D) in place of G(D) is a step as tau -> 0 (the AP and rank checks at tau = 1e-4
    agree) but not SmoothAP's sigmoid at tau = 0.5: the detail names that comparison."""
    from gradlab.symbolic.smoothap_claims import G_, claims

    def steeper(form):
        twice = {key: piece.replace(lambda node: isinstance(node, sp.Function) and node.func == G_,
                                    lambda node: G_(2 * node.args[0]))
                 for key, piece in form.value.items()}  # fmt: skip
        return Form(twice)

    by_label = {}
    for claim in claims():
        by_label.setdefault(claim.label, claim)
    for label, compared in (("eq1", "tau = 0.5 vs SmoothAP: "),
                            ("eq8", "tau = 0.5 vs smoothed ranks: ")):  # fmt: skip
        claim = by_label[label]
        form = claim.correction or claim.printed
        assert claim.check(form).verdict == "holds", label
        verdict = claim.check(steeper(form))
        assert verdict.verdict == "fails" and verdict.detail.startswith(compared), label


def test_a_final_form_undefined_on_some_problems_fails_with_nan():
    """Eq. 13 plus 0 * sqrt(s_1), unevaluated: NaN on the problems where s_1 < 0 and the
    gradient elsewhere. NaN is no agreement, however close the other problems are."""
    from gradlab.symbolic.smoothap_claims import claims, s_ix

    claim = next(c for c in claims() if c.check.__name__ == "check_final_form")
    value = dict((claim.correction or claim.printed).value)
    nothing = sp.Mul(0, sp.sqrt(s_ix[1]), evaluate=False)
    value["dAP_q/dq"] = sp.Add(value["dAP_q/dq"], nothing, evaluate=False)
    verdict = claim.check(Form(value))
    assert (verdict.verdict, verdict.detail) == (
        "fails", "differs from autograd of SmoothAP by up to nan (8 random problems).")


def test_a_quotient_rule_slip_reports_its_largest_relative_error_over_x_1_2_3():
    from gradlab.symbolic.smoothap_claims import QUOTIENT_EXAMPLE, check_quotient_rule

    r_p, r_omega, d_p, d_omega = sp.symbols("R_P R_Omega dR_P dR_Omega")
    example = "R_P(x) = x + 1, R_Omega(x) = x**2 + x + 3"
    assert {k: str(v) for k, v in QUOTIENT_EXAMPLE.items()} == {"R_P": "x + 1",
                                                               "R_Omega": "x**2 + x + 3"}
    # by hand, with R_P = x + 1 and R_Omega = x^2 + x + 3:
    # dR_P / R_Omega (second term dropped) is off by (2x^2 + 3x + 1) / |x^2 + 2x - 2| of the
    # truth: 6, 2.5, 2.15 at x = 1, 2, 3; the quotient over R_Omega instead of its square is
    # the truth times R_Omega, off by R_Omega - 1 = x^2 + x + 2 of it: 4, 8, 14
    for slip, worst in ((d_p / r_omega, 6.0),
                        ((d_p * r_omega - r_p * d_omega) / r_omega, 14.0)):  # fmt: skip
        detail = check_quotient_rule(Form(slip)).detail
        assert detail.endswith(f"; relative to the true derivative that is an error of "
                               f"{100 * worst:.0f} % (x = 1, 2, 3 with {example})."), slip
    flipped = check_quotient_rule(Form((r_p * d_omega - r_omega * d_p) / r_omega**2))
    assert flipped.verdict == "fails"
    assert flipped.detail.endswith(f"(x = 1, 2, 3 with {example}): printed = -true, a sign "
                                   f"error, not rounding.")  # fmt: skip


@pytest.mark.slow
def test_the_indicator_check_reads_every_entry_of_the_difference_matrix():
    """D_ij scaled by 1.1 on one row or column keeps every sign (the same ranks) but not the
    matrix of Eq. 3: the first and last rows and columns are all compared."""
    from gradlab.symbolic.smoothap_claims import INDICATOR_SIZE, claims, i_, j_

    claim = next(c for c in claims() if c.check.__name__ == "check_indicator_rank")
    form = claim.correction or claim.printed
    assert claim.check(form).verdict == "holds"
    for index in (i_, j_):
        for line in (1, INDICATOR_SIZE):
            value = dict(form.value)
            value["D_ij"] = value["D_ij"] * (1 + sp.KroneckerDelta(index, line) / 10)
            verdict = claim.check(Form(value))
            assert verdict.verdict == "fails", (index, line)
            assert verdict.detail.startswith("D_ij against Eq. 3's matrix as drawn: "), verdict


def test_a_stated_difference_with_a_stray_symbol_is_inconclusive():
    from gradlab.symbolic.smoothap_claims import claims

    claim = next(c for c in claims() if c.check.__name__ == "check_matrix_difference")
    value = dict((claim.correction or claim.printed).value)
    value["D_ij"] = value["D_ij"] + sp.Symbol("y")  # y has no value for s1..s3
    verdict = claim.check(Form(value))
    assert verdict.verdict == "inconclusive"
    assert verdict.detail.startswith("the form does not evaluate for s1..s3: ")


def test_a_sum_over_two_indices_at_once_is_evaluated_over_both():
    """Eq. 2's rank with its sum written as Sum(term / 2, (j, 1, m), (k, 1, 2)): the same
    rank, so the check holds only if both limits of the one Sum are looped over."""
    from gradlab.symbolic.smoothap_claims import claims

    claim = next(c for c in claims() if c.check.__name__ == "check_exact_rank")
    value = dict((claim.correction or claim.printed).value)
    inner = next(node for node in sp.preorder_traversal(value["R(i, S)"])
                 if isinstance(node, sp.Sum))  # fmt: skip
    k = sp.Symbol("k", integer=True)
    value["R(i, S)"] = value["R(i, S)"].subs(inner, sp.Sum(inner.function / 2, *inner.limits,
                                                           (k, 1, 2)))  # fmt: skip
    assert claim.check(Form(value)).verdict == "holds"


def test_a_smooth_rank_is_no_exact_rank():
    """1 + sum_(j != i) G(s_j - s_i) (the sigmoid at tau = 1) in place of the indicators:
    evaluated (not refused) and wrong by more than a rank somewhere."""
    from gradlab.symbolic.smoothap_claims import G_, claims, i_, j_, m_, s_ix

    smooth = 1 + sp.Sum(G_(s_ix[j_] - s_ix[i_]) * (1 - sp.KroneckerDelta(i_, j_)), (j_, 1, m_))
    claim = next(c for c in claims() if c.check.__name__ == "check_exact_rank")
    verdict = claim.check(Form({"R(i, S)": smooth}))
    assert verdict.verdict == "fails" and verdict.detail.startswith("max |printed - true| = ")
    assert float(verdict.detail.split("= ")[1].split(" ")[0]) > 1
