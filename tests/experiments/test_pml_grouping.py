"""pytorch-metric-learning's SmoothAP grouping as the report measures it, against float64 loops."""

from __future__ import annotations

import pytest
import torch

from gradlab.experiments.pml_grouping import grouping_check
from tests.reference.smooth_ap_loops import in_batch_smooth_ap, loss_from_aps

pytest.importorskip("pytorch_metric_learning")


def _loop_loss(embeddings: torch.Tensor, labels: list[int], tau: float) -> float:
    return loss_from_aps(in_batch_smooth_ap(embeddings.tolist(), labels, tau, True))


def test_the_library_equals_smooth_ap_over_blocks_of_the_class_count_not_the_classes():
    result = grouping_check(((4, 4), (2, 4), (7, 2)), tau=0.05, dim=6, seed=3)
    generator = torch.Generator().manual_seed(3)  # the same embeddings, drawn again
    for row in result["rows"]:
        classes, per_class = row["classes"], row["per_class"]
        embeddings = torch.randn(row["batch"], 6, generator=generator, dtype=torch.float64)
        labels = [c for c in range(classes) for _ in range(per_class)]
        blocks = [i // classes for i in range(row["batch"])]
        assert row["smooth_ap_loss_classes"] == pytest.approx(_loop_loss(embeddings, labels, 0.05),
                                                              abs=1e-12)  # fmt: skip
        assert row["smooth_ap_loss_blocks"] == pytest.approx(_loop_loss(embeddings, blocks, 0.05),
                                                             abs=1e-12)  # fmt: skip
        assert row["equals_blocks"]  # the library computes in float32: equal to 1e-6
        assert row["pml_loss"] == pytest.approx(row["smooth_ap_loss_blocks"], abs=1e-6)
        square = classes == per_class
        assert row["equals_classes"] == square
        assert (row["difference_classes"] <= 1e-6) == square
    assert result["tau"] == 0.05 and result["pml_version"]
