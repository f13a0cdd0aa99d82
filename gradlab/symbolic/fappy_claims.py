"""Audit of seed 004 (FAPPY): Eq. 1-7, Lemma 1 and its appendix, Algorithm 1, cosine / L2."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
import torch

from gradlab.symbolic.claims import Claim, Verdict, predicate, symbolic_equality

SEED = "004_e426679a66883031"


def _weight(similarity: float, u: int, delta: float) -> float:
    """Eq. 3, transcribed: triangular weight of bin u for boundaries b_m = -1 + m delta."""
    low, centre, high = -1 + (u - 1) * delta, -1 + u * delta, -1 + (u + 1) * delta
    if low <= similarity <= centre:
        return (similarity - low) / delta
    if centre <= similarity <= high:
        return (high - similarity) / delta
    return 0.0


def _probability(s_ij: float, negatives_i, negatives_j, delta: float) -> float:
    """Eq. 1-7 transcribed with loops."""
    bins = round(2 / delta) + 1
    t = min(math.floor((s_ij + 1) / delta), bins - 2)
    h_left, h_right = _weight(s_ij, t, delta), _weight(s_ij, t + 1, delta)
    total = 0.0
    for negatives in (negatives_i, negatives_j):
        h = [sum(_weight(s, u, delta) for s in negatives) / len(negatives) for u in range(bins)]
        total += h_left * sum(h[t:]) + h_right * sum(h[t + 1 :])
    return total


def check_partition_of_unity() -> Verdict:
    worst = 0.0
    for delta in (2.0, 0.5, 0.125):
        for s in np.linspace(-1, 1, 101):
            worst = max(
                worst, abs(sum(_weight(s, u, delta) for u in range(round(2 / delta) + 1)) - 1)
            )
    return predicate(worst < 1e-12, f"The Eq. 3 weights of every s in [-1, 1] sum to 1 (max error {worst:.1e}): "
                     "h_left + h_right = 1 and each histogram of Eq. 4-5 sums to 1.", f"weights sum off by {worst}.")  # fmt: skip


def check_probability_estimate() -> Verdict:
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(20):
        s_ij = rng.uniform(-0.9, 0.9)
        neg_i, neg_j = rng.uniform(-1, 1, 30), rng.uniform(-1, 1, 30)
        estimate = _probability(s_ij, neg_i, neg_j, 2.0 / 2**10)
        empirical = np.mean(neg_i >= s_ij) + np.mean(neg_j >= s_ij)
        worst = max(worst, abs(estimate - empirical))
    return predicate(worst < 0.04,
                     f"As Delta -> 0 (Delta = 2^-9) Eq. 7 approaches the empirical P(s_ik >= s_ij) + "
                     f"P(s_jl >= s_ij) of Eq. 6 (max gap {worst:.3f}, 30 negatives, 20 pairs): an estimate "
                     "of the two false positive rates, whose sum may exceed 1.", f"gap {worst}.")  # fmt: skip


def _measured_gradient(s_ij: float, s_ik: float, delta: float, negatives: int = 4) -> float:
    """dP_ij/ds_ik by autograd through gradlab's Eq. 7 (checked above against the loops)."""
    from gradlab.functional.fappy import false_positive_probability

    size = negatives + 2
    similarities = torch.full((size, size), -0.95, dtype=torch.float64)
    similarities.fill_diagonal_(1.0)
    similarities[0, 1] = similarities[1, 0] = s_ij
    similarities[0, 2] = similarities[2, 0] = s_ik
    labels = torch.tensor([0, 0] + [1] * negatives)
    leaf = similarities.clone().requires_grad_(True)
    value, _ = false_positive_probability(
        leaf, labels, delta, pairs=(torch.tensor([0]), torch.tensor([1]))
    )
    (grad,) = torch.autograd.grad(value.sum(), leaf)
    return grad[0, 2].item()


def _loops_match_functional() -> float:
    from gradlab.functional.fappy import false_positive_probability

    rng = np.random.default_rng(1)
    worst = 0.0
    for _ in range(10):
        sims = rng.uniform(-1, 1, (6, 6))
        sims = (sims + sims.T) / 2
        np.fill_diagonal(sims, 1.0)
        labels = [0, 0, 1, 1, 2, 2]
        value, _ = false_positive_probability(torch.tensor(sims), torch.tensor(labels), 0.25,
                                              pairs=(torch.tensor([0]), torch.tensor([1])))  # fmt: skip
        negatives = [k for k in range(6) if labels[k] != 0]
        expected = _probability(sims[0, 1], sims[0, negatives], sims[1, negatives], 0.25)
        worst = max(worst, abs(value.item() - expected))
    return worst


def check_lemma1_support() -> Verdict:
    agreement = _loops_match_functional()
    delta, s_ij = 0.25, 0.1  # pair's bin [0, 0.25); the bin below is [-0.25, 0)
    inside = [_measured_gradient(s_ij, s, delta) for s in (0.05, 0.2)]
    below = [_measured_gradient(s_ij, s, delta) for s in (-0.2, -0.05)]
    outside = [_measured_gradient(s_ij, s, delta) for s in (-0.6, 0.5)]
    return predicate(
        False, "",
        f"Autograd through Eq. 7 (which matches the Eq. 1-7 loops to {agreement:.1e}) gives "
        f"dP/ds_ik = {inside} in the pair's bin, {below} in the bin below and {outside} beyond.",
        correction="Corrected: dP_ij/ds_ik != 0 <=> s_ik in [b_(t-1), b_(t+1)) (two bins, when "
        "h_left, h_right > 0).",
    )  # fmt: skip


def check_lemma1_value() -> Verdict:
    from gradlab.functional.fappy import fappy_gradient_closed_form, fappy_lemma1_as_printed

    cases = [(0.1, 0.05), (0.1, 0.2), (0.1, -0.1), (0.62, 0.55), (-0.4, -0.6)]
    measured = [_measured_gradient(p, s, 0.25) for p, s in cases]
    printed = [fappy_lemma1_as_printed(p, s, 0.25) for p, s in cases]
    closed = [fappy_gradient_closed_form(p, s, 0.25, 4) for p, s in cases]
    printed_error = max(abs(m - p) for m, p in zip(measured, printed, strict=True))
    closed_error = max(abs(m - c) for m, c in zip(measured, closed, strict=True))
    return predicate(
        printed_error < 1e-12, "",
        f"The appendix's -h_right differs from autograd by up to {printed_error:.3g}.",
        correction=f"Corrected: dP_ij/ds_ik = h_right/(|N| Delta) on [b_t, b_(t+1)) and "
        f"h_left/(|N| Delta) on [b_(t-1), b_t); it matches autograd to {closed_error:.1e}.",
    )  # fmt: skip


def check_pair_gradient() -> Verdict:
    from gradlab.functional.fappy import false_positive_probability

    rng = np.random.default_rng(2)
    sims = rng.uniform(-1, 1, (6, 6))
    sims = (sims + sims.T) / 2
    np.fill_diagonal(sims, 1.0)
    sims[0, 1] = sims[1, 0] = 0.1
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    leaf = torch.tensor(sims).requires_grad_(True)
    value, _ = false_positive_probability(
        leaf, labels, 0.25, pairs=(torch.tensor([0]), torch.tensor([1]))
    )
    (grad,) = torch.autograd.grad(value.sum(), leaf)
    measured = grad[0, 1].item()
    negatives = [2, 3, 4, 5]
    t = 4  # s_ij = 0.1 lies in bin 4 = [0, 0.25)
    h_i = sum(_weight(s, t, 0.25) for s in sims[0, negatives]) / 4
    h_j = sum(_weight(s, t, 0.25) for s in sims[1, negatives]) / 4
    printed, corrected = h_i + h_j, -(h_i + h_j) / 0.25
    return predicate(
        abs(measured - printed) < 1e-12, "",
        f"Autograd gives dP/ds_ij = {measured:.6f}; the appendix's h_i^t + h_j^t = {printed:.6f}.",
        correction=f"Corrected: -(h_i^t + h_j^t)/Delta = {corrected:.6f} (agrees: "
        f"{abs(measured - corrected) < 1e-12}).",
    )  # fmt: skip


def check_strict_condition() -> Verdict:
    value = _measured_gradient(0.1, -0.1, 0.25)
    return predicate(False, "", f"With s_ij in (b_t, b_(t+1)] and s_ik in the bin below, dP/ds_ik = {value:.4f} != 0.",
                     correction="Corrected: s_ik in [b_(t-1), b_(t+1)) and s_ij strictly inside its bin.")  # fmt: skip


def check_l2_equivalence() -> Verdict:
    x = sp.symbols("x1:4", real=True)
    y = sp.symbols("y1:4", real=True)
    nx, ny = sp.sqrt(sum(v**2 for v in x)), sp.sqrt(sum(v**2 for v in y))
    distance_squared = sum((a / nx - b / ny) ** 2 for a, b in zip(x, y, strict=True))
    cosine = sum(a * b for a, b in zip(x, y, strict=True)) / (nx * ny)
    return symbolic_equality(
        distance_squared, 2 - 2 * cosine, [*x, *y], note="|f_x/|f_x| - f_y/|f_y||^2 = 2 - 2 cos."
    )


def check_delta_l2_monotone() -> Verdict:
    lower, width = sp.symbols("b_t Delta", positive=True)
    delta_l2 = sp.sqrt(2 - 2 * lower) - sp.sqrt(2 - 2 * (lower + width))
    derivative = sp.diff(delta_l2, width)
    positive = all(
        derivative.subs({lower: sp.Rational(k, 10) - 1, width: sp.Rational(1, 10)}) > 0
        for k in range(1, 18)
    )
    return predicate(positive, f"dDelta^L2/dDelta = {derivative} > 0 on the grid: wider cosine bins are wider L2 shells "
                     "(the map s -> sqrt(2 - 2s) is decreasing, so the bin order reverses).", "not monotone.")  # fmt: skip


def check_fusion_weights() -> Verdict:
    weights, loss = [], 0.0
    deltas = [2.0, 1.0, 0.5, 0.25]
    for index in range(len(deltas)):
        contribution = [0.0] * len(deltas)
        contribution[index] = 1.0
        loss = 0.0
        for value in contribution:
            loss = (loss + value) / 2.0
        weights.append(loss)
    halving = all(abs(weights[k + 1] / weights[k] - 2.0) < 1e-12 for k in range(len(weights) - 1))
    return predicate(halving, f"Algorithm 1 gives the scales Delta = {deltas} the weights {weights}: each doubling "
                     "of Delta halves the weight.", f"weights {weights}.")  # fmt: skip


def check_no_negatives() -> Verdict:
    try:
        _probability(0.3, [], [], 0.25)  # a batch of one class: no negatives
        outcome = "a value"
    except ZeroDivisionError as error:
        outcome = f"ZeroDivisionError ({error})"
    return predicate(False, "", f"Eq. 4-5 transcribed, evaluated for a batch of one class (|N_ij| = 0), raise "
                     f"{outcome}; Algorithm 1 likewise divides by count_positive_pairs, 0 for a batch of singletons.",
                     correction="gradlab returns P = 0 for a pair without negatives and a loss of 0 for a batch "
                     "without positive pairs.")  # fmt: skip


def check_edges() -> Verdict:
    """Eq. 7 at its edges: a pair in the first bin, one negative, empty bins everywhere else."""
    import itertools

    values = []
    for s_ij, negative, delta in itertools.product(
        (-1.0, -0.99, 0.999, 1.0), (-1.0, 0.0, 1.0), (2.0, 0.25)
    ):
        value = _probability(s_ij, [negative], [negative], delta)
        values.append(value)
    finite = all(math.isfinite(v) for v in values)
    bounded = all(0.0 <= v <= 2.0 for v in values)
    return predicate(finite and bounded,
                     f"Eq. 1-7 stay finite and in [0, 2] for a pair at s_ij in {{-1, -0.99, 0.999, 1}} "
                     f"(first and last bins), a single negative, and all other bins empty "
                     f"({len(values)} cases): the histogram estimate needs no guard there.",
                     f"non-finite or out-of-range values: {values}.")  # fmt: skip


def claims() -> list[Claim]:
    """The audited claims of seed 004."""
    table = [
        ("eq3", "triangular weights", "w_ij^t = (s - b_(t-1))/Delta on [b_(t-1), b_t], (b_(t+1) - s)/Delta on [b_t, b_(t+1)]", "float64", check_partition_of_unity),
        ("eq7", "the histogram estimate of P_ij (Eq. 6)", "P_ij ~ h_left sum_(u>=t) h_i^u + h_right sum_(u>=t+1) h_i^u + (j)", "float64, Delta -> 0", check_probability_estimate),
        ("claim-edges", "Eq. 7 at the first and last bins, one negative, empty bins", "P_ij^Delta at the domain edges", "float64 transcription", check_edges),
        ("claim-empty-negative-set", "Eq. 4-5 and Algorithm 1 are defined for every batch", "1/|N_ij|, 1/count_positive_pairs", "inspection", check_no_negatives),
        ("lemma1", "gradient support of P_ij", "dP/ds_ik != 0 <=> s_ik in [b_t, b_(t+1)]", "float64 autograd", check_lemma1_support),
        ("claim-lemma1-value", "the gradient with respect to a negative (appendix)", "dP/ds_ik = -h_right on [b_t, b_(t+1)], 0 otherwise", "float64 autograd vs closed form", check_lemma1_value),
        ("claim-pair-gradient", "the gradient with respect to the pair (appendix)", "dP/ds_ij = h_i^t + h_j^t", "float64 autograd", check_pair_gradient),
        ("claim-strict-condition", "the strict condition (appendix)", "dP/ds_ik != 0 iff s_ik, s_ij in (b_t, b_(t+1)]", "float64 autograd", check_strict_condition),
        ("claim-l2-equivalence", "cosine and L2 distance (appendix)", "d_xy = sqrt(2 - 2 s_xy)", "sympy.simplify", check_l2_equivalence),
        ("claim-delta-l2", "Delta^L2 grows with Delta (appendix)", "Delta^L2 = sqrt(2 - 2b_t) - sqrt(2 - 2b_(t+1))", "sympy.diff", check_delta_l2_monotone),
        ("claim-fusion-weights", "Algorithm 1 halves the weight as Delta doubles", "L <- (L + L_Delta/count)/2", "execution of Algorithm 1", check_fusion_weights),
    ]  # fmt: skip
    return [
        Claim(SEED, label, statement, formula, method, check)
        for label, statement, formula, method, check in table
    ]
