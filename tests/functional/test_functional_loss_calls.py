"""The functional losses' call rules: both forms at once is refused naming what was passed,
meta tensors are refused by name in either form, ``fastap_loss`` validates by default, and
``blackbox_ap_loss`` takes the cross-modal keyword form as its module does."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab import BlackboxAPLoss, GradlabError
from gradlab.functional.blackbox_ap import blackbox_ap_loss
from gradlab.functional.fappy import fappy_loss
from gradlab.functional.losses import fastap_loss, smooth_ap_loss
from tests.reference.histogram_losses_loops import ranked_ap
from tests.reference.smooth_ap_loops import cosine


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


def _cross_modal_batch(seed: int = 3):
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    candidates = torch.randn(6, 3, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 6, generator=generator) < 0.4
    positives[:, 0] = True
    return queries, candidates, positives


def test_blackbox_ap_loss_takes_the_cross_modal_form_as_its_module_does():
    queries, candidates, positives = _cross_modal_batch()
    rows = [[cosine(q, c) for c in candidates.tolist()] for q in queries.tolist()]
    aps = [ranked_ap(row, flags, 0.02) for row, flags in zip(rows, positives.tolist(),
                                                               strict=True)]  # fmt: skip
    got = blackbox_ap_loss(queries, candidates=candidates, positives=positives)
    assert got.item() == pytest.approx(1.0 - sum(aps) / len(aps), rel=1e-12, abs=0)
    module = BlackboxAPLoss()(queries, candidates=candidates, positives=positives)
    assert torch.equal(got, module)


def test_blackbox_ap_loss_refuses_a_call_in_neither_form_naming_itself():
    queries, candidates, positives = _cross_modal_batch()
    assert _message(lambda: blackbox_ap_loss(queries, candidates=candidates)) == (
        "blackbox_ap_loss's cross-modal form loss(queries, candidates=candidates, "
        "positives=positives) needs positives too"
    )
    assert _message(lambda: blackbox_ap_loss(queries, candidates, positives)) == (
        "blackbox_ap_loss takes loss(embeddings, labels) or loss(queries, "
        "candidates=candidates, positives=positives); got a [C, d] float tensor where labels "
        "go (cross-modal: pass candidates and positives by keyword)"
    )
    assert _message(lambda: blackbox_ap_loss(queries)) == (
        "blackbox_ap_loss takes loss(embeddings, labels) or loss(queries, "
        "candidates=candidates, positives=positives); labels is missing"
    )


@pytest.mark.parametrize("bad", ["queries", "candidates"])
def test_blackbox_ap_loss_cross_modal_refuses_non_finite_input_by_name(bad):
    queries, candidates, positives = _cross_modal_batch()
    (queries if bad == "queries" else candidates)[1, 2] = math.inf
    message = _message(lambda: blackbox_ap_loss(queries, candidates=candidates,
                                                positives=positives))  # fmt: skip
    rows = 4 if bad == "queries" else 6
    assert message == f"{bad} must be finite; got inf in row 1 (1 row of {rows})"


@pytest.mark.parametrize("form", ["in-batch", "cross-modal"])
def test_blackbox_ap_loss_calls_on_degenerate_only_on_a_batch_without_signal(form):
    queries, candidates, positives = _cross_modal_batch()
    calls = []

    def call(degenerate: bool, validate: bool = True):
        if form == "in-batch":
            labels = torch.arange(4) if degenerate else torch.tensor([0, 0, 1, 1])
            return blackbox_ap_loss(queries, labels, validate=validate,
                                    on_degenerate=lambda: calls.append(1))  # fmt: skip
        mask = torch.zeros_like(positives) if degenerate else positives
        return blackbox_ap_loss(queries, candidates=candidates, positives=mask,
                                validate=validate,
                                on_degenerate=lambda: calls.append(1))  # fmt: skip

    call(False)
    assert calls == []
    assert call(True).item() == 0.0 and calls == [1]
    call(True, validate=False)  # no read for it: nothing called
    assert calls == [1]


@pytest.mark.parametrize("loss", [smooth_ap_loss, blackbox_ap_loss, fappy_loss])
@pytest.mark.parametrize("bad", [1, "warn"])
def test_an_on_degenerate_that_is_not_callable_is_refused_before_any_batch(loss, bad):
    # it was accepted, then raised TypeError "'int' object is not callable" at the first
    # degenerate batch, however many steps into training
    embeddings, labels = torch.randn(4, 3), torch.tensor([0, 0, 1, 1])  # not degenerate
    message = _message(lambda: loss(embeddings, labels, on_degenerate=bad))
    assert message == f"on_degenerate must be None or a callable; got {type(bad).__name__} {bad!r}"


class _Made(torch.overrides.TorchFunctionMode):
    """The shapes of the tensors torch functions made inside the block."""

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if isinstance(result, torch.Tensor):
            self.shapes.append(tuple(result.shape))
        return result


_PAIR = {"embeddings": torch.randn(6, 3), "labels": torch.tensor([0, 0, 1, 1, 2, 2])}
_CROSS = {"embeddings": torch.randn(3, 4),
          "candidates": torch.randn(5, 4), "positives": torch.eye(3, 5, dtype=torch.bool)}


@pytest.mark.parametrize(("loss", "inputs", "option", "bad"), [
    (smooth_ap_loss, _PAIR, "tau", -1.0),
    (smooth_ap_loss, _PAIR, "tau", math.nan),
    (smooth_ap_loss, _PAIR, "tau", "0.1"),
    (smooth_ap_loss, _CROSS, "tau", 0.0),
    (blackbox_ap_loss, _PAIR, "interpolation", 0.0),
    (blackbox_ap_loss, _PAIR, "margin", -1.0),
    (blackbox_ap_loss, _CROSS, "interpolation", math.inf),
    (fappy_loss, _PAIR, "delta_min", 0.0),
    (fappy_loss, _PAIR, "delta_min", "0.1"),
    (fastap_loss, _PAIR, "num_bins", 0),
])  # fmt: skip
def test_a_bad_option_is_refused_before_any_score_is_computed(loss, inputs, option, bad):
    # was: the cosine matrix (a [B, B] product) was built first, the option refused after it
    arguments = dict(inputs)
    embeddings = arguments.pop("embeddings")
    made = _Made()
    with made, pytest.raises(GradlabError) as caught:
        loss(embeddings, **arguments, **{option: bad})
    assert str(caught.value).startswith(f"{option} must be ")
    columns = len(arguments.get("candidates", embeddings))
    assert (len(embeddings), columns) not in made.shapes  # no score matrix was made


def test_smooth_ap_loss_bounds_a_float16_gradient_by_its_mean_over_the_queries():
    """The loss averages the APs of its queries with a positive, so |dL/dS| reaches
    1.25 / tau over their number: at tau = 1e-5 and 4 such queries 31,250, which float16 holds
    (one query's 125,000 would not); at 1e-6 and 2 queries 625,000, refused, naming the
    queries and candidates the scores were made from."""
    embeddings = torch.tensor([[1.0, 0.1], [0.9, 0.0], [0.0, 1.0], [0.1, 0.9]])
    half = embeddings.half().requires_grad_(True)
    loss = smooth_ap_loss(half, torch.tensor([0, 0, 1, 1]), tau=1e-5)
    assert loss.dtype == torch.float16
    with pytest.raises(GradlabError) as caught:
        smooth_ap_loss(half[:2], candidates=half[2:].detach(), positives=torch.eye(2) > 0,
                       tau=1e-6)  # fmt: skip
    bound = 1.25 / 1e-6 / 2
    assert str(caught.value) == (
        "queries and candidates (through their cosine scores) must keep the gradient within "
        "torch.float16's largest value 65504 (dL/dS is computed in float32 and returned in the "
        "scores' dtype); at tau=1e-06 SmoothAP's |dAP/dS| can reach 1.25 / tau over the 2 "
        f"queries with a positive, {bound:.3g}; pass float32 or bfloat16 queries and "
        "candidates, or a larger tau")
