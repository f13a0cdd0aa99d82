"""Batch-level diagnostics of SmoothAP built from the functional pieces.

Everything here composes :mod:`gradlab.functional` (no new math): the decomposition of an
in-batch retrieval problem, and per-query summaries of its ``A*D`` and ``C*B`` terms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.functional.decomposition import (
    SmoothAPDecomposition,
    _in_dtype,
    smooth_ap_decomposition,
)
from gradlab.functional.layouts import unit_rows
from gradlab.functional.score_losses import widened
from gradlab.functional.smooth_ap import (
    DEFAULT_CHUNK_ELEMENTS,
    block_size,
    check_smooth_ap_inputs,
    chunk_slices,
    column_weights,
    covers_every_query,
    group_by_positive_count,
    mask_rows,
    rank_sums,
    rank_weights,
    sigmoid_block,
    write_column_weights,
)
from gradlab.validation import (
    check_bool,
    check_embeddings_and_labels,
    check_finite,
    check_optional_callable,
    check_positive_int,
    check_same_device,
    check_shape,
    check_tensor,
)


def in_batch_decomposition(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    tau: float = 0.01,
    include_query: bool = False,
) -> SmoothAPDecomposition:
    """The ``AD - CB`` decomposition of every in-batch query (cosine scores).

    Queries and candidates are the L2-normalized embeddings; each query's gradient is taken
    with the candidates held fixed, as in Bleeker & de Rijke (2022, appendix A). Without
    ``include_query`` a query is not its own candidate. float16 and bfloat16 embeddings are
    normalised and decomposed in float32, the result returned in their dtype.

    Args:
        embeddings: ``[B, d]`` float embeddings (``d >= 1``), finite; each row is a query and
            every row a candidate.
        labels: ``[B]`` integer labels: the positives of a query share its label.
        tau: the sigmoid's temperature, finite and at least ``1e-30``.
        include_query: keep each query as a candidate and as its own positive, as the
            official Smooth-AP code and pytorch-metric-learning do (False: left out of its
            own ranking, Brown et al. 2020, Eq. 1).

    Returns:
        A :class:`~gradlab.functional.SmoothAPDecomposition` with ``Q = B`` queries, as
        :func:`~gradlab.functional.smooth_ap_decomposition` returns it: a query with no other
        item of its label has no AP, and its ``grad`` is NaN.

    Raises:
        GradlabError: embeddings that are not ``[B, d]`` finite floats, labels that are not
            ``[B]`` integers on their device, ``tau`` outside ``[1e-30, inf)``, or
            ``include_query`` not a bool.

    Example:
        >>> import torch
        >>> from gradlab.functional import in_batch_decomposition
        >>> emb = torch.randn(6, 4, dtype=torch.float64)
        >>> parts = in_batch_decomposition(emb, torch.tensor([0, 0, 1, 1, 2, 2]), tau=0.1)
        >>> parts.grad.shape
        torch.Size([6, 4])
    """
    check_embeddings_and_labels(embeddings, labels, finite=True)  # d >= 1: a cosine needs one
    include_query = check_bool("include_query", include_query)
    # float16 and bfloat16 normalised and decomposed in float32, returned in their dtype
    normalized = unit_rows(widened(embeddings))
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    mask = None
    if not include_query:
        mask = ~torch.eye(len(labels), dtype=torch.bool, device=labels.device)
    parts = smooth_ap_decomposition(normalized, normalized, positives, tau, candidate_mask=mask)
    return _in_dtype(parts, embeddings.dtype)


def decomposition_norms(parts: SmoothAPDecomposition) -> dict[str, torch.Tensor]:
    """Per-query norms of the two terms of ``dAP/dq`` and how they relate.

    Returns ``[Q]`` tensors (queries without positives dropped): ``ad_norm``, ``cb_norm``,
    ``grad_norm``, ``ad_share`` (``|AD| / (|AD| + |CB|)``, NaN when both vanish), ``ratio``
    (``|AD| / |CB|``, NaN where ``CB`` vanishes, as it does for a query with one positive:
    ``B`` is then an empty sum) and ``cosine`` (between the two summands of ``dAP/dq = AD -
    CB``, ``ad_term`` and ``cb_term = -CB``: -1 when they cancel, 1 when they add up; NaN
    when either vanishes).

    Example:
        >>> import torch
        >>> from gradlab.functional import decomposition_norms, in_batch_decomposition
        >>> emb = torch.randn(6, 4, dtype=torch.float64)
        >>> parts = in_batch_decomposition(emb, torch.tensor([0, 0, 1, 1, 2, 2]))
        >>> norms = decomposition_norms(parts)
        >>> sorted(norms)
        ['ad_norm', 'ad_share', 'cb_norm', 'cosine', 'grad_norm', 'ratio']
    """
    if not isinstance(parts, SmoothAPDecomposition):
        raise GradlabError(
            "parts must be a SmoothAPDecomposition (what in_batch_decomposition or "
            f"smooth_ap_decomposition returns); got {type(parts).__name__}"
        )
    ad, cb, grad = parts.ad_term, parts.cb_term, parts.grad
    if ad.dim() == 1:
        ad, cb, grad = ad.unsqueeze(0), cb.unsqueeze(0), grad.unsqueeze(0)
    defined = ~torch.isnan(grad).any(dim=1)
    return term_norms(ad[defined], cb[defined], grad[defined])


def term_norms(
    ad_term: torch.Tensor, cb_term: torch.Tensor, grad: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Row norms of ``[Q, d]`` AD and CB terms and how they relate (see
    :func:`decomposition_norms`), every row kept: a NaN row gives NaN. No host read. The terms
    are the summands of the gradient (``grad = ad_term + cb_term``; a decomposition's
    ``cb_term`` is ``-CB``), and ``cosine`` is theirs.

    Norms and the cosine are taken of rows scaled by their largest entry, so terms whose squares
    leave the dtype's range (a sigmoid tail at a small ``tau``) keep their true values.
    ``grad`` defaults to ``ad_term + cb_term``.

    Example:
        >>> ad, cb = torch.tensor([[3.0, 4.0]]) * 1e-30, torch.tensor([[0.0, -1.0]]) * 1e-30
        >>> norms = term_norms(ad, cb)
        >>> [round(norms[key].item(), 4) for key in ("ad_share", "ratio", "cosine")]
        [0.8333, 5.0, -0.8]
    """
    if grad is None:
        grad = ad_term + cb_term
    # The three terms as one [3, Q, d] stack: each op below runs once, not three times.
    units, scales = _scaled_rows(torch.stack((ad_term, cb_term, grad)))
    unit_norms = units.norm(dim=-1)
    ad_norm, cb_norm, grad_norm = (unit_norms * scales).unbind()
    nan = torch.full_like(ad_norm, float("nan"))
    return {
        "ad_norm": ad_norm,
        "cb_norm": cb_norm,
        "grad_norm": grad_norm,
        # 0 / 0 = NaN when both terms vanish (a scaled row is zero only if the row is)
        "ad_share": ad_norm / (ad_norm + cb_norm),
        "ratio": torch.where(cb_norm > 0, ad_norm / cb_norm, nan),  # NaN, not inf, for CB = 0
        # 0 / 0 = NaN when either term vanishes
        "cosine": (units[0] * units[1]).sum(dim=-1) / (unit_norms[0] * unit_norms[1]),
    }


def _scaled_rows(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``rows`` ``[..., d]`` divided by each row's largest ``|entry|``, and that ``[...]`` scale.

    Norms and cosines of the scaled rows (entries in ``[-1, 1]``, norm in ``[1, sqrt(d)]``)
    neither underflow nor overflow, where ``x.norm()`` squares the entries: AD and CB terms in
    a sigmoid tail (``~exp(-|D| / tau)``) would report a norm of 0. A row that is zero or holds
    a non-finite entry keeps the scale 1 (its norm is then 0, inf or NaN as before).
    """
    if rows.shape[-1] == 0:
        return rows, torch.ones(rows.shape[:-1], dtype=rows.dtype, device=rows.device)
    # The largest |entry| (NaN propagates): the same value as the inf-norm, ~20x faster on a CPU.
    largest = rows.abs().amax(dim=-1, keepdim=True)
    scale = torch.where(torch.isfinite(largest) & (largest > 0), largest, 1.0)
    return rows / scale, scale.squeeze(-1)


class SmoothAPTerms(NamedTuple):
    """SmoothAP's value and score-space gradient with its ``AD``/``CB`` split, from one block.

    Attributes:
        ap: ``[Q]`` smooth AP (NaN for a query without positives).
        score_grad: ``[Q, C]`` ``dAP_q / ds_qc`` (zero rows for queries without positives).
        ad_term: ``[Q, d]`` ``1/|P| sum_i A_i D_i / R_i^2`` (Bleeker & de Rijke 2022, Eq. 13),
            NaN rows for queries without positives.
        cb_term: ``[Q, d]`` ``-1/|P| sum_i C_i B_i / R_i^2``, NaN rows likewise.
        forward: the groups and ``(A, C)`` ranks used (see
            :class:`gradlab.functional.losses.SmoothAPForward`).
    """

    ap: torch.Tensor
    score_grad: torch.Tensor
    ad_term: torch.Tensor
    cb_term: torch.Tensor
    forward: tuple


def smooth_ap_terms(
    scores: torch.Tensor,
    positives: torch.Tensor,
    tau: float,
    vectors: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    forward: tuple | None = None,
    max_chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    buffer: Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor] | None = None,
    column_weights_split: torch.Tensor | None = None,
) -> SmoothAPTerms:
    """SmoothAP, ``dAP/dS`` and the ``AD - CB`` decomposition from ONE sigmoid block.

    Bleeker & de Rijke (2022), appendix A, Eq. 1 and 8-14, with the rank convention of
    :mod:`gradlab.functional.smooth_ap`.
    The positive rows of each query's difference matrix are evaluated once, in chunks: ``G``
    gives the ranks ``A`` and ``C`` (skipped when ``forward`` supplies the ranks a SmoothAP
    forward already computed), and ``G (1 - G)`` in place gives the slopes. For a query ``q``
    with coefficients ``a_i = A_i / R_i^2`` and ``c_i = C_i / R_i^2`` the candidate weights

        gA_qj = [j = i] a_i sum_{k in N} sim_ik  -  [j in N] sum_i a_i sim_ij
        gC_qj = [j = i] c_i sum_{k in P} sim_ik  -  [j in P] sum_i c_i sim_ij

    (``sim = G (1 - G) / tau``, divided by ``|P|``) give ``ad_term = gA @ vectors``,
    ``cb_term = -gC @ vectors`` and ``dAP_q/ds_qj = gA_qj - gC_qj``: the exact backward of
    :func:`gradlab.functional.smooth_ap` and :func:`smooth_ap_decomposition` in one pass.

    Args:
        scores: ``[Q, C]`` dot products ``s_qj = q . v_j`` of the queries with ``vectors``.
        positives: ``[Q, C]`` bool relevance; a positive outside ``candidate_mask`` is no
            candidate, as in :func:`gradlab.functional.smooth_ap`.
        tau: sigmoid temperature, finite and at least ``1e-30``.
        vectors: ``[C, d]`` candidate vectors ``v_j`` (normalized embeddings for cosine), of
            the dtype and device of ``scores``.
        candidate_mask: optional ``[Q, C]`` bool candidate mask.
        forward: ``(groups, [(A, C)])`` of a SmoothAP forward on the same arguments.
        max_chunk_elements: entries of the block computed at once, a positive integer.
        buffer: ``buffer(name, shape, dtype)`` gives the two large work tensors (the block
            every chunk is written into, and the ``[2, Q, C]`` split whose first half becomes
            ``score_grad``), e.g. buffers reused from one call to the next; ``None``: fresh
            ones.
        column_weights_split: the ``[2, Q, C]`` split that SmoothAP's exact backward of the
            same call recorded (:class:`~gradlab.functional.smooth_ap.RecordedColumnWeights`:
            the same chunks, the same operations, so the same numbers), with ``forward``: no
            sigmoid block is evaluated, and the split is used (and overwritten) in place.

    Returns:
        :class:`SmoothAPTerms`. Without ``forward`` the grouping reads the group sizes back
        once (one host synchronisation); with it, nothing is read back but the checks that
        ``scores`` and ``vectors`` are finite (skipped inside
        :func:`gradlab.validation.skip_value_checks`).

    Raises:
        GradlabError: a tensor of the wrong shape, dtype or device (float16 and bfloat16
            included: cast them to float32), NaN or infinite ``scores`` or ``vectors``, a
            ``tau`` or ``max_chunk_elements`` not allowed, a ``buffer`` that is not
            callable, or ``column_weights_split`` without ``forward``.

    Example:
        >>> v = torch.nn.functional.normalize(torch.randn(6, 3, dtype=torch.float64), dim=1)
        >>> positives = torch.tensor([0, 0, 1, 1, 2, 2]).unsqueeze(0) == torch.tensor(
        ...     [0, 0, 1, 1, 2, 2]).unsqueeze(1)
        >>> keep = ~torch.eye(6, dtype=torch.bool)
        >>> terms = smooth_ap_terms(v @ v.T, positives & keep, 0.1, v, candidate_mask=keep)
        >>> parts = smooth_ap_decomposition(v, v, positives, 0.1, candidate_mask=keep)
        >>> bool(torch.allclose(terms.ad_term, parts.ad_term))
        True
    """
    tau = check_smooth_ap_inputs(scores, positives, candidate_mask, tau)
    if scores.dtype not in (torch.float32, torch.float64):
        raise GradlabError(f"scores must be float32 or float64 (cast float16 and bfloat16 to "
                           f"float32 first); got {scores.dtype}")  # fmt: skip
    check_tensor("vectors", vectors, ndims=(2,), kind="float")
    if vectors.dtype != scores.dtype:
        raise GradlabError(f"vectors must have the dtype of scores ({scores.dtype}); got "
                           f"{vectors.dtype}")  # fmt: skip
    check_shape("vectors", vectors, (scores.shape[1], vectors.shape[1]),
                "one vector per candidate, a column of scores")  # fmt: skip
    check_same_device(scores=scores, vectors=vectors)
    budget = check_positive_int("max_chunk_elements", max_chunk_elements)
    check_optional_callable("buffer", buffer, "(name, shape, dtype) -> tensor")
    if column_weights_split is not None and forward is None:
        raise GradlabError("column_weights_split is read with the ranks of forward: pass "
                           "forward too, or neither")  # fmt: skip
    check_finite("scores", scores)
    check_finite("vectors", vectors)
    if candidate_mask is not None:  # a positive that is no candidate is neither (smooth_ap's)
        positives = positives & candidate_mask
    return _smooth_ap_terms(scores, positives, tau, vectors, candidate_mask=candidate_mask,
                            forward=forward, max_chunk_elements=budget, buffer=buffer,
                            column_weights_split=column_weights_split)  # fmt: skip


def _smooth_ap_terms(
    scores: torch.Tensor,
    positives: torch.Tensor,
    tau: float,
    vectors: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    forward: tuple | None = None,
    max_chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    buffer: Callable[[str, tuple[int, ...], torch.dtype], torch.Tensor] | None = None,
    column_weights_split: torch.Tensor | None = None,
) -> SmoothAPTerms:
    """:func:`smooth_ap_terms` of checked arguments, ``positives`` inside ``candidate_mask``
    (the Monitor's own tensors)."""
    num_queries, num_candidates = scores.shape
    if forward is None:
        groups = group_by_positive_count(positives)
        ranks = None
    else:
        groups, ranks = forward
    ap = torch.full((num_queries,), float("nan"), dtype=scores.dtype, device=scores.device)
    # One group of every query (as group_by_positive_count makes them: ascending): its chunks
    # are row slices, views instead of copies, and every row of ``split`` is written.
    whole = covers_every_query(groups, num_queries)
    if column_weights_split is not None and ranks is not None:
        computed = []
        for group, (rank_a, rank_c) in zip(groups, ranks, strict=True):
            ap = ap.index_put((group.queries,), (rank_a / (rank_a + rank_c)).mean(dim=1))
            computed.append((rank_a, rank_c))
        return _terms_from_split(ap, column_weights_split, vectors, (groups, computed))
    if buffer is None:
        buffer = lambda name, shape, dtype: torch.empty(shape, dtype=dtype,  # noqa: E731
                                                        device=scores.device)  # fmt: skip
    split = buffer("terms split", (2, num_queries, num_candidates), scores.dtype)
    if not whole:
        split.zero_()
    flat = buffer("terms block", (block_size(groups, num_candidates, max_chunk_elements),),
                   scores.dtype)  # fmt: skip
    computed = []
    for index, group in enumerate(groups):
        parts = list(chunk_slices(group, num_candidates, max_chunk_elements))
        saved_a = saved_c = None
        if ranks is not None:
            saved_a, saved_c = ranks[index]
        chunks_a, chunks_c = [], []
        for part in parts:
            queries = part if whole else group.queries[part]
            columns = group.positive_columns[part]
            block = sigmoid_block(scores[queries], columns, tau, out=flat)
            candidate_rows = mask_rows(candidate_mask, queries)
            weights = rank_weights(positives[queries], candidate_rows, scores.dtype)
            if saved_a is None:
                positive_sum, negative_sum = rank_sums(block, weights)
                rank_a, rank_c = 1.0 + positive_sum, negative_sum
            else:
                rank_a, rank_c = saved_a[part], saved_c[part]
            chunks_a.append(rank_a)
            chunks_c.append(rank_c)
            slope = block.addcmul_(block, block, value=-1.0)  # G (1 - G); 0 at j == i
            g_a, g_c = column_weights(slope, weights, columns, rank_sums(slope, weights),
                                      (rank_a, rank_c))  # fmt: skip
            write_column_weights(split, queries, whole, g_a, g_c,
                                 1.0 / (group.num_positives * tau))  # fmt: skip
        rank_a, rank_c = torch.cat(chunks_a), torch.cat(chunks_c)
        ap = ap.index_put((group.queries,), (rank_a / (rank_a + rank_c)).mean(dim=1))
        computed.append((rank_a, rank_c))
    return _terms_from_split(ap, split, vectors, (groups, computed))


def _terms_from_split(
    ap: torch.Tensor, split: torch.Tensor, vectors: torch.Tensor, forward: tuple
) -> SmoothAPTerms:
    """:class:`SmoothAPTerms` from the ``[2, Q, C]`` column weights (``score_grad`` is written
    into ``split[0]``)."""
    terms = split @ vectors  # [2, Q, d]
    score_grad = torch.sub(split[0], split[1], out=split[0])  # in place: no third [Q, C]
    undefined = torch.isnan(ap).unsqueeze(1)
    ad_term = terms[0].masked_fill(undefined, float("nan"))
    cb_term = (-terms[1]).masked_fill(undefined, float("nan"))
    return SmoothAPTerms(ap, score_grad, ad_term, cb_term, forward)
