"""Recall@K, in-batch retrieval scores and the retrieval report against loop references."""

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from gradlab import GradlabError
from gradlab.functional import in_batch_retrieval, recall_at_k, retrieval_report
from tests.reference.tie_aware_loops import average_precision, expected_over_ties


def _loop_recall(scores, relevant, k):
    """Share of queries with a relevant item among their k highest scores, by sorting lists."""
    hits = []
    for row, flags in zip(scores, relevant, strict=True):
        if not any(flags):
            continue
        best = sorted(range(len(row)), key=lambda c: -row[c])[:k]
        hits.append(any(flags[c] for c in best))
    return sum(hits) / len(hits) if hits else math.nan


def _random_problem(seed, queries, columns, share=0.3):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.rand(queries, columns, generator=generator, dtype=torch.float64)
    relevant = torch.rand(queries, columns, generator=generator) < share
    return scores, relevant


@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 6),
    columns=st.integers(1, 9),
    ks=st.lists(st.integers(1, 12), min_size=1, max_size=4, unique=True),
)
@pytest.mark.slow
def test_recall_at_k_matches_loops(seed, queries, columns, ks):
    # Continuous random scores: no ties, so "the k best" is one set. k may exceed the columns.
    scores, relevant = _random_problem(seed, queries, columns)
    got = recall_at_k(scores, relevant, ks)
    assert list(got) == ks
    for k in ks:
        expected = _loop_recall(scores.tolist(), relevant.tolist(), k)
        if math.isnan(expected):
            assert math.isnan(got[k])
        else:
            assert got[k] == pytest.approx(expected, abs=1e-15)


def test_recall_at_k_skips_queries_without_a_relevant_item():
    scores = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.8, 0.3], [0.7, 0.6, 0.1]])
    relevant = torch.tensor([[False, False, True], [False, False, False], [False, True, False]])
    # Query 0 finds its item at rank 2, query 2 at rank 2, query 1 has none: not counted.
    assert recall_at_k(scores, relevant, (1, 2, 3)) == {1: 0.0, 2: 1.0, 3: 1.0}


def test_recall_at_k_defaults_to_one_two_four_eight():
    scores, relevant = _random_problem(3, 8, 10, share=0.15)
    got = recall_at_k(scores, relevant)
    assert list(got) == [1, 2, 4, 8]
    for k in (1, 2, 4, 8):
        assert got[k] == pytest.approx(_loop_recall(scores.tolist(), relevant.tolist(), k))
    assert len({got[1], got[2], got[4], got[8]}) > 1  # the ks matter on this problem


def _recall_of_an_order(k):
    """Recall@k of one ordering of the candidates: a positive among its first k."""
    return lambda order, flags: float(any(flags[c] for c in order[:k]))


def _tie_aware_loop_recall(scores, relevant, k):
    """The mean over queries with a positive of the expected hit over tie-consistent orders."""
    hits = [expected_over_ties(_recall_of_an_order(k), row, flags)
            for row, flags in zip(scores, relevant, strict=True) if any(flags)]  # fmt: skip
    return math.fsum(hits) / len(hits) if hits else math.nan


@given(
    seed=st.integers(0, 2**31 - 1),
    queries=st.integers(1, 4),
    columns=st.integers(1, 7),
    levels=st.integers(1, 3),
    ks=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
)
@pytest.mark.slow
def test_recall_at_k_with_ties_is_its_expectation_over_the_tied_orders(
    seed, queries, columns, levels, ks
):
    # few score levels: tie groups straddle the k-th place with positives and negatives
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, levels, (queries, columns), generator=generator).double()
    relevant = torch.rand(queries, columns, generator=generator) < 0.4
    got = recall_at_k(scores, relevant, ks)
    for k in ks:
        expected = _tie_aware_loop_recall(scores.tolist(), relevant.tolist(), k)
        if math.isnan(expected):
            assert math.isnan(got[k])
        else:
            assert got[k] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("columns", [16, 100, 1000])
def test_a_collapsed_model_gets_the_chance_recall_whatever_the_batch_size(columns):
    # every score equal: recall@1 is 1 / columns for one positive, not the luck of the sort
    # (its order of equal scores changes with the row length)
    scores = torch.zeros(3, columns)
    relevant = torch.zeros(3, columns, dtype=torch.bool)
    relevant[:, 0] = True
    relevant[2, 1] = True  # two positives: 1 - C(columns - 2, 2) / C(columns, 2) at k = 2
    got = recall_at_k(scores, relevant, (1, 2))
    pair = 1 - (columns - 2) * (columns - 3) / (columns * (columns - 1))
    assert got[1] == pytest.approx((1 / columns + 1 / columns + 2 / columns) / 3, abs=1e-12)
    assert got[2] == pytest.approx((2 / columns + 2 / columns + pair) / 3, abs=1e-12)


def _loop_cosines(embeddings):
    norms = [math.sqrt(math.fsum(x * x for x in row)) for row in embeddings]
    return [
        [math.fsum(a * b for a, b in zip(u, v, strict=True)) / (nu * nv)
         for v, nv in zip(embeddings, norms, strict=True)]
        for u, nu in zip(embeddings, norms, strict=True)
    ]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_in_batch_retrieval_scores_every_other_item_on_its_grid(dtype):
    generator = torch.Generator().manual_seed(4)
    embeddings = torch.randn(5, 3, generator=generator).to(dtype)
    labels = torch.tensor([2, 0, 2, 1, 0])
    scores, relevant = in_batch_retrieval(embeddings, labels)
    assert scores.dtype == torch.float64  # computed from the float64 values of the inputs
    cosines = _loop_cosines(embeddings.double().tolist())
    for q in range(5):
        others = [c for c in range(5) if c != q]
        # the exact cosines rounded to multiples of 2^-36 (none of these lies within 1e-15 of
        # a point halfway between two of them)
        expected = [round(cosines[q][c] * 2**36) / 2**36 for c in others]
        assert scores[q].tolist() == expected
        assert relevant[q].tolist() == [bool(labels[c] == labels[q]) for c in others]


@pytest.mark.parametrize("seed", range(6))
def test_a_collapsed_model_scores_the_chance_value(seed):
    # every embedding points one way, at norms from 0.5 to 3.5: float64 cosines some 1e-16
    # apart ranked the items by rounding, R@1 0.057-0.148 where chance is 0.086
    labels = torch.arange(64) % 10
    direction = torch.randn(1, 7, generator=torch.Generator().manual_seed(seed))
    embeddings = direction * torch.linspace(0.5, 3.5, 64)[:, None]
    scores, positives = in_batch_retrieval(embeddings, labels)
    assert torch.unique(scores).numel() == 1  # one score: every candidate tied
    # chance, by hand: a query's expected recall at 1 is its share of positives among the 63
    chance = sum(float((labels == labels[q]).sum() - 1) / 63 for q in range(64)) / 64
    assert recall_at_k(scores, positives, (1,))[1] == pytest.approx(chance, rel=1e-12)


@pytest.mark.parametrize(
    ("scores", "relevant"),
    [
        # Ties across relevant and irrelevant items (tie-aware AP averages over their orders)
        # and a query without a relevant item (its NaN AP is left out of the mean).
        ([[0.5, 0.5, 0.9, 0.1], [0.3, 0.3, 0.3, 0.8], [0.2, 0.4, 0.6, 0.8]],
         [[True, False, False, True], [False, True, True, False], [False, False, False, False]]),
        ([[0.1, 0.2, 0.3, 0.4, 0.5]], [[True, False, True, False, False]]),
    ],
)  # fmt: skip
def test_retrieval_report_is_recall_and_tie_aware_map(scores, relevant):
    tensor_scores = torch.tensor(scores, dtype=torch.float64)
    tensor_relevant = torch.tensor(relevant)
    report = retrieval_report(tensor_scores, tensor_relevant, ks=(1, 3))
    assert list(report) == ["recall@1", "recall@3", "mAP"]
    aps = [
        expected_over_ties(average_precision, row, flags)
        for row, flags in zip(scores, relevant, strict=True)
        if any(flags)
    ]
    assert report["mAP"] == pytest.approx(math.fsum(aps) / len(aps), abs=1e-14)
    # The ties here never straddle the k-th place with a relevant and an irrelevant item.
    for k in (1, 3):
        assert report[f"recall@{k}"] == pytest.approx(_loop_recall(scores, relevant, k))


def test_retrieval_report_defaults_to_recall_at_one_two_four_eight():
    scores, relevant = _random_problem(5, 4, 9)
    report = retrieval_report(scores, relevant)
    assert list(report) == ["recall@1", "recall@2", "recall@4", "recall@8", "mAP"]
    for k in (1, 2, 4, 8):
        assert report[f"recall@{k}"] == pytest.approx(
            _loop_recall(scores.tolist(), relevant.tolist(), k)
        )


SCORES = torch.zeros(2, 3)
FLAGS = torch.zeros(2, 3, dtype=torch.bool)
LABELS3 = torch.tensor([0, 0, 1])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: recall_at_k(torch.zeros(3), FLAGS), r"scores must be 2-D; got shape \(3,\)$"),
        (lambda: recall_at_k(SCORES.bool(), FLAGS),
         "scores must have a real floating or integer dtype; got torch.bool$"),
        (lambda: recall_at_k(torch.full((2, 3), math.nan), FLAGS),
         "scores must be finite; got (NaN|inf) in .*$"),
        (lambda: recall_at_k(SCORES, FLAGS[0]), r"positives must be 2-D; got shape \(3,\)$"),
        (lambda: recall_at_k(SCORES, FLAGS.float()),
         r"positives must be a bool tensor; got torch.float32"
         r" \(a 0/1 mask: pass positives\.bool\(\)\)$"),
        (lambda: recall_at_k(SCORES, FLAGS[:, :2]),
         r"positives must have shape \(2, 3\) \(one flag per score\); got \(2, 2\)$"),
        (lambda: recall_at_k(SCORES, FLAGS, (1, 0)), "ks must be a positive integer; got 0$"),
        (lambda: recall_at_k(SCORES, FLAGS, 5),
         r"ks must be a sequence of positive integers, such as \(1, 5, 10\); got 5$"),
        (lambda: recall_at_k(SCORES, FLAGS, ()), r"ks must name at least one k; got \(\)$"),
        (lambda: recall_at_k(SCORES, FLAGS.to("meta")),
         "tensors must be on one device; got scores on cpu, positives on meta$"),
        (lambda: retrieval_report(SCORES, FLAGS.to("meta")),
         "tensors must be on one device; got scores on cpu, positives on meta$"),
        (lambda: retrieval_report(SCORES, FLAGS, ks=1),
         r"ks must be a sequence of positive integers, such as \(1, 5, 10\); got 1$"),
        (lambda: in_batch_retrieval(torch.ones(3), torch.zeros(3)),
         r"embeddings must be 2-D; got shape \(3,\)$"),
        (lambda: in_batch_retrieval(torch.ones(3, 2, dtype=torch.long), torch.zeros(3)),
         r"embeddings must have a floating dtype; got torch.int64; pass embeddings\.float\(\)$"),
        (lambda: in_batch_retrieval(torch.full((3, 2), math.inf), LABELS3),
         "embeddings must be finite; got (NaN|inf) in .*$"),
        (lambda: in_batch_retrieval(torch.ones(3, 2), torch.zeros(4, dtype=torch.long)),
         r"labels must have shape \(3,\) \(one label per embedding\); got \(4,\)$"),
        # The glossary's labels: integers on the embeddings' device; 0.5 and 0.5000001 were
        # two classes, a list an AttributeError, meta labels torch's NotImplementedError.
        (lambda: in_batch_retrieval(torch.ones(3, 2), torch.tensor([0.5, 0.5, 1.0])),
         r"labels must have an integer dtype; got torch.float32"
         r" \(whole-number ids: pass labels\.long\(\)\)$"),
        (lambda: in_batch_retrieval(torch.ones(3, 2), [0, 0, 1]),
         r"labels must be a torch.Tensor; got list; pass torch\.as_tensor\(labels\)$"),
        (lambda: in_batch_retrieval(torch.ones(3, 2), LABELS3.to("meta")),
         r"labels is a meta tensor \(a shape without values\)"),
        (lambda: in_batch_retrieval(torch.ones(3, 0), LABELS3),
         "embeddings must have at least one"),
    ],
)  # fmt: skip
def test_messages_name_the_argument(call, message):
    with pytest.raises(GradlabError, match="^" + message):
        call()


def test_integer_scores_rank_as_their_floats_do():
    # -hamming distances: tie_aware_ap took them, recall_at_k (so retrieval_report) refused
    generator = torch.Generator().manual_seed(2)
    hamming = torch.randint(0, 5, (6, 9), generator=generator)  # many ties
    positives = torch.rand(6, 9, generator=generator) < 0.3
    positives[:, 0] = True
    assert recall_at_k(-hamming, positives, (1, 3)) == recall_at_k(
        -hamming.double(), positives, (1, 3))
    assert retrieval_report(-hamming, positives, (2,)) == retrieval_report(
        -hamming.double(), positives, (2,))


@pytest.mark.parametrize("dtype", [torch.uint8, torch.uint16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("measure", [recall_at_k, retrieval_report])
def test_unsigned_scores_are_refused_as_tie_aware_ap_refuses_them(measure, dtype):
    # -distance in uint8 wrapped around (-1 is 255): the nearest candidate ranked last and
    # Recall@1 read 1.0 instead of 0.0; uint16 and wider ended in torch's "gt_cpu" error
    bits = 8 * torch.empty((), dtype=dtype).element_size()
    distances = torch.tensor([[0, 1, 2, 3]]).to(dtype)
    positives = torch.tensor([[False, True, False, False]])
    with pytest.raises(GradlabError) as raised:
        measure(-distances if dtype == torch.uint8 else distances, positives, (1, 2))
    assert str(raised.value) == (
        f"scores must have a signed dtype; got {dtype} (a negated unsigned distance wraps "
        f"around: -1 is {2**bits - 1} in uint{bits}): pass scores.long(), or -distance.long() "
        "for distances")
    # the advised form ranks the nearest candidate first: the positive, at distance 1, second
    expected = {k: _loop_recall([[0, -1, -2, -3]], positives.tolist(), k) for k in (1, 2)}
    assert expected == {1: 0.0, 2: 1.0}
    assert recall_at_k(-distances.long(), positives, (1, 2)) == expected


@pytest.mark.parametrize("offset", [1e-3, 1e-4])
def test_a_nearly_collapsed_model_that_separates_its_classes_keeps_its_ranking(offset):
    # one long shared direction and a small class part: rounding the cosines to float32 tied
    # them all (R@1 at chance, 0.11) where the float64 cosines rank every class first
    generator = torch.Generator().manual_seed(0)
    labels = torch.arange(64) % 8
    shared = torch.randn(1, 32, generator=generator, dtype=torch.float64)
    centres = torch.randn(8, 32, generator=generator, dtype=torch.float64)
    noise = torch.randn(64, 32, generator=generator, dtype=torch.float64)
    embeddings = 10 * shared + offset * (centres[labels] + 0.1 * noise)
    scores, positives = in_batch_retrieval(embeddings, labels)
    exact = _loop_cosines(embeddings.tolist())  # float64 loops: every row's nearest is a mate
    assert all(labels[max((c for c in range(64) if c != q), key=lambda c: exact[q][c])]
               == labels[q] for q in range(64))  # fmt: skip
    assert recall_at_k(scores, positives, (1,))[1] == 1.0


def test_orthogonal_rows_tie_at_a_cosine_of_0():
    # products of orthogonal rows come out some 1e-16 either side of 0: their order ranked them
    rows, _ = torch.linalg.qr(torch.randn(16, 16, generator=torch.Generator().manual_seed(1),
                                          dtype=torch.float64))  # fmt: skip
    scores, positives = in_batch_retrieval(rows, torch.arange(16) % 4)
    assert torch.equal(scores, torch.zeros_like(scores))
    chance = 3 / 15  # 3 mates among the 15 others
    assert recall_at_k(scores, positives, (1,))[1] == pytest.approx(chance, rel=1e-12)


def test_unrounded_in_batch_scores_are_the_exact_cosines_and_rounded_must_be_a_bool():
    # what is no ranking (a batch's geometry, a loss's gradient) reads the cosines as they are
    generator = torch.Generator().manual_seed(4)
    embeddings = torch.randn(5, 3, generator=generator, dtype=torch.float64)
    scores, _ = in_batch_retrieval(embeddings, torch.arange(5) % 2, rounded=False)
    cosines = _loop_cosines(embeddings.tolist())
    expected = torch.tensor([[cosines[q][c] for c in range(5) if c != q] for q in range(5)],
                            dtype=torch.float64)  # fmt: skip
    torch.testing.assert_close(scores, expected, atol=4e-16, rtol=0)
    assert not torch.equal(scores, in_batch_retrieval(embeddings, torch.arange(5) % 2)[0])
    with pytest.raises(GradlabError, match=r"^rounded must be True or False; got 'no'$"):
        in_batch_retrieval(embeddings, torch.arange(5) % 2, rounded="no")
