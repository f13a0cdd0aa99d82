"""Audit of seed 003 (Hashing as Tie-Aware Learning to Rank, supplementary)."""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import sympy as sp
import torch

from gradlab.symbolic.claims import Claim, Verdict, numeric_agreement, predicate, symbolic_equality

SEED = "003_9ae9ec3ce43e30ad"

n, n_pos, N_prev, N_pos_prev, t, a, b = sp.symbols("n n_pos N_prev N_pos_prev t a b", positive=True)


# --- transcriptions of the printed formulas --------------------------------------------------


def _ties(scores):
    """Groups of equal scores in rank order: list of index lists."""
    groups = {}
    for index, score in enumerate(scores):
        groups.setdefault(score, []).append(index)
    return [groups[s] for s in sorted(groups, reverse=True)]


def ap_eq1(scores, relevant, cutoff):
    """Eq. 1: AP_T@k, tie vector from the groups; (n+ - 1)/(n - 1) read as 0 when n = 1."""
    total, position, positives_before = 0.0, 0, 0
    for group in _ties(scores):
        size, pos = len(group), sum(relevant[i] for i in group)
        share = (pos - 1) / (size - 1) if size > 1 else 0.0
        for j in range(position + 1, position + size + 1):
            if j <= cutoff:
                total += pos / size * (positives_before + (j - position - 1) * share + 1) / j
        position += size
        positives_before += pos
    return total / sum(relevant)


def dcg_eq4(scores, gains, cutoff):
    """Eq. 4: DCG_T@k = sum_d mean gain of tie d * sum of discounts of its ranks up to k."""
    total, position = 0.0, 0
    for group in _ties(scores):
        mean_gain = sum(gains[i] for i in group) / len(group)
        total += mean_gain * sum(
            1 / math.log2(j + 1)
            for j in range(position + 1, min(position + len(group), cutoff) + 1)
        )
        position += len(group)
    return total


def dcg_eq7(scores, gains):
    """Eq. 7: per tie, (1/n_d) sum_v G(v) n_{d,v} sum_j D(j)."""
    total, position = 0.0, 0
    for group in _ties(scores):
        levels = {}
        for i in group:
            levels[gains[i]] = levels.get(gains[i], 0) + 1
        discount = sum(1 / math.log2(j + 1) for j in range(position + 1, position + len(group) + 1))
        total += sum(g * c for g, c in levels.items()) / len(group) * discount
        position += len(group)
    return total


def _brute_force(metric, scores, labels, cutoff):
    values = []
    for order in itertools.permutations(range(len(scores))):
        if all(scores[order[k]] >= scores[order[k + 1]] for k in range(len(order) - 1)):
            values.append(metric(order, labels, cutoff))
    return sum(values) / len(values)


def _ap_at(order, relevant, cutoff):
    hits, total = 0, 0.0
    for rank, item in enumerate(order, start=1):
        if relevant[item]:
            hits += 1
            if rank <= cutoff:
                total += hits / rank
    return total / sum(relevant)


def _dcg_at(order, gains, cutoff):
    return sum(
        gains[item] / math.log2(rank + 1)
        for rank, item in enumerate(order, start=1)
        if rank <= cutoff
    )


def _tie_cases(count=12, size=6, seed=0):
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(count):
        scores = rng.integers(0, 3, size).tolist()
        relevant = (rng.random(size) < 0.5).tolist()
        relevant[0] = True
        gains = rng.integers(0, 3, size).tolist()
        cases.append((scores, relevant, gains, int(rng.integers(1, size + 1))))
    return cases


# --- checks ------------------------------------------------------------------------------------


def check_ap_eq1() -> Verdict:
    return numeric_agreement(lambda c: ap_eq1(c[0], c[1], c[3]), lambda c: _brute_force(_ap_at, c[0], c[1], c[3]),
                             _tie_cases(), tolerance=1e-12,
                             note="Against the average over every tie-consistent ordering, cutoff k random.")  # fmt: skip


def check_ap_eq2() -> Verdict:
    return numeric_agreement(lambda c: ap_eq1(c[0], c[1], len(c[0])), lambda c: _brute_force(_ap_at, c[0], c[1], len(c[0])),
                             _tie_cases(seed=1), tolerance=1e-12, note="Eq. 2 = Eq. 1 at k = |S|, against brute force.")  # fmt: skip


def check_dcg_eq4() -> Verdict:
    return numeric_agreement(lambda c: dcg_eq4(c[0], c[2], c[3]), lambda c: _brute_force(_dcg_at, c[0], c[2], c[3]),
                             _tie_cases(seed=2), tolerance=1e-12, note="Against brute-force tie averaging.")  # fmt: skip


def check_dcg_eq7() -> Verdict:
    return numeric_agreement(lambda c: dcg_eq7(c[0], c[2]), lambda c: dcg_eq4(c[0], c[2], len(c[0])),
                             _tie_cases(seed=3), tolerance=1e-12, note="Eq. 5-7 regroup Eq. 4 by affinity level.")  # fmt: skip


share = (n_pos - 1) / (n - 1)


def check_split() -> Verdict:
    beta = (N_pos_prev + (t - N_prev - 1) * share + 1) / t
    printed = share + (N_pos_prev + 1 - share * (N_prev + 1)) / t
    return symbolic_equality(printed, beta, [n, n_pos, N_prev, N_pos_prev, t])


def check_eq9() -> Verdict:
    total = sp.Symbol("N_plus", positive=True)
    eq3_summand = n_pos / n * (N_pos_prev + (t - N_prev - 1) * share + 1) / t / total
    beta = (N_pos_prev + (t - N_prev - 1) * share + 1) / t
    return symbolic_equality(
        n_pos / (n * total) * beta, eq3_summand, [n, n_pos, N_prev, N_pos_prev, t, total]
    )


def check_harmonic_closed_form() -> Verdict:
    k = sp.Symbol("k", integer=True, positive=True)
    A, B = sp.symbols("A B")
    size, before = 4, 3  # a tie of 4 items after 3: exact rational sums
    summed = sp.summation(A + B / k, (k, before + 1, before + size))
    printed = A * size + B * (sp.harmonic(before + size) - sp.harmonic(before))
    exact_everywhere = all(
        sp.summation(1 / k, (k, lo + 1, lo + size)) == sp.harmonic(lo + size) - sp.harmonic(lo)
        for lo in range(0, 12)
        for size in range(0, 12)
    )
    verdict = symbolic_equality(printed, summed, [A, B])
    return Verdict(
        verdict.verdict,
        verdict.detail + f" sum_(t=a+1)^(a+n) 1/t = H(a+n) - H(a) in exact rationals for all "
        f"0 <= a, n < 12: {exact_everywhere}.",
    )


def check_log_approximation() -> Verdict:
    grid = [(x, y) for x in range(1, 200, 7) for y in range(1, 300, 11)]
    within = all(
        0
        <= math.log((x + y) / x) - float(mpmath.harmonic(x + y) - mpmath.harmonic(x))
        <= y / (2 * x * x)
        for x, y in grid
    )
    first_bin = sp.limit(sp.log(b / a), a, 0, "+")
    return predicate(
        False, "",
        f"For N_(d-1) >= 1 the log overestimates the harmonic sum by at most n/(2 N^2) on a "
        f"{len(grid)}-point grid: {within}. At the first bin, N_(d-1) = 0, ln(N_d / N_(d-1)) -> "
        f"{first_bin}: the relaxation diverges.",
        correction="Valid for N_(d-1) >= 1; gradlab continues ln below one item by its tangent "
        "(or uses ln((b+1/2)/(a+1/2)) or digamma), finite at the first bin.",
    )  # fmt: skip


def check_midpoint_claim() -> Verdict:
    cases = [(x, y) for x in range(1, 40, 3) for y in range(1, 40, 5)]

    def exact(case):
        return float(mpmath.harmonic(case[0] + case[1]) - mpmath.harmonic(case[0]))

    return numeric_agreement(
        lambda c: math.log((c[0] + c[1]) / c[0]), exact, cases, tolerance=1e-3,
        corrected=lambda c: math.log((c[0] + c[1] + 0.5) / (c[0] + 0.5)),
        correction_text="The midpoint rule integrates 1/t from a + 1/2 to b + 1/2; ln((b+1/2)/(a+1/2))",
        note="Eq. 11 integrates from a to b: the sum is the right-endpoint Riemann sum of that "
        "integral (an underestimate), not its midpoint rule.",
    )  # fmt: skip


def check_eq13_algebra() -> Verdict:
    total = sp.Symbol("N_plus", positive=True)
    log_term = sp.Symbol("L", positive=True)
    eq12 = n_pos / (n * total) * (share * n + (N_pos_prev + 1 - share * (N_prev + 1)) * log_term)
    eq13 = (
        n_pos * (n_pos - 1) / ((n - 1) * total)
        + n_pos / (n * total) * (N_pos_prev + 1 - share * (N_prev + 1)) * log_term
    )
    return symbolic_equality(eq13, eq12, [n, n_pos, N_prev, N_pos_prev, total, log_term])


def _eq13_term(c_pos, c, before, before_pos, harmonic):
    return (
        c_pos * (c_pos - 1) / (c - 1)
        + c_pos / c * (before_pos + 1 - (c_pos - 1) / (c - 1) * (before + 1)) * harmonic
    )


def check_eq13_first_bin() -> Verdict:
    c = sp.Symbol("c", positive=True)
    term = _eq13_term(sp.Rational(1, 2), c + 2, a, 0, sp.log((a + c + 2) / a))
    value = sp.limit(term.subs(c, 1), a, 0, "+")
    return predicate(
        False,
        "",
        f"At the first bin C_(d-1) = 0: the Eq. 13 term with c = 3, c+ = 1/2 tends to {value}.",
    )


def check_eq13_one_item_bin() -> Verdict:
    c = sp.Symbol("c", positive=True)
    before = 3
    log_term = _eq13_term(sp.Rational(1, 2), c, before, 1, sp.log((before + c) / before))
    exact_term = _eq13_term(
        sp.Rational(1, 2), c, before, 1, sp.harmonic(before + c) - sp.harmonic(before)
    )
    pole = sp.limit(log_term, c, 1, "+")
    removable = sp.N(exact_term.subs(c, 1 + sp.Rational(1, 10**12)), 15)
    return predicate(
        False, "",
        f"At a bin holding one item (c_d -> 1, c+_d = 1/2) the printed term tends to {pole} "
        f"with ln; with the exact harmonic gap the singularity is removable (value {removable} "
        "at c = 1 + 1e-12). gradlab clamps (c+ - 1)/(c - 1) to [0, 1], its range at every integer "
        "count where it matters, and sets it to 0 at c = 1.",
    )  # fmt: skip


def check_eq13_empty_bin() -> Verdict:
    c = sp.Symbol("c", positive=True)
    term = _eq13_term(c / 2, c, 3, 1, sp.log((3 + c) / 3))
    limit = sp.limit(term, c, 0, "+")
    slope = sp.limit(sp.diff(term, c), c, 0, "+")
    return predicate(
        False, "",
        f"At an empty bin c+_d / c_d is 0/0 as printed. The limit of the term is {limit} and its "
        f"derivative along c+ = c/2 tends to {sp.N(slope, 6)}, not 0.",
        correction="Written as c+_d [A_d + B_d L/c_d] with L/c_d -> L'(C_(d-1)) the term is "
        "finite with its true gradient at empty bins (gradlab.functional.relaxed_tie_aware_ap).",
    )  # fmt: skip


def check_eq14_substitution() -> Verdict:
    cases = [(x, x + y) for x in (0.5, 1.0, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]
    return numeric_agreement(
        lambda c: float(mpmath.quad(lambda u: mpmath.log(2) / mpmath.log(u + 1), [c[0], c[1]])),
        lambda c: float(mpmath.log(2) * mpmath.quad(lambda u: 1 / mpmath.log(u), [c[0] + 1, c[1] + 1])),
        cases, tolerance=1e-12, note="Both integrals by mpmath.quad.",
    )  # fmt: skip


def check_eq16_li() -> Verdict:
    cases = [(x, x + y) for x in (0.5, 1.0, 3.0, 10.0) for y in (0.5, 2.0, 7.0)]
    return numeric_agreement(
        lambda c: float(mpmath.li(c[1] + 1) - mpmath.li(c[0] + 1)),
        lambda c: float(mpmath.quad(lambda u: 1 / mpmath.log(u), [c[0] + 1, c[1] + 1])),
        cases, tolerance=1e-12, note="Li(x) = PV int_0^x dt / ln t (mpmath.li) against quadrature.",
    )  # fmt: skip


def check_eq16_first_bin() -> Verdict:
    value = mpmath.li(1)
    return predicate(False, "", f"At the first bin C_(d-1) = 0 Eq. 16 needs Li(1) = {value}: DCG_r diverges there. "
                     "gradlab's stand-ins continue ln2 Li(x+1) below one item by its tangent (D(1) = 1), "
                     "or integrate from a + 1/2 (midpoint); both are finite.")  # fmt: skip


def check_harmonic_expansion() -> Verdict:
    mpmath.mp.dps = 40
    values = [
        float(N**2 * (mpmath.harmonic(N) - mpmath.euler - mpmath.log(N) - 1 / (2 * mpmath.mpf(N))))
        for N in (10, 100, 1000, 10000)
    ]
    return predicate(abs(values[-1] + 1 / 12) < 1e-6,
                     f"N^2 (H(N) - gamma - ln N - 1/(2N)) = {values[-1]:.8f} at N = 1e4 -> -1/12 (mpmath, 40 digits).",
                     f"remainder scaled by N^2: {values}.")  # fmt: skip


def check_eq20() -> Verdict:
    ratios = []
    for before, size in ((10, 5), (100, 50), (1000, 500), (10000, 5000)):
        error = float(
            mpmath.log(mpmath.mpf(before + size) / before)
            - (mpmath.harmonic(before + size) - mpmath.harmonic(before))
        )
        ratios.append(error / (1 / (2 * before) - 1 / (2 * (before + size))))
    return predicate(abs(ratios[-1] - 1) < 1e-3,
                     f"(ln - harmonic gap) / (1/(2N_(d-1)) - 1/(2N_d)) -> {ratios[-1]:.6f}: the error is the stated order.",
                     f"ratios {ratios}.")  # fmt: skip


def check_eq21() -> Verdict:
    first = sp.simplify((1 / (2 * a) - 1 / (2 * b)) - (b - a) / (2 * a * b)) == 0
    ratio = sp.limit((n / (2 * a**2)) / (n / (2 * a * (a + n))), n, sp.oo)
    return predicate(
        False, "",
        f"1/(2N_(d-1)) - 1/(2N_d) = n_d/(2 N_(d-1) N_d) exactly (sympy: {first}); the last step "
        f"replaces N_d by N_(d-1), an upper bound whose ratio to the error grows without limit "
        f"as n_d / N_(d-1) grows ({ratio}).",
        correction="Tight form: n_d / (2 N_(d-1) N_d); n_d / (2 N_(d-1)^2) is an upper bound.",
    )  # fmt: skip


def check_no_ties_claim() -> Verdict:
    cases = list(range(1, 30))
    return numeric_agreement(
        lambda before: math.log((before + 1) / before), lambda before: 1 / (before + 1), cases, tolerance=1e-12,
        note="A bin of one item (no ties): the relaxation of Eq. 11/13 still uses ln((N+1)/N), "
        "not 1/(N+1); the relaxed objective cannot switch formulas on a continuous count.",
    )  # fmt: skip


def check_distance_gradient() -> Verdict:
    phi_i = sp.symbols("p1:4")
    phi_j = sp.symbols("r1:4")
    distance = (3 - sum(p * r for p, r in zip(phi_i, phi_j, strict=True))) / 2
    verdicts = [
        symbolic_equality(-phi_i[k] / 2, sp.diff(distance, phi_j[k]), [*phi_i, *phi_j])
        for k in range(3)
    ]
    worst = next((v for v in verdicts if v.verdict != "holds"), verdicts[0])
    return Verdict(worst.verdict, "d(phi_i, phi_j) = (b - phi_i . phi_j)/2: " + worst.detail)


def check_eq37() -> Verdict:
    from gradlab.functional.relaxed_ranking import (
        minibatch_gradient_matrix_form,
        minibatch_objective_terms,
    )

    worst = 0.0
    generator = torch.Generator().manual_seed(0)
    for _ in range(6):
        codes = torch.tanh(2 * torch.randn(9, 6, generator=generator, dtype=torch.float64))
        labels = torch.randint(0, 3, (9,), generator=generator)
        for objective in ("ap", "dcg"):
            leaf = codes.clone().requires_grad_(True)
            _, terms = minibatch_objective_terms(leaf, labels, objective, "log")
            (expected,) = torch.autograd.grad(terms.nan_to_num(0.0).sum() / 9, leaf)
            got = minibatch_gradient_matrix_form(codes, labels, objective, "log")
            worst = max(worst, (got - expected).abs().max().item())
    return predicate(worst < 1e-10,
                     f"-Phi/(2M) sum_(d,v) (A B + B A), alpha from dO_i/dc, matches autograd of the relaxed "
                     f"minibatch objective to {worst:.1e} (AP and DCG, 6 random batches).",
                     f"largest difference {worst:.3g}.")  # fmt: skip


def check_beta_symmetry() -> Verdict:
    generator = torch.Generator().manual_seed(1)
    codes = torch.tanh(torch.randn(7, 5, generator=generator, dtype=torch.float64))
    distances = (5 - codes @ codes.T) / 2
    return predicate(bool(torch.allclose(distances, distances.T)),
                     "The relaxed distance and the affinity are symmetric, so beta_(d,v)(i, j) = beta_(d,v)(j, i).",
                     "distances are not symmetric.")  # fmt: skip


def check_eq34_index() -> Verdict:
    d, ell = sp.symbols("d l", integer=True, nonnegative=True)
    bits = 3
    term = sp.Function("T")
    printed = sp.summation(term(d), (ell, 0, bits))  # Eq. 34: index l, summand in d
    intended = sp.summation(term(d), (d, 0, bits))  # Eq. 33 and 37
    return symbolic_equality(printed, intended, [d], corrected=sp.summation(term(ell), (ell, 0, bits)),
                             note="Eq. 34 sums over l while its summand is indexed by d; read sum_(d=0)^b.")  # fmt: skip


def claims() -> list[Claim]:
    """The audited claims of seed 003."""
    table = [
        ("eq1", "tie-aware AP at cutoff k (McSherry & Najork)", "AP_T@k = sum_(j<=k) (n+_i/n_i)(N+_(i-1) + (j - t_i - 1)(n+_i - 1)/(n_i - 1) + 1)/j / N+", "float64 vs brute force over tie-consistent orders", check_ap_eq1),
        ("eq2", "tie-aware AP", "AP_T = 1/N+ sum_j ...", "float64 vs brute force", check_ap_eq2),
        ("eq4", "tie-aware DCG at cutoff k", "DCG_T@k = sum_d (1/n_d sum G) sum_(j<=k) D(j)", "float64 vs brute force", check_dcg_eq4),
        ("eq7", "tie-aware DCG by affinity level", "DCG_T(R^(d)) = 1/n_d sum_v G(v) n_(d,v) sum_j D(j)", "float64 vs Eq. 4", check_dcg_eq7),
        ("eq8", "the A + B/t split", "beta_d(t) = (n+ - 1)/(n - 1) + (N+_(d-1) + 1 - (n+ - 1)/(n - 1)(N_(d-1) + 1))/t", "sympy.simplify", check_split),
        ("eq9", "AP_T of a tie as a sum of beta", "AP_T(R^(d)) = n+_d/(n_d N+) sum_t beta_d(t)", "sympy.simplify", check_eq9),
        ("eq10", "the harmonic closed form", "sum_t beta_d(t) = A n_d + B (H(N_d) - H(N_(d-1)))", "sympy.summation", check_harmonic_closed_form),
        ("eq11", "harmonic partial sum by a log", "sum_(t=N_(d-1)+1)^(N_d) 1/t ~ ln N_d - ln N_(d-1)", "mpmath grid and sympy.limit", check_log_approximation),
        ("claim-midpoint-rule", "Eq. 11 is the midpoint rule applied in reverse", "ln N_d - ln N_(d-1) = midpoint rule", "mpmath", check_midpoint_claim),
        ("eq13", "the relaxed AP_r (algebra from Eq. 12)", "AP_r = c+(c+ - 1)/((c - 1)N+) + c+/(c N+)[...] ln(C_d / C_(d-1))", "sympy.simplify", check_eq13_algebra),
        ("claim-eq13-first-bin", "AP_r is finite at the first bin", "ln(C_0 / C_(-1)), C_(-1) = 0", "sympy.limit", check_eq13_first_bin),
        ("claim-eq13-one-item-bin", "AP_r is finite at a bin of one item", "(c+ - 1)/(c - 1) at c = 1", "sympy.limit", check_eq13_one_item_bin),
        ("claim-eq13-empty-bin", "AP_r is defined at an empty bin", "c+/c at c = 0", "sympy.limit", check_eq13_empty_bin),
        ("eq14", "the discount sum as an integral", "int_(N_(d-1))^(N_d) dt/log2(t+1) = ln2 int_(N_(d-1)+1)^(N_d+1) dt/ln t", "mpmath.quad", check_eq14_substitution),
        ("eq16", "DCG_r via the logarithmic integral", "ln2 sum_v G(v) c_(d,v)/c_d [Li(C_d + 1) - Li(C_(d-1) + 1)]", "mpmath.li vs quadrature", check_eq16_li),
        ("claim-eq16-first-bin", "DCG_r is finite at the first bin", "Li(C_(-1) + 1) = Li(1)", "mpmath.li", check_eq16_first_bin),
        ("eq17", "asymptotic expansion of H(N)", "H(N) = gamma + ln N + 1/(2N) + O(1/(12 N^2))", "mpmath", check_harmonic_expansion),
        ("eq20", "error of the log replacement", "H(N_d) - H(N_(d-1)) = ln N_d - ln N_(d-1) + O(1/(2N_(d-1)) - 1/(2N_d))", "mpmath", check_eq20),
        ("eq21", "the error bound", "O(1/(2N_(d-1)) - 1/(2N_d)) = O(n_d/(2 N_(d-1) N_d)) = O(n_d/(2 N_(d-1)^2))", "sympy", check_eq21),
        ("claim-no-ties", "no ties (n_d in {0, 1}) means no approximation error", "sum = 1/N_d exactly", "float64", check_no_ties_claim),
        ("eq26", "gradient of the relaxed distance", "d d(x_i, x_j) / d phi(x_j) = -phi(x_i)/2", "sympy.diff", check_distance_gradient),
        ("claim-beta-symmetric", "beta is symmetric", "beta_(d,v)(i, j) = beta_(d,v)(j, i)", "float64", check_beta_symmetry),
        ("eq34", "reordering the sums", "sum_(l=0)^b sum_v [...]_(d,v)", "inspection of the indices", check_eq34_index),
        ("eq37", "the minibatch gradient in matrix form", "dO/dPhi = -Phi/(2M) sum_(d,v) (A_(d,v) B_(d,v) + B_(d,v) A_(d,v))", "float64 vs autograd", check_eq37),
    ]  # fmt: skip
    return [
        Claim(SEED, label, statement, formula, method, check)
        for label, statement, formula, method, check in table
    ]
