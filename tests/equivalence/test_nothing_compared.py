"""A reference whose every recorded gradient is exactly zero leaves nothing to compare: the
checker refuses it with a GradlabError instead of a vacuous EQUIVALENT.

The premise (a zero reference gradient) is established independently: SmoothAP's loss by
plain autograd of gradlab's own cross-modal call form, outside the checker.
"""

import pytest
import torch

import gradlab
from gradlab.equivalence import (
    FullBatch,
    GradCache,
    Gradients,
    PairedBatch,
    compare,
    compare_gradients,
    run_step,
    synthetic_problem,
)
from gradlab.errors import GradlabError
from gradlab.losses import DegenerateBatchWarning

B = 6
SMOOTH_AP = gradlab.SmoothAPLoss(tau=0.1)
REFUSAL = ("the reference's gradient is exactly zero everywhere ({}), so the check would "
           "compare nothing and any candidate that leaves zeros would agree; likely the loss is "
           "constant on this batch (e.g. every label equal: no query has a negative to rank), or "
           "the reference step never calls backward")  # fmt: skip
ALL = "dL/dtheta, dL/dqueries, dL/dcandidates, dL/dscores"


def _one_class():
    model, batch = synthetic_problem(batch_size=B, seed=2)
    return model, PairedBatch(batch.query_inputs, batch.candidate_inputs,
                              torch.zeros(B, dtype=torch.int64))  # fmt: skip


class Counting:
    """A step that counts its calls and leaves no gradient."""

    def __init__(self):
        self.calls = 0

    def __call__(self, model, batch, probe):
        self.calls += 1


def test_smooth_ap_on_one_class_has_a_zero_gradient_by_plain_autograd():
    # The premise, outside the checker: every candidate is a positive, AP is 1 whatever the
    # scores, and no parameter receives a gradient.
    model, batch = _one_class()
    q, c = model(batch.query_inputs), model(batch.candidate_inputs)
    positives = torch.ones(B, B, dtype=torch.bool)
    with pytest.warns(DegenerateBatchWarning, match="no query in this batch has both"):
        value = gradlab.SmoothAPLoss(tau=0.1)(q, candidates=c, positives=positives)
    grads = torch.autograd.grad(value, list(model.parameters()), allow_unused=True)
    assert all(g is None or not g.any() for g in grads)


def test_a_reference_with_a_zero_gradient_is_refused_before_the_candidate_runs():
    model, batch = _one_class()
    candidate = Counting()
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(SMOOTH_AP), candidate, model, batch)
    assert str(caught.value) == REFUSAL.format(ALL)
    assert candidate.calls == 0


def test_gradient_caching_on_one_class_is_refused_not_equivalent():
    model, batch = _one_class()
    with pytest.raises(GradlabError, match=r"^the reference's gradient is exactly zero"):
        compare_gradients(FullBatch(SMOOTH_AP), GradCache(SMOOTH_AP, 2), model, batch)


def test_two_steps_that_do_nothing_are_refused():
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(Counting(), Counting(), model, batch)
    assert str(caught.value) == REFUSAL.format("dL/dtheta")


def test_compare_refuses_zero_reference_gradients_too():
    model, batch = _one_class()
    reference = run_step(FullBatch(SMOOTH_AP), model, batch)
    candidate = run_step(FullBatch(gradlab.NTXentLoss()), model, batch)  # non-zero
    with pytest.raises(GradlabError) as caught:
        compare(reference, candidate, batch)
    assert str(caught.value) == REFUSAL.format(ALL)


def test_a_reference_zero_in_some_quantities_only_is_compared():
    # dL/dtheta zero, dL/dqueries not: a real comparison, not refused.
    batch = synthetic_problem(batch_size=2)[1]
    reference = Gradients(parameters={"w": torch.zeros(2, dtype=torch.float64)},
                          queries=torch.ones(2, 4, dtype=torch.float64), candidates=None,
                          scores=None, scored=None, score_values=None, loss=0.0)  # fmt: skip
    assert compare(reference, reference, batch).equivalent
