"""gradient_anatomy: loops, closed-form oracles of three losses, no host sync, bad input."""

import math
from fractions import Fraction

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional import (
    GradientAnatomy,
    gradient_anatomy,
    gradient_counts,
    in_batch_layout,
    max_violation_triplet_loss,
    mean_ap_loss,
    nt_xent_loss,
    smooth_ap,
    tie_aware_ap,
)
from gradlab.functional.gradient_anatomy import HARD_DIVISORS, HARD_FRACTIONS, hardest_count
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.helpers.host_reads import host_reads
from tests.reference.anatomy_loops import anatomy_one_query


def _scores(seed, queries=5, candidates=40, per_query=3):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(queries, candidates, generator=generator, dtype=torch.float64) * 2 - 1
    positives = torch.zeros(queries, candidates, dtype=torch.bool)
    for q in range(queries):
        positives[q, torch.randperm(candidates, generator=generator)[:per_query]] = True
    return scores, positives


def _score_grad(loss_fn, scores, positives):
    leaf = scores.clone().requires_grad_(True)
    loss_fn(leaf, positives).backward()
    return leaf.grad


# --- the definitions, against loops -------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_matches_the_loop_definitions(seed):
    scores, positives = _scores(seed, candidates=37 + seed)
    generator = torch.Generator().manual_seed(100 + seed)
    grad = torch.randn(scores.shape, generator=generator, dtype=torch.float64)
    grad = grad * (torch.rand(scores.shape, generator=generator) < 0.4)  # many exact zeros
    grad[0] = 0.0  # a query without gradient
    grad[1, 3] = math.nan
    candidates = torch.rand(scores.shape, generator=generator) < 0.9 if seed % 2 else None
    absolute, relative = (1e-3, 0.05) if seed < 3 else (0.0, 0.0)
    anatomy = gradient_anatomy(
        grad,
        scores,
        positives,
        candidate_mask=candidates,
        absolute_threshold=absolute,
        relative_threshold=relative,
    )
    for q in range(scores.shape[0]):
        flags = [True] * scores.shape[1] if candidates is None else candidates[q].tolist()
        expected = anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                     flags, absolute, relative)  # fmt: skip
        assert anatomy.active_positives[q].item() == expected["active_positives"]
        assert anatomy.active_negatives[q].item() == expected["active_negatives"]
        assert anatomy.num_positives[q].item() == expected["num_positives"]
        assert anatomy.num_negatives[q].item() == expected["num_negatives"]
        assert anatomy.negative_rank[q].tolist() == expected["rank"]
        assert anatomy.without_gradient[q].item() == expected["without"]
        for field, key in (("active_negative_rank_mean", "rank_mean"),
                           ("active_negative_rank_max", "rank_max"),
                           ("hardest_1pct_share", "share_1"),
                           ("hardest_10pct_share", "share_10")):  # fmt: skip
            value = getattr(anatomy, field)[q].item()
            if math.isnan(expected[key]):
                assert math.isnan(value), field
            else:
                assert value == pytest.approx(expected[key], rel=1e-12), field


@pytest.mark.parametrize("seed", range(4))
def test_infinite_scores_rank_first_and_last_as_the_loops_rank_them(seed):
    # -inf and +inf among negatives, positives and non-candidates alike: a negative scoring
    # -inf is the last negative, never behind the positives or the non-candidates.
    scores, positives = _scores(seed, candidates=30)
    generator = torch.Generator().manual_seed(200 + seed)
    infinite = torch.rand(scores.shape, generator=generator) < 0.3
    signs = torch.where(torch.rand(scores.shape, generator=generator) < 0.5, -1.0, 1.0)
    scores = torch.where(infinite, signs.double() * math.inf, scores)
    grad = torch.randn(scores.shape, generator=generator, dtype=torch.float64)
    candidates = torch.rand(scores.shape, generator=generator) < 0.8 if seed % 2 else None
    anatomy = gradient_anatomy(grad, scores, positives, candidate_mask=candidates,
                               absolute_threshold=0.0, relative_threshold=0.0)
    for q in range(scores.shape[0]):
        flags = [True] * scores.shape[1] if candidates is None else candidates[q].tolist()
        expected = anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                     flags, 0.0, 0.0)  # fmt: skip
        assert anatomy.negative_rank[q].tolist() == expected["rank"]
        assert anatomy.active_negative_rank_max[q].item() == expected["rank_max"]
        for field, key in (("hardest_1pct_share", "share_1"), ("hardest_10pct_share", "share_10")):
            assert getattr(anatomy, field)[q].item() == pytest.approx(expected[key], rel=1e-12)


def test_a_negative_scoring_minus_inf_is_its_querys_last_negative_not_behind_the_others():
    anatomy = gradient_anatomy(torch.tensor([[-1.0, 0.5, 0.2]]),
                               torch.tensor([[0.5, -math.inf, 0.1]]),
                               torch.tensor([[True, False, False]]))  # fmt: skip
    assert anatomy.negative_rank.tolist() == [[0, 2, 1]]
    assert anatomy.active_negative_rank_max.tolist() == [2.0]


def test_degenerate_inputs_have_documented_results():
    empty = gradient_anatomy(torch.zeros(3, 0), torch.zeros(3, 0), torch.zeros(3, 0, dtype=bool))
    assert empty.active_negatives.tolist() == [0, 0, 0]
    assert empty.without_gradient.tolist() == [False, False, False]
    assert all(math.isnan(v) for v in empty.hardest_10pct_share.tolist())
    no_queries = gradient_anatomy(torch.zeros(0, 4), torch.zeros(0, 4), torch.zeros(0, 4) > 0)
    assert no_queries.active.shape == (0, 4)
    all_positive = gradient_anatomy(torch.ones(1, 3), torch.zeros(1, 3), torch.ones(1, 3) > 0)
    assert all_positive.active_positives.tolist() == [3]
    assert math.isnan(all_positive.hardest_1pct_share.item())


# --- closed-form oracles: three losses ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("margin", [0.05, 0.2, 2.5])
def test_max_violation_gives_gradient_to_the_hardest_negative_only_when_violated(seed, margin):
    scores, positives = _scores(seed)
    grad = _score_grad(lambda s, p: max_violation_triplet_loss(s, p, margin, direction="i2t"),
                       scores, positives)  # fmt: skip
    anatomy = gradient_anatomy(grad, scores, positives)
    for q in range(scores.shape[0]):
        row, flags = scores[q].tolist(), positives[q].tolist()
        negatives = [c for c in range(len(row)) if not flags[c]]
        hardest = max(negatives, key=lambda c: row[c])
        violating = [p for p in range(len(row)) if flags[p] and margin - row[p] + row[hardest] > 0]
        assert anatomy.active_negatives[q].item() == (1 if violating else 0)
        assert anatomy.active_positives[q].item() == len(violating)
        assert anatomy.without_gradient[q].item() == (not violating)
        active = torch.nonzero(anatomy.active[q] & ~positives[q]).flatten().tolist()
        assert active == ([hardest] if violating else [])
        if violating:
            assert anatomy.negative_rank[q, hardest].item() == 1
            assert anatomy.active_negative_rank_max[q].item() == 1.0
            assert anatomy.hardest_1pct_share[q].item() == 1.0


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("temperature", [0.05, 0.1, 1.0])
def test_nt_xent_gives_every_negative_its_softmax_weight(seed, temperature):
    scores, positives = _scores(seed)
    grad = _score_grad(lambda s, p: nt_xent_loss(s, p, temperature, direction="i2t"),
                       scores, positives)  # fmt: skip
    num_queries = scores.shape[0]
    # No threshold: every negative is active (its weight is positive).
    everything = gradient_anatomy(grad, scores, positives, absolute_threshold=0.0,
                                  relative_threshold=0.0)  # fmt: skip
    assert torch.equal(everything.active_negatives, (~positives).sum(dim=1))
    for q in range(num_queries):
        row, flags = scores[q].tolist(), positives[q].tolist()
        top = max(row)
        weights = [math.exp((s - top) / temperature) for s in row]
        softmax = [w / sum(weights) for w in weights]
        negatives = [c for c in range(len(row)) if not flags[c]]
        for c in negatives:  # dL/dS_qc = softmax_c / (T * Q)
            assert grad[q, c].item() == pytest.approx(softmax[c] / (temperature * num_queries),
                                                      rel=1e-9)  # fmt: skip
        ordered = sorted(negatives, key=lambda c: -row[c])
        mass = sum(softmax[c] for c in negatives)
        for fraction, field in ((0.01, "hardest_1pct_share"), (0.1, "hardest_10pct_share")):
            hard = ordered[: math.ceil(fraction * len(negatives))]
            expected = sum(softmax[c] for c in hard) / mass
            assert getattr(everything, field)[q].item() == pytest.approx(expected, rel=1e-9)
    # With the default relative threshold, a negative is active when its softmax weight is at
    # least 1 % of the query's largest |dL/dS| (times T * Q).
    default = gradient_anatomy(grad, scores, positives)
    for q in range(num_queries):
        largest = grad[q].abs().max().item() * temperature * num_queries
        row, flags = scores[q].tolist(), positives[q].tolist()
        top = max(row)
        weights = [math.exp((s - top) / temperature) for s in row]
        softmax = [w / sum(weights) for w in weights]
        expected = sum(1 for c in range(len(row)) if not flags[c] and softmax[c] >= 0.01 * largest)
        assert default.active_negatives[q].item() == expected


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tau", [0.01, 0.05])
def test_smooth_ap_anatomy_equals_weighted_gradient_counts(seed, tau):
    """One positive per query: |dL/dS_qj| = G'(s_j - s_i) / (Q R_i^2) for every negative j,
    which is exactly the weighted entry of gradient_counts (seed 000, Eq. 13) over Q."""
    scores, positives = _scores(seed, queries=8, candidates=60, per_query=1)
    scores = scores * 0.15  # spread the scores over a few operating-region widths
    grad = _score_grad(lambda s, p: _cross(s, p, tau), scores, positives)
    threshold = 0.005
    counts = gradient_counts(scores, positives, tau, threshold, weighted=True)
    anatomy = gradient_anatomy(grad, scores, positives, absolute_threshold=threshold / 8,
                               relative_threshold=0.0)  # fmt: skip
    assert torch.equal(anatomy.active_negatives, counts.per_query)
    assert counts.per_query.sum() > 0 and (counts.per_query < 59).all()  # the test can fail


def test_smooth_ap_in_batch_anatomy_equals_weighted_gradient_counts():
    generator = torch.Generator().manual_seed(7)
    embeddings = torch.randn(24, 3, generator=generator, dtype=torch.float64)
    labels = torch.arange(24) // 2  # one positive per query; the diagonal is not a candidate
    layout = in_batch_layout(embeddings, labels)
    leaf = layout.scores.detach().clone().requires_grad_(True)
    mean_ap_loss(smooth_ap(leaf, layout.positives, 0.05, candidate_mask=layout.candidate_mask),
                 leaf).backward()  # fmt: skip
    counts = gradient_counts(layout.scores, layout.positives, 0.05, 0.005, weighted=True,
                             candidate_mask=layout.candidate_mask)  # fmt: skip
    anatomy = gradient_anatomy(leaf.grad, layout.scores, layout.positives,
                               candidate_mask=layout.candidate_mask,
                               absolute_threshold=0.005 / 24, relative_threshold=0.0)  # fmt: skip
    assert torch.equal(anatomy.active_negatives, counts.per_query)
    assert 0 < counts.per_query.sum() < 24 * 22


def _cross(scores, positives, tau):
    return mean_ap_loss(smooth_ap(scores, positives, tau), scores)


# --- cost: no host synchronisation -------------------------------------------------------------

def test_no_host_sync(monkeypatch):
    scores, positives = _scores(0)
    grad = torch.randn(scores.shape, dtype=torch.float64)
    candidates = torch.rand(scores.shape) < 0.9
    assert host_reads(monkeypatch, lambda: gradient_anatomy(grad, scores, positives,
                                                            candidate_mask=candidates)) == []


@pytest.mark.gpu
def test_no_host_sync_on_cuda():
    scores, positives = _scores(0)
    scores, positives = scores.cuda(), positives.cuda()
    grad = torch.randn_like(scores)
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        anatomy = gradient_anatomy(grad, scores, positives, candidate_mask=positives | True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert anatomy.active.device.type == "cuda"


# --- bad input ----------------------------------------------------------------------------------

GRAD = torch.zeros(2, 3)
SCORES = torch.zeros(2, 3)
MASK = torch.zeros(2, 3, dtype=torch.bool)
BAD = [
    ("score_grad", dict(score_grad=[[0.0]])),
    ("score_grad", dict(score_grad=torch.zeros(2, 3, dtype=torch.long))),
    ("score_grad", dict(score_grad=torch.zeros(6))),
    ("scores", dict(scores=torch.zeros(3, 2))),
    ("scores", dict(scores=torch.zeros(2, 3, dtype=torch.int32))),
    ("positives", dict(positives=torch.zeros(2, 3))),
    ("positives", dict(positives=torch.zeros(2, 2, dtype=torch.bool))),
    ("candidate_mask", dict(candidate_mask=torch.zeros(2, 3))),
    ("candidate_mask", dict(candidate_mask=torch.zeros(3, 3, dtype=torch.bool))),
    ("absolute_threshold", dict(absolute_threshold=-1.0)),
    ("absolute_threshold", dict(absolute_threshold=float("inf"))),
    ("relative_threshold", dict(relative_threshold=1.5)),
    ("relative_threshold", dict(relative_threshold="0.1")),
]


@pytest.mark.parametrize(("argument", "change"), BAD)
def test_bad_input_names_the_argument(argument, change):
    kwargs = dict(score_grad=GRAD, scores=SCORES, positives=MASK) | change
    with pytest.raises(GradlabError, match=f"^{argument} "):  # the message starts with its name
        gradient_anatomy(**kwargs)


# --- non-finite input: documented behaviour (no host read, so not refused) --------------------


def test_nan_scores_leave_their_query_unranked_and_the_others_untouched():
    """A NaN score among a query's candidates: that query's ranks are 0 and its rank/hardness
    statistics NaN; its activity counts (score_grad only) and every other query are as without
    the NaN; a NaN score on a non-candidate changes nothing; all-NaN scores rank nothing."""
    scores, positives = _scores(1)
    grad = torch.randn(scores.shape, dtype=torch.float64)
    clean = gradient_anatomy(grad, scores, positives)
    poisoned = scores.clone()
    poisoned[0, (~positives[0]).nonzero()[0, 0]] = math.nan  # a negative of query 0
    poisoned[1, positives[1].nonzero()[0, 0]] = math.nan  # a positive of query 1
    got = gradient_anatomy(grad, poisoned, positives)
    for q in (0, 1):
        assert got.negative_rank[q].tolist() == [0] * scores.shape[1]
        for name in ("active_negative_rank_mean", "active_negative_rank_max",
                     "hardest_1pct_share", "hardest_10pct_share"):  # fmt: skip
            assert math.isnan(getattr(got, name)[q].item()), name
        assert got.active_negatives[q].item() == clean.active_negatives[q].item()
    for name in GradientAnatomy._fields:
        torch.testing.assert_close(getattr(got, name)[2:], getattr(clean, name)[2:],
                                   equal_nan=True)  # fmt: skip
    # a NaN on a non-candidate is ignored
    candidates = torch.ones_like(positives)
    candidates[0, 0] = False
    masked = scores.clone()
    masked[0, 0] = math.nan
    reference = gradient_anatomy(grad, scores, positives, candidate_mask=candidates)
    ignored = gradient_anatomy(grad, masked, positives, candidate_mask=candidates)
    for name in GradientAnatomy._fields:
        torch.testing.assert_close(getattr(ignored, name), getattr(reference, name),
                                   equal_nan=True)  # fmt: skip
    all_nan = gradient_anatomy(grad, torch.full_like(scores, math.nan), positives)
    assert not all_nan.negative_rank.any()
    assert torch.isnan(all_nan.hardest_10pct_share).all()


def test_nan_score_grad_entries_are_never_active():
    grad = torch.tensor([[math.nan, 1.0, math.nan, 0.5]])
    scores = torch.tensor([[0.9, 0.8, 0.1, 0.5]])
    positives = torch.tensor([[True, False, False, False]])
    anatomy = gradient_anatomy(grad, scores, positives)
    assert anatomy.active.tolist() == [[False, True, False, True]]
    assert anatomy.hardest_10pct_share.item() == pytest.approx(1.0 / 1.5)  # nan carries no mass


@pytest.mark.parametrize("masked", [False, True])
def test_result_stays_on_the_input_device_whatever_the_default_device(masked):
    # Internal tensors are made on the inputs' device: with torch's default device elsewhere
    # (here "meta"; "cuda" with CPU inputs in practice), every field is unchanged.
    generator = torch.Generator().manual_seed(14)
    scores = torch.rand(4, 6, generator=generator, dtype=torch.float64)
    grad = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    grad[grad.abs() < 0.5] = 0.0
    positives = torch.rand(4, 6, generator=generator) < 0.4
    candidates = torch.rand(4, 6, generator=generator) < 0.8 if masked else None
    assert_unchanged_under_another_default_device(
        lambda: gradient_anatomy(grad, scores, positives, candidate_mask=candidates), scores.device
    )


# --- edges the loops above do not reach ----------------------------------------------------------


def _assert_matches_loops(anatomy, grad, scores, positives, candidates, absolute, relative):
    for q in range(scores.shape[0]):
        flags = [True] * scores.shape[1] if candidates is None else candidates[q].tolist()
        expected = anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                     flags, absolute, relative)  # fmt: skip
        assert anatomy.active_negatives[q].item() == expected["active_negatives"], q
        assert anatomy.active_positives[q].item() == expected["active_positives"], q
        assert anatomy.negative_rank[q].tolist() == expected["rank"], q
        assert anatomy.without_gradient[q].item() == expected["without"], q
        for field, key in (("active_negative_rank_mean", "rank_mean"),
                           ("hardest_1pct_share", "share_1"),
                           ("hardest_10pct_share", "share_10")):  # fmt: skip
            value = getattr(anatomy, field)[q].item()
            assert value == pytest.approx(expected[key], rel=1e-12, nan_ok=True), (field, q)


def test_an_empty_candidate_set_gives_typed_zeros_and_nans_on_the_input_device():
    """``[Q, 0]``: every field has its documented dtype and shape, counts 0, statistics NaN."""
    grad, scores = torch.zeros(3, 0, dtype=torch.float64), torch.zeros(3, 0, dtype=torch.float64)
    positives = torch.zeros(3, 0, dtype=torch.bool)
    empty = gradient_anatomy(grad, scores, positives)
    assert (empty.active.shape, empty.active.dtype) == ((3, 0), torch.bool)
    assert (empty.negative_rank.shape, empty.negative_rank.dtype) == ((3, 0), torch.int64)
    for name in ("active_positives", "active_negatives", "num_positives", "num_negatives"):
        field = getattr(empty, name)
        assert (field.dtype, field.tolist()) == (torch.int64, [0, 0, 0]), name
    for name in ("active_negative_rank_mean", "active_negative_rank_max",
                 "hardest_1pct_share", "hardest_10pct_share"):  # fmt: skip
        field = getattr(empty, name)
        assert field.dtype == torch.float64 and field.shape == (3,), name
        assert all(math.isnan(v) for v in field.tolist()), name
    assert (empty.without_gradient.dtype, empty.without_gradient.tolist()) == (
        torch.bool,
        [False, False, False],
    )
    assert_unchanged_under_another_default_device(
        lambda: gradient_anatomy(grad, scores, positives), scores.device
    )


def test_field_dtypes_follow_the_documentation_for_float32_input():
    """Counts int64; rank and hardness statistics float64 (masses summed in float64)."""
    scores, positives = _scores(3, candidates=30)
    grad = torch.randn(scores.shape, generator=torch.Generator().manual_seed(3))
    anatomy = gradient_anatomy(grad.float(), scores.float(), positives)
    for name in ("active_positives", "active_negatives", "num_positives", "num_negatives",
                 "negative_rank"):  # fmt: skip
        assert getattr(anatomy, name).dtype == torch.int64, name
    for name in ("active_negative_rank_mean", "active_negative_rank_max",
                 "hardest_1pct_share", "hardest_10pct_share"):  # fmt: skip
        assert getattr(anatomy, name).dtype == torch.float64, name
    _assert_matches_loops(anatomy, grad.float().double(), scores.float().double(), positives,
                          None, 1e-10, 1e-2)  # fmt: skip


def test_a_relative_threshold_of_one_keeps_exactly_each_querys_largest_entries():
    grad = torch.tensor([[0.5, -2.0, 2.0, 1.0], [0.25, 0.25, 0.1, 0.0], [0.0, 0.0, 0.0, 0.0]],
                        dtype=torch.float64)  # fmt: skip
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1]] * 3, dtype=torch.float64)
    positives = torch.tensor([[True, False, False, False]] * 3)
    anatomy = gradient_anatomy(grad, scores, positives, relative_threshold=1.0)
    assert anatomy.active.tolist() == [[False, True, True, False], [True, True, False, False],
                                       [False, False, False, False]]  # fmt: skip
    assert anatomy.without_gradient.tolist() == [False, False, True]


def test_gradient_on_non_candidates_never_sets_a_querys_scale():
    """Small gradients (|G| < 1), a candidate mask, default thresholds: the loops decide."""
    scores, positives = _scores(4, candidates=25)
    generator = torch.Generator().manual_seed(44)
    grad = torch.randn(scores.shape, generator=generator, dtype=torch.float64) * 1e-3
    candidates = torch.rand(scores.shape, generator=generator) < 0.7
    grad[~candidates] = 0.0  # a loss gives no gradient to a non-candidate
    anatomy = gradient_anatomy(grad, scores, positives, candidate_mask=candidates)
    _assert_matches_loops(anatomy, grad, scores, positives, candidates, 1e-10, 1e-2)
    assert anatomy.active_negatives.sum() > 0


def test_tied_scores_rank_by_column_index():
    """Scores on a coarse grid (many ties) over 60 candidates: ranks break ties by column."""
    generator = torch.Generator().manual_seed(5)
    scores = torch.randint(0, 3, (4, 60), generator=generator).to(torch.float64)
    positives = torch.rand(4, 60, generator=generator) < 0.2
    grad = torch.rand(4, 60, generator=generator, dtype=torch.float64)
    anatomy = gradient_anatomy(grad, scores, positives)
    _assert_matches_loops(anatomy, grad, scores, positives, None, 1e-10, 1e-2)


def test_queries_without_positives_count_every_negative_in_the_mass():
    """All candidates negatives (the weakest negative sorts last, carrying mass), one negative
    only, and a query with no candidate at all next to queries that have some."""
    generator = torch.Generator().manual_seed(6)
    scores = torch.rand(4, 12, generator=generator, dtype=torch.float64)
    grad = torch.rand(4, 12, generator=generator, dtype=torch.float64) + 0.5
    positives = torch.zeros(4, 12, dtype=torch.bool)
    positives[2, 1:] = True  # one negative
    candidates = torch.ones(4, 12, dtype=torch.bool)
    candidates[3] = False  # no candidate: never "without gradient"
    grad[1] = 0.0
    grad[1, scores[1].argmin()] = 1.0  # only the weakest negative has gradient
    anatomy = gradient_anatomy(grad, scores, positives, candidate_mask=candidates)
    _assert_matches_loops(anatomy, grad, scores, positives, candidates, 1e-10, 1e-2)
    assert anatomy.hardest_10pct_share[1].item() == 0.0
    assert anatomy.without_gradient.tolist() == [False, False, False, False]
    single = gradient_anatomy(grad[:, :1], scores[:, :1], positives[:, :1])  # one candidate
    expected = [1.0 if grad[q, 0] > 0 else math.nan for q in range(4)]  # its mass, if any
    assert single.hardest_1pct_share.tolist() == pytest.approx(expected, nan_ok=True)



def test_a_negative_mass_below_1e_300_has_its_shares_like_any_other():
    """A float64 softmax at a low temperature puts ``exp(-700)``-sized gradients on its
    negatives: a mass far below 1e-300, still positive, whose hardest share is a ratio of two
    such numbers (not the mass over a floor)."""
    scores = torch.tensor([[5.0, -2.0, -2.02, -2.04], [-2.0, 5.0, -2.04, -2.02]],
                          dtype=torch.float64)  # fmt: skip
    positives = torch.eye(2, 4, dtype=torch.bool)
    temperature = 0.01
    rows = []
    for row, flags in zip(scores.tolist(), positives.tolist(), strict=True):
        logits = [s / temperature for s in row]  # InfoNCE's gradient, by hand
        top = max(logits)
        normalizer = sum(math.exp(z - top) for z in logits)
        rows.append([(math.exp(z - top) / normalizer - float(p)) / temperature
                     for z, p in zip(logits, flags, strict=True)])  # fmt: skip
    grad = torch.tensor(rows, dtype=torch.float64)
    assert all(0.0 < sum(abs(g) for g, p in zip(row, flags, strict=True) if not p) < 1e-300
               for row, flags in zip(rows, positives.tolist(), strict=True))  # fmt: skip
    anatomy = gradient_anatomy(grad, scores, positives)
    _assert_matches_loops(anatomy, grad, scores, positives, None, 1e-10, 1e-2)
    assert 0.5 < anatomy.hardest_1pct_share.min().item() < 1.0


def test_a_float16_relative_threshold_in_the_subnormals_is_the_threshold_itself():
    """0.01 x 149 * 2^-24 is 1.49 * 2^-24, which float16 rounds to 2^-24: an entry of 2^-24
    (0.67 % of the largest) was active. It is compared with the unrounded threshold."""
    tiny = 2.0**-24
    grad = torch.tensor([[-149 * tiny, tiny, 2 * tiny, 0.0]], dtype=torch.float16)
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1]], dtype=torch.float16)
    positives = torch.tensor([[True, False, False, False]])
    anatomy = gradient_anatomy(grad, scores, positives)
    _assert_matches_loops(anatomy, grad, scores, positives, None, 1e-10, 1e-2)

def test_a_float64_relative_threshold_is_taken_in_float64():
    """0.01 rounded to float32 is 0.0099999998: an entry of 0.0099999999 x the largest lies
    below the float64 threshold and above the float32 one. Only half precision widens to
    float32; float64 gradients keep their own precision."""
    grad = torch.tensor([[-1.0, 0.0099999999, 0.01, 0.0]], dtype=torch.float64)
    scores = torch.tensor([[0.4, 0.3, 0.2, 0.1]], dtype=torch.float64)
    positives = torch.tensor([[True, False, False, False]])
    anatomy = gradient_anatomy(grad, scores, positives)
    _assert_matches_loops(anatomy, grad, scores, positives, None, 1e-10, 1e-2)
    assert anatomy.active.tolist() == [[True, False, True, False]]


@pytest.mark.parametrize(
    ("argument", "change", "hint"),
    [
        ("scores", dict(scores=torch.zeros(2, 4)), "the shape of score_grad and positives"),
        # score_grad alone off: it is named, not the scores that agree with the positives
        ("score_grad", dict(score_grad=torch.zeros(1, 3)), "the shape of scores"),
        ("positives", dict(positives=torch.zeros(2, 4, dtype=torch.bool)), "one flag per score"),
        ("candidate_mask", dict(candidate_mask=torch.zeros(1, 3, dtype=torch.bool)),
         "one flag per score"),
    ],
)
def test_shape_errors_say_what_shape_was_expected(argument, change, hint):
    kwargs = dict(score_grad=GRAD, scores=SCORES, positives=MASK) | change
    with pytest.raises(GradlabError, match=rf"^{argument} must have shape \(2, 3\) \({hint}\)"):
        gradient_anatomy(**kwargs)


@pytest.mark.parametrize("argument", ["score_grad", "scores", "positives", "candidate_mask"])
def test_a_tensor_on_another_device_is_refused_by_name(argument):
    kwargs = dict(score_grad=GRAD, scores=SCORES, positives=MASK, candidate_mask=None)
    if argument == "candidate_mask":
        kwargs["candidate_mask"] = MASK
    kwargs[argument] = kwargs[argument].to("meta")
    with pytest.raises(
        GradlabError, match=rf"^tensors must be on one device; .*{argument} on meta"
    ):
        gradient_anatomy(**kwargs)


@pytest.mark.parametrize("masked", [False, True])
def test_meta_tensors_are_refused_as_the_ranking_metrics_refuse_them(masked):
    # a meta tensor is a shape without values: the anatomy of one is no anatomy, and
    # tie_aware_ap and smooth_ap refuse the same scores and positives with the same words
    meta = dict(score_grad=GRAD.to("meta"), scores=SCORES.to("meta"), positives=MASK.to("meta"),
                candidate_mask=MASK.to("meta") if masked else None)  # fmt: skip
    said = ("is a meta tensor (a shape without values); pass a tensor on a real device (cpu, "
            "cuda, ...)")  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        gradient_anatomy(**meta)
    assert str(caught.value) == f"score_grad {said}"
    for metric in (lambda: tie_aware_ap(meta["scores"], meta["positives"]),
                   lambda: smooth_ap(meta["scores"], meta["positives"], tau=0.01)):  # fmt: skip
        with pytest.raises(GradlabError) as caught:
            metric()
        assert str(caught.value) == f"scores {said}"


@pytest.mark.parametrize("relative", [float("nan"), 1.5, -0.5, float("inf")])
def test_every_relative_threshold_outside_zero_to_one_gets_the_one_message(relative):
    # NaN once read "must be a non-negative finite number", 1.5 "must lie in [0, 1]"
    with pytest.raises(GradlabError) as caught:
        gradient_anatomy(GRAD, SCORES, MASK, relative_threshold=relative)
    assert str(caught.value) == ("relative_threshold must be a finite number in [0, 1] (a share "
                                 f"of the query's largest |dL/dS|); got {relative!r}")


def test_a_positional_candidate_mask_is_still_read_with_a_future_warning():
    # gradlab 0.2.0 took the mask as the fourth positional argument; it is keyword-only now.
    grad = torch.tensor([[-1.0, 0.5, 0.3, 0.0]])
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1]])
    positives = torch.tensor([[True, False, False, False]])
    mask = torch.tensor([[True, True, False, True]])  # the third column is no candidate
    with pytest.warns(FutureWarning, match="gradient_anatomy takes candidate_mask by keyword") \
            as said:  # fmt: skip
        old = gradient_anatomy(grad, scores, positives, mask)
    assert [w.filename for w in said] == [__file__]  # the caller's line, past the wrappers
    assert old.num_negatives.tolist() == [2] and old.active_negatives.tolist() == [1]
    new = gradient_anatomy(grad, scores, positives, candidate_mask=mask)
    assert torch.equal(old.active, new.active)
    with pytest.raises(GradlabError, match="got candidate_mask twice"):
        gradient_anatomy(grad, scores, positives, mask, candidate_mask=mask)


def test_the_hardest_counts_are_the_exact_ceilings_of_the_fractions():
    """ceil(N x fraction) against exact rationals, over small counts and those past 2^24, where
    a float32 product of 0.01 or 0.1 rounds to the wrong ceiling (13,107,201 x 0.01 is
    131,072.01: 131,073 negatives, not 131,072)."""
    counts = [*range(0, 1001), 13_107_201, 16_777_221, 33_554_441, 2**31 - 1]
    for fraction, divisor in zip(HARD_FRACTIONS, HARD_DIVISORS, strict=True):
        assert Fraction(1, divisor) == Fraction(str(fraction))
        got = hardest_count(torch.tensor(counts), divisor).tolist()
        assert got == [math.ceil(Fraction(str(fraction)) * n) for n in counts]
