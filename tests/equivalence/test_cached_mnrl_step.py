"""CachedMNRL, sentence-transformers' CachedMultipleNegativesRankingLoss as a step to check.

The gradients ``run_step`` returns are held against an independent whole-batch reference:
MNRL, the InfoNCE loss of ``scale x cosine(anchor, positive)`` with each anchor's own positive
(the diagonal) as its target, written as a float64 loop over the batch and differentiated by
autograd. Offline and fast: the encoder is the synthetic problem's small MLP, wrapped by the
step itself; no model is downloaded.
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace

import pytest
import torch

from gradlab.equivalence import (
    CachedMNRL,
    PairedBatch,
    compare_gradients,
    run_step,
    synthetic_problem,
)
from gradlab.errors import GradlabError
from gradlab.extras import install_hint
from tests.helpers.hf_models import cached_replay_in_float32

pytest.importorskip("sentence_transformers")
FLOAT64_REPLAY = pytest.mark.skipif(
    cached_replay_in_float32(),
    reason="this sentence-transformers replays the cached mini-batches in float32 (5.7 to 6.1)",
)

B = 8
MISSING_EXTRA = (
    "gradlab.equivalence.CachedMNRL needs the sentence_transformers package, which is not "
    f"installed; install it with: {install_hint('sentence-transformers')}"
)


def one_class_per_item(seed: int = 0):
    """The synthetic model and batch, relabelled so that every pair is its own class."""
    model, batch = synthetic_problem(batch_size=B, seed=seed)
    return model, PairedBatch(batch.query_inputs, batch.candidate_inputs, torch.arange(B))


def mnrl_by_hand(model, batch, scale):
    """The whole-batch MNRL loss and ``dL/dtheta`` (by name), from a float64 loop."""
    anchors = [model(x.unsqueeze(0))[0] for x in batch.query_inputs]
    positives = [model(x.unsqueeze(0))[0] for x in batch.candidate_inputs]
    total = torch.zeros((), dtype=torch.float64)
    for i, anchor in enumerate(anchors):
        logits = torch.stack(
            [
                scale * torch.dot(anchor, positive) / (anchor.norm() * positive.norm())
                for positive in positives
            ]
        )
        total = total + torch.logsumexp(logits, dim=0) - logits[i]
    loss = total / len(anchors)
    names, parameters = zip(*model.named_parameters(), strict=True)
    grads = torch.autograd.grad(loss, parameters)
    return loss.item(), dict(zip(names, grads, strict=True))


def assert_matches_reference(grads, model, batch, scale):
    loss, expected = mnrl_by_hand(model, batch, scale)
    assert grads.loss == pytest.approx(loss, rel=1e-12, abs=1e-12)
    assert grads.parameters.keys() == expected.keys()
    for name, value in expected.items():
        assert torch.allclose(grads.parameters[name], value, rtol=0, atol=1e-12), name
    assert any(value.abs().max() > 1e-3 for value in expected.values())  # not all zero


def exactly(message: str) -> str:
    return f"^{re.escape(message)}$"


@FLOAT64_REPLAY
@pytest.mark.parametrize("mini_batch_size", [1, 3, B])
def test_gradient_is_the_whole_batch_mnrl_for_any_mini_batch_size(mini_batch_size):
    model, batch = one_class_per_item()
    grads = run_step(CachedMNRL(scale=20.0, mini_batch_size=mini_batch_size), model, batch)
    assert_matches_reference(grads, model, batch, scale=20.0)


@FLOAT64_REPLAY
@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_scale_is_the_inverse_temperature_of_the_loss(scale):
    model, batch = one_class_per_item(seed=1)
    grads = run_step(CachedMNRL(scale=scale, mini_batch_size=3), model, batch)
    assert_matches_reference(grads, model, batch, scale=scale)


def test_only_the_weight_gradient_is_recorded():
    model, batch = one_class_per_item()
    grads = run_step(CachedMNRL(mini_batch_size=3), model, batch)
    assert (grads.queries, grads.candidates, grads.scores) == (None, None, None)


@FLOAT64_REPLAY
def test_the_reference_step_gives_the_same_gradient():
    model, batch = one_class_per_item()
    step = CachedMNRL(scale=5.0, mini_batch_size=3)
    assert_matches_reference(run_step(step.reference(), model, batch), model, batch, scale=5.0)
    result = compare_gradients(step.reference(), step, model, batch)
    assert result.equivalent, str(result)


@pytest.mark.skipif(not cached_replay_in_float32(), reason="needs sentence-transformers 5.7 to 6.1")
def test_a_float32_replay_is_reported_at_float32_precision():
    """Where sentence-transformers replays in float32, the float64 check says NOT EQUIVALENT,
    and the gradient is the whole-batch loss's to float32 precision, no better."""
    model, batch = one_class_per_item()
    step = CachedMNRL(scale=5.0, mini_batch_size=3)
    assert not compare_gradients(step.reference(), step, model, batch).equivalent
    _, expected = mnrl_by_hand(model, batch, scale=5.0)
    got = run_step(step, model, batch).parameters
    worst = max(float((got[name] - value).abs().max()) for name, value in expected.items())
    largest = max(float(value.abs().max()) for value in expected.values())
    assert 1e-12 * largest < worst <= 2.0**-20 * largest


@pytest.mark.parametrize("mini_batch_size", [1, 3, B, 32])
def test_the_encoder_sees_at_most_mini_batch_size_items_at_once(mini_batch_size):
    model, batch = one_class_per_item()
    sizes = []
    model.register_forward_hook(lambda module, args, output: sizes.append(args[0].shape[0]))
    run_step(CachedMNRL(mini_batch_size=mini_batch_size), model, batch)
    assert max(sizes) == min(mini_batch_size, B)


@FLOAT64_REPLAY
def test_a_cpu_batch_stays_on_the_cpu_where_a_gpu_is_available(monkeypatch):
    model, batch = one_class_per_item()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    grads = run_step(CachedMNRL(mini_batch_size=3), model, batch)
    monkeypatch.undo()
    assert_matches_reference(grads, model, batch, scale=20.0)


def test_name_and_reference_show_the_options():
    assert CachedMNRL().name == "CachedMNRL(scale=20.0, mini_batch_size=32)"
    step = CachedMNRL(scale=4.0, mini_batch_size=3)
    assert step.name == "CachedMNRL(scale=4.0, mini_batch_size=3)"
    assert repr(step.reference().loss) == (
        "NTXentLoss(temperature=0.25, direction='i2t', reduction='mean')"
    )


@pytest.mark.parametrize("scale", [0, -1.0, float("inf"), float("nan"), True, "20"])
def test_refuses_a_scale_that_is_not_positive_and_finite(scale):
    message = f"scale must be a positive finite number; got {scale!r}"
    with pytest.raises(GradlabError, match=exactly(message)):
        CachedMNRL(scale=scale)


@pytest.mark.parametrize("mini_batch_size", [0, -2, 2.0, True, None])
def test_refuses_a_mini_batch_size_that_is_not_a_positive_integer(mini_batch_size):
    message = f"mini_batch_size must be a positive integer; got {mini_batch_size!r}"
    with pytest.raises(GradlabError, match=exactly(message)):
        CachedMNRL(mini_batch_size=mini_batch_size)


def test_refuses_more_than_one_process():
    model, batch = one_class_per_item()
    step = CachedMNRL(mini_batch_size=2)
    message = "CachedMNRL runs in one process here; got world_size=2"
    with pytest.raises(GradlabError, match=exactly(message)):
        step.check(batch, 2)
    with pytest.raises(GradlabError, match=exactly(message)):
        compare_gradients(step.reference(), step, model, batch, world_size=2)


def test_refuses_a_batch_whose_items_share_classes():
    model, batch = synthetic_problem(batch_size=B)  # classes of two
    step = CachedMNRL(mini_batch_size=3)
    message = (
        "CachedMNRL treats only an anchor's own positive as positive: the batch's labels must "
        f"all differ (e.g. torch.arange({B})); got {B // 2} classes for {B} items"
    )
    with pytest.raises(GradlabError, match=exactly(message)):
        step.check(batch, 1)
    with pytest.raises(GradlabError, match=exactly(message)):
        compare_gradients(step.reference(), step, model, batch)


def test_refuses_a_batch_with_a_memory():
    # The loss scores the batch only: a memory would be scored by the reference alone.
    model, batch = synthetic_problem(batch_size=B, memory_size=4)
    batch = replace(batch, labels=torch.arange(B))
    step = CachedMNRL(mini_batch_size=3)
    message = ("CachedMNRL scores the batch only; got a batch with a memory of 4 entries (that "
               "is for CrossBatchMemory)")  # fmt: skip
    with pytest.raises(GradlabError, match=exactly(message)):
        step.check(batch, 1)
    with pytest.raises(GradlabError, match=exactly(message)):
        compare_gradients(step.reference(), step, model, batch)


def test_accepts_a_batch_of_distinct_classes_in_one_process():
    _, batch = one_class_per_item()
    assert CachedMNRL().check(batch, 1) is None


def test_check_names_the_extra_when_sentence_transformers_is_missing(monkeypatch):
    _, batch = one_class_per_item()
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(GradlabError) as error:
        CachedMNRL().check(batch, 1)
    assert str(error.value).startswith(MISSING_EXTRA)


@pytest.mark.parametrize(
    "missing", ["sentence_transformers", "sentence_transformers.sentence_transformer.losses"]
)
def test_running_names_the_extra_when_sentence_transformers_is_missing(monkeypatch, missing):
    model, batch = one_class_per_item()
    monkeypatch.setitem(sys.modules, missing, None)
    with pytest.raises(GradlabError) as error:
        run_step(CachedMNRL(), model, batch)
    assert str(error.value).startswith(MISSING_EXTRA)
