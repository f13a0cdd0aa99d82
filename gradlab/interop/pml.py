"""Recording distances for pytorch-metric-learning: the score matrix a PML loss differentiates.

Pass one as a PML loss's ``distance=`` and :meth:`gradlab.Monitor.watch` reads ``dL/dS`` of the
similarity matrix the loss computes (a hook that only reads), so PML losses get a gradient
anatomy (:class:`gradlab.monitor.anatomy.Anatomy`)::

    from pytorch_metric_learning import losses
    from gradlab.interop.pml import RecordingCosineSimilarity

    loss_fn = monitor.watch(losses.MultiSimilarityLoss(distance=RecordingCosineSimilarity()))

The distances are PML's ``CosineSimilarity`` and ``DotProductSimilarity`` (similarities: a larger
value ranks higher) with one addition: when a Monitor has set ``score_recorder``, each call
hands it the ``[B, B]`` (or ``[B, R]``) matrix it returns. Without a recorder they are PML's
distances, value for value and gradient for gradient.

What the recorded ``dL/dS`` covers: every PML loss that reads similarities only through
``distance(embeddings)`` (``MultiSimilarityLoss``, ``TripletMarginLoss``, ``ContrastiveLoss``,
``NTXentLoss``, ...) gets its complete ``dL/dS``. ``SmoothAPLoss`` computes the similarities of
the positives a second time through ``distance.compute_mat``, outside the recorded matrix: the
recorded gradient is complete for every negative (so the negative anatomy is exact) but misses
the positives' numerator terms (its ``active_positives`` is not meaningful).
"""

from __future__ import annotations

import torch

from gradlab.errors import GradlabError

try:  # pytorch-metric-learning is optional: gradlab[pml] or the dev extra
    from pytorch_metric_learning.distances import CosineSimilarity, DotProductSimilarity
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise GradlabError(
        "gradlab.interop.pml needs pytorch-metric-learning; install it with "
        "`pip install pytorch-metric-learning` (or gradlab[dev])"
    ) from error


class _Recording:
    """Mixin: hand the returned matrix to ``score_recorder`` (``(direction, matrix, None)``)."""

    score_recorder = None

    def forward(self, query_emb: torch.Tensor, ref_emb: torch.Tensor | None = None):
        matrix = super().forward(query_emb, ref_emb)
        if self.score_recorder is not None:
            in_batch = ref_emb is None or ref_emb is query_emb  # PML passes the batch twice
            self.score_recorder("in_batch" if in_batch else "i2t", matrix, None)
        return matrix


class RecordingCosineSimilarity(_Recording, CosineSimilarity):
    """PML's ``CosineSimilarity`` whose matrix a :class:`gradlab.Monitor` can read.

    Example:
        >>> distance = RecordingCosineSimilarity()
        >>> seen = []
        >>> distance.score_recorder = lambda direction, matrix, _: seen.append(direction)
        >>> distance(torch.eye(3)).shape, seen
        (torch.Size([3, 3]), ['in_batch'])
    """


class RecordingDotProductSimilarity(_Recording, DotProductSimilarity):
    """PML's ``DotProductSimilarity`` whose matrix a :class:`gradlab.Monitor` can read.

    Example:
        >>> RecordingDotProductSimilarity(normalize_embeddings=False)(torch.eye(2) * 2)
        tensor([[4., 0.],
                [0., 4.]])
    """
