"""The Monitor's fast paths (issue 11's cost targets) against independent references.

Each fast path is checked on random and on tied inputs against a path that does not share its
shortcut: the tie-aware AP of the relaxation gap, from a search of the step's one sort or from
comparisons with the positives' scores, against :func:`gradlab.functional.tie_aware_ap` of the
rows without the query (its own sort, one tie group at a time; itself checked against a
brute-force average over tie-consistent orders in tests/functional/test_tie_aware.py).
"""

from __future__ import annotations

import math

import pytest
import torch

from gradlab.functional import drop_diagonal, tie_aware_ap
from gradlab.monitor import RelaxationGap
from gradlab.monitor.batch import BatchView

TAU = 0.05


def _batch(kind: str, dtype: torch.dtype, seed: int = 0) -> BatchView:
    generator = torch.Generator().manual_seed(seed)
    if kind == "tied":  # each embedding three times: the query ties with its copies
        embeddings = torch.randn(6, 5, generator=generator, dtype=dtype).repeat(3, 1)
        labels = torch.tensor([0, 1, 2, 0, 1, 3] * 3)
    else:
        embeddings = torch.randn(20, 5, generator=generator, dtype=dtype)
        labels = torch.arange(20) % 6
        labels[-1] = 9  # a query without positives
    return BatchView(embeddings=embeddings, labels=labels, tau=TAU)


def _reference_exact_ap(batch: BatchView) -> float:
    """Mean tie-aware AP of the queries with a positive, by the sorting implementation."""
    scores = batch.scores.to(torch.float64)
    positives = batch.layout.positives
    per_query = tie_aware_ap(drop_diagonal(scores), drop_diagonal(positives))
    return per_query.nanmean().item()


@pytest.mark.parametrize("kind", ["random", "tied"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("sorted_first", [False, True])
def test_exact_ap_of_both_paths_equals_the_sorting_reference(kind, dtype, sorted_first):
    batch = _batch(kind, dtype)
    if sorted_first:  # another quantity (P) made the step's sort: searched instead of compared
        batch.sorted_scores  # noqa: B018
    assert batch.has_sort == sorted_first
    with torch.no_grad():
        got = RelaxationGap().compute(batch)["exact_ap"].item()
    assert got == pytest.approx(_reference_exact_ap(batch), rel=0, abs=1e-14)


def test_both_paths_log_the_same_relaxation_gap():
    for kind in ("random", "tied"):
        compared, searched = _batch(kind, torch.float32), _batch(kind, torch.float32)
        searched.sorted_scores  # noqa: B018
        with torch.no_grad():
            a, b = RelaxationGap().compute(compared), RelaxationGap().compute(searched)
        for key in a:
            assert a[key].item() == b[key].item() or (math.isnan(a[key]) and math.isnan(b[key]))
