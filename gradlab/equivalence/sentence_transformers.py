"""sentence-transformers' ``CachedMultipleNegativesRankingLoss`` as a step to check.

CachedMNRL (sentence-transformers; gradient caching after Gao et al., 2021) computes the
in-batch softmax loss of anchors against their positives, ``scale x cosine``, with each anchor's
own positive as its target, in mini-batches of ``mini_batch_size``. Its whole-batch reference is
NT-Xent with temperature ``1 / scale`` and the rows as queries on a batch whose items are all of
different classes (:meth:`CachedMNRL.reference`). Needs the ``sentence-transformers`` extra,
imported when the step runs.

The loss runs its mini-batches inside sentence-transformers, so the step records no embeddings
or scores: only ``dL/dtheta`` is compared.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from gradlab.equivalence.problem import GradientProbe, PairedBatch
from gradlab.equivalence.steps import FullBatch, Step
from gradlab.errors import GradlabError
from gradlab.extras import require
from gradlab.validation import check_positive_finite, check_positive_int

__all__ = ["CachedMNRL"]


class _Features(nn.Module):
    """A sentence-transformers module around an encoder: ``features["inputs"]`` in,
    ``features["sentence_embedding"]`` out."""

    def __init__(self, encoder: nn.Module) -> None:
        super().__init__()
        self.encoder = encoder

    def forward(self, features: dict) -> dict:
        features["sentence_embedding"] = self.encoder(features["inputs"])
        return features


@dataclass
class CachedMNRL(Step):
    """sentence-transformers' ``CachedMultipleNegativesRankingLoss`` on the batch.

    The model is wrapped in a ``SentenceTransformer`` whose one module feeds
    ``batch.query_inputs`` (the anchors) and ``batch.candidate_inputs`` (the positives) to it.

    sentence-transformers 5.7 to 6.1 replay the cached mini-batches through a float32 surrogate
    (``dot(reps.float(), grad.float())``): in a float64 check their ``dL/dtheta`` differs from
    the whole-batch loss's by about 1e-7 (measured with 6.0.1), and the verdict is NOT
    EQUIVALENT. 5.6 and earlier, and 6.2 on, keep the embeddings' dtype.

    Args:
        scale: the loss's ``scale`` (the inverse temperature), positive and finite.
        mini_batch_size: the loss's ``mini_batch_size``, a positive integer.

    Example:
        >>> step = CachedMNRL(scale=20.0, mini_batch_size=4)
        >>> step.name, step.reference().loss
        ('CachedMNRL(scale=20.0, mini_batch_size=4)', NTXentLoss(temperature=0.05, direction='i2t', reduction='mean'))
    """  # noqa: E501

    scale: float = 20.0
    mini_batch_size: int = 32

    def __post_init__(self) -> None:
        check_positive_finite("scale", self.scale)
        check_positive_int("mini_batch_size", self.mini_batch_size)

    def reference(self) -> FullBatch:
        """The whole-batch loss it computes: NT-Xent, temperature ``1 / scale``, rows as queries."""
        from gradlab.losses import NTXentLoss

        return FullBatch(NTXentLoss(temperature=1.0 / self.scale, direction="i2t"))

    def check(self, batch: PairedBatch, world: int) -> None:
        """sentence-transformers installed; one process; no memory (the loss scores the batch
        only); every item its own class (the loss's only positive is the pair's own)."""
        require("sentence_transformers", "sentence-transformers", "gradlab.equivalence.CachedMNRL")
        if world != 1:
            raise GradlabError(f"CachedMNRL runs in one process here; got world_size={world}")
        self._refuse_memory(batch, "CachedMNRL")
        if batch.labels.unique().numel() != batch.labels.numel():
            raise GradlabError(
                "CachedMNRL treats only an anchor's own positive as positive: the batch's labels "
                f"must all differ (e.g. torch.arange({batch.labels.numel()})); got "
                f"{batch.labels.unique().numel()} classes for {batch.labels.numel()} items"
            )

    def __call__(self, model: nn.Module, batch: PairedBatch, probe: GradientProbe) -> torch.Tensor:
        """The cached loss and its backward (which runs the second, chunked pass)."""
        sentence_transformers = require("sentence_transformers", "sentence-transformers",
                                        "gradlab.equivalence.CachedMNRL")  # fmt: skip
        losses = require("sentence_transformers.sentence_transformer.losses",
                         "sentence-transformers", "gradlab.equivalence.CachedMNRL")  # fmt: skip
        wrapped = sentence_transformers.SentenceTransformer(
            modules=[_Features(model)], device=str(batch.query_inputs.device)
        )
        loss_fn = losses.CachedMultipleNegativesRankingLoss(
            wrapped, scale=self.scale, mini_batch_size=self.mini_batch_size
        )
        features = [{"inputs": batch.query_inputs}, {"inputs": batch.candidate_inputs}]
        loss = loss_fn(features, torch.zeros(0))
        loss.backward()
        return loss.detach()
