"""Randomness: every step compared starts from the caller's random state, and that state is
left as it was.

A model with dropout compared with itself must be EQUIVALENT, gradient caching (which replays
each chunk's state) too, and a cache that does not replay must still be caught. The expected
gradients are plain autograd of the whole batch run from the same seed, no step or probe.
"""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import gradlab
from gradlab.equivalence import (
    AllGather,
    FullBatch,
    GradCache,
    compare,
    compare_gradients,
    run_distributed,
    run_step,
    synthetic_problem,
)
from gradlab.errors import GradlabError

B = 8
LOSS = gradlab.NTXentLoss(temperature=0.5)


def _dropout_model(device="cpu"):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.2), nn.Tanh(),
                             nn.Linear(16, 4)).double().to(device)  # fmt: skip


@pytest.fixture
def problem():
    _, batch = synthetic_problem(batch_size=B, seed=1)
    return _dropout_model(), batch


def _positives(labels):
    return labels.unsqueeze(1) == labels.unsqueeze(0)


def replay_free_cache(model, batch, probe, chunk=3):
    """A hand-written gradient cache that re-runs each chunk WITHOUT replaying its random
    state: with dropout, pass 2's masks are not pass 1's (the bug to catch)."""
    with torch.no_grad():
        q = torch.cat([model(x) for x in batch.query_inputs.split(chunk)])
        c = torch.cat([model(x) for x in batch.candidate_inputs.split(chunk)])
    q = probe.queries(q.requires_grad_(), batch.rows)
    c = probe.candidates(c.requires_grad_(), batch.rows)
    scores = probe.scores(F.normalize(q, dim=1) @ F.normalize(c, dim=1).T, batch.rows,
                          batch.rows)  # fmt: skip
    loss = LOSS(scores, _positives(batch.labels))
    loss.backward()
    for inputs, grad in ((batch.query_inputs, q.grad), (batch.candidate_inputs, c.grad)):
        for x, g in zip(inputs.split(chunk), grad.split(chunk), strict=True):
            model(x).backward(g)
    return loss.detach()


def test_a_step_compared_with_itself_on_a_dropout_model_is_equivalent(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    assert result.equivalent, str(result)
    assert all(q.max_abs == 0.0 for q in result.quantities if q.recorded), str(result)
    assert result.reference_loss == result.candidate_loss


@pytest.mark.parametrize("chunk_size", [1, 3, B])
def test_gradient_caching_with_dropout_is_equivalent(problem, chunk_size):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), GradCache(LOSS, chunk_size), model, batch)
    assert result.equivalent, str(result)


def test_a_cache_that_does_not_replay_the_random_state_is_still_caught(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), replay_free_cache, model, batch)
    assert not result.equivalent
    assert "dL/dtheta" in result.differing
    # Pass 1 drew the reference's masks, so the loss and the scores agree: only the
    # re-forward's masks are wrong, and only dL/dtheta can show it.
    assert result["scores"].agrees and result["dL/dscores"].agrees


def test_without_dropout_the_replay_free_cache_is_equivalent(problem):
    # The control: the same cache is right when nothing is random.
    model, batch = problem
    model[1].p = 0.0
    result = compare_gradients(FullBatch(LOSS), replay_free_cache, model, batch)
    assert result.equivalent, str(result)


def test_the_reference_is_plain_autograd_run_from_the_callers_random_state(problem):
    model, batch = problem
    torch.manual_seed(123)
    grads = run_step(FullBatch(LOSS), model, batch)
    torch.manual_seed(123)  # the same state, by hand: queries first, then candidates
    q = model(batch.query_inputs)
    c = model(batch.candidate_inputs)
    scores = F.normalize(q, dim=1) @ F.normalize(c, dim=1).T
    value = LOSS(scores, _positives(batch.labels))
    expected = torch.autograd.grad(value, list(model.parameters()))
    for (name, mine), theirs in zip(grads.parameters.items(), expected, strict=True):
        assert torch.allclose(mine, theirs, atol=1e-13, rtol=0), name
    assert grads.loss == pytest.approx(float(value.detach()), abs=1e-13)


def test_the_callers_random_state_is_left_unchanged(problem):
    model, batch = problem
    torch.manual_seed(5)
    before = torch.get_rng_state()
    compare_gradients(FullBatch(LOSS), GradCache(LOSS, 3), model, batch)
    run_step(FullBatch(LOSS), model, batch)
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.slow
def test_every_step_in_the_processes_starts_from_the_callers_random_state(problem):
    # One process, two steps: each is the step run here from the same state, not the
    # fresh process's default state nor what the step before it left.
    model, batch = problem
    torch.manual_seed(11)
    here = run_step(FullBatch(LOSS), model, batch)
    before = torch.get_rng_state()
    first, second = run_distributed([FullBatch(LOSS), FullBatch(LOSS)], model, batch, 1)
    assert torch.equal(torch.get_rng_state(), before)
    for there in (first, second):
        assert compare(here, there, batch).equivalent
        for name, value in here.parameters.items():
            assert torch.equal(there.parameters[name], value), name


def test_dropout_in_several_processes_is_refused_before_any_work(problem, monkeypatch):
    def refuse(*args, **kwargs):
        pytest.fail("compare_gradients started processes before its checks failed")

    monkeypatch.setattr(torch.multiprocessing, "start_processes", refuse)
    model, batch = problem
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), model, batch, world_size=2)
    assert str(caught.value) == (
        "world_size=2 needs a model without active dropout; got dropout in training mode in "
        "module '1': each process draws the masks of its own shard, not those the whole-batch "
        "reference draws for its rows, so the gradients would differ whatever the trick; set "
        "the dropout's p to 0 (or call model.eval()) for the check, or check with world_size=1"
    )


@pytest.mark.gpu
def test_on_cuda_both_steps_start_from_the_callers_cuda_random_state():
    _, batch = synthetic_problem(batch_size=B, seed=1)
    model = _dropout_model("cuda")
    batch = type(batch)(batch.query_inputs.cuda(), batch.candidate_inputs.cuda(),
                        batch.labels.cuda())  # fmt: skip
    torch.cuda.manual_seed(3)
    before = torch.cuda.get_rng_state()
    result = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    assert result.equivalent, str(result)
    assert torch.equal(torch.cuda.get_rng_state(), before)


def test_sentence_transformers_cached_loss_with_dropout_matches_its_reference(problem):
    pytest.importorskip("sentence_transformers")
    from gradlab.equivalence import CachedMNRL
    from tests.helpers.hf_models import cached_replay_in_float32

    if cached_replay_in_float32():
        pytest.skip("sentence-transformers 5.7 to 6.1 replay the cache in float32")
    model, batch = problem
    step = CachedMNRL(mini_batch_size=3)  # its RandContext replays each mini-batch's state
    distinct = type(batch)(batch.query_inputs, batch.candidate_inputs, torch.arange(B))
    result = compare_gradients(step.reference(), step, model, distinct)
    assert result.equivalent, str(result)


class _ChecksPassedError(Exception):
    """Raised where compare_gradients would start its processes: every check before passed."""


def _stop_at_the_processes(*args, **kwargs):
    raise _ChecksPassedError


def test_the_dropout_refusal_names_every_active_module_and_spares_p_zero(problem, monkeypatch):
    monkeypatch.setattr(torch.multiprocessing, "start_processes", _stop_at_the_processes)
    _, batch = problem
    torch.manual_seed(0)
    two = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.2), nn.Tanh(), nn.Dropout(0.1),
                        nn.Linear(16, 4)).double()  # fmt: skip
    with pytest.raises(GradlabError, match=r"in training mode in modules '1', '3': each "):
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), two, batch, world_size=2)
    # p = 0 draws no mask: nothing to refuse, the check goes on to start its processes
    off = nn.Sequential(nn.Linear(8, 16), nn.Dropout(0.0), nn.Tanh(), nn.Linear(16, 4)).double()
    with pytest.raises(_ChecksPassedError):
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), off, batch, world_size=2)


class _FunctionalDropout(nn.Module):
    """Dropout by ``F.dropout`` in ``forward``: no ``nn.Dropout`` module to find."""

    def __init__(self, noise: bool = False):
        super().__init__()
        self.linear, self.noise = nn.Linear(8, 4), noise
        self.norm = nn.BatchNorm1d(8)

    def forward(self, inputs):
        hidden = self.norm(inputs)
        if self.noise and self.training:  # Gaussian noise on the inputs, drawn per process
            return self.linear(hidden + 0.01 * torch.randn_like(hidden))
        return self.linear(F.dropout(hidden, 0.3, self.training))


@pytest.mark.parametrize("noise", [False, True])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_a_forward_that_draws_random_numbers_is_refused_in_several_processes(noise, dtype,
                                                                             monkeypatch):
    # a float32 model on the float64 batch failed the probe's forward, read as "draws
    # nothing": the check ran and called a correct gather NOT EQUIVALENT (dL/dtheta 1.39 apart)
    monkeypatch.setattr(torch.multiprocessing, "start_processes", _stop_at_the_processes)
    _, batch = synthetic_problem(batch_size=B, seed=1)
    torch.manual_seed(0)
    model = _FunctionalDropout(noise).to(dtype)
    state, statistics = torch.get_rng_state(), model.norm.running_mean.clone()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), model, batch, world_size=2)
    assert str(caught.value) == (
        "world_size=2 needs a model whose forward draws no random numbers; the model's forward "
        "drew some (in training mode, on two rows of each side: a functional dropout such as "
        "F.dropout, added noise, stochastic depth): each process would draw for its own shard, "
        "not what the whole-batch reference draws for its rows, so the gradients would differ "
        "whatever the trick; make the forward deterministic for the check (model.eval(), p=0), "
        "or check with world_size=1")
    # the probe leaves the caller's random state and the model's statistics as they were
    assert torch.equal(torch.get_rng_state(), state)
    assert torch.equal(model.norm.running_mean, statistics)
    model.eval()  # nothing drawn in eval mode: the check goes on to start its processes
    with pytest.raises(_ChecksPassedError):
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), model, batch, world_size=2)


class _FixedBatch(nn.Module):
    """A forward that takes only the whole batch's size (a reshape by it): two rows fail."""

    def __init__(self, rows):
        super().__init__()
        self.linear, self.rows = nn.Linear(8, 4), rows

    def forward(self, inputs):
        if inputs.shape[0] not in (1, self.rows, self.rows // 2):  # the probe's row, a shard
            raise RuntimeError(f"expected {self.rows} rows")
        return self.linear(inputs)


def test_a_forward_that_cannot_take_two_rows_is_not_refused_as_random(monkeypatch):
    monkeypatch.setattr(torch.multiprocessing, "start_processes", _stop_at_the_processes)
    _, batch = synthetic_problem(batch_size=B, seed=1)
    model = _FixedBatch(B).double()
    with pytest.raises(_ChecksPassedError):  # the random-draw probe tells nothing: no refusal
        compare_gradients(FullBatch(LOSS), AllGather(LOSS), model, batch, world_size=2)
