"""Dropout in training mode: both steps start from the same random state, so a candidate that
runs a forward again without replaying that state draws other masks. Such a candidate is
reported as differing, with the cause named and told apart from the trick itself: the same
steps with the dropout modules in eval mode, which the user can run by hand too."""

import copy

import pytest
import torch
from torch import nn

import gradlab
from gradlab.equivalence import FullBatch, GradCache, compare_gradients, synthetic_problem

LOSS = gradlab.NTXentLoss(temperature=0.5)
SAID = ("the model has dropout in training mode (module '1'): both steps start from the same "
        "random state, so a candidate that runs a forward again (a gradient cache's second "
        "pass) draws other masks unless it replays the random state of the first")


def _model(drop: float = 0.3) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.Dropout(drop), nn.Tanh(),
                             nn.Linear(16, 4)).double()  # fmt: skip


@pytest.fixture
def batch():
    return synthetic_problem(batch_size=8, seed=1)[1]


def cached_without_replay(model, batch, probe, chunk=4):
    """A gradient cache that forgets to replay the random state between its two passes."""
    with torch.no_grad():
        q = torch.cat([model(x) for x in batch.query_inputs.split(chunk)])
        c = torch.cat([model(x) for x in batch.candidate_inputs.split(chunk)])
    q = probe.queries(q.requires_grad_(), batch.rows)
    c = probe.candidates(c.requires_grad_(), batch.rows)
    unit = torch.nn.functional.normalize
    scores = probe.scores(unit(q, dim=1) @ unit(c, dim=1).T, batch.rows, batch.rows)
    loss = LOSS(scores, batch.labels[:, None] == batch.labels[None, :])
    loss.backward()
    for inputs, grad in ((batch.query_inputs, q.grad), (batch.candidate_inputs, c.grad)):
        for x, g in zip(inputs.split(chunk), grad.split(chunk), strict=True):
            model(x).backward(g)
    return loss.detach()


def _quiet(model: nn.Module) -> nn.Module:
    quiet = copy.deepcopy(model)
    quiet[1].eval()
    return quiet


def test_a_cache_without_replay_differs_and_the_cause_says_the_masks_are_all_of_it(batch):
    # it got a bare NOT EQUIVALENT (dL/dtheta differ), where BatchNorm got its cause
    model = _model()
    result = compare_gradients(FullBatch(LOSS), cached_without_replay, model, batch)
    assert not result.equivalent and result.cause.startswith(SAID)
    assert result.cause.endswith("with dropout in eval mode the two steps are EQUIVALENT: the "
                                 "masks are the whole difference")
    assert result.cause in str(result)
    # what the cause says, checked by hand: the user's own eval() of the dropout module
    by_hand = compare_gradients(FullBatch(LOSS), cached_without_replay, _quiet(model), batch)
    assert by_hand.equivalent and by_hand.cause is None
    assert model[1].training  # the caller's model is left in its modes
    # the built-in gradient cache replays the random state: no difference, nothing to say
    replayed = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size=4), model, batch)
    assert replayed.equivalent and replayed.cause is None


def test_a_candidate_that_differs_beyond_dropout_is_said_to(batch):
    other = FullBatch(gradlab.NTXentLoss(temperature=0.25))
    result = compare_gradients(FullBatch(LOSS), other, _model(), batch)
    assert not result.equivalent and result.cause.startswith(SAID)
    assert result.cause.endswith(
        f"with dropout in eval mode they still differ ({', '.join(result.differing)}): the "
        "trick differs beyond dropout")
    assert not compare_gradients(FullBatch(LOSS), other, _quiet(_model()), batch).equivalent


@pytest.mark.parametrize("drop", [0.0, None])
def test_no_dropout_that_drops_in_training_mode_no_dropout_cause(batch, drop):
    # p = 0 drops nothing, and a module in eval mode draws nothing
    model = _model(drop) if drop is not None else _quiet(_model())
    differing = compare_gradients(FullBatch(LOSS), FullBatch(gradlab.NTXentLoss(0.25)), model,
                                  batch)
    assert not differing.equivalent and differing.cause is None
