"""SmoothAP on the digits with the Monitor attached, the report's training section.

An embedding MLP is trained on four fifths of the images of classes 0-4 with class-balanced
batches and evaluated (Recall@1/2/4/8 and mAP, each image querying all the others) before and
after training, on the unseen classes 5-9 and on the held-out images of classes 0-4. The
Monitor logs the full preset every other step; its figures come from ``gradlab plot``'s code.
"""

from __future__ import annotations

from pathlib import Path

import torch

from gradlab.data import load_digits_split
from gradlab.functional import in_batch_retrieval, retrieval_report
from gradlab.losses import SmoothAPLoss
from gradlab.models import EmbeddingMLP
from gradlab.monitor import Monitor
from gradlab.plotting.monitor import plot_run
from gradlab.training import embed, train_embedding


def evaluate(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> dict:
    scores, relevant = in_batch_retrieval(embed(model, images).cpu(), labels)
    return retrieval_report(scores, relevant)


SEED = 0
"""The seed of the study's one training run (its initial weights and batches)."""


def digits_training(out: Path, quick: bool = False, device: str = "cpu", tau: float = 0.01) -> dict:
    """Train, monitor, evaluate; write the run log and its figures under ``out``."""
    digits = load_digits_split()
    held_out = torch.arange(len(digits.train_labels)) % 5 == 0  # seen classes, unseen images
    train_images, train_labels = digits.train_images[~held_out], digits.train_labels[~held_out]
    seen_images, seen_labels = digits.train_images[held_out], digits.train_labels[held_out]
    torch.manual_seed(SEED)
    model = EmbeddingMLP().to(device)
    before = evaluate(model, digits.test_images, digits.test_labels)
    seen_before = evaluate(model, seen_images, seen_labels)
    run_dir = out / "runs" / "digits_smoothap"
    epochs = 4 if quick else 20
    # The report replaces its output folder, so a rerun replaces the previous run's log.
    with Monitor(
        run_dir, tau=tau, preset="full", every=2, config={"epochs": epochs}, overwrite=True
    ) as monitor:
        loss_fn = monitor.watch(SmoothAPLoss(tau))
        losses = train_embedding(
            model, train_images, train_labels, loss_fn,
            per_class=8, classes_per_batch=5, epochs=epochs, lr=1e-3,
            on_step=lambda *_: monitor.step(), progress="digits SmoothAP training",
        )  # fmt: skip
    after = evaluate(model, digits.test_images, digits.test_labels)
    seen_after = evaluate(model, seen_images, seen_labels)
    # No overview: the report shows each family's own figure, and the overview (one panel per
    # family, repeating them) took a third of this section's CPU time to draw.
    figures = plot_run(run_dir, out / "figures" / "training", overview=False)
    return {
        "seed": SEED,
        "epochs": epochs,
        "steps": len(losses),
        "final_loss": losses[-1],
        "unseen_classes_before": before,
        "unseen_classes_after": after,
        "seen_classes_held_out_before": seen_before,
        "seen_classes_held_out_after": seen_after,
        "figures": [str(p.relative_to(out)) for p in figures],
        "run_dir": str(run_dir.relative_to(out)),
    }
