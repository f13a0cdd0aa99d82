"""Geometry, margins and the temperature's closed form against closed forms and float64 loops."""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional import geometry
from gradlab.functional.score_losses import nt_xent_loss
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference import geometry_loops as loops


def _unit_rows(matrix):
    return [[x / math.sqrt(sum(v * v for v in row)) for x in row] for row in matrix]


def _cosines(first, second):
    a, b = _unit_rows(first.tolist()), _unit_rows(second.tolist())
    return torch.tensor([[sum(x * y for x, y in zip(p, q, strict=True)) for q in b] for p in a],
                        dtype=torch.float64)  # fmt: skip


# ---- closed forms -----------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])  # float64: rescaled first
def test_identical_points_have_rank_one_and_no_spread(dtype):
    points = torch.tensor([[0.3, -1.2, 2.0, 0.7]], dtype=dtype).repeat(9, 1)
    rank, share = geometry.effective_rank(points)
    assert float(rank) == 1.0
    assert float(share) == pytest.approx(1 / 4)
    assert float(geometry.normalized_std(points)) == pytest.approx(0.0, abs=1e-12)
    assert float(geometry.uniformity(points)) == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("k", [1, 2, 5])
def test_subspace_with_equal_singular_values_has_rank_k(k):
    # 2k points +-e_i of a random k-dimensional subspace of R^12: centred, k equal singular
    # values (sqrt 2 each), so the entropy is ln k.
    generator = torch.Generator().manual_seed(k)
    basis, _ = torch.linalg.qr(torch.randn(12, k, dtype=torch.float64, generator=generator))
    points = torch.cat([basis.T, -basis.T]) + torch.linspace(-1, 1, 12, dtype=torch.float64)
    rank, share = geometry.effective_rank(points)
    assert float(rank) == pytest.approx(k, rel=1e-12)
    assert float(share) == pytest.approx(k / min(2 * k - 1, 12), rel=1e-12)


def test_share_reaches_one_when_points_fewer_than_dimensions():
    # N = 5 points e_1..e_5 in R^16: centred, 4 equal singular values; a share over
    # min(N, d) = 5 would stop at 4/5 (the 1/N floor this normalisation avoids).
    points = torch.eye(16)[:5]
    rank, share = geometry.effective_rank(points)
    assert float(rank) == pytest.approx(4.0, rel=1e-12)
    assert float(share) == pytest.approx(1.0, rel=1e-12)


NOT_FINITE_CALLS = {
    "effective_rank": lambda x, s, p: geometry.effective_rank(x),
    "uniformity": lambda x, s, p: geometry.uniformity(x),
    "uniformity gram": lambda x, s, p: geometry.uniformity(torch.randn(6, 4), gram=s),
    "normalized_std": lambda x, s, p: geometry.normalized_std(x),
    "modality_gap queries": lambda x, s, p: geometry.modality_gap(x, torch.randn(3, 4)),
    "alignment": lambda x, s, p: geometry.alignment(s, p),
    "query_margins": lambda x, s, p: geometry.query_margins(s, p),
    "in_batch_margins": lambda x, s, p: geometry.in_batch_margins(s, p),
    "in_batch_alignment_uniformity": lambda x, s, p: geometry.in_batch_alignment_uniformity(s, p),
}


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("call", NOT_FINITE_CALLS.values(), ids=NOT_FINITE_CALLS.keys())
def test_a_measure_of_values_that_are_not_finite_is_refused_naming_the_argument(call, bad):
    """NaN or inf in the embeddings or scores made every measure NaN without a word (the
    uniformity of an infinite row read NaN); the public measures refuse them now."""
    points, scores = torch.randn(6, 4), torch.rand(6, 6)
    positives = torch.eye(6, dtype=torch.bool).roll(1, dims=1)
    points[2, 1], scores[2, 1] = bad, bad
    message = (r"^(embeddings|queries|scores|gram) must be finite; "
               r"got (NaN|inf|-inf) in row 2 \(1 row of 6\)$")
    with pytest.raises(GradlabError, match=message):
        call(points, scores, positives)


def test_planted_modality_gap():
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(50, 8, generator=generator)
    images[:, 0] = 0.0
    texts = images.clone()
    images[:, 0], texts[:, 0] = 1e4, -1e4  # every image near +e_0, every text near -e_0
    assert float(geometry.modality_gap(images, texts)) == pytest.approx(2.0, abs=1e-3)
    assert float(geometry.modality_gap(images, images)) == pytest.approx(0.0, abs=1e-12)


def test_chance_level_is_log_of_candidates_and_uniform_scores_reach_it():
    assert geometry.chance_level(128) == pytest.approx(4.852030263919617)
    scores = torch.zeros(6, 6)
    loss = nt_xent_loss(scores, torch.eye(6, dtype=torch.bool), temperature=0.05, direction="i2t")
    assert float(loss) == pytest.approx(geometry.chance_level(6), rel=1e-6)


# ---- float64 loops ------------------------------------------------------------------------------


@pytest.mark.parametrize(("rows", "dims"), [(7, 3), (5, 9), (40, 16)])
def test_effective_rank_matches_an_svd(rows, dims):
    points = torch.randn(rows, dims, generator=torch.Generator().manual_seed(rows * dims))
    rank, share = geometry.effective_rank(points)
    expected, expected_share = loops.effective_rank(points.tolist())
    assert float(rank) == pytest.approx(expected, rel=1e-9)
    assert float(share) == pytest.approx(expected_share, rel=1e-9)
    normalized, _ = geometry.effective_rank(points, normalize=True)
    expected, _ = loops.effective_rank(loops.unit_rows(points.tolist()))
    assert float(normalized) == pytest.approx(expected, rel=1e-9)


def test_uniformity_and_std_match_loops():
    points = torch.randn(11, 5, generator=torch.Generator().manual_seed(3))
    units = _unit_rows(points.tolist())
    pairs = [sum((a - b) ** 2 for a, b in zip(units[i], units[j], strict=True))
             for i in range(11) for j in range(11) if i < j]  # fmt: skip
    for t in (2.0, 0.5):
        expected = math.log(sum(math.exp(-t * d) for d in pairs) / len(pairs))
        assert float(geometry.uniformity(points, t)) == pytest.approx(expected, rel=1e-12)
    gram = _cosines(points, points)
    assert float(geometry.uniformity(points, gram=gram)) == pytest.approx(
        float(geometry.uniformity(points))
    )
    columns = list(zip(*units, strict=True))
    stds = [math.sqrt(sum((x - sum(c) / 11) ** 2 for x in c) / 11) for c in columns]
    assert float(geometry.normalized_std(points)) == pytest.approx(sum(stds) / 5 * math.sqrt(5))



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_std_from_given_norms_is_the_std_from_its_own_bit_for_bit(dtype):
    """Rows of every scale (a zero row, whose norm F.normalize clamps, a huge and a tiny one):
    the norms a caller already took give the same value as normalized_std's own."""
    points = torch.randn(9, 5, generator=torch.Generator().manual_seed(3), dtype=dtype)
    points[1], points[2], points[3] = 0.0, points[3] * 1e30, points[4] * 1e-30
    for rows in (points, points[:1]):
        norms = rows.to(torch.float64).norm(dim=1)
        assert torch.equal(geometry.normalized_std(rows, norms=norms),
                           geometry.normalized_std(rows))  # fmt: skip


@pytest.mark.parametrize("scale", [1e-6, 1e-2, 1e3])
def test_the_std_from_given_norms_matches_a_loop_below_and_above_norm_one(scale):
    """Rows of norms far below 1 (above F.normalize's 1e-12) and above it: each row divided
    by the norm given for it, the std matches the float64 loop of the unit rows."""
    generator = torch.Generator().manual_seed(11)
    points = torch.randn(9, 5, generator=generator, dtype=torch.float64) * scale
    expected = loops.normalized_std(points.tolist())
    got = geometry.normalized_std(points, norms=points.norm(dim=1))
    assert float(got) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_the_alignment_of_no_query_is_a_float64_nan_on_the_scores_device(device):
    """A ``[0, C]`` matrix has no positive pair: its alignment is a 0-d float64 NaN (0 / 0), on
    the scores' device (meta stands in for an accelerator, where the rows are one block)."""
    scores = torch.zeros(0, 3, device=device)
    value = geometry.alignment(scores, torch.zeros(0, 3, dtype=torch.bool, device=device))
    assert (value.shape, value.dtype, value.device.type) == ((), torch.float64, device)
    if device == "cpu":
        assert value.isnan()


def test_alignment_and_uniformity_make_no_tensor_on_the_default_device():
    """Under another default device (meta) the values are the same and on the inputs' CPU:
    the alignment of no query, and the uniformity past the shift (t > 50, where the smallest
    distance is searched), alone and with the in-batch alignment."""
    cpu = torch.device("cpu")
    points = torch.randn(7, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    gram = _cosines(points, points)
    positives = torch.eye(7, dtype=torch.bool).roll(1, dims=1)
    none, no_positive = torch.zeros(0, 3), torch.zeros(0, 3, dtype=torch.bool)
    assert_unchanged_under_another_default_device(
        lambda: geometry.alignment(none, no_positive), cpu)
    assert_unchanged_under_another_default_device(
        lambda: geometry.uniformity(points, t=120.0, gram=gram), cpu)
    assert_unchanged_under_another_default_device(
        lambda: geometry.in_batch_alignment_uniformity(gram, positives, t=120.0), cpu)


def test_uniformity_stays_finite_where_the_plain_mean_underflows():
    points = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    # exp(-400 * 4) underflows float64; the log-sum-exp does not.
    assert float(geometry.uniformity(points, t=400.0)) == pytest.approx(-1600.0)


@pytest.mark.parametrize("t", [2.0, 49.9, 50.0, 50.1, 120.0, 400.0])
def test_uniformity_matches_a_high_precision_loop_on_both_sides_of_the_shift(t):
    # Up to t = 50 the exponentials are summed as they are, past it shifted by the largest:
    # both must give the mean over pairs computed with 60 digits (mpmath), spread or clustered.
    mpmath = pytest.importorskip("mpmath")
    spread = torch.randn(9, 3, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    clustered = spread * 0.01 + torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    for points in (spread, clustered):
        units = _unit_rows(points.tolist())
        with mpmath.workdps(60):  # mpmath's precision is global: set here only
            pairs = [sum((mpmath.mpf(a) - mpmath.mpf(b)) ** 2
                         for a, b in zip(units[i], units[j], strict=True))
                     for i in range(9) for j in range(9) if i < j]  # fmt: skip
            expected = float(mpmath.log(mpmath.fsum(mpmath.exp(-t * d) for d in pairs)
                                        / len(pairs)))  # fmt: skip
        got = float(geometry.uniformity(points, t))
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12 * t)


@pytest.mark.slow
@pytest.mark.parametrize(("t", "near_pair"), [(2.0, False), (1e5, False), (1e5, True)])
def test_uniformity_and_alignment_of_300_points_match_loops(t, near_pair):
    """300 points: on a CPU the float64 passes go through the cosine matrix in blocks of rows
    (three here, the diagonal at a different column in each). The points spread over the
    sphere on a Fibonacci lattice, so at t = 1e5 every exp(-t d) underflows: only the shift by
    the nearest pair off the diagonal keeps the value. With ``near_pair`` two points of the
    first block nearly coincide, and that pair, not one of the last block, sets the shift."""
    golden = math.pi * (3.0 - math.sqrt(5.0))
    heights = [1.0 - 2.0 * (k + 0.5) / 300 for k in range(300)]
    points = torch.tensor([[math.sqrt(1 - z * z) * math.cos(golden * k),
                            math.sqrt(1 - z * z) * math.sin(golden * k), z]
                           for k, z in enumerate(heights)], dtype=torch.float64)  # fmt: skip
    if near_pair:
        points[5] = points[6] + torch.tensor([1e-3, 0.0, 0.0], dtype=torch.float64)
    units = _unit_rows(points.tolist())
    distances = [[sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) for b in units]
                 for a in units]  # fmt: skip
    pairs = [distances[i][j] for i in range(300) for j in range(300) if i != j]
    nearest = min(pairs)
    assert near_pair or t < 50 or math.exp(-t * nearest) == 0.0  # every term underflows
    shifted = math.fsum(math.exp(-t * (d - nearest)) for d in pairs)
    expected = math.log(shifted / len(pairs)) - t * nearest
    # d = 2 - 2 s from a cosine s carries an absolute error near 1e-16, t times in the value
    assert float(geometry.uniformity(points, t)) == pytest.approx(expected, rel=1e-12,
                                                                  abs=1e-14 * t)  # fmt: skip
    labels = torch.arange(300) % 7
    positives = (labels.unsqueeze(0) == labels.unsqueeze(1)).fill_diagonal_(False)
    kept = [distances[i][j] for i in range(300) for j in range(300) if positives[i, j]]
    gram = _cosines(points, points)
    assert float(geometry.alignment(gram, positives)) == pytest.approx(
        math.fsum(kept) / len(kept), rel=1e-12)  # fmt: skip
    together = geometry.in_batch_alignment_uniformity(gram, positives, t=t)
    apart = (geometry.alignment(gram, positives, candidate_mask=~torch.eye(300, dtype=torch.bool)),
             geometry.uniformity(points, t, gram=gram))  # fmt: skip
    assert [float(v) for v in together] == [float(v) for v in apart]  # bit for bit


def test_alignment_matches_a_loop():
    queries = torch.randn(6, 4, generator=torch.Generator().manual_seed(5))
    candidates = torch.randn(9, 4, generator=torch.Generator().manual_seed(6))
    positives = torch.rand(6, 9, generator=torch.Generator().manual_seed(7)) < 0.4
    mask = torch.rand(6, 9, generator=torch.Generator().manual_seed(8)) < 0.8
    a, b = _unit_rows(queries.tolist()), _unit_rows(candidates.tolist())
    for alpha in (2.0, 1.0, 3.0):
        pairs = [(i, j) for i in range(6) for j in range(9) if positives[i, j] and mask[i, j]]
        distances = [sum((x - y) ** 2 for x, y in zip(a[i], b[j], strict=True)) ** (alpha / 2)
                     for i, j in pairs]  # fmt: skip
        scores = _cosines(queries, candidates).float()
        got = geometry.alignment(scores, positives, alpha, candidate_mask=mask)
        assert float(got) == pytest.approx(sum(distances) / len(distances), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_query_margins_match_a_loop(dtype):
    """float32 and bfloat16 scores alike, as the loops (the scores are exact in either)."""
    generator = torch.Generator().manual_seed(11)
    scores = torch.randint(-4, 5, (12, 10), generator=generator).to(dtype) / 4  # ties on purpose
    positives = torch.rand(12, 10, generator=generator) < 0.3
    candidates = torch.rand(12, 10, generator=generator) < 0.9
    positives[0] = False  # a query without positives
    positives[1] = candidates[1]  # one without negatives
    got = geometry.query_margins(scores, positives, candidate_mask=candidates)
    expected_rows = loops.query_margins(scores.tolist(), positives.tolist(), candidates.tolist())
    for index, expected in enumerate(expected_rows):
        if expected is None:
            assert math.isnan(float(got.margin[index]))
            assert math.isnan(float(got.recall_at_1[index]))
            continue
        values = [float(field[index]) for field in got]
        assert values == pytest.approx(list(expected), abs=1e-12)


def test_temperature_closed_form_equals_autograd():
    generator = torch.Generator().manual_seed(2)
    scores = torch.rand(7, 7, generator=generator, dtype=torch.float64) * 2 - 1
    positives = torch.eye(7, dtype=torch.bool)
    positives[2, 5] = True  # two positives for a query
    for direction, halve in (("i2t", 1.0), ("t2i", 1.0), ("both", 0.5)):
        log_scale = torch.tensor(math.log(14.0), dtype=torch.float64, requires_grad=True)
        logits = scores * log_scale.exp()
        loss = halve * nt_xent_loss(logits, positives, temperature=1.0, direction=direction)
        (expected,) = torch.autograd.grad(loss, log_scale)
        got = geometry.temperature_gradient(scores, positives, 14.0, direction=direction)
        assert float(got) == pytest.approx(float(expected), rel=1e-10)


def test_temperature_closed_form_matches_a_loop_with_a_candidate_mask():
    generator = torch.Generator().manual_seed(4)
    scores = torch.rand(6, 6, generator=generator, dtype=torch.float64)
    labels = [0, 0, 1, 1, 2, 3]
    positives = torch.tensor([[a == b and i != j for j, b in enumerate(labels)]
                              for i, a in enumerate(labels)])  # fmt: skip
    candidates = ~torch.eye(6, dtype=torch.bool)
    scale = 7.5
    per_query = []
    for i in range(6):
        cand = [j for j in range(6) if j != i]
        pos = [j for j in cand if positives[i, j]]
        if not pos:
            continue
        weights = [math.exp(scale * float(scores[i, j])) for j in cand]
        logits = [scale * float(scores[i, j]) for j in cand]
        expected = sum(w * z for w, z in zip(weights, logits, strict=True)) / sum(weights)
        per_query.append(expected - sum(scale * float(scores[i, j]) for j in pos) / len(pos))
    got = geometry.temperature_gradient(
        scores, positives, torch.tensor(scale), candidate_mask=candidates
    )
    assert float(got) == pytest.approx(sum(per_query) / len(per_query), rel=1e-12)


# ---- bad input ---------------------------------------------------------------------------

_SCORES, _EYE = torch.zeros(3, 3), torch.eye(3, dtype=torch.bool)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: geometry.alignment(_SCORES, _EYE.float()), "positives must be a bool tensor"),
    (lambda: geometry.alignment(_SCORES, _EYE[:2]), r"positives must have shape \(3, 3\)"),
    (lambda: geometry.alignment(_SCORES, _EYE, alpha=0.0), "alpha must be a finite number"),
    (lambda: geometry.uniformity(torch.zeros(1, 3)), "embeddings must have at least 2 row"),
    (lambda: geometry.uniformity(torch.eye(3), t=-1.0), "t must be a finite number"),
    (lambda: geometry.uniformity(torch.eye(3), gram=torch.eye(2)),
     r"gram must have shape \(3, 3\)"),
    (lambda: geometry.effective_rank(torch.zeros(3)), "embeddings must be 2-D"),
    (lambda: geometry.normalized_std(torch.zeros(0, 3)), "embeddings must have at least 1 row"),
    (lambda: geometry.normalized_std(torch.eye(3), norms=torch.ones(2, dtype=torch.float64)),
     r"norms must have shape \(3,\)"),
    (lambda: geometry.normalized_std(torch.eye(3), norms=torch.ones(3)), "norms must be float64"),
    (lambda: geometry.query_margins(_SCORES, _EYE,
                                            candidate_mask=torch.ones(2, 2, dtype=torch.bool)),
     r"candidate_mask must have shape \(3, 3\)"),
    (lambda: geometry.chance_level(0), "num_candidates must be a positive integer"),
    (lambda: geometry.chance_level(True), "num_candidates must be a positive integer"),
    (lambda: geometry.modality_gap(torch.eye(3), torch.eye(4)),
     r"candidates must have shape \(4, 3\)"),
    (lambda: geometry.temperature_gradient(_SCORES, _EYE, 1.0, direction="up"),
     "direction must be one"),
    (lambda: geometry.temperature_gradient(_SCORES, _EYE, -2.0), "scale must be a finite number"),
    (lambda: geometry.temperature_gradient(_SCORES, _EYE, torch.ones(2)),
     "scale must be a number or"),
])  # fmt: skip
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(GradlabError, match=match):
        call()


_MASK2 = torch.ones(2, 2, dtype=torch.bool)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: geometry.alignment(_SCORES, _EYE, candidate_mask=_MASK2),
     "candidate_mask must have shape (3, 3) (one flag per score); got (2, 2)"),
    (lambda: geometry.alignment(_SCORES, _EYE, alpha=1e7),
     "alpha must be a finite number in [1e-12, 1e+06]; got 10000000.0"),
    (lambda: geometry.temperature_gradient(_SCORES, _EYE, 1.0, candidate_mask=_MASK2),
     "candidate_mask must have shape (3, 3) (one flag per score); got (2, 2)"),
    (lambda: geometry.temperature_gradient(_SCORES, _EYE, 1e31),
     "scale must be a finite number in [1e-30, 1e+30]; got 1e+31"),
    (lambda: geometry.uniformity(torch.eye(3), t=1e7),
     "t must be a finite number in [1e-12, 1e+06]; got 10000000.0"),
    (lambda: geometry.uniformity(torch.eye(3), gram=torch.zeros(3, 3, dtype=torch.long)),
     "gram must have a floating dtype; got torch.int64; pass gram.float()"),
    (lambda: geometry.uniformity(torch.eye(3), gram=torch.eye(2)),
     "gram must have shape (3, 3) (the embeddings' cosine similarities); got (2, 2)"),
    (lambda: geometry.normalized_std(torch.eye(3), norms=torch.ones(3, dtype=torch.long)),
     "norms must have a floating dtype; got torch.int64; pass norms.float()"),
    (lambda: geometry.normalized_std(torch.eye(3), norms=torch.ones(3, 1, dtype=torch.float64)),
     "norms must be 1-D; got shape (3, 1); pass norms.reshape(-1)"),
    (lambda: geometry.normalized_std(torch.eye(3), norms=torch.ones(2, dtype=torch.float64)),
     "norms must have shape (3,) (one norm per row); got (2,)"),
    (lambda: geometry.effective_rank(torch.ones(1, 3)),
     "embeddings must have at least 2 row(s) and 1 column; got shape (1, 3)"),
    (lambda: geometry.modality_gap(torch.zeros(0, 3), torch.eye(3)),
     "queries must have at least 1 row(s) and 1 column; got shape (0, 3)"),
    (lambda: geometry.modality_gap(torch.eye(3), torch.zeros(0, 3)),
     "candidates must have at least 1 row(s) and 1 column; got shape (0, 3)"),
    (lambda: geometry.modality_gap(torch.eye(3), torch.eye(4)),
     "candidates must have shape (4, 3) (the queries' embedding width); got (4, 4)"),
    (lambda: geometry.modality_gap(torch.eye(3), torch.eye(3, device="meta")),
     "tensors must be on one device; got queries on cpu, candidates on meta"),
    (lambda: geometry.modality_gap(torch.eye(3, device="meta"), torch.eye(3)),
     "tensors must be on one device; got queries on meta, candidates on cpu"),
    (lambda: geometry.alignment(torch.zeros(3, 3, dtype=torch.long), _EYE),
     "scores must have a floating dtype; got torch.int64; pass scores.float()"),
    (lambda: geometry.alignment(_SCORES, torch.eye(2, dtype=torch.bool)),
     "positives must have shape (3, 3) (one flag per score); got (2, 2)"),
    (lambda: geometry.alignment(_SCORES, _EYE, candidate_mask=torch.ones(3, 3)),
     "candidate_mask must be a bool tensor; got torch.float32"
     " (a 0/1 mask: pass candidate_mask.bool())"),
    (lambda: geometry.alignment(_SCORES.to("meta"), _EYE),
     "tensors must be on one device; got scores on meta, positives on cpu"),
    (lambda: geometry.alignment(_SCORES, _EYE.to("meta")),
     "tensors must be on one device; got scores on cpu, positives on meta"),
    (lambda: geometry.alignment(_SCORES, _EYE, candidate_mask=_EYE.to("meta")),
     "tensors must be on one device; got scores on cpu, positives on cpu, candidate_mask on "
     "meta"),
    (lambda: geometry.uniformity(torch.zeros(3, 3, dtype=torch.long)),
     "embeddings must have a floating dtype; got torch.int64; pass embeddings.float()"),
    (lambda: geometry.alignment(_SCORES, _EYE, alpha=1e6 + 0.5),
     "alpha must be a finite number in [1e-12, 1e+06]; got 1000000.5"),
    (lambda: geometry.uniformity(torch.eye(3), t=1e6 + 0.5),
     "t must be a finite number in [1e-12, 1e+06]; got 1000000.5"),
])  # fmt: skip
def test_bad_input_messages_word_for_word(call, message):
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == message


def test_bounds_are_inclusive_where_documented():
    assert float(geometry.chance_level(1)) == 0.0  # one candidate: the loss is 0 at chance
    scores = torch.tensor([[0.5, 0.1], [0.2, 0.4]])
    eye = torch.eye(2, dtype=torch.bool)
    for scale in (0.5, 1e30):  # a scale below 1 is a temperature above 1
        expected = loops.temperature_gradient(scores.tolist(), eye.tolist(), scale)
        got = geometry.temperature_gradient(scores, eye, scale)
        assert float(got) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("size", [1e-9, 1e-3, 1.0, 1e4])
def test_effective_rank_does_not_depend_on_the_embeddings_scale(size):
    """RankMe normalises the singular values: scaling every point leaves the rank unchanged,
    including where all singular values are far below 1."""
    points = torch.randn(7, 5, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    rank, share = loops.effective_rank((points * size).tolist())
    got = geometry.effective_rank(points * size)
    assert [float(got.rank), float(got.share)] == pytest.approx([rank, share], rel=1e-9)


def test_float32_input_gives_float64_values_as_close_as_float64_input():
    """Every value is computed in float64: float32 input (rounded once) matches the loops to
    float32's rounding of the input, far below float32 arithmetic's error."""
    generator = torch.Generator().manual_seed(12)
    points = torch.randn(9, 6, generator=generator).double()
    other = torch.randn(9, 6, generator=generator).double()
    labels = torch.arange(9) % 3
    positives = (labels[:, None] == labels[None]) & ~torch.eye(9, dtype=torch.bool)
    candidates = ~torch.eye(9, dtype=torch.bool)
    scores = _cosines(points, points)
    low = (points.float(), other.float(), scores.float())
    values = {
        "alignment": geometry.alignment(low[2], positives, candidate_mask=candidates),
        "uniformity": geometry.uniformity(low[0], gram=low[2]),
        "std": geometry.normalized_std(low[0]),
        "gap": geometry.modality_gap(low[0], low[1]),
        "temperature": geometry.temperature_gradient(low[2], positives, 14.0,
                                                     candidate_mask=candidates),
        "recall": geometry.query_margins(low[2], positives, candidate_mask=candidates).recall_at_1,
    }  # fmt: skip
    assert all(value.dtype == torch.float64 for value in values.values())
    margins = geometry.query_margins(low[2], positives, candidate_mask=candidates)
    assert {field: value.dtype for field, value in margins._asdict().items()} == dict.fromkeys(
        geometry.QueryMargins._fields, torch.float64)
    rows = [[float(x) for x in row] for row in low[2].tolist()]
    expected = {
        "alignment": sum(2 - 2 * rows[i][j] for i in range(9) for j in range(9) if positives[i, j])
        / int(positives.sum()),
        "uniformity": math.log(sum(math.exp(-2 * (2 - 2 * rows[i][j])) for i in range(9)
                                   for j in range(9) if i != j) / 72),
        "std": loops.normalized_std(low[0].tolist()),
        "gap": loops.modality_gap(low[0].tolist(), low[1].tolist()),
        "temperature": loops.temperature_gradient(rows, positives.tolist(), 14.0,
                                                  candidates.tolist()),
    }  # fmt: skip
    for key, value in expected.items():
        assert float(values[key]) == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_margins_and_temperature_of_queries_with_one_negative_or_one_positive():
    """A query with exactly one negative (its violation share is 0 or 1), and a batch where one
    query alone has a positive (the mean runs over that one), against the loops."""
    scores = torch.tensor([[0.9, 0.2, 0.95, 0.1], [0.3, 0.8, 0.1, 0.5], [0.4, 0.6, 0.7, 0.2]],
                          dtype=torch.float64)  # fmt: skip
    positives = torch.tensor([[True, False, False, False], [False, True, False, False],
                              [False, False, False, False]])  # fmt: skip
    candidates = torch.tensor([[True, False, True, False], [True, True, True, True],
                               [True, True, True, True]])  # fmt: skip
    got = geometry.query_margins(scores, positives, candidate_mask=candidates)
    expected_rows = loops.query_margins(scores.tolist(), positives.tolist(), candidates.tolist())
    for index, expected in enumerate(expected_rows):
        values = [float(field[index]) for field in got]
        if expected is None:
            assert math.isnan(values[3])
        else:
            assert values == pytest.approx(list(expected), abs=1e-12)
    assert float(got.violation_share[0]) == 1.0  # its one negative outscores the positive
    alone = positives.clone()
    alone[1] = False  # only query 0 has a positive
    expected = loops.temperature_gradient(scores.tolist(), alone.tolist(), 3.0,
                                          candidates.tolist())  # fmt: skip
    got = geometry.temperature_gradient(scores, alone, 3.0, candidate_mask=candidates)
    assert float(got) == pytest.approx(expected, rel=1e-12)


def test_a_positive_outside_the_candidates_is_no_positive():
    """The diagonal marked positive but masked out of the candidates: the closed form and the
    alignment read only the candidates' positives."""
    scores = torch.tensor([[1.0, 0.6, 0.1], [0.2, 1.0, 0.5], [0.7, 0.4, 1.0]], dtype=torch.float64)
    positives = torch.eye(3, dtype=torch.bool)
    positives[0, 1] = positives[2, 0] = True
    candidates = ~torch.eye(3, dtype=torch.bool)
    inside = positives & candidates
    expected = loops.temperature_gradient(scores.tolist(), inside.tolist(), 5.0,
                                          candidates.tolist())  # fmt: skip
    got = geometry.temperature_gradient(scores, positives, 5.0, candidate_mask=candidates)
    assert float(got) == pytest.approx(expected, rel=1e-12)
    alignment = geometry.alignment(scores, positives, candidate_mask=candidates)
    assert float(alignment) == pytest.approx(((2 - 1.2) + (2 - 1.4)) / 2, rel=1e-12)


def test_one_dimensional_embeddings_are_measured():
    """d = 1 is a valid width: points on a line have effective rank 1 and spread."""
    line = torch.tensor([[1.0], [2.0], [4.0]])
    rank = geometry.effective_rank(line)
    assert [float(rank.rank), float(rank.share)] == [1.0, 1.0]  # min(N - 1, d) = 1
    assert float(geometry.normalized_std(torch.tensor([[1.0], [-2.0]]))) == 1.0  # +-1: std 1
    assert float(geometry.modality_gap(line, -line)) == 2.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_caller_s_scores_and_gram_are_left_as_they_were(dtype):
    generator = torch.Generator().manual_seed(7)
    points = torch.randn(6, 3, generator=generator, dtype=dtype)
    unit = points / points.norm(dim=1, keepdim=True)
    scores = unit @ unit.T
    kept = scores.clone()
    positives = torch.eye(6, dtype=torch.bool).roll(1, dims=1)
    geometry.alignment(scores, positives)
    geometry.alignment(scores, positives, alpha=1.0)
    geometry.uniformity(points, gram=scores)
    geometry.query_margins(scores, positives)
    assert torch.equal(scores, kept)


def test_a_cpu_scale_follows_the_scores_to_their_device():
    # The meta device stands in for an accelerator: a scale left on the CPU would make a CPU
    # value there.
    scores = torch.empty(4, 4, device="meta")
    positives = torch.eye(4, dtype=torch.bool, device="meta")
    value = geometry.temperature_gradient(scores, positives, torch.tensor(14.0))
    assert str(value.device) == "meta"


@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_queries_without_candidates_have_nan_margins(masked, dtype):
    # C = 0: no positive and no negative, so no value is defined (as for a query without
    # either); the [Q] results keep their shape.
    scores, positives = torch.zeros(3, 0, dtype=dtype), torch.zeros(3, 0, dtype=torch.bool)
    mask = torch.zeros(3, 0, dtype=torch.bool) if masked else None
    margins = geometry.query_margins(scores, positives, candidate_mask=mask)
    for name, values in margins._asdict().items():
        assert values.shape == (3,) and bool(values.isnan().all()), name


def test_a_bad_direction_reads_as_in_the_score_losses():
    # The same bad input, the same message: temperature_gradient and nt_xent_loss.
    scores, eye = torch.zeros(2, 2), torch.eye(2, dtype=torch.bool)
    with pytest.raises(GradlabError) as ours:
        geometry.temperature_gradient(scores, eye, 10.0, direction="rows")
    with pytest.raises(GradlabError) as theirs:
        nt_xent_loss(scores, eye, direction="rows")
    assert str(ours.value) == str(theirs.value) == (
        "direction must be one of ('both', 'i2t', 't2i'); got 'rows'"
    )


@pytest.mark.parametrize("bad", [-1.0, 0.0, 1e-40, math.inf, 1e31])
def test_a_scale_tensor_outside_the_numbers_range_gives_nan_not_a_gradient(bad):
    """A number scale outside [1e-30, 1e30] is refused; a tensor one is not read back (no host
    synchronisation) and had given a gradient of the negative or zero scale (0.7311 at -1)."""
    scores = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    eye = torch.eye(2, dtype=torch.bool)
    with pytest.raises(GradlabError, match="scale must be a finite number in"):
        geometry.temperature_gradient(scores, eye, bad)
    assert geometry.temperature_gradient(scores, eye, torch.tensor(bad)).isnan()
    assert float(geometry.temperature_gradient(scores, eye, torch.tensor(2.0))) == float(
        geometry.temperature_gradient(scores, eye, 2.0))


@pytest.mark.parametrize("bad", [torch.tensor(True), torch.tensor(1 + 1j)])
def test_a_scale_tensor_that_is_not_a_real_number_is_refused_by_name(bad):
    scores, eye = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.eye(2, dtype=torch.bool)
    with pytest.raises(GradlabError) as caught:
        geometry.temperature_gradient(scores, eye, bad)
    assert str(caught.value) == f"scale must have a real floating or integer dtype; got {bad.dtype}"


def test_a_meta_scale_tensor_is_refused_by_name_unless_the_scores_are_meta_too():
    # "Cannot copy out of meta tensor; no data!", a NotImplementedError
    scores, eye = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.eye(2, dtype=torch.bool)
    meta = torch.tensor(2.0, device="meta")
    with pytest.raises(GradlabError) as caught:
        geometry.temperature_gradient(scores, eye, meta)
    assert str(caught.value) == ("scale is a meta tensor (a shape without values); pass a tensor "
                                 "on a real device (cpu, cuda, ...)")
    shape_only = geometry.temperature_gradient(scores.to("meta"), eye.to("meta"), meta)
    assert (shape_only.device.type, shape_only.shape) == ("meta", torch.Size([]))


@pytest.mark.parametrize("scale", [1e-30, 0.5, 3, 1e30])
def test_a_scale_tensor_inside_the_range_equals_the_number_bounds_included(scale):
    # The tensor path's range test is [1e-30, 1e30] as the number's, both ends included; an
    # integer tensor is a number too. The reference is the float64 loop.
    scores = torch.tensor([[0.5, 0.1], [0.2, 0.4]])
    eye = torch.eye(2, dtype=torch.bool)
    expected = loops.temperature_gradient(scores.tolist(), eye.tolist(), float(scale))
    tensor = torch.tensor(scale, dtype=torch.float64 if isinstance(scale, float) else None)
    got = geometry.temperature_gradient(scores, eye, tensor)
    assert float(got) == pytest.approx(expected, rel=1e-9)


def test_a_float32_scale_tensor_is_judged_by_its_own_value():
    # float32(1e30) is 1.0000000150474662e30, above the range: the number path refuses it, so
    # the tensor path (compared in float64, not at the tensor's own rounding of 1e30) gives NaN.
    scores, eye = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.eye(2, dtype=torch.bool)
    scale = torch.tensor(1e30, dtype=torch.float32)
    with pytest.raises(GradlabError, match="scale must be a finite number in"):
        geometry.temperature_gradient(scores, eye, float(scale))
    assert geometry.temperature_gradient(scores, eye, scale).isnan()


@pytest.mark.parametrize("size", [2, 200])
@pytest.mark.slow
def test_in_batch_alignment_uniformity_at_its_smallest_batch_and_over_two_blocks(size):
    # Two embeddings are enough (one pair each way); 200 rows make exactly two blocks of rows
    # on a CPU (1 << 15 entries each), where each block's diagonal and sums are its own. The
    # default t is Wang & Isola's t = 2; the reference is the float64 loop over pairs i < j
    # (uniformity is symmetric, so the mean over i != j is the same).
    generator = torch.Generator().manual_seed(size)
    points = torch.randn(size, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(size) % 3
    positives = (labels.unsqueeze(0) == labels.unsqueeze(1)).fill_diagonal_(False)
    if size == 2:
        positives = ~torch.eye(2, dtype=torch.bool)  # the pair itself
    gram = _cosines(points, points)
    aligned, spread = geometry.in_batch_alignment_uniformity(gram, positives)
    rows = points.tolist()
    assert float(spread) == pytest.approx(loops.uniformity(rows), rel=1e-12)
    assert float(aligned) == pytest.approx(loops.alignment(rows, rows, positives.tolist()),
                                           rel=1e-12)  # fmt: skip


def test_given_norms_are_used_not_computed_again():
    # normalized_std's norms are taken as the rows' norms (the Monitor shares its own): norms
    # twice the true ones halve every unit row, so the value halves.
    points = torch.randn(6, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    norms = points.norm(dim=1)
    plain = geometry.normalized_std(points)
    assert float(plain) == pytest.approx(loops.normalized_std(points.tolist()), rel=1e-12)
    assert float(geometry.normalized_std(points, norms=2 * norms)) == pytest.approx(
        float(plain) / 2, rel=1e-12)  # fmt: skip


@pytest.mark.parametrize("scale", [1e-200, 1e-150, 1e150, 1e200])
def test_effective_rank_of_float64_input_does_not_depend_on_its_scale(scale):
    # the Gram of the centred points would underflow to 0 or overflow to inf unscaled
    points = torch.randn(7, 4, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    rank, share = geometry.effective_rank(points)
    scaled_rank, scaled_share = geometry.effective_rank(points * scale)
    assert scaled_rank.item() == pytest.approx(rank.item(), rel=1e-12)
    assert scaled_share.item() == pytest.approx(share.item(), rel=1e-12)


def test_alignment_and_uniformity_measure_scores_that_require_grad_without_a_graph():
    # scores straight from a training step: the same values as detached ones, no graph
    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(2), requires_grad=True)
    unit = torch.nn.functional.normalize(embeddings, dim=1)
    scores = unit @ unit.T
    positives = (torch.arange(6) // 2).unsqueeze(0) == (torch.arange(6) // 2).unsqueeze(1)
    positives &= ~torch.eye(6, dtype=torch.bool)
    measured = [geometry.alignment(scores, positives), geometry.uniformity(embeddings),
                geometry.uniformity(embeddings.detach(), gram=scores),
                *geometry.in_batch_alignment_uniformity(scores, positives)]  # fmt: skip
    detached = [geometry.alignment(scores.detach(), positives),
                geometry.uniformity(embeddings.detach()),
                geometry.uniformity(embeddings.detach(), gram=scores.detach()),
                *geometry.in_batch_alignment_uniformity(scores.detach(), positives)]  # fmt: skip
    assert [value.item() for value in measured] == [value.item() for value in detached]
    assert not any(value.requires_grad for value in measured)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize(("rows", "dims"), [(16, 48), (48, 16)])
def test_effective_rank_measures_embeddings_that_require_grad_without_a_graph(rows, dims,
                                                                              normalize):
    # a diagnostic: its graph kept the batch alive and its gradient was NaN for N <= d
    # (the square root of the centred batch's eigenvalue 0)
    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(rows, dims, generator=generator, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        measured = geometry.effective_rank(embeddings, normalize=normalize)
    assert saved == []  # nothing kept for a backward
    assert not any(value.requires_grad or value.grad_fn for value in measured)
    detached = geometry.effective_rank(embeddings.detach(), normalize=normalize)
    assert [value.item() for value in measured] == [value.item() for value in detached]


def _leaf(rows, dims, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, dims, generator=generator, requires_grad=True)


_CLOSED = torch.tensor([[0.9, 0.1, -0.2], [0.3, 0.8, 0.0], [-0.1, 0.2, 0.7]], requires_grad=True)
_SCALE = torch.tensor(14.0, requires_grad=True)


@pytest.mark.parametrize(("measure", "inputs"), [
    (geometry.normalized_std, lambda: (_leaf(6, 4, 1),)),
    (geometry.normalized_std, lambda: (torch.ones(4, 3, requires_grad=True),)),  # collapsed
    (geometry.modality_gap, lambda: (_leaf(3, 4, 2), _leaf(5, 4, 3))),
    (geometry.modality_gap, lambda: (_leaf(3, 4, 2), _leaf(3, 4, 2).detach())),  # no gap
    (lambda s, p: geometry.temperature_gradient(s, p, 14.0), lambda: (_CLOSED, _EYE)),
    (lambda s, p: geometry.temperature_gradient(s, p, _SCALE, direction="both"),
     lambda: (_CLOSED, _EYE)),
], ids=["normalized_std", "normalized_std collapsed", "modality_gap", "modality_gap zero",
        "temperature_gradient", "temperature_gradient tensor scale"])  # fmt: skip
def test_the_geometry_measures_give_values_without_a_graph(measure, inputs):
    # measures of the detached inputs, as alignment, uniformity and effective_rank are: the
    # collapse check's gradient was NaN at the collapse it detects (sqrt of a spread of 0)
    given = inputs()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        measured = measure(*given)
    assert saved == []  # nothing kept for a backward
    assert not measured.requires_grad and measured.grad_fn is None
    detached = measure(*(value.detach() for value in given))
    assert measured.item() == detached.item()


@pytest.mark.parametrize("normalize", [1, "yes", None])
def test_effective_rank_refuses_a_normalize_that_is_not_a_bool(normalize):
    with pytest.raises(GradlabError, match=r"^normalize must be True or False; got "):
        geometry.effective_rank(torch.randn(4, 3), normalize=normalize)



@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_effective_rank_of_points_far_below_one_is_their_ranks(dtype):
    # float32 is not rescaled: eigenvalues of 1e-18 lie far below max(N, d) x eps(float64) and
    # must still be read against the largest eigenvalue, not against 1
    simplex = torch.eye(4, dtype=dtype)  # centred: 3 equal singular values
    rank, share = geometry.effective_rank(simplex * 1e-9)
    assert rank.item() == pytest.approx(3.0, rel=1e-6)
    assert share.item() == pytest.approx(1.0, rel=1e-6)


def test_float64_points_whose_centred_values_are_all_zero_have_rank_one():
    # eight copies of binary fractions: the mean is exact, every centred entry exactly 0, and
    # the rescaling divides by nothing
    points = torch.tensor([[0.5, -1.25, 2.0, 0.75]], dtype=torch.float64).repeat(8, 1)
    rank, share = geometry.effective_rank(points)
    assert (rank.item(), share.item()) == (1.0, 0.25)


def test_chance_level_takes_a_numpy_integer_as_a_count():
    import numpy as np

    # a count read from an array (a config, a batch's shape through NumPy) was refused
    assert geometry.chance_level(np.int64(128)) == geometry.chance_level(128) == math.log(128)
    with pytest.raises(GradlabError, match=r"num_candidates must be a positive integer"):
        geometry.chance_level(np.float64(128.0))


def test_a_zero_row_counts_at_squared_distance_2_from_every_row_as_documented():
    # a ReLU head can emit an all-zero row: its cosines are 0, so uniformity and alignment read
    # it as orthogonal to every row, while normalized_std keeps it as the zero vector
    from gradlab.functional import alignment, normalized_std, uniformity

    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(5, 3, generator=generator, dtype=torch.float64)
    embeddings[2] = 0.0
    unit = [row / row.norm() if row.norm() > 0 else row for row in embeddings]
    pairs = [(i, j) for i in range(5) for j in range(5) if i < j]
    expected = math.log(sum(math.exp(-2.0 * (2.0 - 2.0 * float(unit[i] @ unit[j])))
                            for i, j in pairs) / len(pairs))  # fmt: skip
    assert float(uniformity(embeddings)) == pytest.approx(expected, rel=1e-12)
    scores = torch.stack(unit) @ torch.stack(unit).T
    positives = torch.zeros(5, 5, dtype=torch.bool)
    positives[2, 0] = positives[0, 2] = True  # the zero row and its positive
    assert float(alignment(scores, positives)) == pytest.approx(2.0, rel=1e-12)
    mean = sum(unit) / 5
    spread = sum(math.sqrt(sum(float(u[k] - mean[k]) ** 2 for u in unit) / 5) for k in range(3))
    assert float(normalized_std(embeddings)) == pytest.approx(spread / 3 * math.sqrt(3),
                                                              rel=1e-12)  # fmt: skip


@pytest.mark.parametrize(("norms", "message"), [
    ([1.0, math.nan, 1.0], "norms must be finite; got NaN in entry 1 (1 entry of 3)"),
    ([1.0, -1.0, 1.0], "norms must be the rows' L2 norms, at least 0; got -1"),
])  # fmt: skip
def test_given_norms_that_are_no_norms_are_refused(norms, message):
    # a NaN norm gave a NaN std, a norm of -1 an infinite one, without a word
    points = torch.randn(3, 4, generator=torch.Generator().manual_seed(3))
    with pytest.raises(GradlabError) as raised:
        geometry.normalized_std(points, norms=torch.tensor(norms, dtype=torch.float64))
    assert str(raised.value) == message


@pytest.mark.parametrize("function", ["normalized_std", "uniformity"])
def test_a_precomputed_argument_on_another_device_is_refused(function):
    points = torch.randn(3, 4, generator=torch.Generator().manual_seed(4))
    if function == "normalized_std":
        call, name = (lambda: geometry.normalized_std(
            points, norms=torch.ones(3, dtype=torch.float64, device="meta"))), "norms"
    else:
        call, name = (lambda: geometry.uniformity(points, gram=torch.eye(3, device="meta"))), \
            "gram"
    with pytest.raises(GradlabError) as raised:
        call()
    assert str(raised.value) == (
        f"tensors must be on one device; got embeddings on cpu, {name} on meta")


def test_normalized_std_of_meta_embeddings_and_norms_is_computed_on_meta():
    # a shape without values: nothing is read, so nothing is refused (the same device)
    points = torch.empty(3, 4, device="meta")
    norms = torch.empty(3, dtype=torch.float64, device="meta")
    assert geometry.normalized_std(points, norms=norms).device.type == "meta"
