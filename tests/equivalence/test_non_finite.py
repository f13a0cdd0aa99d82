"""NaN or infinite gradients: a reference with them is refused before the candidate runs (no
candidate could agree with it); a candidate with them is reported where it holds them."""

import json
import math

import pytest

import gradlab
from gradlab.equivalence import FullBatch, compare, compare_gradients, run_step, synthetic_problem
from gradlab.errors import GradlabError

LOSS = gradlab.NTXentLoss(temperature=0.5)


class Scaled:
    """A step whose backward multiplies every parameter's gradient by ``factor``; counts its
    calls."""

    def __init__(self, factor):
        self.factor, self.calls = factor, 0

    def __call__(self, model, batch, probe):
        self.calls += 1
        loss = FullBatch(LOSS)(model, batch, probe)
        for parameter in model.parameters():
            parameter.grad *= self.factor
        return loss


@pytest.mark.parametrize("factor", [float("nan"), float("inf")])
def test_a_reference_with_non_finite_gradients_is_refused_before_the_candidate_runs(factor):
    model, batch = synthetic_problem(batch_size=4)
    candidate = Scaled(1.0)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(Scaled(factor), candidate, model, batch)
    assert str(caught.value) == (
        "the reference's gradient holds NaN or infinite values (dL/dtheta), so no candidate "
        "could agree with it; the reference step's loss or its backward is not finite on this "
        "batch"
    )
    assert candidate.calls == 0
    reference = run_step(Scaled(factor), model, batch)
    with pytest.raises(GradlabError, match=r"^the reference's gradient holds NaN"):
        compare(reference, run_step(FullBatch(LOSS), model, batch), batch)


def test_a_non_finite_loss_names_every_gradient_it_reaches():
    # a loss scaled by NaN: every recorded gradient (parameters, embeddings, scores) is NaN
    model, batch = synthetic_problem(batch_size=4)
    with pytest.raises(GradlabError) as caught:
        compare_gradients(FullBatch(lambda scores, positives: LOSS(scores, positives) * math.nan),
                          FullBatch(LOSS), model, batch)  # fmt: skip
    assert str(caught.value).startswith(
        "the reference's gradient holds NaN or infinite values (dL/dtheta, dL/dqueries, "
        "dL/dcandidates, dL/dscores), so no candidate could agree with it"
    )


def test_a_candidate_with_nan_gradients_says_where():
    # was "DIFFERS" with an empty where column: NaN is never above the threshold
    model, batch = synthetic_problem(batch_size=4)
    result = compare_gradients(FullBatch(LOSS), Scaled(float("nan")), model, batch)
    theta = result["dL/dtheta"]
    assert not result.equivalent and not theta.agrees
    assert theta.parameters == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert theta.where() == "NaN in the candidate; parameters 0.weight, 0.bias, 2.weight, 2.bias"
    assert "NaN in the candidate" in str(result)
    json.dumps(result.to_dict())
