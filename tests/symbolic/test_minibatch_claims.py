"""Seed 003's minibatch audit pinned piece by piece: the soft counts the autograd truths are
built from, Eq. 37's counted procedure, and the index ranges of the checks.

The claim records (test_claim_records.py) only see these through a 1e-10 agreement or a ratio,
so here they meet independent references: float64 loops over (i, j, d, v), closed-form operation
counts derived by hand, and forms that are wrong in one place only (the last bin, the diagonal).
"""

import itertools

import numpy as np
import pytest
import sympy as sp
import torch

from gradlab.symbolic import Form
from gradlab.symbolic import minibatch_claims as minibatch
from gradlab.symbolic.minibatch_claims import (
    BITS,
    ITEMS,
    LEVELS,
    check_a_matrix,
    check_beta,
    check_beta_symmetry,
    check_diagonal_column,
    check_jacobian_matrix,
    check_off_diagonal_column,
    check_unified_column,
    count_eq37,
    eq37_with_operation_count,
    soft_counts,
    soft_counts_from_distances,
)


def printed(label: str) -> str:
    """The printed expression of seed 003's claim ``label``."""
    return next(c for c in minibatch.claims() if c.label == label).printed.value


def counts_by_loops(distances: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``c[i, d, v] = sum_(j != i) max(0, 1 - |D_ij - d|) [1(y_i = y_j) = v]``, d = 0..b."""
    items = len(labels)
    counts = np.zeros((items, BITS + 1, len(LEVELS)))
    for i, j in itertools.product(range(items), repeat=2):
        if i == j:
            continue
        same = int(labels[i] == labels[j])
        for d in range(BITS + 1):
            counts[i, d, same] += max(0.0, 1.0 - abs(distances[i, j] - d))
    return counts


# --- the soft counts behind every autograd truth -------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counts_from_distances_match_loops(seed):
    rng = np.random.default_rng(seed)
    items = 7
    distances = rng.uniform(-0.5, BITS + 0.5, size=(items, items))  # not symmetric on purpose
    labels = rng.integers(0, 3, items)
    got = soft_counts_from_distances(torch.tensor(distances), torch.tensor(labels))
    assert got.dtype == torch.float64
    np.testing.assert_allclose(got.numpy(), counts_by_loops(distances, labels), rtol=0, atol=1e-12)


def test_counts_from_codes_use_the_relaxed_hamming_distance():
    # b = 4 bits (rows), M = 5 items (columns): d(x_i, x_j) = (b - phi_i . phi_j) / 2.
    rng = np.random.default_rng(3)
    phi = np.tanh(2 * rng.normal(size=(BITS, 5)))
    labels = np.array([0, 1, 0, 2, 1])
    distances = np.array(
        [
            [(BITS - sum(phi[r, i] * phi[r, j] for r in range(BITS))) / 2 for j in range(5)]
            for i in range(5)
        ]
    )
    got = soft_counts(torch.tensor(phi), torch.tensor(labels)).numpy()
    np.testing.assert_allclose(got, counts_by_loops(distances, labels), rtol=0, atol=1e-12)


def test_identical_binary_codes_fall_in_bin_zero_of_their_own_level():
    # Two equal +-1 codes are at distance 0: each counts the other once, in d = 0, v = same.
    phi = torch.ones(BITS, 2, dtype=torch.float64)
    got = soft_counts(phi, torch.tensor([1, 1]))
    expected = np.zeros((2, BITS + 1, 2))
    expected[:, 0, 1] = 1.0
    np.testing.assert_array_equal(got.numpy(), expected)


# --- Eq. 37 executed and counted -------------------------------------------------------------


def eq37_by_loops(phi, alpha, beta):
    """``-Phi sum_(d,v) (A B + B A) / (2M)`` with ``A = diag(alpha)``, element by element."""
    bits, items = phi.shape
    total = np.zeros((items, items))
    for d, v in itertools.product(range(alpha.shape[0]), range(alpha.shape[1])):
        for i, j in itertools.product(range(items), repeat=2):
            total[i, j] += alpha[d, v, i] * beta[d, v, i, j] + beta[d, v, i, j] * alpha[d, v, j]
    return np.array(
        [[-sum(phi[r, i] * total[i, j] for i in range(items)) / (2 * items) for j in range(items)]
         for r in range(bits)]
    )  # fmt: skip


def test_eq37_executes_the_matrix_form():
    rng = np.random.default_rng(1)
    bits, levels, items = 3, 2, 5
    phi = rng.normal(size=(bits, items))
    alpha, beta = (
        rng.normal(size=(bits + 1, levels, items)),
        rng.normal(size=(bits + 1, levels, items, items)),
    )
    gradient, _ = eq37_with_operation_count(phi, alpha, beta)
    np.testing.assert_allclose(gradient, eq37_by_loops(phi, alpha, beta), rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize(
    ("bits", "levels", "items", "by_hand"), [(1, 1, 1, 12), (2, 3, 2, 192), (4, 2, 8, 3488)]
)
def test_eq37_operations_by_hand(bits, levels, items, by_hand):
    # Per (d, v), (b + 1) |V| of them: M^2 slopes + 2 M^2 scalings + 2 M^2 additions = 5 M^2;
    # then b M^2 for Phi @ total and b M for the division. (1, 1, 1): 2 * 5 + 1 + 1 = 12;
    # (2, 3, 2): 9 * 20 + 8 + 4 = 192; (4, 2, 8): 10 * 320 + 256 + 32 = 3488.
    assert count_eq37(bits, levels, items) == by_hand
    rng = np.random.default_rng(0)
    shapes = ((bits, items), (bits + 1, levels, items), (bits + 1, levels, items, items))
    assert eq37_with_operation_count(*(rng.random(s) for s in shapes))[1] == by_hand


# --- the checks' ranges and edges ------------------------------------------------------------


def _wrong_at(i: int, d: int, v: int, j: int) -> str:
    """An addend that changes a printed piece at one index (i, d, v, j) only."""
    return f" + (i == {i}) * (d == {d}) * (v == {v}) * (j == {j})"


CORNERS = [(0, 0, 0, 1), (0, 0, 0, ITEMS - 1), (ITEMS - 1, BITS, 1, ITEMS - 2),
           (ITEMS - 2, BITS, 1, ITEMS - 1), (ITEMS - 1, 0, 1, 0)]  # fmt: skip


@pytest.mark.parametrize("index", CORNERS)
def test_every_query_bin_level_and_candidate_is_checked(index):
    # A form wrong at one (i, d, v, j), the first and last of each range among them, fails.
    assert check_unified_column(Form(printed("eq30") + _wrong_at(*index))).verdict == "fails"
    assert check_off_diagonal_column(Form(printed("eq25") + _wrong_at(*index))).verdict == "fails"
    assert check_beta(Form(printed("eq28") + _wrong_at(*index))).verdict == "fails"


@pytest.mark.parametrize("i", [0, ITEMS - 1])
def test_the_unified_column_is_checked_on_the_diagonal_too(i):
    assert check_unified_column(Form(printed("eq30") + _wrong_at(i, BITS, 1, i))).verdict == "fails"
    assert check_beta(Form(printed("eq28") + _wrong_at(i, BITS, 1, i))).verdict == "holds"


def test_agreement_is_strict_and_a_failure_says_by_how_much():
    # beta(0, 1) of bin 0, level 0 is exactly 0 in the check's batch, printed and true alike, so
    # an addend there is the whole error: 1e-10 is not below the tolerance 1e-10.
    at = " * (i == 0) * (d == 0) * (v == 0) * (j == 1)"
    below = check_beta(Form(printed("eq28") + " + 5e-11" + at))
    assert (below.verdict, below.detail.split(" (")[0]) == (
        "holds",
        "beta_(d,v)(i, j) matches autograd to 5.0e-11",
    )
    at_bound = check_beta(Form(printed("eq28") + " + 1e-10" + at))
    assert at_bound.verdict == "fails"
    assert at_bound.detail == (f"beta_(d,v)(i, j) differs from autograd by up to 1e-10 "
                               f"(M = {ITEMS}, b = {BITS}).")  # fmt: skip


def test_a_form_wrong_only_in_the_last_bin_is_caught():
    wrong_at_b = " + (d == b)"
    assert check_diagonal_column(Form(printed("eq29") + wrong_at_b)).verdict == "fails"
    assert check_jacobian_matrix(Form(printed("eq31") + wrong_at_b)).verdict == "fails"
    # The batch has no slope in bin b itself (no distance above 3), so A is changed from b - 1 on.
    assert check_a_matrix(Form(printed("eq35") + " * (1 + (d >= b - 1))")).verdict == "fails"


def test_beta_is_checked_off_the_diagonal_only():
    # Eq. 28 defines beta(i, j) for j != i; a form that differs on the diagonal alone holds.
    assert check_beta(Form(printed("eq28") + " + (i == j)")).verdict == "holds"
    assert check_beta(Form("(1 - ind[i, j, v]) * dprime[d][i, j]")).verdict == "fails"


UPPER = "np.arange(M)[:, None] < np.arange(M)[None, :]"


def test_beta_symmetry_looks_only_at_slopes_inside_the_kernel():
    # Distances 1.0 above the diagonal and 6.0 below: asymmetric, yet neither is strictly within
    # 1 of a bin centre (1.0 sits on centre 1, slope sign 0), so every beta is 0 and symmetric.
    verdict = check_beta_symmetry(Form(f"np.where({UPPER}, 1.0, 6.0)"))
    assert verdict.verdict == "holds", verdict.detail


def test_beta_symmetry_looks_only_at_the_b_plus_one_bins():
    # 5.0 / 5.5: a bin centre d = 5 would see them differ, but the bins stop at d = b = 4.
    assert check_beta_symmetry(Form(f"np.where({UPPER}, 5.0, 5.5)")).verdict == "holds"
    # 3.95 / 4.05 straddle centre 4 (and the edge of centre 3): beta is not symmetric.
    verdict = check_beta_symmetry(Form(f"np.where({UPPER}, 3.95, 4.05)"))
    assert verdict.verdict == "fails"
    assert verdict.detail == "beta is not symmetric: |beta - beta^T| up to 2."


def test_eq37_refuses_alpha_and_beta_of_different_bin_level_grids():
    rng = np.random.default_rng(0)
    phi, alpha, beta = rng.random((2, 3)), rng.random((3, 2, 3)), rng.random((3, 1, 3, 3))
    with pytest.raises(ValueError):
        eq37_with_operation_count(phi, alpha, beta)  # 6 (d, v) pairs of alpha, 3 of beta


@pytest.mark.parametrize("order", ["b * M**2", "b * V * M**3"])
def test_complexity_mutants_fail_by_the_spread_of_the_hand_count(order):
    # count = (b + 1)|V| 5M^2 + bM^2 + bM (by hand, above) over b in {4, 32}, |V| in {2, 8},
    # M in {8, 64}: its ratio to a wrong order spreads by a factor the detail must show.
    import sympy as sp

    b, v, m = sp.symbols("b V M", positive=True)
    wrong = sp.sympify(order, locals={"b": b, "V": v, "M": m})
    ratios = [
        ((bits + 1) * levels * 5 * items**2 + bits * items**2 + bits * items)
        / float(wrong.subs({b: bits, v: levels, m: items}))
        for bits in (4, 32)
        for levels in (2, 8)
        for items in (8, 64)
    ]
    verdict = minibatch.check_complexity(Form(wrong))
    assert verdict.verdict == "fails"
    assert (
        f"varies by a factor {max(ratios) / min(ratios):.3g} over 8 grid points" in verdict.detail
    )


# --- N+ under the relaxation (Sec. B) and the slips of the code forms ---------------------


def _claim(label: str):
    return next(c for c in minibatch.claims() if c.label == label)


def test_the_relaxed_counts_keep_n_plus_for_every_query():
    assert minibatch.check_relevant_total(_claim("claim-relevant-total").printed).verdict == "holds"
    # the same by loops: the triangular weights of a distance in [0, b] sum to 1
    rng = np.random.default_rng(5)
    codes = np.tanh(2 * rng.normal(size=(BITS, ITEMS)))
    distances = (BITS - codes.T @ codes) / 2
    labels = np.array([0, 1, 0, 1, 0, 2])
    counts = counts_by_loops(distances, labels)
    for i in range(ITEMS):
        assert counts[i, :, 1].sum() == pytest.approx((labels == labels[i]).sum() - 1, abs=1e-12)


B = minibatch.bits


@pytest.mark.parametrize(("lower", "upper"), [(1, B), (0, B - 1), (-1, B), (0, B + 1)])
def test_a_sum_over_other_bins_than_0_to_b_is_not_n_plus(lower, upper):
    # the batches hold a copy (distance near 0) and a negation (near b) of a relevant item
    total = Form(sp.Sum(minibatch.relevant_count(minibatch.d_bin), (minibatch.d_bin, lower, upper)))
    assert minibatch.check_relevant_total(total).verdict == "fails"


@pytest.mark.parametrize("label", ["eq22", "eq23", "eq24", "eq25", "eq27", "eq28",
                                   "claim-beta-symmetric", "eq29", "eq30", "eq31", "eq32", "eq33",
                                   "eq35", "eq36", "eq37"])  # fmt: skip
@pytest.mark.slow
def test_each_code_form_has_three_slips_and_the_check_rejects_each(label):
    claim = _claim(label)
    assert claim.check(claim.printed).verdict == "holds"
    assert len(claim.mutants) >= 3
    for slip in claim.mutants:
        assert claim.check(slip).verdict == "fails", (label, slip.name)


def test_the_batch_reaches_the_last_bin():
    # without an item near distance b, leaving out bin d = b would change nothing
    slip = _claim("eq23").printed.value.replace("range(b + 1)", "range(b)")
    assert minibatch.check_chain_rule(Form(slip)).verdict == "fails"


def test_a_sum_that_differs_says_by_how_much_and_one_past_the_bins_names_the_bin():
    def total(lower, upper):
        summed = sp.Sum(minibatch.relevant_count(minibatch.d_bin), (minibatch.d_bin, lower, upper))
        return minibatch.check_relevant_total(Form(summed)).detail

    assert total(1, B).startswith("the printed sum differs from N+ by up to ")
    assert total(0, B + 1) == (f"the printed sum does not evaluate: 'bin {BITS + 1} does not "
                               f"exist (bins 0..{BITS})'")  # fmt: skip


@pytest.mark.slow
def test_the_relevant_total_check_reads_the_same_batches_every_time():
    printed = _claim("claim-relevant-total").printed
    slip = Form(sp.Sum(minibatch.relevant_count(minibatch.d_bin), (minibatch.d_bin, 1, B)))
    details = {minibatch.check_relevant_total(form).detail for form in (slip, slip, slip)}
    assert len(details) == 1  # seeded draws: the worst difference printed is the same
    assert minibatch.check_relevant_total(printed).verdict == "holds"
