"""The P-against-batch-size study on your own images and backbone (Brown et al., 2020, Smooth-AP
supplementary, Sec. 3 and Fig. S7a).

The protocol of the paper's Fig. S7a: for each mini-batch size m, one network starts from the
same weights (seeded, or a local checkpoint) and is trained with Smooth-AP (tau = 0.01) for
``epochs`` epochs of the 4-per-class sampler (m / 4 classes per batch); P (Eq. 1: the share of
difference-matrix entries whose sigmoid slope exceeds eps = 0.005) is averaged over the batches
of the last epoch. The result has the schema of the bundled study
(:func:`gradlab.experiments.p_vs_batch_size.measure`) with the one setting ``trained_at_m``, so
:func:`gradlab.experiments.p_vs_batch_size.summarize` and the report's figure read it as they
read the miniature's.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from gradlab.backbones import build_backbone
from gradlab.data import FixedCountBatches
from gradlab.data.image_folder import ImageFolderSplit, image_folder
from gradlab.errors import GradlabError
from gradlab.experiments.p_vs_batch_size import (
    KEYS,
    PER_CLASS,
    close_pair_proportions,
    p_decomposition,
)
from gradlab.losses import SmoothAPLoss
from gradlab.validation import check_positive_finite, check_positive_int

DEFAULT_BATCH_SIZES = (16, 32, 64, 128, 256)


def check_batch_sizes(batch_sizes: Sequence[int], classes: int | None = None) -> list[int]:
    """Batch sizes for the 4-per-class sampler: positive multiples of 4, at most 4 x classes.

    Example:
        >>> check_batch_sizes([16, 64])
        [16, 64]
    """
    sizes = list(batch_sizes)
    if not sizes:
        raise GradlabError("batch sizes must name at least one size; got none")
    for size in sizes:
        check_positive_int("batch size", size)
        if size % PER_CLASS:
            raise GradlabError(
                f"batch size must be a multiple of {PER_CLASS} ({PER_CLASS} images per class, "
                f"as Smooth-AP samples); got {size}"
            )
        if classes is not None and size > PER_CLASS * classes:
            raise GradlabError(
                f"batch size must be at most {PER_CLASS} x {classes} classes = "
                f"{PER_CLASS * classes} for this split; got {size}"
            )
    return sizes


def p_vs_batch_size_on_images(
    data: str | Path,
    *,
    split: str = "train",
    layout: str = "auto",
    list_file: str | Path | None = None,
    backbone: str = "gradlab.backbones:tiny_resnet",
    weights: str | Path | None = None,
    embedding_dim: int = 512,
    image_size: int = 224,
    batch_sizes: Sequence[int] = DEFAULT_BATCH_SIZES,
    epochs: int = 1,
    seeds: Sequence[int] = (0,),
    device: str = "cpu",
    lr: float = 1e-5,
    amp: bool = False,
    tau: float = 0.01,
    eps: float = 0.005,
) -> dict:
    """P against m on an image folder, one network per (seed, m), the paper's protocol.

    Args:
        data: the image folder (:func:`gradlab.data.image_folder`).
        split, layout, list_file: which images train (see :func:`gradlab.data.image_folder`).
        backbone, weights, embedding_dim: the network (:func:`gradlab.backbones.build_backbone`).
        image_size: side of the training crops.
        batch_sizes: the m values, multiples of 4.
        epochs: epochs per m; P is averaged over the last one (the paper: one epoch).
        seeds: each seed fixes the initial weights and the batches.
        device: ``"cpu"`` or ``"cuda"``.
        lr: Adam's learning rate (the paper fine-tunes at 1e-5).
        amp: mixed precision (bfloat16 on CPU, float16 with loss scaling on CUDA).
        tau, eps: the paper's temperature and slope threshold.

    Returns:
        ``{"batch_sizes", "data", "model", "per_class", "seeds", "tau", "eps", "settings":
        {"trained_at_m": {key: [[value per m] per seed] for key in KEYS, "steps", "epochs"}}}``.

    Raises:
        GradlabError: a missing or malformed folder, an unknown backbone, weights of another
            architecture or a batch size the sampler cannot make; all before any training.

    Example:
        >>> try:
        ...     p_vs_batch_size_on_images("/no/such/folder")
        ... except GradlabError as error:
        ...     print(error)
        root must be an existing folder of images; '/no/such/folder' is not
    """
    check_positive_int("epochs", epochs)
    check_positive_finite("lr", lr)
    seeds = [int(seed) for seed in seeds]
    if not seeds:
        raise GradlabError("seeds must name at least one seed; got none")
    dataset = image_folder(data, split, layout=layout, list_file=list_file, image_size=image_size)
    sizes = check_batch_sizes(batch_sizes, len(dataset.class_names))
    build_backbone(backbone, embedding_dim=embedding_dim, weights=weights, image_size=image_size)
    per_seed: dict[str, list[list[float]]] = {key: [] for key in KEYS}
    steps: list[int] = []
    for seed in seeds:
        rows, steps = [], []
        for size in sizes:
            row, count = _train_at(dataset, size, seed, backbone, weights, embedding_dim,
                                   image_size, epochs, device, lr, amp, tau, eps)  # fmt: skip
            rows.append(row)
            steps.append(count)
            print(f"p-vs-batch-size: seed {seed}, m = {size}: {count} steps, "
                  f"P = {row[0]:.4f}", file=sys.stderr, flush=True)  # fmt: skip
        for index, key in enumerate(KEYS):
            per_seed[key].append([row[index] for row in rows])
    return {
        "batch_sizes": sizes,
        "data": f"{Path(data).name}, {split} split ({len(dataset)} images, "
        f"{len(dataset.class_names)} classes)",
        "model": f"{backbone} with a linear head to {embedding_dim} dimensions"
        + (f", from {Path(weights).name}" if weights is not None else ", random initial weights"),
        "per_class": PER_CLASS,
        "seeds": seeds,
        "tau": tau,
        "eps": eps,
        "settings": {"trained_at_m": {**per_seed, "steps": steps, "epochs": epochs}},
    }


def _train_at(
    dataset: ImageFolderSplit, size, seed, backbone, weights, embedding_dim, image_size, epochs,
    device, lr, amp, tau, eps,
) -> tuple[list[float], int]:  # fmt: skip
    torch.manual_seed(seed)
    model = build_backbone(
        backbone, embedding_dim=embedding_dim, weights=weights, image_size=image_size
    ).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    loss_fn = SmoothAPLoss(tau)
    sampler = FixedCountBatches(dataset.labels, size, PER_CLASS, seed=seed * 7919 + size)
    batches = sampler.take(epochs * len(sampler))
    last_epoch = (epochs - 1) * len(sampler)
    autocast_type = torch.bfloat16 if torch.device(device).type == "cpu" else torch.float16
    scaler = torch.amp.GradScaler(enabled=amp and torch.device(device).type == "cuda")
    logged = []
    model.train()
    for step, batch in enumerate(batches):
        images = torch.stack([dataset[int(i)][0] for i in batch]).to(device)
        labels = dataset.labels[batch].to(device)
        with torch.autocast(torch.device(device).type, dtype=autocast_type, enabled=amp):
            embeddings = model(images)
        embeddings = embeddings.float()
        loss = loss_fn(embeddings, labels)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        if step >= last_epoch:
            detached = embeddings.detach()
            logged.append(torch.cat([close_pair_proportions(detached, labels, tau, eps),
                                     p_decomposition(detached, labels, tau, eps)]))  # fmt: skip
    return torch.stack(logged).mean(dim=0).cpu().tolist(), len(batches)
