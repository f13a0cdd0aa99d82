"""gradlab.interop.pml: recording distances for pytorch-metric-learning losses."""

import importlib
import math
import sys
import warnings

import pytest
import torch

pml_losses = pytest.importorskip("pytorch_metric_learning.losses")
pml_distances = pytest.importorskip("pytorch_metric_learning.distances")

from gradlab.errors import GradlabError  # noqa: E402
from gradlab.functional import gradient_anatomy, in_batch_layout  # noqa: E402
from gradlab.interop.pml import (  # noqa: E402
    RecordingCosineSimilarity,
    RecordingDotProductSimilarity,
    recording_distance,
    smooth_ap_temperature,
)
from gradlab.monitor import Monitor, every, read_jsonl  # noqa: E402
from gradlab.monitor.anatomy import Anatomy  # noqa: E402

THROUGH_DISTANCE = ["MultiSimilarityLoss", "TripletMarginLoss", "ContrastiveLoss", "NTXentLoss"]
OPTIONS = {"ContrastiveLoss": {"pos_margin": 1, "neg_margin": 0}}  # PML's margins for similarities
ALL = [*THROUGH_DISTANCE, "SmoothAPLoss"]


def _batch(seed=0, size=16):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(size, 5, generator=generator, dtype=torch.float64)
    return embeddings, torch.arange(size) // 4  # four classes of four (SmoothAP's layout)


def _run(loss, embeddings, labels, recorder=None):
    leaf = embeddings.clone().requires_grad_(True)
    if recorder is not None:
        loss.distance.score_recorder = recorder
    value = loss(leaf, labels)
    value.backward()
    return value, leaf.grad


@pytest.mark.parametrize("name", ALL)
def test_recording_distance_changes_neither_loss_nor_gradient(name):
    embeddings, labels = _batch()
    plain = _run(getattr(pml_losses, name)(distance=pml_distances.CosineSimilarity()),
                 embeddings, labels)  # fmt: skip
    seen = []

    def recorder(direction, matrix, positives):
        seen.append(direction)
        matrix.register_hook(lambda g: None)

    recorded = _run(getattr(pml_losses, name)(distance=RecordingCosineSimilarity()),
                    embeddings, labels, recorder)  # fmt: skip
    assert torch.equal(plain[0], recorded[0]) and torch.equal(plain[1], recorded[1])
    assert seen == ["in_batch"]


def _recorded_grad(loss, embeddings, labels):
    grads = {}

    def recorder(direction, matrix, positives):
        matrix.register_hook(lambda g: grads.__setitem__("G", g))

    _, embedding_grad = _run(loss, embeddings, labels, recorder)
    return grads["G"], embedding_grad


@pytest.mark.parametrize("name", THROUGH_DISTANCE)
def test_recorded_cosine_gradient_is_the_whole_score_gradient(name):
    """Chain rule: S = N N^T with N = E / |E|, so dL/dE = (I - n n^T)(G + G^T) N / |E| row by
    row; it equals autograd's dL/dE only if G holds every path from the loss to the scores."""
    embeddings, labels = _batch(1)
    G, embedding_grad = _recorded_grad(
        getattr(pml_losses, name)(distance=RecordingCosineSimilarity()), embeddings, labels
    )
    norms = embeddings.norm(dim=1, keepdim=True)
    unit = embeddings / norms
    d_unit = (G + G.T) @ unit
    rebuilt = (d_unit - (d_unit * unit).sum(dim=1, keepdim=True) * unit) / norms
    torch.testing.assert_close(rebuilt, embedding_grad, rtol=1e-9, atol=1e-12)
    assert G.abs().sum() > 0


@pytest.mark.parametrize("name", ["ContrastiveLoss", "NTXentLoss"])
def test_recorded_dot_product_gradient_is_the_whole_score_gradient(name):
    embeddings, labels = _batch(2)
    distance = RecordingDotProductSimilarity(normalize_embeddings=False)
    G, embedding_grad = _recorded_grad(getattr(pml_losses, name)(distance=distance),
                                       embeddings * 0.3, labels)  # fmt: skip
    torch.testing.assert_close((G + G.T) @ (embeddings * 0.3), embedding_grad,
                               rtol=1e-9, atol=1e-12)  # fmt: skip


class _FixedMatrix(pml_distances.CosineSimilarity):
    """A distance that returns a given leaf matrix: its .grad is dL/dS, with no hook at all."""

    def __init__(self, matrix):
        super().__init__()
        self.matrix = matrix

    def forward(self, query_emb, ref_emb=None):
        return self.matrix


@pytest.mark.parametrize("name", THROUGH_DISTANCE)
def test_monitor_logs_the_anatomy_of_a_pml_loss(tmp_path, name):
    embeddings, labels = _batch(3)
    layout = in_batch_layout(embeddings, labels)
    leaf = layout.scores.clone().requires_grad_(True)
    options = OPTIONS.get(name, {})
    getattr(pml_losses, name)(distance=_FixedMatrix(leaf), **options)(embeddings, labels).backward()
    expected = gradient_anatomy(leaf.grad, leaf.detach(), layout.positives,
                                candidate_mask=layout.candidate_mask)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss = getattr(pml_losses, name)(distance=RecordingCosineSimilarity(), **options)
        loss_fn = monitor.watch(loss)
        loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
        record = monitor.step()
    assert record["anatomy_active_negatives_mean"] == pytest.approx(
        expected.active_negatives.double().mean().item()
    )
    assert record["anatomy_hardest_10pct_share"] == pytest.approx(
        expected.hardest_10pct_share.nanmean().item()
    )
    assert expected.active_negatives.sum() > 0  # the comparison is not between two zeros


def test_the_last_step_logged_at_close_does_not_say_its_loss_scored_nothing(tmp_path):
    # close() logs the last step, off the schedule, from its call's arguments without the
    # gradients: its loss scored its pairs when it was called, and no warning says otherwise
    loss = pml_losses.MultiSimilarityLoss(distance=RecordingCosineSimilarity())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with Monitor(tmp_path / "run", preset="full", every=2) as monitor:
            loss_fn = monitor.watch(loss)
            for seed in range(2):  # steps 0 (logged) and 1 (logged at close)
                embeddings, labels = _batch(seed)
                loss_fn(embeddings.requires_grad_(True), labels).backward()
                monitor.step()
    records = [record for record in read_jsonl(tmp_path / "run" / "metrics.jsonl")[1]]
    assert [record["step"] for record in records] == [0, 1]
    assert "anatomy_active_negatives_mean" in records[0]
    assert "anatomy_active_negatives_mean" not in records[1]  # no gradient at close


def test_a_batch_scored_against_another_set_logs_no_anatomy_and_says_so(tmp_path):
    """The batch's labels [0, 0, 1, 1] against references labelled [1, 1, 0, 0]: the matrix is
    square, but row i's positives are the references of its label, not the batch's: no
    in-batch matrix. (A proxy loss, which never scores the batch against itself, is told at
    watch(): test_a_loss_that_never_scores_the_batch_against_itself_says_so.)"""
    embeddings, _ = _batch(size=4)
    labels = torch.tensor([0, 0, 1, 1])
    loss = pml_losses.NTXentLoss(distance=RecordingCosineSimilarity())
    extra = {"ref_emb": _batch(seed=1, size=4)[0], "ref_labels": torch.tensor([1, 1, 0, 0])}
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(loss)
        for step in range(2):
            leaf = embeddings.clone().requires_grad_(True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                loss_fn(leaf, labels, **extra).backward()  # the warning names this line
            record = monitor.step()
            assert not [key for key in record if key.startswith("anatomy_")]
            if step == 0:
                assert len(caught) == 1 and caught[0].filename == __file__
                assert caught[0].category is RuntimeWarning
                assert str(caught[0].message) == (
                    "gradlab.Monitor: the watched loss NTXentLoss scored the batch against "
                    "another set (a [4, 4] matrix: ref_emb, proxies or a memory), not against "
                    "itself; the anatomy reads the in-batch matrix only, so it is not logged for "
                    "such calls (later ones are not warned about)")
            else:
                assert not caught  # once


NOT_SCORED = (
    "gradlab.Monitor: the watched loss {name} computed no score matrix on a logged call (a "
    "pytorch-metric-learning loss returns 0 without calling its distance when its miner finds "
    "no pair, and a few compute their similarities themselves): when no gradient reaches the "
    "embeddings, no pair received gradient through the scores and the anatomy logs such a call "
    "so (no active negative, every query without gradient); when one does, the loss scored its "
    "pairs without its distance and the step logs no anatomy (later ones are not warned about)")


def test_a_loss_that_scores_its_pairs_without_its_distance_logs_no_anatomy(tmp_path):
    # ThresholdConsistentMarginLoss takes a CosineSimilarity but computes F.cosine_similarity
    # itself: its non-zero gradient was logged as no pair receiving any (every query without)
    embeddings, labels = _batch(size=24)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(pml_losses.ThresholdConsistentMarginLoss(
            distance=RecordingCosineSimilarity()))  # fmt: skip
        leaf = embeddings.clone().requires_grad_(True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loss_fn(leaf, labels).backward()
        record = monitor.step()
    assert leaf.grad.abs().sum() > 0  # the loss does send gradient to the embeddings
    assert record is None or not [key for key in record if key.startswith("anatomy_")]
    assert [str(w.message) for w in caught] == [
        NOT_SCORED.format(name="ThresholdConsistentMarginLoss")]


def test_a_call_that_scores_nothing_logs_the_anatomy_of_no_gradient_and_says_so(tmp_path):
    """A miner that finds no pair: pytorch-metric-learning returns 0 without calling its
    distance. The step's anatomy keys went missing (with no word at first, then with a
    warning): a gap in the figures where the truth, no pair receiving gradient, is what a user
    wants to see. They read so now: no active negative, every query without gradient."""
    embeddings, labels = _batch(size=8)
    nothing = tuple(torch.empty(0, dtype=torch.long) for _ in range(4))  # no mined pair
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss = pml_losses.MultiSimilarityLoss(distance=RecordingCosineSimilarity())
        loss_fn = monitor.watch(loss)
        records, messages, categories = [], [], []
        for step in range(4):
            leaf = embeddings.clone().requires_grad_(True)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = loss_fn(leaf, labels, nothing) if step in (1, 2) else loss_fn(leaf, labels)
            (value + 0 * leaf.sum()).backward()  # a zero loss without a graph to the leaf
            records.append(monitor.step())
            messages += [(step, w.filename, str(w.message)) for w in caught]
            categories += [w.category for w in caught]
    for step in (1, 2):
        assert records[step]["anatomy_active_negatives_mean"] == 0.0
        assert records[step]["anatomy_active_positives"] == 0.0
        assert records[step]["anatomy_queries_without_gradient"] == 1.0
    for step in (0, 3):  # the steps around it: the loss's own anatomy
        assert records[step]["anatomy_active_negatives_mean"] > 0.0
        assert records[step]["anatomy_queries_without_gradient"] < 1.0
    assert categories == [RuntimeWarning]
    assert messages == [(1, __file__,
                         NOT_SCORED.format(name="MultiSimilarityLoss"))]


def test_a_loss_whose_pairs_all_lie_in_its_margin_logs_the_anatomy_of_no_gradient(tmp_path):
    """ContrastiveLoss with every pair inside its margins scores the batch, then returns a zero
    of the embeddings: backward never reaches the score matrix, and the anatomy keys went
    missing without a word. dL/dS is 0 there: every query without gradient."""
    labels = torch.arange(4).repeat_interleave(3)
    generator = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 8, generator=generator)
    tight = centres[labels] + 0.01 * torch.randn(12, 8, generator=generator)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(pml_losses.ContrastiveLoss(distance=RecordingCosineSimilarity(),
                                                           pos_margin=0.9, neg_margin=0.999))
        leaf = tight.requires_grad_(True)
        value = loss_fn(leaf, labels)
        value.backward()
        record = monitor.step()
    assert float(value) == 0.0 and torch.count_nonzero(leaf.grad) == 0
    assert record["anatomy_active_negatives_mean"] == 0.0
    assert record["anatomy_queries_without_gradient"] == 1.0


def test_cross_batch_memory_says_why_its_recording_inner_loss_gives_no_anatomy(tmp_path):
    """Its inner loss has the recording distance the advice used to ask for."""
    inner = pml_losses.NTXentLoss(distance=RecordingCosineSimilarity())
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(pml_losses.CrossBatchMemory(inner, 5, memory_size=8))
    assert monitor.not_logged["anatomy"] == (
        "needs dL/dS of the loss's score matrix; the watched loss CrossBatchMemory scores the "
        "batch against its memory through its inner loss NTXentLoss, and the anatomy reads only "
        "a batch scored against itself")  # no advice to add the distance it has


ADVICE = ("needs dL/dS of the loss's score matrix; the watched loss {name} takes embeddings and "
          "exposes no score matrix. Watch a loss written on a score matrix with inputs='scores', "
          "use gradlab's losses, or give a pytorch-metric-learning loss "
          "distance=gradlab.interop.pml.RecordingCosineSimilarity(){more}")
"""What not_logged["anatomy"] says of a PML loss without a recording distance."""


@pytest.mark.parametrize(("name", "more"), [
    # no inner loss: the advice names the distance to add (not a memory it does not have)
    ("NTXentLoss", ""),
    # swapped in for TripletMarginLoss's LpDistance, a similarity trains another loss, whose
    # margins are for distances: the advice named the recording similarity alone
    ("TripletMarginLoss", " (its LpDistance is a distance: with a similarity the loss's margins "
                          "must be set anew, e.g. ContrastiveLoss(pos_margin=1, neg_margin=0, "
                          "distance=RecordingCosineSimilarity()))"),
])  # fmt: skip
def test_a_loss_without_the_recording_distance_is_advised_to_take_it(tmp_path, name, more):
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(getattr(pml_losses, name)())
    assert monitor.not_logged["anatomy"] == ADVICE.format(name=name, more=more)


NEVER_IN_BATCH = "needs dL/dS of the loss's score matrix; the watched loss {name} {why}"
"""What not_logged["anatomy"] says of a PML loss that never scores the batch against itself."""


@pytest.mark.parametrize(("make", "why"), [
    # the advice to give them RecordingCosineSimilarity() led to a warning that they score the
    # batch against another set, and still no anatomy
    (lambda: pml_losses.ProxyAnchorLoss(4, 8),
     "scores the batch against its class weights (proxies), not against itself, and the "
     "anatomy reads only a batch scored against itself"),
    (lambda: pml_losses.ProxyAnchorLoss(4, 8, distance=RecordingCosineSimilarity()),
     "scores the batch against its class weights (proxies), not against itself, and the "
     "anatomy reads only a batch scored against itself"),
    (lambda: pml_losses.ArcFaceLoss(4, 8, distance=RecordingCosineSimilarity()),
     "scores the batch against its class weights (proxies), not against itself, and the "
     "anatomy reads only a batch scored against itself"),
    (lambda: pml_losses.NPairsLoss(),
     "scores the anchors of its pairs against their positives, not the batch against itself, "
     "and the anatomy reads only a batch scored against itself"),
    (lambda: pml_losses.CrossBatchMemory(pml_losses.ContrastiveLoss(), 8, memory_size=32),
     "scores the batch against its memory through its inner loss ContrastiveLoss, and the "
     "anatomy reads only a batch scored against itself"),
    (lambda: pml_losses.MultipleLosses([pml_losses.TripletMarginLoss(
        distance=RecordingCosineSimilarity()), pml_losses.ContrastiveLoss()]),
     "sums the losses it holds, and the anatomy reads the score matrix of one loss: watch an "
     "in-batch loss on its own, given distance=gradlab.interop.pml.RecordingCosineSimilarity()"),
])  # fmt: skip
def test_a_loss_that_never_scores_the_batch_against_itself_says_so(tmp_path, make, why):
    loss = make()
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(loss)
    assert monitor.not_logged["anatomy"] == NEVER_IN_BATCH.format(name=type(loss).__name__,
                                                                  why=why)  # fmt: skip


def test_the_integrations_pages_advice_for_lp_distance_logs_what_it_says(tmp_path):
    """docs/integrations.md: TripletMarginLoss and ContrastiveLoss on their default LpDistance
    log no anatomy but the embeddings' quantities; its recording-similarity ContrastiveLoss
    (margins set for similarities) logs the anatomy, with negatives that get a gradient."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "integrations.md").read_text()
    (advised,) = re.findall(r"`(losses\.ContrastiveLoss\([^`]*RecordingCosineSimilarity\(\)\))`",
                            page)  # fmt: skip
    embeddings, labels = _batch(5)
    for name in ("TripletMarginLoss", "ContrastiveLoss"):
        loss = getattr(pml_losses, name)()
        assert isinstance(loss.distance, pml_distances.LpDistance)
        with Monitor(tmp_path / name, preset="full", every=1) as monitor:
            loss_fn = monitor.watch(loss)
            loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
            record = monitor.step()
        assert "anatomy" in monitor.not_logged and not any(k.startswith("anatomy_") for k in record)
        assert {"loss", "p_seed", "margin_mean", "embedding_grad_norm"} <= set(record)
    namespace = {"losses": pml_losses, "RecordingCosineSimilarity": RecordingCosineSimilarity}
    with Monitor(tmp_path / "advised", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(eval(advised, namespace))
        loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
        record = monitor.step()
    assert record["anatomy_active_negatives_mean"] > 0.0


def test_without_pytorch_metric_learning_the_import_names_the_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "pytorch_metric_learning.distances", None)
    monkeypatch.delitem(sys.modules, "gradlab.interop.pml")
    with pytest.raises(GradlabError, match=r"pytorch_metric_learning.*gradlab-ranking\[pml\]"):
        importlib.import_module("gradlab.interop.pml")
    monkeypatch.undo()
    importlib.import_module("gradlab.interop.pml")


def test_pml_smooth_ap_gets_an_anatomy_of_its_negatives(tmp_path):
    """PML's SmoothAP: the recorded matrix carries every negative's full gradient (its positive
    terms also flow through compute_mat, outside the matrix; see the module docstring)."""
    embeddings, labels = _batch(4)
    layout = in_batch_layout(embeddings, labels, include_query=True)
    leaf = layout.scores.clone().requires_grad_(True)
    pml_losses.SmoothAPLoss(distance=_FixedMatrix(leaf))(embeddings, labels).backward()
    negatives = ~layout.positives
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(pml_losses.SmoothAPLoss(distance=RecordingCosineSimilarity()))
        loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
        captured = monitor._pending.score_captures[0].grad
        monitor.step()
    # _FixedMatrix also bypasses compute_mat's positives, so only the negatives must agree.
    torch.testing.assert_close(captured[negatives], leaf.grad[negatives], rtol=1e-9, atol=1e-15)
    assert captured[negatives].abs().sum() > 0


def test_default_contrastive_margins_give_no_negative_gradient_with_cosine(tmp_path):
    """README finding: PML's ContrastiveLoss margins default to distances (pos 0, neg 1); with a
    similarity, a negative is penalised only above 1, which cosine never reaches."""
    embeddings, labels = _batch(5)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(pml_losses.ContrastiveLoss(distance=RecordingCosineSimilarity()))
        loss_fn(embeddings.clone().requires_grad_(True), labels).backward()
        record = monitor.step()
    assert record["anatomy_active_negatives_mean"] == 0.0
    assert record["anatomy_active_positives"] >= 0.0


# --- bad input: GradlabError naming the argument (PML raised ValueError/RuntimeError/nothing) --

DISTANCES = [RecordingCosineSimilarity, RecordingDotProductSimilarity]
BAD_CALLS = [
    ((torch.randn(5),), "query_emb must be 2-D; got shape \\(5,\\)"),
    ((torch.randn(4, 3), torch.randn(5, 2)), "share their embedding size; got 3 and 2"),
    ((torch.randn(4, 3), torch.randn(5)), "ref_emb must be 2-D"),
    ((torch.ones(4, 3, dtype=torch.long),), "query_emb must have a floating dtype"),
    ((torch.randn(4, 3), torch.ones(4, 3, dtype=torch.long)), "ref_emb must have a floating"),
    ((torch.randn(4, 3), torch.randn(4, 3, dtype=torch.float64)), "share one dtype"),
    (([[1.0, 2.0]],), "query_emb must be a torch.Tensor"),
    ((torch.full((4, 3), float("nan")),), "query_emb must be finite"),
    ((torch.randn(4, 3), torch.tensor([[0.0, float("inf"), 0.0]])), "ref_emb must be finite"),
    (
        (torch.randn(4, 3), torch.randn(4, 3, device="meta")),
        "one device; got query_emb on cpu, ref_emb on meta",
    ),
]


@pytest.mark.parametrize("cls", DISTANCES)
@pytest.mark.parametrize(("args", "message"), BAD_CALLS)
def test_bad_input_raises_gradlab_error_naming_the_argument(cls, args, message):
    with pytest.raises(GradlabError, match=message):
        cls()(*args)


@pytest.mark.parametrize("cls", DISTANCES)
@pytest.mark.parametrize("recorder", [5, "record", [print]])
def test_a_non_callable_score_recorder_is_refused_when_set(cls, recorder):
    distance = cls()
    with pytest.raises(GradlabError, match="score_recorder must be None or a callable"):
        distance.score_recorder = recorder
    assert distance.score_recorder is None
    distance.score_recorder = print  # a callable, and None, are accepted
    distance.score_recorder = None


@pytest.mark.parametrize("value", [True, False, "yes"])
def test_the_cosine_distance_refuses_normalize_embeddings_by_name(value):
    # pytorch-metric-learning's own TypeError: "got multiple values for keyword argument"
    with pytest.raises(GradlabError) as raised:
        RecordingCosineSimilarity(normalize_embeddings=value)
    assert str(raised.value) == (
        "RecordingCosineSimilarity always normalizes the embeddings (as PML's CosineSimilarity "
        f"does); got normalize_embeddings={value!r}: for raw dot products use "
        "RecordingDotProductSimilarity(normalize_embeddings=False)")
    assert RecordingCosineSimilarity(validate=False).normalize_embeddings


@pytest.mark.parametrize("cls", DISTANCES)
def test_validate_false_skips_only_the_finiteness_check(cls):
    matrix = cls(validate=False)(torch.full((2, 3), float("nan")))
    assert matrix.shape == (2, 2) and torch.isnan(matrix).all()
    with pytest.raises(GradlabError, match="validate must be True or False"):
        cls(validate=1)
    with pytest.raises(GradlabError, match="query_emb must be 2-D"):
        cls(validate=False)(torch.randn(5))


# --- what a Monitor reads: the direction and the matrix of each call, and which losses record --


def _cosine_reference(query, ref):
    """Cosine similarities by a float64 loop over pairs."""
    out = torch.empty(len(query), len(ref), dtype=torch.float64)
    for i, q in enumerate(query.tolist()):
        for j, r in enumerate(ref.tolist()):
            dot = sum(a * b for a, b in zip(q, r, strict=True))
            out[i, j] = dot / (sum(a * a for a in q) ** 0.5 * sum(b * b for b in r) ** 0.5)
    return out


@pytest.mark.parametrize("cls", DISTANCES)
def test_a_query_against_other_references_is_recorded_as_i2t_and_the_batch_as_in_batch(cls):
    query, ref = torch.randn(3, 4, dtype=torch.float64), torch.randn(5, 4, dtype=torch.float64)
    seen = []
    distance = cls()
    distance.score_recorder = lambda direction, matrix, mask: seen.append((direction, matrix, mask))
    returned = distance(query, ref)
    distance(query)
    distance(query, query)  # PML passes the batch twice
    assert [direction for direction, _, _ in seen] == ["i2t", "in_batch", "in_batch"]
    assert seen[0][1] is returned and seen[0][2] is None
    torch.testing.assert_close(returned, _cosine_reference(query, ref))  # both normalise


@pytest.mark.parametrize(
    ("cls", "pml_cls"),
    [
        (RecordingCosineSimilarity, pml_distances.CosineSimilarity),
        (RecordingDotProductSimilarity, pml_distances.DotProductSimilarity),
    ],
)
def test_constructor_arguments_reach_pml_as_pml_takes_them(cls, pml_cls):
    embeddings = torch.tensor([[3.0, 4.0], [1.0, 0.0]], dtype=torch.float64)
    options = {"power": 2}  # the matrix squared, in both
    torch.testing.assert_close(cls(**options)(embeddings), pml_cls(**options)(embeddings))
    with pytest.raises(TypeError) as pml_error:  # PML's distances take keywords only
        pml_cls(False)
    with pytest.raises(TypeError) as ours:
        cls(False)
    assert "positional argument" in str(ours.value) and "positional argument" in str(
        pml_error.value
    )


def test_recording_distance_finds_only_a_recording_distance():
    recording = RecordingCosineSimilarity()
    assert recording_distance(pml_losses.TripletMarginLoss(distance=recording)) is recording
    plain = pml_losses.TripletMarginLoss(distance=pml_distances.CosineSimilarity())
    assert recording_distance(plain) is None
    assert recording_distance(pml_losses.NTXentLoss()) is None
    assert recording_distance(torch.nn.MSELoss()) is None  # no distance at all


def test_smooth_ap_temperature_reads_the_temperature_the_loss_was_built_with():
    assert smooth_ap_temperature(pml_losses.SmoothAPLoss(temperature=0.05)) == 0.05
    assert smooth_ap_temperature(pml_losses.SmoothAPLoss(temperature=0.25)) == 0.25
    assert smooth_ap_temperature(pml_losses.NTXentLoss(temperature=0.05)) is None


def test_self_supervised_loss_is_refused_at_watch_with_the_same_loss_in_a_readable_form(
    tmp_path,
):
    # it was watched, logged nothing, and its reasons spoke of a memory it does not have
    inner = pml_losses.NTXentLoss(distance=RecordingCosineSimilarity())
    from gradlab.monitor.quantities import Loss

    with Monitor(tmp_path / "run", quantities=[Loss(every(1)), Anatomy(every(1))]) as monitor:
        with pytest.raises(GradlabError) as caught:
            monitor.watch(pml_losses.SelfSupervisedLoss(inner))
        assert str(caught.value) == (
            "gradlab.Monitor does not read pytorch-metric-learning's SelfSupervisedLoss: it "
            "is called with two views, loss(embeddings, ref_emb), not with labels. With "
            "symmetric=True (its default) it is its inner loss on the two views stacked, the "
            "two views of an item one class: watch the inner loss and call it so, the same "
            "loss: loss_fn = monitor.watch(inner_loss); loss_fn(torch.cat([embeddings, "
            "ref_emb]), torch.arange(len(embeddings)).repeat(2)) (symmetric=False scores one "
            "view against the other, which the Monitor does not read)")  # fmt: skip
        generator = torch.Generator().manual_seed(3)
        views = [torch.randn(6, 8, generator=generator) for _ in range(2)]
        loss_fn = monitor.watch(inner)  # the advised form
        stacked = torch.cat(views).requires_grad_(True)
        loss = loss_fn(stacked, torch.arange(len(views[0])).repeat(2))
        loss.backward()
        record = monitor.step()
    expected = pml_losses.SelfSupervisedLoss(pml_losses.NTXentLoss())(*views)
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    assert record["loss"] == pytest.approx(expected.item(), rel=1e-6)
    assert record["anatomy_active_positives"] > 0


def test_nt_xent_agrees_with_pml_at_one_positive_and_keeps_the_other_positives_beyond():
    # docs/losses.md: gradlab's NT-Xent keeps a query's other positives in each positive's
    # denominator (SupCon's L_out); pytorch-metric-learning's leaves them out
    from pytorch_metric_learning.losses import NTXentLoss

    import gradlab.functional as F

    generator = torch.Generator().manual_seed(0)
    embeddings = torch.nn.functional.normalize(
        torch.randn(8, 5, generator=generator, dtype=torch.float64), dim=1)
    own = torch.eye(8, dtype=torch.bool)
    temperature = 0.5

    def both(labels):
        scores = embeddings @ embeddings.T
        positives = (labels[:, None] == labels[None, :]) & ~own
        ours = F.nt_xent_loss(scores.masked_fill(own, -1e4), positives, temperature,
                              direction="i2t")  # fmt: skip
        theirs = NTXentLoss(temperature=temperature)(embeddings, labels)
        logits = (scores / temperature).tolist()
        out, apart = [], []  # float64 loops: with the other positives, and without them
        for i in range(8):
            rows = [j for j in range(8) if positives[i, j]]
            every = [math.exp(logits[i][j]) for j in range(8) if j != i]
            negatives = [math.exp(logits[i][j]) for j in range(8)
                         if j != i and not positives[i, j]]  # fmt: skip
            out.append(sum(-logits[i][p] + math.log(sum(every)) for p in rows) / len(rows))
            apart += [-logits[i][p] + math.log(math.exp(logits[i][p]) + sum(negatives))
                      for p in rows]  # fmt: skip
        return float(ours), float(theirs), sum(out) / len(out), sum(apart) / len(apart)

    one = both(torch.tensor([0, 0, 1, 1, 2, 2, 3, 3]))  # one positive per query
    assert one[0] == pytest.approx(one[1], rel=1e-12) and one[0] == pytest.approx(one[2])
    several = both(torch.tensor([0, 0, 0, 1, 1, 2, 2, 2]))
    assert several[0] == pytest.approx(several[2], rel=1e-12)
    assert several[1] == pytest.approx(several[3], rel=1e-12)
    assert abs(several[0] - several[1]) > 0.01  # the two conventions part


@pytest.mark.parametrize("per_class", [4, 3])  # 3 or 2 positives per query
def test_chance_level_and_temperature_say_when_pml_ntxent_has_several_positives(tmp_path,
                                                                                per_class):
    # PML's NT-Xent takes a softmax per positive over it and the negatives: with four per class
    # its chance level is ln(negatives + 1) = ln 21, not ln 23, and its dL/d log s is not
    # SupCon's closed form; both were logged as if it were, without a word
    from gradlab.monitor.geometry import ChanceLevel, Temperature
    from gradlab.monitor.quantities import Loss

    embeddings = torch.ones(24, 5, dtype=torch.float64)  # collapsed: every score alike
    labels = torch.arange(24) // per_class
    loss = pml_losses.NTXentLoss(temperature=0.1, distance=RecordingCosineSimilarity())
    quantities = [Loss(every(1)), ChanceLevel(every(1)), Temperature(every(1), scale=10.0)]
    with Monitor(tmp_path / "run", quantities=quantities) as monitor:
        loss_fn = monitor.watch(loss)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):  # said once
                leaf = embeddings.clone().requires_grad_(True)
                value = loss_fn(leaf, labels)
                value.backward()
                record = monitor.step()
    negatives = 24 - per_class
    assert value.item() == pytest.approx(math.log(negatives + 1), rel=1e-12)  # the loss itself
    said = [str(w.message) for w in caught if "several positives" in str(w.message)]
    assert sorted(said) == sorted(
        "gradlab.Monitor: a query of this batch has several positives and the watched loss "
        "declares no softmax (gradlab.losses.SoftmaxLogits): " + what + " is InfoNCE's with "
        "the positives' mean over every candidate (SupCon's); a loss whose softmax runs over "
        "each positive and the negatives alone (pytorch-metric-learning's NTXentLoss) has "
        + other + " on such batches"
        for what, other in (("chance_level (ln C)", "another, ln(negatives + 1)"),
                            ("temperature_log_scale_grad", "another dL/d log s")))
    assert record["chance_level"] == pytest.approx(math.log(23))  # as documented: ln C


@pytest.mark.parametrize("name", ["TripletMarginLoss", "ContrastiveLoss", "MultiSimilarityLoss"])
def test_the_chance_level_is_not_logged_for_a_loss_that_is_no_info_nce_mean(tmp_path, name):
    # it logged ln C beside a margin loss, as if the loss sat there when it learned nothing
    from gradlab.monitor import ChanceLevel

    with Monitor(tmp_path / "run", quantities=[ChanceLevel(every(1))]) as monitor:
        monitor.watch(getattr(pml_losses, name)())
    assert monitor.not_logged["chance_level"] == (
        f"does not apply to {name}: it is no mean of InfoNCE terms, so ln C is not its chance "
        "level")


@pytest.mark.parametrize(("name", "class_size"), [("SupConLoss", 3), ("NTXentLoss", 2)])
def test_an_info_nce_loss_that_learned_nothing_sits_at_its_chance_level(tmp_path, name,
                                                                        class_size):
    # every embedding alike: every score alike, the loss ln C with C = B - 1 candidates
    # (NT-Xent's with one positive per item, pairs of views)
    from gradlab.monitor import ChanceLevel

    size = 12
    with Monitor(tmp_path / "run", quantities=[ChanceLevel(every(1))]) as monitor:
        loss_fn = monitor.watch(getattr(pml_losses, name)())
        loss = loss_fn(torch.ones(size, 8, requires_grad=True),
                       torch.arange(size) // class_size)  # fmt: skip
        loss.backward()
        record = monitor.step()
    assert float(loss) == pytest.approx(math.log(size - 1), rel=1e-6)
    assert record["chance_level"] == pytest.approx(math.log(size - 1), rel=1e-12)
    assert record["loss_minus_chance"] == pytest.approx(0.0, abs=1e-6)
