"""Exact tie-aware AP / DCG against brute-force tie averaging and scikit-learn."""

import math

import mpmath
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import average_precision_score, dcg_score, ndcg_score

from gradlab import GradlabError
from gradlab.functional import in_batch_retrieval, tie_aware_ap, tie_aware_dcg, tie_aware_ndcg
from gradlab.functional.tie_aware import (
    harmonic_number,
    tie_aware_ap_at_positives,
    tie_aware_ap_from_counts,
)
from gradlab.validation import skip_value_checks
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.tie_aware_loops import average_precision, dcg, expected_over_ties

small_lists = st.integers(1, 7).flatmap(
    lambda size: st.tuples(
        st.lists(st.integers(0, 3), min_size=size, max_size=size),
        st.lists(st.booleans(), min_size=size, max_size=size),
        st.lists(st.integers(0, 3), min_size=size, max_size=size),
    )
)


@given(small_lists)
@pytest.mark.slow
def test_ap_equals_average_over_tie_consistent_orders(case):
    scores, relevant, _ = case
    got = tie_aware_ap(torch.tensor(scores), torch.tensor(relevant)).item()
    if not any(relevant):
        assert math.isnan(got)
        return
    assert got == pytest.approx(expected_over_ties(average_precision, scores, relevant), abs=1e-12)


@given(small_lists)
@pytest.mark.slow
def test_dcg_equals_average_over_tie_consistent_orders(case):
    scores, _, gains = case
    gain_tensor = torch.tensor(gains, dtype=torch.float64)
    got = tie_aware_dcg(torch.tensor(scores), gain_tensor).item()
    assert got == pytest.approx(expected_over_ties(dcg, scores, gains), abs=1e-12)


@given(seed=st.integers(0, 2**31 - 1), size=st.integers(2, 40))
@pytest.mark.slow
def test_without_ties_equals_ordinary_ap_and_dcg(seed, size):
    rng = np.random.default_rng(seed)
    scores = rng.permutation(size).astype(np.float64)
    relevant = rng.random(size) < 0.3
    relevant[0] = True
    gains = rng.integers(0, 4, size).astype(np.float64)
    ap = tie_aware_ap(torch.from_numpy(scores), torch.from_numpy(relevant)).item()
    assert ap == pytest.approx(average_precision_score(relevant, scores), abs=1e-12)
    value = tie_aware_dcg(torch.from_numpy(scores), torch.from_numpy(gains)).item()
    assert value == pytest.approx(dcg_score([gains], [scores]), abs=1e-10)


@pytest.mark.slow
@given(seed=st.integers(0, 2**31 - 1))
def test_dcg_and_ndcg_match_scikit_learn_tie_averaging(seed):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 5, size=(4, 25))  # heavy ties, e.g. Hamming distances
    gains = rng.integers(0, 3, size=(4, 25)).astype(np.float64)
    gains[:, 0] = 1.0
    ours = tie_aware_dcg(torch.from_numpy(scores), torch.from_numpy(gains))
    ours_n = tie_aware_ndcg(torch.from_numpy(scores), torch.from_numpy(gains))
    for q in range(4):
        assert ours[q].item() == pytest.approx(
            dcg_score(gains[q : q + 1], scores[q : q + 1].astype(float), ignore_ties=False)
        )
        assert ours_n[q].item() == pytest.approx(
            ndcg_score(gains[q : q + 1], scores[q : q + 1].astype(float), ignore_ties=False)
        )


def test_batched_equals_row_by_row_and_distances_are_negated():
    rng = np.random.default_rng(0)
    hamming = torch.from_numpy(rng.integers(0, 9, size=(6, 30)))
    relevant = torch.from_numpy(rng.random((6, 30)) < 0.3)
    relevant[:, 0] = True
    batched = tie_aware_ap(-hamming, relevant)
    for q in range(6):
        assert batched[q].item() == pytest.approx(tie_aware_ap(-hamming[q], relevant[q]).item())


def _loop_counts(scores, columns, candidates):
    """Float64 loop: candidates above / level with each positive (``columns``) of each query."""
    above, tied = [], []
    for q in range(len(scores)):
        cols = [c for c in range(len(scores[q])) if candidates[q][c]]
        above.append([sum(scores[q][c] > scores[q][i] for c in cols) for i in columns[q]])
        tied.append([sum(scores[q][c] == scores[q][i] for c in cols) for i in columns[q]])
    return above, tied


@given(
    seed=st.integers(0, 2**31 - 1),
    levels=st.sampled_from([3, 6, 1000]),  # heavy ties, some, (almost) none
    with_candidates=st.booleans(),
)
@pytest.mark.slow
def test_ap_at_positives_equals_the_tie_averaged_loop(seed, levels, with_candidates):
    """The sort-free path against brute force over tie-consistent orders, per query."""
    rng = np.random.default_rng(seed)
    rows, size, per_query = 4, 7, 3
    scores = rng.integers(0, levels, size=(rows, size)).astype(np.float64)
    candidates = np.ones((rows, size), dtype=bool)
    if with_candidates:
        candidates[:, -2:] = rng.random((rows, 2)) < 0.5  # some non-candidates (tied too)
    columns = np.stack([rng.permutation(size - 2)[:per_query] for _ in range(rows)])
    positives = np.zeros((rows, size), dtype=bool)
    np.put_along_axis(positives, columns, True, axis=1)
    score_tensor = torch.from_numpy(scores)
    anchors = score_tensor.gather(1, torch.from_numpy(columns))
    got = tie_aware_ap_at_positives(
        score_tensor, anchors, torch.from_numpy(candidates) if with_candidates else None
    )
    above, tied = _loop_counts(scores.tolist(), columns.tolist(), candidates.tolist())
    from_counts = tie_aware_ap_from_counts(anchors, torch.tensor(above), torch.tensor(tied))
    for q in range(rows):
        keep = [c for c in range(size) if candidates[q, c]]
        expected = expected_over_ties(
            average_precision, scores[q, keep].tolist(), positives[q, keep].tolist()
        )
        assert got[q].item() == pytest.approx(expected, abs=1e-12)
        assert from_counts[q].item() == pytest.approx(expected, abs=1e-12)


@given(
    seed=st.integers(0, 2**31 - 1),
    levels=st.sampled_from([2, 4, 1000]),  # heavy ties, some, (almost) none
    integer=st.booleans(),
)
@pytest.mark.slow
def test_ap_with_a_candidate_mask_is_the_tie_averaged_ap_of_the_kept(seed, levels, integer):
    """Entries outside the mask are no candidates: neither above a positive, nor tied with
    one, nor relevant (brute force over the kept entries' tie-consistent orders)."""
    rng = np.random.default_rng(seed)
    rows, size = 5, 7
    scores = rng.integers(0, levels, size=(rows, size))
    positives = rng.random((rows, size)) < 0.4
    kept = rng.random((rows, size)) < 0.7
    kept[0] = True  # a query with every entry kept: as without a mask
    kept[1] = False  # none kept: no positive, NaN
    tensor = torch.from_numpy(scores if integer else scores.astype(np.float32))
    got = tie_aware_ap(tensor, torch.from_numpy(positives), candidate_mask=torch.from_numpy(kept))
    for q in range(rows):
        keep = [c for c in range(size) if kept[q, c]]
        relevant = positives[q, keep].tolist()
        if not any(relevant):
            assert math.isnan(got[q].item())
            continue
        expected = expected_over_ties(average_precision, scores[q, keep].tolist(), relevant)
        assert got[q].item() == pytest.approx(expected, abs=1e-12)
    one = tie_aware_ap(tensor[2], torch.from_numpy(positives[2]),
                       candidate_mask=torch.from_numpy(kept[2]))  # fmt: skip
    assert one.dim() == 0 and (one.item() == got[2].item() or math.isnan(got[2].item()))


def test_a_candidate_mask_on_long_rows_keeps_the_candidates_in_score_order():
    # 300 candidates without ties: an unstable sort of the mask (which torch's is from about a
    # hundred entries on) would scramble the kept candidates' order
    generator = torch.Generator().manual_seed(5)
    scores = torch.randn(4, 300, generator=generator, dtype=torch.float64)
    positives = torch.rand(4, 300, generator=generator) < 0.1
    kept = torch.rand(4, 300, generator=generator) < 0.6
    got = tie_aware_ap(scores, positives, candidate_mask=kept)
    for q in range(4):  # classic AP over the kept candidates, by score
        order = sorted((c for c in range(300) if kept[q, c]), key=lambda c: -scores[q, c].item())
        relevant = [bool(positives[q, c]) for c in order]
        assert got[q].item() == pytest.approx(average_precision(range(len(order)), relevant),
                                              abs=1e-12)  # fmt: skip


def test_a_batch_scored_against_itself_leaves_each_query_out_with_the_mask():
    # the square in-batch matrix with its diagonal read as candidates ranked each query first
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.nn.functional.normalize(torch.randn(12, 5, generator=generator), dim=1)
    labels = torch.arange(12) % 4
    square = embeddings @ embeddings.T
    same = labels[:, None] == labels[None, :]
    without_self = tie_aware_ap(square, same, candidate_mask=~torch.eye(12, dtype=torch.bool))
    scores, positives = in_batch_retrieval(embeddings, labels)  # [12, 11]: the column dropped
    assert torch.equal(without_self, tie_aware_ap(scores, positives))
    assert (tie_aware_ap(square, same) > without_self).all()  # itself a positive, first


def test_ap_at_positives_matches_the_sorting_path_on_large_float32_rows():
    generator = torch.Generator().manual_seed(3)
    scores = torch.randn(64, 300, generator=generator).round(decimals=1)  # float32, ties
    columns = torch.stack([torch.randperm(300, generator=generator)[:5] for _ in range(64)])
    positives = torch.zeros(64, 300, dtype=torch.bool).scatter_(1, columns, True)
    got = tie_aware_ap_at_positives(scores, scores.gather(1, columns))
    torch.testing.assert_close(got, tie_aware_ap(scores, positives), rtol=0, atol=1e-12)


def test_all_tied_ap_is_the_relevant_fraction_limit():
    # Every item tied: the expected precision at each relevant rank averages to a known value.
    relevant = torch.tensor([True, False, False, True])
    expected = expected_over_ties(average_precision, [0] * 4, relevant.tolist())
    assert tie_aware_ap(torch.zeros(4), relevant).item() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tie_aware_ap(torch.zeros(3), torch.ones(3)), "positives must be a bool tensor"),
        (lambda: tie_aware_ap(torch.zeros(3), torch.ones(4, dtype=torch.bool)), r"shape \(3,\)"),
        (
            lambda: tie_aware_ap(torch.tensor([0.0, math.nan]), torch.ones(2, dtype=torch.bool)),
            "finite",
        ),
        (
            lambda: tie_aware_ap(torch.ones(2, dtype=torch.bool), torch.ones(2, dtype=torch.bool)),
            "real",
        ),
        (
            lambda: tie_aware_ap(torch.zeros(1, 2, 3), torch.ones(1, 2, 3, dtype=torch.bool)),
            "1-D or 2-D",
        ),
        (
            lambda: tie_aware_ap_at_positives(torch.zeros(2, 3), torch.zeros(3, 1)),
            r"positive_scores must be \[Q, g\] with Q = 2",
        ),
        (
            lambda: tie_aware_ap_at_positives(torch.zeros(2, 3), torch.zeros(2, 0)),
            "g >= 1",
        ),
        (
            lambda: tie_aware_ap_at_positives(torch.tensor([[0.0, math.inf]]), torch.zeros(1, 1)),
            "finite",
        ),
        (
            lambda: tie_aware_ap_at_positives(
                torch.zeros(1, 2), torch.zeros(1, 1), torch.ones(1, 3, dtype=torch.bool)
            ),
            "candidate_mask",
        ),
        (
            lambda: tie_aware_dcg(torch.zeros(3), torch.ones(3, dtype=torch.long)),
            "gains must have a floating",
        ),
        (
            lambda: tie_aware_dcg(torch.zeros(2), torch.tensor([1.0, math.inf])),
            "gains must be finite",
        ),
    ],
)
def test_error_table(call, message):
    with pytest.raises(GradlabError, match=message):
        call()


ROW3 = torch.zeros(3)
FLAGS3 = torch.ones(3, dtype=torch.bool)


def _with_value_checks_skipped(call):
    """Run ``call`` without value reads (meta tensors hold no values): the device check shows."""

    def run():
        with skip_value_checks():
            return call()

    return run


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tie_aware_ap(ROW3, FLAGS3.float()),
         r"positives must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass positives\.bool\(\)\)$"),
        (lambda: tie_aware_ap(ROW3, torch.ones(4, dtype=torch.bool)),
         r"positives must have shape \(3,\) \(one value per score\); got \(4,\)$"),
        (lambda: tie_aware_ap(torch.tensor([0.0, math.nan]), FLAGS3[:2]),
         "scores must be finite; got (NaN|inf) in .*$"),
        (lambda: tie_aware_ap(FLAGS3, FLAGS3),
         "scores must have a real floating or integer dtype; got torch.bool$"),
        (lambda: tie_aware_ap(torch.zeros(1, 1, 3), FLAGS3.view(1, 1, 3)),
         r"scores must be 1-D or 2-D; got shape \(1, 1, 3\)$"),
        (lambda: tie_aware_ap(ROW3, FLAGS3.view(1, 1, 3)),
         r"positives must be 1-D or 2-D; got shape \(1, 1, 3\)$"),
        (lambda: tie_aware_ap(ROW3, torch.ones(3, dtype=torch.bool, device="meta")),
         "tensors must be on one device; got scores on cpu, positives on meta$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(2, 3), torch.zeros(3, 1)),
         r"positive_scores must be \[Q, g\] with Q = 2 \(the rows of scores\) and g >= 1; "
         r"got shape \(3, 1\)$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(2, 3), torch.zeros(2, 0)),
         r"positive_scores must be \[Q, g\] with Q = 2 \(the rows of scores\) and g >= 1; "
         r"got shape \(2, 0\)$"),
        (lambda: tie_aware_ap_at_positives(ROW3, torch.zeros(1, 1)),
         r"scores must be 2-D; got shape \(3,\)$"),
        (lambda: tie_aware_ap_at_positives(torch.tensor([[0.0, math.inf]]), torch.zeros(1, 1)),
         "scores must be finite; got (NaN|inf) in .*$"),
        (lambda: tie_aware_ap_at_positives(torch.ones(1, 2, dtype=torch.bool), torch.zeros(1, 1)),
         "scores must have a real floating or integer dtype; got torch.bool$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(1, 2), torch.zeros(1)),
         r"positive_scores must be 2-D; got shape \(1,\)$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(1, 2), torch.ones(1, 1, dtype=torch.bool)),
         "positive_scores must have a real floating or integer dtype; got torch.bool$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(1, 2), torch.tensor([[math.nan]])),
         "positive_scores must be finite; got (NaN|inf) in .*$"),
        (_with_value_checks_skipped(lambda: tie_aware_ap_at_positives(
            torch.zeros(1, 2), torch.zeros(1, 1, device="meta"))),
         "tensors must be on one device; got scores on cpu, positive_scores on meta$"),
        (lambda: tie_aware_ap_at_positives(
            torch.zeros(1, 2), torch.zeros(1, 1), torch.ones(1, 3, dtype=torch.bool)),
         r"candidate_mask must have shape \(1, 2\) \(one flag per score\); got \(1, 3\)$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(1, 2), torch.zeros(1, 1), FLAGS3[:2]),
         r"candidate_mask must be 2-D; got shape \(2,\)$"),
        (lambda: tie_aware_ap_at_positives(torch.zeros(1, 2), torch.zeros(1, 1),
                                           torch.ones(1, 2)),
         r"candidate_mask must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass candidate_mask\.bool\(\)\)$"),
        (lambda: tie_aware_ap_at_positives(
            torch.zeros(1, 2), torch.zeros(1, 1), torch.ones(1, 2, dtype=torch.bool,
                                                             device="meta")),
         "tensors must be on one device; got scores on cpu, candidate_mask on meta$"),
        (lambda: tie_aware_ap(ROW3, FLAGS3, candidate_mask=torch.ones(3)),
         r"candidate_mask must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass candidate_mask\.bool\(\)\)$"),
        (lambda: tie_aware_ap(ROW3, FLAGS3, candidate_mask=FLAGS3[:2]),
         r"candidate_mask must have shape \(3,\) \(one flag per score\); got \(2,\)$"),
        (lambda: tie_aware_ap(ROW3, FLAGS3, candidate_mask=FLAGS3.to("meta")),
         "tensors must be on one device; got scores on cpu, candidate_mask on meta$"),
        (lambda: tie_aware_dcg(ROW3, torch.ones(3, dtype=torch.long)),
         r"gains must have a floating dtype; got torch.int64; pass gains\.float\(\)$"),
        (lambda: tie_aware_dcg(torch.zeros(2), torch.tensor([1.0, math.inf])),
         "gains must be finite; got (NaN|inf) in .*$"),
        (lambda: tie_aware_dcg(ROW3, torch.ones(2)),
         r"gains must have shape \(3,\) \(one value per score\); got \(2,\)$"),
    ],
)  # fmt: skip
def test_messages_are_whole_and_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


def _loop_ndcg(scores, gains):
    """Tie-averaged DCG over the ideal DCG (gains sorted, no ties); NaN when that is not > 0."""
    ideal = math.fsum(g / math.log2(r + 1) for r, g in enumerate(sorted(gains, reverse=True), 1))
    return expected_over_ties(dcg, scores, gains) / ideal if ideal > 0 else math.nan


@pytest.mark.parametrize(
    ("scores", "gains"),
    [
        ([2, 1, 1, 0, 1], [0.5, 0.0, 0.25, 0.0, 0.0]),  # ideal DCG 0.66 < 1
        ([0.3, 0.3, 0.9, 0.1], [3.0, 0.0, 1.0, 2.0]),
        ([1, 1, 1], [-1.0, 2.0, 0.5]),  # negative gains are gains too
        ([1, 2, 3], [0.0, 0.0, 0.0]),  # ideal DCG 0: NaN
        ([1, 2], [-1.0, -2.0]),  # ideal DCG < 0: NaN
    ],
)
def test_ndcg_of_one_query_equals_the_tie_averaged_loop(scores, gains):
    got = tie_aware_ndcg(torch.tensor(scores), torch.tensor(gains, dtype=torch.float64))
    assert got.shape == ()
    expected = _loop_ndcg(scores, gains)
    if math.isnan(expected):
        assert math.isnan(got.item())
    else:
        assert got.item() == pytest.approx(expected, abs=1e-15)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_ndcg_ideal_is_float64_whatever_the_gains_dtype(dtype):
    # Gains exact in float32; the ideal DCG's discounts are float64 (1e-16, not 1e-7).
    rng = np.random.default_rng(1)
    scores = rng.permutation(14).reshape(2, 7)  # no ties: one order to average over
    gains = rng.integers(0, 4, size=(2, 7)) * 0.25
    got = tie_aware_ndcg(torch.from_numpy(scores), torch.from_numpy(gains).to(dtype))
    assert got.dtype == torch.float64
    for q in range(2):
        expected = _loop_ndcg(scores[q].tolist(), gains[q].tolist())
        assert got[q].item() == pytest.approx(expected, abs=4e-16)


def test_ndcg_of_a_query_without_gain_leaves_the_others_gradients_finite():
    # Query 0 has no gain (ideal DCG 0, NaN): the masked division keeps its 0/0 out of the
    # backward pass, so a loss on query 1 gives query 0's gains a zero gradient, not NaN.
    scores = torch.tensor([[3.0, 2.0, 1.0], [1.0, 3.0, 2.0]])
    gains = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0]], requires_grad=True)
    values = tie_aware_ndcg(scores, gains)
    assert math.isnan(values[0].item())
    values[1].backward()
    assert bool(torch.isfinite(gains.grad).all())
    assert gains.grad[0].abs().sum().item() == 0.0


def test_tie_aware_results_stay_on_the_input_device_whatever_the_default_device():
    scores = torch.tensor([[2.0, 1.0, 1.0, 0.0], [0.5, 0.5, 0.5, 1.0]], dtype=torch.float64)
    relevance = torch.tensor([[False, True, False, True], [True, False, False, False]])
    gains = relevance.double() * 2.0
    assert_unchanged_under_another_default_device(
        lambda: (tie_aware_ap(scores, relevance), tie_aware_dcg(scores, gains),
                 tie_aware_ndcg(scores, gains), tie_aware_ndcg(scores[0], gains[0]),
                 tie_aware_ap_at_positives(scores, scores[:, :1])),
        scores.device,
    )  # fmt: skip


def test_ap_from_counts_of_one_positive_after_a_million_candidates():
    # A positive alone at its score after N = 10^6 candidates, none relevant: AP = 1/(N + 1).
    # A_g multiplies zero when n = 1: taking it as 0 keeps the sum free of a cancellation of
    # N * (H(N + 1) - H(N)) against 1 that costs about 1e-9.
    got = tie_aware_ap_from_counts(
        torch.tensor([[0.0]]), torch.tensor([[10**6]]), torch.tensor([[1]])
    )
    assert got.item() == pytest.approx(1.0 / (10**6 + 1), abs=1e-15)


def test_ap_from_counts_is_float64_beyond_float32_integers():
    # 1000 tied positives in a group of n = 2^25 + 2 items (more than float32 holds exactly):
    # Eq. 3 in mpmath, A = (n+ - 1)/(n - 1), B = 1 - A, H by digamma-free harmonic sums.
    tied_positives, size = 1000, 2**25 + 2
    got = tie_aware_ap_from_counts(
        torch.zeros(1, tied_positives, dtype=torch.float64),
        torch.zeros(1, tied_positives, dtype=torch.long),
        torch.full((1, tied_positives), size),
    )
    with mpmath.workdps(30):
        share = mpmath.mpf(tied_positives - 1) / (size - 1)
        expected = share + (1 - share) * mpmath.harmonic(size) / size
    assert got.item() == pytest.approx(float(expected), abs=1e-15)


@pytest.mark.parametrize("with_candidates", [False, True])
def test_ap_at_positives_of_integer_scores_equals_the_tie_averaged_loop(with_candidates):
    # Integer scores (negated Hamming distances) take the integer path: the non-candidates
    # are masked out of the counts, not filled with -inf.
    rng = np.random.default_rng(7)
    scores = -rng.integers(0, 4, size=(3, 7))
    candidates = np.ones((3, 7), dtype=bool)
    if with_candidates:
        candidates[:, 5:] = [[False, True], [True, False], [False, False]]
    columns = np.array([[0, 2], [1, 4], [3, 0]])
    anchors = torch.from_numpy(scores).gather(1, torch.from_numpy(columns))
    got = tie_aware_ap_at_positives(
        torch.from_numpy(scores), anchors, torch.from_numpy(candidates) if with_candidates else None
    )
    for q in range(3):
        keep = [c for c in range(7) if candidates[q, c]]
        relevant = [c in columns[q] for c in keep]
        expected = expected_over_ties(average_precision, scores[q, keep].tolist(), relevant)
        assert got[q].item() == pytest.approx(expected, abs=1e-12)


def test_ap_at_positives_rounds_positive_scores_to_the_scores_dtype():
    # float32 scores, the positives' scores given in float64 (e.g. computed apart): each is
    # compared as the float32 value it is in the row, so it ties with its own entry.
    values = [0.1, 0.7, 0.3, 0.1, 0.9]
    scores = torch.tensor([values], dtype=torch.float32)
    positive_scores = torch.tensor([[0.1, 0.3]], dtype=torch.float64)
    got = tie_aware_ap_at_positives(scores, positive_scores)
    expected = expected_over_ties(
        average_precision, scores[0].tolist(), [True, False, True, False, False]
    )
    assert got.item() == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("n", [0.0, 1.0, 2.5, 3.0, 10.0, 1e6])
def test_harmonic_number_matches_mpmath(n):
    got = harmonic_number(torch.tensor([n], dtype=torch.float64)).item()
    assert got == pytest.approx(float(mpmath.harmonic(n)), rel=4e-16, abs=0)


@pytest.mark.parametrize("rank", range(1, 41))
def test_one_positive_without_ties_has_classic_ap_one_over_its_rank_to_the_last_bit(rank):
    # a group of one: its precision (N+ + 1) / (N + 1) in one division, the float 1 / rank
    # that classic AP computes (a difference of harmonic numbers, or a share of 1 with an
    # offset, lands an ulp away)
    scores = -torch.arange(float(rank + 3))  # descending: the candidate at rank r is r - 1
    positives = torch.arange(rank + 3) == rank - 1
    assert tie_aware_ap(scores, positives).item() == 1.0 / rank
    counts = tie_aware_ap_from_counts(scores[rank - 1].reshape(1, 1),
                                      torch.tensor([[rank - 1]]), torch.tensor([[1]]))  # fmt: skip
    assert counts.item() == 1.0 / rank


def test_harmonic_number_of_zero_is_exactly_zero():
    assert harmonic_number(torch.zeros(3, dtype=torch.float64)).tolist() == [0.0, 0.0, 0.0]


def test_ap_of_one_relevant_item_after_a_million_irrelevant_ones():
    # The sorting path's groups of one item: AP = 1/(N + 1) with N = 10^6 above it, free of
    # the 1e-9 cancellation that A_g = 1 would bring (A_g multiplies zero when n = 1).
    size = 10**6 + 1
    scores = -torch.arange(size, dtype=torch.float64)
    relevance = torch.zeros(size, dtype=torch.bool)
    relevance[-1] = True
    assert tie_aware_ap(scores, relevance).item() == pytest.approx(1.0 / size, abs=1e-15)


def test_dcg_is_float64_for_float32_gains_with_ties():
    # Tied groups average their gains: in float64 (1e-16), not in float32 (1e-8).
    scores = [2, 1, 1, 1, 0, 0]
    gains = torch.tensor([0.1, 0.7, 0.2, 0.3, 0.9, 0.4], dtype=torch.float32)
    got = tie_aware_dcg(torch.tensor(scores), gains)
    assert got.dtype == torch.float64
    expected = expected_over_ties(dcg, scores, gains.double().tolist())
    assert got.item() == pytest.approx(expected, abs=1e-15)


def test_one_query_of_1d_scores_gives_0d_results():
    scores, relevance = torch.tensor([2, 1, 1]), torch.tensor([False, True, False])
    ap = tie_aware_ap(scores, relevance)
    value = tie_aware_dcg(scores, relevance.double())
    assert ap.shape == () and value.shape == ()
    assert ap.item() == pytest.approx(
        expected_over_ties(average_precision, [2, 1, 1], [False, True, False]), abs=1e-15
    )
    assert value.item() == pytest.approx(expected_over_ties(dcg, [2, 1, 1], [0, 1, 0]), abs=1e-15)


def test_dcg_with_more_queries_than_candidates():
    scores = [[1, 1], [2, 1], [0, 3], [5, 5]]
    gains = [[1.0, 0.0], [0.5, 2.0], [3.0, 1.0], [0.0, 0.25]]
    got = tie_aware_dcg(torch.tensor(scores), torch.tensor(gains, dtype=torch.float64))
    expected = [expected_over_ties(dcg, s, g) for s, g in zip(scores, gains, strict=True)]
    torch.testing.assert_close(got, torch.tensor(expected, dtype=torch.float64), atol=1e-15, rtol=0)


def test_a_large_tie_keeps_candidate_order_and_sums_its_gains_as_scikit_learn_does():
    """17 tied candidates (where torch's unstable CPU sort starts to reorder ties): the order
    within the tie is the candidates' (Python's stable sort), and a group's gains are summed in
    that order, so gains that cancel (+-2^53) give scikit-learn's tie-averaged DCG."""
    from gradlab.functional.tie_aware import TieGroups

    scores = torch.zeros(1, 17)
    assert TieGroups(scores).order[0].tolist() == sorted(range(17), key=lambda c: -scores[0, c])
    gains = [1.0] * 15 + [-(2.0**53), 2.0**53]
    expected = dcg_score([gains], [[0.0] * 17], ignore_ties=False)
    got = tie_aware_dcg(scores[0], torch.tensor(gains, dtype=torch.float64)).item()
    assert got == pytest.approx(expected, rel=1e-12)


def test_tie_aware_ap_keeps_queries_apart_around_a_query_without_positives():
    # two candidates, the middle query without a positive: the first query's positive ranked
    # second and the last query's ranked first must stay two queries' entries
    scores = torch.tensor([[3.0, 2.0], [3.0, 2.0], [3.0, 2.0]])
    positives = torch.tensor([[False, True], [False, False], [True, False]])
    got = tie_aware_ap(scores, positives)
    expected = [average_precision([0, 1], row) if any(row) else math.nan
                for row in positives.tolist()]  # fmt: skip
    assert got.tolist() == pytest.approx(expected, rel=1e-12, nan_ok=True)


@pytest.mark.parametrize("size", [2, 5, 10, 37])
def test_a_perfect_ranking_has_ap_exactly_one_and_no_ranking_exceeds_one(size):
    # the difference of two harmonic numbers gave 1 + 2 ulp for a perfect ranking (and 1 - 1
    # ulp for one positive on top); classic AP's precision is one division
    descending = -torch.arange(float(size))
    assert tie_aware_ap(descending, torch.ones(size, dtype=torch.bool)).item() == 1.0
    assert tie_aware_ap(descending, torch.arange(size) == 0).item() == 1.0
    assert tie_aware_ap(torch.arange(float(size)), torch.ones(size, dtype=torch.bool)).item() == 1.0
    generator = torch.Generator().manual_seed(size)
    for tied in (False, True):
        scores = (torch.randint(0, 4, (50, size), generator=generator).double() if tied
                  else torch.randn(50, size, generator=generator, dtype=torch.float64))  # fmt: skip
        positives = torch.rand(50, size, generator=generator) < 0.5
        positives[:, 0] = True
        assert tie_aware_ap(scores, positives).max().item() <= 1.0


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("measure", [tie_aware_ap, tie_aware_dcg, tie_aware_ndcg])
def test_unsigned_scores_are_refused_as_a_negated_distance_wraps_around(measure, dtype):
    # -hamming in uint8 is 256 - hamming: the nearest candidates ranked last, silently
    hamming = torch.tensor([[1, 2, 3]]).to(dtype)
    relevance = torch.tensor([[True, False, True]])
    labels = relevance if measure is tie_aware_ap else relevance.double()
    with pytest.raises(GradlabError) as raised:
        measure(-hamming if dtype == torch.uint8 else hamming, labels)
    bits = 8 * torch.empty((), dtype=dtype).element_size()  # -1 wraps to 2**bits - 1
    assert str(raised.value) == (
        f"scores must have a signed dtype; got {dtype} (a negated unsigned distance wraps "
        f"around: -1 is {2**bits - 1} in uint{bits}): pass scores.long(), or -distance.long() "
        "for distances")
    # the advised form: the nearest candidates first, the reference loop's AP
    if measure is tie_aware_ap:
        assert measure(-hamming.long(), labels).tolist() == [
            average_precision([-1, -2, -3], [True, False, True])]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("argument", ["scores", "positive_scores"])
def test_the_ap_at_positives_refuses_unsigned_scores_as_tie_aware_ap_does(argument, dtype):
    # uint8: -hamming wrapped around silently; uint16 and wider: torch's "gt_cpu" error
    bits = 8 * torch.empty((), dtype=dtype).element_size()
    hamming = torch.tensor([[1, 2, 3]])
    scores = -hamming.to(dtype) if dtype == torch.uint8 else hamming.to(dtype)
    signed = -hamming
    given = {"scores": signed, "positive_scores": signed[:, [0, 2]]}
    given[argument] = scores if argument == "scores" else scores[:, [0, 2]]
    with pytest.raises(GradlabError) as raised:
        tie_aware_ap_at_positives(given["scores"], given["positive_scores"])
    assert str(raised.value) == (
        f"{argument} must have a signed dtype; got {dtype} (a negated unsigned distance wraps "
        f"around: -1 is {2**bits - 1} in uint{bits}): pass {argument}.long(), or "
        "-distance.long() for distances")
    # the advised form: the nearest candidates first (candidate order 0, 1, 2)
    assert tie_aware_ap_at_positives(signed, signed[:, [0, 2]]).tolist() == [
        average_precision([0, 1, 2], [True, False, True])]
