"""A candidate that leaves no gradient at all (never calls backward) is said to be so, not
only shown as ``= 0 x reference``, which reads as a gradient scaled by zero.

The steps here are written from the public pieces only; the one run in two processes lives
at module level so that spawn can import it.
"""

import pytest
import torch
import torch.nn.functional as F

import gradlab
from gradlab.equivalence import FullBatch, compare_gradients, run_distributed, synthetic_problem

LOSS = gradlab.NTXentLoss(temperature=0.5)
NOTE = "the candidate left no gradient (no backward pass reached it)"


def _loss(model, batch, probe):
    q = probe.queries(model(batch.query_inputs), batch.rows)
    c = probe.candidates(model(batch.candidate_inputs), batch.rows)
    scores = probe.scores(F.normalize(q, dim=1) @ F.normalize(c, dim=1).T, batch.rows,
                          torch.arange(batch.size))  # fmt: skip
    return LOSS(scores, batch.labels.unsqueeze(1) == batch.labels.unsqueeze(0))


def no_backward(model, batch, probe):
    """Computes the loss, hands everything to the probe, forgets ``loss.backward()``."""
    return _loss(model, batch, probe).detach()


def zero_backward(model, batch, probe):
    """Calls backward, on the loss times zero: a gradient, and it is zero."""
    loss = _loss(model, batch, probe)
    (0 * loss).backward()
    return loss.detach()


class NoBackwardAnywhere:
    """In every process: encodes its shard and hands it to the probe, never back-propagates."""

    def __call__(self, model, batch, probe):
        probe.queries(model(batch.query_inputs), batch.rows)
        return None


class SumBackwardAnywhere:
    """In every process: back-propagates the sum of its queries (a gradient that reaches them,
    and differs from the loss's)."""

    def __call__(self, model, batch, probe):
        queries = probe.queries(model(batch.query_inputs), batch.rows)
        queries.sum().backward()
        return queries.sum().detach()


class SumBackwardOnFirstRowsOnly(SumBackwardAnywhere):
    """:class:`SumBackwardAnywhere` whose loss only the process holding row 0 returns."""

    def __call__(self, model, batch, probe):
        loss = super().__call__(model, batch, probe)
        return loss if int(batch.rows[0]) == 0 else None


@pytest.fixture
def problem():
    return synthetic_problem(batch_size=8, seed=4)


def test_a_candidate_that_never_calls_backward_is_said_to_leave_no_gradient(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), no_backward, model, batch)
    assert not result.equivalent
    for name in ("dL/dtheta", "dL/dqueries", "dL/dcandidates", "dL/dscores"):
        quantity = result[name]
        assert quantity.no_gradient and not quantity.agrees, name
        assert quantity.where().startswith(NOTE), quantity.where()
        assert "x reference" not in quantity.where()
    assert not result["scores"].no_gradient and result["scores"].agrees  # values, computed
    assert str(result).splitlines()[-1] == (
        "verdict: NOT EQUIVALENT (dL/dtheta, dL/dqueries, dL/dcandidates, dL/dscores differ; "
        "the candidate left no gradient in dL/dtheta, dL/dqueries, dL/dcandidates, dL/dscores: "
        "does it call backward?)"
    )
    assert result.to_dict()["quantities"]["dL/dtheta"]["no_gradient"] is True


def test_a_candidate_whose_gradient_is_zero_is_a_factor_of_zero_not_a_missing_gradient(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), zero_backward, model, batch)
    theta = result["dL/dtheta"]
    assert not theta.agrees and not theta.no_gradient
    assert theta.where().startswith("= 0 x reference")
    assert "left no gradient" not in str(result)


def test_an_equivalent_candidate_has_no_note(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    assert result.equivalent and not any(q.no_gradient for q in result.quantities)
    assert "left no gradient" not in str(result)


@pytest.mark.slow
def test_no_gradient_in_any_of_several_processes_is_said_too(problem):
    model, batch = problem
    result = compare_gradients(FullBatch(LOSS), NoBackwardAnywhere(), model, batch,
                               world_size=2)  # fmt: skip
    assert result["dL/dtheta"].no_gradient and result["dL/dqueries"].no_gradient
    assert result["dL/dtheta"].where().startswith(NOTE)
    assert result.candidate_loss is None  # no process returned a loss: none, not 0
    # a gradient that reached every process's queries and differs is not a missing one
    other = compare_gradients(FullBatch(LOSS), SumBackwardAnywhere(), model, batch,
                              world_size=2)  # fmt: skip
    assert not other["dL/dqueries"].no_gradient and not other["dL/dqueries"].agrees
    assert not other["dL/dqueries"].where().startswith(NOTE)
    # its loss is the processes' mean: each returns the sum of its half of the queries
    with torch.no_grad():
        halves = model(batch.query_inputs).chunk(2)
    assert other.candidate_loss == pytest.approx(sum(float(h.sum()) for h in halves) / 2,
                                                 rel=1e-12)  # fmt: skip
    # one process returning none: the mean of one loss is no loss of the step
    grads = run_distributed([SumBackwardOnFirstRowsOnly()], model, batch, 2)[0]
    assert grads.loss is None


def test_a_gradient_the_model_held_before_the_step_is_not_the_candidates(problem):
    # parameters that come in with a gradient (a model mid-training): a candidate that never
    # calls backward still leaves no gradient of its own, and the reference is not summed
    # onto the old one
    model, batch = problem
    clean = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    for parameter in model.parameters():
        parameter.grad = torch.full_like(parameter, 3.0)
    result = compare_gradients(FullBatch(LOSS), no_backward, model, batch)
    assert result["dL/dtheta"].no_gradient
    again = compare_gradients(FullBatch(LOSS), FullBatch(LOSS), model, batch)
    assert again.equivalent and again.reference_loss == clean.reference_loss
