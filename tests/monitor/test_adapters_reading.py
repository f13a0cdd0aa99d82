"""How the loss adapters read a watched loss and its calls.

Which adapter a loss gets (gradlab's SmoothAP with its query convention, pytorch-metric-learning
losses with their temperature, score-matrix losses, a loss exposing a recording distance), which
tensors of a call are read and in what order, what a captured step holds (the loss's own
counts, its recorded score matrix, gradients only where asked), checked against autograd and
masks built here.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import adapters, read_jsonl
from gradlab.monitor.batch import ScoreCapture
from tests.reference.geometry_loops import margins
from tests.reference.operating_region_loops import proportion
from tests.reference.smooth_ap_loops import cosine

TAU = 0.05


def _batch(seed: int = 0, size: int = 6):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, 4, generator=generator, dtype=torch.float64)
    return embeddings.requires_grad_(True), torch.arange(size) // 2  # pairs


def _same_label(labels: torch.Tensor) -> torch.Tensor:
    return torch.tensor([[int(a) == int(b) for b in labels] for a in labels])


class _Slot:
    """An object that takes a score_recorder, as a recording distance does."""

    score_recorder = None


# Which adapter a loss gets


@pytest.mark.parametrize(
    ("include_query", "kind"), [(False, "exclude_query"), (True, "include_query")]
)
def test_gradlabs_smooth_ap_is_read_with_its_query_convention_and_tau(include_query, kind):
    loss_fn = gradlab.SmoothAPLoss(0.07, include_query=include_query)
    adapter = adapters.adapt(loss_fn)
    assert (adapter.loss_kind, adapter.loss_tau, adapter.smooth_ap) == (kind, 0.07, True)
    assert adapter.loss_fn is loss_fn and adapter.inputs == "embeddings"
    assert {"loss_kind", "score_grad"} <= adapter.provides


def test_a_loss_exposing_a_recording_distance_hands_its_scores_to_the_monitor():
    class WithDistance(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.distance = _Slot()

        def forward(self, embeddings, labels):
            return embeddings.sum()

    loss_fn = WithDistance()
    adapter = adapters.adapt(loss_fn)
    assert adapter.recorder is loss_fn.distance and "score_grad" in adapter.provides
    assert adapters.adapt(lambda e, y: e.sum()).recorder is None


@pytest.mark.parametrize("inputs", [None, "embeddings"])
def test_pml_smooth_ap_is_recognised_with_its_temperature(inputs):
    pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
    loss_fn = pml_losses.SmoothAPLoss(temperature=0.02)
    adapter = adapters.adapt(loss_fn, inputs=inputs)
    # PML's query is its own candidate
    assert (adapter.loss_kind, adapter.loss_tau) == ("include_query", 0.02)
    assert adapter.why_not(frozenset({"loss_kind"})) is None
    assert adapter.loss_fn is loss_fn and adapter.name == "the watched loss SmoothAPLoss"


def test_other_pml_losses_are_not_smooth_ap_and_record_through_their_distance():
    pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
    from gradlab.interop.pml import RecordingCosineSimilarity

    loss_fn = pml_losses.ContrastiveLoss(distance=RecordingCosineSimilarity())
    adapter = adapters.adapt(loss_fn)
    assert (adapter.loss_kind, adapter.loss_tau) == (None, None)
    assert adapter.recorder is loss_fn.distance and adapter.loss_fn is loss_fn
    assert adapter.why_not(frozenset({"loss_kind"})) == (
        "needs a watched SmoothAP loss (its analytic gradient is compared); the watched loss "
        "ContrastiveLoss is not SmoothAP"
    )


def test_a_pml_loss_watched_on_scores_is_read_on_scores():
    pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
    adapter = adapters.adapt(pml_losses.SmoothAPLoss(temperature=0.02), inputs="scores")
    assert (adapter.inputs, adapter.loss_kind, adapter.loss_tau) == ("scores", None, None)


def test_a_score_loss_keeps_its_recorder_only_when_it_has_one():
    loss_fn = gradlab.NTXentLoss(0.1)
    assert adapters.adapt(loss_fn).recorder is loss_fn
    assert adapters.adapt(loss_fn).loss_fn is loss_fn

    def plain(scores, positives):
        return scores.sum()

    assert adapters.adapt(plain, inputs="scores").recorder is None


def test_a_registered_maker_is_asked_before_gradlabs_own(monkeypatch):
    monkeypatch.setattr(adapters, "ADAPTERS", list(adapters.ADAPTERS))
    mine = adapters.LossAdapter("mine", "embeddings", frozenset({"embeddings"}))
    adapters.register(lambda loss_fn, inputs: mine)
    assert adapters.adapt(gradlab.SmoothAPLoss(0.05)) is mine


# The tensors of a call


def test_keyword_arguments_that_are_not_tensors_are_not_read():
    embeddings, labels = torch.zeros(3, 2), torch.arange(3)
    tensors = adapters.call_tensors((embeddings,), {"labels": labels, "margin": 0.2})
    assert len(tensors) == 2 and tensors[0] is embeddings and tensors[1] is labels


def test_after_a_positional_first_argument_keywords_keep_the_glossary_order():
    embeddings, labels, extra = torch.zeros(3, 2), torch.arange(3), torch.ones(3, 5)
    tensors = adapters.call_tensors((embeddings,), {"extra": extra, "labels": labels})
    assert [id(t) for t in tensors] == [id(embeddings), id(labels), id(extra)]


def test_the_first_argument_under_another_name_is_the_first_2d_float_keyword():
    weight, features, labels = torch.ones(3), torch.zeros(3, 2), torch.arange(3)
    tensors = adapters.call_tensors((), {"weight": weight, "features": features, "labels": labels})
    assert [id(t) for t in tensors] == [id(features), id(labels), id(weight)]


def test_a_call_without_a_2d_float_tensor_keeps_its_keywords():
    labels, weight = torch.arange(3), torch.ones(3)
    tensors = adapters.call_tensors((), {"labels": labels, "weight": weight})
    assert [id(t) for t in tensors] == [id(labels), id(weight)]


# What a step reads


@pytest.mark.parametrize(
    ("make", "call"),
    [
        (lambda: gradlab.SmoothAPLoss(TAU), lambda: (torch.randn(4, 3), torch.arange(4))),
        (lambda: gradlab.NTXentLoss(0.1),
         lambda: (torch.randn(4, 4), torch.zeros(4, 4, dtype=torch.bool))),
    ],
)  # fmt: skip
def test_a_step_reads_the_losses_count_of_batches_without_signal(make, call):
    loss_fn = make()
    tensors = list(call())  # no positive pair: a degenerate batch
    with pytest.warns(gradlab.DegenerateBatchWarning):
        loss_fn(*tensors)
    batch = adapters.adapt(loss_fn).read(tensors, None, TAU)
    assert loss_fn.degenerate_batches == 1 and batch.degenerate_batches == 1


def test_a_loss_without_a_count_reads_none():
    tensors = [torch.zeros(2, 2), torch.arange(2)]
    batch = adapters.adapt(lambda e, y: e.sum()).read(tensors, None, 0.1)
    assert batch.degenerate_batches is None


def test_the_loss_value_is_read_detached_or_left_out():
    adapter = adapters.adapt(gradlab.SmoothAPLoss(TAU))
    embeddings, labels = _batch()
    assert adapter.read([embeddings, labels], None, TAU).loss is None
    loss = (embeddings**2).sum()
    batch = adapter.read([embeddings, labels], loss, TAU)
    assert torch.equal(batch.loss, loss) and not batch.loss.requires_grad


def test_a_score_call_is_its_own_layout():
    scores, positives = torch.randn(3, 5), torch.rand(3, 5) < 0.5
    batch = adapters.adapt(gradlab.NTXentLoss(0.1)).read([scores, positives], None, 0.1)
    assert torch.equal(batch.layout.scores, scores) and batch.layout.positives is positives
    assert batch.layout.candidate_mask is None and batch.positives is positives


def test_a_capture_asks_for_no_gradient_by_default():
    loss_fn = gradlab.SmoothAPLoss(TAU)
    embeddings, labels = _batch()
    loss = loss_fn(embeddings, labels)
    batch = adapters.adapt(loss_fn).capture([embeddings, labels], loss, TAU)
    loss.backward()
    assert batch.score_captures == [] and batch.embedding_grad is None


@pytest.mark.parametrize(("score_grad", "embedding_grad", "loss_scale"),
                         [(True, False, False), (False, True, False), (False, False, True),
                          (False, False, False)])  # fmt: skip
def test_the_loops_factor_is_read_when_any_gradient_or_the_factor_is_asked(
    score_grad, embedding_grad, loss_scale,
):
    # each of the three asks for the factor the loop puts on the loss (a gradient read is
    # divided by it); none asks for nothing
    loss_fn = gradlab.SmoothAPLoss(TAU)
    embeddings, labels = _batch()
    loss = loss_fn(embeddings, labels)
    batch = adapters.adapt(loss_fn).capture([embeddings, labels], loss, TAU,
                                            score_grad=score_grad,
                                            embedding_grad=embedding_grad,
                                            loss_scale=loss_scale)  # fmt: skip
    (loss * 0.25).backward()
    asked = score_grad or embedding_grad or loss_scale
    assert (batch.loss_scale.item() if asked else batch.loss_scale) == (0.25 if asked else None)


def test_the_embedding_gradient_is_kept_only_when_asked_on_embeddings():
    loss_fn = gradlab.SmoothAPLoss(TAU)
    embeddings, labels = _batch()
    # two adapters: one adapter's capture removes the hooks of its previous one
    kept = adapters.adapt(loss_fn).capture([embeddings, labels], None, TAU, embedding_grad=True)
    unasked = adapters.adapt(loss_fn).capture([embeddings, labels], None, TAU,
                                              embedding_grad=False)  # fmt: skip
    (expected,) = torch.autograd.grad(loss_fn(embeddings, labels), embeddings, retain_graph=True)
    loss_fn(embeddings, labels).backward()
    assert torch.equal(kept.embedding_grad, expected) and unasked.embedding_grad is None


def test_a_score_call_never_fills_the_embedding_gradient():
    scores = torch.randn(4, 4, requires_grad=True)
    loss_fn = gradlab.NTXentLoss(0.1)
    positives = torch.eye(4, dtype=torch.bool)
    batch = adapters.adapt(loss_fn).capture([scores, positives], None, 0.1, embedding_grad=True)
    loss_fn(scores, positives).backward()
    assert batch.embedding_grad is None


def test_smooth_ap_hands_its_recorded_score_matrix_and_its_gradient():
    loss_fn = gradlab.SmoothAPLoss(TAU)
    adapter = adapters.adapt(loss_fn)
    embeddings, labels = _batch()
    with adapter.listening(score_grad=True) as (recorded, records):
        loss = loss_fn(embeddings, labels)
    (record,) = records
    record.scores.retain_grad()  # autograd's dL/dS, the reference
    batch = adapter.capture([embeddings, labels], loss, TAU, record=record, recorded=recorded,
                            score_grad=True)  # fmt: skip
    assert batch.loss_record is record
    loss.backward()
    (capture,) = batch.score_captures
    assert (capture.direction, capture.smooth_ap_tau) == ("in_batch", None)
    assert torch.equal(capture.scores, record.scores.detach())
    assert torch.equal(capture.grad, record.scores.grad)


@pytest.mark.parametrize("layout", ["in_batch", "cross_modal", "cross_modal_candidates"])
def test_smooth_ap_of_a_transform_inside_the_loss_is_not_taken_for_the_calls_scores(
    tmp_path, layout
):
    """A loss that calls gradlab's SmoothAP on a projection of its input records that
    projection's score matrix, of the same shape: the Monitor's P, margins and geometry
    described it as the cosine scores of the watched embeddings. The projection may be of
    the candidates alone (``cross_modal_candidates``): the queries are then the call's own."""
    embeddings, labels = _batch(5, size=8)
    candidates = torch.randn(8, 4, generator=torch.Generator().manual_seed(6),
                             dtype=torch.float64)  # fmt: skip
    positives = _same_label(labels)
    flip = torch.tensor([1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    smooth_ap = gradlab.SmoothAPLoss(TAU)

    def projected(first, second=None, candidates=None, positives=None):
        if candidates is None:
            return smooth_ap(first * flip + 0.5, second)
        if layout == "cross_modal_candidates":
            return smooth_ap(first, candidates=candidates * flip + 0.5, positives=positives)
        return smooth_ap(first * flip + 0.5, candidates=candidates, positives=positives)

    with gradlab.Monitor(tmp_path, preset="default", every=1, tau=TAU) as monitor:
        loss_fn = monitor.watch(projected)
        if layout == "in_batch":
            loss_fn(embeddings, labels).backward()
        else:
            loss_fn(embeddings, candidates=candidates, positives=positives).backward()
        record = monitor.step()
    rows = embeddings.tolist()
    columns = rows if layout == "in_batch" else candidates.tolist()
    scores = [[cosine(a, b) for b in columns] for a in rows]
    keep = [[layout != "in_batch" or q != c for c in range(8)] for q in range(8)]
    same = [[bool(positives[q, c]) and keep[q][c] for c in range(8)] for q in range(8)]
    for key, value in zip(("margin_positive_score", "margin_hardest_negative", "margin_mean"),
                          margins(scores, same, keep), strict=False):  # fmt: skip
        assert record[key] == pytest.approx(value, rel=1e-12), key
    seed = math.fsum(proportion(row, TAU, 0.005) for row in scores) / 8
    key = "p_seed" if layout == "in_batch" else "p_cross_modal"
    assert record[key] == pytest.approx(seed, rel=1e-12)


def test_a_score_call_keeps_no_loss_record():
    loss_fn = gradlab.SmoothAPLoss(TAU)
    embeddings, labels = _batch()
    with adapters.adapt(loss_fn).listening(score_grad=False) as (_, records):
        loss_fn(embeddings, labels)
    scores = torch.randn(6, 6)
    batch = adapters.adapt(gradlab.NTXentLoss(0.1)).capture(
        [scores, torch.eye(6, dtype=torch.bool)], None, 0.1, record=records[0]
    )
    assert batch.loss_record is None


@pytest.mark.parametrize("include_query", [False, True])
def test_without_a_record_smooth_ap_reads_the_labels_with_its_query_convention(include_query):
    embeddings, labels = _batch()
    adapter = adapters.adapt(gradlab.SmoothAPLoss(TAU, include_query=include_query))
    batch = adapter.capture([embeddings, labels], None, TAU, score_grad=True)
    (capture,) = batch.score_captures
    same = _same_label(labels)
    eye = torch.eye(len(labels), dtype=torch.bool)
    assert (capture.direction, capture.scores, capture.smooth_ap_tau) == ("in_batch", None, TAU)
    if include_query:
        assert torch.equal(capture.positives, same) and capture.candidates is None
    else:
        assert torch.equal(capture.positives, same & ~eye)
        assert torch.equal(capture.candidates, ~eye)


def test_a_recorded_in_batch_matrix_is_read_once_with_the_batch_masks():
    embeddings, labels = _batch()
    size = len(labels)
    adapter = adapters.embedding_adapter(lambda e, y: e.sum(), _Slot())
    kept = []
    record = adapters.record_into(kept)
    first, second = torch.randn(size, size), torch.randn(size, size)
    record("in_batch", first, None)
    record("in_batch", second, None)
    record("in_batch", torch.randn(size, size + 1), None)  # another shape: not this batch's
    batch = adapter.capture([embeddings, labels], None, TAU, recorded=kept, score_grad=True)
    (capture,) = batch.score_captures
    eye = torch.eye(size, dtype=torch.bool)
    assert torch.equal(capture.scores, first) and capture.direction == "in_batch"
    assert torch.equal(capture.positives, _same_label(labels) & ~eye)
    assert torch.equal(capture.candidates, ~eye)


def test_a_smooth_ap_adapter_with_a_recorder_reads_the_recorded_matrix():
    embeddings, labels = _batch()
    size = len(labels)
    adapter = adapters.embedding_adapter(lambda e, y: e.sum(), _Slot(), smooth_ap=True,
                                         loss_kind="exclude_query", loss_tau=TAU)  # fmt: skip
    scores = torch.randn(size, size)
    batch = adapter.capture([embeddings, labels], None, TAU, score_grad=True,
                            recorded=[ScoreCapture("in_batch", scores, None)])  # fmt: skip
    (capture,) = batch.score_captures
    assert capture.scores is scores and capture.smooth_ap_tau is None


def test_a_cross_modal_smooth_ap_call_of_the_watched_tensors_hands_its_record():
    # The call's own queries and candidates: the record is of the watched tensors, so the
    # Monitor reads its scores instead of computing them again.
    loss_fn = gradlab.SmoothAPLoss(TAU)
    adapter = adapters.adapt(loss_fn)
    queries, labels = _batch(7, size=6)
    candidates = torch.randn(6, 4, generator=torch.Generator().manual_seed(8),
                             dtype=torch.float64, requires_grad=True)  # fmt: skip
    positives = _same_label(labels)
    with adapter.listening(score_grad=False) as (recorded, records):
        loss = loss_fn(queries, candidates=candidates, positives=positives)
    (record,) = records
    tensors = adapters.call_tensors((queries,), {"candidates": candidates, "positives": positives})
    batch = adapter.capture(tensors, loss, TAU, record=record, recorded=recorded)
    assert batch.loss_record is record


def test_a_score_call_is_read_as_scores_with_the_features_geometry():
    """What watch(loss, inputs="scores") reads: a view on the score matrix, so that the
    geometry is that of the features an integration adds, not of the matrix's rows."""
    from gradlab.monitor import Geometry
    from tests.reference import geometry_loops as loops

    generator = torch.Generator().manual_seed(6)
    images, texts = torch.randn(8, 5, generator=generator), torch.randn(8, 5, generator=generator)
    positives = torch.eye(8, dtype=torch.bool)
    logits = 20.0 * torch.nn.functional.normalize(images, dim=1) @ torch.nn.functional.normalize(
        texts, dim=1).T  # fmt: skip
    view = adapters.adapt(gradlab.NTXentLoss(0.05)).read([logits, positives], None, TAU)
    view.features = (images, texts)
    values = Geometry().compute(view)
    expected = loops.logged_geometry(images.tolist(), texts.tolist(), positives.tolist())
    for key, value in expected.items():
        tolerance = 1e-6 if key == "geometry_alignment" else 1e-9
        assert float(values[key]) == pytest.approx(value, rel=tolerance), key


def test_a_score_loss_s_own_softmax_logits_attribute_of_another_kind_is_not_read():
    # Only gradlab's SoftmaxLogits declaration is read; an attribute of that name holding
    # something else (a user's own scale) is no declaration.
    def loss_fn(scores, positives):
        return scores.sum()

    loss_fn.softmax_logits = 20.0
    view = adapters.adapt(loss_fn, "scores").read([torch.eye(3), torch.eye(3, dtype=torch.bool)],
                                                  None, TAU)  # fmt: skip
    assert view.softmax is None
    declared = gradlab.NTXentLoss(0.05).softmax_logits
    loss_fn.softmax_logits = declared
    view = adapters.adapt(loss_fn, "scores").read([torch.eye(3), torch.eye(3, dtype=torch.bool)],
                                                  None, TAU)  # fmt: skip
    assert view.softmax is declared


def test_a_quantity_needing_every_known_value_applies_to_a_loss_providing_them_all():
    # gradlab's SmoothAP provides every need the Monitor knows: a quantity declaring all of them
    # applies; one more, unknown, need is named.
    adapter = adapters.adapt(gradlab.SmoothAPLoss(TAU))
    everything = frozenset(adapters.NEEDS)
    assert adapter.why_not(everything) is None
    assert adapter.why_not(everything | {"hessian"}) == (
        "needs hessian, which the Monitor does not know")


def _info_nce(scores, targets):  # a user's own score loss, on cross_entropy targets
    return torch.nn.functional.cross_entropy(scores / 0.1, targets)


def test_a_square_first_argument_assumed_to_be_embeddings_is_named_once(tmp_path):
    # an [8, 8] score matrix of a loss watched without inputs= was logged as 8 embeddings
    scores = torch.randn(8, 8, generator=torch.Generator().manual_seed(0), requires_grad=True)
    with gradlab.Monitor(tmp_path / "square", every=1) as monitor:
        watched = monitor.watch(_info_nce)
        with pytest.warns(RuntimeWarning) as caught:
            watched(scores, torch.arange(8)).backward()
            monitor.step()
            watched(scores, torch.arange(8)).backward()  # once per watched loss
            monitor.step()
    # (the batch, 8 singletons as read, also has no ranking signal: said apart, once)
    assert [(w.category, w.filename, str(w.message)) for w in caught
            if "input_form" in str(w.message)] == [(
        RuntimeWarning, __file__,
        "gradlab.Monitor: the watched loss _info_nce declares no input_form and was watched "
        "without inputs=, so its [8, 8] first argument is read as 8 embeddings of dimension 8; "
        "if it is a score matrix (queries x candidates), watch it with watch(loss, "
        "inputs='scores'), the Monitor's or a callback's (inputs='in_batch_scores' if it scores "
        "a batch against itself, z @ z.T), else pass inputs='embeddings' to say so")]  # fmt: skip
    two = adapters.adapt(_info_nce)  # two rows: a 2 x 2 matrix is named too
    with pytest.warns(RuntimeWarning, match=r"its \[2, 2\] first argument is read as 2 "):
        two.read([torch.zeros(2, 2), torch.arange(2)], None, 0.1)

    class OnEmbeddings:  # a loss that says it takes embeddings: nothing to name
        input_form = "embeddings"

        def __call__(self, embeddings, labels):
            return embeddings.sum()

    # said, not square, one row (nothing ranked either way), or declared
    for loss_fn, inputs, shape in ((_info_nce, "embeddings", (8, 8)), (_info_nce, None, (8, 5)),
                                   (_info_nce, None, (1, 1)), (OnEmbeddings(), None, (8, 8))):
        adapter = adapters.adapt(loss_fn, inputs)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            adapter.read([torch.zeros(shape), torch.arange(shape[0])], None, 0.1)
    # square queries beside their candidates (the cross-modal form): no score matrix to name
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        adapters.adapt(_info_nce).read([torch.zeros(4, 4), torch.zeros(4, 4),
                                        torch.eye(4) > 0], None, 0.1)  # fmt: skip
    for loss_fn in (gradlab.SmoothAPLoss(TAU), gradlab.NTXentLoss(0.1)):  # they declare it
        assert not adapters.adapt(loss_fn).form_assumed


def test_labels_of_a_users_score_loss_that_read_as_targets_too_are_refused(tmp_path):
    # cross_entropy targets 0..7 shuffled were read as labels: each row's positive its own
    # column, and the margins, R@1 and anatomy of other positives were logged without a word
    generator = torch.Generator().manual_seed(0)
    targets = torch.randperm(8, generator=generator)
    scores = torch.randn(8, 8, generator=generator, requires_grad=True)
    with gradlab.Monitor(tmp_path / "targets", every=1) as monitor:
        watched = monitor.watch(_info_nce, inputs="scores")
        with pytest.warns(RuntimeWarning) as caught:
            watched(scores, targets).backward()
        monitor.step()
        watched(scores, torch.arange(8)).backward()  # in order: one reading, logged
        monitor.step()
        watched(scores, targets.flip(0)).backward()  # shuffled again: not logged, no warning
        monitor.step()
        with pytest.warns(RuntimeWarning, match="reads two ways: it is read as labels"):
            watched(scores, torch.arange(8) // 2).backward()  # labels that repeat: logged
        monitor.step()
    _, records = read_jsonl(tmp_path / "targets")
    assert [r["step"] for r in records] == [1, 3]  # each call decided on its own
    assert records[0]["margin_recall_at_1"] == float(  # the diagonal: arange's positives
        (scores.argmax(dim=1) == torch.arange(8)).double().mean())
    (warning,) = caught
    assert str(warning.message).startswith(
        "gradlab.Monitor: a loss call it cannot read was not logged (the watched loss "
        "_info_nce's [B] second argument holds 0..B-1 in another order, which reads two ways: "
        "as labels (the Monitor's reading: a positive where two rows' labels match, so each "
        "row's own column) or as cross_entropy targets (the column each row's target names); "
        "give the loss a [Q, C] bool mask of the positives instead (positives = "
        "torch.nn.functional.one_hot(targets, C).bool(), its targets = "
        "positives.int().argmax(1) inside the loss); the call's arguments: ")
    for labels in (torch.arange(8), torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])):  # one reading
        adapter = adapters.adapt(_info_nce, "scores")
        mask = adapter.read([scores, labels], None, 0.1).positives
        assert torch.equal(mask, _same_label(labels))
    adapter = adapters.adapt(gradlab.NTXentLoss(0.1))  # gradlab's own: labels, its reading
    assert torch.equal(adapter.read([scores, targets], None, 0.1).positives, torch.eye(8) > 0)


def test_labels_that_could_be_targets_with_repeats_are_read_as_labels_with_one_warning(
    tmp_path
):
    # cross_entropy targets [0, 0, 2, 2, ...] were read as labels without a word (the shuffled
    # 0..B-1 alone were named): the anatomy described another mask than the loss trained on
    generator = torch.Generator().manual_seed(0)
    scores = torch.randn(8, 8, generator=generator, requires_grad=True)
    repeated = torch.tensor([0, 0, 2, 2, 4, 4, 6, 6])
    with gradlab.Monitor(tmp_path / "repeats", every=1) as monitor:
        watched = monitor.watch(_info_nce, inputs="scores")
        with pytest.warns(RuntimeWarning) as caught:
            watched(scores, repeated).backward()
        monitor.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per watched loss
            watched(scores, repeated.flip(0)).backward()
            monitor.step()
    _, records = read_jsonl(tmp_path / "repeats")
    assert [r["step"] for r in records] == [0, 1]  # logged, as labels
    (warning,) = [w for w in caught if "reads two ways" in str(w.message)]
    assert str(warning.message) == (
        "gradlab.Monitor: the watched loss _info_nce's [B] second argument holds values that "
        "are all columns of the score matrix (0..B-1, some repeated), so it reads two ways: "
        "it is read as labels (a positive where two rows' labels match); if it holds "
        "cross_entropy targets (the column of each row's positive), the anatomy and P describe "
        "another mask than your loss trains on: give the loss a [Q, C] bool mask of the "
        "positives instead (positives = torch.nn.functional.one_hot(targets, C).bool(), its "
        "targets = positives.int().argmax(1) inside the loss), and to say that they are "
        "labels, the mask labels[:, None] == labels[None, :]; later calls are not warned about")
    assert warning.filename == __file__  # the line of the watched call
    adapter = adapters.adapt(_info_nce, "scores")
    with pytest.warns(RuntimeWarning, match="reads two ways"):
        mask = adapter.read([scores, repeated], None, 0.1).positives
    assert torch.equal(mask, _same_label(repeated))
    # one reading only: 0..B-1 in order, a value that is no column, gradlab's own loss, a mask
    unambiguous = [(_info_nce, torch.arange(8)), (_info_nce, repeated + 8),
                   (_info_nce, repeated - 1), (_info_nce, torch.tensor([0, 0, 2, 2, 4, 4, 8, 8])),
                   (gradlab.NTXentLoss(0.1), repeated),
                   (_info_nce, _same_label(repeated))]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for loss_fn, second in unambiguous:
            adapters.adapt(loss_fn, "scores" if loss_fn is _info_nce else None).read(
                [scores, second], None, 0.1)  # fmt: skip


def test_a_cross_modal_call_lists_gradient_agreement_as_not_logged(tmp_path):
    # the full preset's gradient agreement logged no key for queries against candidates, and
    # the header's not_logged did not say why
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(6, 4, generator=generator, requires_grad=True)
    candidates = torch.randn(5, 4, generator=generator, requires_grad=True)
    positives = torch.zeros(6, 5, dtype=torch.bool)
    positives[torch.arange(5), torch.arange(5)] = positives[5, 0] = True
    reason = ("reads in-batch calls only, and the watched loss was called on queries against "
              "candidates=, whose share of the analytic gradient is not read")
    with gradlab.Monitor(tmp_path / "cross", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(TAU))
        loss_fn(queries, candidates=candidates, positives=positives).backward()
        record = monitor.step()
    assert not any(key.startswith("gradient_agreement") for key in record)
    assert monitor.not_logged["gradient_agreement"] == reason
    headers, _ = read_jsonl(tmp_path / "cross")
    assert headers[0]["not_logged"]["gradient_agreement"] == reason
    embeddings, labels = _batch()  # in-batch: logged
    with gradlab.Monitor(tmp_path / "in_batch", preset="full", every=1) as monitor:
        monitor.watch(gradlab.SmoothAPLoss(TAU))(embeddings, labels).backward()
        assert "gradient_agreement_cosine" in monitor.step()
    assert "gradient_agreement" not in monitor.not_logged
