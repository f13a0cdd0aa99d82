"""Retrieval metrics of a whole evaluation set, in bounded memory: Precision@1, R-Precision,
MAP@R and Recall@K from embeddings and labels.

Musgrave, Belongie & Lim, 2020, "A Metric Learning Reality Check" (ECCV), Sec. 3.2, define
R-Precision and MAP@R; this module follows pytorch-metric-learning's ``AccuracyCalculator``
conventions so that numbers are comparable with papers that use it:

* **Neighbours.** Cosine similarity; neighbours sorted by score, ties broken by the lower
  candidate index (a deterministic order, unlike an arbitrary ``topk``). Ties are ties of the
  computed scores: a matrix product may round the dot products of two bitwise-identical
  candidates with one query differently in the last bit (its kernels treat columns unevenly,
  even within one block: 26 float64 embeddings of 2 dimensions scored at once are enough), and
  without ``candidates`` each pair's score comes from one block of the upper triangle, whose
  shapes differ too. Such candidates are ordered by those scores, by index only where they are
  equal. So tied scores count as the order of the evaluation set puts them: a collapsed model
  (every score equal) gets a value that depends on that order (above chance on a set sorted
  by label), and with duplicates in the set the results can depend on ``chunk_size``.
  :func:`gradlab.functional.recall_at_k` counts ties by their expected value instead, on the
  scores of :func:`gradlab.functional.in_batch_retrieval`, rounded so that such near-ties tie
  (the chance value for a collapsed model): use it where ties may be many.
* **Same source.** Without ``candidates`` every embedding queries all the others (the query
  itself is never its own neighbour; a duplicate at another index is).
* **R.** A query's R is the number of candidates that share its label (the query excluded).
  Queries with ``R = 0`` ("lone" queries) are left out of every average.
* ``precision_at_1``: the share of queries whose nearest neighbour shares their label.
* ``r_precision``: the share of relevant items among the first R neighbours.
* ``map_at_r``: ``(1/R) sum_{i <= R} P(i) rel(i)``, with ``P(i)`` the precision at rank ``i``.
* ``recall@k``: the share of queries with a relevant item among their ``k`` nearest (all of
  their candidates when ``k`` is at least their number).

Memory and time: queries are scored in chunks of ``chunk_size`` rows, so the extra memory is
``O(chunk_size * C + Q * k)`` instead of the ``O(Q * C)`` of a dense score matrix
(Stanford Online Products' 60,502 test images would need about 29 GB in float64); time is
``O(Q C d)`` for the products plus ``O(Q C)`` for the selection, with ``k = max(R, max(ks))``
neighbours kept per query. Without ``candidates`` the score matrix is symmetric, so only its
upper triangle is computed, in ``[chunk_size, chunk_size]`` blocks (half the products).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from gradlab.errors import GradlabError
from gradlab.functional.layouts import unit_rows
from gradlab.validation import (
    check_embedding_size,
    check_embeddings_and_labels,
    check_finite,
    check_ks,
    check_positive_int,
    check_tensor,
)

DEFAULT_CHUNK_SIZE = 2048
"""Query rows scored at once: ``2048 x 60,000`` float32 scores are about 490 MB (with separate
candidates); without them blocks are ``2048 x 2048`` (16 MB)."""


def nearest_neighbours(
    embeddings: torch.Tensor,
    k: int,
    *,
    candidates: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> torch.Tensor:
    """The ``[Q, k]`` indices of each query's ``k`` nearest candidates by cosine similarity.

    Sorted by score (highest first), ties broken by the lower candidate index. Without
    ``candidates`` the candidates are ``embeddings`` themselves and each query skips its own
    index.

    Args:
        embeddings: ``[Q, d]`` float query embeddings.
        k: neighbours per query, at most the number of candidates (minus one without
            ``candidates``).
        candidates: optional ``[C, d]`` candidate embeddings (same dtype and device).
        chunk_size: query rows scored at once (bounds the memory).

    Returns:
        A ``[Q, k]`` int64 tensor of candidate indices.

    Raises:
        GradlabError: bad shapes, dtypes or sizes, or NaN or infinite embeddings or candidates
            (checked before any work).

    Example:
        >>> import torch
        >>> from gradlab.functional import nearest_neighbours
        >>> points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [1.0, 0.0]])
        >>> nearest_neighbours(points, 2)
        tensor([[3, 1],
                [0, 3],
                [1, 0],
                [0, 1]])
    """
    queries, pool, same_source = _check_points(embeddings, candidates)
    _check_k_and_chunk(k, chunk_size, pool.shape[0], same_source)
    return _neighbours(queries, pool, k, same_source, chunk_size)


def retrieval_at_scale(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    candidates: torch.Tensor | None = None,
    candidate_labels: torch.Tensor | None = None,
    ks: Sequence[int] = (1, 2, 4, 8),
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> dict[str, float]:
    """Precision@1, R-Precision, MAP@R and Recall@K of a whole evaluation set, in chunks.

    Musgrave et al., 2020, Sec. 3.2 (definitions in the module docstring). Neighbours are by
    cosine similarity (the rows are normalised), computed once, and every metric is read from
    them.

    Args:
        embeddings: ``[Q, d]`` float query embeddings.
        labels: ``[Q]`` integer labels of the queries.
        candidates: optional ``[C, d]`` candidates; default: the queries themselves, each
            query excluded from its own neighbours.
        candidate_labels: ``[C]`` labels of ``candidates`` (required with them).
        ks: the ``k`` of each Recall@K, a non-empty sequence of positive integers. A ``k`` at
            or beyond the number of candidates a query sees (``C``, or ``Q - 1`` without
            ``candidates``) ranks every candidate: its Recall@K is 1, as in
            :func:`~gradlab.functional.recall_at_k`.
        chunk_size: query rows scored at once (bounds the memory).

    Returns:
        ``{"precision_at_1", "r_precision", "map_at_r", "recall@k" for k in ks, "queries"}``;
        ``queries`` counts the queries with ``R >= 1`` that the averages are over. With no
        such query every metric is NaN (documented, not an error: a split can lack
        repeated labels) and ``queries`` is 0.

    Raises:
        GradlabError: bad shapes, dtypes, sizes, ``ks`` or ``chunk_size``, or NaN or infinite
            embeddings or candidates (before any work).

    Example:
        >>> import torch
        >>> from gradlab.functional import retrieval_at_scale
        >>> points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9]])
        >>> metrics = retrieval_at_scale(points, torch.tensor([0, 0, 1, 1]), ks=(1,))
        >>> metrics["precision_at_1"], metrics["map_at_r"], metrics["queries"]
        (1.0, 1.0, 4.0)
    """
    queries, pool, same_source = _check_points(embeddings, candidates)
    check_embeddings_and_labels(queries, labels)
    if candidates is None:
        if candidate_labels is not None:
            raise GradlabError("candidate_labels needs candidates; got candidates=None")
        pool_labels = labels
    else:
        if candidate_labels is None:
            raise GradlabError("candidate_labels must be given with candidates; got None")
        check_embeddings_and_labels(pool, candidate_labels,
                                    names=("candidates", "candidate_labels"))
        pool_labels = candidate_labels
    ks = check_ks(ks)
    available = pool.shape[0] - int(same_source)
    if available < 1:  # no query has a neighbour: no metric, whatever ks asks
        raise GradlabError(
            "embeddings must have at least 2 rows (each query needs another embedding as its "
            f"candidate); got shape {tuple(queries.shape)}" if same_source else
            f"candidates must have at least 1 row; got shape {tuple(pool.shape)}"
        )  # fmt: skip
    check_positive_int("chunk_size", chunk_size)  # a k beyond `available` sees every candidate
    relevant_count = _relevant_counts(labels, pool_labels, same_source)
    depth = max(max(ks), int(relevant_count.max().item()) if relevant_count.numel() else 1, 1)
    neighbours = _neighbours(queries, pool, min(depth, available), same_source, chunk_size)
    return _metrics_from_neighbours(pool_labels[neighbours] == labels[:, None], relevant_count, ks)


def precision_at_1(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    candidates: torch.Tensor | None = None,
    candidate_labels: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> float:
    """The share of queries whose nearest neighbour shares their label (lone queries skipped).

    ``candidates``, ``candidate_labels`` and ``chunk_size`` as for :func:`retrieval_at_scale`.

    Queries without a relevant candidate (a label of one) are skipped; with no other query
    the value is NaN, as in :func:`retrieval_at_scale`.

    Example:
        >>> import torch
        >>> from gradlab.functional import precision_at_1
        >>> points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
        >>> precision_at_1(points, torch.tensor([0, 0, 1, 1]))  # the last one finds [0.9, 0.1]
        0.75
    """
    return _one_metric("precision_at_1", embeddings, labels, candidates, candidate_labels,
                       chunk_size)


def r_precision(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    candidates: torch.Tensor | None = None,
    candidate_labels: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> float:
    """R-Precision (Musgrave et al., 2020, Sec. 3.2): relevant share of the first R neighbours.

    ``candidates``, ``candidate_labels`` and ``chunk_size`` as for :func:`retrieval_at_scale`.

    Queries without a relevant candidate (a label of one) are skipped; with no other query
    the value is NaN, as in :func:`retrieval_at_scale`.

    Example:
        >>> import torch
        >>> from gradlab.functional import r_precision
        >>> points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
        >>> r_precision(points, torch.tensor([0, 0, 1, 1]))  # the last one finds [0.9, 0.1]
        0.75
    """
    return _one_metric("r_precision", embeddings, labels, candidates, candidate_labels,
                       chunk_size)


def map_at_r(
    embeddings: torch.Tensor,
    labels: torch.Tensor,
    *,
    candidates: torch.Tensor | None = None,
    candidate_labels: torch.Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
) -> float:
    """MAP@R (Musgrave et al., 2020, Sec. 3.2): ``(1/R) sum_{i <= R} P(i) rel(i)``, averaged.

    ``candidates``, ``candidate_labels`` and ``chunk_size`` as for :func:`retrieval_at_scale`.

    Queries without a relevant candidate (a label of one) are skipped; with no other query
    the value is NaN, as in :func:`retrieval_at_scale`.

    Example:
        >>> import torch
        >>> from gradlab.functional import map_at_r
        >>> points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
        >>> map_at_r(points, torch.tensor([0, 0, 1, 1]))  # the last one finds [0.9, 0.1]
        0.75
    """
    return _one_metric("map_at_r", embeddings, labels, candidates, candidate_labels,
                       chunk_size)


def _one_metric(key: str, embeddings: torch.Tensor, labels: torch.Tensor,
                candidates: torch.Tensor | None, candidate_labels: torch.Tensor | None,
                chunk_size: int) -> float:  # fmt: skip
    """One metric of :func:`retrieval_at_scale`, which reads only the first R neighbours."""
    return retrieval_at_scale(embeddings, labels, candidates=candidates,
                              candidate_labels=candidate_labels, ks=(1,),
                              chunk_size=chunk_size)[key]  # fmt: skip


def _check_points(
    embeddings: torch.Tensor, candidates: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor, bool]:
    check_tensor("embeddings", embeddings, ndims=(2,), kind="float")
    check_embedding_size("embeddings", embeddings)
    if candidates is None:
        check_finite("embeddings", embeddings)  # a read, after the metadata: a NaN ranks anywhere
        return embeddings, embeddings, True
    check_tensor("candidates", candidates, ndims=(2,), kind="float")
    if candidates.shape[1] != embeddings.shape[1]:
        raise GradlabError(
            f"candidates must have the embeddings' dimension {embeddings.shape[1]}; "
            f"got shape {tuple(candidates.shape)}"
        )
    if candidates.dtype != embeddings.dtype or candidates.device != embeddings.device:
        raise GradlabError(
            f"candidates must match the embeddings' dtype and device ({embeddings.dtype}, "
            f"{embeddings.device}); got {candidates.dtype}, {candidates.device}"
        )
    check_finite("embeddings", embeddings)
    check_finite("candidates", candidates)
    return embeddings, candidates, False


def _check_k_and_chunk(k: int, chunk_size: int, rows: int, same_source: bool) -> None:
    """``rows``: the candidates' (the embeddings' when ``same_source``: a query is not its own
    candidate, so each sees one fewer)."""
    check_positive_int("k", k)
    check_positive_int("chunk_size", chunk_size)
    available = rows - 1 if same_source and rows else rows
    if k > available:
        source = "embeddings" if same_source else "candidates"
        raise GradlabError(
            f"k must be at most the number of candidates a query can see ({available}: "
            f"{source} of {rows} row{'s' if rows != 1 else ''}"
            f"{', each query not its own candidate' if same_source else ''}); got {k}"
        )


def _relevant_counts(
    labels: torch.Tensor, pool_labels: torch.Tensor, same_source: bool
) -> torch.Tensor:
    """R per query: candidates sharing its label, the query itself not counted."""
    values, counts = torch.unique(pool_labels, return_counts=True)
    # a contiguous search (a strided view of labels: torch warns, and copies anyway)
    position = torch.searchsorted(values, labels.contiguous()).clamp(max=values.numel() - 1)
    relevant = torch.where(values[position] == labels, counts[position], 0)
    return relevant - int(same_source)


def _neighbours(
    queries: torch.Tensor, pool: torch.Tensor, k: int, same_source: bool, chunk_size: int
) -> torch.Tensor:
    unit_queries = unit_rows(queries)
    if same_source:
        return _neighbours_of_each_other(unit_queries, k, chunk_size)
    unit_pool = unit_rows(pool)
    found = torch.empty(queries.shape[0], k, dtype=torch.long, device=queries.device)
    for start in range(0, queries.shape[0], chunk_size):
        stop = min(start + chunk_size, queries.shape[0])
        found[start:stop] = _top_k_by_index(unit_queries[start:stop] @ unit_pool.T, k)
    return found


def _neighbours_of_each_other(unit: torch.Tensor, k: int, tile: int) -> torch.Tensor:
    """Same-source neighbours from the upper triangle of ``unit @ unit.T`` only: each
    ``[tile, tile]`` block serves its rows and, transposed, its columns (half the products)."""
    count = unit.shape[0]
    best_scores = torch.full((count, k), -torch.inf, dtype=unit.dtype, device=unit.device)
    best_columns = torch.full((count, k), count, dtype=torch.long, device=unit.device)
    for row in range(0, count, tile):
        row_stop = min(row + tile, count)
        for column in range(row, count, tile):
            column_stop = min(column + tile, count)
            block = unit[row:row_stop] @ unit[column:column_stop].T
            if column == row:
                block.fill_diagonal_(-torch.inf)  # a query is never its own neighbour
            _merge(best_scores, best_columns, slice(row, row_stop), block, column)
            if column != row:
                transposed = block.T.contiguous()  # topk on a strided view is ~3x slower
                _merge(best_scores, best_columns, slice(column, column_stop), transposed, row)
    return best_columns


def _merge(
    best_scores: torch.Tensor,
    best_columns: torch.Tensor,
    rows: slice,
    block: torch.Tensor,
    offset: int,
) -> None:
    """Fold a block's exact top k (columns ``offset + j``) into the rows' running top k.

    Every row receives its column blocks in increasing column order (the blocks left of the
    diagonal through transposes, at earlier outer steps), so the running top k holds lower
    columns than the block: a stable sort by score alone keeps ties in column order.
    """
    k = best_scores.shape[1]
    local = _top_k_by_index(block, min(k, block.shape[1]))
    scores = torch.cat([best_scores[rows], block.gather(1, local)], dim=1)
    columns = torch.cat([best_columns[rows], local + offset], dim=1)
    ranked = scores.sort(dim=1, descending=True, stable=True)
    best_scores[rows] = ranked.values[:, :k]
    best_columns[rows] = columns.gather(1, ranked.indices[:, :k])


def _top_k_by_index(scores: torch.Tensor, k: int) -> torch.Tensor:
    """The ``k`` highest scores per row, ties broken by the lower column index (exactly)."""
    extra = min(k + 1, scores.shape[1])
    values, columns = torch.topk(scores, extra, dim=1)
    # Order the chosen columns by (score desc, index asc): sort by index, then stable by score.
    by_index, order = columns.sort(dim=1)
    values = values.gather(1, order)
    ranked = values.sort(dim=1, descending=True, stable=True).indices
    chosen = by_index.gather(1, ranked)
    # Where the k-th and (k+1)-th scores tie, topk's choice among the tied is arbitrary:
    # those rows are redone with a full stable sort (rare outside duplicated embeddings).
    sorted_values = values.gather(1, ranked)
    tied = sorted_values[:, k - 1] == sorted_values[:, -1] if extra > k else None
    result = chosen[:, :k].clone()
    if tied is not None and bool(tied.any()):
        rows = tied.nonzero().squeeze(1)
        result[rows] = scores[rows].sort(dim=1, descending=True, stable=True).indices[:, :k]
    return result


def _metrics_from_neighbours(
    hits: torch.Tensor, relevant_count: torch.Tensor, ks: tuple[int, ...]
) -> dict[str, float]:
    """The metrics from ``hits [Q, depth]`` (neighbour shares the label) and R per query."""
    kept = relevant_count > 0
    hits, count = hits[kept].to(torch.float64), relevant_count[kept].to(torch.float64)
    ranks = torch.arange(1, hits.shape[1] + 1, dtype=torch.float64, device=hits.device)
    within_r = ranks[None, :] <= count[:, None]
    precision = hits.cumsum(dim=1) / ranks
    metrics = {
        "precision_at_1": hits[:, 0].mean().item(),
        "r_precision": ((hits * within_r).sum(dim=1) / count).mean().item(),
        "map_at_r": ((precision * hits * within_r).sum(dim=1) / count).mean().item(),
    }
    for k in ks:
        metrics[f"recall@{k}"] = hits[:, :k].amax(dim=1).mean().item()
    metrics["queries"] = float(kept.sum().item())
    return metrics
