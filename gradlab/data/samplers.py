"""Class-balanced mini-batches: ``classes_per_batch`` classes, ``per_class`` items each."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gradlab.errors import GradlabError
from gradlab.validation import check_positive_int, check_tensor


class ClassBalancedBatches:
    """Iterate over batches of indices with the same number of items from each chosen class.

    Each batch picks ``classes_per_batch`` distinct classes at random and ``per_class`` items of
    each (without replacement inside a batch when the class is large enough, with replacement
    otherwise). An epoch has ``ceil(N / batch_size)`` batches.

    Args:
        labels: ``[N]`` integer labels.
        per_class: items per class in a batch.
        classes_per_batch: classes in a batch; ``None`` takes every class.
        seed: seed of the batch order.

    Example:
        >>> labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
        >>> batches = ClassBalancedBatches(labels, per_class=2, classes_per_batch=2, seed=0)
        >>> [torch.bincount(labels[b]).max().item() for b in batches]
        [2, 2, 2]
    """

    def __init__(
        self,
        labels: torch.Tensor,
        per_class: int,
        classes_per_batch: int | None = None,
        seed: int = 0,
    ) -> None:
        check_tensor("labels", labels, ndims=(1,), kind="integer")
        self.per_class = check_positive_int("per_class", per_class)
        self.classes = torch.unique(labels)
        self.members = [torch.nonzero(labels == c).flatten() for c in self.classes]
        count = len(self.classes) if classes_per_batch is None else classes_per_batch
        check_positive_int("classes_per_batch", count)
        if count > len(self.classes):
            raise GradlabError(
                f"classes_per_batch must be at most the {len(self.classes)} classes present; "
                f"got {count}"
            )
        self.classes_per_batch = count
        self.batch_size = count * self.per_class
        self.num_batches = -(-len(labels) // self.batch_size)
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.num_batches

    def take(self, count: int) -> list[torch.Tensor]:
        """Exactly ``count`` batches, running through as many epochs as that needs."""
        check_positive_int("count", count)
        batches: list[torch.Tensor] = []
        while len(batches) < count:
            batches.extend(self)
        return batches[:count]

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.num_batches):
            chosen = torch.randperm(len(self.classes), generator=self.generator)
            parts = []
            for c in chosen[: self.classes_per_batch].tolist():
                members = self.members[c]
                if len(members) >= self.per_class:
                    pick = torch.randperm(len(members), generator=self.generator)[: self.per_class]
                else:
                    pick = torch.randint(len(members), (self.per_class,), generator=self.generator)
                parts.append(members[pick])
            yield torch.cat(parts)


class FixedCountBatches:
    """Batches of ``batch_size`` items, exactly ``per_class`` from each of ``batch_size /
    per_class`` distinct classes (Brown et al., 2020, Section 3: ``|P| = 4``, ``m / 4`` classes).

    Every class present needs at least ``per_class`` items; a batch takes ``per_class`` distinct
    items of each chosen class. Classes and items are drawn afresh for every batch, vectorised
    (no Python loop over classes), so batches of thousands are cheap. An epoch has
    ``ceil(N / batch_size)`` batches.

    Args:
        labels: ``[N]`` integer labels.
        batch_size: ``m``; a multiple of ``per_class``, at most ``per_class`` times the
            number of classes.
        per_class: items per class in a batch (default 4).
        seed: seed of the draws.

    Raises:
        GradlabError: ``batch_size`` not a positive multiple of ``per_class``, more classes
            asked for than present, or a class with fewer than ``per_class`` items.

    Example:
        >>> labels = torch.arange(10).repeat_interleave(5)
        >>> batch = next(iter(FixedCountBatches(labels, batch_size=12, per_class=4, seed=0)))
        >>> sorted(torch.bincount(labels[batch])[labels[batch].unique()].tolist())
        [4, 4, 4]
    """

    def __init__(
        self, labels: torch.Tensor, batch_size: int, per_class: int = 4, seed: int = 0
    ) -> None:
        check_tensor("labels", labels, ndims=(1,), kind="integer")
        self.per_class = check_positive_int("per_class", per_class)
        self.batch_size = check_positive_int("batch_size", batch_size)
        if batch_size % per_class:
            raise GradlabError(
                f"batch_size must be a multiple of per_class={per_class}; got {batch_size}"
            )
        classes, inverse, counts = torch.unique(labels, return_inverse=True, return_counts=True)
        self.classes_per_batch = batch_size // per_class
        if self.classes_per_batch > len(classes):
            raise GradlabError(
                f"batch_size must be at most per_class x classes = {per_class * len(classes)} "
                f"({len(classes)} classes present); got {batch_size}"
            )
        if int(counts.min()) < per_class:
            raise GradlabError(
                f"labels must hold at least per_class={per_class} items of every class; "
                f"class {int(classes[counts.argmin()])} has {int(counts.min())}"
            )
        order = torch.argsort(inverse, stable=True)
        starts = torch.cumsum(counts, 0) - counts
        width = int(counts.max())
        slots = torch.arange(width)
        self.valid = slots.unsqueeze(0) < counts.unsqueeze(1)
        position = (starts.unsqueeze(1) + slots).clamp(max=len(labels) - 1)
        self.members = order[position]
        self.num_classes = len(classes)
        self.num_batches = -(-len(labels) // batch_size)
        self.generator = torch.Generator().manual_seed(seed)

    def __len__(self) -> int:
        return self.num_batches

    def take(self, count: int) -> list[torch.Tensor]:
        """Exactly ``count`` batches."""
        check_positive_int("count", count)
        return [self._draw() for _ in range(count)]

    def _draw(self) -> torch.Tensor:
        chosen = torch.randperm(self.num_classes, generator=self.generator)
        chosen = chosen[: self.classes_per_batch]
        keys = torch.rand(len(chosen), self.members.shape[1], generator=self.generator)
        keys = keys.masked_fill(~self.valid[chosen], 2.0)
        picks = keys.argsort(dim=1)[:, : self.per_class]
        return self.members[chosen].gather(1, picks).flatten()

    def __iter__(self) -> Iterator[torch.Tensor]:
        for _ in range(self.num_batches):
            yield self._draw()
