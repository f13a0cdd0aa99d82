"""What a logged step hands to the quantities: the batch, detached, computed on once."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import torch

from gradlab.functional.layouts import RetrievalLayout, cross_modal_layout, in_batch_layout


@dataclass
class ScoreCapture:
    """A score matrix a watched loss differentiated, and its gradient ``dL/dS`` once backward ran.

    ``direction`` says how to read it: ``"in_batch"`` (rows are queries, ``candidates`` masks the
    query itself), ``"i2t"`` (rows are queries: the loss's image->caption term alone), ``"t2i"``
    (columns are queries: the caption->image term alone) or ``"both"`` (the gradient of the whole
    loss on a cross-modal matrix: rows are read as i2t queries and columns as t2i queries).
    ``smooth_ap_tau`` set and ``grad`` unset: the loss is gradlab's SmoothAP with that tau, and
    ``dL/dS`` is computed from the detached scores when the step is logged (exact).
    """

    direction: str
    scores: torch.Tensor
    positives: torch.Tensor
    candidates: torch.Tensor | None = None
    grad: torch.Tensor | None = None
    smooth_ap_tau: float | None = None


@dataclass
class BatchView:
    """The embeddings, targets and loss of one step, with shared derived values cached.

    Either ``labels`` (in-batch retrieval) or ``candidates`` and ``positives`` (cross-modal) are
    set. ``embedding_grad`` is the gradient backpropagated into ``embeddings`` (if captured).
    """

    embeddings: torch.Tensor
    labels: torch.Tensor | None = None
    candidates: torch.Tensor | None = None
    positives: torch.Tensor | None = None
    loss: torch.Tensor | None = None
    embedding_grad: torch.Tensor | None = None
    tau: float = 0.01
    loss_kind: str | None = None
    loss_tau: float | None = None
    degenerate_batches: int | None = None  # batches without positives so far (watched loss)
    score_captures: list[ScoreCapture] = field(default_factory=list)  # anatomy (dL/dS)

    @cached_property
    def layout(self) -> RetrievalLayout:
        """Cosine scores and masks (the query not its own candidate in-batch)."""
        if self.labels is not None:
            return in_batch_layout(self.embeddings, self.labels)
        scores = cross_modal_layout(self.embeddings, self.candidates, self.positives)
        return RetrievalLayout(scores, self.positives, None)

    @cached_property
    def self_scores(self) -> torch.Tensor:
        """The seed's per-query ``m x m`` setting: in-batch scores with the query as candidate."""
        return in_batch_layout(self.embeddings, self.labels, include_query=True).scores
