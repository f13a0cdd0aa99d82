"""Which positives pytorch-metric-learning's ``SmoothAPLoss`` groups, measured.

pytorch-metric-learning's ``SmoothAPLoss`` (Musgrave et al. 2020's library; the loss of Brown et
al. 2020) reshapes a class-sorted batch as ``view(per_class, n_classes, d)`` with
``per_class = batch_size // n_classes``, so the items it treats as one query's positives are
consecutive blocks of ``n_classes`` items, not the classes. It then equals SmoothAP (with the
query as its own candidate, as the official code computes it) only when the number of classes
equals the class size. This study measures that on random float64 batches: the library's loss
against gradlab's SmoothAP over the true classes and over the blocks, for a square batch (as
many classes as items per class) and for batches that are not square, 28 classes of 4 (B = 112,
Smooth-AP's usual batch) among them.

The study needs pytorch-metric-learning (the ``pml`` extra); without it :func:`grouping_check`
returns ``None`` and the report says so.
"""

from __future__ import annotations

import warnings

import torch

from gradlab.losses import SmoothAPLoss

LAYOUTS = ((4, 4), (2, 4), (28, 4))
"""(classes, items per class) of the measured batches: square, then two that are not."""

AGREEMENT = 1e-6
"""Largest |difference| of the two losses (each in [0, 1]) counted as equal: the library
computes in float32 whatever the embeddings' dtype (its loss is float32-rounded, about 1e-8),
gradlab in float64."""


def grouping_check(
    layouts: tuple[tuple[int, int], ...] = LAYOUTS,
    tau: float = 0.01,
    dim: int = 32,
    seed: int = 0,
) -> dict | None:
    """pytorch-metric-learning's SmoothAP loss against SmoothAP over the classes and the blocks.

    Args:
        layouts: ``(classes, per_class)`` of each batch, sorted by class as the library assumes.
        tau: the sigmoid temperature of both losses.
        dim: the embeddings' dimension.
        seed: seed of the random float64 embeddings.

    Returns:
        ``None`` without pytorch-metric-learning, else a dict with the library's version, tau,
        :data:`AGREEMENT` and one row per layout: the three losses, the two differences, and
        whether the library's loss equals SmoothAP over the classes and over the blocks.

    Example:
        >>> result = grouping_check(((2, 4),), dim=8)
        >>> result is None or result["rows"][0]["equals_blocks"]
        True
    """
    try:
        import pytorch_metric_learning
        from pytorch_metric_learning import losses
    except ImportError:
        return None
    generator = torch.Generator().manual_seed(seed)
    library = losses.SmoothAPLoss(temperature=tau)
    ours = SmoothAPLoss(tau, include_query=True)
    rows = []
    for classes, per_class in layouts:
        batch = classes * per_class
        labels = torch.arange(classes).repeat_interleave(per_class)
        blocks = torch.arange(batch) // classes  # consecutive runs of n_classes items
        embeddings = torch.randn(batch, dim, generator=generator, dtype=torch.float64)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = library(embeddings, labels).item()
        true_classes = ours(embeddings, labels).item()
        block_groups = ours(embeddings, blocks).item()
        rows.append({
            "classes": classes,
            "per_class": per_class,
            "batch": batch,
            "pml_loss": theirs,
            "smooth_ap_loss_classes": true_classes,
            "smooth_ap_loss_blocks": block_groups,
            "difference_classes": abs(theirs - true_classes),
            "difference_blocks": abs(theirs - block_groups),
            "equals_classes": abs(theirs - true_classes) <= AGREEMENT,
            "equals_blocks": abs(theirs - block_groups) <= AGREEMENT,
        })  # fmt: skip
    return {
        "pml_version": pytorch_metric_learning.__version__,
        "tau": tau,
        "agreement": AGREEMENT,
        "rows": rows,
    }
