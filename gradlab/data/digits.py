"""scikit-learn's bundled digits (1797 8x8 images, 10 classes): no network needed."""

from __future__ import annotations

from typing import NamedTuple

import torch

from gradlab.errors import GradlabError
from gradlab.extras import require


class DigitsSplit(NamedTuple):
    """Images as ``[N, 64]`` float32 in ``[0, 1]`` and int64 labels, split by class.

    ``train_*`` hold the seen classes (default 0-4), ``test_*`` the unseen ones (5-9): the
    zero-shot retrieval protocol of deep metric learning.
    """

    train_images: torch.Tensor
    train_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor


def load_digits_split(seen_classes: tuple[int, ...] = (0, 1, 2, 3, 4)) -> DigitsSplit:
    """Load the digits and split them into seen (training) and unseen (test) classes.

    Example:
        >>> split = load_digits_split()
        >>> split.train_images.shape[1], sorted(set(split.test_labels.tolist()))
        (64, [5, 6, 7, 8, 9])
    """
    load_digits = require("sklearn.datasets", "studies", "gradlab.data").load_digits

    if not seen_classes or any(c not in range(10) for c in seen_classes):
        raise GradlabError(f"seen_classes must be a non-empty subset of 0..9; got {seen_classes}")
    digits = load_digits()
    images = torch.as_tensor(digits.data, dtype=torch.float32) / 16.0
    labels = torch.as_tensor(digits.target, dtype=torch.int64)
    seen = torch.isin(labels, torch.tensor(seen_classes))
    return DigitsSplit(images[seen], labels[seen], images[~seen], labels[~seen])
