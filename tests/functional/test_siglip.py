"""SigLIP's sigmoid loss on a score matrix against float64 loops (Zhai et al. 2023, Eq. 1)."""

import math

import pytest
import torch

import gradlab
from gradlab import GradlabError
from gradlab.functional.siglip import sigmoid_pair_loss
from gradlab.siglip_loss import SigLIPLoss
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.helpers.host_reads import host_reads
from tests.reference.score_losses_loops import siglip_loss


def loop_loss_and_grad(scores, positives, scale, bias, reduction):
    """The loss and dL/dS written out pair by pair, in float64."""
    loss, grad = siglip_loss(scores, positives, scale, bias, reduction)
    return loss, torch.tensor(grad, dtype=torch.float64)


CASES = [  # (rows, columns, scale, bias, reduction, seed)
    (4, 4, 10.0, -10.0, "mean", 0),
    (3, 7, 2.5, 0.3, "mean", 1),
    (5, 2, 1.0, 0.0, "sum", 2),
    (6, 6, 30.0, -5.0, "sum", 3),
]


@pytest.mark.parametrize(("rows", "columns", "scale", "bias", "reduction", "seed"), CASES)
def test_value_and_gradient_match_a_float64_loop(rows, columns, scale, bias, reduction, seed):
    generator = torch.Generator().manual_seed(seed)
    scores = (torch.rand(rows, columns, generator=generator, dtype=torch.float64) * 2 - 1)
    positives = torch.rand(rows, columns, generator=generator) < 0.3
    positives[0, 0] = True
    scores.requires_grad_()
    value = sigmoid_pair_loss(scores, positives, scale, bias, reduction=reduction)
    value.backward()
    expected, grad = loop_loss_and_grad(scores.tolist(), positives.tolist(), scale, bias,
                                        reduction)  # fmt: skip
    assert value.item() == pytest.approx(expected, rel=1e-12)
    torch.testing.assert_close(scores.grad, grad, rtol=1e-10, atol=1e-12)


def test_labels_of_a_square_batch_and_the_module_give_the_same_loss():
    scores = torch.randn(4, 4, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2])
    mask = labels.unsqueeze(1) == labels.unsqueeze(0)
    expected, _ = loop_loss_and_grad(scores.tolist(), mask.tolist(), 10.0, -10.0, "mean")
    assert sigmoid_pair_loss(scores, labels).item() == pytest.approx(expected, rel=1e-12)
    assert SigLIPLoss()(scores, labels).item() == pytest.approx(expected, rel=1e-12)


def test_the_open_clip_stand_in_computes_the_same_loss_from_features():
    from tests.helpers.open_clip_losses import StandInSigLipLoss, features

    images, texts = features(1, 5)
    open_clip_style = StandInSigLipLoss()(images, texts, torch.tensor(10.0), torch.tensor(-10.0))
    ours = SigLIPLoss()(images @ texts.T, torch.eye(5, dtype=torch.bool))
    assert ours.item() == pytest.approx(open_clip_style.item(), rel=1e-6)


def test_a_monitor_reads_the_whole_matrix_both_ways(tmp_path):
    scores = torch.randn(6, 6, requires_grad=True)
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        monitor.watch(SigLIPLoss())(scores, torch.eye(6, dtype=torch.bool)).backward()
        record = monitor.step()
    assert record["anatomy_i2t_active_negatives_mean"] >= 0
    assert record["anatomy_t2i_active_negatives_mean"] >= 0


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s, p: sigmoid_pair_loss(s, p, scale=0.0), "scale must be a positive finite"),
        (lambda s, p: sigmoid_pair_loss(s, p, scale=math.inf), "scale must be a positive"),
        (lambda s, p: sigmoid_pair_loss(s, p, bias=math.nan), "bias must be a finite number"),
        (lambda s, p: sigmoid_pair_loss(s, p, reduction="max"), "reduction must be one of"),
        (lambda s, p: sigmoid_pair_loss(s, p, on_scores=3), "on_scores must be None or a"),
        (lambda s, p: sigmoid_pair_loss(s, p[:1]), "positives"),
        (lambda s, p: sigmoid_pair_loss(s * math.nan, p), "scores must be finite"),
        (lambda s, p: sigmoid_pair_loss(s[:0], p[:0]), "at least one row"),
        (lambda s, p: sigmoid_pair_loss(s * 1e38, p, scale=100.0), "scores must lie in"),
        (lambda s, p: SigLIPLoss(bias=1e31), "bias must be a finite number"),
        (lambda s, p: SigLIPLoss(reduction="none"), "reduction must be one of"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument(call, match):
    scores, positives = torch.randn(3, 3), torch.eye(3, dtype=torch.bool)
    with pytest.raises(GradlabError, match=match):
        call(scores, positives)


@pytest.mark.parametrize("scale", [True, "10", None])  # a tensor: tests of the input rules
def test_a_scale_that_is_not_a_number_is_refused_with_its_range(scale):
    with pytest.raises(GradlabError) as refused:
        SigLIPLoss(scale=scale)
    assert str(refused.value) == (
        "scale must be a positive finite number at most 1e+30 (larger scales overflow float32 "
        f"next to the scores); got {scale!r}")


@pytest.mark.parametrize("scale", [1e31, 1e40, 1e300])
def test_a_scale_beyond_float32_is_refused_when_the_loss_is_built(scale):
    # float32 holds the logits scale x s + b of cosine scores only while scale fits it; beyond,
    # the loss was inf (and its gradient NaN) with validate=False, and with validate=True the
    # message blamed the scores
    with pytest.raises(GradlabError) as refused:
        SigLIPLoss(scale=scale, validate=False)
    message = str(refused.value)
    assert message.startswith("scale ") and "1e+30" in message
    assert message.endswith(f"got {scale!r}")
    with pytest.raises(GradlabError, match=r"^scale "):
        sigmoid_pair_loss(torch.rand(3, 3), torch.eye(3, dtype=torch.bool), scale=scale)


def test_the_largest_scale_keeps_float32_cosine_scores_finite():
    scores = torch.tensor([[0.9, -0.4], [1.0, 0.2]], requires_grad=True)
    loss = SigLIPLoss(scale=1e30, bias=-1e30, validate=False)(scores, torch.eye(2) > 0)
    loss.backward()
    # float64 reference of Eq. 1 (Zhai et al., 2023): softplus(-z (t s + b)) summed, / Q
    expected = 0.0
    pairs = [(0, 0), (0, 1), (1, 0), (1, 1)]
    for (q, c), s in zip(pairs, [0.9, -0.4, 1.0, 0.2], strict=True):
        z = 1.0 if q == c else -1.0
        logit = -z * (1e30 * s - 1e30)
        expected += max(logit, 0.0) + math.log1p(math.exp(-abs(logit)))
    assert loss.item() == pytest.approx(expected / 2, rel=1e-6)
    assert torch.isfinite(scores.grad).all()


@pytest.mark.parametrize(("scale", "bias"), [(1.0, -10.0), (10.0, 1e30), (1e3, 0.0)])
def test_scores_are_refused_beyond_the_bound_of_the_sum_of_their_logits(scale, bias):
    # the documented bound: |s| <= (max / (4 Q C) - |b|) / t, max = float32's largest value
    bound = (torch.finfo(torch.float32).max / (4 * 4) - abs(bias)) / scale
    eye = torch.eye(2, dtype=torch.bool)
    inside = torch.tensor([[bound * (1 - 1e-5), 0.0], [0.0, 0.5]])
    sigmoid_pair_loss(inside, eye, scale=scale, bias=bias, reduction="sum")  # accepted
    outside = torch.tensor([[-bound * (1 + 1e-5), 0.0], [0.0, 0.5]])
    assert torch.isfinite(outside).all()
    with pytest.raises(GradlabError, match=r"^scores must lie in \[-"):
        sigmoid_pair_loss(outside, eye, scale=scale, bias=bias)
    # without validation nothing is read, so nothing is refused
    sigmoid_pair_loss(outside, eye, scale=scale, bias=bias, validate=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float64])
def test_the_loss_keeps_the_scores_dtype(dtype):
    scores = torch.tensor([[0.5, 0.1], [0.2, 0.7]], dtype=dtype)
    loss = sigmoid_pair_loss(scores, torch.eye(2, dtype=torch.bool))
    assert loss.dtype == dtype
    expected, _ = siglip_loss(scores.double().tolist(), torch.eye(2, dtype=torch.bool).tolist(),
                              10.0, -10.0)
    assert loss.item() == pytest.approx(expected, rel=1e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_an_infinite_score_is_refused_when_the_logit_bound_is_beyond_the_dtype(dtype):
    """At scale 1e-30 the bound (max / 2 - |b|) / scale rounds to inf in the scores' dtype:
    an inf score lay within it and gave a finite loss (1.04 in float16)."""
    scores = torch.tensor([[math.inf, 0.5], [0.2, 0.1]], dtype=dtype)
    with pytest.raises(GradlabError, match=r"^scores must be finite; got inf"):
        sigmoid_pair_loss(scores, torch.eye(2, dtype=torch.bool), scale=1e-30, bias=0.0)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_logits_are_bounded_by_float32_in_which_they_are_computed(dtype):
    """A bias of -4e4 is past half of float16's largest value, but the logits are computed in
    float32: the loss (40,000, which float16 holds) is returned, not refused with the empty
    range [725, -725] that float16's own bound gave."""
    scores = torch.zeros(2, 2, dtype=dtype)
    loss = sigmoid_pair_loss(scores, torch.eye(2, dtype=torch.bool), scale=10.0, bias=-4e4)
    expected = 0.0
    for z in (1.0, -1.0, -1.0, 1.0):  # the pairs of a 2 x 2 identity, by rows
        logit = -z * -4e4  # -z (t s + b), s = 0: -log sigmoid(z x) = max(-z x, 0) + log1p(...)
        expected += max(logit, 0.0) + math.log1p(math.exp(-abs(logit)))
    # one rounding to the dtype: within its epsilon
    assert loss.dtype == dtype
    assert loss.item() == pytest.approx(expected / 2, rel=torch.finfo(dtype).eps)


@pytest.mark.parametrize(("rows", "columns", "reduction"), [(1, 2, "mean"), (2, 1, "sum"),
                                                             (3, 1, "mean")])  # fmt: skip
def test_half_precision_scores_whose_gradient_can_pass_float16_are_refused(rows, columns,
                                                                            reduction):
    """|dL/dS| = scale x sigmoid(.) x weight can reach scale x weight, the weight 1 / Q for the
    mean (Q rows, whatever the columns) and 1 for the sum: a reach past 65504 is refused, one
    at most 65504 is not."""
    weight = 1.0 if reduction == "sum" else 1.0 / rows
    scores = torch.zeros(rows, columns, dtype=torch.float16)
    positives = torch.zeros(rows, columns, dtype=torch.bool)
    too_large = 70000.0 / weight
    with pytest.raises(GradlabError) as caught:
        sigmoid_pair_loss(scores, positives, scale=too_large, bias=0.0, reduction=reduction)
    through = " / the rows" if reduction == "mean" else ""
    assert str(caught.value) == (
        "scores must keep the gradient within torch.float16's largest value 65504 (dL/dS is "
        "computed in float32 and returned in the scores' dtype); got scores whose |dL/dS| can "
        f"reach {too_large * weight:.3g} (scale{through}); pass scores.float() for a float32 "
        "gradient")
    fits = 65504.0 / weight
    loss = sigmoid_pair_loss(scores, positives, scale=fits, bias=0.0, reduction=reduction)
    assert loss.item() == pytest.approx(rows * columns * math.log(2.0) * weight, rel=1e-3)


def test_the_gradient_bound_of_half_precision_scores_is_float32s_under_any_default_dtype():
    """dL/dS of float16 scores is computed in float32, so its bound is scale x weight rounded
    to float32: a scale of 65504.000001 rounds to 65504, which float16 holds, under a float64
    default dtype too."""
    scores = torch.zeros(1, 2, dtype=torch.float16)
    positives = torch.tensor([[True, False]])
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        loss = sigmoid_pair_loss(scores, positives, scale=65504.000001, bias=0.0)
    finally:
        torch.set_default_dtype(before)
    assert loss.dtype == torch.float16
    assert loss.item() == pytest.approx(2 * math.log(2.0), rel=1e-3)


def test_an_unvalidated_call_reads_nothing_back_from_the_device(monkeypatch):
    """validate=False: no check, so no host read at all (the loss is all on the device)."""
    scores, eye = torch.randn(4, 4), torch.eye(4, dtype=torch.bool)
    assert host_reads(monkeypatch, lambda: sigmoid_pair_loss(scores, eye, validate=False)) == []
    # the validated call's one transfer
    assert host_reads(monkeypatch, lambda: sigmoid_pair_loss(scores, eye)) == ["tolist"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_internal_tensors_are_made_on_the_scores_device(dtype):
    """Under another default device (meta, the stand-in for a GPU) the loss is the same, on
    the scores' device: half precision's overflow bounds included."""
    scores = torch.tensor([[0.5, -0.2], [0.1, 0.3]], dtype=dtype)
    positives = torch.eye(2, dtype=torch.bool)
    assert_unchanged_under_another_default_device(
        lambda: sigmoid_pair_loss(scores, positives, scale=10.0, bias=-1.0), scores.device)
