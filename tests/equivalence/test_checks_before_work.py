"""What the checker refuses before any step runs: a loss where a step belongs, a model with
nothing to train, inputs the model cannot take. Each is one :class:`GradlabError` naming the
argument, the value and what is allowed, never a torch traceback from inside a step.

Every refusal is checked to come before the first step: the steps here record that they ran.
"""

import math
from dataclasses import replace

import pytest
import torch
from torch import nn

import gradlab
from gradlab.equivalence import (
    FullBatch,
    GradCache,
    compare_gradients,
    run_distributed,
    run_step,
    synthetic_problem,
)
from gradlab.errors import GradlabError

LOSS = gradlab.NTXentLoss(temperature=0.5)


class CountingStep:
    """The whole-batch step, counting its calls (a refusal must come before any)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, model, batch, probe):
        self.calls += 1
        return FullBatch(LOSS)(model, batch, probe)


@pytest.fixture
def no_process_starts(monkeypatch):
    """Starting a process fails the test: the checks must come first."""

    def refuse(*args, **kwargs):
        pytest.fail("run_distributed started processes before its checks failed")

    monkeypatch.setattr(torch.multiprocessing, "start_processes", refuse)


# a loss where a step belongs


@pytest.mark.parametrize("side", ["reference", "candidate"])
@pytest.mark.parametrize(
    "loss",
    [gradlab.NTXentLoss(), gradlab.SmoothAPLoss(), gradlab.MaxViolationTripletLoss()],
    ids=["nt_xent", "smooth_ap", "max_violation"],
)
def test_a_loss_passed_as_a_step_is_refused_naming_the_argument(side, loss):
    # the loss's own call form (SmoothAP was said to be called on scores and positives)
    form = ("loss(embeddings, labels)" if isinstance(loss, gradlab.SmoothAPLoss)
            else "loss(scores, positives)")  # fmt: skip
    model, batch = synthetic_problem(batch_size=4)
    step = CountingStep()
    steps = {"reference": step, "candidate": step, side: loss}
    with pytest.raises(GradlabError) as caught:
        compare_gradients(steps["reference"], steps["candidate"], model, batch)
    assert str(caught.value) == (
        f"{side} must be a step, called as step(model, batch, probe); got the loss "
        f"{type(loss).__name__}, called as {form}: wrap it in a step, e.g. "
        "gradlab.equivalence.FullBatch(loss) or GradCache(loss, chunk_size)"
    )
    assert step.calls == 0


def test_a_callable_that_cannot_take_model_batch_and_probe_is_refused():
    model, batch = synthetic_problem(batch_size=4)

    def my_loss(scores, positives):
        return scores.sum()

    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(LOSS), my_loss, model, batch)
    assert str(caught.value) == (
        "candidate must be a step, called as step(model, batch, probe); got function whose "
        "signature (scores, positives) cannot take those three arguments"
    )


def test_a_module_whose_forward_takes_other_arguments_is_refused():
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError, match=r"^step must be a step, called as step\(model, batch, "
                                           r"probe\); got Linear whose signature \(input"):
        run_step(nn.Linear(2, 2), model, batch)


def test_plain_callables_that_are_steps_are_still_accepted():
    model, batch = synthetic_problem(batch_size=4)

    def keyword_probe(model, batch, probe=None, *, extra=1):
        return FullBatch(LOSS)(model, batch, probe)

    class ModuleStep(nn.Module):
        def forward(self, model, batch, probe):
            return FullBatch(LOSS)(model, batch, probe)

    for step in (keyword_probe, ModuleStep(), lambda *args: FullBatch(LOSS)(*args)):
        assert compare_gradients(FullBatch(LOSS), step, model, batch).equivalent


def test_run_distributed_refuses_a_loss_among_its_steps_before_any_process(no_process_starts):
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError, match=r"^steps\[1\] must be a step, called as "
                                           r"step\(model, batch, probe\); got the loss NTXentLoss"):
        run_distributed([FullBatch(LOSS), LOSS], model, batch, 2)


# a model with nothing to train


def _frozen():
    model, _ = synthetic_problem(batch_size=4)
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


@pytest.mark.parametrize(
    ("make", "held"),
    [
        (nn.Identity, "Identity with no parameters"),
        (_frozen, "Sequential with 4 parameters, all with requires_grad=False"),
    ],
)
def test_a_model_with_no_trainable_parameter_is_refused_naming_model(make, held):
    _, batch = synthetic_problem(batch_size=4)
    step = CountingStep()
    message = ("model must have a parameter that requires grad (else no step can leave a "
               f"gradient to compare); got {held}, and the batch's inputs do not require grad "
               "either")  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        compare_gradients(step, step, make(), batch)
    assert str(caught.value) == message
    with pytest.raises(GradlabError) as caught:
        run_step(step, make(), batch)
    assert str(caught.value) == message
    assert step.calls == 0


def test_run_distributed_refuses_a_model_with_nothing_to_train_before_any_process(
    no_process_starts,
):
    _, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError, match=r"^model must have a parameter that requires grad"):
        run_distributed([FullBatch(LOSS)], nn.Identity(), batch, 2)


# inputs the model cannot take


def test_inputs_wider_than_the_model_takes_are_refused_naming_batch_and_the_shapes():
    _, batch = synthetic_problem(batch_size=4, input_size=8)
    step = CountingStep()
    narrow = nn.Linear(5, 4, dtype=torch.float64)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(step, step, narrow, batch)
    assert str(caught.value) == (
        "batch.query_inputs must be inputs the model takes: its first forward, "
        "model(batch.query_inputs[:1]) on shape (1, 8) (batch.query_inputs has shape (4, 8)), "
        "raised RuntimeError: mat1 and mat2 shapes cannot be multiplied (1x8 and 5x4)"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)  # the model's own error, kept
    assert step.calls == 0


def test_candidate_inputs_the_model_cannot_take_are_named_too():
    model, batch = synthetic_problem(batch_size=4, input_size=8)
    wide = type(batch)(batch.query_inputs, torch.zeros(4, 6, dtype=torch.float64), batch.labels)
    with pytest.raises(GradlabError, match=r"^batch\.candidate_inputs must be inputs the model "
                                           r"takes: .* on shape \(1, 6\) \(batch\.candidate_"
                                           r"inputs has shape \(4, 6\)\)"):
        run_step(CountingStep(), model, wide)


class TupleOutput(nn.Module):
    """A model whose forward returns a tuple, as a Hugging Face model's outputs are."""

    def __init__(self, kind):
        super().__init__()
        self.linear, self.kind = nn.Linear(8, 4, dtype=torch.float64), kind

    def forward(self, x):
        embeddings = self.linear(x)
        return {"tuple": (embeddings, x), "dict": {"pooled": embeddings},
                "0-d": embeddings.sum()}[self.kind]  # fmt: skip


@pytest.mark.parametrize(("kind", "got"), [("tuple", "tuple"), ("dict", "dict"),
                                           ("0-d", "a 0-d tensor")])  # fmt: skip
def test_a_model_that_returns_no_tensor_of_embeddings_is_refused(kind, got):
    # the tuple and the dict were an AttributeError ('tuple' object has no attribute 'shape')
    _, batch = synthetic_problem(batch_size=4, input_size=8)
    step = CountingStep()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(step, step, TupleOutput(kind), batch)
    assert str(caught.value) == (
        "model must return the embeddings as one tensor [b, d]; "
        f"model(batch.query_inputs[:1]) returned {got}: wrap the model so that its forward "
        "returns the embeddings (e.g. one field of a tuple or dict)"
    )
    assert step.calls == 0


def test_run_distributed_names_inputs_the_model_cannot_take_before_any_process(
    no_process_starts,
):
    _, batch = synthetic_problem(batch_size=4, input_size=8)
    with pytest.raises(GradlabError, match=r"^batch\.query_inputs must be inputs the model"):
        run_distributed([FullBatch(LOSS)], nn.Linear(5, 4, dtype=torch.float64), batch, 2)


def test_an_error_of_the_model_itself_is_not_hidden():
    # A step that fails for its own reasons, past the first forward, raises as it did.
    model, batch = synthetic_problem(batch_size=4)

    def broken(model, batch, probe):
        raise RuntimeError("the step's own bug")

    with pytest.raises(RuntimeError, match="the step's own bug"):
        run_step(broken, model, batch)


def test_gradient_caching_still_runs_after_the_checks():
    model, batch = synthetic_problem(batch_size=4)
    assert compare_gradients(FullBatch(LOSS), GradCache(LOSS, 2), model, batch).equivalent


# lazy modules


def _lazy_model():
    return nn.Sequential(nn.LazyLinear(16, dtype=torch.float64), nn.Tanh(),
                         nn.Linear(16, 4, dtype=torch.float64))  # fmt: skip


def test_a_model_with_uninitialised_lazy_parameters_is_refused_before_any_step():
    # Each copy would draw its own weights: the same step would differ from itself.
    _, batch = synthetic_problem(batch_size=4)
    step = CountingStep()
    model = _lazy_model()
    message = (
        "model has lazy parameters that are not initialised yet (0.weight, 0.bias): each "
        "step's copy of the model would initialise them with its own random values, and the "
        "check would compare two different models; run one forward pass first to initialise "
        "its lazy parameters"
    )
    with pytest.raises(GradlabError) as caught:
        compare_gradients(step, step, model, batch)
    assert str(caught.value) == message
    with pytest.raises(GradlabError) as caught:
        run_step(step, model, batch)
    assert str(caught.value) == message
    assert step.calls == 0
    assert isinstance(model[0], nn.LazyLinear)  # the caller's model was left as it was


def test_a_lazy_model_initialised_by_one_forward_is_its_own_equivalent():
    _, batch = synthetic_problem(batch_size=4)
    model = _lazy_model()
    model(batch.query_inputs[:1])
    result = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    assert result.equivalent
    assert result.reference_loss == result.candidate_loss


# non-finite inputs


def _spoiled(field, rows, value):
    model, batch = synthetic_problem(batch_size=6, memory_size=6)
    tensor = getattr(batch, field).clone()
    for row in rows:
        tensor[row, 1] = value
    return model, replace(batch, **{field: tensor})


@pytest.mark.parametrize("field", ["query_inputs", "candidate_inputs", "memory"])
@pytest.mark.parametrize(("value", "kind"), [(math.inf, "inf"), (-math.inf, "-inf"),
                                             (math.nan, "NaN")])  # fmt: skip
def test_a_non_finite_input_is_refused_naming_the_field_and_its_row(field, value, kind):
    model, batch = _spoiled(field, [3], value)
    step = CountingStep()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(step, step, model, batch)
    assert str(caught.value) == f"batch.{field} must be finite; got {kind} in row 3 (1 row of 6)"
    with pytest.raises(GradlabError) as caught:
        run_step(step, model, batch)
    assert str(caught.value) == f"batch.{field} must be finite; got {kind} in row 3 (1 row of 6)"
    assert step.calls == 0


def test_several_non_finite_rows_are_all_named():
    model, batch = _spoiled("query_inputs", [4, 0], math.nan)
    spoiled = batch.query_inputs.clone()
    spoiled[2, 0] = math.inf
    with pytest.raises(GradlabError) as caught:
        run_step(CountingStep(), model, replace(batch, query_inputs=spoiled))
    assert str(caught.value) == (
        "batch.query_inputs must be finite; got NaN and inf in rows 0, 2, 4 (3 rows of 6)"
    )


def test_run_distributed_refuses_non_finite_inputs_before_any_process(no_process_starts):
    model, batch = _spoiled("candidate_inputs", [5], math.inf)
    with pytest.raises(GradlabError, match=r"^batch\.candidate_inputs must be finite; got inf "
                                           r"in row 5"):
        run_distributed([FullBatch(LOSS)], model, batch, 2)


def test_integer_inputs_are_not_read_for_finiteness():
    # Token ids: an integer tensor has no NaN; the check must leave it alone.
    embedding = nn.Sequential(nn.Embedding(10, 4, dtype=torch.float64), nn.Flatten())
    ids = torch.arange(8).reshape(4, 2) % 10
    batch = type(synthetic_problem(batch_size=4)[1])(ids, (ids + 1) % 10,
                                                     torch.tensor([0, 0, 1, 1]))  # fmt: skip
    assert compare_gradients(FullBatch(LOSS), GradCache(LOSS, 2), embedding, batch).equivalent


def test_more_than_ten_non_finite_rows_show_the_first_ten():
    model, batch = synthetic_problem(batch_size=16)
    spoiled = batch.query_inputs.clone()
    spoiled[:12, 0] = math.nan
    with pytest.raises(GradlabError) as caught:
        run_step(CountingStep(), model, replace(batch, query_inputs=spoiled))
    assert str(caught.value) == ("batch.query_inputs must be finite; got NaN in rows 0, 1, 2, 3, "
                                 "4, 5, 6, 7, 8, 9, ... (12 rows of 16)")  # fmt: skip
    spoiled[11:, 0] = 1.0  # eleven: still the first ten
    with pytest.raises(GradlabError) as caught:
        run_step(CountingStep(), model, replace(batch, query_inputs=spoiled))
    assert str(caught.value).endswith("rows 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ... (11 rows of 16)")
    spoiled[10:, 0] = 1.0  # exactly ten: all shown, no ellipsis
    with pytest.raises(GradlabError) as caught:
        run_step(CountingStep(), model, replace(batch, query_inputs=spoiled))
    assert str(caught.value).endswith("rows 0, 1, 2, 3, 4, 5, 6, 7, 8, 9 (10 rows of 16)")


@pytest.mark.parametrize(("side", "record"), [("query_inputs", "queries"),
                                              ("candidate_inputs", "candidates")])  # fmt: skip
def test_inputs_that_require_grad_on_either_side_are_something_to_train(side, record):
    # a model with no parameters of its own (the features are the leaves): one side suffices
    _, batch = synthetic_problem(batch_size=4)
    leaf = getattr(batch, side).clone().requires_grad_(True)

    def one_side(model, batch, probe):
        features = getattr(probe, record)(model(getattr(batch, side)), batch.rows)
        loss = features.pow(2).sum()
        loss.backward()
        return loss.detach()

    grads = run_step(one_side, nn.Identity(), replace(batch, **{side: leaf}))
    assert torch.equal(getattr(grads, record), 2 * leaf.detach())


class _SilentFailure(nn.Module):
    """Raises an error without a message on its first forward (as some extensions do)."""

    def forward(self, inputs):
        raise IndexError


def test_a_forward_that_fails_without_a_message_is_named_all_the_same():
    _, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        model = nn.Sequential(nn.Linear(8, 4, dtype=torch.float64), _SilentFailure())
        run_step(CountingStep(), model, batch)
    assert str(caught.value) == (
        "batch.query_inputs must be inputs the model takes: its first forward, "
        "model(batch.query_inputs[:1]) on shape (1, 8) (batch.query_inputs has shape (4, 8)), "
        "raised IndexError: "
    )
