"""How ``blackbox_ap`` and ``blackbox_ap_loss`` take their arguments: which checks run when,
what they name, and that every option reaches the ranking (Rolinek et al. 2020)."""

import math

import pytest
import torch
import torch.nn.functional as F

from gradlab.errors import GradlabError
from gradlab.functional import blackbox_ap, blackbox_ap_loss
from tests.helpers.host_reads import host_reads


def _cross_modal():
    """Queries ``[3, 4]``, candidates ``[5, 4]``; queries 0 and 1 have one positive each,
    query 2 none."""
    generator = torch.Generator().manual_seed(5)  # the margin moves ranks in both forms
    queries = torch.randn(3, 4, generator=generator)
    candidates = torch.randn(5, 4, generator=generator)
    positives = torch.zeros(3, 5, dtype=torch.bool)
    positives[0, 0] = positives[1, 1] = True
    return queries, candidates, positives


def _message(call) -> str:
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


def _host_reads(monkeypatch, call) -> int:
    return len(host_reads(monkeypatch, call))


def test_a_wrongly_shaped_or_placed_candidate_mask_is_refused_by_name():
    scores, positives = torch.zeros(1, 3), torch.tensor([[True, False, False]])
    assert _message(lambda: blackbox_ap(
        scores, positives, candidate_mask=torch.ones(2, 3, dtype=torch.bool))) == (
        "candidate_mask must have shape (1, 3) (one flag per score); got (2, 3)")
    assert _message(lambda: blackbox_ap(
        scores, positives, candidate_mask=torch.ones(1, 3, dtype=torch.bool, device="meta"))) == (
        "tensors must be on one device; got scores on cpu, candidate_mask on meta")


def test_half_precision_other_than_float16_with_a_gradient_is_not_bounded():
    """Only float16 scores that require a gradient are refused for a tiny interpolation: a
    bfloat16 gradient reaches 3e38, and float16 scores without a gradient have none."""
    positives = torch.tensor([[True, False, False]])
    tiny = 1e-5  # 2 (C - 1) / 1e-5 = 4e5, past float16's 65504
    bfloat16 = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.bfloat16, requires_grad=True)
    assert blackbox_ap(bfloat16, positives, interpolation=tiny).item() == 1.0
    float16 = torch.tensor([[1.0, 0.0, 0.0]], dtype=torch.float16)
    assert blackbox_ap(float16, positives, interpolation=tiny).item() == 1.0
    assert "can reach 2 (C - 1) / interpolation, 4e+05" in _message(lambda: blackbox_ap(
        float16.clone().requires_grad_(), positives, interpolation=tiny))


def test_the_margin_is_subtracted_in_the_scores_precision():
    """0.52 - 0.02 is 0.5 in float64: the positive ties the negative in column 0 and ranks
    second (AP 1/2). A margin rounded to float32 (0.0199999996) would leave it first."""
    scores = torch.tensor([[0.5, 0.52]], dtype=torch.float64)
    assert 0.52 - 0.02 == 0.5
    assert blackbox_ap(scores, torch.tensor([[False, True]]), margin=0.02).item() == 0.5


def test_a_default_call_is_validated_and_reports_a_batch_without_signal():
    calls = []
    loss = blackbox_ap_loss(torch.randn(4, 3), torch.arange(4),
                            on_degenerate=lambda: calls.append(1))  # fmt: skip
    assert loss.item() == 0.0 and calls == [1]


@pytest.mark.parametrize("form", ["in-batch", "cross-modal"])
def test_an_unvalidated_call_reads_only_what_the_ranking_reads(monkeypatch, form):
    """validate=False skips the finiteness check and its reads: the call reads back what
    blackbox_ap alone reads of the same scores (its own NaN flags), validate=True more."""
    queries, candidates, positives = _cross_modal()
    labels = torch.tensor([0, 0, 1])

    def call(validate):
        if form == "in-batch":
            return lambda: blackbox_ap_loss(queries, labels, validate=validate)
        return lambda: blackbox_ap_loss(queries, candidates=candidates, positives=positives,
                                        validate=validate)  # fmt: skip

    scores = F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T
    ranking = _host_reads(monkeypatch, lambda: blackbox_ap(scores, positives))
    assert _host_reads(monkeypatch, call(False)) == ranking
    assert _host_reads(monkeypatch, call(True)) > ranking


@pytest.mark.parametrize("validate", [True, False])
@pytest.mark.parametrize("bad", ["queries", "candidates"])
def test_non_finite_inputs_are_refused_by_the_callers_names(validate, bad):
    """Checked (validate) or found by the ranking (without it), a NaN is named as the caller
    passed it: queries or candidates, not the score matrix made of them."""
    queries, candidates, positives = _cross_modal()
    (queries if bad == "queries" else candidates)[1, 2] = math.nan
    rows = 3 if bad == "queries" else 5
    assert _message(lambda: blackbox_ap_loss(
        queries, candidates=candidates, positives=positives, validate=validate)) == (
        f"{bad} must be finite; got NaN in row 1 (1 row of {rows})")


def test_a_refused_call_reports_nothing_first():
    """NaN candidates in a batch without signal: the call is refused before on_degenerate."""
    queries, candidates, _ = _cross_modal()
    candidates[1, 2] = math.nan
    calls = []
    with pytest.raises(GradlabError):
        blackbox_ap_loss(queries, candidates=candidates,
                         positives=torch.zeros(3, 5, dtype=torch.bool),
                         on_degenerate=lambda: calls.append(1))  # fmt: skip
    assert calls == []


@pytest.mark.parametrize(("positives", "degenerate"), [
    (torch.eye(3, 5, dtype=torch.bool), False),  # one positive each: signal
    (torch.ones(3, 5, dtype=torch.bool), True),  # every candidate positive: no negative
    (torch.zeros(3, 5, dtype=torch.bool), True),  # no positive
])  # fmt: skip
def test_on_degenerate_is_called_when_no_query_has_a_positive_and_a_negative(positives,
                                                                               degenerate):
    queries, candidates, _ = _cross_modal()
    calls = []
    blackbox_ap_loss(queries, candidates=candidates, positives=positives,
                     on_degenerate=lambda: calls.append(1))  # fmt: skip
    assert calls == ([1] if degenerate else [])


@pytest.mark.parametrize("meta", ["queries", "candidates", "positives"])
def test_a_meta_tensor_is_refused_by_name(meta):
    tensors = dict(zip(("queries", "candidates", "positives"), _cross_modal(), strict=True))
    tensors[meta] = tensors[meta].to("meta")
    assert _message(lambda: blackbox_ap_loss(
        tensors["queries"], candidates=tensors["candidates"],
        positives=tensors["positives"])) == (
        f"{meta} is a meta tensor (a shape without values); pass a tensor on a real device "
        "(cpu, cuda, ...)")


def test_float16_inputs_are_refused_as_queries_and_candidates():
    queries, candidates, positives = _cross_modal()
    message = _message(lambda: blackbox_ap_loss(
        queries.half().requires_grad_(), candidates=candidates.half(), positives=positives,
        interpolation=1e-5))
    assert message.startswith("queries and candidates (through their cosine scores) must keep "
                              "the gradient within torch.float16's largest value 65504")
    assert message.endswith("pass float32 or bfloat16 queries and candidates, or a larger "
                            "interpolation")


@pytest.mark.parametrize("form", ["in-batch", "cross-modal"])
def test_interpolation_and_margin_reach_the_ranking(form):
    """The loss and its gradient are 1 - mean AP of blackbox_ap on the cosine scores with the
    given interpolation (the backward's) and margin (the forward's), over the queries that
    have a positive."""
    queries, candidates, positives = _cross_modal()
    labels = torch.tensor([0, 0, 1])
    options = dict(interpolation=10.0, margin=0.3)  # large enough to move some ranks
    leaf = queries.clone().requires_grad_(True)
    if form == "in-batch":
        loss = blackbox_ap_loss(leaf, labels, **options)
    else:
        loss = blackbox_ap_loss(leaf, candidates=candidates, positives=positives, **options)
    (grad,) = torch.autograd.grad(loss, leaf)

    reference = queries.clone().requires_grad_(True)
    unit = F.normalize(reference, dim=1)
    if form == "in-batch":
        scores = (unit @ unit.T).masked_fill(torch.eye(3, dtype=torch.bool), -math.inf)
        relevant = (labels[:, None] == labels[None, :]) & ~torch.eye(3, dtype=torch.bool)
    else:
        scores, relevant = unit @ F.normalize(candidates, dim=1).T, positives
    ap = blackbox_ap(scores, relevant, **options)
    expected = 1 - ap[relevant.any(dim=1)].mean()
    # the data can tell: the default margin ranks differently
    assert not torch.equal(ap, blackbox_ap(scores, relevant, interpolation=10.0))
    (expected_grad,) = torch.autograd.grad(expected, reference)
    torch.testing.assert_close(loss, expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad, expected_grad, rtol=0, atol=1e-6)
    assert grad.abs().sum() > 0
