"""The Monitor under ``torch.distributed``: the global batch, and which rank writes.

With ``distributed="auto"`` and an initialized process group the quantities are computed on
the batch of every rank (embeddings, labels and their gradients all-gathered, the loss
averaged), and only rank 0 writes. Score matrices captured for the anatomy stay the writing
rank's own.
"""

from __future__ import annotations

import torch

from gradlab.monitor.batch import BatchView

__all__ = ["all_gather_rows", "gather_batch", "is_distributed", "is_rank_zero"]


def is_distributed() -> bool:
    """Whether a ``torch.distributed`` process group is initialized.

    Example:
        >>> is_distributed()
        False
    """
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def is_rank_zero() -> bool:
    """Whether this process writes: rank 0, or the only process.

    Example:
        >>> is_rank_zero()
        True
    """
    return not is_distributed() or torch.distributed.get_rank() == 0


def all_gather_rows(tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` over ranks along dim 0 (the ranks' batches may differ in size).

    Args:
        tensor: this rank's rows ``[n_rank, ...]``.

    Returns:
        ``[sum of n_rank, ...]``, rank 0's rows first.

    Example:
        >>> import os, tempfile
        >>> init = f"file://{tempfile.mkstemp()[1]}"
        >>> torch.distributed.init_process_group("gloo", init_method=init, rank=0, world_size=1)
        >>> all_gather_rows(torch.arange(3)).tolist()
        [0, 1, 2]
        >>> torch.distributed.destroy_process_group()
    """
    world = torch.distributed.get_world_size()
    size = torch.tensor([tensor.shape[0]], device=tensor.device)
    sizes = [torch.zeros_like(size) for _ in range(world)]
    torch.distributed.all_gather(sizes, size)
    largest = int(max(s.item() for s in sizes))
    padded = torch.zeros((largest, *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device)
    padded[: tensor.shape[0]] = tensor
    parts = [torch.zeros_like(padded) for _ in range(world)]
    torch.distributed.all_gather(parts, padded)
    return torch.cat([part[: int(s.item())] for part, s in zip(parts, sizes, strict=True)])


def gather_batch(batch: BatchView) -> BatchView:
    """The global batch of every rank (detached tensors all-gathered, the loss averaged); the
    batch itself when no process group is initialized.

    Example:
        >>> view = BatchView(embeddings=torch.eye(2), labels=torch.arange(2))
        >>> gather_batch(view) is view
        True
    """
    if not is_distributed():
        return batch
    gathered = BatchView(
        embeddings=all_gather_rows(batch.embeddings),
        labels=None if batch.labels is None else all_gather_rows(batch.labels),
        candidates=batch.candidates,
        positives=batch.positives,
        tau=batch.tau,
        loss_kind=batch.loss_kind,
        loss_tau=batch.loss_tau,
        degenerate_batches=batch.degenerate_batches,
    )
    if batch.embedding_grad is not None:
        gathered.embedding_grad = all_gather_rows(batch.embedding_grad)
    gathered.score_captures = batch.score_captures  # anatomy: this rank's score matrices
    if batch.loss is not None:
        loss = batch.loss.clone().to(torch.float64)
        torch.distributed.all_reduce(loss)
        gathered.loss = loss / torch.distributed.get_world_size()
    return gathered
