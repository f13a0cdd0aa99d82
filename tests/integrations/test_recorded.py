"""gradlab.integrations.recorded: score matrices a loss records, joined into what a Monitor reads.

References are built by hand: the matrix a user would have written in one piece, a weighted sum
whose gradient is its weights, and masks by index.
"""

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.integrations.recorded import RecordedScoresAdapter, Stitch, loss_value
from gradlab.monitor.batch import ScoreCapture
from tests.helpers.default_device import assert_unchanged_under_another_default_device


def _leaf(rows, cols, seed):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(rows, cols, generator=generator, dtype=torch.float64).requires_grad_(True)


def test_row_chunks_and_column_blocks_join_into_one_matrix_and_its_gradient():
    top, bottom, extra = _leaf(2, 4, 0), _leaf(2, 4, 1), _leaf(4, 3, 2)  # 4 queries, 4 + 3 cols
    stitch = Stitch("i2t")
    stitch.add(extra, block=1)  # added first: blocks join in the order of their numbers
    stitch.add(top)
    stitch.add(bottom)
    capture = stitch.finish()
    whole = torch.zeros(4, 7, dtype=torch.float64)
    whole[:2, :4], whole[2:, :4], whole[:, 4:] = top.detach(), bottom.detach(), extra.detach()
    torch.testing.assert_close(capture.scores, whole)
    assert capture.direction == "i2t"
    expected_positives = torch.zeros(4, 7, dtype=torch.bool)
    for query in range(4):
        expected_positives[query, query] = True  # column i of block 0
    assert torch.equal(capture.positives, expected_positives)
    assert capture.candidates.all()  # nothing masked
    assert capture.grad is None  # before backward
    weights = torch.arange(28, dtype=torch.float64).reshape(4, 7)
    loss = (weights[:2, :4] * top).sum() + (weights[2:, :4] * bottom).sum()
    (loss + (weights[:, 4:] * extra).sum()).backward()
    torch.testing.assert_close(capture.grad, weights)


def test_the_gradient_waits_for_every_piece():
    first, second = _leaf(2, 4, 3), _leaf(2, 4, 4)
    stitch = Stitch("i2t")
    stitch.add(first)
    stitch.add(second)
    capture = stitch.finish()
    (3 * first.sum()).backward()
    assert capture.grad is None  # the second piece has no gradient yet
    (5 * second.sum()).backward()
    expected = torch.cat([torch.full((2, 4), 3.0), torch.full((2, 4), 5.0)]).double()
    torch.testing.assert_close(capture.grad, expected)


def test_backward_before_finish_still_sets_the_gradient():
    matrix = _leaf(3, 3, 5)
    stitch = Stitch("both")
    stitch.add(matrix)
    (2 * matrix.sum()).backward()
    capture = stitch.finish()
    torch.testing.assert_close(capture.grad, torch.full((3, 3), 2.0, dtype=torch.float64))


def test_t2i_captures_have_their_queries_on_the_columns():
    matrix = _leaf(3, 5, 6)  # rows: 3 queries, as recorded
    stitch = Stitch("t2i")
    stitch.add(matrix)
    capture = stitch.finish()
    torch.testing.assert_close(capture.scores, matrix.detach().T)
    assert capture.positives.shape == (5, 3)
    assert [tuple(p) for p in capture.positives.nonzero().tolist()] == [(0, 0), (1, 1), (2, 2)]
    weights = torch.arange(15, dtype=torch.float64).reshape(3, 5)
    (weights * matrix).sum().backward()
    torch.testing.assert_close(capture.grad, weights.T)


def test_a_transposed_piece_is_read_with_its_queries_on_the_columns():
    matrix = _leaf(4, 2, 7)  # columns: 2 queries
    stitch = Stitch("i2t")
    stitch.add(matrix, transposed=True)
    capture = stitch.finish()
    torch.testing.assert_close(capture.scores, matrix.detach().T)
    weights = torch.arange(8, dtype=torch.float64).reshape(4, 2)
    (weights * matrix).sum().backward()
    torch.testing.assert_close(capture.grad, weights.T)


def test_offset_places_positives_and_drops_queries_past_the_block():
    matrix = _leaf(3, 4, 8)  # candidates gathered from two processes: this is rank 1 of B = 2
    capture_stitch = Stitch("i2t", offset=2)
    capture_stitch.add(matrix)
    capture = capture_stitch.finish()
    assert [tuple(p) for p in capture.positives.nonzero().tolist()] == [(0, 2), (1, 3)]


def test_entries_the_loss_masks_after_recording_are_not_candidates():
    matrix = _leaf(3, 3, 9)
    scores = matrix * 1.0  # the loss's own tensor, masked in place after the record
    stitch = Stitch("i2t")
    stitch.add(scores)
    with torch.no_grad():
        scores.fill_diagonal_(float("-inf"))
    capture = stitch.finish()
    assert torch.equal(capture.candidates, ~torch.eye(3, dtype=torch.bool))
    # an entry already -inf when recorded was not masked by the loss afterwards
    recorded_inf = torch.tensor([[0.0, float("-inf")], [1.0, 2.0]], requires_grad=True) * 1.0
    other = Stitch("i2t")
    other.add(recorded_inf)
    assert other.finish().candidates.all()


@pytest.mark.parametrize("direction", ["in_batch", "x", "", None])
def test_an_unknown_direction_is_refused(direction):
    with pytest.raises(
        GradlabError, match=f"direction must be 'i2t', 't2i' or 'both'; got {direction!r}"
    ):
        Stitch(direction)


def test_loss_value_reads_a_tensor_or_sums_a_dict():
    loss = torch.tensor(2.5)
    assert loss_value(loss) is loss
    total = loss_value({"a": torch.tensor(2.0), "b": torch.tensor([3.0]), "n": 4})
    assert total.shape == () and total.item() == 5.0
    assert loss_value({"n": 4}) is None
    assert loss_value(2.5) is None
    assert loss_value(None) is None


class _Recorder:
    score_recorder = None


class _Collector:
    """Keeps each recorded matrix, queries against themselves (positives on the diagonal)."""

    def __init__(self, features=None):
        self.kept, self._features = [], features

    def record(self, direction, matrix, mask):
        self.kept.append(matrix)

    def finish(self):
        eye = torch.eye(3, dtype=torch.bool)
        return [ScoreCapture("i2t", m.detach(), eye, ~eye.roll(1, 1)) for m in self.kept]

    def features(self):
        return self._features


def test_listening_hands_the_recorder_a_collector_only_for_the_call():
    recorder = _Recorder()
    adapter = RecordedScoresAdapter("the watched loss demo", recorder, _Collector)
    with adapter.listening(score_grad=False) as (recorded, extra):
        assert extra == [] and len(recorded) == 1
        assert recorder.score_recorder == recorded[0].record
    assert recorder.score_recorder is None
    with pytest.raises(RuntimeError), adapter.listening(score_grad=False):
        raise RuntimeError("the loss failed")
    assert recorder.score_recorder is None  # reset even when the call raised


def test_the_first_capture_is_the_steps_scores_and_every_capture_feeds_the_anatomy():
    recorder = _Recorder()
    adapter = RecordedScoresAdapter("the watched loss demo", recorder, _Collector)
    first, second = torch.randn(3, 3), torch.randn(3, 3)
    with adapter.listening(score_grad=True) as (recorded, _):
        recorder.score_recorder("i2t", first, None)
        recorder.score_recorder("i2t", second, None)
    batch = adapter.capture([], {"loss": torch.tensor(1.5)}, 0.01, recorded=recorded,
                            score_grad=True)  # fmt: skip
    torch.testing.assert_close(batch.scores, first)
    assert [c.scores.data_ptr() for c in batch.score_captures] == [
        m.data_ptr() for m in (first, second)
    ]
    with adapter.listening(score_grad=False) as (recorded, _):
        recorder.score_recorder("i2t", first, None)
    batch = adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded)
    assert not batch.score_captures  # no quantity reads dL/dS: none attached


def test_a_call_that_recorded_nothing_names_the_loss_and_the_hint():
    recorder = _Recorder()
    adapter = RecordedScoresAdapter("the watched loss Demo", recorder, _Collector, hint="; check X")
    with adapter.listening(score_grad=False) as (recorded, _):
        pass
    message = "the watched loss Demo recorded no score matrix with a gradient; check X"
    with pytest.raises(GradlabError, match=message):
        adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded)
    with pytest.raises(GradlabError, match=message):
        adapter.capture([], torch.tensor(1.0), 0.01)


def test_masked_candidates_reach_the_steps_layout():
    recorder = _Recorder()
    matrix = torch.randn(3, 3)
    masked = RecordedScoresAdapter("demo", recorder, _Collector, masked_candidates=True)
    plain = RecordedScoresAdapter("demo", recorder, _Collector)
    layouts = []
    for adapter in (masked, plain):
        with adapter.listening(score_grad=False) as (recorded, _):
            recorder.score_recorder("i2t", matrix, None)
        layouts.append(adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded).layout)
    expected = ~torch.eye(3, dtype=torch.bool).roll(1, 1)  # what the collector marked
    assert torch.equal(layouts[0].candidate_mask, expected)
    plain_mask = layouts[1].candidate_mask
    assert plain_mask is None or not torch.equal(plain_mask, expected)


@pytest.mark.parametrize(("rows", "matches"), [(3, True), (2, False)])
def test_features_reach_the_step_only_when_they_are_the_matrixs_rows_and_columns(rows, matches):
    recorder = _Recorder()
    features = (torch.randn(rows, 4), torch.randn(3, 4))
    adapter = RecordedScoresAdapter("demo", recorder, lambda: _Collector(features), features=True)
    assert "features" in adapter.provides
    with adapter.listening(score_grad=False) as (recorded, _):
        recorder.score_recorder("i2t", torch.randn(3, 3), None)
    batch = adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded)
    assert (batch.features is features) is matches
    assert matches or batch.features is None
    assert "features" not in RecordedScoresAdapter("demo", recorder, _Collector).provides


def test_the_batch_carries_the_loss_value_tau_and_the_recorded_layout():
    recorder = _Recorder()
    adapter = RecordedScoresAdapter("demo", recorder, _Collector, masked_candidates=True)
    matrix = torch.randn(3, 3)
    with adapter.listening(score_grad=False) as (recorded, _):
        recorder.score_recorder("i2t", matrix, None)
    loss = {"contrastive": torch.tensor(2.0), "distill": torch.tensor(0.5)}
    batch = adapter.capture([], loss, 0.07, recorded=recorded)
    assert batch.loss.item() == 2.5 and batch.tau == 0.07
    torch.testing.assert_close(batch.layout.scores, matrix)
    assert torch.equal(batch.layout.positives, torch.eye(3, dtype=torch.bool))


def test_quantities_it_cannot_read_say_why_and_a_step_reads_the_losss_counts():
    class Loss:
        degenerate_batches = 7

    recorder = _Recorder()
    adapter = RecordedScoresAdapter("the watched loss Demo", recorder, _Collector, loss_fn=Loss())
    why = "the watched loss Demo is read through the score matrices it records"
    for need in ("embeddings", "features", "embedding_grad", "smooth_ap_terms", "loss_kind"):
        assert adapter.why_not(frozenset({need})).endswith(f"; {why}"), need
    with adapter.listening(score_grad=False) as (recorded, _):
        recorder.score_recorder("i2t", torch.randn(3, 3), None)
    assert adapter.capture([], torch.tensor(1.0), 0.01, recorded=recorded).degenerate_batches == 7
    # an integration that sees the compared embeddings logs the geometry from them: the
    # reasons for the embedding quantities say so (the header read as a contradiction)
    seeing = RecordedScoresAdapter("the watched loss Demo", recorder, _Collector, features=True)
    assert seeing.why_not(frozenset({"features"})) is None
    for need in ("embeddings", "embedding_grad"):
        assert seeing.why_not(frozenset({need})).endswith(
            f"; {why} (the embeddings those matrices compare serve the geometry alone: no "
            "gradient of them is read)")  # fmt: skip


def test_without_a_hint_the_message_ends_at_the_gradient():
    adapter = RecordedScoresAdapter("demo", _Recorder(), _Collector)
    with pytest.raises(GradlabError, match=r"recorded no score matrix with a gradient$"):
        adapter.capture([], torch.tensor(1.0), 0.01)


def test_positives_are_a_bool_mask():
    stitch = Stitch("i2t")
    stitch.add(_leaf(2, 2, 10))
    assert stitch.finish().positives.dtype == torch.bool


def test_positives_are_built_on_the_scores_device_not_torchs_default_device():
    # A user who set torch's default device elsewhere (torch.set_default_device("cuda")) while
    # the scores live on the CPU; "meta" stands in for the other device.
    matrix = _leaf(3, 4, 10)

    def finish():
        stitch = Stitch("i2t", offset=1)
        stitch.add(matrix)
        capture = stitch.finish()
        return capture.scores, capture.positives, capture.candidates

    assert_unchanged_under_another_default_device(finish, matrix.device)


@pytest.mark.parametrize("asked", [{}, {"score_grad": True}, {"loss_scale": True}])
def test_the_loops_factor_is_read_when_asked_from_the_first_loss_of_a_dict_in_the_graph(asked):
    # the factor a loop puts on the loss (here 1/4) divides the read gradients: it is read
    # when a gradient or the factor is asked, and from a dict of losses (open_clip's
    # output_dict) through its first value in the graph, past a number and a detached value
    recorder = _Recorder()
    adapter = RecordedScoresAdapter("demo", recorder, _Collector)
    matrix = _leaf(3, 3, 4)
    with adapter.listening(score_grad=bool(asked)) as (recorded, _):
        recorder.score_recorder("i2t", matrix, None)
    loss = {"count": 3, "detached": torch.tensor(1.0), "contrastive": (matrix ** 2).sum()}
    batch = adapter.capture([], loss, 0.01, recorded=recorded, **asked)
    (loss["contrastive"] * 0.25).backward()
    assert (batch.loss_scale.item() if asked else batch.loss_scale) == (0.25 if asked else None)
