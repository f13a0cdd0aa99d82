"""Digit strings: many classes with few images each, built from real handwriting offline.

An image of a 2- or 3-digit number is the concatenation of 8 x 8 digit images of scikit-learn's
digits, each digit drawn independently (so, almost always, from a different writer's sample),
shifted by a small random offset inside its cell and overlaid with Gaussian pixel noise. The class
is the number: ``10 ** num_digits`` classes (leading zeros allowed), like Stanford Online Products
(many classes, few images per class). Half of the numbers are for training, the other half,
unseen, for retrieval evaluation; the digit images are split too, so test strings are written by
hands the training strings never show.

The Smooth-AP sampler (Brown et al., 2020, Section 3: ``|P| = 4`` images per class,
``m / 4`` classes per batch) works at any batch size up to ``4 x`` the number of classes; see
:class:`gradlab.data.FixedCountBatches`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.extras import require
from gradlab.validation import check_positive_int

CELL = 10
"""Width and height of one digit's cell in pixels (an 8 x 8 digit plus a 2 pixel margin)."""


class DigitStrings(NamedTuple):
    """Images ``[N, 1, 10, 10 * num_digits]`` float32 and int64 labels (the numbers).

    ``train_*`` hold the training numbers, ``test_*`` the unseen ones; the two label sets are
    disjoint and together cover ``0 .. 10 ** num_digits - 1``.
    """

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


def digit_pools(generator: torch.Generator) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per digit value, two disjoint pools of ``8 x 8`` images in ``[0, 1]`` (train, test).

    scikit-learn's digits (offline), each value's images shuffled by ``generator`` and split
    in half: handwriting in the test pool is never seen in training. The digit strings and the
    digit scenes draw their glyphs from these pools.

    Args:
        generator: fixes the split.

    Returns:
        ``(train_pools, test_pools)``: ten tensors ``[n_v, 8, 8]`` each, indexed by digit value.

    Example:
        >>> train, test = digit_pools(torch.Generator().manual_seed(0))
        >>> len(train), tuple(train[3].shape[1:]), bool(train[3].max() <= 1)
        (10, (8, 8), True)
    """
    load_digits = require("sklearn.datasets", "studies", "gradlab.data").load_digits

    digits = load_digits()
    images = torch.as_tensor(digits.images, dtype=torch.float32) / 16.0
    labels = torch.as_tensor(digits.target, dtype=torch.int64)
    train_pools, test_pools = [], []
    for value in range(10):
        members = images[labels == value]
        order = torch.randperm(len(members), generator=generator)
        half = len(members) // 2
        train_pools.append(members[order[:half]])
        test_pools.append(members[order[half:]])
    return train_pools, test_pools


def _render(
    numbers: torch.Tensor,
    num_digits: int,
    pools: list[torch.Tensor],
    max_shift: int,
    noise: float,
    generator: torch.Generator,
) -> torch.Tensor:
    """Images of ``numbers`` (``[N]``): one random pool image per digit, shifted, plus noise."""
    count = len(numbers)
    cells = []
    for position in range(num_digits):
        values = numbers // 10 ** (num_digits - 1 - position) % 10
        picks = torch.zeros(count, 8, 8)
        for value in range(10):
            chosen = values == value
            pool = pools[value]
            draws = torch.randint(len(pool), (int(chosen.sum()),), generator=generator)
            picks[chosen] = pool[draws]
        margin = (CELL - 8) // 2
        cell = torch.nn.functional.pad(picks, (margin, margin, margin, margin))
        shifts = torch.randint(-max_shift, max_shift + 1, (count, 2), generator=generator)
        shifted = cell.clone()
        for dy in range(-max_shift, max_shift + 1):
            for dx in range(-max_shift, max_shift + 1):
                chosen = (shifts[:, 0] == dy) & (shifts[:, 1] == dx)
                shifted[chosen] = cell[chosen].roll((dy, dx), dims=(1, 2))
        cells.append(shifted)
    canvas = torch.cat(cells, dim=2).unsqueeze(1)
    canvas += noise * torch.randn(canvas.shape, generator=generator)
    return canvas.clamp_(0.0, 1.0)


def load_digit_strings(
    num_digits: int = 3,
    per_class: int = 8,
    seed: int = 0,
    max_shift: int = 1,
    noise: float = 0.1,
) -> DigitStrings:
    """Generate the digit-string data set: deterministic given its arguments, no network.

    Args:
        num_digits: 2 (100 classes) or 3 (1000 classes).
        per_class: images per number (at least 4, the seed's ``|P|``).
        seed: fixes the train/test split of the numbers, the digit images chosen, the shifts
            and the noise.
        max_shift: each digit moves by up to this many pixels in each direction (0 or 1).
        noise: standard deviation of the Gaussian pixel noise (pixels are then clipped to
            ``[0, 1]``).

    Returns:
        :class:`DigitStrings` (fresh tensors: the caller may modify them); the training half of
        the numbers is a random half of all numbers. Generated once per argument set and
        process, then copied.

    Raises:
        GradlabError: ``num_digits`` not 2 or 3, ``per_class`` below 4, ``max_shift`` not 0 or
            1, ``noise`` negative.

    Example:
        >>> data = load_digit_strings(num_digits=2, per_class=4, seed=0)
        >>> tuple(data.train_images.shape), len(set(data.train_labels.tolist()))
        ((200, 1, 10, 20), 50)
    """
    cached = _generate(num_digits, per_class, seed, max_shift, noise)
    return DigitStrings(*(tensor.clone() for tensor in cached))


def clear_generated() -> None:
    """Forget the data sets :func:`load_digit_strings` has generated in this process (it keeps
    the last six argument sets): the memory is freed and the next call generates afresh.

    Example:
        >>> clear_generated()
    """
    _generate.cache_clear()


@functools.lru_cache(maxsize=6)
def _generate(
    num_digits: int = 3,
    per_class: int = 8,
    seed: int = 0,
    max_shift: int = 1,
    noise: float = 0.1,
) -> DigitStrings:
    """The uncached generator behind :func:`load_digit_strings`."""
    if num_digits not in (2, 3):
        raise GradlabError(f"num_digits must be 2 or 3; got {num_digits!r}")
    if check_positive_int("per_class", per_class) < 4:
        raise GradlabError(f"per_class must be at least 4 (the seed's |P|); got {per_class}")
    if max_shift not in (0, 1):
        raise GradlabError(f"max_shift must be 0 or 1; got {max_shift!r}")
    if not isinstance(noise, (int, float)) or not 0.0 <= noise < float("inf"):
        raise GradlabError(f"noise must be a non-negative finite number; got {noise!r}")
    generator = torch.Generator().manual_seed(seed)
    train_pools, test_pools = digit_pools(generator)
    classes = 10**num_digits
    order = torch.randperm(classes, generator=generator)
    train_numbers = order[: classes // 2].sort().values
    test_numbers = order[classes // 2 :].sort().values
    train_labels = train_numbers.repeat_interleave(per_class)
    test_labels = test_numbers.repeat_interleave(per_class)
    train_images = _render(train_labels, num_digits, train_pools, max_shift, noise, generator)
    test_images = _render(test_labels, num_digits, test_pools, max_shift, noise, generator)
    return DigitStrings(train_images, train_labels, test_images, test_labels)
