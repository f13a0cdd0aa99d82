"""Audit of He et al.'s (2018, suppl.) minibatch backpropagation (Eq. 22-37) and its complexity claim.

Each printed piece is a numpy expression (the form's value, shown as printed) evaluated on a
small batch: codes ``Phi`` (``b x M``, Eq. 22), relaxed distances ``(b - phi_i . phi_j)/2``, soft
histograms with the triangular kernel ``delta(x, d) = max(0, 1 - |x - d|)``, binary affinity, and
an objective ``O_i`` that is an arbitrary smooth function of the query's counts (the equations are
the chain rule, so they must hold for any ``O_i``). The truth is autograd in float64.
"""

from __future__ import annotations

import functools
import math
from dataclasses import replace

import numpy as np
import sympy as sp
import torch

from gradlab.symbolic.claims import Claim, Form, Verdict, decide, mutant
from gradlab.symbolic.mutation_operators import inapplicable_to_code
from gradlab.symbolic.orders import order_check

SEED = "003_9ae9ec3ce43e30ad"
BITS, ITEMS, LEVELS = 4, 6, (0, 1)


def soft_counts(phi: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The soft histogram counts ``c[i, d, v]`` of He et al. (2018), from relaxed codes.

    Item i's candidates are the other items j; their relaxed Hamming distance
    ``d(x_i, x_j) = (b - phi_i . phi_j) / 2`` is spread over the bins ``d = 0..BITS`` (this
    module's code length, 4) by the triangular kernel, into level ``v = 1`` when ``labels[i] == labels[j]`` and ``v = 0``
    otherwise (:func:`soft_counts_from_distances`). Differentiable in ``phi``.

    Args:
        phi: relaxed codes, ``[b, M]`` (one column per item, entries in [-1, 1]; ``b = BITS``).
        labels: class labels, ``[M]``.

    Returns:
        ``[M, BITS + 1, 2]``: the counts per query, bin and affinity level.

    Example:
        >>> import torch
        >>> codes = torch.tensor([[1.0, 1.0, -1.0]] * 4)  # b = 4 bits, M = 3 items
        >>> soft_counts(codes, torch.tensor([0, 0, 1]))[0].tolist()  # item 1 at 0, item 2 at 4
        [[0.0, 1.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]
    """
    distances = (phi.shape[0] - phi.T @ phi) / 2.0
    return soft_counts_from_distances(distances, labels)


def soft_counts_from_distances(distances: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``c[i, d, v] = sum_(j != i) max(0, 1 - |D[i, j] - d|) [1(labels[i] = labels[j]) = v]``.

    The counts of :func:`soft_counts` from any distance matrix (not necessarily symmetric), for
    the bins ``d = 0..b`` of this module's batch (``b = BITS``).

    Args:
        distances: ``[M, M]``, row i the query's distance to each candidate.
        labels: class labels, ``[M]``.

    Returns:
        ``[M, BITS + 1, 2]``, in the dtype of ``distances``.

    Example:
        >>> import torch
        >>> distances = torch.tensor([[0.0, 1.5], [1.5, 0.0]], dtype=torch.float64)
        >>> soft_counts_from_distances(distances, torch.tensor([3, 3]))[0, :, 1].tolist()
        [0.0, 0.5, 0.5, 0.0, 0.0]
    """
    centres = torch.arange(BITS + 1, dtype=distances.dtype)
    kernel = torch.clamp(1.0 - (distances.unsqueeze(-1) - centres).abs(), min=0.0)
    kernel = kernel * (~torch.eye(len(labels), dtype=torch.bool)).unsqueeze(-1)
    same = (labels.unsqueeze(0) == labels.unsqueeze(1)).long()
    one_hot = torch.nn.functional.one_hot(same, len(LEVELS)).to(distances.dtype)
    return torch.einsum("ijd,ijv->idv", kernel, one_hot)


@functools.lru_cache(maxsize=1)
def _batch() -> dict:
    """The namespace every printed expression is evaluated in, with the autograd truths."""
    generator = torch.Generator().manual_seed(3)
    phi = torch.tanh(2.0 * torch.randn(BITS, ITEMS, generator=generator, dtype=torch.float64))
    phi[:, 5] = -phi[:, 0]  # a distance near b: the last bin d = b is used too
    labels = torch.randint(0, 3, (ITEMS,), generator=generator)
    weights = torch.randn(ITEMS, BITS + 1, len(LEVELS), generator=generator, dtype=torch.float64)

    def objective_terms(counts):
        return (weights * counts**2).sum(dim=(1, 2))  # O_i, any smooth function of c^(i)

    leaf = phi.clone().requires_grad_(True)
    counts = soft_counts(leaf, labels)
    (gradient,) = torch.autograd.grad(objective_terms(counts).mean(), leaf)
    counts_leaf = counts.detach().clone().requires_grad_(True)
    (alpha,) = torch.autograd.grad(objective_terms(counts_leaf).sum(), counts_leaf)
    (alpha_of_mean,) = torch.autograd.grad(objective_terms(counts_leaf).mean(), counts_leaf)
    jacobian = torch.autograd.functional.jacobian(lambda p: soft_counts(p, labels), phi)
    distances = ((BITS - phi.T @ phi) / 2.0).requires_grad_(True)
    by_distance = torch.autograd.functional.jacobian(lambda x: soft_counts_from_distances(x, labels),
                                                     distances)  # fmt: skip
    same = (labels.unsqueeze(0) == labels.unsqueeze(1)).numpy()
    indicator = np.stack([same == bool(v) for v in LEVELS], axis=-1).astype(float)  # [i, j, v]
    np.fill_diagonal(indicator[..., 0], 0.0)
    np.fill_diagonal(indicator[..., 1], 0.0)
    x = distances.detach().numpy()
    dprime = [np.where(np.abs(x - d) < 1.0, -np.sign(x - d), 0.0) for d in range(BITS + 1)]
    beta = [[indicator[..., v] * dprime[d] for v in LEVELS] for d in range(BITS + 1)]
    d_distance = np.stack([-phi.numpy()[:, i] / 2 for i in range(ITEMS)])  # dD_ij/dphi_j = -phi_i/2
    return {
        "np": np, "M": ITEMS, "b": BITS, "V": LEVELS, "phi": phi.numpy(),
        "phis": [phi.numpy()[:, j] for j in range(ITEMS)], "labels": labels.numpy(),
        "alpha": alpha.numpy(), "grad_Oi_c": alpha.numpy(), "grad_O_c": alpha_of_mean.numpy(),
        "J": jacobian.numpy(), "dc_dD": by_distance.numpy(), "ind": indicator, "dprime": dprime,
        "beta": beta, "dD_dphi_j": d_distance, "truth": gradient.numpy(),
        "outer": np.outer, "diag": np.diag, "stack": np.stack, "e": lambda i: np.eye(ITEMS)[i],
    }  # fmt: skip


def _evaluate(expression: str, **extra):
    return eval(expression, {**_batch(), **extra})  # the printed expression is the data


def _agreement(pairs, what: str) -> Verdict:
    try:
        worst = max(float(np.max(np.abs(np.asarray(got) - np.asarray(want)))) for got, want in pairs)
    except (ValueError, TypeError, IndexError) as error:  # shapes that do not compose
        worst, what = math.inf, f"{what} does not evaluate ({error}) and"
    return decide(worst < 1e-10, f"{what} matches autograd to {worst:.1e} (M = {ITEMS}, b = {BITS}).",
                  f"{what} differs from autograd by up to {worst:.3g} (M = {ITEMS}, b = {BITS}).")  # fmt: skip


def _all_indices(skip_diagonal: bool = False):
    for i in range(ITEMS):
        for d in range(BITS + 1):
            for v in LEVELS:
                for j in range(ITEMS):
                    if not (skip_diagonal and i == j):
                        yield i, d, v, j


EQ37 = "-(phi @ sum(A(d, v) @ B(d, v) + B(d, v) @ A(d, v) for d in range(b + 1) for v in V)) / (2 * M)"


def _matrix_helpers(a_expression: str, b_expression: str) -> dict:
    return {"A": lambda d, v: _evaluate(a_expression, d=d, v=v),
            "B": lambda d, v: _evaluate(b_expression, d=d, v=v)}  # fmt: skip


def check_layout(form: Form) -> Verdict:
    """Eq. 22 by its use: Eq. 37 applied to the printed Phi must give dO/dPhi (b x M)."""
    phi = _evaluate(form.value)
    helpers = _matrix_helpers("diag(alpha[:, d, v])", "beta[d][v].T")
    return _agreement(((_evaluate(EQ37, **helpers, phi=phi), _batch()["truth"]) for _ in (0,)),
                      "Eq. 37 with this Phi")  # fmt: skip


def check_chain_rule(form: Form) -> Verdict:
    """Eq. 23 / 32 with autograd's alpha and dc/dPhi: the printed combination vs dO/dPhi."""
    got = _evaluate(form.value)
    return _agreement([(got, _batch()["truth"])], "the printed sum")


def check_alpha(form: Form) -> Verdict:
    """Eq. 24 by its use in Eq. 23: alpha as printed, dc/dPhi from autograd."""
    alpha = _evaluate(form.value)
    got = _evaluate("sum(alpha[i, d, v] * J[i, d, v] for i in range(M) for d in range(b + 1) "
                    "for v in V) / M", alpha=alpha)  # fmt: skip
    return _agreement([(got, _batch()["truth"])], "Eq. 23 with this alpha")


def check_off_diagonal_column(form: Form) -> Verdict:
    """Eq. 25 / 27: column j != i of dc^(i)_(d,v)/dPhi."""
    batch = _batch()
    pairs = [(_evaluate(form.value, i=i, d=d, v=v, j=j), batch["J"][i, d, v][:, j])
             for i, d, v, j in _all_indices(skip_diagonal=True)]  # fmt: skip
    return _agreement(pairs, "every column j != i")


def check_beta(form: Form) -> Verdict:
    """Eq. 28: beta(i, j) = dc^(i)_(d,v) / d d(x_i, x_j) for j != i."""
    batch = _batch()
    pairs = [(_evaluate(form.value, i=i, d=d, v=v, j=j), batch["dc_dD"][i, d, v, i, j])
             for i, d, v, j in _all_indices(skip_diagonal=True)]  # fmt: skip
    return _agreement(pairs, "beta_(d,v)(i, j)")


def check_beta_symmetry(form: Form) -> Verdict:
    """beta built by Eq. 28 from the printed distance: is beta(i, j) = beta(j, i)?"""
    batch = _batch()
    x = _evaluate(form.value)
    worst = 0.0
    for d in range(BITS + 1):
        slope = np.where(np.abs(x - d) < 1.0, -np.sign(x - d), 0.0)
        for v in LEVELS:
            beta = batch["ind"][..., v] * slope
            worst = max(worst, float(np.max(np.abs(beta - beta.T))))
    return decide(worst == 0.0, "beta_(d,v)(i, j) = beta_(d,v)(j, i) exactly for every d, v, i, j.",
                  f"beta is not symmetric: |beta - beta^T| up to {worst:.3g}.")  # fmt: skip


def check_diagonal_column(form: Form) -> Verdict:
    """Eq. 29: column i of dc^(i)_(d,v)/dPhi."""
    batch = _batch()
    pairs = [(_evaluate(form.value, i=i, d=d, v=v), batch["J"][i, d, v][:, i])
             for i in range(ITEMS) for d in range(BITS + 1) for v in LEVELS]  # fmt: skip
    return _agreement(pairs, "every column j = i")


def check_unified_column(form: Form) -> Verdict:
    """Eq. 30: every column j (beta(i, i) = 0)."""
    batch = _batch()
    pairs = [(_evaluate(form.value, i=i, d=d, v=v, j=j), batch["J"][i, d, v][:, j])
             for i, d, v, j in _all_indices()]  # fmt: skip
    return _agreement(pairs, "every column")


def check_jacobian_matrix(form: Form) -> Verdict:
    """Eq. 31: the whole b x M Jacobian dc^(i)_(d,v)/dPhi."""
    batch = _batch()
    pairs = [(_evaluate(form.value, i=i, d=d, v=v), batch["J"][i, d, v])
             for i in range(ITEMS) for d in range(BITS + 1) for v in LEVELS]  # fmt: skip
    return _agreement(pairs, "the Jacobian of every (i, d, v)")


def check_gradient(form: Form) -> Verdict:
    """Eq. 33 / 37: the printed gradient expression vs autograd."""
    helpers = _matrix_helpers("diag(alpha[:, d, v])", "stack([beta[d][v][i] for i in range(M)], axis=1)")
    return _agreement([(_evaluate(form.value, **helpers), _batch()["truth"])], "the printed gradient")


def _identities(a_expression: str, b_expression: str) -> Verdict:
    """Eq. 35-36 by their use: Phi A B^T = sum_i alpha_i phi_i beta_i^T, Phi B A = sum_i alpha_i Phi beta_i e_i^T."""
    pairs = []
    for d in range(BITS + 1):
        for v in LEVELS:
            a = _evaluate(a_expression, d=d, v=v)
            b_matrix = _evaluate(b_expression, d=d, v=v)
            pairs.append((_batch()["phi"] @ a @ b_matrix.T, _evaluate(
                "sum(alpha[i, d, v] * outer(phi[:, i], beta[d][v][i]) for i in range(M))", d=d, v=v)))
            pairs.append((_batch()["phi"] @ b_matrix @ a, _evaluate(
                "sum(alpha[i, d, v] * outer(phi @ beta[d][v][i], e(i)) for i in range(M))", d=d, v=v)))
    return _agreement(pairs, "Phi A B^T and Phi B A against the sums of Eq. 34")  # fmt: skip


B_COLUMNS = "stack([beta[d][v][i] for i in range(M)], axis=1)"
A_DIAGONAL = "diag(alpha[:, d, v])"


def check_a_matrix(form: Form) -> Verdict:
    return _identities(form.value, B_COLUMNS)


def check_b_matrix(form: Form) -> Verdict:
    return _identities(A_DIAGONAL, form.value)


def eq37_with_operation_count(
    phi: np.ndarray, alpha: np.ndarray, beta: np.ndarray
) -> tuple[np.ndarray, int]:
    """Eq. 37 of He et al. (2018, suppl.) executed with numpy, and its scalar operations counted per array op.

    ``-Phi sum_(d,v) (A B + B A) / (2M)`` with ``A = diag(alpha[d, v])`` applied as a scaling (not
    a matmul) and ``B = beta[d, v]``. Per (d, v): M^2 kernel slopes for B, 2 M^2 products for the
    two scalings, 2 M^2 additions; then b M^2 for ``Phi @ total`` and b M for the division.

    Args:
        phi: codes ``b x M``.
        alpha: ``alpha[d, v, i]``, shape ``(b + 1, |V|, M)``.
        beta: ``beta[d, v, i, j]``, shape ``(b + 1, |V|, M, M)``.

    Returns:
        ``(dO/dPhi, operations)``.
    """
    bits, items = phi.shape
    operations = 0
    total = np.zeros((items, items))
    for alpha_dv, beta_dv in zip(alpha.reshape(-1, items), beta.reshape(-1, items, items), strict=True):
        operations += items * items  # beta: M^2 kernel slopes
        ab, ba = alpha_dv[:, None] * beta_dv, beta_dv * alpha_dv[None, :]  # diagonal A: scaling
        operations += 2 * items * items
        total += ab + ba
        operations += 2 * items * items
    gradient = -phi @ total / (2 * items)
    operations += bits * items * items + bits * items
    return gradient, operations


def count_eq37(bits: int, levels: int, items: int) -> int:
    """Scalar operations of Eq. 37 (:func:`eq37_with_operation_count`) on random inputs."""
    rng = np.random.default_rng(0)
    phi = rng.random((bits, items))
    alpha, beta = rng.random((bits + 1, levels, items)), rng.random((bits + 1, levels, items, items))
    return eq37_with_operation_count(phi, alpha, beta)[1]


def check_complexity(form: Form) -> Verdict:
    """Eq. 37's counted operations against the printed order (recomputed per check, not cached at
    module level: mutation testing forks each mutant's run from a clean run)."""
    counts = {(("M", m), ("V", v), ("b", bits)): count_eq37(bits, v, m)
              for bits in (4, 32) for v in (2, 8) for m in (8, 64)}  # fmt: skip
    return order_check(form.value, counts)


d_bin = sp.Symbol("d", nonnegative=True)
"""The histogram bin index summed over (Sec. B: N+ = sum_d n+_d)."""
bits = sp.Symbol("b", integer=True, positive=True)
"""The code length ``b``: the bins are d = 0..b."""
relevant_count = sp.Function("c^+")
"""``c^+(d)``: the relaxed count of relevant items in bin d (:func:`soft_counts`, level v = 1)."""


def _relevant_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Relaxed codes whose histograms reach both end bins: an item's copy (distance near 0) and
    its negation (distance near b), each with the item's label; three draws."""
    batches = []
    for seed in (0, 1, 2):
        generator = torch.Generator().manual_seed(seed)
        phi = torch.tanh(2.0 * torch.randn(BITS, ITEMS, generator=generator, dtype=torch.float64))
        phi[:, 4], phi[:, 5] = phi[:, 0], -phi[:, 1]
        batches.append((phi, torch.tensor([0, 1, 2, 3, 0, 1])))
    return batches


def check_relevant_total(form: Form) -> Verdict:
    """Sec. B: N+ = sum_d n+_d is not changed by the relaxation. The printed sum over the relaxed
    counts (triangular kernel) against the number of relevant candidates, every query of three
    batches; a bin outside d = 0..b does not exist.

    Example:
        >>> check_relevant_total(Form(sp.Sum(relevant_count(d_bin), (d_bin, 0, bits)))).verdict
        'holds'
    """
    worst, failure = 0.0, ""
    for phi, labels in _relevant_batches():
        counts = soft_counts(phi, labels)[..., 1]
        for query in range(ITEMS):
            truth = int(((labels == labels[query]).sum() - 1).item())
            try:
                summed = sp.sympify(form.value).subs(bits, BITS).doit()
                lookup = {}
                for applied in summed.atoms(sp.core.function.AppliedUndef):
                    (index,) = applied.args
                    if not (index.is_integer and 0 <= int(index) <= BITS):
                        raise KeyError(f"bin {index} does not exist (bins 0..{BITS})")
                    lookup[applied] = sp.Float(float(counts[query, int(index)]), 30)
                value = float(summed.xreplace(lookup))
            except (KeyError, TypeError, ValueError) as error:
                failure = f"the printed sum does not evaluate: {error}"
                break
            worst = max(worst, abs(value - truth))
        if failure:
            break
    failure = failure or f"the printed sum differs from N+ by up to {worst:.3g}."
    return decide(worst < 1e-12 and failure.startswith("the printed sum differs"),
                  f"sum over d = 0..b of the relaxed c+_d equals N+ to {worst:.1e} for every query "
                  f"of 3 batches of relaxed codes (M = {ITEMS}, b = {BITS}, triangular kernel: a "
                  "partition of unity on [0, b]).", failure)  # fmt: skip


def claims() -> list[Claim]:
    """The audited claims of He et al. (2018, suppl.), Eq. 22-37, the complexity and N+ (Sec. B)."""

    def code(expression, lhs):
        return Form(expression, lhs=lhs, render=str)

    chain = "sum(alpha[i, d, v] * J[i, d, v] for i in range(M) for d in range(b + 1) for v in V) / M"
    chain_mutant = "sum(alpha[i, d, v] * J[i, d, v] for i in range(M) for d in range(b + 1) for v in V)"
    eq22 = code("stack(phis, axis=1)", "Phi (b x M, column j = phi(x_j))")
    eq23 = code(chain, "dO/dPhi")
    eq24 = code("grad_Oi_c", "alpha_(d,v)^(i) = dO_i/dc_(d,v)^(i)")
    eq25 = code("ind[i, j, v] * dprime[d][i, j] * dD_dphi_j[i]", "dc^(i)_(d,v)/dphi(x_j), j != i")
    eq27 = code("beta[d][v][i, j] * (-phi[:, i] / 2)", "dc^(i)_(d,v)/dphi(x_j), j != i")
    eq28 = code("ind[i, j, v] * dprime[d][i, j]", "beta_(d,v)(i, j)")
    symmetric = code("(b - phi.T @ phi) / 2", "relaxed distance d(x_i, x_j) in beta")
    eq29 = code("sum(beta[d][v][i, k] * (-phi[:, k] / 2) for k in range(M) if k != i)",
                "dc^(i)_(d,v)/dphi(x_i)")
    eq30 = code("-0.5 * beta[d][v][i, j] * phi[:, i] - (j == i) / 2 * sum(beta[d][v][i, k] * phi[:, k] "
                "for k in range(M))", "dc^(i)_(d,v)/dphi(x_j)")
    eq31 = code("-0.5 * (outer(phi[:, i], beta[d][v][i]) + outer(phi @ beta[d][v][i], e(i)))",
                "dc^(i)_(d,v)/dPhi")
    eq32 = code(chain, "dO/dPhi (Eq. 23 restated)")
    eq33 = code("sum(-0.5 * alpha[i, d, v] * (outer(phi[:, i], beta[d][v][i]) + outer(phi @ beta[d][v][i], "
                "e(i))) for d in range(b + 1) for v in V for i in range(M)) / M", "dO/dPhi")
    eq35 = code(A_DIAGONAL, "A_(d,v)")
    eq36 = code(B_COLUMNS, "B_(d,v)")
    eq37 = code(EQ37, "dO/dPhi")
    M, V, b = sp.symbols("M V b", positive=True)
    at_infinity = ((M, sp.oo), (V, sp.oo), (b, sp.oo))
    complexity = Form(sp.O(b * V * M**2, *at_infinity), lhs="cost of Eq. 37 (|V| = V)")
    relevant_total = Form(sp.Sum(relevant_count(d_bin), (d_bin, 0, bits)), lhs="N+")
    defined = [
        Claim(SEED, "eq22", "the minibatch codes as a b x M matrix", eq22, check_layout,
              "Eq. 37 applied to the printed layout vs autograd",
              mutants=(mutant(eq22, "stack(phis, axis=0)", "items as rows (M x b)"),
                       mutant(eq22, "stack(phis[::-1], axis=1)", "items in reverse order"),
                       mutant(eq22, "-stack(phis, axis=1)", "sign flipped"))),
        Claim(SEED, "eq23", "chain rule through the soft counts", eq23, check_chain_rule,
              "float64: autograd alpha and dc/dPhi combined as printed vs autograd dO/dPhi",
              mutants=(mutant(eq23, chain_mutant, "1/M dropped"),
                       mutant(eq23, "-" + chain, "sign flipped"),
                       mutant(eq23, chain.replace("range(b + 1)", "range(b)"), "bin d = b left out"))),
        Claim(SEED, "eq24", "alpha is the derivative of the query's own objective", eq24,
              check_alpha, "Eq. 23 with the printed alpha vs autograd",
              mutants=(mutant(eq24, "grad_O_c", "derivative of the batch mean O"),
                       mutant(eq24, "-grad_Oi_c", "sign flipped"),
                       mutant(eq24, "grad_Oi_c[::-1]", "queries in reverse order"))),
        Claim(SEED, "eq25", "a candidate's column through the distance (chain rule)", eq25,
              check_off_diagonal_column, "float64 vs autograd Jacobian",
              mutants=(mutant(eq25, "dprime[d][i, j] * dD_dphi_j[i]", "affinity indicator dropped"),
                       mutant(eq25, "-ind[i, j, v] * dprime[d][i, j] * dD_dphi_j[i]", "sign flipped"),
                       mutant(eq25, "ind[i, j, v] * dprime[d][i, j] * dD_dphi_j[j]", "phi(x_i) -> phi(x_j)"))),
        Claim(SEED, "eq27", "a candidate's column with the shorthand beta", eq27,
              check_off_diagonal_column, "float64 vs autograd Jacobian",
              mutants=(mutant(eq27, "beta[d][v][i, j] * (phi[:, i] / 2)", "sign flipped"),
                       mutant(eq27, "beta[d][v][i, j] * (-phi[:, j] / 2)", "phi(x_i) -> phi(x_j)"),
                       mutant(eq27, "beta[d][v][i, j] * (-phi[:, i])", "1/2 dropped"))),
        Claim(SEED, "eq28", "beta, the derivative of the count by the distance", eq28, check_beta,
              "float64 vs autograd dc/dd",
              mutants=(mutant(eq28, "(1 - ind[i, j, v]) * dprime[d][i, j]", "indicator negated"),
                       mutant(eq28, "-ind[i, j, v] * dprime[d][i, j]", "sign flipped"),
                       mutant(eq28, "ind[i, j, v] * dprime[min(d + 1, b)][i, j]", "next bin's slope"))),
        Claim(SEED, "claim-beta-symmetric", "beta is symmetric, beta(i, j) = beta(j, i)", symmetric,
              check_beta_symmetry, "float64, beta from Eq. 28 with the printed distance",
              mutants=(mutant(symmetric, "(b - phi.T @ phi) / 2 + 0.1 * np.arange(M)[:, None]",
                              "distance made asymmetric"),
                       mutant(symmetric, "(b - phi.T @ phi[:, ::-1]) / 2", "candidates in reverse order"),
                       mutant(symmetric, "(b - phi.T @ np.abs(phi)) / 2", "|phi_j| for phi_j"))),
        Claim(SEED, "eq29", "the query's own column", eq29, check_diagonal_column,
              "float64 vs autograd Jacobian",
              mutants=(mutant(eq29, "sum(beta[d][v][i, k] * (-phi[:, i] / 2) for k in range(M) if k != i)",
                              "phi(x_k) -> phi(x_i)"),
                       mutant(eq29, "sum(beta[d][v][i, k] * (phi[:, k] / 2) for k in range(M) if k != i)",
                              "sign flipped"),
                       mutant(eq29, "sum(beta[d][v][i, k] * (-phi[:, k]) for k in range(M) if k != i)",
                              "1/2 dropped"))),
        Claim(SEED, "eq30", "one formula for every column (beta(i, i) = 0)", eq30,
              check_unified_column, "float64 vs autograd Jacobian",
              mutants=(mutant(eq30, "-0.5 * beta[d][v][i, j] * phi[:, i]", "1[j = i] term dropped"),
                       mutant(eq30, eq30.value.replace("(j == i)", "(j != i)"), "1[j != i] for 1[j = i]"),
                       mutant(eq30, eq30.value.replace("-0.5 *", "0.5 *", 1), "sign of the first term flipped"))),
        Claim(SEED, "eq31", "the Jacobian in matrix form", eq31, check_jacobian_matrix,
              "float64 vs autograd Jacobian",
              mutants=(mutant(eq31, "-0.5 * outer(phi[:, i], beta[d][v][i])", "Phi beta e_i^T dropped"),
                       mutant(eq31, "0.5 * (outer(phi[:, i], beta[d][v][i]) + outer(phi @ beta[d][v][i], e(i)))",
                              "sign flipped"),
                       mutant(eq31, "-(outer(phi[:, i], beta[d][v][i]) + outer(phi @ beta[d][v][i], e(i)))",
                              "1/2 dropped"))),
        Claim(SEED, "eq32", "Eq. 23 restated before reordering", eq32, check_chain_rule,
              "float64 vs autograd",
              mutants=(mutant(eq32, chain_mutant, "1/M dropped"), mutant(eq32, "-" + chain, "sign flipped"),
                       mutant(eq32, chain.replace("for v in V", "for v in V[1:]"), "level v = 0 left out"))),
        Claim(SEED, "eq33", "Eq. 31 substituted into Eq. 32", eq33, check_gradient,
              "float64 vs autograd",
              mutants=(mutant(eq33, eq33.value.replace("-0.5", "0.5"), "sign flipped"),
                       mutant(eq33, eq33.value.replace(") / M", ")"), "1/M dropped"),
                       mutant(eq33, eq33.value.replace("e(i)", "e(0)"), "e_1 for e_i"))),
        Claim(SEED, "eq35", "A_(d,v) = diag(alpha^(1), ..., alpha^(M))", eq35, check_a_matrix,
              "float64: Eq. 34's sums vs Phi A B^T and Phi B A",
              mutants=(mutant(eq35, "diag(alpha[::-1, d, v])", "alpha order reversed"),
                       mutant(eq35, "-diag(alpha[:, d, v])", "sign flipped"),
                       mutant(eq35, "diag(alpha[:, d, 1 - v])", "the other affinity level"))),
        Claim(SEED, "eq36", "B_(d,v) has the columns beta^(i)", eq36, check_b_matrix,
              "float64: Eq. 34's sums vs Phi A B^T and Phi B A",
              mutants=(mutant(eq36, "stack([beta[d][v][i] for i in range(M)][::-1], axis=1)",
                              "column order reversed"),
                       mutant(eq36, "-stack([beta[d][v][i] for i in range(M)], axis=1)", "sign flipped"),
                       mutant(eq36, "stack([beta[d][1 - v][i] for i in range(M)], axis=1)",
                              "the other affinity level")),
              note="beta is symmetric, so rows or columns give the same B."),
        Claim(SEED, "eq37", "the minibatch gradient in matrix form", eq37, check_gradient,
              "float64 vs autograd (transcribed, not gradlab's implementation)",
              mutants=(mutant(eq37, EQ37.replace(" + B(d, v) @ A(d, v)", ""), "B A dropped"),
                       mutant(eq37, EQ37.replace("(2 * M)", "M"), "1/2 dropped"),
                       mutant(eq37, EQ37.replace("-(phi", "(phi"), "sign flipped"))),
        Claim(SEED, "claim-complexity", "Eq. 37 costs O(b |V| M^2)", complexity, check_complexity,
              "scalar operations of Eq. 37 executed, b, |V| and M varied",
              mutants=(mutant(complexity, sp.O(b * M**2, *at_infinity), "|V| dropped"),
                       mutant(complexity, sp.O(b * V * M**3, *at_infinity), "M^3"),
                       mutant(complexity, sp.O(b * V * M**2 * sp.log(M), *at_infinity), "an extra log M"))),
        Claim(SEED, "claim-relevant-total", "N+ = sum_d n+_d is not affected by the relaxation (Sec. B)",
              relevant_total, check_relevant_total,
              "float64: the relaxed counts of three batches summed as printed vs the hard count",
              mutants=(mutant(relevant_total, sp.Sum(relevant_count(d_bin), (d_bin, 1, bits)), "bin 0 left out"),
                       mutant(relevant_total, sp.Sum(relevant_count(d_bin), (d_bin, 0, bits - 1)),
                              "bin b left out")),
              note="The triangular kernel spreads each relaxed distance in [0, b] over the bins with "
              "weights that sum to 1, so the relaxed counts keep N+ exactly (and its gradient is 0)."),
    ]  # fmt: skip
    # a numpy expression has no SymPy tree: its three hand-written slips are its mutants
    reasons = inapplicable_to_code("numpy expression evaluated on a batch")
    return [replace(claim, inapplicable=reasons) if isinstance(claim.printed.value, str) else claim
            for claim in defined]  # fmt: skip
