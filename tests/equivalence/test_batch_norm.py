"""BatchNorm in training mode: a trick that splits the forward (chunks, processes) normalises
each part by its own statistics. Such a candidate is reported as differing, as it does in
training, with the cause named and told apart from the trick itself: the same steps with the
statistics frozen (eval mode), which the user can run by hand too (model.eval())."""

import copy

import pytest
import torch
from torch import nn

import gradlab
from gradlab.equivalence import (
    AllGather,
    FullBatch,
    GradCache,
    compare_gradients,
    synthetic_problem,
)

LOSS = gradlab.NTXentLoss(temperature=0.5)
SAID = ("the model has BatchNorm in training mode (module '1'): it normalises each forward's "
        "rows by their own statistics")


def _model(norm: bool = True) -> nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        middle = nn.BatchNorm1d(16) if norm else nn.Identity()
        return nn.Sequential(nn.Linear(8, 16), middle, nn.Tanh(), nn.Linear(16, 4)).double()


@pytest.fixture
def batch():
    return synthetic_problem(batch_size=8, seed=1)[1]


def _eval_norms(model: nn.Module) -> nn.Module:
    frozen = copy.deepcopy(model)
    frozen[1].eval()
    return frozen


def test_a_gradient_cache_on_batch_norm_differs_and_the_cause_says_batch_norm_is_all_of_it(
        batch):
    model = _model()
    result = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size=4), model, batch)
    assert not result.equivalent and result.cause.startswith(SAID)
    assert "with BatchNorm's running statistics (eval mode) the two steps are EQUIVALENT" in (
        result.cause)
    assert result.cause in str(result)
    # what the cause says, checked by hand: the user's own model.eval() of the BatchNorm
    by_hand = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size=4),
                                _eval_norms(model), batch)
    assert by_hand.equivalent and by_hand.cause is None
    assert model[1].training  # the caller's model is left in its modes


def test_a_candidate_that_differs_beyond_batch_norm_is_said_to(batch):
    other = FullBatch(gradlab.NTXentLoss(temperature=0.25))  # one forward, as the reference
    result = compare_gradients(FullBatch(LOSS), other, _model(), batch)
    assert not result.equivalent and result.cause.startswith(SAID)
    assert result.cause.endswith(
        f"with BatchNorm's running statistics (eval mode) they still differ "
        f"({', '.join(result.differing)}): the trick differs beyond BatchNorm")
    assert not compare_gradients(FullBatch(LOSS), other, _eval_norms(_model()), batch).equivalent


@pytest.mark.parametrize("norm", [False, True])
def test_no_batch_norm_in_training_mode_no_batch_norm_cause(batch, norm):
    model = _eval_norms(_model()) if norm else _model(norm=False)
    differing = compare_gradients(FullBatch(LOSS), FullBatch(gradlab.NTXentLoss(0.25)), model,
                                  batch)
    assert not differing.equivalent and differing.cause is None


@pytest.mark.slow  # two gloo processes, twice
def test_all_gather_in_two_processes_on_batch_norm_names_it(batch):
    result = compare_gradients(FullBatch(LOSS), AllGather(LOSS), _model(), batch, world_size=2)
    assert not result.equivalent and result.cause.startswith(SAID)
    assert "the two steps are EQUIVALENT" in result.cause
