"""BatchView's shared values, method by method, against brute-force float64 loops.

The window counts, exact ranks and the step's one sort are checked on score matrices given
through a loss record (any matrix, not only cosines): scores and widths are multiples of 1/8, so
every sum is exact in float32 and float64 and the window edges ``s_j = s_i +- w`` are hit exactly,
where ``<`` and ``<=`` part. The SmoothAP values are checked on cosine scores against the loops
of tests/reference/smooth_ap_loops.py (Brown et al. 2020, Eq. 1-2; Bleeker & de Rijke 2022, Eq. 2).
"""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
from gradlab.functional.losses import LossRecord, recording
from gradlab.monitor.batch import BatchView, ScoreCapture, Workspace
from tests.reference.smooth_ap_loops import (
    cosine,
    sigmoid,
    smooth_ap_one_query,
    smooth_ap_one_query_gradient,
)

WIDTHS = (0.25, 0.5, 0.3, 1.0, 0.0, -0.25, 0.125, 2.5)
"""Widths visited in this order on one view: every cached value must be the one of its width."""


def dyadic_scores(rows: int, columns: int, seed: int, dtype=torch.float32) -> torch.Tensor:
    """Scores ``k / 8`` in ``[-1, 1]``: many exact ties and exact window edges."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(-8, 9, (rows, columns), generator=generator) / 8).to(dtype)


def cross_modal_view(scores: torch.Tensor, positives: torch.Tensor | None = None) -> BatchView:
    rows, columns = scores.shape
    positives = torch.zeros(rows, columns, dtype=torch.bool) if positives is None else positives
    record = LossRecord(scores, positives, None, 0.1, False, False, None)
    return BatchView(embeddings=torch.zeros(rows, 3, dtype=scores.dtype),
                     candidates=torch.zeros(columns, 3, dtype=scores.dtype),
                     positives=positives, loss_record=record)  # fmt: skip


def in_batch_view(scores: torch.Tensor, labels: torch.Tensor) -> BatchView:
    positives = labels.unsqueeze(0) == labels.unsqueeze(1)
    positives.fill_diagonal_(False)
    candidates = ~torch.eye(len(labels), dtype=torch.bool)
    record = LossRecord(scores, positives, candidates, 0.1, False, True, None)
    return BatchView(embeddings=torch.zeros(len(labels), 3, dtype=scores.dtype), labels=labels,
                     loss_record=record)  # fmt: skip


def views() -> list[tuple[BatchView, list[list[float]], bool]]:
    """(view, its scores as float lists, whether in-batch): a cross-modal 5 x 7 and an in-batch
    6 x 6 whose diagonal (the query's own score) ties with some of its candidates."""
    cross = dyadic_scores(5, 7, seed=1)
    own = dyadic_scores(6, 6, seed=2)
    own[0, 0], own[0, 3] = 0.5, 0.5  # the query ties with a candidate
    own[1, 1], own[1, 2] = 0.25, 0.75  # and lies exactly one width 0.5 below another
    labels = torch.tensor([0, 1, 0, 2, 1, 0])
    return [(cross_modal_view(cross), cross.double().tolist(), False),
            (in_batch_view(own, labels), own.double().tolist(), True)]  # fmt: skip


def inside(a: float, b: float, width: float) -> bool:
    """The window of every count: ``s_j < s_i + w`` and ``s_i < s_j + w``."""
    return a < b + width and b < a + width


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["keys", "search"])
def test_pair_counts_of_rows_of_46341_candidates_do_not_overflow_int32(dtype):
    """Two queries whose 46341 scores each lie within one window of each other: C^2 =
    2147488281 pairs per row, past int32. P sums the searched counts of every entry (cached
    first by entry_counts): int32 counts from the float32 keys (a matrix this large is
    searched by its keys), int64 from torch's float64 search."""
    columns = 46341
    generator = torch.Generator().manual_seed(0)
    view = cross_modal_view((torch.rand(2, columns, generator=generator) / 64).to(dtype))
    view.entry_counts(0.5)  # the per-entry counts P then reuses
    assert view.pair_counts(0.5).tolist() == [columns * columns] * 2


@pytest.mark.parametrize("case", [0, 1], ids=["cross-modal", "in-batch"])
def test_pair_and_entry_counts_match_loops_width_after_width(case):
    view, rows, _ = views()[case]
    for width in WIDTHS:
        pairs = [sum(inside(a, b, width) for a in row for b in row) for row in rows]
        entries = [[sum(inside(a, b, width) for b in row) for a in row] for row in rows]
        found = view.pair_counts(width)
        assert found.dtype == torch.long and found.tolist() == pairs, width
        counts = view.entry_counts(width)
        assert counts.dtype == torch.long and counts.tolist() == entries, width


@pytest.mark.parametrize("case", [0, 1], ids=["cross-modal", "in-batch"])
def test_counts_at_anchors_match_loops_for_number_and_tensor_widths(case):
    view, rows, _ = views()[case]
    anchors = dyadic_scores(len(rows), 4, seed=5)
    subset = torch.tensor([1, 3])
    for width in WIDTHS:
        for queries in (None, subset):
            picked = range(len(rows)) if queries is None else queries.tolist()
            chosen = anchors if queries is None else anchors[queries]
            anchor_rows = zip(picked, chosen.double().tolist(), strict=True)
            expected = [[sum(inside(a, b, width) for b in rows[q]) for a in anchor_row]
                        for q, anchor_row in anchor_rows]  # fmt: skip
            got = view.counts_at(chosen, width, queries)
            assert got.tolist() == expected, (width, queries)
            as_tensor = torch.full(chosen.shape, width, dtype=chosen.dtype)
            assert view.counts_at(chosen, as_tensor, queries).tolist() == expected


def test_counts_at_takes_one_width_per_anchor():
    view, rows, _ = views()[0]
    anchors = dyadic_scores(len(rows), 4, seed=6)
    widths = torch.tensor(WIDTHS[:4] * 5).reshape(5, 4).to(anchors.dtype)
    pairs = zip(anchors.tolist(), widths.tolist(), strict=True)
    expected = [[sum(inside(a, b, w) for b in rows[q]) for a, w in zip(arow, wrow, strict=True)]
                for q, (arow, wrow) in enumerate(pairs)]  # fmt: skip
    assert view.counts_at(anchors, widths).tolist() == expected


def test_counts_of_width_zero_or_less_are_long_zeros_on_the_scores_device():
    scores = torch.zeros(3, 5, device="meta")
    view = cross_modal_view(scores, torch.zeros(3, 5, dtype=torch.bool, device="meta"))
    for width in (0.0, -1.0):
        counts = view.entry_counts(width)
        assert counts.device.type == "meta" and counts.dtype == torch.long
        assert tuple(counts.shape) == (3, 5)


@pytest.mark.parametrize("case", [0, 1], ids=["cross-modal", "in-batch"])
def test_above_and_tied_count_candidates_only(case):
    """Exact ranks: candidates strictly above an anchor and tied with it (in-batch the query,
    not a candidate, is left out even when its own score ties or beats the anchor)."""
    view, rows, in_batch = views()[case]
    anchors = torch.tensor(rows, dtype=torch.float32)[:, :4]  # entries of each row
    anchors[0, 1] = rows[0][0]  # in-batch: query 0's own score
    for queries in (None, torch.tensor([0, 2])):
        picked = range(len(rows)) if queries is None else queries.tolist()
        chosen = anchors if queries is None else anchors[queries]
        above, tied = view.above_and_tied(chosen, queries)
        for k, q in enumerate(picked):
            others = [s for c, s in enumerate(rows[q]) if not (in_batch and c == q)]
            for n, anchor in enumerate(chosen[k].tolist()):
                assert above[k, n] == sum(s > anchor for s in others), (q, n)
                assert tied[k, n] == sum(s == anchor for s in others), (q, n)


def test_query_inside_tests_the_strict_window_on_the_own_score():
    view, rows, _ = views()[1]
    anchors = torch.tensor([[rows[q][q], 0.0, 0.75, -0.25] for q in range(len(rows))])
    anchors[1] = torch.tensor([0.25, 0.75, -0.25, 0.5])  # own 0.25: 0.75 and -0.25 on the edge
    for width in WIDTHS:
        for queries in (None, torch.tensor([1, 4])):
            picked = range(len(rows)) if queries is None else queries.tolist()
            chosen = anchors if queries is None else anchors[queries]
            anchor_rows = zip(picked, chosen.double().tolist(), strict=True)
            expected = [[inside(rows[q][q], a, width) for a in arow] for q, arow in anchor_rows]
            assert view.query_inside(chosen, width, queries).tolist() == expected, width
            as_tensor = torch.full(chosen.shape, width)
            assert view.query_inside(chosen, as_tensor, queries).tolist() == expected


def test_rows_of_is_none_only_for_every_row():
    cross, _, _ = views()[0]  # 5 queries, 7 candidates
    assert cross.rows_of(torch.arange(5)) is None
    subset = torch.tensor([0, 2, 4])
    assert cross.rows_of(subset) is subset
    own, _, _ = views()[1]
    assert own.rows_of(torch.arange(6)) is None
    assert own.rows_of(torch.tensor([5])).tolist() == [5]


def keyed_scores(dtype: torch.dtype) -> torch.Tensor:
    """256 x 256 (the size from which the sort uses integer keys): ties, both zeros, NaN, and
    neighbours one ulp apart on both sides of zero and beyond 2."""
    generator = torch.Generator().manual_seed(7)
    scores = (torch.randint(-16, 17, (256, 256), generator=generator) / 8).to(dtype)
    info = torch.finfo(dtype)
    for row in range(0, 256, 3):
        base = torch.tensor([-3.0, -0.5, 0.5, 3.0, 1e-30, -1e-30][row % 6], dtype=dtype)
        neighbours = [base]
        for _ in range(5):
            neighbours.append(torch.nextafter(neighbours[-1], torch.tensor(math.inf, dtype=dtype)))
        scores[row, 10:16] = torch.stack(neighbours).flip(0)  # larger first: not column order
        scores[row, 20:24] = torch.tensor([-0.0, 0.0, -0.0, 0.0], dtype=dtype)
        scores[row, 30:33] = torch.tensor([info.tiny, 2 * info.tiny, 3 * info.tiny], dtype=dtype)
        scores[row, 40:42] = torch.tensor([1e-9, 3e-9], dtype=dtype)  # merge if shifted by 1
    scores[::5, 50] = math.nan
    scores[1::7, 51] = -math.nan
    return scores


def best_first(row: list[float]) -> list[int]:
    """Columns by descending score, ties (and -0.0 / +0.0) by column, NaN last."""
    return sorted(range(len(row)), key=lambda c: (math.isnan(row[c]), -row[c] if row[c] == row[c]
                                                  else 0.0, c))  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_sort_of_a_large_batch_orders_like_a_stable_float_sort(dtype):
    scores = keyed_scores(dtype)
    view = cross_modal_view(scores)
    order = view.descending_order
    rows = scores.tolist()
    assert order.tolist() == [best_first(row) for row in rows]
    expected = torch.tensor([[-row[c] for c in best_first(row)] for row in rows], dtype=dtype)
    torch.testing.assert_close(view.negated_sorted, expected, rtol=0, atol=0, equal_nan=True)


def recorded_in_batch(tau: float, include_query: bool) -> tuple[BatchView, list, list]:
    """An in-batch view whose record carries SmoothAP's forward (as the watched loss leaves it)."""
    import gradlab
    from gradlab.functional.losses import recording

    generator = torch.Generator().manual_seed(11)
    embeddings = torch.randn(7, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 0, 3])
    with recording() as records:
        gradlab.SmoothAPLoss(tau, include_query=include_query)(embeddings, labels)
    view = BatchView(embeddings=embeddings, labels=labels, loss_record=records[-1])
    return view, embeddings.tolist(), labels.tolist()


def loop_ranks(embeddings, labels, tau, include_query):
    """``{(q, i): (A, C)}`` for every query q and positive i (Brown et al. 2020, Eq. 1-2)."""
    ranks = {}
    for q, label in enumerate(labels):
        columns = [c for c in range(len(labels)) if include_query or c != q]
        for i in columns:
            if labels[i] != label:
                continue
            s_i = cosine(embeddings[q], embeddings[i])
            a = r = 1.0
            for j in columns:
                if j == i:
                    continue
                g = sigmoid(cosine(embeddings[q], embeddings[j]) - s_i, tau)
                r += g
                a += g if labels[j] == label else 0.0
            ranks[q, i] = (a, r - a)
    return ranks


def forward_ranks(forward) -> dict:
    ranks = {}
    for group, (a, c) in zip(forward.groups, forward.ranks, strict=True):
        for g, q in enumerate(group.queries.tolist()):
            for n, i in enumerate(group.positive_columns[g].tolist()):
                ranks[q, i] = (a[g, n].item(), c[g, n].item())
    return ranks


def assert_ranks(forward, expected):
    got = forward_ranks(forward)
    assert sorted(got) == sorted(expected)
    for key, (a, c) in expected.items():
        assert got[key] == pytest.approx((a, c), rel=1e-12, abs=1e-12), key


@pytest.mark.parametrize("include_query", [False, True])
def test_forward_is_the_records_when_it_matches_else_computed_once(include_query):
    tau = 0.1
    view, embeddings, labels = recorded_in_batch(tau, include_query)
    record = view.loss_record.forward
    assert view.known_forward(tau, include_query) is record
    assert view.smooth_ap_forward(tau, include_query) is record
    assert_ranks(record, loop_ranks(embeddings, labels, tau, include_query))
    other = not include_query
    assert view.known_forward(tau, other) is None  # the record is of the other layout
    assert view.known_forward(0.05, include_query) is None  # nor of this tau
    for t, query in ((tau, other), (0.05, include_query), (0.05, other)):
        computed = view.smooth_ap_forward(t, query)
        assert_ranks(computed, loop_ranks(embeddings, labels, t, query))
        known = view.known_forward(t, query)
        assert known is not None
        assert_ranks(known, loop_ranks(embeddings, labels, t, query))


def test_known_forward_defaults_to_the_query_excluded_layout():
    view, embeddings, labels = recorded_in_batch(0.1, include_query=False)
    view.smooth_ap_terms(0.05)
    assert_ranks(view.known_forward(0.05), loop_ranks(embeddings, labels, 0.05, False))
    assert view.known_forward(0.05, True) is None


def in_batch_loop_terms(embeddings, labels, tau, include_query):
    """Per-query smooth AP and ``dAP/ds`` ``[Q, Q]`` (zero on the query when excluded)."""
    aps, gradients = [], []
    for q, label in enumerate(labels):
        columns = [c for c in range(len(labels)) if include_query or c != q]
        scores = [cosine(embeddings[q], embeddings[c]) for c in columns]
        positives = [labels[c] == label for c in columns]
        aps.append(smooth_ap_one_query(scores, positives, tau))
        row = [0.0] * len(labels)
        gradient = smooth_ap_one_query_gradient(scores, positives, tau)
        for c, value in zip(columns, gradient, strict=True):
            row[c] = value
        gradients.append(row)
    return aps, gradients


def test_smooth_ap_terms_and_loss_grad_match_loops_per_tau_and_layout():
    generator = torch.Generator().manual_seed(13)
    embeddings = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 1, 0, 2, 1, 0])  # query 3 has no positive unless it is one
    view = BatchView(embeddings=embeddings, labels=labels)
    for tau, include_query in ((0.1, False), (0.05, False), (0.1, True), (0.05, True)):
        aps, gradients = in_batch_loop_terms(embeddings.tolist(), labels.tolist(), tau,
                                             include_query)  # fmt: skip
        terms = view.smooth_ap_terms(tau, include_query)
        torch.testing.assert_close(terms.ap, torch.tensor(aps, dtype=torch.float64),
                                   rtol=1e-12, atol=1e-12, equal_nan=True)  # fmt: skip
        defined = sum(not math.isnan(a) for a in aps)
        expected = -torch.tensor(gradients, dtype=torch.float64) / defined  # d(1 - mean AP)/dS
        got = view.smooth_ap_loss_grad(tau, include_query)
        torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-13)
        forward = view.smooth_ap_forward(tau, include_query)
        assert_ranks(forward, loop_ranks(embeddings.tolist(), labels.tolist(), tau, include_query))
    default = view.smooth_ap_loss_grad(0.1)
    assert torch.equal(default, view.smooth_ap_loss_grad(0.1, False))


def test_the_loss_gradient_of_a_batch_with_one_defined_query_is_not_averaged_away():
    """``1 - mean AP`` over the queries with a positive: one such query, divided by one."""
    generator = torch.Generator().manual_seed(17)
    queries = torch.randn(3, 4, generator=generator, dtype=torch.float64)
    candidates = torch.randn(5, 4, generator=generator, dtype=torch.float64)
    positives = torch.zeros(3, 5, dtype=torch.bool)
    positives[1, [0, 3]] = True
    view = BatchView(embeddings=queries, candidates=candidates, positives=positives)
    scores = [[cosine(q, c) for c in candidates.tolist()] for q in queries.tolist()]
    gradient = smooth_ap_one_query_gradient(scores[1], positives[1].tolist(), 0.1)
    expected = torch.zeros(3, 5, dtype=torch.float64)
    expected[1] = -torch.tensor(gradient, dtype=torch.float64)
    torch.testing.assert_close(view.smooth_ap_loss_grad(0.1), expected, rtol=1e-10, atol=1e-13)


# --- memory: the workspace, and no view kept past its step --------------------------------------


def test_the_cpu_sort_puts_nan_of_either_sign_last_in_column_order():
    """NaN of both signs sorts after +inf (as ``torch.sort``), ties by column: a NaN with its
    sign bit set has the smallest integer bits of all and must be moved, not only flipped."""
    scores = torch.tensor([[0.5, -math.nan, 1.0, math.nan, -math.inf, -0.0, 0.0, math.inf]])
    scores = scores.repeat(3, 1)
    view = cross_modal_view(scores)
    # best first: inf, 1.0, 0.5, the zeros by column, -inf, then the NaN by column
    assert view.descending_order.tolist() == [[7, 2, 0, 5, 6, 4, 1, 3]] * 3
    ordered = view.negated_sorted
    assert torch.isnan(ordered[:, 6:]).all() and not torch.isnan(ordered[:, :6]).any()
    assert ordered[0, :6].tolist() == [-math.inf, -1.0, -0.5, 0.0, 0.0, math.inf]


def test_views_sharing_a_workspace_never_share_memory_while_both_live():
    """128 x 128: large enough for the workspace (small buffers are plain allocations)."""
    workspace = Workspace()
    labels = torch.arange(128) % 5

    def view(seed):
        made = in_batch_view(dyadic_scores(128, 128, seed=seed), labels)
        made.workspace = workspace
        return made

    first, second = view(3), view(4)
    expected = [(-v.layout.scores).sort(dim=1, stable=True).values for v in (first, second)]
    first_sorted, second_sorted = first.negated_sorted, second.negated_sorted
    assert first_sorted.data_ptr() != second_sorted.data_ptr()
    assert torch.equal(first_sorted, expected[0]) and torch.equal(second_sorted, expected[1])
    kept = first_sorted.data_ptr()
    del first, first_sorted
    third = view(5)  # the first view is gone: the third takes its buffers
    assert third.negated_sorted.data_ptr() == kept
    assert torch.equal(third.negated_sorted, (-third.layout.scores).sort(dim=1).values)
    assert torch.equal(second.negated_sorted, expected[1])  # intact
    before = workspace.kept_bytes
    third.buffer("small", (8, 8), torch.float32)
    assert workspace.kept_bytes == before  # a small buffer is a plain allocation, not kept


def test_a_workspace_keeps_at_most_its_budget():
    workspace = Workspace(max_bytes=100)
    kept = workspace.take("a", (5, 5), torch.float32)  # 100 bytes: kept
    assert workspace.kept_bytes == 100
    assert workspace.take("a", (2, 3), torch.float32).data_ptr() == kept.data_ptr()
    workspace.take("b", (2,), torch.float32)  # no room left: a plain allocation
    assert workspace.kept_bytes == 100
    workspace.take("a", (30,), torch.float32)  # larger than the budget: not kept either
    assert workspace.kept_bytes == 100


def _log_four_steps(folder: str) -> None:
    import gradlab

    generator = torch.Generator().manual_seed(14)
    embeddings = torch.randn(32, 8, generator=generator)
    labels = torch.arange(8).repeat_interleave(4)
    monitor = gradlab.Monitor(folder, preset="full", every=1)
    watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
    for _ in range(4):
        leaf = embeddings.clone().requires_grad_(True)
        watched(leaf, labels).backward()
        monitor.step()
    monitor.close()


@pytest.mark.slow  # seconds: left out of make test-fast
def test_logged_steps_release_their_views(tmp_path):
    """A logged step's view (its sort, its sigmoid block) is freed with the step: the watched
    embeddings' gradient hook holds the view, so the recorded scores must leave the autograd
    graph, or the cycle through it keeps every step's view alive."""
    import gc

    def live_views() -> list[BatchView]:
        gc.collect()
        return [view for view in gc.get_objects() if isinstance(view, BatchView)]

    before = live_views()  # other tests' views, if any are still held
    _log_four_steps(str(tmp_path / "run"))
    assert not [view for view in live_views() if not any(view is old for old in before)]


def test_provided_says_what_the_watched_loss_provides():
    # a view built by hand provides everything; a watched loss's view what its adapter said
    assert BatchView(embeddings=torch.eye(2)).provided("smooth_ap_terms")
    view = BatchView(embeddings=torch.eye(2), provides=frozenset({"scores", "score_grad"}))
    assert view.provided("scores") and view.provided("score_grad")
    assert not view.provided("smooth_ap_terms")


@pytest.mark.parametrize("include_query", [False, True])
def test_the_layout_takes_the_watched_losss_masks_of_its_own_labels_only(include_query):
    """A recorded SmoothAP call's masks serve the view whose labels are the call's own tensor
    (the same masks as built from the labels: the query no candidate, so none of its
    positives); a record of other labels (a loss that relabels the batch) or of the query as
    its own candidate does not: the view builds its masks from its labels."""
    labels = torch.tensor([0, 1, 0, 2, 1, 0])
    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(4))
    expected = labels.unsqueeze(0) == labels.unsqueeze(1)
    expected.fill_diagonal_(False)
    loss_fn = gradlab.SmoothAPLoss(0.1, include_query=include_query)
    for given in (labels, labels % 2):  # the view's own labels, then other labels
        with recording() as records:
            loss_fn(embeddings, given)
        view = BatchView(embeddings, labels=labels, loss_record=records[-1])
        layout = view.layout
        shared = given is labels and not include_query
        assert (layout.positives is records[-1].positives) == shared
        assert torch.equal(layout.positives, expected)
        assert torch.equal(layout.candidate_mask, ~torch.eye(6, dtype=torch.bool))
        assert view.every_candidate_but_the_query


def recorded_view(labels: list[int], seed: int = 5) -> BatchView:
    """An in-batch view of float64 embeddings with SmoothAP's record of the same call (its
    groups: the queries with the same number of positives)."""
    embeddings = torch.randn(len(labels), 4, generator=torch.Generator().manual_seed(seed),
                             dtype=torch.float64)  # fmt: skip
    labels = torch.tensor(labels)
    with recording() as records:
        gradlab.SmoothAPLoss(0.1)(embeddings, labels)
    return BatchView(embeddings, labels=labels, loss_record=records[-1])


def loop_positive_scores(view: BatchView) -> list[list[float]]:
    """Each query's cosine scores with its positives (the other rows of its label), a loop."""
    rows, labels = view.embeddings.tolist(), view.labels.tolist()
    return [[cosine(rows[q], rows[j]) for j in range(len(rows)) if j != q and labels[j] == label]
            for q, label in enumerate(labels)]  # fmt: skip


def test_positive_counts_are_counted_once_per_mask():
    """One tensor per mask for every quantity that asks; a layout with another mask object gets
    counts of its own, and the first mask's come back counted right."""
    view = recorded_view([0, 1, 0, 2, 1, 0, 3])
    layout = view.layout
    counts = view.positive_counts(layout)
    assert counts.tolist() == [len(row) for row in loop_positive_scores(view)]
    assert view.positive_counts(layout) is counts
    fewer = layout.positives.clone()
    fewer[0] = False  # another mask: query 0 without positives
    other = layout._replace(positives=fewer)
    expected = [0, *counts.tolist()[1:]]
    assert view.positive_counts(other).tolist() == expected
    assert view.positive_counts(other) is view.positive_counts(other)
    assert view.positive_counts(layout).tolist() == counts.tolist()


def test_positive_anchors_are_gathered_once_per_group():
    """The positives' scores of each of the record's groups, one tensor per group however the
    calls interleave, and each row the query's positive scores."""
    view = recorded_view([0, 1, 0, 2, 1, 0, 3, 2])
    groups = view.record.forward.groups
    assert len(groups) == 2  # queries with two positives, and with one
    expected = loop_positive_scores(view)
    first = [view.positive_anchors(group) for group in groups]
    again = [view.positive_anchors(group) for group in reversed(groups)][::-1]
    for group, anchors, repeated in zip(groups, first, again, strict=True):
        assert repeated is anchors
        for query, row in zip(group.queries.tolist(), anchors.tolist(), strict=True):
            assert sorted(row) == pytest.approx(sorted(expected[query]), rel=1e-12)


@pytest.mark.parametrize(("labels", "groups"), [
    ([0, 0, 1, 1, 2, 2], 1),  # one group of every query
    ([0, 1, 0, 2, 1, 0, 2, 3], 2),
    ([0, 0, 1, 2, 1, 1, 2, 2, 2, 3], 3),  # one, two and three positives
])  # fmt: skip
def test_lowest_positives_come_from_two_groups_at_most(labels, groups):
    """Each row's smallest positive score (``inf`` without one) from the record's groups when
    at most two hold the rows; with more, and for a layout of other masks, None."""
    view = recorded_view(labels)
    assert len(view.record.forward.groups) == groups
    lowest = view.lowest_positives(view.layout)
    if groups > 2:
        assert lowest is None
        return
    expected = [min(row, default=math.inf) for row in loop_positive_scores(view)]
    assert lowest.tolist() == pytest.approx(expected, rel=1e-12)
    copied = view.layout._replace(positives=view.layout.positives.clone())  # not the record's
    assert view.lowest_positives(copied) is None
    unrecorded = BatchView(view.embeddings, labels=view.labels)
    assert unrecorded.lowest_positives(unrecorded.layout) is None


@pytest.mark.parametrize("arrived", [True, False, None])
def test_a_recorded_matrix_that_backward_never_reached_gets_a_zero_gradient_only_if_it_ran(
    arrived,
):
    # backward reached the watched call's input but not the matrix: the loss does not depend
    # on it, dL/dS = 0. Not reached at all (False), or not followed (None): nothing is made.
    # A matrix with its gradient and SmoothAP's own capture (no scores, its exact dL/dS read
    # at the step) are left as they are.
    scores = torch.rand(3, 3)
    unreached = ScoreCapture("in_batch", scores, scores > 0.5)
    reached = ScoreCapture("in_batch", scores, scores > 0.5, grad=torch.full((3, 3), 0.5))
    smooth_ap_own = ScoreCapture("in_batch", None, scores > 0.5, smooth_ap_tau=0.01)
    view = BatchView(torch.eye(3), labels=torch.arange(3), gradient_arrived=arrived,
                     score_captures=[unreached, reached, smooth_ap_own])  # fmt: skip
    view.zero_unreached_score_grads()
    if arrived:
        assert torch.equal(unreached.grad, torch.zeros(3, 3))
    else:
        assert unreached.grad is None
    assert torch.equal(reached.grad, torch.full((3, 3), 0.5))
    assert smooth_ap_own.grad is None
