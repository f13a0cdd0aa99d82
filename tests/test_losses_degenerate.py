"""SmoothAPLoss on batches without ranking signal: a warning once per instance, and a count.

The reference is a brute-force loop over the queries: a batch is degenerate when no query has
both a positive (another item of its class, or a True in its mask row) and a negative.
"""

import math
import warnings

import pytest
import torch

from gradlab.losses import BlackboxAPLoss, DegenerateBatchWarning, SmoothAPLoss


def _degenerate_by_loops(labels=None, positives=None) -> bool:
    if labels is not None:
        items = labels.tolist()
        rows = [[j != i and items[j] == items[i] for j in range(len(items))]
                for i in range(len(items))]  # fmt: skip
        candidates = [[j != i for j in range(len(items))] for i in range(len(items))]
    else:
        rows = positives.tolist()
        candidates = [[True] * len(row) for row in rows]
    for row, allowed in zip(rows, candidates, strict=True):
        has_positive = any(p for p, c in zip(row, allowed, strict=True) if c)
        has_negative = any(not p for p, c in zip(row, allowed, strict=True) if c)
        if has_positive and has_negative:
            return False
    return True


IN_BATCH = {
    "empty": torch.zeros(0, dtype=torch.long),
    "one item": torch.tensor([3]),
    "all singletons": torch.arange(6),
    "single class": torch.zeros(6, dtype=torch.long),
    "one pair among singletons": torch.tensor([0, 0, 1, 2, 3, 4]),
    "balanced": torch.arange(8) % 2,
}
CROSS_MODAL = {
    "no positive": torch.zeros(3, 5, dtype=torch.bool),
    "everything positive": torch.ones(3, 5, dtype=torch.bool),
    "one query with a positive": torch.tensor([[False] * 5, [True, False, False, False, False],
                                               [False] * 5]),
}


@pytest.mark.parametrize("include_query", [False, True])
@pytest.mark.parametrize("case", sorted(IN_BATCH))
def test_in_batch_warning_and_count_follow_the_brute_force_reference(case, include_query):
    labels = IN_BATCH[case]
    expected = _degenerate_by_loops(labels=labels)
    loss_fn = SmoothAPLoss(0.05, include_query=include_query)
    embeddings = torch.randn(len(labels), 4, generator=torch.Generator().manual_seed(0))
    embeddings.requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = loss_fn(embeddings, labels)
    flagged = [w for w in caught if issubclass(w.category, DegenerateBatchWarning)]
    assert len(flagged) == int(expected) and loss_fn.degenerate_batches == int(expected)
    if expected:
        assert issubclass(DegenerateBatchWarning, UserWarning)
        assert flagged[0].filename == __file__  # points at the caller's line
        besides = " besides itself" if include_query else ""
        assert f"no query in this batch has both a positive{besides} and a negative" in str(
            flagged[0].message
        )
        if len(labels) and not include_query:
            loss.backward()
            assert loss.item() == 0.0 and torch.count_nonzero(embeddings.grad) == 0


@pytest.mark.parametrize("loss_class", [SmoothAPLoss, BlackboxAPLoss])
@pytest.mark.parametrize("case", sorted(CROSS_MODAL))
def test_cross_modal_count_follows_the_brute_force_reference(case, loss_class):
    positives = CROSS_MODAL[case]
    loss_fn = loss_class()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss_fn(torch.randn(3, 4), candidates=torch.randn(5, 4), positives=positives)
    expected = int(_degenerate_by_loops(positives=positives))
    assert loss_fn.degenerate_batches == expected
    flagged = [str(w.message) for w in caught if w.category is DegenerateBatchWarning]
    assert len(flagged) == expected
    for said in flagged:  # of the mask the call was given: it has no labels, no classes
        assert "no row of positives holds both a True and a False" in said, said
        assert "check how positives is built" in said and "two or more items" not in said, said


def test_one_warning_per_instance_and_every_batch_counted():
    first, second = SmoothAPLoss(0.05), SmoothAPLoss(0.05)
    singletons, good = torch.arange(6), torch.arange(6) % 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for labels in (singletons, good, singletons, singletons):
            first(torch.randn(6, 4), labels)
        second(torch.randn(6, 4), singletons)
    assert len([w for w in caught if w.category is DegenerateBatchWarning]) == 2
    assert first.degenerate_batches == 3 and second.degenerate_batches == 1


def test_a_warnings_filter_silences_it_and_the_count_goes_on():
    loss_fn = SmoothAPLoss(0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=DegenerateBatchWarning)
        loss_fn(torch.randn(6, 4), torch.arange(6))
    assert caught == [] and loss_fn.degenerate_batches == 1


def _include_query_loss_by_loops(embeddings, labels, tau):
    """1 - mean smooth AP with each query among its own candidates and positives (float64)."""
    unit = [row / row.norm() for row in embeddings.double()]
    items = labels.tolist()
    aps = []
    for i in range(len(items)):
        scores = [float(unit[i] @ unit[j]) for j in range(len(items))]
        positives = [j for j in range(len(items)) if items[j] == items[i]]  # itself included
        terms = []
        for p in positives:
            def above(others, p=p, scores=scores):
                return sum(1 / (1 + math.exp(-(scores[j] - scores[p]) / tau))
                           for j in others if j != p)  # fmt: skip
            terms.append((1 + above(positives)) / (1 + above(range(len(items)))))
        aps.append(sum(terms) / len(terms))
    return 1 - sum(aps) / len(aps)


def test_include_query_on_singletons_has_a_loss_and_says_so():
    embeddings = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    loss_fn = SmoothAPLoss(0.5, include_query=True)
    leaf = embeddings.clone().requires_grad_(True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loss = loss_fn(leaf, torch.arange(6))
    expected = _include_query_loss_by_loops(embeddings, torch.arange(6), 0.5)
    assert expected > 0.1 and loss.item() == pytest.approx(expected, rel=1e-12)
    loss.backward()
    assert leaf.grad.abs().max() > 1e-3  # each query's own score against the others
    assert loss_fn.degenerate_batches == 1
    assert [str(w.message) for w in caught] == [
        "SmoothAPLoss: no query in this batch has both a positive besides itself and a "
        "negative (an empty batch, one item per class, or a single class). With "
        "include_query=True each query is its own positive: on a single class the loss is 0 "
        "with a zero gradient, but on one item per class it is not 0: each query ranks its own "
        "score against the others, a gradient that pulls no two items together; check the "
        "sampler (a batch needs two or more items of a class and another class). Warned once "
        "per loss instance; loss.degenerate_batches counts such batches."
    ]


def test_include_query_on_one_class_is_zero_with_no_gradient():
    leaf = torch.randn(6, 4, generator=torch.Generator().manual_seed(1)).requires_grad_(True)
    loss_fn = SmoothAPLoss(0.5, include_query=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DegenerateBatchWarning)
        loss = loss_fn(leaf, torch.zeros(6, dtype=torch.long))
    loss.backward()
    assert loss.item() == 0.0 and torch.count_nonzero(leaf.grad) == 0
    assert loss_fn.degenerate_batches == 1


def test_include_query_keeps_a_singletons_query_in_the_mean():
    embeddings = torch.randn(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    loss = SmoothAPLoss(0.1, include_query=True)(embeddings, labels)
    assert loss.item() == pytest.approx(_include_query_loss_by_loops(embeddings, labels, 0.1),
                                        rel=1e-12)  # fmt: skip
