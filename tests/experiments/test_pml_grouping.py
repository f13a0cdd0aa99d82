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


def test_the_differences_are_the_gaps_and_equal_means_within_the_stated_agreement(monkeypatch):
    import gradlab.experiments.pml_grouping as study

    result = grouping_check(((2, 4), (4, 4)), tau=0.05, dim=6, seed=1)
    assert result["agreement"] == study.AGREEMENT
    for row in result["rows"]:
        assert row["difference_blocks"] == abs(row["pml_loss"] - row["smooth_ap_loss_blocks"])
        assert row["difference_classes"] == abs(row["pml_loss"] - row["smooth_ap_loss_classes"])
    # AGREEMENT is the largest difference still counted as equal: a gap exactly at it is equal
    non_square = result["rows"][0]
    for key in ("classes", "blocks"):
        monkeypatch.setattr(study, "AGREEMENT", non_square[f"difference_{key}"])
        again = grouping_check(((2, 4), (4, 4)), tau=0.05, dim=6, seed=1)["rows"][0]
        assert again[f"equals_{key}"], key
        monkeypatch.setattr(study, "AGREEMENT", non_square[f"difference_{key}"] * (1 - 1e-9))
        assert not grouping_check(((2, 4), (4, 4)), tau=0.05, dim=6, seed=1)["rows"][0][
            f"equals_{key}"]


def test_the_report_s_defaults_are_smooth_ap_s_tau_and_seed_0():
    """The report calls grouping_check() as is: tau 0.01 (Brown et al. 2020's setting), 32
    dimensions, seed 0, the square batch first and Smooth-AP's 28 classes of 4 among them."""
    result = grouping_check()
    assert result["tau"] == 0.01
    assert (result["rows"][0]["classes"], result["rows"][0]["per_class"]) == (4, 4)
    assert (28, 4) in [(r["classes"], r["per_class"]) for r in result["rows"]]
    generator = torch.Generator().manual_seed(0)
    row = result["rows"][0]
    embeddings = torch.randn(16, 32, generator=generator, dtype=torch.float64)
    labels = [c for c in range(4) for _ in range(4)]
    assert row["smooth_ap_loss_classes"] == pytest.approx(_loop_loss(embeddings, labels, 0.01),
                                                          abs=1e-12)  # fmt: skip
