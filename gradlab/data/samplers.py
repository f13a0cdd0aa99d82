"""Class-balanced mini-batches: ``classes_per_batch`` classes, ``per_class`` items each."""

from __future__ import annotations

from collections.abc import Iterator

import torch

from gradlab._validation import check_positive_int, check_tensor
from gradlab.errors import GradlabError


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
