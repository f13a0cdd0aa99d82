"""The in-batch forms of the margins and of alignment + uniformity: the same values as the
general functions (bit for bit) and as float64 loops, on scores with ties, queries without a
positive or a negative, and a query whose own score is not its row's largest."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional import geometry
from tests.reference import geometry_loops as loops

SIZES = (4, 4, 3, 1, 1)  # classes: two singletons have no positive


def _batch(seed: int, ties: bool = True):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.repeat_interleave(torch.arange(len(SIZES)), torch.tensor(SIZES))
    size = len(labels)
    if ties:  # a coarse grid: many equal scores, the query's own among them
        scores = torch.randint(-4, 5, (size, size), generator=generator).float() / 4
    else:
        scores = torch.randn(size, size, generator=generator)
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    positives.fill_diagonal_(False)
    return scores, positives


def _loop_margins(scores, positives):
    """The loops' margins with every entry a candidate but the query's own."""
    candidates = (~torch.eye(len(scores), dtype=torch.bool)).tolist()
    return loops.query_margins(scores.tolist(), positives.tolist(), candidates)


def _same(first: torch.Tensor, second: torch.Tensor) -> bool:
    return torch.equal(torch.nan_to_num(first, nan=-7.0), torch.nan_to_num(second, nan=-7.0))


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("ties", [True, False])
def test_in_batch_margins_equal_the_general_ones_bit_for_bit(seed, ties):
    scores, positives = _batch(seed, ties)
    candidates = ~torch.eye(len(scores), dtype=torch.bool)
    general = geometry.query_margins(scores, positives, candidate_mask=candidates)
    for given in (None, (-scores).sort(dim=1).values, (-scores).sort(dim=1, stable=True).values):
        fast = geometry.in_batch_margins(scores, positives, given)
        for name, a, b in zip(general._fields, fast, general, strict=True):
            assert _same(a, b), name


@pytest.mark.parametrize("seed", range(4))
def test_in_batch_margins_match_a_loop(seed):
    scores, positives = _batch(seed)
    got = geometry.in_batch_margins(scores, positives)
    expected = _loop_margins(scores, positives)
    assert sum(e is None for e in expected) == 2 and sum(e is not None for e in expected) > 8
    for index, values in enumerate(expected):
        if values is None:
            assert math.isnan(float(got.margin[index]))
            assert math.isnan(float(got.recall_at_1[index]))
            assert math.isnan(float(got.violation_share[index]))
            continue
        assert [float(field[index]) for field in got] == pytest.approx(list(values), abs=1e-12)


def test_the_query_s_own_score_is_never_counted():
    # Row 0: the query scores itself 0.9, above its positive (0.5) and its negatives (0.6, 0.2):
    # one violation (0.6), R@1 0 (0.6 > 0.5). Row 1: its own score 0.1 is the row's lowest;
    # rows 2 and 3 rank their positive (0.7) first.
    scores = torch.tensor([[0.9, 0.5, 0.6, 0.2],
                           [0.5, 0.1, 0.3, 0.4],
                           [0.6, 0.3, 2.0, 0.7],
                           [0.2, 0.4, 0.7, 0.8]])  # fmt: skip
    positives = torch.tensor([[False, True, False, False],
                              [True, False, False, False],
                              [False, False, False, True],
                              [False, False, True, False]])  # fmt: skip
    got = geometry.in_batch_margins(scores, positives)
    expected = _loop_margins(scores, positives)
    for index, values in enumerate(expected):
        assert [float(field[index]) for field in got] == pytest.approx(list(values), abs=1e-7)
    assert got.violation_share.tolist()[:2] == [0.5, 0.0]
    assert got.recall_at_1.tolist() == [0.0, 1.0, 1.0, 1.0]


def test_a_row_of_positives_only_and_a_batch_of_one():
    scores = torch.tensor([[1.0, 0.4], [0.4, 1.0]])
    positives = torch.tensor([[False, True], [True, False]])
    got = geometry.in_batch_margins(scores, positives)
    assert got.positive.tolist() == pytest.approx([0.4, 0.4])
    assert all(math.isnan(v) for v in got.margin.tolist() + got.hardest_negative.tolist())
    one = geometry.in_batch_margins(torch.ones(1, 1), torch.zeros(1, 1, dtype=torch.bool))
    assert all(math.isnan(float(field[0])) for field in one)


@pytest.mark.parametrize("alpha,t", [(2.0, 2.0), (1.0, 0.5), (3.0, 4.0)])
def test_alignment_and_uniformity_equal_the_two_functions_bit_for_bit(alpha, t):
    points = torch.randn(13, 6, generator=torch.Generator().manual_seed(4))
    unit = torch.nn.functional.normalize(points, dim=1)
    gram = unit @ unit.T
    _, positives = _batch(0)
    positives = positives[:13, :13]
    candidates = ~torch.eye(13, dtype=torch.bool)
    aligned, spread = geometry.in_batch_alignment_uniformity(gram, positives, alpha, t)
    assert torch.equal(aligned, geometry.alignment(gram, positives, alpha,
                                                   candidate_mask=candidates))  # fmt: skip
    assert torch.equal(spread, geometry.uniformity(points, t, gram=gram))
    # and against a float64 loop over the unit vectors
    rows = unit.double().tolist()
    distance = [[sum((a - b) ** 2 for a, b in zip(u, v, strict=True)) for v in rows] for u in rows]
    pairs = [(i, j) for i in range(13) for j in range(13) if positives[i, j]]
    expected = sum(distance[i][j] ** (alpha / 2) for i, j in pairs) / len(pairs)
    assert float(aligned) == pytest.approx(expected, rel=1e-5)
    spread_loop = math.log(sum(math.exp(-t * distance[i][j]) for i in range(13)
                               for j in range(13) if i != j) / (13 * 12))  # fmt: skip
    assert float(spread) == pytest.approx(spread_loop, rel=1e-5)


def test_a_positive_on_the_diagonal_is_none_as_with_a_candidate_mask():
    scores, positives = _batch(3, ties=False)
    flagged = positives.clone().fill_diagonal_(True)
    candidates = ~torch.eye(len(scores), dtype=torch.bool)
    general = geometry.query_margins(scores, flagged, candidate_mask=candidates)
    for name, a, b in zip(general._fields, geometry.in_batch_margins(scores, flagged), general,
                          strict=True):  # fmt: skip
        assert _same(a, b), name
    gram = scores / scores.abs().max()
    aligned, _ = geometry.in_batch_alignment_uniformity(gram, flagged)
    assert torch.equal(aligned, geometry.alignment(gram, flagged, candidate_mask=candidates))
    assert torch.equal(flagged.diagonal(), torch.ones(len(scores), dtype=torch.bool))  # kept


def _grid_batch(size: int, seed: int):
    """Cosine-like scores on a grid of 1/64 (exact in bfloat16: both paths read the same
    values) and labels with a positive on the diagonal and a query without positives."""
    generator = torch.Generator().manual_seed(seed)
    unit = torch.nn.functional.normalize(torch.randn(size, 16, generator=generator), dim=1)
    scores = (unit @ unit.T * 64).round() / 64
    labels = torch.randint(0, size // 4, (size,), generator=generator)
    labels[0] = size  # no positive
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)  # the diagonal too: no positive
    return scores, positives


@pytest.mark.parametrize("alpha", [2.0, 1.0, 3.0])
def test_both_alignment_paths_agree_to_a_few_ulps(alpha):
    """float32 scores on a CPU sum the kept entries alone (from 2^16 entries), bfloat16 ones
    masked blocks of rows (as every dtype on other devices, and smaller matrices); on the same
    values (300 x 300: several blocks) the two
    add the same distances in another order: equal up to a few float64 ulps, and each path
    equals the general functions bit for bit."""
    scores, positives = _grid_batch(300, 8)
    candidates = ~torch.eye(300, dtype=torch.bool)
    results = {}
    for dtype in (torch.float32, torch.bfloat16):
        gram = scores.to(dtype)
        aligned, spread = geometry.in_batch_alignment_uniformity(gram, positives, alpha)
        assert torch.equal(aligned, geometry.alignment(gram, positives, alpha,
                                                       candidate_mask=candidates))  # fmt: skip
        results[dtype] = (aligned, spread)
    (kept, spread), (masked, spread_masked) = results.values()
    assert torch.equal(spread, spread_masked)  # the same blocks: bit for bit
    assert abs(float(kept) - float(masked)) <= 4 * math.ulp(float(masked)) and float(kept) > 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_both_margin_paths_give_the_same_values(dtype):
    """The margins of float32/float64 scores on a CPU read the positives by their entries
    (from 2^16 entries), bfloat16 ones by masked passes (as every dtype on other devices, and
    smaller matrices): on the same values the
    same margins (the positive mean's float64 sum of a few grid values is exact in any
    order), in-batch and in general, with a positive on the diagonal and a row without."""
    scores, positives = _grid_batch(300, 9)
    candidates = ~torch.eye(300, dtype=torch.bool)
    results = []
    for values in (scores.to(dtype), scores.to(torch.bfloat16)):
        negated = (-values).sort(dim=1).values
        results.append((geometry.in_batch_margins(values, positives, negated),
                        geometry.query_margins(values, positives,
                                               candidate_mask=candidates)))  # fmt: skip
    fast, slow = results
    for got, expected in zip(fast, slow, strict=True):
        for name, a, b in zip(expected._fields, got, expected, strict=True):
            assert _same(a, b), name
    assert math.isnan(float(fast[0].positive[0])) and not math.isnan(float(fast[0].margin[1]))


@pytest.mark.parametrize("shape", [(128, 512), (512, 128)], ids=["wide", "tall"])
def test_margins_of_a_non_square_matrix_read_by_its_entries_match_the_loops(shape):
    # 2^16 entries (read by their entries on a CPU), more columns than rows or fewer, and the
    # last rows without a positive: every row keeps its own values and the rows beyond the
    # last positive are NaN, not dropped
    rows, columns = shape
    generator = torch.Generator().manual_seed(21)
    scores = torch.rand(rows, columns, generator=generator) * 2 - 1
    positives = torch.rand(rows, columns, generator=generator) < 0.02
    positives[-5:] = False
    expected = loops.query_margins(scores.double().tolist(), positives.tolist(),
                                   [[True] * columns] * rows)  # fmt: skip
    got = geometry.query_margins(scores, positives)
    for row, values in enumerate(expected):
        if values is None:  # no positive: every value NaN
            assert math.isnan(float(got.positive[row])) and math.isnan(float(got.margin[row]))
            continue
        mean, lowest, highest, margin, share, recall = values
        assert float(got.positive[row]) == pytest.approx(mean, rel=1e-6)
        assert float(got.hardest_positive[row]) == pytest.approx(lowest, rel=1e-6)
        assert float(got.hardest_negative[row]) == pytest.approx(highest, rel=1e-6)
        assert float(got.margin[row]) == pytest.approx(margin, rel=1e-6, abs=1e-7)
        assert float(got.violation_share[row]) == pytest.approx(share, abs=1e-12)
        assert float(got.recall_at_1[row]) == recall
    assert [values is None for values in expected][-5:] == [True] * 5


def test_margins_of_one_column_read_by_its_entries_are_its_scores():
    # 2^16 queries of one candidate each: a positive's mean is its own score, and without a
    # negative no query has a margin
    scores = torch.linspace(-1, 1, 1 << 16).unsqueeze(1)
    positives = (torch.arange(1 << 16) % 3 == 0).unsqueeze(1)
    got = geometry.query_margins(scores, positives)
    assert torch.equal(got.positive[::3], scores[::3, 0].double())
    assert bool(got.positive[1::3].isnan().all()) and bool(got.margin.isnan().all())


def test_the_caller_s_scores_are_left_as_they_were():
    scores, positives = _batch(1, ties=False)
    scores = scores.tanh()  # cosines, which the alignment and uniformity read
    kept = scores.clone()
    geometry.in_batch_alignment_uniformity(scores, positives)
    geometry.in_batch_margins(scores, positives)
    assert torch.equal(scores, kept)


@pytest.mark.parametrize("call,match", [
    (lambda s, p: geometry.in_batch_margins(s[:, :5], p[:, :5]), r"square \[N, N\].*\(13, 5\)"),
    (lambda s, p: geometry.in_batch_margins(s, p, torch.zeros(13, 12)), "negated_sorted"),
    (lambda s, p: geometry.in_batch_alignment_uniformity(s[:1, :1], p[:1, :1]),
     r"at least 2 embeddings.*\(1, 1\)"),
    (lambda s, p: geometry.in_batch_alignment_uniformity(s, p, alpha=0.0), "alpha"),
    (lambda s, p: geometry.in_batch_alignment_uniformity(s, p, t=-1.0), "t must"),
])  # fmt: skip
def test_bad_input_names_the_argument(call, match):
    scores, positives = _batch(2)
    with pytest.raises(GradlabError, match=match):
        call(scores, positives)


def test_a_query_with_one_negative_has_its_share_and_margin():
    # Query 0: positives 1 and 2, one negative (3) at 0.7 between them: share 1 of 1.
    scores = torch.tensor([[1.0, 0.9, 0.5, 0.7],
                           [0.9, 1.0, 0.8, 0.1],
                           [0.5, 0.8, 1.0, 0.2],
                           [0.7, 0.1, 0.2, 1.0]])  # fmt: skip
    positives = torch.tensor([[False, True, True, False],
                              [True, False, True, False],
                              [True, True, False, False],
                              [False, False, False, False]])  # fmt: skip
    got = geometry.in_batch_margins(scores, positives)
    assert got.violation_share.tolist()[:3] == [1.0, 0.0, 0.0]
    assert got.margin.tolist()[0] == pytest.approx(0.5 - 0.7)
    assert got.recall_at_1.tolist()[:3] == [1.0, 1.0, 1.0]
    assert math.isnan(got.margin.tolist()[3])  # no positive


def test_every_field_is_float64_from_float32_scores():
    scores, positives = _batch(5, ties=False)
    assert scores.dtype == torch.float32
    assert {field.dtype for field in geometry.in_batch_margins(scores, positives)} == {
        torch.float64}


@pytest.mark.parametrize("call,message", [
    (lambda s, p: geometry.in_batch_margins(s, p, torch.zeros(13, 13, dtype=torch.long)),
     "negated_sorted must have a floating dtype; got torch.int64; pass negated_sorted.float()"),
    (lambda s, p: geometry.in_batch_margins(s, p, torch.zeros(13, 12)),
     "negated_sorted must have shape (13, 13) (each row of -scores sorted); got (13, 12)"),
    (lambda s, p: geometry.in_batch_margins(s, p, torch.zeros(13, 13, device="meta")),
     "tensors must be on one device; got scores on cpu, negated_sorted on meta"),
    (lambda s, p: geometry.in_batch_alignment_uniformity(s, p, alpha=1.0000001e6),
     "alpha must be a finite number in [1e-12, 1e+06]; got 1000000.1"),
    (lambda s, p: geometry.in_batch_alignment_uniformity(s, p, t=1.0000001e6),
     "t must be a finite number in [1e-12, 1e+06]; got 1000000.1"),
])  # fmt: skip
def test_bad_input_messages_word_for_word(call, message):
    scores, positives = _batch(2)
    with pytest.raises(GradlabError) as error:
        call(scores, positives)
    assert str(error.value) == message


@pytest.mark.parametrize("outside", [1.5, -1.5])
@pytest.mark.parametrize("call", [
    lambda s, p: geometry.alignment(s, p),
    lambda s, p: geometry.in_batch_alignment_uniformity(s, p),
    lambda s, p: geometry.uniformity(torch.eye(2), gram=s),
])  # fmt: skip
def test_scores_that_are_no_cosines_are_refused_and_rounding_past_one_is_not(call, outside):
    # alignment read 1.5 as distance 0 (clamped) and -1.5 as distance 5, past the largest, 4
    positives = torch.tensor([[False, True], [True, False]])
    scores = torch.tensor([[1.0, outside], [outside, 1.0]])
    with pytest.raises(GradlabError) as raised:
        call(scores, positives)
    assert str(raised.value).endswith(
        f"must be cosine similarities in [-1, 1] (up to rounding, 0.001); got {outside:g}")
    rounded = torch.tensor([[1.0, -1.0004], [-1.0004, 1.0]])  # past -1 by float16 rounding
    assert float(geometry.alignment(rounded, positives)) == 4.0  # the opposite point's distance
    assert float(geometry.alignment(-rounded, positives)) == 0.0


def test_the_cosine_check_allows_float16_rounding_and_names_the_farthest_score():
    positives = torch.tensor([[False, True], [True, False]])

    def pair(score, dtype=torch.float16):
        return torch.tensor([[1.0, score], [score, 1.0]], dtype=dtype)

    # float16's slack is 8 of its steps past 1 (wider than 1e-3): the 8th passes, the 9th not
    assert float(geometry.alignment(pair(1 + 8 * 2**-10), positives)) == 0.0
    with pytest.raises(GradlabError, match=r"got 1.0087890625$"):
        geometry.alignment(pair(1 + 9 * 2**-10), positives)
    both = torch.tensor([[1.0, 1.5], [-1.5, 1.0]])  # as far out above as below: the lower named
    with pytest.raises(GradlabError, match=r"got -1.5$"):
        geometry.alignment(both, positives)


def test_the_cosine_measures_of_a_meta_matrix_are_meta_values():
    # a shape without values: computed on as it is, nothing read
    scores = torch.empty(3, 3, device="meta")
    positives = torch.zeros(3, 3, dtype=torch.bool, device="meta")
    results = [geometry.alignment(scores, positives),
               geometry.uniformity(torch.empty(3, 2, device="meta"), gram=scores),
               *geometry.in_batch_alignment_uniformity(scores, positives)]  # fmt: skip
    assert [(r.device.type, r.shape, r.dtype) for r in results] == [
        ("meta", torch.Size([]), torch.float64)] * 4


@pytest.mark.parametrize("size", [0, 1])
def test_in_batch_margins_of_an_empty_or_one_item_batch_are_those_of_the_general_form(size):
    # a 0 x 0 matrix raised torch's "amin(): Expected reduction dim 1 to have non-zero size"
    scores, positives = torch.zeros(size, size), torch.zeros(size, size, dtype=torch.bool)
    candidates = ~torch.eye(size, dtype=torch.bool)
    general = geometry.query_margins(scores, positives, candidate_mask=candidates)
    fast = geometry.in_batch_margins(scores, positives)
    for name, a, b in zip(general._fields, fast, general, strict=True):
        assert a.shape == (size,) and a.dtype == b.dtype and _same(a, b), name


def test_in_batch_margins_of_a_transposed_matrix_warn_nothing():
    # torch's searchsorted warned about a non-contiguous boundary tensor, at the user's call
    scores, positives = _batch(5, ties=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = geometry.in_batch_margins(scores.t(), positives.t())
    expected = geometry.in_batch_margins(scores.t().contiguous(), positives.t().contiguous())
    assert all(_same(a, b) for a, b in zip(got, expected, strict=True))
