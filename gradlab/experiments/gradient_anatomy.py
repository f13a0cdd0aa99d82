"""Which pairs receive gradient under SmoothAP, VSE++ max-violation and NT-Xent.

Bleeker & de Rijke (2022, appendix B) train image-caption dual encoders where an image query
has 5 positive captions and a caption query 1 positive image, and ask which pairs each loss
sends gradient to, per direction. This study answers that on ONE batch of ONE trained model, so
that the three losses are compared at identical scores:

1. a small dual encoder is trained on the digits with NT-Xent (both directions): images through
   an MLP, each of the 50 templated captions (5 per digit) through its own learned embedding,
   both on the unit sphere; a batch holds 10 images of distinct digits and their 50 captions;
2. at two checkpoints (60 and 400 steps) and on one held-out batch (images not trained on), the
   score matrix ``S`` [10, 50] is fixed and, for each loss and each direction separately,
   ``dL/dS`` is taken by autograd in float64 (the loss's ``direction="i2t"`` or ``"t2i"``
   alone, so a direction's anatomy is its own term's);
3. :func:`gradlab.functional.gradient_anatomy` reads which pairs receive gradient.

Every random draw has a fixed seed and the study runs on one CPU thread: a rerun reproduces the
returned dict exactly.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from gradlab.data import load_digits_split
from gradlab.errors import GradlabError
from gradlab.functional import (
    gradient_anatomy,
    max_violation_triplet_loss,
    mean_ap_loss,
    nt_xent_loss,
    smooth_ap,
)
from gradlab.functional.gradient_anatomy import (
    DEFAULT_ABSOLUTE_THRESHOLD,
    DEFAULT_RELATIVE_THRESHOLD,
)
from gradlab.models import EmbeddingMLP
from gradlab.validation import check_seed

CAPTIONS_PER_IMAGE = 5
DIGITS = 10
SETTINGS = {"smooth_ap_tau": 0.01, "margin": 0.2, "temperature": 0.1}
"""The losses' hyperparameters: Smooth-AP's tau, VSE++'s margin, the report's NT-Xent
temperature."""


def _smooth_ap_direction(scores, positives, tau, direction):
    if direction == "t2i":
        scores, positives = scores.T, positives.T
    return mean_ap_loss(smooth_ap(scores, positives, tau), scores)


LOSSES = {
    "SmoothAP": lambda s, p, d: _smooth_ap_direction(s, p, SETTINGS["smooth_ap_tau"], d),
    "VSE++ max-violation": lambda s, p, d: max_violation_triplet_loss(
        s, p, SETTINGS["margin"], direction=d
    ),
    "NT-Xent": lambda s, p, d: nt_xent_loss(s, p, SETTINGS["temperature"], direction=d),
}
"""Loss name -> ``(scores, positives, direction) -> loss`` of that direction alone."""


class CaptionTable(nn.Module):
    """One learned embedding per caption (digit x template), on the unit sphere."""

    def __init__(self, dims: int) -> None:
        super().__init__()
        self.table = nn.Embedding(DIGITS * CAPTIONS_PER_IMAGE, dims)

    def forward(self, caption_ids: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.table(caption_ids), dim=1)


def _batch(images, labels, generator):
    """10 images of distinct digits, their 50 captions, and the [10, 50] positive mask."""
    chosen = []
    for digit in range(DIGITS):
        members = torch.nonzero(labels == digit).flatten()
        chosen.append(members[torch.randint(len(members), (1,), generator=generator)])
    chosen = torch.cat(chosen)
    caption_ids = torch.arange(DIGITS * CAPTIONS_PER_IMAGE)  # digit-major: 5 per digit
    positives = (labels[chosen].unsqueeze(1) == caption_ids.unsqueeze(0) // CAPTIONS_PER_IMAGE)
    return images[chosen], caption_ids, positives


def train_dual_encoder(checkpoints: tuple[int, ...], seed: int = 0, dims: int = 32):
    """Train the image MLP and caption table with NT-Xent; yield at each checkpoint.

    Yields ``(step, image_encoder, captions, held_out, losses)``: the models after ``step``
    optimizer steps, the held-out ``(images, labels)`` and the training losses so far.
    """
    digits = load_digits_split(seen_classes=tuple(range(DIGITS)))
    images, labels = digits.train_images, digits.train_labels
    held_out = torch.arange(len(labels)) % 5 == 0
    torch.manual_seed(seed)
    image_encoder, captions = EmbeddingMLP(64, dims), CaptionTable(dims)
    optimizer = torch.optim.Adam([*image_encoder.parameters(), *captions.parameters()], lr=3e-3)
    generator = torch.Generator().manual_seed(seed + 1)
    losses: list[float] = []
    for step in range(1, max(checkpoints) + 1):
        batch_images, caption_ids, positives = _batch(
            images[~held_out], labels[~held_out], generator
        )
        scores = F.normalize(image_encoder(batch_images), dim=1) @ captions(caption_ids).T
        loss = nt_xent_loss(scores, positives, SETTINGS["temperature"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step in checkpoints:
            yield step, image_encoder, captions, (images[held_out], labels[held_out]), losses


def _direction_record(grad, scores, positives) -> dict:
    anatomy = gradient_anatomy(grad, scores, positives)
    magnitude = grad.abs().masked_fill(positives, 0.0)
    order = scores.masked_fill(positives, -torch.inf).argsort(dim=1, descending=True, stable=True)
    negatives = int((~positives[0]).sum())
    by_rank = magnitude.gather(1, order)[:, :negatives]
    total = by_rank.sum(dim=1, keepdim=True)
    share = torch.where(total > 0, by_rank / total.clamp(min=1e-300), torch.nan)
    return {
        "queries": int(scores.shape[0]),
        "negatives_per_query": negatives,
        "positives_per_query": int(positives[0].sum()),
        "active_negatives": anatomy.active_negatives.tolist(),
        "active_positives": anatomy.active_positives.tolist(),
        "queries_without_gradient": int(anatomy.without_gradient.sum()),
        "largest_abs_grad": float(grad.abs().max()),
        "hardest_1pct_share": anatomy.hardest_1pct_share.tolist(),
        "hardest_10pct_share": anatomy.hardest_10pct_share.tolist(),
        "active_negative_rank_max": anatomy.active_negative_rank_max.tolist(),
        # Mean over the queries whose negatives receive gradient of the share at each rank.
        "mass_share_by_rank": share.nanmean(dim=0).tolist(),
    }


def measure(quick: bool = False, seed: int = 0) -> dict:
    """Train, fix one held-out batch, and record each loss's anatomy per direction.

    The anatomy is taken at two checkpoints of the same training run (partly trained and
    trained), on the same held-out batch.

    Returns:
        A JSON-ready dict: ``settings``, ``batch`` and ``checkpoints``, a list with, per
        checkpoint, ``steps``, the training loss at the start and at the checkpoint, and
        ``losses[name][direction]``: the per-query anatomy of that loss's direction (see
        :func:`gradlab.functional.gradient_anatomy`) and the share of the negatives' gradient
        mass at each negative rank (1 = hardest).
    """
    if not isinstance(quick, bool):
        raise GradlabError(f"quick must be True or False; got {quick!r}")
    check_seed("seed", seed)  # past 2**32 - 1: torch's overflow, mid-run
    checkpoints = (10, 30) if quick else (60, 400)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        results = {
            "settings": {
                **SETTINGS,
                "seed": seed,
                "training_loss": "NT-Xent (both directions)",
                "absolute_threshold": DEFAULT_ABSOLUTE_THRESHOLD,
                "relative_threshold": DEFAULT_RELATIVE_THRESHOLD,
            },
            "batch": "10 held-out images of distinct digits x their 50 captions",
            "checkpoints": [],
        }
        batch = None
        for step, image_encoder, captions, (images, labels), history in train_dual_encoder(
            checkpoints, seed
        ):
            if batch is None:
                batch = _batch(images, labels, torch.Generator().manual_seed(seed + 2))
            batch_images, caption_ids, positives = batch
            with torch.no_grad():
                scores = F.normalize(image_encoder(batch_images), dim=1) @ captions(caption_ids).T
            results["checkpoints"].append({
                "steps": step, "first_loss": history[0], "last_loss": history[-1],
                "losses": _anatomies(scores.to(torch.float64), positives),
            })  # fmt: skip
        return results
    finally:
        torch.set_num_threads(before)


def _anatomies(scores: torch.Tensor, positives: torch.Tensor) -> dict:
    """``{loss: {direction: record}}`` at fixed scores; each direction's own ``dL/dS``."""
    out = {}
    for name, loss_fn in LOSSES.items():
        out[name] = {}
        for direction in ("i2t", "t2i"):
            leaf = scores.clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(loss_fn(leaf, positives, direction), leaf)
            if direction == "i2t":
                out[name][direction] = _direction_record(grad, scores, positives)
            else:
                out[name][direction] = _direction_record(grad.T, scores.T, positives.T)
    return out
