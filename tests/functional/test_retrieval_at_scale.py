"""Retrieval metrics at data-set scale: equal to pytorch-metric-learning's ``AccuracyCalculator``
and to a float64 loop, chunked equal to dense, ties broken by index, bad input refused."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from gradlab.errors import GradlabError
from gradlab.functional.retrieval_at_scale import (
    map_at_r,
    nearest_neighbours,
    precision_at_1,
    r_precision,
    retrieval_at_scale,
)

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
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long), ks=(4,)),
         r"ks must be at most the number of candidates a query can see \(3\); got 4"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    chunk_size=0), "chunk_size must be a positive integer"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2)), "candidate_labels must be"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "candidate_labels needs candidates"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 5),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "embeddings' dimension 2"),
        (lambda: retrieval_at_scale(torch.zeros(4, 2), torch.zeros(4, dtype=torch.long),
                                    candidates=torch.zeros(3, 2, dtype=torch.float64),
                                    candidate_labels=torch.zeros(3, dtype=torch.long)),
         "dtype and device"),
        (lambda: nearest_neighbours(torch.zeros(1, 2), 1), r"at most .* \(0\); got 1"),
        (lambda: nearest_neighbours(torch.zeros(3, 2), True), "k must be a positive integer"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_with_a_named_argument(call, message):
    with pytest.raises(GradlabError, match=message):
        call()
