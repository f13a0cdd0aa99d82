"""BatchView at the edges of what it is handed, against references that do not share its paths.

Empty and non-finite batches (the flags against :func:`math.isfinite` entry by entry), a batch on
another device (``meta``: no value exists, so a path that reads one or leaves the device fails),
a float32 batch under a float64 default dtype, float64 batches large enough for the sort by
integer keys, rows long enough that a 32-bit sum of their window counts would overflow, a
loss record that leaves the autograd graph, the per-thread workspace and its byte budget.
Window counts are checked against the window test itself (``s_j < s_i + w`` and
``s_i < s_j + w``, broadcast) or a hand count (a window wider than every score difference holds
every pair).
"""

from __future__ import annotations

import math
import threading

import pytest
import torch

from gradlab.functional.losses import LossRecord
from gradlab.monitor.batch import BatchView, ScoreCapture, Workspace, thread_workspace

NAN, INF = math.nan, math.inf


def score_view(scores: torch.Tensor) -> BatchView:
    """A cross-modal view of any score matrix (given through a loss record)."""
    rows, columns = scores.shape
    positives = torch.zeros(rows, columns, dtype=torch.bool)
    record = LossRecord(scores, positives, None, 0.1, False, False, None)
    return BatchView(embeddings=torch.zeros(rows, 3, dtype=scores.dtype),
                     candidates=torch.zeros(columns, 3, dtype=scores.dtype),
                     positives=positives, loss_record=record)  # fmt: skip


def window_counts(scores: torch.Tensor, width: float) -> torch.Tensor:
    """``[Q, C]``: for every entry, the entries of its row inside its window (itself included)."""
    rows, anchors = scores.unsqueeze(1), scores.unsqueeze(2)
    return ((rows < anchors + width) & (anchors < rows + width)).sum(dim=2)


def quarter_scores(size: int, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Multiples of 1/8 in [-1, 1]: exact in every dtype, many ties and exact window edges."""
    generator = torch.Generator().manual_seed(seed)
    return (torch.randint(-8, 9, (size, size), generator=generator) / 8).to(dtype)


@pytest.mark.parametrize("entries", [
    [[1.0, 2.0], [0.5, -3.0]],
    [[NAN]],  # one entry
    [[1.0, INF]],  # the smallest entry finite, the largest not
    [[-INF, 0.5]],  # the largest finite, the smallest not
    [[NAN, 1.0], [2.0, 3.0]],
])  # fmt: skip
def test_the_input_flag_is_whether_every_embedding_is_finite(entries):
    embeddings = torch.tensor(entries)
    view = BatchView(embeddings, labels=torch.arange(len(entries)))
    inputs, grads = view.finite_flags()
    expected = all(math.isfinite(value) for row in entries for value in row)
    assert bool(inputs) is expected and bool(grads) is expected


@pytest.mark.parametrize("bad", [INF, -INF, NAN])
def test_candidates_and_captured_gradients_count_in_the_flags(bad):
    queries, candidates = torch.ones(2, 3), torch.ones(4, 3)
    positives = torch.eye(2, 4, dtype=torch.bool)
    candidates[3, 1] = bad
    inputs, grads = BatchView(queries, candidates=candidates, positives=positives).finite_flags()
    assert not bool(inputs) and not bool(grads)

    grad = torch.zeros(2, 4)
    grad[1, 2] = bad
    captures = [ScoreCapture("i2t", torch.zeros(2, 4), positives, grad=torch.zeros(2, 4)),
                ScoreCapture("i2t", torch.zeros(2, 4), positives, grad=grad)]  # fmt: skip
    view = BatchView(queries, candidates=torch.ones(4, 3), positives=positives,
                     score_captures=captures)  # fmt: skip
    inputs, grads = view.finite_flags()
    assert bool(inputs) and not bool(grads)  # finite inputs, a non-finite dL/dS


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_an_empty_batch_is_finite_with_flags_on_its_device(device):
    view = BatchView(torch.empty(0, 4, device=device),
                     labels=torch.empty(0, dtype=torch.long, device=device))  # fmt: skip
    flags = view.finite_flags()
    for flag in flags:
        assert flag.shape == () and flag.dtype == torch.bool and flag.device.type == device
    if device == "cpu":
        assert [bool(flag) for flag in flags] == [True, True]


def test_a_batch_on_another_device_is_counted_there_without_reading_a_value():
    """``meta`` tensors have shapes but no values: every count of a batch large enough for the
    CPU's NumPy paths (at least 2^16 scores) stays a tensor of the right shape on that device."""
    size = 260
    embeddings = torch.randn(size, 8, device="meta")
    view = BatchView(embeddings, labels=torch.arange(size, device="meta") % 7)
    for counts, shape in ((view.pair_counts(0.25), (size,)),
                          (view.entry_counts(0.25), (size, size)),
                          (view.counts_at(view.scores[:, :3], 0.25), (size, 3))):  # fmt: skip
        assert counts.device.type == "meta" and tuple(counts.shape) == shape
    assert all(flag.device.type == "meta" for flag in view.finite_flags())


@pytest.fixture
def float64_default():
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


@pytest.mark.slow
@pytest.mark.usefixtures("float64_default")
def test_the_counts_of_a_float32_batch_do_not_depend_on_the_default_dtype():
    """260 x 260 (the NumPy paths): the buffers keep the batch's dtype under a float64 default."""
    scores = quarter_scores(260, seed=3, dtype=torch.float32)
    view = score_view(scores)
    for width in (0.25, 0.5):
        expected = window_counts(scores, width)
        assert torch.equal(view.entry_counts(width), expected)
        assert torch.equal(view.pair_counts(width), expected.sum(dim=1))
    assert view.negated_sorted.dtype == torch.float32


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_counts_of_a_large_batch_equal_the_window_test_in_both_dtypes(dtype):
    """260 x 260: sorted by integer keys (float64: by torch, float32: by NumPy)."""
    scores = quarter_scores(260, seed=4, dtype=dtype)
    view = score_view(scores)
    for width in (0.25, 0.125):
        expected = window_counts(scores, width)
        assert torch.equal(view.pair_counts(width), expected.sum(dim=1))
        assert torch.equal(view.entry_counts(width), expected)


def test_rows_whose_pair_count_passes_two_to_the_31_are_counted_exactly():
    """2 rows of 50,000 candidates and a window wider than every difference: each row holds
    all C^2 = 2.5e9 ordered pairs (more than an int32 or a float32 sum holds exactly)."""
    columns = 50_000
    generator = torch.Generator().manual_seed(5)
    scores = torch.rand(2, columns, generator=generator) * 2 - 1
    view = score_view(scores)
    assert view.pair_counts(4.0).tolist() == [columns * columns] * 2
    assert torch.equal(view.entry_counts(4.0), torch.full((2, columns), columns))



@pytest.mark.parametrize("edge", ["finite", "large", "infinite", "nan"])
def test_the_merged_pair_counts_equal_the_search_of_every_entry_at_the_key_ranges_edges(edge):
    """A float32 matrix's pair counts come from a merge of its sorted rows' keys with their
    shifts', in int32 while every key fits (cosine-sized scores) and in int64 otherwise (large
    logits, infinities, NaN): each equals the counts of a search of every entry (the path taken
    once those are cached), and the window test itself on scores of cosine size."""
    scores = quarter_scores(40, seed=6, dtype=torch.float32)
    if edge == "large":
        scores[3, 5], scores[7, 0] = 3.0e9, -2.5  # keys past 2^30 in one row
    elif edge == "infinite":
        scores[3, 5], scores[3, 6], scores[9, 1] = INF, -INF, INF
    elif edge == "nan":
        scores[3, 5], scores[11, 0], scores[11, 1] = NAN, NAN, 1.5
    for width in (0.25, 0.125, 2.0):
        merged = score_view(scores).pair_counts(width)
        searched = score_view(scores)
        searched.entry_counts(width)  # cached: pair_counts then sums the searched counts
        assert torch.equal(merged, searched.pair_counts(width))
        if edge == "finite":
            assert torch.equal(merged, window_counts(scores, width).sum(dim=1))

def test_the_recorded_scores_leave_the_graph_once_the_gradient_arrives():
    embeddings = torch.randn(4, 3, requires_grad=True)
    labels = torch.tensor([0, 0, 1, 1])
    scores = embeddings @ embeddings.T
    positives = (labels.unsqueeze(0) == labels.unsqueeze(1)).fill_diagonal_(False)
    record = LossRecord(scores, positives, ~torch.eye(4, dtype=torch.bool), 0.1, False, True,
                        None, embeddings=embeddings, candidates=embeddings)  # fmt: skip
    view = BatchView(embeddings.detach(), labels=labels, loss_record=record)
    assert view.record is record  # read before the gradient arrives
    view.embedding_grad = torch.ones(4, 3)
    kept = view.loss_record
    assert kept is not None and not kept.scores.requires_grad
    # nor the call's inputs, which lead back into the graph too
    assert kept.embeddings is None and kept.candidates is None
    assert torch.equal(kept.scores, scores.detach()) and torch.equal(kept.positives, positives)
    assert view.record is kept
    assert torch.equal(view.layout.scores, scores.detach())


def test_each_thread_has_one_workspace_of_its_own():
    seen = {}

    def in_a_new_thread():
        seen["first"], seen["again"] = thread_workspace(), thread_workspace()

    worker = threading.Thread(target=in_a_new_thread)
    worker.start()
    worker.join()
    assert isinstance(seen["first"], Workspace) and seen["again"] is seen["first"]
    assert thread_workspace() is thread_workspace()
    assert isinstance(thread_workspace(), Workspace) and thread_workspace() is not seen["first"]


def test_a_view_without_a_workspace_keeps_its_large_buffers_in_the_threads():
    seen = {}

    def in_a_new_thread():
        view = BatchView(torch.randn(130, 4), labels=torch.arange(130) % 3)
        sorted_rows = view.negated_sorted
        seen["kept"] = thread_workspace().kept_bytes
        seen["sorted"] = sorted_rows.numel() * sorted_rows.element_size()

    worker = threading.Thread(target=in_a_new_thread)
    worker.start()
    worker.join()
    assert seen["kept"] >= seen["sorted"] > 0


def test_a_buffer_that_grows_may_reuse_the_bytes_it_held():
    workspace = Workspace(max_bytes=1000)
    workspace.take("a", (100,), torch.float32)  # 400 bytes
    workspace.take("b", (100,), torch.float32)  # 800 in all
    grown = workspace.take("a", (150,), torch.float32)  # a's 400 bytes become 600
    assert workspace.kept_bytes == 600 + 400
    assert workspace.take("a", (150,), torch.float32).data_ptr() == grown.data_ptr()
    workspace.take("b", (160,), torch.float32)  # 640 + 600 > 1000: a plain allocation
    assert workspace.kept_bytes == 600 + 400
