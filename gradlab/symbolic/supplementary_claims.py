"""Audit of the Smooth-AP supplementary material (Brown et al. 2020): Eq. 1, Table S1, the
batch-size conjecture, Table S2's complexities and timing arithmetic, the AP numbers of
Fig. S1-S6 and Fig. S7's "hence receive non-negligible gradients".

Complexity claims are checked against counted operations of a transcribed procedure by
:func:`gradlab.symbolic.orders.order_check` (log factors told apart). Claims about the authors'
experiments (the batch-size conjecture, Fig. S1-S4's gains, the chain to Table 5) are
``not-testable-here``: they need the authors' data; what can be computed is shown as context.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp
from scipy.special import expit

from gradlab.symbolic.batch_size import NOT_TESTABLE_HERE, conjecture_verdict
from gradlab.symbolic.claims import (
    PRINTED_RESULTS_ONLY,
    Claim,
    Form,
    Verdict,
    decide,
    mutant,
    numeric_agreement,
    scaled,
    undecided,
    with_parameters,
)
from gradlab.symbolic.orders import order_check
from gradlab.validation import check_int_in_range

if TYPE_CHECKING:
    import torch

OPERATOR_NAMES = ("sign", "shift", "factor", "term", "exponent", "log", "swap")
"""The mutation operators of :mod:`gradlab.symbolic.mutation_operators`, for ``inapplicable``."""

SEED = "002_9d7d2555864f9baa"

M, n, p, L = sp.symbols("M n p L", positive=True, integer=True)
m_ = sp.Symbol("m", positive=True, integer=True)
n_pos = sp.Symbol("|P|", positive=True, integer=True)
D, tau_s, threshold = sp.symbols("D tau eps", positive=True)


def _sigmoid(value, temperature):
    return 1 / (1 + sp.exp(-value / temperature))


# --- Eq. 1 ---------------------------------------------------------------------------------


EQ1_RANGES = ("i from", "i to", "j from", "j to")
"""The index ranges of Eq. 1's double sum, part of its form (inclusive, as printed)."""


def _eq1_problem(value: Mapping) -> str:
    """Why an Eq. 1 form cannot be evaluated as a P (empty when it can)."""
    allowed = {"|dG/dD|": {D, tau_s}, "threshold": set(), "denominator": {m_}}
    allowed.update({key: {m_} for key in EQ1_RANGES})
    for key, symbols in allowed.items():
        piece = sp.sympify(value.get(key, sp.nan))
        if piece.has(sp.nan) or not piece.free_symbols <= symbols:
            return (f"{key} = {piece} is not an expression in {sorted(map(str, symbols))} "
                    f"alone{_namesake_hint(piece.free_symbols - symbols, symbols)}")  # fmt: skip
    return ""


def _namesake_hint(foreign: set, symbols: set) -> str:
    """For a symbol of a claim's name but other assumptions (``sp.Symbol("m")`` for the
    claim's positive integer ``m``): SymPy holds them apart, so the form's ``m`` is not the
    claim's; say which assumptions the claim's carries."""
    by_name = {str(symbol): symbol for symbol in symbols}
    namesakes = sorted(str(symbol) for symbol in foreign if str(symbol) in by_name)
    if not namesakes:
        return ""
    name = namesakes[0]
    given = getattr(by_name[name], "_assumptions_orig", None)  # as declared (SymPy >= 1.12)
    given = given if given is not None else by_name[name].assumptions0
    declared = ", ".join(f"{key}={value}" for key, value in sorted(given.items()))
    return (f" (its {name} is another symbol than the claim's: SymPy tells symbols apart by "
            f"their assumptions; use sp.Symbol({name!r}, {declared}), or the claim's own "
            "symbols)")


def check_operating_region(form: Form) -> Verdict:
    """Eq. 1 as printed against a brute-force count of the m x m entries whose slope is large.

    The form carries the whole printed expression: the slope, the threshold, the index ranges
    of the double sum (``i, j = 0 .. m - 1``) and the denominator, each evaluated at each
    case's m; a range that leaves the matrix (an index below 0 or above ``m - 1``) fails.
    The sample: ``numpy.random.default_rng(7)`` draws 12 score vectors, each of a size drawn
    from ``integers(5, 40)`` and then ``normal(scale=0.05)`` scores (differences up to the
    edge of the operating region at tau = 0.01).
    """
    import torch

    value = form.value
    problem = _eq1_problem(value)
    if problem:
        return decide(not problem, "", f"Eq. 1's form cannot be evaluated: {problem}.")
    slope = sp.lambdify((D, tau_s), value["|dG/dD|"], "numpy")
    normalizer = sp.lambdify(m_, value["denominator"], "numpy")
    eps = float(value["threshold"])
    rng = np.random.default_rng(7)
    cases = [rng.normal(scale=0.05, size=int(rng.integers(5, 40))) for _ in range(12)]
    for scores in cases:
        size = len(scores)
        bounds = [sp.sympify(value[key]).subs(m_, size) for key in EQ1_RANGES]
        inside = all(b.is_integer and 0 <= int(b) <= size - 1 for b in bounds)
        if not inside:
            shown = ", ".join(f"{k} = {b}" for k, b in zip(EQ1_RANGES, bounds, strict=True))
            return decide(inside, "", f"at m = {size} the ranges ({shown}) leave the m x m "
                          f"matrix, whose indices run 0..{size - 1}.")  # fmt: skip

    def printed(scores):
        size = len(scores)
        lo_i, hi_i, lo_j, hi_j = (int(sp.sympify(value[key]).subs(m_, size)) for key in EQ1_RANGES)
        differences = scores[None, lo_j : hi_j + 1] - scores[lo_i : hi_i + 1, None]
        with np.errstate(all="ignore"):  # a mutant's slope may divide by zero: counted as is
            slopes = np.broadcast_to(slope(differences, 0.01), differences.shape)
        return np.sum(slopes > eps) / float(normalizer(size))

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


def run_pseudocode(
    code: str, scores: np.ndarray, gt: np.ndarray, counter: list | None = None, name: str = "loss"
):
    """Execute Table S1 (numpy spelling of its PyTorch lines); ``counter`` counts sigmoids.

    Returns the variable ``name`` after the code ran (the loss, or ``"R_pos"``, ``"R"``...).
    """

    def t_sigmoid(tensor, tau=1.0):
        if counter is not None:
            counter.append(np.size(tensor))
        return expit(tensor / tau)

    namespace = {"repeat": np.repeat, "sum": np.sum, "eye": np.eye, "t_sigmoid": t_sigmoid,
                 "scores": scores, "gt": gt, "m": scores.shape[1]}  # fmt: skip
    exec(code, namespace)  # the printed pseudocode is the data under audit
    return namespace[name]


def _smooth_ap_loss(scores, positive, temperature=0.01):
    """``1 - SmoothAP`` (rank convention) in float64 loops."""
    total = 0.0
    for i in np.flatnonzero(positive):
        g = expit((scores - scores[i]) / temperature)
        g[i] = 0.0
        total += (1.0 + g[positive].sum()) / (1.0 + g.sum())
    return 1.0 - total / positive.sum()


def _table_s1_cases() -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(5)
    cases = []
    for _ in range(10):
        scores = rng.normal(size=(1, 9)) * 0.1
        gt = (rng.random((1, 9)) < 0.4).astype(float)
        gt[0, 0] = 1.0
        cases.append((scores, gt))
    return cases


def _ranks_among_positives(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """``1 + sum_(j positive, j != i) sigmoid((s_j - s_i) / 0.01)`` at each positive i, loops."""
    ranks = []
    for i in np.flatnonzero(positive):
        g = expit((scores - scores[i]) / 0.01)
        g[i] = 0.0
        ranks.append(1.0 + g[positive].sum())
    return np.array(ranks)


def _r_pos_diagnosis(code: str, cases) -> str:
    """What R_pos holds when the code runs: its shape and whether it is the rank among positives.

    Computed for the code as given and, when it multiplies ``gt.T * R``, for the element-wise
    reading ``gt[0] * R`` too: both are compared with the rank among the positives
    (:func:`_ranks_among_positives`) and the loss is evaluated on every draw (read to 12
    decimals: a loss that varies only beyond them is reported as constant).
    """
    readings = {"as printed": code}
    if "gt.T * R" in code:
        readings["read element-wise (gt[0] * R)"] = code.replace("gt.T * R", "gt[0] * R")
    parts = []
    for reading, text in readings.items():
        try:
            r_pos = [np.asarray(run_pseudocode(text, *c, name="R_pos")) for c in cases]
            losses = {round(float(np.squeeze(run_pseudocode(text, *c))), 12) for c in cases}
        except Exception as error:  # a mutant's code may not run: say so
            parts.append(f"{reading} the code raises {type(error).__name__}")
            continue
        ranks = [_ranks_among_positives(c[0][0], c[1][0].astype(bool)) for c in cases]
        matches = sum(r.size == len(c[0][0])
                      and np.allclose(np.ravel(r)[c[1][0].astype(bool)], k, rtol=0, atol=1e-12)
                      for r, k, c in zip(r_pos, ranks, cases, strict=True))  # fmt: skip
        loss = (f"the loss is {losses.pop():.12g} on every draw, whatever the scores"
                if len(losses) == 1 else f"the loss takes {len(losses)} values over the draws")
        rank = (f"R_pos is the rank among the positives in {matches} of {len(cases)} draws"
                if matches else "R_pos is the rank among the positives in none of the draws")
        parts.append(f"{reading}, R_pos has shape {r_pos[0].shape}: {rank}, and {loss}")
    text = "; ".join(parts) + "."
    return text[:1].upper() + text[1:]


TABLE_S1_SLIPS = {
    "R_pos without the positives' mask (the rank among all items)":
        ("R_pos = 1 + sum(D_ * (1 - eye(m)) * gt, 1)", "R_pos = 1 + sum(D_ * (1 - eye(m)), 1)"),
    "diagonal counted in R (sigmoid(0) = 1/2 added)":
        ("R = 1 + sum(D_ * (1 - eye(m)), 1)", "R = 1 + sum(D_, 1)"),
    "D = s2 - s1 (the score sign flipped)": ("D = s1 - s2", "D = s2 - s1"),
    "AP divided by m, not by the number of positives": ("(1 / sum(gt))", "(1 / m)"),
    "AP summed over every item (gt[0] dropped)": ("sum(gt[0] * R_pos / R)", "sum(R_pos / R)"),
    "temperature 0.1 for 0.01": ("tau=0.01", "tau=0.1"),
}
"""Slips a reader of Table S1 would make, as (line of the corrected code, line with the slip)."""


def table_s1_slips(corrected: Form) -> tuple[Form, ...]:
    """The hand-written slips of the corrected Table S1 (:data:`TABLE_S1_SLIPS`), as mutants.

    Example:
        >>> slips = table_s1_slips(Form(TABLE_S1_CORRECTED, render=str))
        >>> [check_table_s1(slip).verdict for slip in slips[:2]]
        ['fails', 'fails']
    """
    return tuple(mutant(corrected, corrected.value.replace(right, wrong), name)
                 for name, (right, wrong) in TABLE_S1_SLIPS.items())  # fmt: skip


def check_table_s1(form: Form) -> Verdict:
    """The pseudo-code against SmoothAP by hand on 10 draws of 9 scores ``N(0, 0.1^2)`` (score
    differences of a few tau = 0.01, where the sigmoid is not yet a step).

    When the code does not compute 1 - Smooth-AP, the detail says what its ``R_pos`` holds,
    computed on the same draws (:func:`_r_pos_diagnosis`); where ``R_pos``, a rank per item,
    has another shape than the ``m`` scores' (an ``(m, m)`` matrix), the form is
    ``ill-typed``.
    """
    cases = _table_s1_cases()

    def printed(case):
        try:
            return float(np.squeeze(run_pseudocode(form.value, *case)))
        except Exception:  # a slip that does not run computes nothing: NaN, the worst error
            return float("nan")

    verdict = numeric_agreement(
        printed, lambda c: _smooth_ap_loss(c[0][0], c[1][0].astype(bool)), cases, tolerance=1e-12
    )
    if verdict.verdict == "holds":
        return verdict
    # R_pos, a rank per item, is a vector of the m scores' length: any other shape cannot be it
    shapes = {_r_pos_shape(form.value, case) for case in cases}
    m = cases[0][0].shape[1]
    ill_typed = verdict.verdict == "fails" and any(shape not in ((m,), None) for shape in shapes)
    return replace(verdict, detail=f"{verdict.detail} {_r_pos_diagnosis(form.value, cases)}",
                   **({"failure": "ill-typed"} if ill_typed else {}))


def _r_pos_shape(code: str, case) -> tuple[int, ...] | None:
    """The shape of ``R_pos`` when ``code`` runs on ``case``; ``None`` where it does not run or
    defines no ``R_pos``."""
    try:
        return np.shape(run_pseudocode(code, *case, name="R_pos"))
    except Exception:  # a mutant's code may not run, or name no R_pos
        return None


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


# The counts are recomputed by every check (well under a second), not cached at module level:
# mutation testing forks each mutant's run from a clean run, which would hand it cached counts.


def order_form_problem(order: sp.Expr) -> str:
    """Why ``order`` is not written as an order of growth (empty when it is).

    Table S2 writes each cost as a product of powers of its variables and of their logs with no
    constant factor (``O(n log(n))``, ``O(ML)``, ``O(M^2)``). ``2 M^2`` or ``(M + 1)^2`` are the
    same orders, but not in that form: checked as printed data, they are other claims.

    Example:
        >>> M = sp.Symbol("M", positive=True)
        >>> order_form_problem(M**2 * sp.log(M)), order_form_problem(2 * M**2)
        ('', 'the factor 2 of 2*M**2 is not a positive power of a variable or of its log')
    """
    expression = sp.sympify(order)
    for factor in sp.Mul.make_args(expression):
        base, power = factor.as_base_exp()
        variable = base.args[0] if isinstance(base, sp.log) and len(base.args) == 1 else base
        if not (power.is_Integer and power > 0 and isinstance(variable, sp.Symbol)):
            return (f"the factor {factor} of {expression} is not a positive power of a variable "
                    "or of its log")  # fmt: skip
    return ""


def _checked_order(form: Form, counts: dict) -> Verdict:
    """:func:`order_form_problem`, then :func:`gradlab.symbolic.orders.order_check`."""
    problem = order_form_problem(form.value)
    if problem:
        return decide(not problem, "", f"not written as an order: {problem}.")
    return order_check(form.value, counts)


def check_blackbox_order(form: Form) -> Verdict:
    """Blackbox AP's merge-sort count over ``p`` in {4, 64, 1024} and ``n`` in {8, 128, 2048}."""
    counts = {(("M", p_ + n_), ("n", n_), ("p", p_)): count_blackbox(p_, n_)
              for p_ in (4, 64, 1024) for n_ in (8, 128, 2048)}  # fmt: skip
    return _checked_order(form, counts)


def check_fastap_order(form: Form) -> Verdict:
    """FastAP's count over ``M`` in {8, 128, 2048} and ``L`` in {5, 20, 320}."""
    counts = {(("L", bins), ("M", items)): count_fastap(items, bins) for items in (8, 128, 2048)
              for bins in (5, 20, 320)}  # fmt: skip
    return _checked_order(form, counts)


def check_smooth_ap_order(form: Form) -> Verdict:
    """SmoothAP's count over ``M`` in {8, 32, 128, 512}."""
    return _checked_order(form, {(("M", k),): count_smooth_ap(k) for k in (8, 32, 128, 512)})


# --- timing arithmetic ---------------------------------------------------------------------

TABLE_S2_LOSS_MS = {"Blackbox AP": 3.7, "FastAP": 4.2, "Smooth-AP": 6.6}
"""Table S2's loss times (ms): the data the overhead claim is about."""
TABLE_S2_BACKBONE_MS = {"Blackbox AP": 705.0, "FastAP": 705.0, "Smooth-AP": 705.0}
"""Table S2's backbone times (ms)."""


def check_overhead(form: Form) -> Verdict:
    """"< 3 ms for every iteration compared to previous methods where the backbone takes 705 ms".

    The form holds the two printed numbers; the data is Table S2 (:data:`TABLE_S2_LOSS_MS`,
    :data:`TABLE_S2_BACKBONE_MS`). The bound holds when every gap between Smooth-AP's loss time
    and another method's is below it, and it is the bound the table supports: the smallest whole
    number of ms above the largest gap (a looser bound, 6 ms, is true but not what the table
    shows). The backbone time must be the table's for every method.

    Example:
        >>> [check_overhead(Form({"bound (ms)": b, "backbone (ms)": 705})).verdict for b in (3, 6)]
        ['holds', 'fails']
    """
    bound, backbone = float(form.value["bound (ms)"]), float(form.value["backbone (ms)"])
    times = TABLE_S2_LOSS_MS
    gaps = {name: round(times["Smooth-AP"] - t, 6) for name, t in times.items() if name != "Smooth-AP"}
    tight = math.floor(max(gaps.values())) + 1
    backbones = set(TABLE_S2_BACKBONE_MS.values())
    by = " and ".join(f"{gap:g} ms ({name})" for name, gap in gaps.items())
    shown = (f"Smooth-AP's loss time exceeds the others' by {by}; the smallest whole-ms "
             f"bound above the largest gap is {tight} ms")
    if backbones != {backbone}:
        return decide(backbones == {backbone}, "", f"Table S2's backbone takes "
                      f"{sorted(backbones)} ms, not {backbone:g}.")  # fmt: skip
    return decide(
        bound == tight,
        f"{shown} ({times['Smooth-AP']} ms is {times['Smooth-AP'] / backbone:.2%} of the "
        f"{backbone:g} ms backbone).",
        f"{shown}, not {bound:g} ms.",
    )  # fmt: skip


# --- Fig. S5 and S6: the printed AP values ---------------------------------------------------


def _ap_by_constructing(positives: int, low: float, high: float) -> list[int] | None:
    """Ranks of a ranking whose ``sum_k k / r_k`` lies in ``[low, high)``, or None if none found.

    Positives 1..p-1 at a uniform precision ``x`` (``r_k = ceil(k / x)``, 2000 values of x),
    the last one placed to land in the interval: a certificate, not a proof of absence.
    """
    for step in range(1, 2001):
        ranks, rank = [], 0
        for k in range(1, positives):
            rank = max(rank + 1, math.ceil(k / (step / 2000)))
            ranks.append(rank)
        partial = sum(k / r for k, r in enumerate(ranks, 1))
        if partial < high:
            last = max(rank + 1, math.floor(positives / (high - partial)) + 1)
            if positives / last >= low - partial:
                return [*ranks, last]
    return None


def _ap_by_search(positives: int, low: float, high: float, budget: int = 200_000):
    """Exhaustive search for ranks with ``sum_k k / r_k`` in ``[low, high)``.

    Returns the ranks, ``[]`` when provably none exists, or None when the budget of visited
    prefixes runs out. A prefix is cut when even the best completion (the remaining positives
    right after it) stays below ``low``; ranks that overshoot ``high`` are skipped.
    """
    visited = 0

    def best_rest(k: int, rank: int) -> float:
        return sum(i / (rank + i - k) for i in range(k + 1, positives + 1))

    def search(k: int, rank: int, partial: float):
        nonlocal visited
        visited += 1
        if visited > budget:
            raise TimeoutError
        if high - partial <= 0:
            return None
        start = max(rank + 1, math.floor((k + 1) / (high - partial)) + 1)
        if k == positives - 1:
            return [start] if (k + 1) / start >= low - partial else None
        nxt = start
        while partial + best_rest(k, nxt - 1) >= low:
            found = search(k + 1, nxt, partial + (k + 1) / nxt)
            if found is not None:
                return [nxt, *found]
            nxt += 1
        return None

    try:
        return search(0, 0, 0.0) or []
    except TimeoutError:
        return None


def ap_attainable(positives: int, value: float, decimals: int = 3) -> bool | None:
    """Can a ranking with ``positives`` relevant items have an AP that rounds to ``value``?

    AP over a whole retrieval set is ``(1/p) sum_k k / r_k`` for the ranks ``r_1 < ... < r_p``
    of the positives. An AP rounds to ``value`` when it lies within half a unit of the last
    decimal of it, halves rounded up (``1/16 = 0.0625`` prints as 0.063). A ranking found is
    checked by recomputing its AP in exact fractions; absence is proved by an exhaustive
    search (quick near 1, where the attainable values are few: with p = 5 the largest AP
    below 1 is ``(4 + 5/6) / 5 = 0.9667``, so 0.98 cannot be printed).

    Returns:
        True (a ranking exists), False (none does), None (the search ran out of budget).

    Example:
        >>> ap_attainable(5, 0.967), ap_attainable(4, 0.967), ap_attainable(6, 0.967)
        (True, False, False)
    """
    check_int_in_range("positives", positives, 1)
    printed = Fraction(str(round(value, decimals)))
    half = Fraction(1, 2 * 10**decimals)
    bounds = (printed - half, printed + half)  # half up: [low, high)
    # The searches work in floats; the ranking found is judged in exact fractions.
    low, high = (float(bound * positives) for bound in bounds)
    ranks = _ap_by_constructing(positives, low, high) or _ap_by_search(positives, low, high)
    if ranks is None:
        return None
    if not ranks:
        return False
    ap = sum(Fraction(k, r) for k, r in enumerate(ranks, 1)) / positives
    return bounds[0] <= ap < bounds[1]  # the ranks ascend by construction


def _numbers(value, key: str) -> list:
    """The entries of ``value[key]`` (a tuple or one number); APs are read to 3 decimals."""
    piece = value[key]
    numbers = list(piece) if isinstance(piece, (tuple, list, sp.Tuple)) else [piece]
    if "AP" not in key:
        return numbers
    return [round(float(v), 3) if sp.sympify(v).is_number else v for v in numbers]


def _ap_table_problems(before: list, after: list) -> list[str]:
    """What is wrong with a printed (baseline, Smooth-AP) AP table: sizes, range, no gain."""
    if len(before) != len(after):
        return [f"{len(before)} baseline values against {len(after)} Smooth-AP values"]
    problems = [f"AP {v} outside (0, 1]" for v in [*before, *after]
                if not (sp.sympify(v).is_number and 0 < float(v) <= 1)]  # fmt: skip
    if problems:
        return problems
    pairs = enumerate(zip(before, after, strict=True))
    return [f"case {CASES[k]} falls from {b} to {a}" for k, (b, a) in pairs
            if not float(a) > float(b)]  # fmt: skip


CASES = "abcdefgh"
FIG_S5_SHOWN = 13
"""Fig. S5 shows the "Top 13 ranked retrieval results" of each query."""


def check_fig_s5(form: Form) -> Verdict:
    """Fig. S5's printed APs against its |P| and against "AP = 1.00 for (a), (b)".

    Each printed AP (baseline and Smooth-AP, four queries) must be attainable with its |P|
    (:func:`ap_attainable`); the cases whose Smooth-AP AP is 1.000 must be exactly those the text
    names (AP = 1 exactly when every positive precedes every negative), and their |P| must fit
    in the top 13 shown; every case gains.

    Example:
        >>> table = {"|P|": (11, 5, 7, 11), "baseline AP": (0.854, 0.967, 0.335, 0.433),
        ...          "Smooth-AP AP": (1, 1, 0.758, 0.971), "AP = 1 for cases": (1, 2)}
        >>> check_fig_s5(Form(table)).verdict
        'holds'
        >>> check_fig_s5(Form({**table, "|P|": (11, 6, 7, 11)})).detail
        'no ranking with |P| = 6 has AP 0.967.'
    """
    value = form.value
    sizes, named = _numbers(value, "|P|"), _numbers(value, "AP = 1 for cases")
    before, after = _numbers(value, "baseline AP"), _numbers(value, "Smooth-AP AP")
    shown = FIG_S5_SHOWN
    problems = _ap_table_problems(before, after)
    if not problems and len(sizes) != len(after):
        problems = [f"{len(sizes)} values of |P| for {len(after)} queries"]
    if not problems:
        problems = [f"|P| = {s} is not a whole number >= 1" for s in sizes
                    if not (sp.sympify(s).is_integer and int(s) >= 1)]  # fmt: skip
    if problems:
        return decide(not problems, "", "; ".join(problems) + ".")
    perfect = [k + 1 for k, a in enumerate(after) if float(a) == 1.0]
    if sorted(int(c) for c in named) != perfect:
        letters = [CASES[int(c) - 1] if float(c).is_integer() and 1 <= c <= len(CASES)
                   else str(c) for c in named]  # fmt: skip
        problems.append(f"AP = 1.000 in cases {[CASES[k - 1] for k in perfect]}, not in cases "
                        f"{letters}")  # fmt: skip
    problems += [f"case {CASES[k - 1]} has |P| = {sizes[k - 1]}, more than the {shown} shown"
                 for k in perfect if int(sizes[k - 1]) > int(shown)]  # fmt: skip
    outcomes = {(int(s), float(v)): ap_attainable(int(s), float(v))
                for s, pair in zip(sizes, zip(before, after, strict=True), strict=True)
                for v in pair}  # fmt: skip
    problems += [f"no ranking with |P| = {s} has AP {v:.3f}" for (s, v), ok in outcomes.items()
                 if ok is False]  # fmt: skip
    if problems:
        return decide(not problems, "", "; ".join(problems) + ".")
    if any(ok is None for ok in outcomes.values()):
        return undecided("the search for a ranking ran out of its budget")
    gains = ", ".join(f"{CASES[k]} {float(a) - float(b):+.3f}"
                      for k, (b, a) in enumerate(zip(before, after, strict=True)))  # fmt: skip
    pinned = int(sizes[1])
    top = (pinned - 1 + pinned / (pinned + 1)) / pinned  # one negative before the last positive
    return decide(not problems, f"every printed AP is attainable with its |P| (a ranking found for each; "
                  f"with |P| = {pinned} for (b) the largest AP below 1 is {top:.4f}, one "
                  f"negative just before the last positive); AP = 1 only in cases "
                  f"{[CASES[k - 1] for k in perfect]}, each |P| within the {shown} shown; "
                  f"gains {gains}.", "")  # fmt: skip


TABLE_INAPPLICABLE = dict.fromkeys(
    ("sign", "shift", "factor", "term", "exponent", "log", "swap"),
    "a table of printed numbers (tuples the operators do not enter): a number changed by rule "
    "gives another table, which the claim may fit as well; the slips a reader would make are "
    "written by hand")
"""The ``inapplicable`` reasons of a claim about a table of independent printed numbers."""


def _aps(*numbers: str) -> sp.Tuple:
    """Printed APs as a tuple of 3-digit SymPy floats (``1`` stays an integer)."""
    return sp.Tuple(*(sp.Float(v, 3) if "." in v else sp.Integer(v) for v in numbers))


def check_fig_s6(form: Form) -> Verdict:
    """Fig. S6: "in all cases shown, appending the Smooth-AP loss leads to large gains in AP".

    The printed row ``AP 0.240 0.637 0.348 0.844 0.435 0.774`` read as (baseline, Smooth-AP)
    per query: every AP in (0, 1] and every Smooth-AP AP above its baseline.

    Example:
        >>> check_fig_s6(Form({"baseline AP": (0.24, 0.348), "Smooth-AP AP": (0.637, 0.3)})).detail
        'case b falls from 0.348 to 0.3.'
    """
    before, after = _numbers(form.value, "baseline AP"), _numbers(form.value, "Smooth-AP AP")
    problems = _ap_table_problems(before, after)
    gains = [] if problems else [(float(a) - float(b), (float(a) - float(b)) / float(b))
                                 for b, a in zip(before, after, strict=True)]  # fmt: skip
    shown = ", ".join(f"{CASES[k]} {g:+.3f} ({r:+.0%})" for k, (g, r) in enumerate(gains))
    return decide(not problems, f"every query gains: {shown} (AP points, relative gain).",
                  "; ".join(problems) + ".")  # fmt: skip


def check_not_testable(reason: str) -> Callable[[Form], Verdict]:
    """A check for a claim about the authors' experiments that only their data could decide.

    Example:
        >>> check_not_testable("needs their data")(Form("any")).verdict
        'not-testable-here'
    """

    def check(form: Form) -> Verdict:
        return Verdict(NOT_TESTABLE_HERE, reason)

    return check


# --- Fig. S7: which entries of D receive gradient ---------------------------------------------


def table_s1_gradient(size: int, positives: int) -> torch.Tensor:
    """``dL/dD`` of the corrected Table S1 loss at scores ``0.001 * k`` (autograd, float64).

    ``D_ij = s_j - s_i`` is a leaf; the loss is ``1 - mean_(i in P) R_pos(i) / R(i)`` with
    ``R(i) = 1 + sum_(j != i) sigmoid(D_ij / 0.01)`` and ``R_pos`` the same sum over the
    relevant ``j``; the first ``positives`` items are relevant. Every difference lies within
    the operating region at tau = 0.01.

    Args:
        size: ``m``, the number of items, >= 2.
        positives: ``|P|``, from 1 to ``size``.

    Returns:
        A ``[size, size]`` float64 tensor: row ``i`` is zero unless item ``i`` is relevant,
        and the diagonal is zero.

    Raises:
        GradlabError: ``size`` not an int >= 2, or ``positives`` not an int from 1 to ``size``.

    Example:
        >>> gradient = table_s1_gradient(3, 1)
        >>> [[value != 0 for value in row] for row in gradient.tolist()]
        [[False, True, True], [False, False, False], [False, False, False]]
    """
    check_int_in_range("positives", positives, 1, check_int_in_range("size", size, 2))
    import torch

    scores = torch.arange(size, dtype=torch.float64) * 0.001
    d = (scores[None, :] - scores[:, None]).requires_grad_(True)
    gt = torch.zeros(size, dtype=torch.float64)
    gt[:positives] = 1.0
    off = 1 - torch.eye(size, dtype=torch.float64)
    sig = torch.sigmoid(d / 0.01)
    rank = 1 + (sig * off).sum(1)
    rank_pos = 1 + (sig * off * gt).sum(1)
    loss = 1 - (gt * rank_pos / rank).sum() / gt.sum()
    (grad,) = torch.autograd.grad(loss, d)
    return grad


def count_gradient_entries(size: int, positives: int) -> int:
    """Entries of ``D`` with a non-zero gradient of the corrected Table S1 loss
    (:func:`table_s1_gradient`).

    Example:
        >>> count_gradient_entries(6, 2)  # the two positives' rows, off the diagonal: 2 x 5
        10
    """
    return int((table_s1_gradient(size, positives) != 0).sum())


def check_fig_s7_gradients(form: Form) -> Verdict:
    """How many of the m^2 entries of D inside the operating region receive gradient.

    The form is the number of entries the statement says receive gradient when all of them are
    inside the region (Fig. S7's caption: all m^2); autograd of the corrected Table S1 counts the
    entries with a non-zero gradient for m in {6, 9, 16} and |P| in {1, 2, 4} (every difference
    inside the region).

    Example:
        >>> check_fig_s7_gradients(Form(n_pos * (m_ - 1))).verdict
        'holds'
    """
    expression = sp.sympify(form.value)
    counts = expression.free_symbols <= {m_, n_pos}
    if not counts:
        return decide(counts, "", f"{expression} is not a count in m and |P|.")
    grid = [(size, k) for size in (6, 9, 16) for k in (1, 2, 4)]
    wrong = []
    for size, k in grid:
        counted = count_gradient_entries(size, k)
        claimed = expression.subs({m_: size, n_pos: k})
        if claimed != counted:
            wrong.append(f"m = {size}, |P| = {k}: {counted} receive gradient, not {claimed}")
    return decide(not wrong, f"autograd counts |P|(m - 1) entries with a non-zero gradient at "
                  f"all {len(grid)} (m, |P|): the rows of the positives, off the diagonal.",
                  "; ".join(wrong[:3]) + f" ({len(wrong)} of {len(grid)} settings differ).")


NOT_TESTABLE_OPERATORS = dict.fromkeys(
    OPERATOR_NAMES, "empirical claim about the authors' experiments: not testable here for any "
    "form, so no mutant could test a check")
"""The ``inapplicable`` reasons of a claim that only the authors' data could decide."""

SEED_SETTING = {"m": 112, "|P|": 4}
"""Table S2's training setting (mini-batch size 112, |P| = 4), for numbers in the notes."""


def claims(p_vs_batch_size: Mapping | None = None) -> list[Claim]:
    """The audited claims of Smooth-AP's supplementary material (Brown et al., 2020).

    Args:
        p_vs_batch_size: the miniature measurement shown as context for the batch-size
            conjecture (see :func:`check_batch_size_conjecture`); that claim is not testable
            here either way.
    """
    slope = _sigmoid(D, tau_s) * (1 - _sigmoid(D, tau_s)) / tau_s
    eq1 = Form({"|dG/dD|": sp.Abs(slope), "threshold": sp.Rational(5, 1000),
                "i from": sp.Integer(0), "i to": m_ - 1, "j from": sp.Integer(0), "j to": m_ - 1,
                "denominator": m_**2},
               context="P = sum_(i = i from .. i to) sum_(j = j from .. j to) "
                       "[|dG(D_ij)/dD_ij| > threshold] / denominator, tau = 0.01")  # fmt: skip
    code = Form(TABLE_S1, render=str)
    corrected_code = mutant(code, TABLE_S1_CORRECTED, "corrected")
    trend = Form({"P over m": "rises"}, context="P against mini-batch size m (4 per class)",
                 render=lambda v: f"P over m: {v['P over m']}")  # fmt: skip
    blackbox = Form(n * sp.log(n), lhs="Blackbox AP cost per query (Table S2)")
    blackbox_fixed = mutant(blackbox, M * sp.log(M), "corrected")
    fastap = Form(M * L, lhs="FastAP cost per query (Table S2)")
    smooth = Form(M**2, lhs="Smooth-AP cost per query (Table S2)")
    overhead = Form({"bound (ms)": sp.Integer(3), "backbone (ms)": sp.Integer(705)},
                    context="Smooth-AP adds < bound (ms) per iteration compared to previous "
                    "methods, beside a backbone step of backbone (ms)")  # fmt: skip
    fig_s5 = Form({"|P|": sp.Tuple(11, 5, 7, 11),
                   "baseline AP": _aps("0.854", "0.967", "0.335", "0.433"),
                   "Smooth-AP AP": _aps("1", "1", "0.758", "0.971"),
                   "AP = 1 for cases": sp.Tuple(1, 2)},
                  context="Fig. S5, queries (a)-(d) numbered 1-4: AP = 1.00 for (a), (b), all "
                  "positives retrieved above all false positives")  # fmt: skip
    fig_s6 = Form({"baseline AP": _aps("0.240", "0.348", "0.435"),
                   "Smooth-AP AP": _aps("0.637", "0.844", "0.774")},
                  context="Fig. S6, queries (a)-(c): appending Smooth-AP gives large AP gains in "
                  "all cases")  # fmt: skip
    gains = Form("AP +52.9 %, +54.9 %, +41.8 % (SENet-50) and +24.8 % (ArcFace) on VGGFace2 "
                 "queries with |P| about 338", render=str)  # fmt: skip
    gradients = Form(m_**2, lhs="entries of D receiving gradient, all inside the region",
                     context="Fig. S7: the elements of D inside the operating region receive "
                     "non-negligible gradients")  # fmt: skip
    chain = Form("P up => more non-negligible gradients => higher Recall@K (Table 5)", render=str)
    share = SEED_SETTING["|P|"] * (SEED_SETTING["m"] - 1) / SEED_SETTING["m"] ** 2
    return [
        Claim(SEED, "eq1", "P, the proportion of difference-matrix entries in the operating region",
              eq1, check_operating_region, "float64 Eq. 1 vs autograd slope of every entry",
              mutants=(with_parameters(eq1, "diagonal left out of the denominator",
                                       denominator=m_ * (m_ - 1)),
                       with_parameters(eq1, "i from 1 (1-based rows)", **{"i from": sp.Integer(1)}),
                       with_parameters(eq1, "j to m (one past the last column)", **{"j to": m_}),
                       with_parameters(eq1, "1/tau dropped", **{"|dG/dD|": slope * tau_s})),
              note="Eq. 1 counts all m^2 entries, the m diagonal ones (D = 0) included."),
        Claim(SEED, "claim-table-s1", "the Table S1 pseudocode computes 1 - Smooth-AP", code,
              check_table_s1, "float64, the pseudocode executed line by line",
              correction=corrected_code, mutants=table_s1_slips(corrected_code),
              note="R_pos must sum the sigmoids over the positives only (the rank among them); "
              "D = s1 - s2 has the rank sign (s_j - s_i), so R is right.",
              inapplicable=dict.fromkeys(OPERATOR_NAMES, "pseudocode string: no SymPy tree (its "
                                         "slips are written by hand)"),
              cause="R_pos = gt.T * R is R masked, not the rank among the positives"),
        Claim(SEED, "claim-p-grows-with-batch-size",
              "P grows with mini-batch size because larger batches hold more close scores", trend,
              functools.partial(check_batch_size_conjecture, measurement=p_vs_batch_size),
              "not testable here (the authors' data and network); a miniature measurement passed "
              "in is shown as context, decided on one named setting by a paired t-test over seeds",
              inapplicable=NOT_TESTABLE_OPERATORS),
        Claim(SEED, "claim-table-s2-blackbox", "Blackbox AP costs O(n log n) per query", blackbox,
              check_blackbox_order, "comparisons of a merge sort of the retrieval set, p and n varied",
              correction=blackbox_fixed,
              mutants=(mutant(blackbox_fixed, M * sp.log(M) ** 2, "log squared"),
                       mutant(blackbox_fixed, M, "log dropped (a linear pass)"),
                       mutant(blackbox_fixed, M**2, "M^2 (comparing every pair)")),
              note="Ranking needs all M = p + n items sorted; with |P| = 4 fixed (the paper's "
              "setting) n log n and M log M are the same order.",
              cause="order in n where the sort is over M = p + n"),
        Claim(SEED, "claim-table-s2-fastap", "FastAP costs O(ML) per query", fastap,
              check_fastap_order, "operations of FastAP's histogram and AP, executed, M and L varied",
              mutants=(mutant(fastap, M, "L dropped"), mutant(fastap, M**2, "M^2"),
                       mutant(fastap, M * L * sp.log(M), "M L log M (a sort added)"))),
        Claim(SEED, "claim-table-s2-complexity", "Smooth-AP costs O(M^2) per query", smooth,
              check_smooth_ap_order, "sigmoid evaluations of Table S1 executed",
              mutants=(mutant(smooth, M, "M"), scaled(smooth, M),
                       mutant(smooth, M**2 * sp.log(M), "M^2 log M")),
              note="Per query, as Table S1 computes it; a batch of M queries costs O(M^3) that way, "
              "gradlab's positive rows O(M^2 |P|)."),
        Claim(SEED, "claim-overhead-3ms", "Smooth-AP adds < 3 ms per iteration over the others",
              overhead, check_overhead, "arithmetic on Table S2",
              mutants=(with_parameters(overhead, "bound 2 ms", **{"bound (ms)": sp.Integer(2)}),
                       with_parameters(overhead, "bound 6 ms (true, but not what the table shows)",
                                       **{"bound (ms)": sp.Integer(6)})),
              note=PRINTED_RESULTS_ONLY),
        Claim(SEED, "claim-fig-s5-ap", "Fig. S5: AP = 1.00 for (a), (b); every printed AP "
              "fits its |P| = 11, 5, 7, 11", fig_s5, check_fig_s5,
              "exact search for a ranking with each printed AP (3 decimals) and |P|",
              mutants=(with_parameters(fig_s5, "AP = 1 for (a), (c)",
                                       **{"AP = 1 for cases": sp.Tuple(1, 3)}),
                       with_parameters(fig_s5, "|P| = 4 for (b)", **{"|P|": sp.Tuple(11, 4, 7, 11)}),
                       with_parameters(fig_s5, "|P| = 6 for (b)", **{"|P|": sp.Tuple(11, 6, 7, 11)}),
                       with_parameters(fig_s5, "|P| = 15 for (a), beyond the 13 shown",
                                       **{"|P|": sp.Tuple(15, 5, 7, 11)}),
                       with_parameters(fig_s5, "row read as 4 baselines, then 4 Smooth-AP values",
                                       **{"baseline AP": _aps("0.854", "1", "0.967", "1"),
                                          "Smooth-AP AP": _aps("0.335", "0.758", "0.433",
                                                               "0.971")})),
              note="The |P| = 11, 7, 11 of (a), (c), (d) allow any of these APs; (b)'s baseline "
              f"0.967 allows |P| = 5 but not 4 or 6. {PRINTED_RESULTS_ONLY}",
              inapplicable=TABLE_INAPPLICABLE),
        Claim(SEED, "claim-fig-s6-ap", "Fig. S6: Smooth-AP gains AP on every iNaturalist query "
              "shown", fig_s6, check_fig_s6, "arithmetic on the printed APs",
              mutants=(with_parameters(fig_s6, "row read as 3 baselines, then 3 Smooth-AP values",
                                       **{"baseline AP": _aps("0.240", "0.637", "0.348"),
                                          "Smooth-AP AP": _aps("0.844", "0.435", "0.774")}),
                       with_parameters(fig_s6, "(b)'s pair read the other way round",
                                       **{"baseline AP": _aps("0.240", "0.844", "0.435"),
                                          "Smooth-AP AP": _aps("0.637", "0.348", "0.774")}),
                       with_parameters(fig_s6, "0.844 misread as 0.344",
                                       **{"Smooth-AP AP": _aps("0.637", "0.344", "0.774")})),
              note="The |P| = 985, 20, 28 of Fig. S6 allow any of these APs, so they are not "
              f"part of the check. {PRINTED_RESULTS_ONLY}", inapplicable=TABLE_INAPPLICABLE),
        Claim(SEED, "claim-fig-s1-s4-gains", "Fig. S1-S4: Smooth-AP raises AP by 52.9, 54.9, 41.8 "
              "and 24.8 % on VGGFace2 queries", gains, check_not_testable(
                  "needs the AP values of Fig. S1-S4, which are in the figures' images, not in "
                  "the text; without them neither the gains nor whether they are points or "
                  "percent of the baseline can be checked (as points, the baselines would be at "
                  "most 0.471, 0.451, 0.582 and 0.752)."),
              "not testable here", inapplicable=NOT_TESTABLE_OPERATORS),
        Claim(SEED, "claim-fig-s7-gradients", "the entries of D inside the operating region "
              "receive non-negligible gradients (Fig. S7)", gradients, check_fig_s7_gradients,
              "autograd of the corrected Table S1 loss with every difference inside the region",
              correction=mutant(gradients, n_pos * (m_ - 1), "corrected"),
              note="Only the |P| rows of the positives enter Smooth-AP: an entry of a negative's "
              "row, or of the diagonal, gets no gradient however close its scores. At the "
              f"paper's m = {SEED_SETTING['m']}, |P| = {SEED_SETTING['|P|']} that is at most "
              f"{share:.1%} of the matrix.",
              cause="P counts entries that carry no Smooth-AP gradient"),
        Claim(SEED, "claim-p-explains-table5", "a larger P feeds more non-negligible gradients "
              "back, hence the higher performance of larger batches (Table 5)", chain,
              check_not_testable(
                  "needs the authors' training on Stanford Online Products (Table 5). What is "
                  "shown here: the first link holds only for the rows of the positives (see "
                  "claim-fig-s7-gradients), so a rise of P made of the diagonal or of "
                  "negative-only rows feeds no gradient; the miniature's decomposition of P "
                  "(claim-p-grows-with-batch-size) shows which parts move."),
              "not testable here; its first link checked by autograd (claim-fig-s7-gradients)",
              inapplicable=NOT_TESTABLE_OPERATORS,
              cause="P counts entries that carry no Smooth-AP gradient"),
    ]  # fmt: skip
