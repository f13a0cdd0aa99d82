"""False-negative suspects: in-batch negatives that may be positives in disguise.

In a big batch of paired data (a caption and its image, a question and its answer) the other
rows are the negatives, and duplicates or near-duplicates among them are pushed away as if they
were unrelated. :func:`false_negative_suspects` flags a negative when

* it shares the query's label (``labels``: a class, a source document) or content hash
  (``hashes``: :func:`content_hashes` of the raw text or bytes: an exact duplicate), or
* it scores too close to the query's positive, by the sign-safe rule
  ``s_neg >= s_pos - |s_pos| * margin`` (``s_pos`` the query's lowest positive score). The
  rule written as ``s_pos * (1 - margin)`` moves the threshold *up* when ``s_pos < 0``; the
  absolute value keeps it below the positive for either sign (the fix of sentence-transformers'
  GIST loss filter).

:func:`suspect_summary` says how much of the step they take: their number, their share of the
negatives' gradient mass ``sum |dL/dS|``, and their share of each query's ``k`` hardest
negatives.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.validation import (
    check_in_range,
    check_positive_int,
    check_real_device,
    check_same_device,
    check_shape,
    check_tensor,
)

__all__ = ["SuspectSummary", "content_hashes", "false_negative_suspects", "suspect_summary"]


def content_hashes(items: Iterable[str | bytes]) -> torch.Tensor:
    """``[N]`` int64 hashes of texts or byte strings: equal items, equal hashes.

    The first 8 bytes of BLAKE2b (stable across processes and machines, unlike ``hash()``).

    Args:
        items: strings (hashed as UTF-8) or bytes.

    Returns:
        An int64 CPU tensor, one hash per item (move it to the scores' device).

    Raises:
        GradlabError: an item that is neither ``str`` nor ``bytes``.

    Example:
        >>> from gradlab.functional import content_hashes
        >>> hashes = content_hashes(["a cat", "a dog", "a cat"])
        >>> bool(hashes[0] == hashes[2]), bool(hashes[0] == hashes[1])
        (True, False)
    """
    if isinstance(items, (str, bytes)) or not isinstance(items, Iterable):
        got = (f"a single {type(items).__name__}, whose characters would be hashed one by one "
               "(pass [text] for one item)" if isinstance(items, (str, bytes))
               else type(items).__name__)  # fmt: skip
        raise GradlabError(f"items must be an iterable of str or bytes, one per item; got {got}")
    values = []
    for index, item in enumerate(items):
        if isinstance(item, str):
            item = item.encode("utf-8")
        if not isinstance(item, bytes):
            raise GradlabError(
                f"items must be str or bytes; got {type(item).__name__} at position {index}"
            )
        digest = hashlib.blake2b(item, digest_size=8).digest()
        values.append(int.from_bytes(digest, "little", signed=True))
    return torch.tensor(values, dtype=torch.int64)


def _collisions(name: str, values: torch.Tensor | None, scores: torch.Tensor
                ) -> torch.Tensor | None:  # fmt: skip
    """``[Q, C]`` equal entries of ``values`` (``[B]`` for a square or in-batch matrix, or a
    pair ``(rows [Q], columns [C])``), on one device (any: moved to the scores' after), and a
    real one unless the scores are meta too."""
    if values is None:
        return None
    if isinstance(values, tuple) and len(values) != 2:
        raise GradlabError(
            f"{name} must be a tensor [B] or a pair (queries' [Q], candidates' [C]); got a "
            f"tuple of {len(values)}"
        )
    rows, columns = values if isinstance(values, tuple) else (values, values)
    kind = "integer" if name == "labels" else "any"  # labels are integers (the glossary)
    for part, size, what in ((rows, scores.shape[0], "one per query"),
                             (columns, scores.shape[1], "one per candidate")):  # fmt: skip
        check_tensor(name, part, ndims=(1,), kind=kind)
        check_shape(name, part, (size,), what)
    check_same_device(**{f"{name} of the queries": rows, f"{name} of the candidates": columns})
    if not scores.is_meta:
        check_real_device(**{name: rows})
    return rows.unsqueeze(1) == columns.unsqueeze(0)


def false_negative_suspects(
    scores: torch.Tensor,
    positives: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    labels: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
    hashes: torch.Tensor | tuple[torch.Tensor, torch.Tensor] | None = None,
    margin: float | None = None,
) -> torch.Tensor:
    """``[Q, C]`` bool: the negatives suspected to be false negatives: those that share the
    query's label or content hash, or score at least ``s_pos - |s_pos| * margin`` (``s_pos``
    the query's lowest positive score; the sign-safe form of the rule).

    Args:
        scores: ``[Q, C]`` scores of the loss's layout (rows are queries).
        positives: ``[Q, C]`` bool, the loss's positives (e.g. the diagonal of a paired batch).
        candidate_mask: ``[Q, C]`` bool or None (every entry a candidate).
        labels: ``[B]`` labels of a square batch (rows and columns alike) or a pair
            ``(query_labels [Q], candidate_labels [C])``; a negative with the query's label is a
            suspect.
        hashes: the same for content hashes (:func:`content_hashes`).
        margin: the score rule's relative margin, >= 0 (None: no score rule). 0 flags the
            negatives that score at least the query's lowest positive.

    Returns:
        A bool tensor, never True on a positive or a non-candidate. The score rule flags no
        negative of a row with a NaN score among its positives, nor a NaN negative (a
        comparison with NaN is False); no value is read (no host synchronisation), so check
        ``torch.isfinite(scores).all()`` first where a NaN is possible (the Monitor does).

    Raises:
        GradlabError: no rule given, a bad tensor or shape, or a negative ``margin``.

    Example:
        >>> import torch
        >>> from gradlab.functional import false_negative_suspects
        >>> scores = torch.tensor([[-0.5, -0.52, -0.7], [0.1, 0.9, 0.85]])
        >>> eye = torch.tensor([[True, False, False], [False, True, False]])
        >>> false_negative_suspects(scores, eye, margin=0.1).tolist()  # -0.52 >= -0.5 - 0.05
        [[False, True, False], [False, False, True]]
    """
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, scores.shape, "one flag per score")
    check_same_device(scores=scores, positives=positives)
    if labels is None and hashes is None and margin is None:
        raise GradlabError("give at least one of labels, hashes or margin (the rules that flag "
                           "a suspect); got none")  # fmt: skip
    negatives = ~positives
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, scores.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
        negatives = negatives & candidate_mask
        positives = positives & candidate_mask
    flagged = torch.zeros_like(negatives)
    for name, values in (("labels", labels), ("hashes", hashes)):
        same = _collisions(name, values, scores)
        if same is not None:
            flagged = flagged | same.to(flagged.device)
    if margin is not None:
        margin = check_in_range("margin", margin, 0.0, 1e6)
        if scores.shape[1] > 0:  # without candidates there is nothing to flag
            lowest = torch.where(positives, scores, math.inf).amin(dim=1, keepdim=True)
            threshold = lowest - lowest.abs() * margin  # inf - inf = NaN: no positive, no flag
            flagged = flagged | (scores >= threshold)
    return flagged & negatives


class SuspectSummary(NamedTuple):
    """:func:`suspect_summary`'s 0-d float64 values.

    Attributes:
        count: suspects in the batch.
        per_query: suspects per query (mean over the queries).
        gradient_share: their share of the negatives' gradient mass ``sum |dL/dS|`` (NaN
            without ``score_grad`` or when the negatives get none).
        top_k_share: their share of each query's ``k`` hardest negatives (mean over the queries
            with a negative; a query with fewer than ``k`` negatives counts all it has).
            Negatives tied at the ``k``-th place share its remaining places: the expected share
            over every order of the tie (McSherry & Najork, 2008), as
            :func:`~gradlab.functional.recall_at_k` counts ties, so the value does not depend
            on which of them a sort puts first.

    Example:
        >>> import torch
        >>> from gradlab.functional import suspect_summary
        >>> eye = torch.eye(3, dtype=torch.bool)
        >>> summary = suspect_summary(~eye, torch.zeros(3, 3), eye, k=1)  # every negative
        >>> float(summary.count), float(summary.top_k_share)
        (6.0, 1.0)
    """

    count: torch.Tensor
    per_query: torch.Tensor
    gradient_share: torch.Tensor
    top_k_share: torch.Tensor


def suspect_summary(
    suspects: torch.Tensor,
    scores: torch.Tensor,
    positives: torch.Tensor,
    *,
    candidate_mask: torch.Tensor | None = None,
    score_grad: torch.Tensor | None = None,
    k: int = 10,
) -> SuspectSummary:
    """How much of the step the suspects take: count, gradient share, share of the hardest.

    Args:
        suspects: ``[Q, C]`` bool (:func:`false_negative_suspects`).
        scores: ``[Q, C]`` scores (the hardest negatives are the highest).
        positives: ``[Q, C]`` bool.
        candidate_mask: ``[Q, C]`` bool or None.
        score_grad: ``[Q, C]`` ``dL/dS`` of the loss, or None.
        k: how many hardest negatives per query, >= 1.

    Returns:
        :class:`SuspectSummary`. No value is refused: a NaN score among a query's negatives
        leaves its hardest negatives undefined, so ``top_k_share`` is NaN; a NaN entry of
        ``score_grad`` on a negative makes ``gradient_share`` NaN (the Monitor logs NaN for
        both on a step with non-finite scores or ``dL/dS``, and warns).

    Raises:
        GradlabError: a bad tensor, shape or ``k``.

    Example:
        >>> import torch
        >>> from gradlab.functional import suspect_summary
        >>> scores = torch.tensor([[0.9, 0.8, 0.1, 0.0]])
        >>> positives = torch.tensor([[True, False, False, False]])
        >>> suspects = torch.tensor([[False, True, False, False]])
        >>> grad = torch.tensor([[-1.0, 0.6, 0.2, 0.2]])
        >>> summary = suspect_summary(suspects, scores, positives, score_grad=grad, k=2)
        >>> [round(float(value), 4) for value in summary]
        [1.0, 1.0, 0.6, 0.5]
    """
    check_tensor("suspects", suspects, ndims=(2,), kind="bool")
    check_tensor("scores", scores, ndims=(2,), kind="float")
    check_shape("scores", scores, suspects.shape, "one score per flag")
    check_tensor("positives", positives, ndims=(2,), kind="bool")
    check_shape("positives", positives, suspects.shape, "one flag per score")
    check_same_device(suspects=suspects, scores=scores, positives=positives)
    if candidate_mask is not None:
        check_tensor("candidate_mask", candidate_mask, ndims=(2,), kind="bool")
        check_shape("candidate_mask", candidate_mask, suspects.shape, "one flag per score")
        check_same_device(scores=scores, candidate_mask=candidate_mask)
    if score_grad is not None:
        check_tensor("score_grad", score_grad, ndims=(2,), kind="float")
        check_shape("score_grad", score_grad, suspects.shape, "dL/dS of the scores")
        check_same_device(scores=scores, score_grad=score_grad)
    k = check_positive_int("k", k)
    negatives = ~positives if candidate_mask is None else candidate_mask & ~positives
    suspects = suspects & negatives
    count = suspects.sum().to(torch.float64)
    per_query = count / max(suspects.shape[0], 1)
    if score_grad is None:
        gradient_share = torch.full((), math.nan, dtype=torch.float64, device=scores.device)
    else:
        mass = score_grad.detach().to(torch.float64).abs()
        total = torch.where(negatives, mass, 0.0).sum()
        gradient_share = torch.where(suspects, mass, 0.0).sum() / total  # 0 / 0: NaN
    top_k_share = _top_k_share(suspects, scores.detach().to(torch.float64), negatives, k)
    return SuspectSummary(count, per_query, gradient_share, top_k_share)


def _top_k_share(
    suspects: torch.Tensor, scores: torch.Tensor, negatives: torch.Tensor, k: int
) -> torch.Tensor:
    """Mean over the queries with a negative of the suspects' expected share of the ``m =
    min(k, |N|)`` hardest negatives: those above the ``m``-th negative score count whole, the
    ``n`` negatives tied with it share its ``m - |above|`` remaining places (``n+`` suspects
    among them fill ``(m - |above|) n+ / n`` of them, by linearity over the orders of the tie).
    """
    available = torch.minimum(negatives.sum(dim=1), torch.tensor(k, device=scores.device))
    has = available > 0
    if scores.shape[1] == 0:  # no candidate: no query has a negative
        return torch.full((), math.nan, dtype=torch.float64, device=scores.device)
    ranked = torch.where(negatives, scores, -math.inf).sort(dim=1, descending=True).values
    kth = ranked.gather(1, (available - 1).clamp(min=0).unsqueeze(1))
    above = negatives & (scores > kth)
    tied = negatives & (scores == kth)
    places = (available - above.sum(dim=1)).to(torch.float64)
    in_tie = (suspects & tied).sum(dim=1).to(torch.float64) / tied.sum(dim=1).clamp(min=1)
    hits = (suspects & above).sum(dim=1).to(torch.float64) + places * in_tie
    shares = torch.where(has, hits / available.clamp(min=1), 0.0)
    # a NaN score among a query's negatives leaves its hardest ones undefined: their mean NaN
    unranked = (negatives & scores.isnan()).any()
    return torch.where(unranked, math.nan, shares.sum() / has.sum())  # no negative: NaN
