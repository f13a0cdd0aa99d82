"""A small synthetic problem: a tiny MLP and a paired batch, two items per class by default.

The command line's ``gradlab check-equivalence`` and the tests use it; it needs no data.
"""

from __future__ import annotations

from collections.abc import Sequence

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
    class_sizes: Sequence[int] | None = None,
) -> tuple[nn.Module, PairedBatch]:
    """A tiny MLP (``input_size -> 16 -> embedding_size``, tanh) and a paired batch.

    The batch has ``batch_size`` items in ``batch_size // 2`` classes of two (or classes of
    ``class_sizes``), in a seeded random order; an item's candidate-side input is its
    query-side input plus noise. Classes of one size cannot tell apart losses that weigh a
    query by its number of positives otherwise (a mean over positive pairs, or over queries):
    compare on classes of several sizes too. With
    ``memory_size`` the batch carries a memory of that many constant embeddings of the same
    classes, the next enqueue starting at slot 1.

    Args:
        batch_size: ``B``, an even positive integer.
        input_size: width of the inputs.
        embedding_size: ``d``.
        memory_size: ``M``, 0 for none.
        seed: seeds the model and the data, a whole number from 0 to ``2**32 - 1``.
        dtype: floating dtype of the model, the inputs and the memory.
        class_sizes: the number of items of each class, positive whole numbers that add up to
            ``batch_size`` (then ``batch_size`` may be odd); None: classes of two.

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
        >>> synthetic_problem(9, class_sizes=[2, 3, 4])[1].labels.bincount().tolist()
        [2, 3, 4]
    """
    from gradlab.errors import GradlabError

    check_positive_int("batch_size", batch_size)
    if class_sizes is not None:
        if isinstance(class_sizes, (str, bytes)) or not isinstance(class_sizes, Sequence) or \
                not class_sizes or any(isinstance(size, bool) or not isinstance(size, int)
                                       or size < 1 for size in class_sizes):  # fmt: skip
            raise GradlabError(f"class_sizes must be a non-empty list of positive whole "
                               f"numbers or None; got {class_sizes!r}")  # fmt: skip
        if sum(class_sizes) != batch_size:
            raise GradlabError(
                f"class_sizes must add up to batch_size ({batch_size}); got "
                f"{list(class_sizes)!r}, which adds up to {sum(class_sizes)}"
            )
    elif batch_size % 2:
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
    if class_sizes is None:
        classes = batch_size // 2
        labels = torch.arange(batch_size)[torch.randperm(batch_size, generator=generator)] % classes
    else:  # class k for its size's items, in the same seeded order
        classes = len(class_sizes)
        ordered = torch.repeat_interleave(torch.arange(classes), torch.tensor(list(class_sizes)))
        labels = ordered[torch.randperm(batch_size, generator=generator)]
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
