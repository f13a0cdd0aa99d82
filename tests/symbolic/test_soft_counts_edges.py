"""``soft_counts_from_distances`` at the edges of its input: an empty batch, one item, and a
batch whose labels are all different (the counts of a loop written here)."""

from __future__ import annotations

import torch

from gradlab.symbolic.minibatch_claims import BITS, soft_counts_from_distances


def test_an_empty_batch_has_empty_counts():
    counts = soft_counts_from_distances(torch.zeros(0, 0, dtype=torch.float64),
                                        torch.zeros(0, dtype=torch.long))  # fmt: skip
    assert counts.shape == (0, BITS + 1, 2) and counts.dtype == torch.float64


def test_a_lone_item_counts_nothing():
    counts = soft_counts_from_distances(torch.zeros(1, 1, dtype=torch.float64), torch.tensor([7]))
    assert counts.shape == (1, BITS + 1, 2) and counts.abs().sum().item() == 0.0


def test_distinct_labels_count_only_in_the_other_class_column():
    distances = torch.tensor([[0.0, 1.25, 3.0], [1.25, 0.0, 0.5], [3.0, 0.5, 0.0]],
                             dtype=torch.float64)  # fmt: skip
    labels = torch.tensor([0, 1, 2])
    expected = torch.zeros(3, BITS + 1, 2, dtype=torch.float64)
    for i in range(3):
        for j in range(3):
            if i != j:
                for d in range(BITS + 1):
                    expected[i, d, int(labels[i] == labels[j])] += max(
                        0.0, 1.0 - abs(distances[i, j].item() - d)
                    )
    assert torch.equal(soft_counts_from_distances(distances, labels), expected)
