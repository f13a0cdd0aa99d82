"""Retrieval metrics at data-set scale: equal to pytorch-metric-learning's ``AccuracyCalculator``
and to a float64 loop, chunked equal to dense, ties broken by index, bad input refused."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F

import gradlab.functional
from gradlab.errors import GradlabError
from gradlab.functional import drop_diagonal, recall_at_k
from gradlab.functional.retrieval_at_scale import (
    map_at_r,
    nearest_neighbours,
    precision_at_1,
    r_precision,
    retrieval_at_scale,
)
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.helpers.refusals import wide_unsigned_refusal

PML_KEYS = {
    "precision_at_1": "precision_at_1",
    "r_precision": "r_precision",
    "map_at_r": "mean_average_precision_at_r",
}


def _lattice(count, dim, seed, classes):
    """Embeddings with four entries of +-1 per row: unit vectors after scaling by 1/2, so every
    cosine is an exact multiple of 1/4 (ties everywhere) and some rows are duplicates."""
    generator = torch.Generator().manual_seed(seed)
    rows = torch.zeros(count, dim)
    for row in rows:
        columns = torch.randperm(dim, generator=generator)[:4]
        row[columns] = torch.randint(0, 2, (4,), generator=generator).float() * 2 - 1
    rows[count // 2 :: 7] = rows[: len(rows[count // 2 :: 7])]  # planted duplicates
    labels = torch.randint(0, classes, (count,), generator=generator)
    return rows, labels


def _stable_knn(query, k, reference, ref_includes_query):
    """pytorch-metric-learning's k-NN contract, with a full stable sort (ties: lower index)."""
    from pytorch_metric_learning.utils.inference import return_results

    if ref_includes_query:
        k = k + 1
    scores = F.normalize(query, dim=1) @ F.normalize(reference, dim=1).T
    order = scores.sort(dim=1, descending=True, stable=True).indices[:, :k]
    return return_results(scores.gather(1, order), order, ref_includes_query)


def _pml(embeddings, labels, candidates=None, candidate_labels=None):
    accuracy = pytest.importorskip("pytorch_metric_learning.utils.accuracy_calculator")
    calculator = accuracy.AccuracyCalculator(
        include=tuple(PML_KEYS.values()), k="max_bin_count", knn_func=_stable_knn
    )
    return calculator.get_accuracy(embeddings, labels, candidates, candidate_labels)


def _loop(embeddings, labels, candidates=None, candidate_labels=None, ks=(1,)):
    """A float64 loop: full stable ranking per query, the definitions written out."""
    same_source = candidates is None
    pool = embeddings if same_source else candidates
    pool_labels = labels if same_source else candidate_labels
    unit = F.normalize(embeddings.double(), dim=1)
    unit_pool = F.normalize(pool.double(), dim=1)
    totals = {"precision_at_1": 0.0, "r_precision": 0.0, "map_at_r": 0.0}
    totals.update({f"recall@{k}": 0.0 for k in ks})
    kept = 0
    for q in range(len(embeddings)):
        order = sorted(
            (j for j in range(len(pool)) if not (same_source and j == q)),
            key=lambda j: (-float(unit[q] @ unit_pool[j]), j),
        )
        rel = [int(pool_labels[j] == labels[q]) for j in order]
        r = sum(rel)
        if r == 0:
            continue
        kept += 1
        totals["precision_at_1"] += rel[0]
        totals["r_precision"] += sum(rel[:r]) / r
        totals["map_at_r"] += sum(sum(rel[: i + 1]) / (i + 1) for i in range(r) if rel[i]) / r
        for k in ks:
            totals[f"recall@{k}"] += float(any(rel[:k]))
    return {key: value / kept for key, value in totals.items()} | {"queries": float(kept)}


def _lattice_scores_are_exact(embeddings):
    """Our float32 cosines equal the float64 ones: the loop's order is the true order."""
    unit = F.normalize(embeddings, dim=1)
    return torch.equal((unit @ unit.T).double(), F.normalize(embeddings.double(), dim=1) @
                       F.normalize(embeddings.double(), dim=1).T)  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_in_batch_metrics_equal_pytorch_metric_learning_with_ties_and_duplicates(seed):
    embeddings, labels = _lattice(90, 6, seed, classes=7)
    assert _lattice_scores_are_exact(embeddings)
    ours = retrieval_at_scale(embeddings, labels, ks=(1,), chunk_size=16)
    theirs = _pml(embeddings, labels)
    for key, pml_key in PML_KEYS.items():
        assert ours[key] == pytest.approx(theirs[pml_key], abs=1e-12), key


@pytest.mark.parametrize("seed", [3, 4])
def test_query_and_candidate_sets_equal_pytorch_metric_learning(seed):
    generator = torch.Generator().manual_seed(seed)
    queries, query_labels = torch.randn(60, 8, generator=generator), torch.arange(60) % 9
    candidates = torch.randn(140, 8, generator=generator)
    candidate_labels = torch.randint(0, 11, (140,), generator=generator)  # labels 9, 10: no query
    ours = retrieval_at_scale(
        queries, query_labels, candidates=candidates, candidate_labels=candidate_labels, ks=(1,)
    )
    theirs = _pml(queries, query_labels, candidates, candidate_labels)
    for key, pml_key in PML_KEYS.items():
        assert ours[key] == pytest.approx(theirs[pml_key], abs=1e-12), key


@pytest.mark.parametrize("seed", [5, 6])
def test_every_metric_equals_a_float64_loop(seed):
    embeddings, labels = _lattice(70, 5, seed, classes=6)
    ks = (1, 2, 4, 8)
    ours = retrieval_at_scale(embeddings, labels, ks=ks, chunk_size=9)
    expected = _loop(embeddings, labels, ks=ks)
    assert set(ours) == set(expected)
    for key in expected:
        assert ours[key] == pytest.approx(expected[key], abs=1e-12), key


@pytest.mark.slow
@pytest.mark.parametrize("chunk_size", [1, 7, 64, 1000])
def test_chunked_equals_dense(chunk_size):
    generator = torch.Generator().manual_seed(7)
    embeddings, labels = torch.randn(64, 4, generator=generator), torch.arange(64) % 5
    dense = retrieval_at_scale(embeddings, labels, chunk_size=64)
    assert retrieval_at_scale(embeddings, labels, chunk_size=chunk_size) == dense
    assert torch.equal(
        nearest_neighbours(embeddings, 6, chunk_size=chunk_size),
        nearest_neighbours(embeddings, 6, chunk_size=64),
    )


def test_ties_are_broken_by_the_lower_index_and_the_query_never_finds_itself():
    # Rows 0, 2 and 4 are one point; row 1 and row 3 another.
    points = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])
    assert nearest_neighbours(points, 3).tolist() == [
        [2, 4, 1], [3, 0, 2], [0, 4, 1], [1, 0, 2], [0, 2, 1]
    ]  # fmt: skip
    # A tie across the k-th place: the lower indices win, whatever topk picked.
    flat = torch.ones(9, 3)
    assert nearest_neighbours(flat, 2).tolist() == [[1, 2], [0, 2]] + [[0, 1]] * 7


def test_the_three_shortcuts_equal_the_full_call():
    embeddings, labels = _lattice(40, 5, 8, classes=4)
    full = retrieval_at_scale(embeddings, labels, ks=(1,))
    assert precision_at_1(embeddings, labels) == full["precision_at_1"]
    assert r_precision(embeddings, labels) == full["r_precision"]
    assert map_at_r(embeddings, labels) == full["map_at_r"]


def test_lone_queries_are_left_out_and_no_relevant_pair_gives_nan():
    points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0]])
    with_lone = retrieval_at_scale(points, torch.tensor([0, 0, 1]), ks=(1,))
    assert with_lone["queries"] == 2.0 and with_lone["precision_at_1"] == 1.0
    none = retrieval_at_scale(points, torch.tensor([0, 1, 2]), ks=(1,))
    assert none["queries"] == 0.0
    assert all(math.isnan(value) for key, value in none.items() if key != "queries")
    for metric in (precision_at_1, r_precision, map_at_r):  # as their docstrings say
        assert math.isnan(metric(points, torch.tensor([0, 1, 2])))
        assert metric(points, torch.tensor([0, 0, 1])) == 1.0  # the lone query skipped


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: retrieval_at_scale(torch.zeros(4), torch.zeros(4, dtype=torch.long)), "2-D"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(3, dtype=torch.long)),
         "one label per embedding"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4)), "integer dtype"),
        (lambda: retrieval_at_scale(torch.zeros(4, 0), torch.zeros(4, dtype=torch.long)),
         "at least one embedding dimension"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), ks=(0,)),
         "ks must be a positive integer; got 0"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), ks=()),
         "ks must name at least one k"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    chunk_size=0), "chunk_size must be a positive integer"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2)), "candidate_labels must be"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "candidate_labels needs candidates"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(5, 2),
                                    candidate_labels=torch.zeros(4, dtype=torch.long)),
         r"^candidate_labels must have shape \(5,\) \(one label per candidate\); got \(4,\)$"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2), candidate_labels=torch.zeros(3)),
         r"^candidate_labels must have an integer dtype; got torch.float32"
         r" \(whole-number ids: pass candidate_labels\.long\(\)\)$"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2).long(),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         r"^candidates must have a floating dtype; got torch.int64; pass candidates\.float\(\)$"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 5),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "embeddings' dimension 2"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2, dtype=torch.float64),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "dtype and device"),
        (lambda: retrieval_at_scale(torch.full((4, 2), math.nan), torch.zeros(4, dtype=torch.long)),
         "^embeddings must be finite; got (NaN|inf) in .*"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.tensor([[0.0, 1.0], [math.inf, 0.0]]),
                                    candidate_labels=torch.zeros(2, dtype=torch.long)),
         "^candidates must be finite"),
        (lambda: nearest_neighbours(torch.tensor([[1.0, 0.0], [math.nan, 1.0]]), 1),
         "^embeddings must be finite"),
        (lambda: nearest_neighbours(torch.tensor([[1.0, 0.0], [-math.inf, 1.0]]), 1,
                                    candidates=torch.eye(2)), "^embeddings must be finite"),
        (lambda: nearest_neighbours(torch.zeros(1, 2), 1),
         r"at most .* \(0: embeddings of 1 row, each query not its own candidate\); got 1"),
        (lambda: nearest_neighbours(torch.zeros(3, 2), True), "k must be a positive integer"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(GradlabError, match=message):
        call()


def _brute_neighbours(embeddings, k, candidates=None):
    """A float64 loop: every candidate's cosine, ranked by (score desc, index asc)."""
    same_source = candidates is None
    pool = embeddings if same_source else candidates
    unit = F.normalize(embeddings.double(), dim=1)
    unit_pool = F.normalize(pool.double(), dim=1)
    rows = []
    for q in range(len(embeddings)):
        order = sorted(
            (j for j in range(len(pool)) if not (same_source and j == q)),
            key=lambda j: (-float(unit[q] @ unit_pool[j]), j),
        )
        rows.append(order[:k])
    return rows


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 100])
def test_neighbours_among_separate_candidates_equal_a_float64_loop_in_any_chunking(chunk_size):
    # Ten 2-D queries (more rows than dimensions) against 13 candidates: every chunk must be
    # scored, and the candidates, not the queries, must be searched.
    generator = torch.Generator().manual_seed(11)
    queries = torch.randn(10, 2, generator=generator)
    candidates = torch.randn(13, 2, generator=generator)
    found = nearest_neighbours(queries, 4, candidates=candidates, chunk_size=chunk_size)
    assert found.tolist() == _brute_neighbours(queries, 4, candidates)


def test_neighbours_are_ranked_by_cosine_not_by_dot_product():
    # Query 0 = (1, 0): cos to (0.9, 0.1) is 0.9 / 0.906 = 0.994, to (5, 4) it is 5 / 6.40 = 0.78,
    # so (0.9, 0.1) is nearer although the dot product with (5, 4) is larger (5 > 0.9).
    # Query 1 = (0.9, 0.1): cos to (1, 0) is 0.994 and to (5, 4) 4.9 / (0.906 * 6.40) = 0.845.
    # Query 2 = (5, 4): cos to (0.9, 0.1) is 0.845 and to (1, 0) 0.78.
    points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [5.0, 4.0]])
    assert nearest_neighbours(points, 2).tolist() == [[1, 2], [0, 2], [1, 0]]
    assert nearest_neighbours(points, 2).tolist() == _brute_neighbours(points, 2)


def test_k_may_equal_the_number_of_candidates_a_query_can_see():
    generator = torch.Generator().manual_seed(12)
    points, labels = torch.randn(4, 3, generator=generator), torch.tensor([0, 1, 0, 1])
    # Each of 4 points sees the 3 others: k = 3 is the largest allowed and ranks all of them.
    assert nearest_neighbours(points, 3).tolist() == _brute_neighbours(points, 3)
    ours = retrieval_at_scale(points, labels, ks=(3,))
    expected = _loop(points, labels, ks=(3,))
    assert ours == pytest.approx(expected, abs=1e-12)
    # Every query has its one relevant point among the 3 it sees: Recall@3 is 1.
    assert ours["recall@3"] == 1.0


def test_recall_at_k_looks_deeper_than_the_largest_r():
    # Labels in pairs: R = 1 for every query, so Recall@5 needs neighbours beyond rank R.
    generator = torch.Generator().manual_seed(14)
    embeddings, labels = torch.randn(12, 3, generator=generator), torch.arange(12) // 2
    ks = (1, 5)
    ours = retrieval_at_scale(embeddings, labels, ks=ks)
    expected = _loop(embeddings, labels, ks=ks)
    assert expected["recall@5"] > expected["recall@1"]  # the data tells the depths apart
    assert ours == pytest.approx(expected, abs=1e-12)


def test_query_labels_missing_from_the_candidates_make_lone_queries():
    # Candidate labels are {1, 3}. Queries labelled 2 (between them) and 7 (above them all)
    # have R = 0 and are left out; queries labelled 1 and 3 have R = 2 each.
    queries = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [-1.0, 0.5], [0.3, -1.0]])
    query_labels = torch.tensor([1, 3, 2, 7, 1])
    candidates = torch.tensor([[1.0, 0.1], [0.1, 1.0], [0.9, -0.2], [-0.5, 1.0]])
    candidate_labels = torch.tensor([1, 3, 1, 3])
    ours = retrieval_at_scale(
        queries, query_labels, candidates=candidates, candidate_labels=candidate_labels, ks=(1, 2)
    )
    expected = _loop(queries, query_labels, candidates, candidate_labels, ks=(1, 2))
    assert ours["queries"] == expected["queries"] == 3.0
    assert ours == pytest.approx(expected, abs=1e-12)


def test_no_queries_against_candidates_give_nan_metrics():
    # Zero queries: no query has R >= 1, so (as documented) every metric is NaN, queries is 0.
    metrics = retrieval_at_scale(
        torch.zeros(0, 2),
        torch.zeros(0, dtype=torch.long),
        candidates=torch.ones(3, 2),
        candidate_labels=torch.tensor([0, 0, 1]),
        ks=(1, 2),
    )
    assert set(metrics) == {"precision_at_1", "r_precision", "map_at_r", "recall@1",
                            "recall@2", "queries"}  # fmt: skip
    assert metrics["queries"] == 0.0
    assert all(math.isnan(value) for key, value in metrics.items() if key != "queries")


def test_shortcuts_work_on_sets_smaller_than_the_default_ks():
    # The docstring example: 4 points, R = 1 each. Query 3 = (0.8, 0.3) has cosines 0.970 to
    # (0.9, 0.1) (label 0), 0.936 to (1, 0) and 0.351 to (0, 1): a miss. The others find a
    # point of their own label first, so P@1 = R-Precision = MAP@R = 3/4 (R = 1).
    points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
    labels = torch.tensor([0, 0, 1, 1])
    assert precision_at_1(points, labels) == 0.75
    assert r_precision(points, labels) == 0.75
    assert map_at_r(points, labels) == 0.75
    # Two points of one label: each sees one candidate, the other, a hit.
    pair = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    pair_labels = torch.tensor([4, 4])
    assert precision_at_1(pair, pair_labels) == 1.0
    assert r_precision(pair, pair_labels) == 1.0
    assert map_at_r(pair, pair_labels) == 1.0


def test_shortcuts_pass_their_options_on():
    # Among themselves the two queries (labels 0 and 1) would be lone (NaN); against the
    # candidates each finds its own label first (cos 0.995 against 0.0995): all metrics 1.
    queries, labels = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1])
    options = {
        "candidates": torch.tensor([[1.0, 0.1], [0.1, 1.0]]),
        "candidate_labels": torch.tensor([0, 1]),
        "chunk_size": 1,
    }
    assert precision_at_1(queries, labels, **options) == 1.0
    assert r_precision(queries, labels, **options) == 1.0
    assert map_at_r(queries, labels, **options) == 1.0


def test_float64_embeddings_are_ranked_at_float64_precision():
    # Query 0 = (1, 0); point 1 has cosine 0.5 - 2e-12 and point 2 has cosine 0.5 - 1e-12.
    # Both round to 0.5 in float32, but in float64 point 2 is nearer. Chunks of 1 make the
    # two candidates reach query 0 in separate blocks.
    cosines = [0.5 - 2e-12, 0.5 - 1e-12]
    points = torch.tensor(
        [[1.0, 0.0]] + [[c, math.sqrt(1.0 - c * c)] for c in cosines], dtype=torch.float64
    )
    assert nearest_neighbours(points, 1, chunk_size=1)[0].tolist() == [2]
    assert nearest_neighbours(points, 1, chunk_size=1).tolist() == _brute_neighbours(points, 1)


def test_ties_behind_distinct_leaders_are_broken_by_the_lower_index():
    query = torch.tensor([[1.0, 0.0]])
    # Candidate 0 has cos 1; candidates 1 to 4 are one point with cos 0: the second place is
    # a four-way tie, won by index 1.
    tied_second = torch.tensor([[1.0, 0.0]] + [[0.0, 1.0]] * 4)
    assert nearest_neighbours(query, 2, candidates=tied_second).tolist() == [[0, 1]]
    # Cos 1, then cos 2 / sqrt(5) = 0.894, then a five-way tie at cos 0 won by index 2.
    tied_third = torch.tensor([[1.0, 0.0], [2.0, 1.0]] + [[0.0, 1.0]] * 5)
    assert nearest_neighbours(query, 3, candidates=tied_third).tolist() == [[0, 1, 2]]


def test_long_ties_keep_index_order():
    query = torch.tensor([[1.0, 0.0]])
    # Forty identical candidates: all tie, so the two nearest are the two lowest indices.
    assert nearest_neighbours(query, 2, candidates=torch.ones(40, 2)).tolist() == [[0, 1]]
    # Twenty identical candidates at cos 1 followed by five at cos 0 (no tie at the 20th
    # place): the twenty come in index order.
    leaders = torch.tensor([[1.0, 0.0]] * 20 + [[0.0, 1.0]] * 5)
    assert nearest_neighbours(query, 20, candidates=leaders).tolist() == [list(range(20))]
    # The same points as one set: each of the 25 sees the other 24. Row 0 ranks the other 19
    # leaders (cos 1) then row 20, the lowest of the cos-0 rows; row 20 ranks its four copies
    # 21-24 (cos 1) first, then the lowest 16 leaders (cos 0).
    found = nearest_neighbours(leaders, 20, chunk_size=7)
    assert found[0].tolist() == [*range(1, 20), 20]
    assert found[20].tolist() == [21, 22, 23, 24, *range(16)]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: retrieval_at_scale(torch.zeros(4), torch.zeros(4, dtype=torch.long)),
         "embeddings must be 2-D; got shape (4,)"),
        (lambda: nearest_neighbours(torch.zeros(3, 2, dtype=torch.long), 1),
         "embeddings must have a floating dtype; got torch.int64; pass embeddings.float()"),
        (lambda: retrieval_at_scale(torch.zeros(4, 0), torch.zeros(4, dtype=torch.long)),
         "embeddings must have at least one embedding dimension; got shape (4, 0)"),
        (lambda: nearest_neighbours(torch.zeros(4, 2), 1, candidates=torch.zeros(3)),
         "candidates must be 2-D; got shape (3,)"),
        (lambda: nearest_neighbours(torch.zeros(4, 2), 1,
                                    candidates=torch.zeros(3, 2, dtype=torch.long)),
         "candidates must have a floating dtype; got torch.int64; pass candidates.float()"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "candidate_labels needs candidates; got candidates=None"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2)),
         "candidate_labels must be given with candidates; got None"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), ks=()),
         "ks must name at least one k; got ()"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), ks=2),
         "ks must be a sequence of positive integers, such as (1, 5, 10); got 2"),
        # one embedding has no neighbour: the message names it, not a ks the caller never gave
        (lambda: map_at_r(torch.ones(1, 2), torch.zeros(1, dtype=torch.long)),
         "embeddings must have at least 2 rows (each query needs another embedding as its "
         "candidate); got shape (1, 2)"),
        (lambda: precision_at_1(torch.ones(3, 2), torch.zeros(3, dtype=torch.long),
                                candidates=torch.ones(0, 2),
                                candidate_labels=torch.zeros(0, dtype=torch.long)),
         "candidates must have at least 1 row; got shape (0, 2)"),
    ],
)  # fmt: skip
def test_bad_input_messages_are_exact(call, message):
    with pytest.raises(GradlabError) as caught:
        call()
    assert str(caught.value) == message


@pytest.mark.parametrize("separate", [False, True])
def test_results_stay_on_the_input_device_whatever_the_default_device(separate):
    # Internal tensors are made on the embeddings' device: with torch's default device
    # elsewhere ("meta" here; "cuda" with CPU embeddings in practice) nothing changes.
    embeddings, labels = _lattice(40, 16, 3, 5)
    candidates, candidate_labels = _lattice(30, 16, 4, 5) if separate else (None, None)

    def run():
        found = nearest_neighbours(embeddings, 3, candidates=candidates, chunk_size=7)
        metrics = retrieval_at_scale(embeddings, labels, candidates=candidates,
                                     candidate_labels=candidate_labels, chunk_size=7)
        return found, sorted(metrics.items())

    assert_unchanged_under_another_default_device(run, embeddings.device)


@pytest.mark.parametrize("separate", [False, True])
def test_a_k_beyond_the_candidates_ranks_every_candidate_as_recall_at_k_does(separate):
    # One documented behaviour for Recall@K in both functions: a k at or beyond the number of
    # candidates a query sees ranks every candidate (recall 1 for a query with a relevant one).
    generator = torch.Generator().manual_seed(15)
    points, labels = torch.randn(5, 3, generator=generator), torch.tensor([0, 1, 0, 1, 2])
    options = {}
    if separate:
        options = {"candidates": torch.randn(3, 3, generator=generator),
                   "candidate_labels": torch.tensor([1, 0, 3])}  # fmt: skip
    ks = (1, 3, 4, 10)
    ours = retrieval_at_scale(points, labels, ks=ks, **options)
    expected = _loop(points, labels, options.get("candidates"), options.get("candidate_labels"),
                     ks=ks)  # fmt: skip
    assert ours == pytest.approx(expected, abs=1e-12)
    assert ours["recall@4"] == ours["recall@10"] == 1.0
    # recall_at_k on the same [Q, C] scores (the query left out of its own row) agrees.
    pool, pool_labels = (points, labels) if not separate else options.values()
    scores = F.normalize(points.double(), dim=1) @ F.normalize(pool.double(), dim=1).T
    positives = labels[:, None] == pool_labels[None, :]
    if not separate:
        scores, positives = drop_diagonal(scores), drop_diagonal(positives)
    dense = recall_at_k(scores, positives, ks=ks)
    assert [dense[k] for k in ks] == pytest.approx([ours[f"recall@{k}"] for k in ks], abs=1e-12)


@pytest.mark.parametrize(("embeddings", "k", "options", "message"), [
    (torch.zeros(0, 4), 1, {}, "0: embeddings of 0 rows, each query not its own candidate"),
    (torch.zeros(1, 4), 1, {}, "0: embeddings of 1 row, each query not its own candidate"),
    (torch.zeros(3, 4), 3, {}, "2: embeddings of 3 rows, each query not its own candidate"),
    (torch.zeros(3, 4), 3, {"candidates": torch.zeros(2, 4)}, "2: candidates of 2 rows"),
])  # fmt: skip
def test_a_k_past_the_candidates_a_query_sees_says_how_many_it_sees(embeddings, k, options,
                                                                   message):
    # an empty batch was said to give each query -1 candidates
    with pytest.raises(GradlabError) as raised:
        nearest_neighbours(embeddings, k, **options)
    assert str(raised.value) == (
        f"k must be at most the number of candidates a query can see ({message}); got {k}")


@pytest.mark.parametrize("name", ["precision_at_1", "r_precision", "map_at_r"])
def test_the_single_metrics_take_the_options_they_name_and_no_other(name):
    metric = getattr(gradlab.functional, name)  # as users call them (a misfit call refused)
    points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
    labels = torch.tensor([0, 0, 1, 1])
    assert metric(points, labels, chunk_size=1) == metric(points, labels) == 0.75
    assert metric(points[:2], labels[:2], candidates=points[2:],
                  candidate_labels=labels[:2]) == 1.0  # both find [0.8, 0.3], label 0
    with pytest.raises(GradlabError, match=r"unexpected keyword argument 'ks'"):
        metric(points, labels, ks=(1,))  # ks=(1,) is the metric's own: not passed twice


@pytest.mark.parametrize("metric", [precision_at_1, r_precision, map_at_r])
def test_the_single_metrics_pass_their_chunk_size_on(metric):
    points = torch.tensor([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.8, 0.3]])
    with pytest.raises(GradlabError, match=r"^chunk_size must be a positive integer; got 0$"):
        metric(points, torch.tensor([0, 0, 1, 1]), chunk_size=0)


def test_nearest_neighbours_names_a_bad_chunk_size():
    with pytest.raises(GradlabError, match=r"^chunk_size must be a positive integer; got 0$"):
        nearest_neighbours(torch.zeros(3, 2), 1, chunk_size=0)


def test_strided_labels_warn_nothing_and_give_the_same_value():
    # torch's searchsorted warned about a non-contiguous input at the user's call
    generator = torch.Generator().manual_seed(11)
    embeddings = torch.randn(8, 4, generator=generator)
    labels = torch.arange(4).repeat(4)[::2]  # a strided view: 0 2 0 2 ...
    assert not labels.is_contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = map_at_r(embeddings, labels)
    assert got == map_at_r(embeddings, labels.contiguous())


WIDE_UNSIGNED = [torch.uint16, torch.uint32, torch.uint64]


@pytest.mark.parametrize("dtype", WIDE_UNSIGNED)
@pytest.mark.parametrize("metric", [retrieval_at_scale, map_at_r, precision_at_1, r_precision])
@pytest.mark.parametrize("separate", [False, True])
def test_unsigned_labels_wider_than_a_byte_are_refused_before_any_work(metric, dtype, separate):
    # torch has no searchsorted (nor bincount, max, indexing) for them: labels in uint32 ended
    # in torch's "searchsorted_out_cpu not implemented for 'UInt32'" after the work started
    embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    labels = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    options, name = {}, "labels"
    if separate:
        options = {"candidates": embeddings.flip(0), "candidate_labels": labels.to(dtype)}
        name = "candidate_labels"
    else:
        labels = labels.to(dtype)
    with pytest.raises(GradlabError) as raised:
        metric(embeddings, labels, **options)
    assert str(raised.value) == wide_unsigned_refusal(name, dtype)


def test_byte_labels_are_ranked_as_int64_labels_are():
    embeddings, labels = _lattice(40, 5, 7, classes=5)
    expected = _loop(embeddings, labels, ks=(1, 2))
    got = retrieval_at_scale(embeddings, labels.to(torch.uint8), ks=(1, 2))
    assert got == pytest.approx(expected, abs=1e-12)
