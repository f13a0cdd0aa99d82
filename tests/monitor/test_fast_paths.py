"""The Monitor's fast paths against independent references.

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
from gradlab.monitor.batch import KEYED_SORT_FROM, BatchView, Workspace, float_order_keys

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
        batch.negated_sorted  # noqa: B018
    assert batch.has_sort == sorted_first
    with torch.no_grad():
        got = RelaxationGap().compute(batch)["exact_ap"].item()
    assert got == pytest.approx(_reference_exact_ap(batch), rel=0, abs=1e-14)


def test_both_paths_log_the_same_relaxation_gap():
    for kind in ("random", "tied"):
        compared, searched = _batch(kind, torch.float32), _batch(kind, torch.float32)
        searched.negated_sorted  # noqa: B018
        with torch.no_grad():
            a, b = RelaxationGap().compute(compared), RelaxationGap().compute(searched)
        for key in a:
            assert a[key].item() == b[key].item() or (math.isnan(a[key]) and math.isnan(b[key]))


def _assert_sorted_alike(got: torch.Tensor, expected: torch.Tensor) -> None:
    """The same NaN places and, elsewhere, the same values (-0.0 == 0.0: they tie)."""
    assert torch.equal(torch.isnan(got), torch.isnan(expected))
    finite = ~torch.isnan(got)
    assert torch.equal(got[finite], expected[finite])


def _score_batch(scores: torch.Tensor) -> BatchView:
    """A BatchView whose layout is ``scores`` itself (as for ``watch(inputs="scores")``)."""
    from gradlab.functional.layouts import RetrievalLayout

    positives = torch.zeros_like(scores, dtype=torch.bool)
    batch = BatchView(embeddings=scores, positives=positives, tau=TAU)
    batch.__dict__["layout"] = RetrievalLayout(scores, positives, None)
    return batch


@pytest.mark.parametrize("quantized", [False, True])
def test_window_counts_of_the_negated_sort_equal_the_definition(quantized):
    """P's and the counts' searches against the window test itself, entry by entry, in float32;
    quantized scores put many pairs exactly on the window's edge (|s_i - s_j| = w)."""
    generator = torch.Generator().manual_seed(5)
    scores = torch.randn(9, 40, generator=generator)
    width = 0.25
    if quantized:
        scores = (scores * 8).round() / 8  # multiples of 1/8: differences of exactly 0.25
    batch = _score_batch(scores)
    rows, anchors = scores.unsqueeze(1), scores.unsqueeze(2)  # [Q, 1, C], [Q, C, 1]
    inside = (rows < anchors + width) & (anchors < rows + width)  # [Q, anchor, j]
    assert torch.equal(batch.entry_counts(width), inside.sum(dim=2))
    assert torch.equal(batch.pair_counts(width), inside.sum(dim=(1, 2)))
    assert torch.equal(batch.counts_at(scores, width), inside.sum(dim=2))
    widths = torch.full_like(scores, width)
    widths[:, ::3] = 0.0  # a width <= 0 counts nothing
    by_width = (rows < anchors + widths.unsqueeze(2)) & (rows > anchors - widths.unsqueeze(2))
    expected = torch.where(widths > 0, by_width.sum(dim=2), 0)
    assert torch.equal(batch.counts_at(scores, widths), expected)
    queries = torch.tensor([1, 4, 7])
    above, tied = batch.above_and_tied(scores[queries, :5], queries)
    picked = scores[queries].unsqueeze(1), scores[queries, :5].unsqueeze(2)
    assert torch.equal(above, (picked[0] > picked[1]).sum(dim=2))
    assert torch.equal(tied, (picked[0] == picked[1]).sum(dim=2))


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("with_candidates", [False, True])
def test_anatomy_from_the_shared_sort_equals_gradient_anatomy(tied, with_candidates):
    """The anatomy summary ranked by the step's sort against gradient_anatomy's own sort."""
    from gradlab.monitor.anatomy import anatomy_values

    generator = torch.Generator().manual_seed(11)
    queries, size = 12, 150  # 150 negatives or so: the 1 % and 10 % cut-offs differ
    scores = torch.randn(queries, size, generator=generator, dtype=torch.float64)
    grad = torch.randn(queries, size, generator=generator, dtype=torch.float64)
    grad = grad * (torch.rand(queries, size, generator=generator) < 0.6)  # zeros: inactive
    if tied:  # tied scores across the cut-offs, with different gradients
        scores = (scores * 2).round() / 2
        grad[3] = 0.0  # a query without gradient
    positives = torch.rand(queries, size, generator=generator) < 0.1
    positives[5] = False  # a query without positives (left out of the summary)
    candidates = None
    if with_candidates:
        candidates = torch.rand(queries, size, generator=generator) > 0.05
    batch = _score_batch(scores)
    order = batch.descending_order
    expected = anatomy_values("", grad, scores, positives, candidates)
    got = anatomy_values("", grad, scores, positives, candidates, order=order)
    assert expected.keys() == got.keys()
    for key, value in expected.items():
        assert got[key].item() == pytest.approx(value.item(), rel=1e-12, nan_ok=True), key


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_integer_sort_keys_order_as_the_floats_with_ties_signed_zeros_and_nan(dtype):
    """The step's sort runs on integer keys: same stable order as sorting the floats."""
    generator = torch.Generator().manual_seed(2)
    values = (torch.randn(6, 50, generator=generator, dtype=dtype) * 4).round() / 4  # ties
    values[:, :4] = torch.tensor([0.0, -0.0, 0.0, -0.0], dtype=dtype)  # signed zeros tie
    values[1, 7] = math.inf
    values[2, 9] = -math.inf
    values[3, 11] = math.nan
    values[4, 13] = -math.nan  # a NaN with its sign bit set sorts last too
    expected = values.sort(dim=1, stable=True).indices
    assert torch.equal(float_order_keys(values).sort(dim=1, stable=True).indices, expected)
    assert float_order_keys(values.half()) is None  # other dtypes: the floats are sorted


def test_one_group_of_every_query_skips_indexing_and_matches_the_loops():
    """Equal class sizes: the loss's record has ONE group holding every row (the rows are then
    read without indexing); every count, P and AP against the float64 loops."""
    import gradlab
    from gradlab.functional.losses import recording
    from tests.helpers.monitor_values import QUANTITIES, logged_values
    from tests.reference.monitor_loops import per_query_values

    generator = torch.Generator().manual_seed(4)
    labels = torch.arange(12) % 3  # four per class: three positives for every query
    embeddings = torch.randn(12, 5, generator=generator, dtype=torch.float64)
    leaf = embeddings.clone().requires_grad_(True)
    with recording() as records:
        loss = gradlab.SmoothAPLoss(TAU)(leaf, labels)
    loss.backward()
    assert len(records[-1].forward.groups) == 1
    assert records[-1].forward.groups[0].queries.shape[0] == 12
    common = {"embeddings": embeddings, "labels": labels, "loss": loss.detach(),
              "embedding_grad": leaf.grad, "tau": TAU, "loss_kind": "exclude_query",
              "loss_tau": TAU}  # fmt: skip
    loops = per_query_values(embeddings.tolist(), labels.tolist(), TAU)
    mean = lambda values: math.fsum(values) / len(values)  # noqa: E731
    for batch in (BatchView(**common, loss_record=records[-1]), BatchView(**common)):
        got = logged_values(batch, QUANTITIES)
        for key in ("p_seed", "p_off_diagonal", "p_without_query"):
            assert got[key] == pytest.approx(mean(loops[key]), rel=1e-12), key
        assert got["gradient_count_mean"] == pytest.approx(mean(loops["counts"]), rel=1e-12)
        assert got["gradient_count_mean_weighted"] == pytest.approx(mean(loops["weighted"]))
        assert got["exact_ap"] == pytest.approx(mean(loops["exact"]), rel=1e-12)
        assert got["smooth_ap"] == pytest.approx(mean(loops["smooth"]), rel=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_large_score_matrices_sort_by_keys_into_the_same_order(dtype):
    """float32 takes the CPU's NumPy sort of combined keys, float64 torch's sort of the
    integer keys; both with ties, signed zeros (tied), infinities and NaN (last)."""
    generator = torch.Generator().manual_seed(8)
    size = int(KEYED_SORT_FROM**0.5) + 4  # above the threshold: the keyed sort runs
    scores = (torch.randn(size, size, generator=generator, dtype=dtype) * 8).round() / 8  # ties
    scores[:, :4] = torch.tensor([0.0, -0.0, 0.0, -0.0], dtype=dtype)
    scores[1, 7], scores[2, 9] = math.inf, -math.inf
    scores[3, 11], scores[4, 13] = math.nan, -math.nan  # a NaN with its sign bit set too
    batch = _score_batch(scores)
    expected = (-scores).sort(dim=1, stable=True)
    assert torch.equal(batch.descending_order, expected.indices)
    _assert_sorted_alike(batch.negated_sorted, expected.values)


@pytest.mark.parametrize("kind", ["random", "tied"])
def test_an_unstable_sort_gives_the_same_window_counts_and_ap(kind):
    """Without a quantity that reads the order the Monitor lets the sort break ties freely:
    P, the counts and the exact AP do not depend on it."""
    from gradlab.monitor import GradientCounts, OperatingRegion, WeightedGradientCounts

    quantities = (OperatingRegion, GradientCounts, WeightedGradientCounts, RelaxationGap)
    results = []
    for ties_by_column in (True, False):
        batch = _batch(kind, torch.float32)
        batch.ties_by_column = ties_by_column
        batch.negated_sorted  # noqa: B018  (the sort first, as P makes it in a preset)
        with torch.no_grad():
            values = {}
            for cls in quantities:
                values.update(cls().compute(batch))
        results.append({key: value.item() for key, value in values.items()})
    assert results[0].keys() == results[1].keys()
    for key, value in results[0].items():
        assert value == results[1][key] or (math.isnan(value) and math.isnan(results[1][key]))


@pytest.mark.parametrize("transposed", [False, True])
def test_the_cpu_sort_of_float32_rows_equals_torch_stable_sort(transposed):
    """The float32 CPU sort (NumPy, one int64 key per entry) against ``torch.sort(stable=True)``:
    same order and same floats, with ties, signed zeros (tied), infinities and NaN (last); a
    transposed view (a score matrix read by columns) sorts into contiguous rows too."""
    generator = torch.Generator().manual_seed(12)
    scores = (torch.randn(7, 60, generator=generator) * 4).round() / 4  # many ties
    scores[:, :4] = torch.tensor([0.0, -0.0, 0.0, -0.0])
    scores[1, 7], scores[2, 9], scores[3, 11] = math.inf, -math.inf, math.nan
    if transposed:
        scores = scores.T.contiguous().T  # the same values, not contiguous
    batch = _score_batch(scores)
    assert batch.negated_sorted.is_contiguous() and batch.descending_order.is_contiguous()
    expected = (-scores).sort(dim=1, stable=True)
    assert torch.equal(batch.descending_order, expected.indices)
    _assert_sorted_alike(batch.negated_sorted, expected.values)


@pytest.mark.parametrize("nan_row", [None, 0, 4])
def test_the_cpu_sort_sorts_again_only_rows_of_a_matrix_with_nan(nan_row):
    """The float32 CPU sort takes the floats' bits as keys and sorts again, NaN last, only when
    a sorted row ends in a NaN's key: infinities at both ends of every row (the keys next to a
    NaN's), with or without a NaN (positive or negative) elsewhere, give torch's stable sort;
    every window count of P equals the definition's."""
    generator = torch.Generator().manual_seed(21)
    scores = (torch.randn(6, 40, generator=generator) * 4).round() / 4
    scores[:, 0], scores[:, 1], scores[:, 2] = math.inf, -math.inf, -0.0
    if nan_row is not None:
        scores[nan_row, 7], scores[nan_row + 1, 9] = math.nan, -math.nan
    batch = _score_batch(scores)
    expected = (-scores).sort(dim=1, stable=True)
    assert torch.equal(batch.descending_order, expected.indices)
    _assert_sorted_alike(batch.negated_sorted, expected.values)
    width = 0.3
    rows = [[x for x in row if not math.isnan(x)] for row in scores.tolist()]
    inside = [sum(a < b + width and b < a + width for a in row for b in row) for row in rows]
    counted = batch.pair_counts(width).tolist()
    for row, (got_count, want) in enumerate(zip(counted, inside, strict=True)):
        if nan_row is None or row not in (nan_row, nan_row + 1):  # NaN rows: undefined
            assert got_count == want, row


@pytest.mark.parametrize("size", [40, int(KEYED_SORT_FROM**0.5) + 4])  # both sides of the
@pytest.mark.parametrize("nan", [False, True])  # switch to the combined keys' sort
def test_a_step_that_reads_no_order_sorts_the_same_rows_and_counts_the_same_windows(size, nan):
    """A step whose quantities read no order (``ties_by_column`` False) sorts the float32 keys
    alone on a CPU below KEYED_SORT_FROM entries: the same sorted floats, every entry's window
    count searched in place, and the order sorted when asked (stable, as torch.sort); with
    ties, signed zeros, infinities and NaN (the NaN rows' counts are undefined)."""
    generator = torch.Generator().manual_seed(size)
    scores = (torch.randn(size, size, generator=generator) * 4).round() / 16  # many ties
    scores[:, :3] = torch.tensor([0.0, -0.0, math.inf])
    scores[2, 5] = -math.inf
    if nan:
        scores[3, 11], scores[4, 13] = math.nan, -math.nan
    ordered, free = _score_batch(scores), _score_batch(scores)
    free.ties_by_column = False
    expected = (-scores).sort(dim=1, stable=True)
    for view in (ordered, free):
        got = view.negated_sorted
        assert torch.equal(torch.isnan(got), torch.isnan(expected.values))
        assert torch.equal(got[~torch.isnan(got)], expected.values[~torch.isnan(got)])
    width = 0.2
    rows = ~torch.isnan(scores).any(dim=1)
    counts = free.entry_counts(width)  # before any order: searched in place
    assert torch.equal(counts[rows], ordered.entry_counts(width)[rows])
    assert torch.equal(free.pair_counts(width)[rows], ordered.pair_counts(width)[rows])
    assert torch.equal(free.descending_order, expected.indices)


@pytest.mark.parametrize("quantized", [False, True, "specials"])
@pytest.mark.slow
def test_window_counts_of_large_score_matrices_equal_the_definition(quantized):
    """Score matrices of at least KEYED_SORT_FROM entries are searched row by row by NumPy
    (P's counts compare the floats' integer order keys): P's pair counts and every entry's
    count against the window test itself, also with signed zeros."""
    size = int(KEYED_SORT_FROM**0.5) + 2
    generator = torch.Generator().manual_seed(13)
    scores = torch.randn(size, size, generator=generator) * 0.3
    width = 0.25
    if quantized:
        scores = (scores * 8).round() / 8  # differences of exactly 0.25: the window's edge
    if quantized == "specials":
        pick = torch.rand(size, size, generator=generator)
        scores[pick < 0.1] = -0.0  # and +0.0 from the rounding: they tie
        scores[(pick > 0.1) & (pick < 0.12)] = 1.0 - 2.0**-24  # the float just below 1
    batch = _score_batch(scores)
    rows, anchors = scores.unsqueeze(1), scores.unsqueeze(2)
    inside = (rows < anchors + width) & (anchors < rows + width)  # [Q, anchor, j]
    assert torch.equal(batch.entry_counts(width), inside.sum(dim=2))
    assert torch.equal(batch.pair_counts(width), inside.sum(dim=(1, 2)))


@pytest.mark.slow
@pytest.mark.parametrize("size", [200, 260])
@pytest.mark.parametrize("default_dtype", [torch.float64, torch.bfloat16])
def test_the_default_dtype_changes_no_sort_or_window_count(default_dtype, size):
    """A program that sets ``torch.set_default_dtype`` (float64 for science, bfloat16 for large
    models) gets the same sort and counts of a float32 score matrix: every buffer of the CPU
    sort and of its searches has its own dtype. B = 260 takes the integer-keyed search that
    larger batches use; B = 200 without an order read sorts the keys alone first."""
    generator = torch.Generator().manual_seed(14)
    scores = ((torch.randn(size, size, generator=generator) * 0.3 * 8).round() / 8).float()
    width = 0.25
    rows, anchors = scores.unsqueeze(1), scores.unsqueeze(2)
    inside = (rows < anchors + width) & (anchors < rows + width)
    expected = (-scores).sort(dim=1, stable=True)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(default_dtype)
    try:
        batch = _score_batch(scores)
        batch.workspace = Workspace()  # buffers made now, not kept from an earlier test
        batch.ties_by_column = size > 256
        ordered = batch.negated_sorted
        entries, pairs = batch.entry_counts(width), batch.pair_counts(width)
        order = batch.descending_order
    finally:
        torch.set_default_dtype(previous)
    assert torch.equal(order, expected.indices) and torch.equal(ordered, expected.values)
    assert torch.equal(entries, inside.sum(dim=2))
    assert torch.equal(pairs, inside.sum(dim=(1, 2)))


@pytest.mark.parametrize("values", ["cosines", "logits", "edge inside", "edge outside",
                                    "edge outside above", "specials"])
@pytest.mark.slow
def test_pair_counts_by_the_merge_equal_the_definition(values):
    """P's row sums alone (no entry counts cached first) merge the sorted rows' keys with the
    shifted rows': as int32 when every key fits (cosines, signed zeros), as int64 otherwise
    (logits, keys at 2 in magnitude or beyond, the floats at the range's ends); the same
    counts as the window test."""
    size = int(KEYED_SORT_FROM**0.5) + 2
    generator = torch.Generator().manual_seed(15)
    scores = (torch.randn(size, size, generator=generator) * 0.3 * 8).round() / 8
    width = 0.25
    if values == "logits":
        scores = scores * 20.0  # keys of floats beyond 2: no room for the doubled keys
        width = 5.0
    if values.startswith("edge"):  # keys at the ends of the int32 range, [-2^30, 2^30)
        # -s - w of the largest score reaches -(2 - 2^-22) (inside) or -2 (outside), -s of
        # the smallest 2 - 2^-22 (inside) or 2 (outside above: the key 2^30, whose double
        # 2^31 overflows int32)
        largest = 1.75 if values == "edge outside" else 1.75 - 2.0**-22
        smallest = -2.0 if values == "edge outside above" else -(2.0 - 2.0**-22)
        scores[0, :2] = torch.tensor([largest, smallest])
    if values == "specials":
        pick = torch.rand(size, size, generator=generator)
        scores[pick < 0.1] = -0.0
        scores[(pick > 0.1) & (pick < 0.11)] = 3.0
        scores[(pick > 0.11) & (pick < 0.12)] = -2.0
    batch = _score_batch(scores)
    batch.workspace = Workspace()
    rows, anchors = scores.unsqueeze(1), scores.unsqueeze(2)
    inside = (rows < anchors + width) & (anchors < rows + width)
    assert torch.equal(batch.pair_counts(width), inside.sum(dim=(1, 2)))
    # Past the sort's buffers P keeps the shifted rows and their keys (4 bytes an entry each)
    # and the merged rows (2 C keys a row): int32 keys when they fit, else int64.
    sort_only = _score_batch(scores)
    sort_only.workspace = Workspace()
    _ = sort_only.negated_sorted
    merged = size * 2 * size * (4 if values in ("cosines", "edge inside") else 8)
    extra = batch.workspace.kept_bytes - sort_only.workspace.kept_bytes
    assert extra == size * size * 8 + merged


@pytest.mark.parametrize("columns", [511, 512, 700, 1024, 1300])
def test_the_cpu_sort_of_wide_rows_equals_torch_stable_sort(columns):
    """The float32 CPU sort of rows of at least two runs of 256 (sorted run by run, then
    merged; a shorter last run of its own): torch's stable order and floats, with ties, an
    infinity and NaN, and rows already in order or in reverse."""
    generator = torch.Generator().manual_seed(18)
    scores = (torch.randn(9, columns, generator=generator) * 4).round() / 4  # many ties
    scores[3, 5], scores[4, columns - 300] = math.inf, math.nan
    scores[5] = torch.arange(columns, dtype=torch.float32)  # ascending: worst first
    scores[6] = -scores[5]
    batch = _score_batch(scores)
    expected = (-scores).sort(dim=1, stable=True)
    assert torch.equal(batch.descending_order, expected.indices)
    got = batch.negated_sorted
    finite = ~torch.isnan(got)
    assert torch.equal(torch.isnan(got), torch.isnan(expected.values))
    assert torch.equal(got[finite], expected.values[finite])


def test_pair_counts_of_rows_too_wide_for_int32_sums_equal_the_value_histogram():
    """Rows of 50,000 cosines: the merge's keys fit int32, but the positions of a row's
    needles sum beyond 2^31 (about C^2), so the row sums are taken in int64. Scores are
    multiples of 1/8 and the window 1/4: a pair is inside exactly when the scores are equal or
    1/8 apart, counted from each row's histogram of values."""
    generator = torch.Generator().manual_seed(19)
    scores = ((torch.randn(2, 50_000, generator=generator) * 0.4 * 8).round() / 8).clamp(
        -1.5, 1.5
    )
    batch = _score_batch(scores)
    batch.workspace = Workspace()
    expected = []
    for row in scores:
        counts = torch.bincount(((row + 1.5) * 8).long(), minlength=25).double()
        expected.append(int((counts**2).sum() + 2 * (counts[1:] * counts[:-1]).sum()))
    assert batch.pair_counts(0.25).tolist() == expected


@pytest.mark.parametrize("shape", [(3, 0), (0, 4)])
def test_pair_counts_of_an_empty_score_matrix_are_zero(shape):
    batch = _score_batch(torch.zeros(shape))
    assert batch.pair_counts(0.25).tolist() == [0] * shape[0]


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("size", [20, 300])  # 300 x 300 reaches the keyed merge of float32
def test_windows_keep_their_centres_where_the_width_is_below_half_an_ulp(dtype, size):
    """Logits so large that ``s + w`` rounds back to ``s`` (multiples of 2^30 in float32, of
    2^60 in float64, with w = 1/4): distinct scores lie 2^30 or more apart, so in exact
    arithmetic a pair is inside its window exactly when it is tied. Every count of the step
    says so (without the move past the centre P and the gradient counts went negative)."""
    generator = torch.Generator().manual_seed(21)
    scale = 2.0**60 if dtype == torch.float64 else 2.0**30
    scores = (torch.randn(size, size, generator=generator, dtype=torch.float64) * 3).round()
    scores = (scores * scale).to(dtype)
    width = 0.25
    inside = scores.unsqueeze(1) == scores.unsqueeze(2)  # [q, anchor i, j]
    batch = _score_batch(scores)
    batch.workspace = Workspace()
    assert torch.equal(batch.pair_counts(width), inside.sum(dim=(1, 2)))
    assert torch.equal(batch.entry_counts(width), inside.sum(dim=2))
    assert torch.equal(batch.counts_at(scores, width), inside.sum(dim=2))
    widths = torch.full_like(scores, width)
    assert torch.equal(batch.counts_at(scores, widths), inside.sum(dim=2))
    own = scores.diagonal().unsqueeze(1)
    assert torch.equal(batch.query_inside(scores, width), own == scores)
    assert torch.equal(batch.query_inside(scores, widths), own == scores)


@pytest.mark.parametrize("width", [64.0, 64.0001])
def test_a_width_of_half_an_ulp_of_the_largest_score_keeps_the_centres(width):
    """Scores of 0 and +-2^30 in float32: 2^30 + 64 lies halfway to the next float and rounds
    back to 2^30 (ties to even), so a width of 64 needs the move past the centre, and a width
    just above it does not (2^30 +- w is then another float): ties inside, nothing else."""
    generator = torch.Generator().manual_seed(22)
    scores = torch.randint(-1, 2, (12, 12), generator=generator).to(torch.float32) * 2.0**30
    scores[0, 0] = 2.0**30  # the largest magnitude is a power of two
    inside = scores.unsqueeze(1) == scores.unsqueeze(2)
    batch = _score_batch(scores)
    assert torch.equal(batch.pair_counts(width), inside.sum(dim=(1, 2)))
    assert torch.equal(batch.counts_at(scores, width), inside.sum(dim=2))
    assert torch.equal(batch.query_inside(scores, width), scores.diagonal().unsqueeze(1) == scores)


@pytest.mark.parametrize("columns", [10, 2])
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_one_large_score_at_either_end_of_its_sorted_row_keeps_its_window(sign, columns):
    """Scores of multiples of 2^20 and one of +-1.5 * 2^30, whose bounds +-64 round back onto
    it (halfway, ties to even): the step finds it at the first or the last end of its sorted
    row (of two columns too), and its window keeps its centre."""
    generator = torch.Generator().manual_seed(23)
    scores = torch.randint(-3, 4, (10, columns), generator=generator).to(torch.float32) * 2.0**20
    scores[4, 1] = sign * 1.5 * 2.0**30
    inside = scores.unsqueeze(1) == scores.unsqueeze(2)
    batch = _score_batch(scores)
    assert torch.equal(batch.pair_counts(64.0), inside.sum(dim=(1, 2)))
    assert torch.equal(batch.counts_at(scores, 64.0), inside.sum(dim=2))


def test_each_width_of_a_step_is_checked_for_the_move_on_its_own():
    """One step reads a width far above an ulp of its scores (no move needed) and then one of
    half an ulp (needed): the second is decided for itself."""
    scores = torch.tensor([[1.5, 0.0, -1.5], [1.5, 1.5, 0.0]]) * 2.0**30
    batch = _score_batch(scores)
    exact = scores.double()  # distances in float64 are exact here
    within = (exact.unsqueeze(1) - exact.unsqueeze(2)).abs() < 2.0**31
    assert torch.equal(batch.counts_at(scores, 2.0**31), within.sum(dim=2))
    inside = scores.unsqueeze(1) == scores.unsqueeze(2)
    assert torch.equal(batch.counts_at(scores, 64.0), inside.sum(dim=2))
    assert torch.equal(batch.pair_counts(64.0), inside.sum(dim=(1, 2)))


# keys alone (200: its scratch arrays from the workspace); combined keys
@pytest.mark.parametrize("size", [40, 200, int(KEYED_SORT_FROM**0.5) + 4])
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("reads_order", [False, True])
def test_a_nan_of_either_sign_alone_is_sorted_last(size, sign, reads_order):
    """A NaN's order key lies past an infinity's at the end its sign bit gives: the positive
    NaN's already last, the negative NaN's first, where it must be found and moved (torch.sort
    puts every NaN last). One sign per matrix: the other end holds no NaN to find it by."""
    generator = torch.Generator().manual_seed(size)
    scores = torch.randn(size, size, generator=generator)
    scores[:, 0] = torch.tensor([math.inf, -math.inf]).repeat(size)[:size]
    scores[5, 7] = math.copysign(math.nan, sign)
    view = _score_batch(scores)
    view.ties_by_column = reads_order
    expected = (-scores).sort(dim=1, stable=True).values
    got = view.negated_sorted
    _assert_sorted_alike(got, expected)
    assert bool(got[5, -1].isnan())


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
@pytest.mark.parametrize("reads_order", [False, True])
@pytest.mark.parametrize("width", [0.2, 5.0])  # 5: past 2, every pair of a row inside
def test_a_matrix_without_rows_or_columns_sorts_and_counts_nothing(shape, reads_order, width):
    # No entry: the sorts find no NaN at no end, the merges sum no key; each row counts 0.
    view = _score_batch(torch.zeros(shape))
    view.ties_by_column = reads_order
    assert view.negated_sorted.shape == shape
    assert view.pair_counts(width).tolist() == [0] * shape[0]
    assert view.entry_counts(width).shape == shape
