"""What a logged step hands to the quantities: the batch, detached, computed on once."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import torch

from gradlab.functional.layouts import RetrievalLayout, cross_modal_layout, in_batch_layout


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
