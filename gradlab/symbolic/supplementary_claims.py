"""Audit of the Smooth-AP supplementary material (Brown et al. 2020): Eq. 1, Table S1, the batch-size conjecture,
Table S2's complexities and its timing arithmetic.

Complexity claims are checked against counted operations of a transcribed procedure: the ratio of
the count to the printed order must stay within a factor :data:`ORDER_SPREAD` over a grid that
spans two orders of magnitude in every variable (a tight order, as the table compares them).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import sympy as sp
from scipy.special import expit

from gradlab.symbolic.batch_size import conjecture_verdict
from gradlab.symbolic.claims import (
    Claim,
    Form,
    Verdict,
    decide,
    mutant,
    numeric_agreement,
    scaled,
    with_parameters,
)
from gradlab.symbolic.orders import order_check

SEED = "002_9d7d2555864f9baa"

M, n, p, L = sp.symbols("M n p L", positive=True, integer=True)
D, tau_s, threshold = sp.symbols("D tau eps", positive=True)


def _sigmoid(value, temperature):
    return 1 / (1 + sp.exp(-value / temperature))


# --- Eq. 1 ---------------------------------------------------------------------------------


def check_operating_region(form: Form) -> Verdict:
    """Eq. 1 as printed against a brute-force count of the m x m entries whose slope is large.

    The sample: ``numpy.random.default_rng(7)`` draws 12 score vectors, each of a size drawn
    from ``integers(5, 40)`` and then ``normal(scale=0.05)`` scores (differences up to the
    edge of the operating region at tau = 0.01).
    """
    import torch

    slope = sp.lambdify((D, tau_s), form.value["|dG/dD|"], "numpy")
    normalizer = sp.lambdify(sp.Symbol("m"), form.value["denominator"], "numpy")
    eps = float(form.value["threshold"])
    rng = np.random.default_rng(7)
    cases = [rng.normal(scale=0.05, size=int(rng.integers(5, 40))) for _ in range(12)]

    def printed(scores):
        differences = scores[None, :] - scores[:, None]
        return np.sum(np.abs(slope(differences, 0.01)) > eps) / normalizer(len(scores))

    def brute_force(scores):
        d = torch.tensor(scores[None, :] - scores[:, None], requires_grad=True)
        (grad,) = torch.autograd.grad(torch.sigmoid(d / 0.01).sum(), d)
        return float((grad.abs() > 0.005).double().mean())

    return numeric_agreement(printed, brute_force, cases, tolerance=1e-12)


# --- Table S1 ------------------------------------------------------------------------------

TABLE_S1 = """\
s1 = repeat(scores, m, 0)            # scores.repeat(m, 1): m x m
s2 = s1.T
D = s1 - s2
D_ = t_sigmoid(D, tau=0.01)
R = 1 + sum(D_ * (1 - eye(m)), 1)
R_pos = gt.T * R
AP = (1 / sum(gt)) * sum(R_pos / R)
loss = 1 - AP"""

TABLE_S1_CORRECTED = """\
s1 = repeat(scores, m, 0)
s2 = s1.T
D = s1 - s2
D_ = t_sigmoid(D, tau=0.01)
R = 1 + sum(D_ * (1 - eye(m)), 1)
R_pos = 1 + sum(D_ * (1 - eye(m)) * gt, 1)
AP = (1 / sum(gt)) * sum(gt[0] * R_pos / R)
loss = 1 - AP"""


def run_pseudocode(code: str, scores: np.ndarray, gt: np.ndarray, counter: list | None = None):
    """Execute Table S1 (numpy spelling of its PyTorch lines); ``counter`` counts sigmoids."""

    def t_sigmoid(tensor, tau=1.0):
        if counter is not None:
            counter.append(np.size(tensor))
        return expit(tensor / tau)

    namespace = {"repeat": np.repeat, "sum": np.sum, "eye": np.eye, "t_sigmoid": t_sigmoid,
                 "scores": scores, "gt": gt, "m": scores.shape[1]}  # fmt: skip
    exec(code, namespace)  # the printed pseudocode is the data under audit
    return namespace["loss"]


def _smooth_ap_loss(scores, positive, temperature=0.01):
    """``1 - SmoothAP`` (rank convention) in float64 loops."""
    total = 0.0
    for i in np.flatnonzero(positive):
        g = expit((scores - scores[i]) / temperature)
        g[i] = 0.0
        total += (1.0 + g[positive].sum()) / (1.0 + g.sum())
    return 1.0 - total / positive.sum()


def check_table_s1(form: Form) -> Verdict:
    """The pseudo-code against SmoothAP by hand on 10 draws of 9 scores ``N(0, 0.1^2)`` (score
    differences of a few tau = 0.01, where the sigmoid is not yet a step)."""
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(10):
        scores = rng.normal(size=(1, 9)) * 0.1
        gt = (rng.random((1, 9)) < 0.4).astype(float)
        gt[0, 0] = 1.0
        cases.append((scores, gt))
    return numeric_agreement(
        lambda c: float(np.squeeze(run_pseudocode(form.value, *c))),
        lambda c: _smooth_ap_loss(c[0][0], c[1][0].astype(bool)),
        cases,
        tolerance=1e-12,
    )


# --- the batch-size conjecture -------------------------------------------------------------


def check_batch_size_conjecture(form: Form, measurement: Mapping | None = None) -> Verdict:
    """The conjecture "P grows with m": not testable here, a miniature shown as context.

    An empirical claim about the authors' experiment (one epoch on Stanford Online Products with a
    ResNet-50, Fig. S7a): a miniature cannot reproduce or refute it, so the verdict is
    ``not-testable-here`` whatever is measured. A measurement passed in (the report its own,
    ``gradlab audit --measure`` the quick one) is shown as context by
    :func:`gradlab.symbolic.batch_size.conjecture_verdict`: the decision rule's outcome on the
    named miniature and the trend of each of P's parts; this module never trains.

    Args:
        form: the printed form, ``{"P over m": "rises"}`` (or a mutant's trend).
        measurement: ``gradlab.experiments.p_vs_batch_size.measure``'s dict, or None.

    Example:
        >>> verdict = check_batch_size_conjecture(Form({"P over m": "rises"}))
        >>> verdict.verdict, verdict.detail.split(",")[0]
        ('not-testable-here', 'needs Stanford Online Products with a ResNet-50')
    """
    return Verdict(*conjecture_verdict(measurement, form.value["P over m"]))


# --- complexities (Table S2, and the counted procedures) -------------------------------------


def merge_sort_comparisons(values: Sequence[float] | np.ndarray) -> int:
    """Comparisons a top-down merge sort makes to order ``values`` descending.

    The left half holds ``len(values) // 2`` items and ties are taken from the left run first (a
    stable sort). This is the ranking step whose cost Table S2 of Brown et al. (2020) gives
    for Blackbox AP (:func:`count_blackbox` counts it on a random retrieval set).

    Args:
        values: the numbers to sort (any iterable of comparable items).

    Returns:
        The number of pairwise comparisons made while merging.

    Example:
        >>> merge_sort_comparisons([4, 3, 2, 1])  # sorted: each merge ends when the left run does
        4
        >>> merge_sort_comparisons([1, 2, 3, 4])
        4
        >>> merge_sort_comparisons([3, 1, 4, 2])
        5
    """
    count = 0

    def sort(items):
        nonlocal count
        if len(items) <= 1:
            return items
        middle = len(items) // 2
        left, right = sort(items[:middle]), sort(items[middle:])
        merged, a, b = [], 0, 0
        while a < len(left) and b < len(right):
            count += 1
            if left[a] >= right[b]:
                merged.append(left[a])
                a += 1
            else:
                merged.append(right[b])
                b += 1
        return merged + left[a:] + right[b:]

    sort(list(values))
    return count


def count_blackbox(positives: int, negatives: int) -> int:
    """Comparisons of Blackbox AP's ranking step: sort the whole retrieval set, ``M = p + n``."""
    rng = np.random.default_rng(positives * 7919 + negatives)
    return merge_sort_comparisons(rng.random(positives + negatives))


def fastap_with_operation_count(
    distances: np.ndarray, positive: np.ndarray, bins: int
) -> tuple[float, int]:
    """FastAP's histogram sum for one query, executed with numpy, and its scalar operations.

    Brown et al. (2020, suppl.), Table S2 (FastAP, Cakir et al.): soft histograms of the M distances in [0, 2] into
    L bins (triangular kernel of width 2 / (L - 1), positives and all), their cumulative sums, and
    ``sum_l h+_l H+_l / H_l`` over the bins. Operations are counted per array operation: 2 M per
    bin (a kernel weight into each histogram), 2 L for the cumulative sums, 3 L for the AP terms.

    Returns:
        ``(value, operations)``: the sum (an empty prefix, ``H_l = 0``, adds nothing) and the count.
    """
    centres = np.linspace(0, 2, bins)
    operations = 0
    positives_hist, all_hist = np.zeros(bins), np.zeros(bins)
    for b, centre in enumerate(centres):  # one kernel evaluation per item and bin
        weights = np.clip(1 - np.abs(distances - centre) * (bins - 1) / 2, 0, None)
        positives_hist[b], all_hist[b] = weights[positive].sum(), weights.sum()
        operations += 2 * len(distances)
    cumulative_pos, cumulative_all = np.cumsum(positives_hist), np.cumsum(all_hist)
    operations += 2 * bins
    value = np.sum(positives_hist * cumulative_pos / np.maximum(cumulative_all, 1e-12))
    operations += 3 * bins
    return float(value), operations


def count_fastap(items: int, bins: int) -> int:
    """Scalar operations of FastAP for one query (:func:`fastap_with_operation_count`) on
    ``items`` distances spread over [0, 2], every third one a positive."""
    distances = np.linspace(0, 2, items)
    return fastap_with_operation_count(distances, np.arange(items) % 3 == 0, bins)[1]


def count_smooth_ap(items: int) -> int:
    """Sigmoid evaluations of Table S1 for one query (the pseudocode executed)."""
    counter: list[int] = []
    rng = np.random.default_rng(items)
    gt = np.zeros((1, items))
    gt[0, :4] = 1.0
    run_pseudocode(TABLE_S1, rng.normal(size=(1, items)), gt, counter)
    return int(sum(counter))


def _log2(value):
    return sp.log(value, 2)


# The counts are recomputed by every check (well under a second), not cached at module level:
# mutation testing forks each mutant's run from a clean run, which would hand it cached counts.


def check_blackbox_order(form: Form) -> Verdict:
    """Blackbox AP's merge-sort count over ``p`` in {4, 64, 1024} and ``n`` in {8, 128, 2048}."""
    counts = {(("M", p_ + n_), ("n", n_), ("p", p_)): count_blackbox(p_, n_)
              for p_ in (4, 64, 1024) for n_ in (8, 128, 2048)}  # fmt: skip
    return order_check(form.value, counts)


def check_fastap_order(form: Form) -> Verdict:
    """FastAP's count over ``M`` in {8, 128, 2048} and ``L`` in {5, 20, 320}."""
    counts = {(("L", l_), ("M", m_)): count_fastap(m_, l_) for m_ in (8, 128, 2048)
              for l_ in (5, 20, 320)}  # fmt: skip
    return order_check(form.value, counts)


def check_smooth_ap_order(form: Form) -> Verdict:
    """SmoothAP's count over ``M`` in {8, 32, 128, 512}."""
    return order_check(form.value, {(("M", m_),): count_smooth_ap(m_) for m_ in (8, 32, 128, 512)})


# --- timing arithmetic ---------------------------------------------------------------------

TABLE_S2_LOSS_MS = {"Blackbox AP": 3.7, "FastAP": 4.2, "Smooth-AP": 6.6}


def check_overhead(form: Form) -> Verdict:
    """"< 3 ms for every iteration compared to previous methods": Table S2's loss times."""
    bound = float(form.value["bound (ms)"])
    times = form.value["loss time (ms)"]
    gaps = {name: round(times["Smooth-AP"] - t, 6) for name, t in times.items() if name != "Smooth-AP"}
    return decide(
        max(gaps.values()) < bound,
        f"Smooth-AP's loss time exceeds the others' by {gaps} ms, all < {bound} ms "
        f"({times['Smooth-AP']} ms is {times['Smooth-AP'] / 705.0:.2%} of the 705 ms backbone).",
        f"Smooth-AP's loss time exceeds the others' by {gaps} ms, not all < {bound} ms.",
    )  # fmt: skip


def claims(p_vs_batch_size: Mapping | None = None) -> list[Claim]:
    """The audited claims of Smooth-AP's supplementary material (Brown et al., 2020).

    Args:
        p_vs_batch_size: the measurement that decides the batch-size conjecture (see
            :func:`check_batch_size_conjecture`); None leaves that claim not measured.
    """
    slope = _sigmoid(D, tau_s) * (1 - _sigmoid(D, tau_s)) / tau_s
    eq1 = Form({"|dG/dD|": slope, "threshold": sp.Rational(5, 1000), "denominator": sp.Symbol("m") ** 2},
               context="P = sum_ij [|dG(D_ij)/dD_ij| > threshold] / denominator, tau = 0.01")  # fmt: skip
    code = Form(TABLE_S1, render=str)
    trend = Form({"P over m": "rises"}, context="P increases with mini-batch size m (4 per class)",
                 render=lambda v: f"P {v['P over m']} with m")  # fmt: skip
    blackbox = Form(n * _log2(n), lhs="Blackbox AP cost per query (Table S2)")
    fastap = Form(M * L, lhs="FastAP cost per query (Table S2)")
    smooth = Form(M**2, lhs="Smooth-AP cost per query (Table S2)")
    overhead = Form({"loss time (ms)": dict(TABLE_S2_LOSS_MS), "bound (ms)": 3},
                    context="Smooth-AP adds < 3 ms per iteration compared to previous methods",
                    render=lambda v: f"{v['loss time (ms)']}; bound {v['bound (ms)']} ms")  # fmt: skip
    return [
        Claim(SEED, "eq1", "P, the proportion of difference-matrix entries in the operating region",
              eq1, check_operating_region, "float64 Eq. 1 vs autograd slope of every entry",
              mutants=(with_parameters(eq1, "diagonal left out of the denominator",
                                       denominator=sp.Symbol("m") * (sp.Symbol("m") - 1)),
                       with_parameters(eq1, "1/tau dropped", **{"|dG/dD|": slope * tau_s})),
              note="Eq. 1 counts all m^2 entries, the m diagonal ones (D = 0) included."),
        Claim(SEED, "claim-table-s1", "the Table S1 pseudocode computes 1 - Smooth-AP", code,
              check_table_s1, "float64, the pseudocode executed line by line",
              correction=mutant(code, TABLE_S1_CORRECTED, "corrected"),
              mutants=(mutant(code, TABLE_S1_CORRECTED, "R_pos over the positives, AP over them"),),
              note="As printed, R_pos = gt.T * R broadcasts to m x m with R_pos / R = gt_i, so "
              "1 - AP = 1 - m whatever the scores. D = s1 - s2 has the rank sign (s_j - s_i), so R "
              "is right."),
        Claim(SEED, "claim-p-grows-with-batch-size",
              "P grows with mini-batch size because larger batches hold more close scores", trend,
              functools.partial(check_batch_size_conjecture, measurement=p_vs_batch_size),
              "a measurement passed in (4 per class, m/4 classes, several seeds): trend vs spread",
              mutants=(with_parameters(trend, "P falls with m", **{"P over m": "falls"}),)),
        Claim(SEED, "claim-table-s2-blackbox", "Blackbox AP costs O(n log n) per query", blackbox,
              check_blackbox_order, "comparisons of a merge sort of the retrieval set, p and n varied",
              correction=mutant(blackbox, M * _log2(M), "corrected"),
              mutants=(mutant(blackbox, M * _log2(M), "M log M"),),
              note="Ranking needs all M = p + n items sorted; with |P| = 4 fixed (the seed's "
              "setting) n log n and M log M are the same order."),
        Claim(SEED, "claim-table-s2-fastap", "FastAP costs O(ML) per query", fastap,
              check_fastap_order, "operations of FastAP's histogram and AP, executed, M and L varied",
              mutants=(mutant(fastap, M, "L dropped"), mutant(fastap, M**2, "M^2"))),
        Claim(SEED, "claim-table-s2-complexity", "Smooth-AP costs O(M^2) per query", smooth,
              check_smooth_ap_order, "sigmoid evaluations of Table S1 executed",
              mutants=(mutant(smooth, M, "M"), scaled(smooth, M)),
              note="Per query, as Table S1 computes it; a batch of M queries costs O(M^3) that way, "
              "gradlab's positive rows O(M^2 |P|)."),
        Claim(SEED, "claim-overhead-3ms", "Smooth-AP adds < 3 ms per iteration over the others",
              overhead, check_overhead, "arithmetic on Table S2",
              mutants=(with_parameters(overhead, "bound 2 ms", **{"bound (ms)": 2}),
                       with_parameters(overhead, "Smooth-AP 7.0 ms",
                                       **{"loss time (ms)": {**TABLE_S2_LOSS_MS, "Smooth-AP": 7.0}}))),
    ]  # fmt: skip
