"""A minimal training loop for the bundled experiments (analyses, report, benchmarks)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from gradlab.data.samplers import ClassBalancedBatches
from gradlab.progress import progress as progress_reporter

StepCallback = Callable[[int, torch.Tensor, torch.Tensor, float], None]
"""Called after each optimizer step with (step, detached embeddings, labels, loss value)."""


def train_embedding(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    *,
    per_class: int,
    classes_per_batch: int | None = None,
    epochs: int = 10,
    lr: float = 1e-3,
    seed: int = 0,
    on_step: StepCallback | None = None,
    progress: str | None = None,
) -> list[float]:
    """Train ``model`` with Adam on class-balanced batches; return the loss of every step.

    Args:
        model: maps ``images[batch]`` to embeddings.
        images, labels: the training set.
        loss_fn: called as ``loss_fn(embeddings, labels)``.
        per_class, classes_per_batch: batch composition (see :class:`ClassBalancedBatches`).
        epochs, lr, seed: optimisation settings; ``seed`` fixes the batch order.
        on_step: optional callback after each step.
        progress: a description shows a progress bar; ``None`` hides it.
    """
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    batches = ClassBalancedBatches(labels, per_class, classes_per_batch, seed=seed)
    device = next(model.parameters()).device
    losses: list[float] = []
    bar = (
        progress_reporter(total=epochs * len(batches), desc=progress)
        if progress is not None
        else None
    )
    step = 0
    for _ in range(epochs):
        for batch in batches:
            x, y = images[batch].to(device), labels[batch].to(device)
            embeddings = model(x)
            loss = loss_fn(embeddings, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if on_step is not None:
                on_step(step, embeddings.detach(), y, losses[-1])
            step += 1
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    return losses


@torch.no_grad()
def embed(model: nn.Module, images: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Embeddings of ``images`` in evaluation mode, computed in chunks."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = [
        model(images[i : i + batch_size].to(device)) for i in range(0, len(images), batch_size)
    ]
    model.train(was_training)
    return torch.cat(parts)


def train_on_batches(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    batches: list[torch.Tensor],
    *,
    lr: float = 1e-3,
    on_step: StepCallback | None = None,
) -> torch.Tensor:
    """Adam over the given index batches; return the ``[steps]`` losses (one host sync, at the end).

    ``images`` and ``labels`` should already be on the model's device; ``batches`` are index
    tensors (e.g. from :class:`gradlab.data.FixedCountBatches`). ``on_step`` receives the loss
    as a 0-d tensor on the device instead of a float, so a callback that does not read it costs
    no host synchronisation.

    Example:
        >>> from gradlab.models import EmbeddingMLP
        >>> torch.manual_seed(0) and None
        >>> model = EmbeddingMLP(4, 2, hidden=8)
        >>> x, y = torch.randn(8, 4), torch.arange(4).repeat(2)
        >>> mse = lambda e, t: (e - t.unsqueeze(1).float()).pow(2).mean()
        >>> losses = train_on_batches(model, x, y, mse, [torch.arange(8)] * 50, lr=1e-2)
        >>> bool(losses[-1] < losses[0])
        True
    """
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    device = images.device
    losses = []
    for step, batch in enumerate(batches):
        batch = batch.to(device)
        embeddings = model(images[batch])
        loss = loss_fn(embeddings, labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if on_step is not None:
            on_step(step, embeddings.detach(), labels[batch], losses[-1])
    return torch.stack(losses).cpu() if losses else torch.zeros(0)
