"""gradlab.functional.losses: loss values, recording and the degenerate-batch test, by loops.

References are the plain-float loops of tests/reference (smooth AP per query from cosine
scores, FastAP's soft histograms) and a brute-force reading of the positive mask for
``no_ranking_signal``. float64 throughout; sums of a dozen O(1) terms, so ``1e-12`` absolute.
"""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.functional.losses import (
    LossRecord,
    SmoothAPForward,
    fastap_loss,
    has_ranking_signal,
    mean_ap_loss,
    no_ranking_signal,
    recording,
    smooth_ap_loss,
)
from gradlab.functional.smooth_ap import group_by_positive_count
from tests.helpers.default_device import assert_unchanged_under_another_default_device
from tests.reference.histogram_losses_loops import fastap_query
from tests.reference.smooth_ap_loops import (
    cosine,
    cross_modal_smooth_ap,
    decomposition_one_pair,
    in_batch_smooth_ap,
    loss_from_aps,
)

TOL = 1e-12


def _batch(seed, size=9, dims=3, classes=3):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, dims, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, classes, (size,), generator=generator)
    return embeddings, labels


# --- mean_ap_loss -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "aps",
    [[0.5, math.nan, 1.0], [0.25], [0.1, 0.2, 0.3, 0.9], [math.nan, 0.0, math.nan], [1.0, 1.0]],
)
def test_mean_ap_loss_is_one_minus_the_mean_of_the_defined_aps(aps):
    ap = torch.tensor(aps, dtype=torch.float64)
    got = mean_ap_loss(ap, torch.zeros(1))
    assert got.item() == pytest.approx(loss_from_aps(aps), abs=TOL)


def test_mean_ap_loss_without_a_defined_ap_is_a_zero_in_the_reference_graph():
    reference = torch.tensor([2.0, -3.0], dtype=torch.float64, requires_grad=True)
    loss = mean_ap_loss(torch.full((3,), math.nan, dtype=torch.float64), reference)
    assert loss.item() == 0.0
    assert loss.requires_grad
    loss.backward()
    assert reference.grad.tolist() == [0.0, 0.0]
    assert not torch.signbit(reference.grad).any()  # +0.0 bit for bit, not -0.0
    detached = mean_ap_loss(torch.full((2,), math.nan), torch.ones(2))
    assert detached.item() == 0.0 and not detached.requires_grad


def test_mean_ap_loss_gradient_is_minus_one_over_the_count_on_defined_aps():
    ap = torch.tensor([0.3, math.nan, 0.6, 0.9], dtype=torch.float64, requires_grad=True)
    reference = torch.ones(2, requires_grad=True)
    loss = mean_ap_loss(ap, reference)
    assert loss.item() == pytest.approx(1.0 - 1.8 / 3, abs=TOL)
    loss.backward()
    assert ap.grad.tolist() == pytest.approx([-1 / 3, 0.0, -1 / 3, -1 / 3], abs=TOL)
    assert reference.grad is None  # a loss already in a graph is not tied to the reference


# --- smooth_ap_loss -----------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("include_query", [False, True])
def test_in_batch_smooth_ap_loss_matches_the_loops(seed, include_query):
    embeddings, labels = _batch(seed)
    got = smooth_ap_loss(embeddings, labels, tau=0.1, include_query=include_query)
    aps = in_batch_smooth_ap(embeddings.tolist(), labels.tolist(), 0.1, include_query)
    assert got.item() == pytest.approx(loss_from_aps(aps), abs=TOL)


@pytest.mark.parametrize("seed", range(3))
def test_cross_modal_smooth_ap_loss_matches_the_loops(seed):
    generator = torch.Generator().manual_seed(50 + seed)
    queries = torch.randn(5, 3, generator=generator, dtype=torch.float64)
    candidates = torch.randn(8, 3, generator=generator, dtype=torch.float64)
    positives = torch.rand(5, 8, generator=generator) < 0.4
    got = smooth_ap_loss(queries, candidates=candidates, positives=positives, tau=0.2)
    aps = cross_modal_smooth_ap(queries.tolist(), candidates.tolist(), positives.tolist(), 0.2)
    assert got.item() == pytest.approx(loss_from_aps(aps), abs=TOL)


def test_smooth_ap_loss_defaults_to_tau_one_hundredth_without_the_query():
    # Embeddings spread over a few sigmoid widths at tau = 0.01, so the default is visible.
    embeddings, labels = _batch(4, size=8, classes=2)
    embeddings = embeddings * 0.02 + torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    aps = in_batch_smooth_ap(embeddings.tolist(), labels.tolist(), 0.01, False)
    assert smooth_ap_loss(embeddings, labels).item() == pytest.approx(loss_from_aps(aps), abs=TOL)
    for other in (
        in_batch_smooth_ap(embeddings.tolist(), labels.tolist(), 0.1, False),
        in_batch_smooth_ap(embeddings.tolist(), labels.tolist(), 0.01, True),
    ):
        assert abs(loss_from_aps(other) - loss_from_aps(aps)) > 1e-3


FORMS = (r"^smooth_ap_loss takes loss\(embeddings, labels\) or loss\(queries, "
         r"candidates=candidates, positives=positives\)")


@pytest.mark.parametrize(
    ("count", "ending"),
    [(3, "got 3 positional arguments (cross-modal: pass candidates and positives by keyword)"),
     (4, "got 4 positional arguments (cross-modal: pass candidates and positives by keyword)")],
)  # fmt: skip
def test_smooth_ap_loss_refuses_cross_modal_tensors_by_position(count, ending):
    tensors = [torch.zeros(2, 2)] * count
    with pytest.raises(GradlabError, match=rf"{FORMS}; {re.escape(ending)}$"):
        smooth_ap_loss(*tensors)


E22, L2, EYE2 = torch.zeros(2, 2), torch.zeros(2, dtype=torch.long), torch.eye(2) > 0


@pytest.mark.parametrize(
    ("arguments", "keywords", "ending"),
    [((E22,), {}, "; labels is missing"),
     ((E22, L2), {"candidates": E22}, " not both; got labels and candidates"),
     ((E22,), {"candidates": E22}, "needs positives too"),
     ((E22,), {"positives": EYE2}, "needs candidates too")],
)  # fmt: skip
def test_smooth_ap_loss_names_what_is_missing_or_mixed(arguments, keywords, ending):
    with pytest.raises(GradlabError, match=f"{re.escape(ending)}$"):
        smooth_ap_loss(*arguments, **keywords)


def test_smooth_ap_loss_validates_finiteness_unless_told_not_to():
    embeddings, labels = _batch(1)
    queries, candidates = embeddings[:4].clone(), embeddings[4:].clone()
    embeddings[2, 1] = math.nan
    with pytest.raises(GradlabError, match=r"^embeddings must be finite"):
        smooth_ap_loss(embeddings, labels)
    queries[0, 0] = math.inf
    positives = torch.ones(4, 5, dtype=torch.bool)
    with pytest.raises(GradlabError, match=r"^queries must be finite"):
        smooth_ap_loss(queries, candidates=candidates, positives=positives)
    queries[0, 0], candidates[1, 2] = 0.0, math.nan
    with pytest.raises(GradlabError, match=r"^candidates must be finite"):
        smooth_ap_loss(queries, candidates=candidates, positives=positives)
    unchecked = smooth_ap_loss(embeddings, labels, validate=False)  # no check, so no error
    assert unchecked.shape == ()
    queries[0, 0] = math.inf
    unchecked = smooth_ap_loss(queries, candidates=candidates, positives=positives, validate=False)
    assert unchecked.shape == ()


@pytest.mark.parametrize(
    ("labels", "include_query", "degenerate"),
    [
        ([0, 1, 2, 3], False, True),  # no positive
        ([0, 1, 2, 3], True, True),  # each query is only its own positive
        ([0, 0, 0, 0], False, True),  # no negative
        ([0, 0, 1, 2], False, False),
        ([0, 0, 1, 2], True, False),
    ],
)
def test_on_degenerate_is_called_exactly_when_no_query_has_a_positive_and_a_negative(
    labels, include_query, degenerate
):
    embeddings, _ = _batch(2, size=4)
    calls = []
    smooth_ap_loss(embeddings, torch.tensor(labels), tau=0.1, include_query=include_query,
                   on_degenerate=lambda: calls.append(1))  # fmt: skip
    assert calls == ([1] if degenerate else [])


@pytest.mark.parametrize(
    ("positives", "degenerate"),
    [([[False, False, False], [False, False, False]], True),
     ([[True, True, True], [False, False, False]], True),
     ([[True, True, True], [True, False, False]], False),
     ([[True, True, False], [False, False, False]], False)],  # one negative is enough
)  # fmt: skip
def test_on_degenerate_cross_modal(positives, degenerate):
    embeddings, _ = _batch(3, size=5)
    calls = []
    smooth_ap_loss(embeddings[:2], candidates=embeddings[2:], positives=torch.tensor(positives),
                   on_degenerate=lambda: calls.append(1))  # fmt: skip
    assert calls == ([1] if degenerate else [])


# --- recording ----------------------------------------------------------------------------------


@pytest.mark.parametrize("include_query", [False, True])
def test_recording_keeps_each_in_batch_call_with_its_scores_masks_and_ranks(include_query):
    embeddings, labels = _batch(6, size=7)
    leaf = embeddings.clone().requires_grad_(True)
    assert smooth_ap_loss(leaf, labels, tau=0.2) is not None  # outside: nothing kept
    with recording() as records:
        loss = smooth_ap_loss(leaf, labels, tau=0.2, include_query=include_query)
        smooth_ap_loss(leaf[:3], candidates=leaf[3:], positives=torch.ones(3, 4) > 0, tau=0.3)
    assert len(records) == 2
    record = records[0]
    assert isinstance(record, LossRecord) and isinstance(record.forward, SmoothAPForward)
    assert (record.tau, record.include_query, record.in_batch) == (0.2, include_query, True)
    size = len(labels)
    rows = embeddings.tolist()
    for q, c in itertools.product(range(size), repeat=2):
        assert record.scores[q, c].item() == pytest.approx(cosine(rows[q], rows[c]), abs=TOL)
        candidate = include_query or q != c
        if include_query:
            assert record.candidate_mask is None  # every pair is a candidate
        else:
            assert record.candidate_mask[q, c].item() == candidate
        assert record.positives[q, c].item() == (candidate and bool(labels[q] == labels[c]))
    # the scores are in the graph: a hook on them reads dL/dS
    (score_grad,) = torch.autograd.grad(loss, record.scores)
    assert score_grad.abs().sum() > 0
    # ranks: the seeds' A and C of every positive, grouped by positive count
    for group, (rank_a, rank_c) in zip(record.forward.groups, record.forward.ranks, strict=True):
        for row, q in enumerate(group.queries.tolist()):
            kept = [c for c in range(size) if include_query or c != q]
            for col, i in enumerate(group.positive_columns[row].tolist()):
                pair = decomposition_one_pair(
                    [x / math.hypot(*rows[q]) for x in rows[q]],
                    [[x / math.hypot(*rows[c]) for x in rows[c]] for c in kept],
                    [bool(labels[c] == labels[q]) for c in kept],
                    kept.index(i),
                    0.2,
                )
                assert rank_a[row, col].item() == pytest.approx(pair["A"], abs=TOL)
                assert rank_c[row, col].item() == pytest.approx(pair["C"], abs=TOL)
    cross = records[1]
    assert (cross.tau, cross.in_batch, cross.candidate_mask) == (0.3, False, None)
    assert cross.positives.all() and cross.scores.shape == (3, 4)


@pytest.mark.parametrize("include_query", [False, True])
def test_the_record_of_an_in_batch_call_holds_its_labels_tensor_itself(include_query):
    """In-batch the record keeps the very labels tensor the call was given (a reader holding it
    may take the record's masks as its own); a cross-modal call has no labels: None."""
    embeddings, labels = _batch(3, size=6)
    with recording() as records:
        smooth_ap_loss(embeddings, labels, include_query=include_query)
        smooth_ap_loss(embeddings[:2], candidates=embeddings[2:],
                       positives=torch.ones(2, 4, dtype=torch.bool))  # fmt: skip
    assert records[0].labels is labels
    assert records[1].labels is None


def test_the_record_holds_the_embeddings_and_candidates_the_call_was_given():
    """The objects themselves: a reader can tell that the scores are the cosine scores of its
    own tensors, not of a projection a loss made of them."""
    embeddings, labels = _batch(4, size=6)
    queries, candidates = embeddings[:2], embeddings[2:]
    with recording() as records:
        smooth_ap_loss(embeddings, labels)
        smooth_ap_loss(queries, candidates=candidates, positives=torch.ones(2, 4, dtype=torch.bool))
    assert records[0].embeddings is embeddings and records[0].candidates is None
    assert records[1].embeddings is queries and records[1].candidates is candidates


def test_recording_ends_with_its_block():
    embeddings, labels = _batch(7, size=5)
    with recording() as records:
        pass
    smooth_ap_loss(embeddings, labels)
    assert records == []
    with recording() as outer:
        with recording() as inner:
            smooth_ap_loss(embeddings, labels)
        assert (len(inner), len(outer)) == (1, 1)  # the inner block's record, once it ended
        smooth_ap_loss(embeddings, labels)
    assert (len(inner), len(outer)) == (1, 2)  # two Monitors, one watching through the other
    assert outer[0] is inner[0]


# --- no_ranking_signal --------------------------------------------------------------------------


def _brute_force_no_signal(mask, query_is_positive):
    for row in mask:
        positives = sum(row) - int(query_is_positive)
        negatives = len(row) - sum(row)
        if positives > 0 and negatives > 0:
            return False
    return True


def test_no_ranking_signal_matches_a_brute_force_reading_of_every_small_mask():
    for width in (1, 2, 3):
        for bits in itertools.product([False, True], repeat=2 * width):
            mask = [list(bits[:width]), list(bits[width:])]
            groups = group_by_positive_count(torch.tensor(mask))
            for query_is_positive in (False, True):
                got = no_ranking_signal(groups, width, query_is_positive)
                assert got == _brute_force_no_signal(mask, query_is_positive), (mask,)
    assert no_ranking_signal([], 3)


def test_no_ranking_signal_by_default_does_not_count_the_query_as_its_own_positive():
    one_positive_each = group_by_positive_count(torch.eye(3, dtype=torch.bool))
    assert not no_ranking_signal(one_positive_each, 3)  # a positive and two negatives each


# --- fastap_loss --------------------------------------------------------------------------------


@pytest.mark.parametrize("num_bins", [3, 10, 25])
def test_fastap_loss_is_one_minus_the_mean_fastap_of_the_loops(num_bins):
    embeddings, labels = _batch(8, size=10)
    labels[-1] = 42  # a query without positives is left out of the mean
    aps = [fastap_query(embeddings.tolist(), labels.tolist(), q, num_bins) for q in range(10)]
    got = fastap_loss(embeddings, labels, num_bins)
    assert got.item() == pytest.approx(loss_from_aps(aps), abs=TOL)


def test_fastap_loss_defaults_to_ten_bins():
    embeddings, labels = _batch(9, size=10)
    aps = [fastap_query(embeddings.tolist(), labels.tolist(), q, 10) for q in range(10)]
    assert fastap_loss(embeddings, labels).item() == pytest.approx(loss_from_aps(aps), abs=TOL)
    for bins in (8, 11):  # the case tells the default from its neighbours
        other = [fastap_query(embeddings.tolist(), labels.tolist(), q, bins) for q in range(10)]
        assert abs(loss_from_aps(other) - loss_from_aps(aps)) > 1e-3


@pytest.mark.parametrize("seed", range(20))
def test_has_ranking_signal_follows_a_loop_over_the_items(seed):
    generator = torch.Generator().manual_seed(seed)
    size = int(torch.randint(0, 7, (1,), generator=generator))
    labels = torch.randint(0, 1 + seed % 4, (size,), generator=generator)
    items = labels.tolist()
    expected = any(
        any(items[j] == items[i] for j in range(size) if j != i)
        and any(items[j] != items[i] for j in range(size))
        for i in range(size)
    )
    assert has_ranking_signal(labels).item() is expected


@pytest.mark.parametrize("layout", ["in-batch", "cross-modal"])
def test_smooth_ap_loss_stays_on_the_input_device_whatever_the_default_device(layout):
    # Its own tensors (the mask of queries with a positive) are made on the embeddings' device:
    # with torch's default device elsewhere ("meta" here, "cuda" with CPU inputs in practice)
    # the loss and its gradient are unchanged.
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(8, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 1, 2, 3, 3])  # a singleton: a query without positives
    candidates = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    positives = torch.rand(8, 6, generator=generator) < 0.4

    def run():
        leaf = embeddings.clone().requires_grad_(True)
        if layout == "in-batch":
            loss = smooth_ap_loss(leaf, labels, tau=0.05)
        else:
            loss = smooth_ap_loss(leaf, candidates=candidates, positives=positives, tau=0.05)
        (grad,) = torch.autograd.grad(loss, leaf)
        return loss.detach(), grad

    assert_unchanged_under_another_default_device(run, embeddings.device)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: mean_ap_loss(torch.tensor([[0.5, 1.0]]), torch.zeros(1)),
     r"^ap must be 1-D; got shape \(1, 2\); pass ap\.reshape\(-1\)$"),
    (lambda: mean_ap_loss(torch.tensor([1, 0]), torch.zeros(1)),
     r"^ap must have a floating dtype; got torch.int64; pass ap\.float\(\)$"),
    (lambda: mean_ap_loss(torch.tensor([0.5, 1.0]), 0.0),
     r"^reference must be a torch.Tensor \(a zero loss joins its graph\); got float$"),
    (lambda: mean_ap_loss(torch.tensor([0.5, 1.0]), torch.zeros(1), torch.tensor([1, 0])),
     r"^defined must be a bool tensor; got torch.int64 \(a 0/1 mask: pass defined\.bool\(\)\)$"),
    (lambda: mean_ap_loss(torch.tensor([0.5, 1.0, 0.2]), torch.zeros(1),
                            torch.tensor([True])),
     r"^defined must have shape \(3,\) \(\[Q\], one flag per AP\); got \(1,\)$"),
    (lambda: mean_ap_loss(torch.tensor([0.5, 1.0]), torch.zeros(1),
                            torch.ones(2, dtype=torch.bool, device="meta")),
     "^tensors must be on one device; got ap on cpu, defined on meta$"),
])  # fmt: skip
def test_mean_ap_loss_refuses_a_mask_that_would_broadcast_or_fail_in_a_kernel(call, message):
    # a [1] mask against [3] APs broadcast to a silent NaN; an int mask failed inside torch.where
    with pytest.raises(GradlabError, match=message):
        call()
