"""The runner: what :func:`run_step` returns, checked against a hand loop differentiated by
autograd, and :func:`run_distributed`'s argument checks and its results in two processes.

The reference is independent of the runner and the probe: the cosine scores and the loss are
written out item by item and differentiated by ``torch.autograd``. The argument checks must
fail before any process starts (a fixture makes starting one fail the test); one slow test
starts two gloo processes once and checks their averaged results against :func:`run_step` on
each half of the batch.
"""

import copy
import inspect
import math
import os
import re
import tempfile
from dataclasses import dataclass, replace

import pytest
import torch
from torch import nn

from gradlab.equivalence import FullBatch, PairedBatch, compare_gradients, synthetic_problem
from gradlab.equivalence.runner import (
    DEFAULT_TIMEOUT_S,
    Gradients,
    run_distributed,
    run_step,
)
from gradlab.errors import GradlabError
from tests.helpers.equivalence_workers import (
    CannotBeRestored,
    RaisesUnrebuildable,
    RaisesWidthError,
    ReturnsVector,
    ReturnsVectorOnOneRank,
)

TEMPERATURE = 0.5
TIGHT = 1e-13
PICKLING_MESSAGE = (
    "steps, model and batch must be picklable to reach the processes (a step defined at module "
    "level, not a lambda or a local function); got "
)
PARENT_STATE = {}
"""Set by the slow test in this process only: a spawned process imports this module afresh."""


def infonce(scores, positives):
    """Multi-positive InfoNCE of the rows (a callable loss, picklable by name)."""
    logits = scores / TEMPERATURE
    positive_part = logits.masked_fill(~positives, float("-inf")).logsumexp(dim=1)
    return (logits.logsumexp(dim=1) - positive_part).mean()


def _reference(model, batch):
    """Loss, ``dL/dtheta`` by name, ``dL/dq``, ``dL/dc``, ``dL/dS`` and ``S`` of the whole
    batch (memory after the candidates), item by item, by autograd."""
    model = copy.deepcopy(model).to(torch.float64)
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    params = [p for p in model.parameters() if p.requires_grad]
    queries = model(batch.query_inputs.to(torch.float64))
    candidates = model(batch.candidate_inputs.to(torch.float64))
    pool = list(candidates)
    pool_labels = batch.labels.tolist()
    if batch.memory is not None:
        pool += list(batch.memory.to(torch.float64))
        pool_labels += batch.memory_labels.tolist()
    rows = []
    for q in queries:
        rows.append(torch.stack([q @ c / (q.norm() * c.norm()) for c in pool]))
    scores = torch.stack(rows)
    total = 0.0
    for i, label in enumerate(batch.labels.tolist()):
        every = sum(torch.exp(scores[i, j] / TEMPERATURE) for j in range(len(pool)))
        positive = sum(torch.exp(scores[i, j] / TEMPERATURE)
                       for j, other in enumerate(pool_labels) if other == label)  # fmt: skip
        total = total - torch.log(positive / every)
    loss = total / len(rows)
    grads = torch.autograd.grad(loss, [*params, queries, candidates, scores])
    return {
        "loss": loss.item(),
        "parameters": dict(zip(names, grads[: len(params)], strict=True)),
        "queries": grads[-3],
        "candidates": grads[-2],
        "scores": grads[-1],
        "values": scores.detach(),
    }


def _close(mine, theirs, atol=TIGHT):
    return mine.dtype == torch.float64 and torch.allclose(mine, theirs, atol=atol, rtol=0)


@dataclass
class EmbeddingSumStep:
    """Records the query embeddings only; its loss is their sum (no score computed)."""

    loss_as: str = "tensor"

    def __call__(self, model, batch, probe):
        queries = probe.queries(model(batch.query_inputs), batch.rows)
        loss = queries.sum()
        loss.backward()
        return {"tensor": loss.detach(), "float": loss.item(), "none": None}[self.loss_as]


@dataclass
class PooledTokenStep:
    """Pools the model's ``[n, T, d]`` token outputs into ``[n, d]`` embeddings, then the
    whole-batch loss on them."""

    def __call__(self, model, batch, probe):
        queries = probe.queries(model(batch.query_inputs).mean(dim=1), batch.rows)
        candidates = probe.candidates(model(batch.candidate_inputs).mean(dim=1), batch.rows)
        normed_q = queries / queries.norm(dim=1, keepdim=True)
        normed_c = candidates / candidates.norm(dim=1, keepdim=True)
        scores = probe.scores(normed_q @ normed_c.T, batch.rows, batch.rows)
        loss = infonce(scores, batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0))
        loss.backward()
        return loss.detach()


class TokenEncoder(nn.Module):
    """``[n, input] -> [n, tokens, width]``: one linear map per token."""

    def __init__(self, input_size, tokens, width):
        super().__init__()
        self.tokens, self.width = tokens, width
        self.linear = nn.Linear(input_size, tokens * width, dtype=torch.float64)
        generator = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in self.linear.parameters():
                p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype))

    def forward(self, inputs):
        return torch.tanh(self.linear(inputs)).reshape(inputs.shape[0], self.tokens, self.width)


class PoolTokens(nn.Module):
    """The mean over the token dimension."""

    def forward(self, tokens):
        return tokens.mean(dim=1)


@dataclass
class UnpicklableStep:
    """Lists ``folder`` when pickled, then refuses to be pickled."""

    folder: str
    seen: tuple = ()

    def __call__(self, model, batch, probe):  # a step: the pickling is what fails
        return None

    def __reduce__(self):
        self.seen = tuple(os.listdir(self.folder))
        raise TypeError("this step stays here")


@dataclass
class ReportsParentState:
    """Returns 1.0 when it sees the parent's :data:`PARENT_STATE`, 0.0 in a fresh import."""

    def __call__(self, model, batch, probe):
        return 1.0 if PARENT_STATE.get("marked") else 0.0


@pytest.fixture
def no_process_starts(monkeypatch):
    """Starting a process fails the test: the checks must come first."""

    def refuse(*args, **kwargs):
        pytest.fail("run_distributed started processes before its checks failed")

    monkeypatch.setattr(torch.multiprocessing, "start_processes", refuse)


# run_step: the whole batch in this process


def test_run_step_returns_the_loss_and_gradients_of_the_whole_batch():
    model, batch = synthetic_problem(batch_size=6, memory_size=3, seed=5)
    expected = _reference(model, batch)
    grads = run_step(FullBatch(infonce), model, batch)
    assert isinstance(grads, Gradients) and grads.world_size == 1
    assert grads.loss == pytest.approx(expected["loss"], rel=1e-13, abs=0)
    assert list(grads.parameters) == list(expected["parameters"])
    for name, gradient in grads.parameters.items():
        assert _close(gradient, expected["parameters"][name]), name
    assert _close(grads.queries, expected["queries"])
    assert _close(grads.candidates, expected["candidates"])
    assert grads.scores.shape == (6, 6 + 3)
    assert _close(grads.scores, expected["scores"])
    assert _close(grads.score_values, expected["values"])
    assert grads.scored.dtype == torch.bool and bool(grads.scored.all())


def test_a_model_with_batch_norm_in_training_mode_runs_and_keeps_its_statistics():
    # The probe's width is read without running the step's model: a BatchNorm in training mode
    # (which refuses one row) sees only the step's own forward passes.
    mlp, batch = synthetic_problem(batch_size=6, seed=2)
    model = nn.Sequential(mlp, nn.BatchNorm1d(4, dtype=torch.float64))
    before = copy.deepcopy(model.state_dict())
    expected = _reference(model, batch)
    grads = run_step(FullBatch(infonce), model, batch)
    assert grads.loss == pytest.approx(expected["loss"], rel=1e-13, abs=0)
    for name, gradient in grads.parameters.items():
        assert _close(gradient, expected["parameters"][name]), name
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_a_memory_narrower_than_the_embeddings_is_refused_before_the_step():
    model, batch = synthetic_problem(batch_size=4, embedding_size=4, memory_size=4)
    narrow = replace(batch, memory=batch.memory[:, :3])
    with pytest.raises(GradlabError) as error:
        run_step(FullBatch(infonce), model, narrow)
    assert str(error.value) == ("the memory's entries must be as wide as the model's embeddings "
                                "(4); got memory of shape (4, 3)")  # fmt: skip


def test_run_step_leaves_the_model_as_it_was():
    model, batch = synthetic_problem(batch_size=4)
    before = copy.deepcopy(model.state_dict())
    run_step(FullBatch(infonce), model, batch)
    for name, p in model.named_parameters():
        assert p.grad is None, name
        assert torch.equal(p, before[name]), name


def test_parameters_the_step_does_not_reach_get_zeros_and_frozen_ones_are_left_out():
    model, batch = synthetic_problem(batch_size=4)
    model[2].unused = nn.Linear(2, 2, dtype=torch.float64)  # registered, never called
    model[0].bias.requires_grad_(False)
    grads = run_step(FullBatch(infonce), model, batch)
    assert "0.bias" not in grads.parameters
    assert torch.equal(grads.parameters["2.unused.weight"], torch.zeros(2, 2, dtype=torch.float64))
    assert torch.equal(grads.parameters["2.unused.bias"], torch.zeros(2, dtype=torch.float64))
    assert grads.parameters["0.weight"].abs().sum() > 0


def test_the_probe_gradients_follow_a_float32_model():
    model, batch = synthetic_problem(batch_size=4, dtype=torch.float32)
    grads = run_step(FullBatch(infonce), model, batch)
    for value in (grads.queries, grads.candidates, grads.scores, grads.score_values):
        assert value.dtype == torch.float32
    expected = _reference(model, batch)
    assert torch.allclose(grads.queries.double(), expected["queries"], atol=1e-5, rtol=0)


def test_a_model_without_parameters_gets_float64_probe_gradients():
    # nn.Identity: the inputs are the embeddings; they carry the gradient themselves.
    _, batch = synthetic_problem(batch_size=4, input_size=3, seed=2)
    embeddings = PairedBatch(batch.query_inputs.clone().requires_grad_(True),
                             batch.candidate_inputs.clone().requires_grad_(True),
                             batch.labels)  # fmt: skip
    grads = run_step(FullBatch(infonce), nn.Identity(), embeddings)
    expected = _reference(nn.Identity(), embeddings)
    assert grads.parameters == {}
    assert _close(grads.queries, expected["queries"])
    assert _close(grads.scores, expected["scores"])


def test_the_probe_width_is_the_last_dimension_of_the_model_output():
    # Token outputs [n, 3, 5], pooled by the step: the embeddings are [n, 5], not [n, 3].
    _, batch = synthetic_problem(batch_size=4, input_size=6, seed=1)
    model = TokenEncoder(6, tokens=3, width=5)
    grads = run_step(PooledTokenStep(), model, batch)
    pooled = nn.Sequential(copy.deepcopy(model), PoolTokens())
    expected = _reference(pooled, batch)
    assert grads.queries.shape == (4, 5)
    assert _close(grads.queries, expected["queries"])
    assert _close(grads.candidates, expected["candidates"])
    assert _close(grads.parameters["linear.weight"], expected["parameters"]["0.linear.weight"])


def test_a_loss_returned_as_a_python_float_keeps_double_precision():
    model, batch = synthetic_problem(batch_size=4)
    expected = model(batch.query_inputs).sum().item()
    grads = run_step(EmbeddingSumStep(loss_as="float"), model, batch)
    assert grads.loss == pytest.approx(expected, rel=1e-14, abs=0)
    assert grads.loss != float(torch.tensor(expected, dtype=torch.float32))


def test_a_step_that_returns_no_loss_has_none_not_a_loss_of_zero():
    model, batch = synthetic_problem(batch_size=4)
    assert run_step(EmbeddingSumStep(loss_as="none"), model, batch).loss is None
    result = compare_gradients(EmbeddingSumStep(), EmbeddingSumStep(loss_as="none"), model, batch)
    expected = model(batch.query_inputs).sum().item()
    assert str(result).split("\n")[1] == (f"loss: reference {expected:.6g}, "
                                          "candidate none returned")  # fmt: skip
    assert result.to_dict()["candidate_loss"] is None and result.equivalent


@pytest.mark.parametrize(("returned", "got"), [
    (torch.ones(3), "a tensor of shape [3]"), ({"loss": 1.0}, "dict {'loss': 1.0}"),
    (True, "bool True"), ("1.0", "str '1.0'")])  # fmt: skip
def test_a_step_that_returns_no_single_loss_is_refused_by_name(returned, got):
    # a [3] tensor reached float(loss): "only one element tensors can be converted to Python
    # scalars", after both steps had run
    model, batch = synthetic_problem(batch_size=4)

    def per_query(model, batch, probe):
        EmbeddingSumStep()(model, batch, probe)
        return returned

    with pytest.raises(GradlabError) as raised:
        run_step(per_query, model, batch)
    assert str(raised.value) == (f"step per_query must return its loss (a number or a 0-d "
                                 f"tensor) or None; got {got}")  # fmt: skip
    one = run_step(lambda *step: EmbeddingSumStep()(*step).reshape(1), model, batch)
    assert one.loss == run_step(EmbeddingSumStep(), model, batch).loss  # one value: taken


def test_what_the_step_did_not_record_is_none():
    model, batch = synthetic_problem(batch_size=4)
    grads = run_step(EmbeddingSumStep(), model, batch)
    assert grads.candidates is None
    assert grads.scores is None and grads.scored is None and grads.score_values is None
    # d(sum of the queries)/dqueries is all ones, at every item
    assert torch.equal(grads.queries, torch.ones(4, 4, dtype=torch.float64))


# run_distributed: the checks, before any process starts


@pytest.mark.parametrize("world_size", [3, 0, -2, True, 2.0, "2"])
def test_a_world_size_that_does_not_divide_the_batch_is_refused(no_process_starts, world_size):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed([FullBatch(infonce)], model, batch, world_size)
    assert str(caught.value) == (
        f"world_size must be a positive integer that divides the batch size 4; got {world_size!r}"
    )


@pytest.mark.parametrize("world_size", [1, 2])
@pytest.mark.parametrize("timeout", [0, -1.0, math.nan, math.inf, True, "10", None])
def test_a_timeout_that_is_not_positive_and_finite_is_refused(
    no_process_starts, world_size, timeout
):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed([FullBatch(infonce)], model, batch, world_size, timeout=timeout)
    assert str(caught.value) == f"timeout must be a positive finite number; got {timeout!r}"


@pytest.mark.parametrize(
    ("steps", "message"),
    [  # were a TypeError ('FullBatch' object is not iterable), and processes started for none
        (FullBatch(infonce), "steps must be a sequence of steps, e.g. [AllGather(loss)]; got "
                             "FullBatch"),
        ([], "steps must name at least one step; got none"),
        ("gather", "steps must be a sequence of steps, e.g. [AllGather(loss)]; got str"),
    ],
)  # fmt: skip
def test_steps_that_are_not_a_list_of_steps_are_refused(no_process_starts, steps, message):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed(steps, model, batch, 2)
    assert str(caught.value) == message


def test_the_default_time_box_is_two_minutes():
    assert inspect.signature(run_distributed).parameters["timeout"].default == DEFAULT_TIMEOUT_S
    assert DEFAULT_TIMEOUT_S == 120.0


@pytest.mark.parametrize(
    "step",
    [lambda model, batch, probe: None, FullBatch(lambda scores, positives: scores.sum())],
    ids=["lambda_step", "lambda_loss"],
)
def test_a_step_that_cannot_be_pickled_is_refused(no_process_starts, step):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed([step], model, batch, 2)
    rest = str(caught.value).removeprefix(PICKLING_MESSAGE)
    assert rest != str(caught.value), str(caught.value)
    assert rest.startswith(("PicklingError: ", "AttributeError: ")) and "lambda" in rest, rest
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_pickling_type_error_is_named_and_its_scratch_folder_removed(
    no_process_starts, monkeypatch, tmp_path
):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    step = UnpicklableStep(str(tmp_path))
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed([step], model, batch, 2)
    assert str(caught.value) == PICKLING_MESSAGE + "TypeError: this step stays here"
    assert len(step.seen) == 1 and step.seen[0].startswith("gradlab-equivalence-")
    assert os.listdir(tmp_path) == []


# run_distributed: one start of two processes


def _halves(batch):
    """Each process's shard as a batch of its own (rows ``0..b-1``)."""
    shards = [batch.shard(rank, 2) for rank in range(2)]
    return [PairedBatch(s.query_inputs, s.candidate_inputs, s.labels) for s in shards]


@pytest.mark.slow
def test_two_processes_average_their_shards_in_spawned_processes(monkeypatch):
    monkeypatch.setitem(PARENT_STATE, "marked", True)
    model, batch = synthetic_problem(batch_size=8, seed=7)
    grads, state = run_distributed([FullBatch(infonce), ReportsParentState()], model, batch, 2)
    assert state.loss == 0.0  # spawned: the step's module imported afresh, not inherited
    halves = [run_step(FullBatch(infonce), model, half) for half in _halves(batch)]
    assert grads.world_size == 2
    assert grads.loss == pytest.approx((halves[0].loss + halves[1].loss) / 2, rel=1e-13, abs=0)
    for name, gradient in grads.parameters.items():
        mean = (halves[0].parameters[name] + halves[1].parameters[name]) / 2
        assert _close(gradient, mean), name
    # Each item's embedding gradient comes from its own process: half of it after the average.
    assert _close(grads.queries, torch.cat([h.queries for h in halves]) / 2)
    assert _close(grads.candidates, torch.cat([h.candidates for h in halves]) / 2)
    # Each process scores its own 4 x 4 block; the cross-process blocks are never computed.
    block = torch.block_diag(*(h.scores for h in halves))
    assert _close(grads.scores, block / 2)
    assert _close(grads.score_values, torch.block_diag(*(h.score_values for h in halves)))
    assert torch.equal(grads.scored, torch.block_diag(*(torch.ones(4, 4),) * 2).bool())


@pytest.mark.slow
def test_gradlab_s_refusal_in_the_processes_is_raised_as_in_one_process():
    # In two processes it was a RuntimeError "rank 0 of the distributed run raised first:"
    # followed by the worker's traceback
    model, batch = synthetic_problem(batch_size=4)
    for world_size in (1, 2):
        with pytest.raises(GradlabError) as caught:
            compare_gradients(FullBatch(infonce), ReturnsVector(), model, batch,
                              world_size=world_size)  # fmt: skip
        assert type(caught.value) is GradlabError
        assert str(caught.value) == ("step ReturnsVector must return its loss (a number or a "
                                     "0-d tensor) or None; got a tensor of shape [3]")


@pytest.mark.slow
def test_a_refusal_in_one_process_is_raised_as_it_is_though_the_others_fail_after_it():
    # Rank 1 refuses its step's loss; rank 0 waits for it in the gradients' average, and fails
    # there or is stopped only after rank 1 has raised: rank 1's refusal is what comes back.
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        run_distributed([ReturnsVectorOnOneRank(refused=1)], model, batch, 2)
    assert type(caught.value) is GradlabError
    assert str(caught.value) == ("step ReturnsVectorOnOneRank must return its loss (a number or "
                                 "a 0-d tensor) or None; got a tensor of shape [3]")  # fmt: skip


@pytest.mark.slow
def test_a_step_the_processes_cannot_unpickle_is_reported_with_the_process_s_error():
    # The processes fail before any step runs (no step's error recorded): the report is
    # torch's, that of the process it saw end first, with the exception's own line.
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(RuntimeError) as caught:
        run_distributed([CannotBeRestored()], model, batch, 2)
    assert re.fullmatch(
        r"a process raised:\n\s*-- Process [01] terminated with the following error:\n"
        r"Traceback \(most recent call last\):\n.*"
        r"\nRuntimeError: this step cannot be restored in another process\n?",
        str(caught.value), flags=re.DOTALL,
    ), str(caught.value)  # fmt: skip


@pytest.mark.slow
def test_a_run_past_its_time_box_is_stopped_with_a_timeout_error():
    # One process, stopped at the first check (after 0.5 s), long before it could finish.
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(TimeoutError) as caught:
        run_distributed([FullBatch(infonce)], model, batch, 1, timeout=0.01)
    assert str(caught.value) == (
        "the distributed run still ran after 0.01 s and was stopped (a process waits in a "
        "collective that another never joins?)"
    )


class _NamedPerQuery:
    name = "per-query loss"

    def __call__(self, model, batch, probe):
        EmbeddingSumStep()(model, batch, probe)
        return torch.ones(2)


class _UnnamedPerQuery:
    def __call__(self, model, batch, probe):
        EmbeddingSumStep()(model, batch, probe)
        return torch.ones(2)


@pytest.mark.parametrize(("step", "named"), [(_NamedPerQuery(), "per-query loss"),
                                             (_UnnamedPerQuery(), "_UnnamedPerQuery")])  # fmt: skip
def test_a_step_object_is_named_by_its_name_else_by_its_class(step, named):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as raised:
        run_step(step, model, batch)
    assert str(raised.value) == (f"step {named} must return its loss (a number or a 0-d tensor) "
                                 "or None; got a tensor of shape [2]")  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("step", "said"), [
    (RaisesUnrebuildable(), "UnrebuildableError: width is 3"),  # unpickling raised TypeError
    (RaisesWidthError(), "WidthError: width must be even; got 3"),  # came back formatted twice
])  # fmt: skip
def test_a_refusal_the_parent_cannot_rebuild_is_reported_with_its_traceback(step, said):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(RuntimeError) as caught:
        run_distributed([step], model, batch, 2)
    message = str(caught.value)
    assert message.startswith("rank ") and " of the distributed run raised first:\n" in message
    assert said in message and "Traceback" in message
