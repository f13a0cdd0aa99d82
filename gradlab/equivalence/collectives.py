"""All-gathers for the distributed steps: with gradient (a correct ``GatherLayer``) or without.

Without a process group both return their input: one process is the whole batch.
"""

from __future__ import annotations

import torch

__all__ = ["gather_rows", "process_rank", "world_size"]


def world_size() -> int:
    """The number of processes of the default group; 1 without one.

    Example:
        >>> world_size()
        1
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def process_rank() -> int:
    """This process's rank in the default group; 0 without one.

    Example:
        >>> process_rank()
        0
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank()
    return 0


class _GatherWithGradient(torch.autograd.Function):
    """``all_gather`` whose backward sums every process's gradient of the gathered tensor
    (``all_reduce``) and keeps this process's rows: each process then holds the gradient of
    the sum of all processes' losses with respect to its own rows (the fixed ``GatherLayer``
    of SimCLR-style code; without the ``all_reduce`` only this process's loss would count)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        ctx.rows = tensor.shape[0]
        parts = [torch.empty_like(tensor) for _ in range(world_size())]
        torch.distributed.all_gather(parts, tensor.contiguous())
        return torch.cat(parts)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        torch.distributed.all_reduce(grad)
        start = process_rank() * ctx.rows
        return grad[start : start + ctx.rows]


def gather_rows(tensor: torch.Tensor, gradient: bool = True) -> torch.Tensor:
    """Every process's rows of ``tensor``, concatenated in rank order (equal row counts).

    Args:
        tensor: this process's ``[n, ...]`` rows.
        gradient: ``True``: the gathered tensor carries gradient back to every process's rows
            (its backward all-reduces); ``False``: the other processes' rows are constants and
            only this process's own rows, put back in their place, carry gradient.

    Returns:
        ``[world_size * n, ...]``; ``tensor`` itself without a process group.

    Example:
        >>> gather_rows(torch.ones(2, 3)).shape
        torch.Size([2, 3])
    """
    world = world_size()
    if world == 1:
        return tensor
    if gradient and tensor.requires_grad:
        return _GatherWithGradient.apply(tensor)
    parts = [torch.empty_like(tensor) for _ in range(world)]
    torch.distributed.all_gather(parts, tensor.detach().contiguous())
    parts[process_rank()] = tensor
    return torch.cat(parts)
