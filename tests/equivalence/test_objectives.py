"""``score_objective``: gradlab's losses (and any callable) as a loss of the score matrix.

Each objective is compared, in float64 on a small seeded problem, with references that do not
use the code under test: the wrapped loss module itself in its documented cross-modal or score
form, and loops written from the papers' formulas (InfoNCE, VSE++'s max-violation hinge,
SigLIP's sigmoid loss), one row at a time. The direction logic is checked against a hand loop
(``t2i`` is the row loss of the transposed matrix and mask, ``both`` the sum of the two), and
the reduction by its factor (the queries or pairs a mean divides by, counted from the mask).
"""

import math
import re

import pytest
import torch
import torch.nn.functional as F

from gradlab import GradlabError, MaxViolationTripletLoss, NTXentLoss, SmoothAPLoss
from gradlab.equivalence import ScoreObjective, score_objective
from gradlab.siglip_loss import SigLIPLoss

DIRECTIONS = {"both": ("i2t", "t2i"), "i2t": ("i2t",), "t2i": ("t2i",)}
NAN_MESSAGE = "scores must be finite; got NaN in row 1 (1 row of 5)"  # with_nan: [1, 2]


def problem(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """5 x 5 float64 scores in [-1, 1] and an asymmetric mask with a positive per row and column."""
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(5, 5, generator=generator, dtype=torch.float64) * 2.0 - 1.0
    positives = torch.eye(5, dtype=torch.bool)
    positives[0, 3] = positives[4, 1] = positives[4, 2] = True
    return scores, positives


def with_nan(scores: torch.Tensor) -> torch.Tensor:
    bad = scores.clone()
    bad[1, 2] = math.nan
    return bad


def info_nce_rows(scores, positives, temperature, reduction):
    """Rows as queries: ``-1/|P(q)| sum_p log softmax(S[q] / T)_p``, over rows with a positive."""
    terms = []
    for row, mask in zip(scores, positives, strict=True):
        if mask.any():
            log_norm = torch.logsumexp(row / temperature, dim=0)
            terms.append(-(row[mask] / temperature - log_norm).mean())
    total = torch.stack(terms).sum()
    return total if reduction == "sum" else total / len(terms)


def hinge_rows(scores, positives, margin, reduction):
    """Rows as queries: ``sum_{p in P(q)} [margin - S[q, p] + max_{n not in P(q)} S[q, n]]_+``."""
    terms = []
    for row, mask in zip(scores, positives, strict=True):
        hardest = row[~mask].max()
        terms.extend(torch.clamp(margin - row[mask] + hardest, min=0.0))
    total = torch.stack(terms).sum()
    return total if reduction == "sum" else total / len(terms)


def sigmoid_pairs(scores, positives, scale, bias, reduction):
    """Every pair once: ``-sum log sigmoid(z (scale s + bias))``, ``/ Q`` for the mean."""
    signs = positives.double() * 2.0 - 1.0
    total = -F.logsigmoid(signs * (scale * scores + bias)).sum()
    return total if reduction == "sum" else total / scores.shape[0]


def by_direction(row_reference, scores, positives, direction):
    """The hand loop over directions: rows for ``i2t``, the transposed problem for ``t2i``."""
    total = torch.zeros((), dtype=torch.float64)
    if direction in ("i2t", "both"):
        total = total + row_reference(scores, positives)
    if direction in ("t2i", "both"):
        total = total + row_reference(scores.T, positives.T)
    return total


# SmoothAP ----------------------------------------------------------------------------------


def smooth_ap_reference(tau: float, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """The objective on cosine scores, and ``SmoothAPLoss``'s cross-modal form on the vectors."""
    generator = torch.Generator().manual_seed(seed)
    queries = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    candidates = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    _, positives = problem(seed)
    scores = F.normalize(queries, dim=1) @ F.normalize(candidates, dim=1).T
    mine = score_objective(SmoothAPLoss(tau=tau))(scores, positives)
    reference = SmoothAPLoss(tau=tau)(queries, candidates=candidates, positives=positives)
    return mine, reference


def test_smooth_ap_objective_equals_the_cross_modal_loss_on_cosine_scores():
    for tau in (0.01, 0.5):
        mine, reference = smooth_ap_reference(tau)
        torch.testing.assert_close(mine, reference, rtol=1e-12, atol=1e-12)


def test_smooth_ap_objective_carries_tau():
    sharp, _ = smooth_ap_reference(0.01)
    soft, _ = smooth_ap_reference(0.5)
    assert abs(float(sharp) - float(soft)) > 1e-3


def test_smooth_ap_objective_reports_name_rows_and_mean():
    objective = score_objective(SmoothAPLoss(tau=0.05))
    assert objective.name == "SmoothAPLoss"
    assert objective.directions == ("i2t",)
    assert objective.reduction == "mean"


def test_smooth_ap_objective_refuses_scores_whose_quotient_by_tau_overflows():
    # 1e300 / tau overflows to inf, and inf - inf gave row 0 (which has a positive) a NaN AP
    # and the objective a NaN: smooth_ap now refuses such scores by name, before any work
    # (a NaN AP of a row with a positive still makes the loss NaN: mean_ap_loss's own tests)
    scores, positives = problem()
    scores[0, 0] = scores[0, 1] = 1e300
    bound = 1e-30 * torch.finfo(torch.float64).max / 2  # tau x half the largest float64
    with pytest.raises(GradlabError, match=re.escape(f"scores must lie in [-{bound:.3g}, ")):
        score_objective(SmoothAPLoss(tau=1e-30))(scores, positives)


# NT-Xent and max-violation triplet ---------------------------------------------------------


@pytest.mark.parametrize("direction", ["both", "i2t", "t2i"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_nt_xent_objective_equals_the_hand_loop_over_directions(direction, reduction):
    scores, positives = problem(1)
    loss = NTXentLoss(temperature=0.3, direction=direction, reduction=reduction)
    mine = score_objective(loss)(scores, positives)

    def rows(s, p):
        return info_nce_rows(s, p, 0.3, reduction)

    torch.testing.assert_close(mine, by_direction(rows, scores, positives, direction))
    torch.testing.assert_close(mine, loss(scores, positives))


@pytest.mark.parametrize("direction", ["both", "i2t", "t2i"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_triplet_objective_equals_the_hand_loop_over_directions(direction, reduction):
    scores, positives = problem(2)
    loss = MaxViolationTripletLoss(margin=0.7, direction=direction, reduction=reduction)
    mine = score_objective(loss)(scores, positives)

    def rows(s, p):
        return hinge_rows(s, p, 0.7, reduction)

    torch.testing.assert_close(mine, by_direction(rows, scores, positives, direction))
    torch.testing.assert_close(mine, loss(scores, positives))


@pytest.mark.parametrize("loss_class", [NTXentLoss, MaxViolationTripletLoss])
@pytest.mark.parametrize("direction", ["both", "i2t", "t2i"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_direction_loss_objective_reports_name_directions_and_reduction(
    loss_class, direction, reduction
):
    objective = score_objective(loss_class(direction=direction, reduction=reduction))
    assert objective.name == loss_class.__name__
    assert objective.directions == DIRECTIONS[direction]
    assert objective.reduction == reduction


def test_nt_xent_objective_carries_temperature():
    scores, positives = problem(3)
    values = []
    for temperature in (0.1, 0.8):
        mine = score_objective(NTXentLoss(temperature=temperature, direction="i2t"))
        value = mine(scores, positives)
        torch.testing.assert_close(value, info_nce_rows(scores, positives, temperature, "mean"))
        values.append(float(value))
    assert abs(values[0] - values[1]) > 1e-3


def test_triplet_objective_carries_margin():
    scores, positives = problem(3)
    values = []
    for margin in (0.2, 0.9):
        mine = score_objective(MaxViolationTripletLoss(margin=margin, direction="i2t"))
        value = mine(scores, positives)
        torch.testing.assert_close(value, hinge_rows(scores, positives, margin, "mean"))
        values.append(float(value))
    assert abs(values[0] - values[1]) > 1e-3


@pytest.mark.parametrize(("direction", "count"), [("i2t", 4), ("t2i", 5)])
def test_nt_xent_sum_is_the_mean_times_the_queries_with_a_positive(direction, count):
    scores, positives = problem(4)
    positives[2, 2] = False  # row 2 has no positive now; column 2 keeps (4, 2)
    queries = positives if direction == "i2t" else positives.T
    factor = sum(1 for row in queries.tolist() if any(row))
    assert factor == count
    mean = score_objective(NTXentLoss(direction=direction))(scores, positives)
    total = score_objective(NTXentLoss(direction=direction, reduction="sum"))(scores, positives)
    torch.testing.assert_close(total, factor * mean)


def test_triplet_sum_is_the_mean_times_the_positive_pairs():
    scores, positives = problem(4)
    factor = sum(sum(row) for row in positives.tolist())
    assert factor == 8
    mean = score_objective(MaxViolationTripletLoss(margin=0.9, direction="i2t"))
    total = score_objective(MaxViolationTripletLoss(margin=0.9, direction="i2t", reduction="sum"))
    torch.testing.assert_close(total(scores, positives), factor * mean(scores, positives))


# SigLIP ------------------------------------------------------------------------------------


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_siglip_objective_counts_every_pair_once(reduction):
    scores, positives = problem(5)
    loss = SigLIPLoss(scale=4.0, bias=-1.5, reduction=reduction)
    mine = score_objective(loss)(scores, positives)
    torch.testing.assert_close(mine, sigmoid_pairs(scores, positives, 4.0, -1.5, reduction))
    torch.testing.assert_close(mine, loss(scores, positives))


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_siglip_objective_reports_name_rows_only_and_reduction(reduction):
    objective = score_objective(SigLIPLoss(reduction=reduction))
    assert objective.name == "SigLIPLoss"
    assert objective.directions == ("i2t",)
    assert objective.reduction == reduction


def test_siglip_objective_carries_scale_and_bias():
    scores, positives = problem(6)
    values = []
    for scale, bias in ((10.0, -10.0), (2.0, -10.0), (10.0, 1.0)):
        value = score_objective(SigLIPLoss(scale=scale, bias=bias))(scores, positives)
        torch.testing.assert_close(value, sigmoid_pairs(scores, positives, scale, bias, "mean"))
        values.append(float(value))
    assert len({round(value, 6) for value in values}) == 3


def test_siglip_sum_is_the_mean_times_the_rows():
    scores, positives = problem(6)
    scores = scores[:3]  # 3 rows, 5 columns: the mean divides by the rows, not the pairs
    positives = positives[:3]
    mean = score_objective(SigLIPLoss(scale=3.0, bias=-1.0))(scores, positives)
    total = score_objective(SigLIPLoss(scale=3.0, bias=-1.0, reduction="sum"))(scores, positives)
    torch.testing.assert_close(total, 3 * mean)


# validate ----------------------------------------------------------------------------------

SCORE_LOSSES = {
    "NTXentLoss": lambda validate: NTXentLoss(validate=validate),
    "MaxViolationTripletLoss": lambda validate: MaxViolationTripletLoss(validate=validate),
    "SigLIPLoss": lambda validate: SigLIPLoss(validate=validate),
}


@pytest.mark.parametrize("make", SCORE_LOSSES.values(), ids=SCORE_LOSSES.keys())
def test_objective_refuses_nan_scores_when_the_loss_validates(make):
    scores, positives = problem(7)
    objective = score_objective(make(True))
    with pytest.raises(GradlabError) as caught:
        objective(with_nan(scores), positives)
    assert str(caught.value) == NAN_MESSAGE


@pytest.mark.parametrize("make", SCORE_LOSSES.values(), ids=SCORE_LOSSES.keys())
def test_objective_lets_nan_through_like_the_loss_when_it_does_not_validate(make):
    scores, positives = problem(7)
    loss = make(False)
    assert math.isnan(float(loss(with_nan(scores), positives)))
    assert math.isnan(float(score_objective(loss)(with_nan(scores), positives)))


# any callable ------------------------------------------------------------------------------


def weighted_diagonal(scores, positives):
    return -(scores * positives).sum() / positives.sum()


class SummedHinge:
    """A callable loss object without ``__name__``; ``reduction`` as given."""

    def __init__(self, reduction):
        self.reduction = reduction

    def __call__(self, scores, positives):
        return torch.clamp(0.5 - scores[positives], min=0.0).sum()


def test_function_objective_is_the_function_on_the_rows():
    scores, positives = problem(8)
    objective = score_objective(weighted_diagonal)
    assert objective.name == "weighted_diagonal"
    assert objective.directions == ("i2t",)
    assert objective.reduction == "mean"
    torch.testing.assert_close(
        objective(scores, positives), -(scores[positives]).sum() / positives.sum()
    )


def test_function_with_a_sum_reduction_attribute_is_summed():
    def summed(scores, positives):
        return scores[positives].sum()

    summed.reduction = "sum"
    assert score_objective(summed).reduction == "sum"


@pytest.mark.parametrize(
    ("reduction", "expected"), [("sum", "sum"), ("mean", "mean"), ("none", "mean")]
)
def test_callable_object_is_named_by_its_class_with_its_reduction(reduction, expected):
    scores, positives = problem(8)
    loss = SummedHinge(reduction)
    objective = score_objective(loss)
    assert objective.name == "SummedHinge"
    assert objective.directions == ("i2t",)
    assert objective.reduction == expected
    torch.testing.assert_close(objective(scores, positives), loss(scores, positives))


@pytest.mark.parametrize(("bad", "got"), [(42, "int 42"), ("NTXentLoss", "str 'NTXentLoss'")])
def test_non_callable_is_refused_with_its_type_and_value(bad, got):
    with pytest.raises(GradlabError) as caught:
        score_objective(bad)
    assert str(caught.value) == (
        "loss must be a gradlab loss (SmoothAPLoss, NTXentLoss, MaxViolationTripletLoss, "
        f"SigLIPLoss) or a callable loss(scores, positives); got {got}"
    )


# ScoreObjective ----------------------------------------------------------------------------


@pytest.mark.parametrize("direction", ["both", "i2t", "t2i"])
def test_score_objective_sums_the_row_loss_over_its_directions(direction):
    scores, positives = problem(9)
    objective = ScoreObjective("hinge", SummedHinge("sum"), DIRECTIONS[direction])
    expected = by_direction(SummedHinge("sum"), scores, positives, direction)
    torch.testing.assert_close(objective(scores, positives), expected)


def test_score_objective_defaults_to_rows_and_mean():
    objective = ScoreObjective("hinge", SummedHinge("sum"))
    assert objective.directions == ("i2t",)
    assert objective.reduction == "mean"


@pytest.mark.parametrize(("loss", "got"), [
    (lambda scores, positives: (scores * positives).sum(1),
     "a torch.float64 tensor of shape (4,) (a value per query or pair: reduce it, e.g. .mean())"),
    (lambda scores, positives: 0.5, "float 0.5 (compute the loss with torch operations)"),
    (lambda scores, positives: positives.sum(), "a torch.int64 tensor of shape ()")],
    ids=["per query", "a number", "an integer"])  # fmt: skip
def test_a_loss_that_returns_no_single_float_value_is_refused_by_name(loss, got):
    # a loss left unreduced ended in torch's "grad can be implicitly created only for scalar
    # outputs" inside the step; a float in "'float' object has no attribute 'backward'"
    scores = torch.randn(4, 4, dtype=torch.float64, requires_grad=True)
    with pytest.raises(GradlabError) as raised:
        score_objective(loss)(scores, torch.eye(4, dtype=torch.bool))
    assert str(raised.value) == (
        f"the loss <lambda> must return one floating-point value, a 0-d tensor; got {got}")
