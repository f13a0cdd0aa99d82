"""A small synthetic problem: a tiny MLP and a paired batch with two items per class.

The command line's ``gradlab check-equivalence`` and the tests use it; it needs no data.
"""

from __future__ import annotations

import torch
from torch import nn

from gradlab.equivalence.problem import PairedBatch
from gradlab.validation import check_floating_dtype, check_positive_int, check_seed

__all__ = ["synthetic_problem"]


def synthetic_problem(
    batch_size: int = 16,
    input_size: int = 8,
    embedding_size: int = 4,
    memory_size: int = 0,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> tuple[nn.Module, PairedBatch]:
    """A tiny MLP (``input_size -> 16 -> embedding_size``, tanh) and a paired batch.

    The batch has ``batch_size`` items in ``batch_size // 2`` classes of two, in a seeded random
    order; an item's candidate-side input is its query-side input plus noise. With
    ``memory_size`` the batch carries a memory of that many constant embeddings of the same
    classes, the next enqueue starting at slot 1.

    Args:
        batch_size: ``B``, an even positive integer.
        input_size: width of the inputs.
        embedding_size: ``d``.
        memory_size: ``M``, 0 for none.
        seed: seeds the model and the data, a whole number from 0 to ``2**32 - 1``.
        dtype: floating dtype of the model, the inputs and the memory.

    Returns:
        ``(model, batch)``.

    Raises:
        GradlabError: a size that is not a positive integer (``batch_size`` odd),
            ``memory_size`` negative, ``seed`` not a whole number from 0 to ``2**32 - 1``,
            ``dtype`` not a floating torch dtype; before any work.

    Example:
        >>> model, batch = synthetic_problem(batch_size=6, memory_size=8)
        >>> batch.labels.bincount().tolist(), batch.memory.shape
        ([2, 2, 2], torch.Size([8, 4]))
    """
    from gradlab.errors import GradlabError

    check_positive_int("batch_size", batch_size)
    if batch_size % 2:
        raise GradlabError(f"batch_size must be even (classes of two); got {batch_size}")
    check_positive_int("input_size", input_size)
    check_positive_int("embedding_size", embedding_size)
    if isinstance(memory_size, bool) or not isinstance(memory_size, int) or memory_size < 0:
        raise GradlabError(f"memory_size must be a non-negative integer; got {memory_size!r}")
    check_seed("seed", seed)
    check_floating_dtype("dtype", dtype)
    generator = torch.Generator().manual_seed(seed)
    # The CPU generator only: torch.manual_seed would also seed (or queue a seed for) every
    # CUDA generator, which fork_rng(devices=[]) does not restore.
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        model = nn.Sequential(nn.Linear(input_size, 16), nn.Tanh(),
                              nn.Linear(16, embedding_size)).to(dtype)  # fmt: skip
    classes = batch_size // 2
    labels = torch.arange(batch_size)[torch.randperm(batch_size, generator=generator)] % classes
    # drawn in float64 whatever the dtype, then rounded to it: every dtype compares the same
    # problem (torch's draws of float32 and float64 differ for one seed)
    wide = torch.float64
    centres = torch.randn(classes, input_size, generator=generator, dtype=wide)
    queries = centres[labels] + 0.5 * torch.randn(batch_size, input_size, generator=generator,
                                                  dtype=wide)  # fmt: skip
    candidates = queries + 0.3 * torch.randn(batch_size, input_size, generator=generator,
                                             dtype=wide)  # fmt: skip
    memory = memory_labels = None
    if memory_size:
        memory_labels = torch.randint(classes, (memory_size,), generator=generator)
        with torch.no_grad():
            noise = torch.randn(memory_size, input_size, generator=generator, dtype=wide)
            memory = model((centres[memory_labels] + 0.5 * noise).to(dtype))
    return model, PairedBatch(queries.to(dtype), candidates.to(dtype), labels, memory,
                              memory_labels, 1 if memory_size > 1 else 0)  # fmt: skip
