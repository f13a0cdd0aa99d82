"""Half-precision scores (float16, bfloat16): the score losses compute in float32 and return
in the input's dtype (the glossary's rule). The value and the gradient are those of the same
call on the scores converted to float32, rounded once to the input's dtype; computing in half
precision instead is several per cent off on a 256 x 256 batch."""

import functools
import math
import re

import pytest
import torch
import torch.nn.functional as F_torch

import gradlab
import gradlab.functional as F
from gradlab import GradlabError
from gradlab.validation import skip_value_checks
from tests.reference.histogram_losses_loops import fappy_algorithm1, fastap_query

N = 256
EYE = torch.eye(N, dtype=torch.bool)
LOSSES = {
    "nt_xent both": lambda s: F.nt_xent_loss(s, EYE, temperature=0.1),
    "nt_xent i2t": lambda s: F.nt_xent_loss(s, EYE, temperature=0.05, direction="i2t"),
    "max_violation": lambda s: F.max_violation_triplet_loss(s, EYE, margin=0.2),
    "sigmoid_pair": lambda s: F.sigmoid_pair_loss(s, EYE, scale=10.0, bias=-10.0),
}

OVERFLOW = "scores must keep the gradient within "
"""How a refusal of a half-precision gradient that could overflow begins, on scores passed."""

EMBEDDINGS_OVERFLOW = "embeddings (through their cosine scores) must keep the gradient within "
"""How it begins for a loss called on embeddings (the user passed no scores)."""


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("loss", LOSSES.values(), ids=LOSSES.keys())
def test_half_scores_are_computed_in_float32_and_returned_in_their_dtype(loss, dtype):
    scores = torch.randn(N, N, generator=torch.Generator().manual_seed(3)).clamp(-1, 1).to(dtype)
    half = scores.clone().requires_grad_()
    value = loss(half)
    value.backward()
    wide = scores.float().requires_grad_()
    reference = loss(wide)
    reference.backward()
    assert value.dtype == dtype and half.grad.dtype == dtype
    assert torch.equal(value, reference.to(dtype))
    assert torch.equal(half.grad, wide.grad.to(dtype))


def simclr_loop(scores: list[list[float]], temperature: float) -> float:
    """Chen et al. (2020), Eq. 1 in float64: view i against its partner i + n, its own score
    left out of the denominator, averaged over the 2n views."""
    views = len(scores)
    total = 0.0
    for i in range(views):
        partner = (i + views // 2) % views
        denominator = sum(math.exp(scores[i][k] / temperature) for k in range(views) if k != i)
        total -= math.log(math.exp(scores[i][partner] / temperature) / denominator)
    return total / views


@pytest.mark.parametrize("temperature", [0.5, 0.1, 0.05])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_simclr_recipe_in_half_precision_is_the_papers_loss(dtype, temperature):
    # docs/losses.md: the diagonal shifted by -1e4 in the scores' own dtype. The loss is
    # computed in float32, so |s| / T = 1e5 is no overflow; the loss itself fits the dtype.
    n = 8
    views = F_torch.normalize(torch.randn(2 * n, 16, generator=torch.Generator().manual_seed(5)))
    scores = (views @ views.T).to(dtype)
    own = torch.eye(2 * n, dtype=torch.bool)
    shifted = scores.masked_fill(own, -1e4).requires_grad_()
    loss = F.nt_xent_loss(shifted, own.roll(n, dims=1), temperature, direction="i2t")
    loss.backward()
    expected = simclr_loop(scores.double().tolist(), temperature)
    assert loss.dtype == dtype and loss.item() == pytest.approx(expected, rel=1e-2)
    assert bool(torch.isfinite(shifted.grad).all())


def test_a_half_precision_loss_beyond_its_dtype_is_refused():
    # A summed NT-Xent of 1000 queries that float16 cannot hold (it would read inf).
    scores = (torch.randn(1000, 1000, generator=torch.Generator().manual_seed(6)) * 3).half()
    eye = torch.eye(1000, dtype=torch.bool)
    wide = F.nt_xent_loss(scores.float(), eye, 0.1, reduction="sum").item()
    assert wide > torch.finfo(torch.float16).max
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within torch.float16's "
                                           r"largest value 65504 "):  # fmt: skip
        F.nt_xent_loss(scores, eye, 0.1, reduction="sum")
    # The mean of the same losses fits: it is computed and returned.
    mean = F.nt_xent_loss(scores, eye, 0.1)
    assert mean.item() == pytest.approx(wide / 1000, rel=1e-3)


FOUR_PER_CLASS = (torch.arange(512) // 4).unsqueeze(0) == (torch.arange(512) // 4).unsqueeze(1)
SUMMED = {
    # VSE++'s summed hinge (Faghri et al. 2018, Eq. 5) and SigLIP's summed pairs (Zhai et al.
    # 2023, Eq. 1) of 512 queries whose scores float16 holds but whose loss it cannot: (loss,
    # the scores' spread). With four positives a query, every positive's hinge counts (at a
    # spread of 6 the loss is 75,500; a bound of one hinge per query would say 25,300).
    "max_violation": (lambda s, reduction: F.max_violation_triplet_loss(
        s, torch.eye(512, dtype=torch.bool), margin=0.2, reduction=reduction), 30.0),
    "max_violation four positives": (lambda s, reduction: F.max_violation_triplet_loss(
        s, FOUR_PER_CLASS, margin=0.2, reduction=reduction), 6.0),
    "sigmoid_pair": (lambda s, reduction: F.sigmoid_pair_loss(
        s, torch.eye(512, dtype=torch.bool), scale=10.0, bias=-10.0, reduction=reduction), 30.0),
}


@pytest.mark.parametrize(("loss", "spread"), SUMMED.values(), ids=SUMMED.keys())
def test_a_summed_half_precision_loss_beyond_its_dtype_is_refused_not_inf(loss, spread):
    scores = (torch.randn(512, 512, generator=torch.Generator().manual_seed(7)) * spread).half()
    wide = loss(scores.float(), "sum").item()  # the float32 loss the call would cast back
    assert wide > torch.finfo(torch.float16).max
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within torch.float16's "
                                           r"largest value 65504 "):  # fmt: skip
        loss(scores, "sum")
    # the mean fits float16 (58,000 for SigLIP, close to its largest value): computed, returned
    mean = loss(scores, "mean")
    assert math.isfinite(mean.item())
    assert mean.item() == pytest.approx(loss(scores.float(), "mean").item(), rel=1e-3)


def _refusal(formula: str) -> str:
    """The refusal's text around its bound, whose digits the pattern leaves open."""
    return (r"^scores must keep the loss within torch\.float16's largest value 65504 \(the loss "
            r"is returned in the scores' dtype\); got scores whose loss can reach [0-9.e+]+ \("
            + re.escape(formula) + r"\); pass scores\.float\(\) for a float32 loss$")  # fmt: skip


@pytest.mark.parametrize(
    ("call", "formula"),
    [
        (lambda s: F.nt_xent_loss(s, torch.eye(512, dtype=torch.bool), 0.1, reduction="sum"),
         "(largest score - lowest positive score) / temperature + ln C per query, "
         "reduction='sum'"),
        (lambda s: F.max_violation_triplet_loss(s, torch.eye(512, dtype=torch.bool),
                                                reduction="sum"),
         "margin + largest score - lowest positive score per positive, reduction='sum'"),
        (lambda s: F.sigmoid_pair_loss(s, torch.eye(512, dtype=torch.bool), reduction="sum"),
         "the loss itself in float32, reduction='sum'"),
    ],
    ids=["nt_xent", "max_violation", "sigmoid_pair"],
)  # fmt: skip
def test_the_refusal_says_which_bound_it_checked(call, formula):
    scores = (torch.randn(512, 512, generator=torch.Generator().manual_seed(8)) * 30).half()
    with pytest.raises(GradlabError, match=_refusal(formula)):
        call(scores)


TALL_LOSSES = {
    "max_violation": lambda s, m, direction: F.max_violation_triplet_loss(
        s, m, direction=direction, reduction="sum"),
    "nt_xent": lambda s, m, direction: F.nt_xent_loss(
        s, m, 0.1, direction=direction, reduction="sum"),
}


@pytest.mark.parametrize("loss", TALL_LOSSES.values(), ids=TALL_LOSSES.keys())
def test_each_direction_counts_its_own_queries(loss):
    # A tall matrix read by its columns (t2i) and the same matrix transposed read by its rows
    # (i2t): 2 queries with 2048 positives each among scores from -8000 to 8000, whose loss
    # sums beyond float16. Read the other way (4096 queries, one positive and one negative
    # of the same score each) the loss is small: a bound taken along the wrong side, or over
    # the other direction only, lets inf through.
    values = torch.linspace(-8000, 8000, 4096)
    tall = values.unsqueeze(1).expand(4096, 2).contiguous().half()  # scores[r, c] = v_r
    positives = (torch.arange(4096) % 2).unsqueeze(1) == torch.arange(2).unsqueeze(0)
    assert loss(tall.float(), positives, "t2i").item() > 65504
    for scores, mask, direction in ((tall, positives, "t2i"), (tall.T, positives.T, "i2t")):
        with pytest.raises(GradlabError, match=r"^scores must keep the loss within"):
            loss(scores, mask, direction)
        other = "i2t" if direction == "t2i" else "t2i"
        value = loss(scores, mask, other)
        assert value.item() == pytest.approx(loss(scores.float(), mask, other).item(), rel=1e-3)


@pytest.mark.slow
def test_an_nt_xent_sum_of_uniform_queries_is_refused_just_past_float16():
    # Scores all 1: each query's loss is ln C exactly. 9,000 queries of C = 1,000 sum to
    # 62,170 and are computed; 10,000 (69,078) are refused. Queries without positives (4,000
    # rows) add nothing to either, and cannot hide the others.
    for with_positives, fits in ((9000, True), (10000, False)):
        rows = with_positives + 4000
        scores = torch.ones(rows, 1000, dtype=torch.float16)
        mask = torch.zeros(rows, 1000, dtype=torch.bool)
        mask[torch.arange(with_positives), torch.arange(with_positives) % 1000] = True
        expected = with_positives * math.log(1000)
        if fits:
            value = F.nt_xent_loss(scores, mask, 0.1, direction="i2t", reduction="sum")
            assert value.item() == pytest.approx(expected, rel=1e-3)
        else:
            with pytest.raises(GradlabError, match=r"^scores must keep the loss within"):
                F.nt_xent_loss(scores, mask, 0.1, direction="i2t", reduction="sum")


def test_a_vse_loss_far_within_float16_is_computed_however_spread_its_scores():
    # 67,500 positives in rows of scores from -8000 to 8000, every negative 5000 below its
    # row's positives: each hinge is 0, and the bound (margin + row's largest - its lowest
    # positive, per positive) is 0.2 x 67,500 = 13,500. A bound over the whole matrix, over
    # the negatives, per query with every positive counted, or of at least 1 per positive
    # would refuse it.
    rows = torch.linspace(-8000, 8000, 300).unsqueeze(1)
    positives = (torch.arange(300).unsqueeze(1) + torch.arange(300).unsqueeze(0)) % 4 != 0
    scores = torch.where(positives, rows, rows - 5000).half()
    assert int(positives.sum()) == 67500
    value = F.max_violation_triplet_loss(scores, positives, margin=0.2, direction="i2t",
                                         reduction="sum")  # fmt: skip
    assert value.dtype == torch.float16 and value.item() == 0.0


def test_a_vse_mean_beyond_float16_by_its_margin_is_refused():
    # a mean hinge is at most margin + twice the largest |score|: a margin of 70,000 alone
    # takes a float16 mean beyond its dtype (60,000 fits: 60,000 - 1 + 0 per positive)
    scores, eye = torch.eye(4).half(), torch.eye(4, dtype=torch.bool)
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within"):
        F.max_violation_triplet_loss(scores, eye, margin=7e4, direction="i2t")
    value = F.max_violation_triplet_loss(scores, eye, margin=6e4, direction="i2t")
    assert value.item() == pytest.approx(6e4 - 1, rel=1e-3)


def test_a_siglip_mean_close_to_float16_s_largest_value_is_computed_exactly():
    # 256 queries x 512 candidates. The check is the float32 loss itself: a mean 0.2 % below
    # 65504 passes, the same scores x 1.003 (65,547) are refused; a bias or divisor (Q, not
    # C) wrong in the check moves the value past the limit or far below it
    base = torch.randn(256, 512, generator=torch.Generator().manual_seed(7))
    eye = torch.eye(256, 512, dtype=torch.bool)
    wide = F.sigmoid_pair_loss(base * 33.3, eye, scale=10.0, bias=-10.0).item()
    assert 0.995 * 65504 < wide < 65504, wide
    half = F.sigmoid_pair_loss((base * 33.3).half(), eye, scale=10.0, bias=-10.0)
    assert half.item() == pytest.approx(wide, rel=1e-3)
    with pytest.raises(GradlabError, match=r"^scores must keep the loss within"):
        F.sigmoid_pair_loss((base * 33.4).half(), eye, scale=10.0, bias=-10.0)


def test_a_siglip_loss_of_pairs_it_finds_right_is_computed_however_many():
    # every pair positive with logit 290: each term is ~e^-290, the summed loss 0; a check
    # that read the positives as negatives would see 262,144 x 290 and refuse it
    scores = torch.full((512, 512), 30.0).half()
    value = F.sigmoid_pair_loss(scores, torch.ones(512, 512, dtype=torch.bool), scale=10.0,
                                bias=-10.0, reduction="sum")  # fmt: skip
    assert value.item() == 0.0


def test_a_loss_of_exactly_float16_s_largest_value_is_returned():
    # four queries, each hinge 8188 - (-8188) = 16376 with margin 0: the summed loss is 65504,
    # float16's largest value itself, which float16 holds: returned, not refused
    scores = torch.tensor([[-8188.0, 8188.0]] * 4, dtype=torch.float16)
    positives = torch.tensor([[True, False]] * 4)
    value = F.max_violation_triplet_loss(scores, positives, margin=0.0, direction="i2t",
                                         reduction="sum")  # fmt: skip
    assert value.item() == torch.finfo(torch.float16).max


def test_float64_scores_beyond_float32_s_range_are_computed_in_float64():
    # NT-Xent computes half precision in float32 and float64 in float64: scores of 1e39
    # (past float32's largest value) are no overflow there
    scores = torch.tensor([[1e39, 0.0], [0.0, 1e39]], dtype=torch.float64)
    value = F.nt_xent_loss(scores, torch.eye(2, dtype=torch.bool), 1.0)
    assert value.dtype == torch.float64 and value.item() == 0.0


EMBEDDING_LOSSES = {
    "smooth_ap": lambda e, y: F.smooth_ap_loss(e, y, tau=0.05),
    "smooth_ap cross-modal": lambda e, y: F.smooth_ap_loss(
        e[:4], candidates=e, positives=y[:4].unsqueeze(1) == y.unsqueeze(0), tau=0.05),
    "fastap": lambda e, y: F.fastap_loss(e, y),
    "fappy": lambda e, y: F.fappy_loss(e, y, delta_min=0.25),
    "blackbox_ap": lambda e, y: F.blackbox_ap_loss(e, y),
}


@pytest.mark.parametrize("loss", EMBEDDING_LOSSES.values(), ids=EMBEDDING_LOSSES.keys())
def test_a_float16_batch_with_an_all_zero_row_is_read_as_float32_reads_it(loss):
    """A zero embedding scores 0 against every other (``F.normalize`` of float32); in float16
    its normalisation was 0 / 0: NaN scores, a NaN loss (SmoothAP, FastAP) or a refusal of
    NaN scores the caller never passed (FAPPY, Blackbox AP)."""
    generator = torch.Generator().manual_seed(8)
    embeddings = torch.randn(8, 6, generator=generator)
    embeddings[3] = 0.0
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    half = embeddings.half().requires_grad_()
    wide = embeddings.half().float().requires_grad_()  # the same numbers, computed in float32
    value, reference = loss(half, labels), loss(wide, labels)
    assert math.isfinite(value.item())
    assert value.item() == pytest.approx(reference.item(), rel=2e-2, abs=2e-3)


HISTOGRAM_CASES = [("fastap", 2048), ("fastap", 10_000), ("fappy", 2**-15),
                   pytest.param("fappy", 2**-17, marks=pytest.mark.slow)]  # the loops: seconds


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize(("loss", "setting"), HISTOGRAM_CASES)
@pytest.mark.slow
def test_histogram_losses_bin_half_precision_in_float32(dtype, loss, setting):
    """Fine bins in half precision: FastAP's 2049 bin centres are 641 distinct bfloat16 numbers
    (AP read -1.83); FAPPY's bin index of 2^-15 bins overflowed float16, and in bfloat16 a loss
    of 0.33 read 0.02 at 2^-20. Both compute in float32 now: the float64 loops on the same
    rounded inputs, within the result's rounding to its dtype."""
    generator = torch.Generator().manual_seed(2)
    embeddings = torch.randn(6, 4, generator=generator).to(dtype)
    labels = [0, 0, 1, 1, 2, 2]
    rounded = embeddings.double().tolist()  # the inputs the call sees, exactly
    if loss == "fastap":
        got = F.fastap_loss(embeddings, torch.tensor(labels), num_bins=setting)
        aps = [fastap_query(rounded, labels, q, setting) for q in range(6)]
        expected = 1.0 - math.fsum(aps) / 6
    else:
        got = F.fappy_loss(embeddings, torch.tensor(labels), delta_min=setting)
        expected = fappy_algorithm1(rounded, labels, setting)
    assert got.dtype == dtype
    # float32 arithmetic (about 1e-6 here), then one rounding to the dtype
    assert got.item() == pytest.approx(expected, rel=2 * torch.finfo(dtype).eps, abs=1e-5)


def _decomposition_fields_equal(parts, wide, dtype):
    for name, field, reference in zip(parts._fields, parts, wide, strict=True):
        if reference.is_floating_point():
            assert field.dtype == dtype, name
            torch.testing.assert_close(field, reference.to(dtype), rtol=0, atol=0,
                                       equal_nan=True, msg=name)  # bit for bit, NaN as NaN
        else:  # the indices stay int64
            assert field.dtype == reference.dtype and torch.equal(field, reference), name


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_decomposition_of_half_embeddings_is_computed_in_float32(dtype):
    # at tau = 0.01 the rows' sums of sigmoids in float16 put dAP/dq off by up to 100 %
    generator = torch.Generator().manual_seed(0)
    embeddings = torch.randn(8, 16, generator=generator).to(dtype)
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    parts = F.in_batch_decomposition(embeddings, labels, tau=0.01)
    _decomposition_fields_equal(parts, F.in_batch_decomposition(embeddings.float(), labels,
                                                                tau=0.01), dtype)  # fmt: skip
    exact = F.in_batch_decomposition(embeddings.double(), labels, tau=0.01).grad
    representable = exact.abs() > torch.finfo(dtype).tiny  # below it the result rounds to 0
    error = (parts.grad.double() - exact).abs()[representable]
    assert (error <= 2 * torch.finfo(dtype).eps * exact.abs()[representable]).all()
    queries, candidates = embeddings[:3], embeddings[3:]
    positives = torch.rand(3, 5, generator=generator) < 0.5
    mask = torch.tensor([True, True, False, True, True])
    parts = F.smooth_ap_decomposition(queries, candidates, positives, 0.05, candidate_mask=mask)
    wide = F.smooth_ap_decomposition(queries.float(), candidates.float(), positives, 0.05,
                                     candidate_mask=mask)  # fmt: skip
    _decomposition_fields_equal(parts, wide, dtype)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("direction", ["i2t", "both"])
def test_every_half_call_that_validate_accepts_has_a_finite_gradient(direction, reduction):
    # Scores built to make the gradient as large as it gets (one negative far above the rest
    # takes the whole softmax: |dL/dS| ~ 1/T there) and temperatures across the edge of
    # float16: every call accepted has a finite gradient, and the sweep crosses the edge (a
    # bound below the gradient would let an infinite one through).
    generator = torch.Generator().manual_seed(9)
    refused = accepted = 0
    for rows, cols in ((6, 6), (5, 8), (1, 4)):
        scores = torch.rand(rows, cols, generator=generator) - 0.5
        scores[:, -1] = 0.999  # a negative far above, in units of T
        mask = torch.zeros(rows, cols, dtype=torch.bool)
        mask[torch.arange(rows), torch.arange(rows) % (cols - 1)] = True
        for temperature in torch.logspace(-3, -6, 31).tolist():
            leaf = scores.half().requires_grad_()
            try:
                value = F.nt_xent_loss(leaf, mask, temperature, direction=direction,
                                       reduction=reduction)  # fmt: skip
            except GradlabError as error:
                assert "must keep the" in str(error)
                refused += 1
                continue
            value.backward()
            assert bool(torch.isfinite(leaf.grad).all()), (rows, cols, temperature)
            accepted += 1
    assert refused > 0 and accepted > 0


@pytest.mark.parametrize(("loss", "refused", "accepted"), [
    (lambda s, v: F.nt_xent_loss(s, EYE[:4, :4], temperature=v), 1e-6, 2e-5),
    (lambda s, v: F.sigmoid_pair_loss(s, EYE[:4, :4], scale=v, bias=0.0), 1e6, 2e5),
])  # fmt: skip
def test_a_half_gradient_past_its_dtype_is_refused_and_one_within_is_finite(loss, refused,
                                                                             accepted):
    # float16 scores: the loss fits, but dL/dS (1/T or SigLIP's scale over the 4 queries)
    # does not, and came back as inf after validate=True passed the call
    scores = torch.zeros(4, 4, dtype=torch.float16)
    with pytest.raises(GradlabError, match=rf"^{re.escape(OVERFLOW)}"
                                           r"torch\.float16's largest value 65504 "):  # fmt: skip
        loss(scores.clone().requires_grad_(), refused)
    leaf = scores.clone().requires_grad_()
    loss(leaf, accepted).backward()
    assert bool(torch.isfinite(leaf.grad).all())
    with skip_value_checks():  # what validate=True let through before: an infinite gradient
        leaf = scores.clone().requires_grad_()
        loss(leaf, refused).backward()
    assert not bool(torch.isfinite(leaf.grad).all())


def _gradient_refusal(call) -> str:
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


@pytest.mark.parametrize(("direction", "reduction", "bound", "formula"), [
    # 3 rows and 2 columns hold a positive: the rows' count and the columns' differ
    ("i2t", "mean", 1e6 / 3, ""),
    ("t2i", "mean", 1e6 / 2, ""),
    ("both", "mean", 1e6 / 3 + 1e6 / 2, ""),
    ("both", "sum", 2e6, " (reduction='sum': over none)"),
])  # fmt: skip
def test_the_gradient_refusal_states_its_bound_for_each_direction_and_reduction(
    direction, reduction, bound, formula,
):
    mask = torch.zeros(4, 5, dtype=torch.bool)
    mask[0, 1] = mask[1, 1] = mask[2, 3] = True  # rows 0, 1, 2; columns 1 and 3
    scores = torch.zeros(4, 5, dtype=torch.float16)
    message = _gradient_refusal(lambda: F.nt_xent_loss(scores, mask, 1e-6, direction=direction,
                                                       reduction=reduction))  # fmt: skip
    assert message == (
        f"{OVERFLOW}torch.float16's largest value 65504 (dL/dS is "
        "computed in float32 and returned in the scores' dtype); got scores whose |dL/dS| "
        f"can reach {bound:.3g} (1 / "
        f"temperature over the queries with a positive, per direction{formula}); pass "
        "scores.float() for a float32 gradient")


@pytest.mark.parametrize(("reduction", "bound", "formula"), [("mean", 2.5e5, "scale / the rows"),
                                                              ("sum", 1e6, "scale")])
def test_the_siglip_gradient_refusal_states_its_bound(reduction, bound, formula):
    scores = torch.zeros(4, 4, dtype=torch.float16)
    message = _gradient_refusal(lambda: F.sigmoid_pair_loss(
        scores, EYE[:4, :4], scale=1e6, bias=0.0, reduction=reduction))  # fmt: skip
    assert message == (
        f"{OVERFLOW}torch.float16's largest value 65504 (dL/dS is "
        "computed in float32 and returned in the scores' dtype); got scores whose |dL/dS| "
        f"can reach {bound:.3g} "
        f"({formula}); pass scores.float() for a float32 gradient")


def test_a_gradient_bound_of_exactly_the_dtype_s_largest_value_is_accepted():
    # one query with a positive, i2t: the bound is 1 / T = 65504, float16's largest value,
    # which a gradient may reach: accepted (a strict comparison refused it), and finite
    mask = torch.zeros(3, 3, dtype=torch.bool)
    mask[0, 0] = True
    leaf = torch.zeros(3, 3, dtype=torch.float16).requires_grad_()
    F.nt_xent_loss(leaf, mask, 1 / 65504, direction="i2t").backward()
    assert bool(torch.isfinite(leaf.grad).all())


@pytest.mark.parametrize("pattern", ["tied", "random"])
@pytest.mark.slow
def test_every_half_smooth_ap_call_that_validate_accepts_has_a_finite_gradient(pattern):
    # float16 scores at temperatures across the edge, tied scores the worst case (every
    # sigmoid at its steepest): each call accepted has a finite gradient, summed APs and the
    # loss's mean alike, and the sweep crosses the edge (a bound below the gradient fails it)
    generator = torch.Generator().manual_seed(5)
    positives = torch.eye(6, dtype=torch.bool) | torch.eye(6, dtype=torch.bool).roll(1, 1)
    scores = (torch.zeros(6, 6) if pattern == "tied"
              else torch.rand(6, 6, generator=generator) * 1e-3)  # fmt: skip
    embeddings = torch.ones(12, 3) + (0 if pattern == "tied" else
                                      1e-3 * torch.randn(12, 3, generator=generator))  # fmt: skip
    refused = accepted = 0
    for tau in torch.logspace(-3, -7, 41).tolist():
        for call, leaf in (
            (lambda s, t=tau: F.smooth_ap(s, positives, t).nansum(), scores.half()),
            (lambda e, t=tau: F.smooth_ap_loss(e, torch.arange(12) % 4, tau=t),
             embeddings.half()),
        ):
            leaf = leaf.clone().requires_grad_()
            try:
                value = call(leaf)
            except GradlabError as error:
                begins = OVERFLOW if leaf.shape == scores.shape else EMBEDDINGS_OVERFLOW
                assert str(error).startswith(begins + "torch.float16's largest value 65504")
                refused += 1
                continue
            value.backward()
            assert bool(torch.isfinite(leaf.grad).all()), (tau, leaf.shape)
            accepted += 1
    assert refused > 0 and accepted > 0


def test_half_precision_smooth_ap_without_a_gradient_is_not_refused_for_it():
    # no gradient is computed, so none can overflow: the refusal spoke of one under no_grad
    tied = torch.zeros(4, 4, dtype=torch.float16)
    positives = torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 1)
    expected = F.smooth_ap(tied.float(), positives, 1e-7).half()
    assert torch.equal(F.smooth_ap(tied, positives, 1e-7), expected)  # no requires_grad
    with torch.no_grad():
        assert torch.equal(F.smooth_ap(tied.requires_grad_(True), positives, 1e-7), expected)


def test_the_smooth_ap_gradient_refusal_states_its_bound():
    tied = torch.zeros(4, 4, dtype=torch.float16, requires_grad=True)
    positives = torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 1)
    assert _gradient_refusal(lambda: F.smooth_ap(tied, positives, 1e-7)) == (
        f"{OVERFLOW}torch.float16's largest value 65504 (dL/dS is "
        "computed in float32 and returned in the scores' dtype); at tau=1e-07 SmoothAP's "
        f"|dAP/dS| can reach 1.25 / tau, {1.25 / 1e-7:.3g}; pass float32 or bfloat16 "
        "scores, or a larger tau")
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 7])  # 6 queries with a positive
    half = torch.ones(8, 3, dtype=torch.float16, requires_grad=True)
    assert _gradient_refusal(lambda: F.smooth_ap_loss(half, labels, tau=1e-6)) == (
        f"{EMBEDDINGS_OVERFLOW}torch.float16's largest value 65504 (dL/dS is "
        "computed in float32 and returned in the scores' dtype); at tau=1e-06 SmoothAP's "
        f"|dAP/dS| can reach 1.25 / tau over the 6 queries with a positive, "
        f"{1.25 / 1e-6 / 6:.3g}; pass float32 or bfloat16 embeddings, or a larger tau")
    queries, candidates = half[:4], half[4:]  # cross-modal: named as passed
    cross_modal = functools.partial(F.smooth_ap_loss, queries, candidates=candidates,
                                    positives=torch.eye(4, dtype=torch.bool), tau=1e-6)
    assert _gradient_refusal(cross_modal).startswith(
        "queries and candidates (through their cosine scores) must keep the gradient within")
    for dtype in (torch.bfloat16, torch.float32):  # their range holds it: no refusal
        F.smooth_ap(tied.to(dtype), positives, 1e-7)
    with skip_value_checks():  # validate off: what went through before, an inf gradient
        leaf = tied.detach().clone().requires_grad_()
        F.smooth_ap(leaf, positives, 1e-7).sum().backward()
    assert not bool(torch.isfinite(leaf.grad).all())


def test_a_smooth_ap_bound_of_exactly_float16s_largest_value_is_accepted():
    # 1.25 / tau = 65504 exactly: a gradient may reach the largest value, so the call is taken
    # (a strict comparison refused it), and its gradient is finite
    tied = torch.zeros(4, 4, dtype=torch.float16).requires_grad_()
    positives = torch.eye(4, dtype=torch.bool) | torch.eye(4, dtype=torch.bool).roll(1, 1)
    tau = 1.25 / 65504
    assert 1.25 / tau == 65504.0
    F.smooth_ap(tied, positives, tau).sum().backward()
    assert bool(torch.isfinite(tied.grad).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_blackbox_ap_of_half_scores_is_computed_in_float32(dtype):
    # in float16 the backward's perturbed scores s + lambda g rounded: at interpolation 1e-6
    # the perturbation vanished (a zero gradient where float32 gives millions), and the ranks'
    # positions past 2048 were not whole numbers
    generator = torch.Generator().manual_seed(5)
    scores = torch.randn(6, 40, generator=generator).to(dtype)
    positives = torch.rand(6, 40, generator=generator) < 0.3
    half = scores.clone().requires_grad_()
    value = F.blackbox_ap(half, positives, 200.0, 0.01)
    value.sum().backward()
    wide = scores.float().requires_grad_()
    reference = F.blackbox_ap(wide, positives, 200.0, 0.01)
    reference.sum().backward()
    assert value.dtype == dtype and half.grad.dtype == dtype
    assert torch.equal(value, reference.to(dtype))
    assert torch.equal(half.grad, wide.grad.to(dtype)) and half.grad.abs().sum() > 0


def test_blackbox_ap_refuses_float16_scores_whose_gradient_can_pass_float16():
    # tied scores (one-hot embeddings: every cosine 0): any perturbation reorders a row, and
    # each of the two rankings moves an entry by up to C - 1 ranks: |dAP/dS| up to
    # 2 (C - 1) / interpolation, which float16 held as inf (then NaN in the embeddings)
    labels = torch.tensor([0, 0, 1, 1])
    embeddings = torch.eye(4, dtype=torch.float16, requires_grad=True)
    for interpolation in (1e-5, 1e-6):
        bound = 2 * (4 - 1) / interpolation
        message = _gradient_refusal(functools.partial(
            F.blackbox_ap_loss, embeddings, labels, interpolation=interpolation, margin=0.0))
        assert message == (
            f"{EMBEDDINGS_OVERFLOW}torch.float16's largest value 65504 (dL/dS is computed in "
            f"float32 and returned in the scores' dtype); at interpolation={interpolation:g} "
            f"Blackbox AP's |dAP/dS| can reach 2 (C - 1) / interpolation, {bound:.3g} (C = 4 "
            "columns); pass float32 or bfloat16 embeddings, or a larger interpolation")
        scores = torch.zeros(4, 4, dtype=torch.float16, requires_grad=True)  # passed as scores
        assert _gradient_refusal(functools.partial(
            F.blackbox_ap, scores, torch.eye(4, dtype=torch.bool), interpolation, 0.0)) == (
            f"{OVERFLOW}torch.float16's largest value 65504 (dL/dS is computed in float32 and "
            f"returned in the scores' dtype); at interpolation={interpolation:g} Blackbox AP's "
            f"|dAP/dS| can reach 2 (C - 1) / interpolation, {bound:.3g} (C = 4 columns); pass "
            "float32 or bfloat16 scores, or a larger interpolation")
    # the bound at exactly 65504 is accepted, and that gradient is finite
    interpolation = 2 * (4 - 1) / 65504
    F.blackbox_ap_loss(embeddings, labels, interpolation=interpolation, margin=0.0).backward()
    assert torch.isfinite(embeddings.grad).all()
    # no gradient asked for (a validation pass): nothing to refuse
    with torch.no_grad():
        assert torch.isfinite(F.blackbox_ap_loss(embeddings, labels, interpolation=1e-6))


@pytest.mark.parametrize("delta_min", [2**-20, 2**-17])
def test_fappy_refuses_a_float16_gradient_it_cannot_hold_when_backward_runs(delta_min):
    # computed in float32, FAPPY's gradient (about 1 / (negatives x Delta) per bin) was handed
    # back to float16 embeddings as inf: [0, -inf, inf, inf]
    labels = torch.tensor([0, 0, 1, 1])
    embeddings = torch.eye(4, dtype=torch.float16, requires_grad=True)
    loss = F.fappy_loss(embeddings, labels, delta_min=delta_min)
    wide = torch.eye(4, requires_grad=True)
    F.fappy_loss(wide, labels, delta_min=delta_min).backward()
    reached = wide.grad.abs().max().item()
    assert reached > 65504  # the float32 gradient float16 cannot hold
    message = _gradient_refusal(loss.backward)
    assert message == (
        "embeddings must keep FAPPY's gradient within torch.float16's largest value 65504 (it "
        "is computed in float32 and returned in the embeddings' dtype; refused when backward "
        f"runs); at delta_min={delta_min:g} it reached {reached:.3g}; pass float32 or bfloat16 "
        "embeddings, or a larger delta_min")
    # validate=False reads nothing back: the gradient is returned as float16 holds it
    unchecked = torch.eye(4, dtype=torch.float16, requires_grad=True)
    F.fappy_loss(unchecked, labels, delta_min=delta_min, validate=False).backward()
    assert not torch.isfinite(unchecked.grad).all()
    # a gradient float16 holds passes (and equals the float32 one, rounded)
    held = torch.eye(4, dtype=torch.float16, requires_grad=True)
    F.fappy_loss(held, labels, delta_min=0.25).backward()
    expected = torch.eye(4, requires_grad=True)
    F.fappy_loss(expected, labels, delta_min=0.25).backward()
    assert torch.equal(held.grad, expected.grad.half())


@pytest.mark.parametrize("validate", [True, False])
def test_fappy_loss_module_refuses_the_float16_gradient_as_its_function_does(validate):
    # was: FAPPYLoss called its function with validate=False, so the refusal was never set up
    # and the module handed back [0, -inf, inf, ...] where fappy_loss refuses
    labels = torch.tensor([0, 0, 1, 1])
    module = gradlab.FAPPYLoss(delta_min=2**-20, validate=validate)
    embeddings = torch.eye(4, dtype=torch.float16, requires_grad=True)
    loss = module(embeddings, labels)
    if validate:
        function = F.fappy_loss(torch.eye(4, dtype=torch.float16, requires_grad=True), labels,
                                delta_min=2**-20)  # fmt: skip
        assert _gradient_refusal(loss.backward) == _gradient_refusal(function.backward)
    else:  # as the function's validate=False: returned as float16 holds it
        loss.backward()
        assert not torch.isfinite(embeddings.grad).all()


def test_an_empty_float16_batch_backward_through_fappy_gives_an_empty_gradient():
    # the refusal's check of the gradient reads its largest entry: an empty batch has none
    embeddings = torch.empty(0, 4, dtype=torch.float16, requires_grad=True)
    F.fappy_loss(embeddings, torch.empty(0, dtype=torch.long), delta_min=0.25).backward()
    assert embeddings.grad.shape == (0, 4) and embeddings.grad.dtype == torch.float16
