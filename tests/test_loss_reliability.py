"""Every accepted input to a loss gives a right answer or a clear error: one row per case.

Second derivatives (right, or refused naming ``create_graph``), NaN never dropped from a mean,
parameters that would overflow float32 refused with their range, degenerate and empty batches,
zero-width embeddings, meta tensors, and the functional helpers' input rules. References are
independent of gradlab: a dense float64 SmoothAP written here from its definition, and
``torch.autograd.gradgradcheck`` (finite differences of the analytic gradient).
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import gradlab
from gradlab import GradlabError
from gradlab import functional as fn
from gradlab.functional import smooth_ap
from gradlab.functional.fappy import false_positive_probability
from gradlab.functional.harmonic import discount_gap, discount_rate, logarithmic_integral
from gradlab.functional.losses import recording
from gradlab.functional.score_losses import max_violation_triplet_loss, nt_xent_loss, score_bound
from gradlab.functional.siglip import sigmoid_pair_loss
from gradlab.losses import DegenerateBatchWarning

LABELS = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])


def embeddings64(seed: int = 0, size: int = 8, dims: int = 5) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(size, dims, generator=generator, dtype=torch.float64)


def scores64(seed: int = 0, shape: tuple[int, int] = (4, 4)) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=generator, dtype=torch.float64) * 2 - 1


def dense_smooth_ap_loss(embeddings: torch.Tensor, labels: torch.Tensor, tau: float):
    """``1 - mean smooth AP`` from the definition, dense ``[B, B, B]``, query not a candidate."""
    size = embeddings.shape[0]
    normalized = F.normalize(embeddings, dim=1)
    scores = normalized @ normalized.T
    eye = torch.eye(size, dtype=torch.bool)
    # differences[q, i, j] = s_qj - s_qi: candidate j against positive i of query q
    differences = scores.unsqueeze(1) - scores.unsqueeze(2)
    excluded = eye.unsqueeze(0) | eye.unsqueeze(1) | eye.unsqueeze(2)
    sig = torch.sigmoid(differences / tau).masked_fill(excluded, 0.0)
    same = (labels.unsqueeze(0) == labels.unsqueeze(1)) & ~eye
    rank_all = 1.0 + sig.sum(dim=2)
    rank_positive = 1.0 + (sig * same.unsqueeze(1)).sum(dim=2)
    ap = (rank_positive / rank_all * same).sum(1) / same.sum(1)
    return 1.0 - ap[same.any(1)].mean()


def second_derivative(loss_fn, embeddings: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Gradient of ``|dL/dx|^2`` (a gradient penalty's double backward)."""
    leaf = embeddings.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(loss_fn(leaf, labels), leaf, create_graph=True)
    (hessian_vector,) = torch.autograd.grad(grad.pow(2).sum(), leaf)
    return hessian_vector


# --- 1. second derivatives: right or refused ---------------------------------------------------


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_smooth_ap_loss_second_derivative_matches_a_dense_float64_definition(tau):
    """The probe's reproduction: grad of g.pow(2).sum() after create_graph=True."""
    embeddings = embeddings64(1)
    got = second_derivative(gradlab.SmoothAPLoss(tau), embeddings, LABELS)
    want = second_derivative(lambda x, y: dense_smooth_ap_loss(x, y, tau), embeddings, LABELS)
    assert want.abs().max() > 1e-3  # a real second-order signal
    torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda s, p: smooth_ap(s, p, 0.5), id="smooth_ap-exact"),
        pytest.param(
            lambda s, p: smooth_ap(s, p, 0.5, backward="autograd"), id="smooth_ap-autograd"
        ),
        pytest.param(
            lambda s, p: smooth_ap(s, p, 0.3, candidate_mask=~torch.eye(4, dtype=torch.bool)),
            id="smooth_ap-candidate_mask",
        ),
    ],
)
@pytest.mark.slow
def test_smooth_ap_passes_gradgradcheck(call):
    positives = torch.tensor([[1, 0, 1, 0], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 1]]) > 0
    scores = scores64(2).requires_grad_(True)
    assert torch.autograd.gradgradcheck(lambda s: call(s, positives).nan_to_num(), (scores,))


def _module_call(loss_fn, form):
    if form == "scores":
        positives = torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 1)
        return lambda x: loss_fn(x, positives)
    if form == "cross_modal":
        candidates = embeddings64(5, size=4)
        return lambda x: loss_fn(x, candidates=candidates, positives=torch.eye(4) > 0)
    return lambda x: loss_fn(x, LABELS)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("loss_fn", "form"),
    [
        (gradlab.SmoothAPLoss(0.2), "in_batch"),
        (gradlab.SmoothAPLoss(0.2, include_query=True), "in_batch"),
        (gradlab.SmoothAPLoss(0.2), "cross_modal"),
        (gradlab.FastAPLoss(num_bins=10), "in_batch"),
        (gradlab.FAPPYLoss(delta_min=0.25), "in_batch"),
        (gradlab.NTXentLoss(temperature=0.5), "scores"),
        (gradlab.MaxViolationTripletLoss(margin=0.2), "scores"),
    ],
    ids=["smooth_ap", "smooth_ap-include_query", "smooth_ap-cross_modal", "fastap", "fappy",
         "nt_xent", "max_violation"],
)  # fmt: skip
def test_every_differentiable_loss_passes_gradgradcheck(loss_fn, form):
    inputs = (
        scores64(3) if form == "scores" else embeddings64(3, size=4 if form != "in_batch" else 8)
    )
    call = _module_call(loss_fn, form)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateBatchWarning)
        assert torch.autograd.gradgradcheck(call, (inputs.requires_grad_(True),), atol=1e-5)


@pytest.mark.parametrize("form", ["in_batch", "cross_modal"])
def test_blackbox_ap_refuses_create_graph_and_keeps_first_derivatives(form):
    loss_fn = gradlab.BlackboxAPLoss()
    call = _module_call(loss_fn, form)
    leaf = embeddings64(4, size=4 if form == "cross_modal" else 8).requires_grad_(True)
    with pytest.raises(GradlabError, match="create_graph"):
        torch.autograd.grad(call(leaf), leaf, create_graph=True)
    (grad,) = torch.autograd.grad(call(leaf), leaf)
    assert torch.isfinite(grad).all()


# --- 2. a per-query NaN is never dropped --------------------------------------------------------


def _with_nan(form: str) -> torch.Tensor:
    tensor = (
        scores64(6) if form == "scores" else embeddings64(6, size=4 if form != "in_batch" else 8)
    )
    tensor[1, 0] = math.nan
    return tensor


NAN_CASES = [
    ("smooth_ap", lambda **kw: gradlab.SmoothAPLoss(0.1, **kw), "in_batch"),
    ("smooth_ap-cross_modal", lambda **kw: gradlab.SmoothAPLoss(0.1, **kw), "cross_modal"),
    ("fastap", lambda **kw: gradlab.FastAPLoss(**kw), "in_batch"),
    ("blackbox_ap", lambda **kw: gradlab.BlackboxAPLoss(**kw), "in_batch"),
    ("blackbox_ap-cross_modal", lambda **kw: gradlab.BlackboxAPLoss(**kw), "cross_modal"),
    ("fappy", lambda **kw: gradlab.FAPPYLoss(delta_min=0.25, **kw), "in_batch"),
    ("nt_xent", lambda **kw: gradlab.NTXentLoss(**kw), "scores"),
    ("max_violation", lambda **kw: gradlab.MaxViolationTripletLoss(**kw), "scores"),
]


@pytest.mark.parametrize(
    ("make", "form"), [c[1:] for c in NAN_CASES], ids=[c[0] for c in NAN_CASES]
)
def test_a_nan_input_raises_under_validate(make, form):
    with pytest.raises(GradlabError, match="finite"):
        _module_call(make(), form)(_with_nan(form))


@pytest.mark.parametrize(
    ("make", "form"), [c[1:] for c in NAN_CASES], ids=[c[0] for c in NAN_CASES]
)
def test_a_nan_input_without_validate_gives_a_nan_loss_or_an_error(make, form):
    """The probe: SmoothAPLoss(validate=False) with one NaN embedding returned 0."""
    try:
        loss = _module_call(make(validate=False), form)(_with_nan(form))
    except GradlabError as error:  # Blackbox AP and FAPPY's cores refuse what they cannot rank
        assert "NaN" in str(error) or "finite" in str(error)
        return
    assert torch.isnan(loss)


def test_mean_ap_loss_with_the_defined_mask_keeps_a_nan_ap():
    ap = torch.tensor([0.5, math.nan, 1.0, math.nan])
    has_positive = torch.tensor([True, True, True, False])
    assert torch.isnan(gradlab.functional.mean_ap_loss(ap, torch.zeros(1), has_positive))
    # without the mask NaN means "no positive", as before
    assert gradlab.functional.mean_ap_loss(ap, torch.zeros(1)).item() == pytest.approx(0.25)


# --- parameters that overflow float32: refused at construction, with the range ---------------


@pytest.mark.parametrize(
    ("construct", "message"),
    [
        (lambda: gradlab.SmoothAPLoss(tau=1e-39), r"tau must be a finite number in \[1e-30, inf\)"),
        (lambda: smooth_ap(torch.zeros(2, 2), torch.eye(2) > 0, tau=1e-39), r"tau .*\[1e-30"),
        (lambda: gradlab.NTXentLoss(temperature=1e-300), r"temperature .* in \[1e-30, inf\)"),
        (lambda: gradlab.FAPPYLoss(delta_min=1e-20), r"delta_min .* in \[9.53674e-07, 1\]"),
        (lambda: gradlab.MaxViolationTripletLoss(margin=1e300), r"margin .* in \[0, 1e\+30\]"),
    ],
    ids=["smooth_ap-tau", "smooth_ap-functional-tau", "nt_xent-temperature", "fappy-delta_min",
         "max_violation-margin"],
)  # fmt: skip
def test_parameters_that_overflow_float32_are_refused_with_their_range(construct, message):
    with pytest.raises(GradlabError, match=message):
        construct()


FLOAT32_MAX = torch.finfo(torch.float32).max


def _largest_score(name, rows, columns, direction, dtype):
    """The documented bound on |s| (docs/loss_reliability.md): every summed term within
    max / (4 terms), so that the loss's sums stay within half of the dtype's largest value."""
    largest = torch.finfo(dtype).max
    directions = 2 if direction == "both" else 1
    if name == "nt_xent":  # per query (s_qc - s_qp) / T, max(Q, C) queries per direction
        return largest / (4 * max(rows, columns) * directions) * 0.5  # T = 0.5
    if name == "max_violation":  # margin - s_qp + s_qn per positive, Q C of them per direction
        return largest / (4 * rows * columns * directions) - 0.2
    return (largest / (4 * rows * columns) - 3.0) / 2.0  # SigLIP: |2 s + 3| per pair


SCORE_LOSS_CALLS = {
    "nt_xent": lambda s, p, d, r: nt_xent_loss(s, p, 0.5, direction=d, reduction=r),
    "max_violation": lambda s, p, d, r: max_violation_triplet_loss(s, p, 0.2, direction=d,
                                                                   reduction=r),
    "siglip": lambda s, p, d, r: sigmoid_pair_loss(s, p, scale=2.0, bias=3.0, reduction=r),
}
SCORE_BOUND_WHY = {
    "nt_xent": "the sum over the queries of every direction of (s_qc - s_qp) / temperature "
               "must fit {dtype}",
    "max_violation": "the sum of margin - s_qp + s_qn over every positive and direction must "
                     "fit {dtype}",
    "siglip": "the sum over every pair of |scale x s + bias| must fit {dtype}",
}


@pytest.mark.parametrize(("name", "direction"), [  # SigLIP has no direction
    ("nt_xent", "both"), ("nt_xent", "i2t"), ("max_violation", "both"), ("max_violation", "i2t"),
    ("siglip", "both")])  # fmt: skip
@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (3, 5)])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_scores_within_the_bound_keep_the_loss_finite_and_past_it_are_refused(
    name, shape, direction, reduction, dtype
):
    """Scores of +-1e38 gave an infinite float32 loss under validate=True: each score was
    bounded, their sums over queries, positives and directions were not. float64 scores are
    bounded by float64's range, in which they are computed."""
    rows, columns = shape
    largest = _largest_score(name, rows, columns, direction, dtype)
    positives = torch.zeros(rows, columns, dtype=torch.bool)
    positives[torch.arange(rows), torch.arange(rows) % columns] = True
    signs = torch.where(positives, -1.0, 1.0).to(dtype)  # positives low, negatives high
    call = SCORE_LOSS_CALLS[name]
    inside = (signs * largest * (1 - 1e-6)).requires_grad_(True)
    loss = call(inside, positives, direction, reduction)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(inside.grad).all()
    past = signs * largest * (1 + 1e-5)
    why = SCORE_BOUND_WHY[name].format(dtype=dtype)
    with pytest.raises(GradlabError) as refused:
        call(past, positives, direction, reduction)
    assert str(refused.value) == (
        f"scores must lie in [-{largest:.3g}, {largest:.3g}] ({why}); got a score of magnitude "
        f"{float(past.abs().max()):.3g}")


@pytest.mark.parametrize(("name", "size"), [("margin", 6_600), ("|bias|", 9_300)])
def test_a_margin_or_bias_that_alone_overflows_a_large_batch_is_refused_by_name(name, size):
    """A view of one zero score as a 6,600 x 6,600 (VSE++, both directions) or a 9,300 x 9,300
    (SigLIP) matrix: its float32 sum's budget per term falls below 1e30, so a margin or bias
    within the loss's range alone passes it."""
    scores = torch.zeros(1, 1).expand(size, size)  # no memory
    terms = size * size * (2 if name == "margin" else 1)
    budget = FLOAT32_MAX / (4 * terms)
    assert budget < 1e30
    if name == "margin":
        call, why = lambda: max_violation_triplet_loss(scores, torch.arange(size), 1e30), (
            "the sum of margin - s_qp + s_qn over every positive and direction must fit "
            "torch.float32")
    else:
        call, why = lambda: sigmoid_pair_loss(scores, torch.arange(size), 1.0, -1e30), (
            "the sum over every pair of |scale x s + bias| must fit torch.float32")
    with pytest.raises(GradlabError) as refused:
        call()
    assert str(refused.value) == (f"{name} must be below {budget:.3g} for a loss that sums "
                                  f"{terms} terms in torch.float32 ({why}); got 1e+30")


def test_an_offset_that_alone_overflows_the_sum_of_its_terms_is_refused():
    """A 32,768 x 32,768 SigLIP batch (about 1e9 pairs) holds float32 sums only while each
    logit stays below max / 4.3e9 (7.9e28): a bias of 1e29 (accepted by the loss's range) reaches
    that budget before any score does."""
    terms = 32_768 * 32_768
    budget = FLOAT32_MAX / (4 * terms)
    assert 7.9e28 < budget < 1e29
    with pytest.raises(GradlabError, match=r"^\|bias\| must be below 7.92e\+28 for a loss that "
                                           r"sums 1073741824 terms in torch.float32 \(why\); "
                                           r"got 1e\+29$"):  # fmt: skip
        score_bound(torch.float32, terms, 1e29, 1.0, "|bias|", "why")
    largest, _ = score_bound(torch.float32, terms, 1e28, 2.0, "|bias|", "why")
    assert largest == pytest.approx((budget - 1e28) / 2.0, rel=1e-15)
    with pytest.raises(GradlabError, match=r"^\|bias\| must be below "):  # at the budget itself
        score_bound(torch.float32, terms, budget, 1.0, "|bias|", "why")
    assert score_bound(torch.float32, 1, 0.0, 1.0, "x", "")[0] == FLOAT32_MAX / 4  # one term


def test_the_smallest_accepted_tau_gives_a_finite_loss_and_gradient_in_float32():
    embeddings = embeddings64(7).float().requires_grad_(True)
    loss = gradlab.SmoothAPLoss(tau=1e-30)(embeddings, LABELS)
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(embeddings.grad).all()


# --- degenerate and empty batches: the shared warning --------------------------------------------


DEGENERATE_LABELS = {
    "one_class": torch.zeros(8, dtype=torch.long),
    "singletons": torch.arange(8),
    "empty": torch.zeros(0, dtype=torch.long),
}


@pytest.mark.parametrize("layout", list(DEGENERATE_LABELS))
@pytest.mark.parametrize(
    "make",
    [gradlab.SmoothAPLoss, gradlab.FastAPLoss, gradlab.BlackboxAPLoss,
     lambda: gradlab.FAPPYLoss(delta_min=0.25)],
    ids=["smooth_ap", "fastap", "blackbox_ap", "fappy"],
)  # fmt: skip
def test_degenerate_batches_warn_and_give_a_zero_loss_with_zero_gradient(make, layout):
    labels = DEGENERATE_LABELS[layout]
    embeddings = embeddings64(8, size=len(labels)).requires_grad_(True)
    loss_fn = make()
    with pytest.warns(DegenerateBatchWarning):
        loss = loss_fn(embeddings, labels)
    loss.backward()
    assert loss.item() == pytest.approx(0.0, abs=1e-12) and loss_fn.degenerate_batches == 1
    # zero up to rounding (FastAP's ratio H+/H is 1 only to rounding on one class)
    assert embeddings.grad is None or not (embeddings.grad.abs() > 1e-12).any()


def test_a_one_class_batch_skips_the_blocks_yet_keeps_exact_values_and_recorded_ranks():
    """No negatives: AP exactly 1, gradient 0; a recording caller still gets the true ranks."""
    embeddings = embeddings64(9, size=6)
    scores = embeddings @ embeddings.T
    positives = ~torch.eye(6, dtype=torch.bool)
    exact = smooth_ap(scores.requires_grad_(True), positives, 0.1, candidate_mask=positives)
    assert exact.tolist() == [1.0] * 6
    (grad,) = torch.autograd.grad(exact.sum(), scores)
    assert not grad.any()
    with recording() as records, warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateBatchWarning)
        gradlab.SmoothAPLoss(0.1)(embeddings, torch.zeros(6, dtype=torch.long))
    (rank_a, rank_c) = records[0].forward.ranks[0]
    normalized = F.normalize(embeddings, dim=1)
    cosine = normalized @ normalized.T
    for q in range(6):  # A_i = 1 + sum_{j != i, q} G(s_qj - s_qi): a loop reference
        for position, i in enumerate(j for j in range(6) if j != q):
            want = 1.0 + sum(
                1.0 / (1.0 + math.exp(-(cosine[q, j] - cosine[q, i]).item() / 0.1))
                for j in range(6) if j not in (i, q)
            )  # fmt: skip
            assert rank_a[q, position].item() == pytest.approx(want, rel=1e-12)
    assert not rank_c.any()


# --- shapes and devices: zero-width embeddings, meta tensors -------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda x: gradlab.FastAPLoss()(x, LABELS),
        lambda x: gradlab.FAPPYLoss()(x, LABELS),
        lambda x: gradlab.SmoothAPLoss()(x, LABELS),
        lambda x: gradlab.BlackboxAPLoss()(x, LABELS),
        lambda x: gradlab.functional.fastap(x, LABELS),
        lambda x: gradlab.functional.fappy_loss(x, LABELS),
    ],
    ids=["FastAPLoss", "FAPPYLoss", "SmoothAPLoss", "BlackboxAPLoss", "fastap", "fappy_loss"],
)
def test_zero_width_embeddings_are_refused(call):
    """The probe: [8, 0] embeddings gave FastAP 0.857 and FAPPY 1.98."""
    with pytest.raises(GradlabError, match=r"at least one embedding dimension; got shape \(8, 0\)"):
        call(torch.zeros(8, 0))


META_CASES = [
    ("SmoothAPLoss", lambda m: gradlab.SmoothAPLoss()(m(torch.ones(8, 3)), LABELS)),
    ("SmoothAPLoss-labels", lambda m: gradlab.SmoothAPLoss()(torch.ones(8, 3), m(LABELS))),
    ("FastAPLoss", lambda m: gradlab.FastAPLoss()(m(torch.ones(8, 3)), LABELS)),
    ("FAPPYLoss", lambda m: gradlab.FAPPYLoss()(torch.ones(8, 3), m(LABELS))),
    ("BlackboxAPLoss", lambda m: gradlab.BlackboxAPLoss()(m(torch.ones(8, 3)), LABELS)),
    ("BlackboxAPLoss-cross_modal", lambda m: gradlab.BlackboxAPLoss()(
        torch.ones(2, 3), candidates=m(torch.ones(2, 3)), positives=torch.eye(2) > 0)),
    ("NTXentLoss", lambda m: gradlab.NTXentLoss()(m(torch.ones(2, 2)), torch.eye(2) > 0)),
    ("MaxViolationTripletLoss",
     lambda m: gradlab.MaxViolationTripletLoss()(torch.ones(2, 2), m(torch.eye(2) > 0))),
]  # fmt: skip


@pytest.mark.parametrize("call", [c[1] for c in META_CASES], ids=[c[0] for c in META_CASES])
def test_meta_tensors_are_refused_by_name(call):
    with pytest.raises(GradlabError, match="is a meta tensor"):
        call(lambda tensor: tensor.to("meta"))


# --- functional helpers -----------------------------------------------------------------------


@pytest.mark.parametrize("delta", [0.3, 0.7, 3.0, 1e-20])
def test_false_positive_probability_refuses_a_width_that_does_not_divide_two(delta):
    similarities = torch.eye(3)
    with pytest.raises(GradlabError, match=f"delta .*got {delta!r}"):
        false_positive_probability(similarities, torch.tensor([0, 0, 1]), delta)


def test_logarithmic_integral_promotes_integers():
    """The probe: li(torch.tensor([2])) returned 1 (truncated)."""
    got = logarithmic_integral(torch.tensor([2, 10]))
    assert got.is_floating_point()
    assert got.tolist() == pytest.approx([1.0451637801174928, 6.1655995047872979], rel=1e-6)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: discount_gap(torch.tensor([math.nan]), torch.tensor([2.0])), "a"),
        (lambda: discount_gap(torch.tensor([0.0]), torch.tensor([math.inf])), "b"),
        (lambda: discount_rate(torch.tensor([1.0]), torch.tensor([math.nan])), "count"),
    ],
)
def test_discount_with_non_finite_counts_raises_a_gradlab_error(call, name):
    with pytest.raises(GradlabError, match=f"^{name} must be finite for method='exact'"):
        call()


@pytest.mark.gpu
@pytest.mark.parametrize(
    "make",
    [gradlab.SmoothAPLoss, gradlab.FastAPLoss, gradlab.BlackboxAPLoss, gradlab.FAPPYLoss],
    ids=["smooth_ap", "fastap", "blackbox_ap", "fappy"],
)
def test_labels_on_another_device_are_refused_by_name(make):
    message = r"^tensors must be on one device; got embeddings on cuda"
    with pytest.raises(GradlabError, match=message):
        make()(torch.ones(8, 3, device="cuda"), LABELS)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "make",
    [lambda: gradlab.NTXentLoss(0.1), lambda: gradlab.MaxViolationTripletLoss(0.2),
     lambda: gradlab.SigLIPLoss()],
    ids=["nt_xent", "max_violation", "siglip"],
)  # fmt: skip
def test_a_score_matrix_and_its_positives_on_two_devices_are_refused_by_name(make):
    positives = torch.eye(4, dtype=torch.bool)
    with pytest.raises(GradlabError, match=r"^tensors must be on one device; got scores on "
                                           r"cuda:0, positives on cpu$"):  # fmt: skip
        make()(torch.eye(4, device="cuda"), positives)


@pytest.mark.parametrize("loss_fn", [gradlab.SmoothAPLoss(), gradlab.FastAPLoss(),
                                     gradlab.FAPPYLoss(), gradlab.BlackboxAPLoss()],
                         ids=lambda loss: type(loss).__name__)  # fmt: skip
def test_the_embedding_losses_ignore_the_scale_of_rows_within_the_documented_range(loss_fn):
    """docs/loss_reliability.md: rows of float32 entries from about 1e-11 to 1e18 give the loss
    of the unit rows (F.normalize's floor of 1e-12 and float32's overflow of the squares lie
    outside); a row scaled by 1e-13 or 1e19 would not."""
    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    expected = float(loss_fn(F.normalize(embeddings.double(), dim=1).float(), labels))
    for scale in (1e-11, 1.0, 1e18):
        assert float(loss_fn(embeddings * scale, labels)) == pytest.approx(expected, abs=1e-5)


def test_torch_func_works_on_the_plain_autograd_forms_as_the_docs_say():
    # docs/loss_reliability.md: torch.func.grad refuses the custom backwards (SmoothAP's fast
    # one, Blackbox AP's), takes smooth_ap(..., backward="autograd") with the same gradient,
    # and the plain-autograd losses as they are
    from torch.func import grad

    generator = torch.Generator().manual_seed(2)
    scores = torch.rand(4, 6, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 6, generator=generator) < 0.4
    positives[:, 0] = True
    leaf = scores.clone().requires_grad_(True)
    fn.smooth_ap(leaf, positives, 0.1).nansum().backward()  # the fast backward, by autograd
    functional = grad(lambda s: fn.smooth_ap(s, positives, 0.1, backward="autograd").nansum())
    torch.testing.assert_close(functional(scores), leaf.grad, rtol=1e-12, atol=1e-14)
    for refused in (lambda s: fn.smooth_ap(s, positives, 0.1).nansum(),
                    lambda s: fn.blackbox_ap(s, positives).nansum()):  # fmt: skip
        with pytest.raises(RuntimeError, match="must override the setup_context staticmethod"):
            grad(refused)(scores)
    embeddings, labels = torch.randn(8, 3, generator=generator, dtype=torch.float64), LABELS
    for plain in (lambda e: fn.fastap_loss(e, labels),
                  lambda e: fn.fappy_loss(e, labels, 0.25),
                  lambda e: fn.nt_xent_loss(e @ e.T, labels)):  # fmt: skip
        leaf = embeddings.clone().requires_grad_(True)
        plain(leaf).backward()
        torch.testing.assert_close(grad(plain)(embeddings), leaf.grad, rtol=1e-12, atol=1e-14)


def test_vmap_takes_the_plain_autograd_losses_without_validate_as_the_docs_say():
    # docs/loss_reliability.md: validate=True reads the batch back to the host, which vmap
    # refuses; without it the plain-autograd losses vmap, and SmoothAP never does
    from torch.func import vmap

    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(3, 6, 6, generator=generator, dtype=torch.float64)
    embeddings = torch.randn(3, 8, 4, generator=generator, dtype=torch.float64)
    positives = torch.eye(6, dtype=torch.bool)
    plain = {
        "nt_xent_loss": (lambda s: fn.nt_xent_loss(s, positives, validate=False), scores),
        "sigmoid_pair_loss": (lambda s: fn.sigmoid_pair_loss(s, positives, validate=False),
                              scores),
        "max_violation_triplet_loss": (
            lambda s: fn.max_violation_triplet_loss(s, positives, validate=False), scores),
        "fastap_loss": (lambda e: fn.fastap_loss(e, LABELS, validate=False), embeddings),
    }
    for loss, inputs in plain.values():
        expected = torch.stack([loss(batch) for batch in inputs])  # one call per batch
        torch.testing.assert_close(vmap(loss)(inputs), expected, rtol=1e-12, atol=1e-14)
    message = "Cannot access data pointer of Tensor that doesn't have storage"
    with pytest.raises(RuntimeError, match=message):
        vmap(lambda s: fn.nt_xent_loss(s, positives))(scores)
    for host_reader in (lambda s: fn.smooth_ap(s, positives, 0.1, validate=False),
                      lambda s: fn.smooth_ap(s, positives, 0.1, backward="autograd",
                                             validate=False),
                      lambda s: fn.tie_aware_ap(s, positives)):  # fmt: skip
        with pytest.raises(RuntimeError):
            vmap(host_reader)(scores)
    # FAPPY screens its similarities for NaN even without validate (a NaN has no bin): the docs
    # listed it among the losses that vmap
    from gradlab.functional.fappy import fappy_loss

    with pytest.raises(RuntimeError, match=message):
        vmap(lambda e: fappy_loss(e, LABELS, validate=False))(embeddings)


def test_the_documented_cosine_slack_of_fappy_is_the_one_it_applies():
    """docs/loss_reliability.md states FAPPY's slack past +-1 per dtype: the numbers are the
    ones the check applies, found here by bisection on the refusal itself over the numbers
    each dtype holds just above 1 (1 + k eps)."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / "docs" / "loss_reliability.md").read_text()
    labels = torch.tensor([0, 0, 1])

    def accepts(value: torch.Tensor) -> bool:
        scores = torch.tensor([[1.0, 0.0, 0.2], [0.0, 1.0, 0.1], [0.2, 0.1, 1.0]],
                              dtype=value.dtype)  # fmt: skip
        scores[0, 1] = scores[1, 0] = value
        try:
            false_positive_probability(scores, labels, 0.5)
        except GradlabError:
            return False
        return True

    slack = {}
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        eps = torch.finfo(dtype).eps
        low, high = 0, 1 << 20  # 1 + low eps accepted, 1 + high eps refused
        assert accepts(torch.tensor(1.0, dtype=dtype))
        assert not accepts(torch.tensor(1.0 + high * eps, dtype=dtype))
        while high - low > 1:
            middle = (low + high) // 2
            low, high = (middle, high) if accepts(torch.tensor(1.0 + middle * eps,
                                                              dtype=dtype)) else (low, middle)
        slack[dtype] = low * eps
    assert slack[torch.float32] == pytest.approx(1e-3, rel=1e-4)  # within a step of 1e-3
    assert "up to `1e-3` of rounding" in text
    assert f"(float16: `{slack[torch.float16]:.1e}`".replace("e-03", "e-3") in text
    assert f"bfloat16: `{slack[torch.bfloat16]:.4f}`)" in text
