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

Input checks (PML's own are bare ``ValueError``/``RuntimeError`` or none): ``query_emb`` and
``ref_emb`` must be 2-D float tensors on one device with one dtype and one embedding size, and
finite (NaN embeddings would silently give a NaN matrix). The finiteness of both is read in one
host transfer; ``validate=False`` (or :func:`gradlab.validation.skip_value_checks`) skips it.
``score_recorder`` must be ``None`` or a callable, checked when it is set.
"""

from __future__ import annotations

import torch

from gradlab.errors import GradlabError
from gradlab.extras import missing_extra
from gradlab.validation import (
    ScoreRecorderSlot,
    check_same_device,
    check_tensor,
    finite_flag,
    non_finite_message,
    value_checks_enabled,
)

try:  # pytorch-metric-learning is optional: the pml extra
    from pytorch_metric_learning.distances import CosineSimilarity, DotProductSimilarity
except ImportError as error:  # pragma: no cover - exercised only without the package
    raise missing_extra("pytorch_metric_learning", "pml", "gradlab.interop.pml") from error


class _Recording(ScoreRecorderSlot):
    """Mixin: hand the returned matrix to ``score_recorder`` (``(direction, matrix, None)``)."""

    _recorder_signature = " (direction, matrix, mask)"

    def __init__(self, *args, validate: bool = True, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._set_validate(validate)

    def _check_inputs(self, query_emb: object, ref_emb: object) -> None:
        check_tensor("query_emb", query_emb, ndims=(2,), kind="float")
        if ref_emb is not None:
            check_tensor("ref_emb", ref_emb, ndims=(2,), kind="float")
            check_same_device(query_emb=query_emb, ref_emb=ref_emb)
            if ref_emb.shape[1] != query_emb.shape[1]:
                raise GradlabError(
                    "query_emb and ref_emb must share their embedding size; got "
                    f"{query_emb.shape[1]} and {ref_emb.shape[1]}"
                )
            if ref_emb.dtype != query_emb.dtype:
                raise GradlabError(
                    f"query_emb and ref_emb must share one dtype; got {query_emb.dtype} and "
                    f"{ref_emb.dtype}"
                )
        if not (getattr(self, "validate", True) and value_checks_enabled()):
            return
        tensors = {"query_emb": query_emb}
        if ref_emb is not None and ref_emb is not query_emb:
            tensors["ref_emb"] = ref_emb
        flags = torch.stack([finite_flag(tensor) for tensor in tensors.values()]).tolist()
        for name, finite in zip(tensors, flags, strict=True):  # one transfer for both
            if not finite:
                raise GradlabError(non_finite_message(name, tensors[name]))

    def forward(self, query_emb: torch.Tensor, ref_emb: torch.Tensor | None = None):
        self._check_inputs(query_emb, ref_emb)
        matrix = super().forward(query_emb, ref_emb)
        if self.score_recorder is not None:
            in_batch = ref_emb is None or ref_emb is query_emb  # PML passes the batch twice
            self.score_recorder("in_batch" if in_batch else "i2t", matrix, None)
        return matrix


class RecordingCosineSimilarity(_Recording, CosineSimilarity):
    """PML's ``CosineSimilarity`` whose matrix a :class:`gradlab.Monitor` can read.

    Example:
        >>> import torch
        >>> from gradlab.interop.pml import RecordingCosineSimilarity
        >>> distance = RecordingCosineSimilarity()
        >>> seen = []
        >>> distance.score_recorder = lambda direction, matrix, _: seen.append(direction)
        >>> distance(torch.eye(3)).shape, seen
        (torch.Size([3, 3]), ['in_batch'])
    """

    def __init__(self, *args, validate: bool = True, **kwargs) -> None:
        if "normalize_embeddings" in kwargs:  # PML passes it itself: a repeated-keyword TypeError
            raise GradlabError(
                "RecordingCosineSimilarity always normalizes the embeddings (as PML's "
                "CosineSimilarity does); got normalize_embeddings="
                f"{kwargs['normalize_embeddings']!r}: for raw dot products use "
                "RecordingDotProductSimilarity(normalize_embeddings=False)"
            )
        super().__init__(*args, validate=validate, **kwargs)


class RecordingDotProductSimilarity(_Recording, DotProductSimilarity):
    """PML's ``DotProductSimilarity`` whose matrix a :class:`gradlab.Monitor` can read.

    Example:
        >>> import torch
        >>> from gradlab.interop.pml import RecordingDotProductSimilarity
        >>> RecordingDotProductSimilarity(normalize_embeddings=False)(torch.eye(2) * 2)
        tensor([[4., 0.],
                [0., 4.]])
    """


def recording_distance(loss_fn: object) -> object | None:
    """The recording distance of a pytorch-metric-learning loss (its ``distance`` when that is a
    :class:`RecordingCosineSimilarity` or :class:`RecordingDotProductSimilarity`), else None.

    Example:
        >>> from gradlab.interop.pml import RecordingCosineSimilarity, recording_distance
        >>> from pytorch_metric_learning import losses
        >>> loss_fn = losses.TripletMarginLoss(distance=RecordingCosineSimilarity())
        >>> recording_distance(loss_fn) is loss_fn.distance, recording_distance(losses.NTXentLoss())
        (True, None)
    """
    distance = getattr(loss_fn, "distance", None)
    return distance if hasattr(distance, "score_recorder") else None


def smooth_ap_temperature(loss_fn: object) -> float | None:
    """The temperature of pytorch-metric-learning's ``SmoothAPLoss`` (its query is its own
    candidate, as ``SmoothAPLoss(include_query=True)``), else None.

    Example:
        >>> from gradlab.interop.pml import smooth_ap_temperature
        >>> from pytorch_metric_learning import losses
        >>> smooth_ap_temperature(losses.SmoothAPLoss(temperature=0.05))
        0.05
    """
    from pytorch_metric_learning.losses import SmoothAPLoss

    return float(loss_fn.temperature) if isinstance(loss_fn, SmoothAPLoss) else None
