"""The functional losses' call rules: both forms at once is refused naming what was passed,
meta tensors are refused by name in either form, and ``fastap_loss`` validates by default."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab import GradlabError
from gradlab.functional.losses import fastap_loss, smooth_ap_loss


def _message(call) -> str:
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


def test_labels_and_the_cross_modal_keywords_together_are_refused_naming_all_three():
    embeddings, candidates = torch.randn(4, 3), torch.randn(5, 3)
    positives = torch.eye(4, 5, dtype=torch.bool)
    message = _message(lambda: smooth_ap_loss(embeddings, torch.arange(4), candidates=candidates,
                                              positives=positives))  # fmt: skip
    assert message == (
        "smooth_ap_loss takes labels (in-batch) or candidates and positives (cross-modal), not "
        "both; got labels and candidates and positives"
    )


@pytest.mark.parametrize("meta", ["embeddings", "candidates", "positives"])
def test_a_meta_tensor_in_the_cross_modal_form_is_refused_by_name(meta):
    tensors = {"embeddings": torch.randn(4, 3), "candidates": torch.randn(5, 3),
               "positives": torch.eye(4, 5, dtype=torch.bool)}  # fmt: skip
    tensors[meta] = tensors[meta].to("meta")
    message = _message(lambda: smooth_ap_loss(tensors["embeddings"],
                                              candidates=tensors["candidates"],
                                              positives=tensors["positives"]))  # fmt: skip
    assert message == (
        f"{meta} is a meta tensor (a shape without values); pass a tensor on a real device "
        "(cpu, cuda, ...)"
    )


def test_fastap_loss_refuses_nan_embeddings_unless_validate_is_off():
    embeddings, labels = torch.randn(6, 3, dtype=torch.float64), torch.arange(6) % 2
    embeddings[2, 1] = math.nan
    assert _message(lambda: fastap_loss(embeddings, labels)) == (
        "embeddings must be finite; got NaN in row 2 (1 row of 6)"
    )
    assert math.isnan(fastap_loss(embeddings, labels, validate=False).item())
