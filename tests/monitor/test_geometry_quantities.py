"""Geometry, margins, chance level and temperature as logged by a Monitor, against float64 loops."""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.losses import SoftmaxLogits
from gradlab.monitor import ChanceLevel, Geometry, Margins, Monitor, Temperature, every
from gradlab.monitor.batch import BatchView
from tests.reference import geometry_loops as loops


def _labelled_batch(seed=0, size=24, dims=6, classes=6):
    generator = torch.Generator().manual_seed(seed)
    centres = torch.randn(classes, dims, generator=generator)
    labels = torch.arange(size) % classes
    embeddings = centres[labels] + 0.8 * torch.randn(size, dims, generator=generator)
    return embeddings, labels


def test_default_preset_logs_geometry_and_margins_that_match_loops(tmp_path):
    embeddings, labels = _labelled_batch()
    with Monitor(tmp_path, preset="default", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        leaf = embeddings.clone().requires_grad_(True)
        loss_fn(leaf, labels).backward()
        record = monitor.step()
    points, same = embeddings.tolist(), (labels[:, None] == labels[None, :]).tolist()
    size = len(points)
    positives = [[same[i][j] and i != j for j in range(size)] for i in range(size)]
    candidates = [[i != j for j in range(size)] for i in range(size)]
    expected = loops.logged_geometry(points, None, positives)
    for key, value in expected.items():
        assert record[key] == pytest.approx(value, rel=1e-5), key
    names = ("margin_positive_score", "margin_hardest_negative", "margin_mean",
             "margin_violation_share", "margin_recall_at_1")  # fmt: skip
    reference = loops.margins(loops.cosines(points, points), positives, candidates)
    assert [record[name] for name in names] == pytest.approx(reference, abs=1e-6)
    assert "geometry_modality_gap" not in record


def test_cross_modal_geometry_and_margins_match_loops():
    generator = torch.Generator().manual_seed(1)
    images = torch.randn(10, 5, generator=generator) + torch.tensor([2.0, 0, 0, 0, 0])
    texts = images + 0.5 * torch.randn(10, 5, generator=generator) - torch.tensor([4.0, 0, 0, 0, 0])
    positives = torch.eye(10, dtype=torch.bool)
    positives[3, 7] = True
    positives[5, 5] = False  # a query without a positive: left out of the margins' means
    view = BatchView(embeddings=images, candidates=texts, positives=positives)
    values = Geometry().compute(view)
    a, b, pos = images.tolist(), texts.tolist(), positives.tolist()
    assert float(values["geometry_modality_gap"]) == pytest.approx(loops.modality_gap(a, b))
    assert float(values["geometry_alignment"]) == pytest.approx(
        loops.alignment(a, b, pos), rel=1e-5
    )
    assert float(values["geometry_uniformity"]) == pytest.approx(loops.uniformity(a), rel=1e-9)
    margins = Margins().compute(view)
    reference = loops.margins(loops.cosines(a, b), pos, [[True] * 10] * 10)
    assert [float(v) for v in margins.values()] == pytest.approx(reference, abs=1e-6)



def test_the_geometry_of_a_score_matrix_is_that_of_the_features_it_compares():
    """A logit matrix watched on its scores with the embeddings it compares (an integration's
    features): every geometry key, the spread included, is the loops' over those embeddings,
    not over the matrix the view holds as its embeddings."""
    from gradlab.functional.layouts import RetrievalLayout

    generator = torch.Generator().manual_seed(6)
    images, texts = torch.randn(8, 5, generator=generator), torch.randn(8, 5, generator=generator)
    positives = torch.eye(8, dtype=torch.bool)
    logits = 20.0 * torch.nn.functional.normalize(images, dim=1) @ torch.nn.functional.normalize(
        texts, dim=1).T  # fmt: skip
    # built as watch(loss, inputs="scores") builds it, the recorded features added
    view = BatchView(embeddings=logits, positives=positives, on_scores=True,
                     features=(images, texts))  # fmt: skip
    view.__dict__["layout"] = RetrievalLayout(logits, positives, None)
    values = Geometry().compute(view)
    expected = loops.logged_geometry(images.tolist(), texts.tolist(), positives.tolist())
    assert set(values) == set(expected)
    for key, value in expected.items():
        # the alignment reads the float32 cosines of the features; the rest float64 copies
        tolerance = 1e-6 if key == "geometry_alignment" else 1e-9
        assert float(values[key]) == pytest.approx(value, rel=tolerance), key


@pytest.mark.parametrize("count", [0, 1, 2])
def test_the_modality_gap_of_few_candidates(count):
    # one candidate is its own centroid; none has no centroid, so no gap (the queries' own
    # geometry is still logged)
    generator = torch.Generator().manual_seed(4)
    images = torch.randn(5, 3, generator=generator)
    texts = torch.randn(count, 3, generator=generator)
    positives = torch.zeros(5, count, dtype=torch.bool)
    positives[:, :1] = True
    values = Geometry().compute(BatchView(embeddings=images, candidates=texts, positives=positives))
    assert float(values["geometry_uniformity"]) == pytest.approx(
        loops.uniformity(images.tolist()), rel=1e-9)  # fmt: skip
    if count == 0:
        assert "geometry_modality_gap" not in values
    else:
        expected = loops.modality_gap(images.tolist(), texts.tolist())
        assert float(values["geometry_modality_gap"]) == pytest.approx(expected, rel=1e-12)

@pytest.mark.parametrize("cross_modal", [False, True])
def test_the_effective_rank_of_float64_embeddings_far_from_one_is_their_ranks(cross_modal):
    # Gram entries of 1e+-400 are not float64 numbers: the rank comes from rescaled points
    points = torch.randn(9, 4, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    expected = loops.effective_rank(points.tolist())
    for scale in (1e-200, 1e200):
        if cross_modal:
            view = BatchView(embeddings=points * scale, candidates=points.flip(0) * scale,
                             positives=torch.eye(9, dtype=torch.bool))  # fmt: skip
        else:
            view = BatchView(embeddings=points * scale, labels=torch.arange(9) % 3)
        values = Geometry().compute(view)
        assert float(values["geometry_effective_rank"]) == pytest.approx(expected[0], rel=1e-9)


def test_collapsed_batch_reads_rank_one_and_no_spread():
    view = BatchView(embeddings=torch.tensor([[0.2, 1.0, -0.5]]).repeat(8, 1),
                     labels=torch.arange(8) % 2)  # fmt: skip
    values = Geometry().compute(view)
    assert float(values["geometry_effective_rank"]) == 1.0
    assert float(values["geometry_std"]) == pytest.approx(0.0, abs=1e-6)
    assert float(values["geometry_alignment"]) == pytest.approx(0.0, abs=1e-6)
    assert float(values["geometry_uniformity"]) == pytest.approx(0.0, abs=1e-6)


def test_chance_level_subtracts_ln_c_per_term():
    size = 9
    view = BatchView(embeddings=torch.ones(size, 3), labels=torch.arange(size) % 3,
                     loss=torch.tensor(math.log(size - 1) + 0.25))  # fmt: skip
    values = ChanceLevel().compute(view)
    assert float(values["loss_minus_chance"]) == pytest.approx(0.25, abs=1e-6)
    cross = BatchView(
        embeddings=torch.eye(4),
        candidates=torch.eye(4),
        positives=torch.eye(4, dtype=torch.bool),
        loss=torch.tensor(2 * math.log(4), dtype=torch.float64),
    )
    assert float(ChanceLevel(terms=2).compute(cross)["loss_minus_chance"]) == pytest.approx(0.0)


@pytest.mark.parametrize(("direction", "terms"), [("both", 2), ("i2t", 1)])
def test_chance_level_takes_the_terms_the_watched_loss_sums(tmp_path, direction, terms):
    """Every candidate scored alike: each direction's InfoNCE term is ln C, and NTXentLoss's
    default sums both, so the loss is at chance however many terms it sums."""
    with Monitor(tmp_path, quantities=[ChanceLevel(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1, direction=direction))
        scores = torch.zeros(4, 4, requires_grad=True)
        loss = loss_fn(scores, torch.eye(4, dtype=torch.bool))
        loss.backward()
        record = monitor.step()
    assert loss.item() == pytest.approx(terms * math.log(4))
    assert record["chance_level"] == pytest.approx(terms * math.log(4))
    assert record["loss_minus_chance"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize(("direction", "level"), [
    ("both", math.log(8) + math.log(6)), ("i2t", math.log(8)), ("t2i", math.log(6))])
def test_each_direction_of_a_non_square_matrix_has_its_own_candidates(tmp_path, direction,
                                                                      level):
    # [6, 8]: an image ranks 8 captions, a caption 6 images; 2 ln 8 was logged for "both"
    with Monitor(tmp_path, quantities=[ChanceLevel(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1, direction=direction))
        scores = torch.zeros(6, 8, requires_grad=True)  # every candidate alike: chance
        loss = loss_fn(scores, torch.eye(6, 8, dtype=torch.bool))
        loss.backward()
        record = monitor.step()
    assert loss.item() == pytest.approx(level)
    assert record["chance_level"] == pytest.approx(level)
    assert record["loss_minus_chance"] == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("make", [lambda: gradlab.MaxViolationTripletLoss(0.2),
                                  lambda: gradlab.SigLIPLoss(),
                                  lambda: gradlab.NTXentLoss(0.1, reduction="sum")])  # fmt: skip
def test_chance_level_is_not_logged_for_a_loss_that_is_no_infonce_mean(tmp_path, make):
    with Monitor(tmp_path, quantities=[ChanceLevel(every(1))]) as monitor:
        loss = make()
        loss_fn = monitor.watch(loss)
        scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
        loss_fn(scores.requires_grad_(), torch.eye(4, dtype=torch.bool)).backward()
        record = monitor.step()
    assert "loss_minus_chance" not in (record or {})
    assert monitor.not_logged["chance_level"] == (
        f"does not apply to {type(loss).__name__}: it is no mean of InfoNCE terms, so ln C "
        "is not its chance level")


def _clip_step(monitor, logit_scale, images, texts, direction):
    loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction=direction))
    unit_images = torch.nn.functional.normalize(images, dim=1)
    unit_texts = torch.nn.functional.normalize(texts, dim=1)
    logits = logit_scale.exp() * unit_images @ unit_texts.T
    loss = loss_fn(logits, torch.eye(images.shape[0], dtype=torch.bool))
    loss.backward()
    return monitor.step()


@pytest.mark.parametrize("direction", ["i2t", "both"])
def test_temperature_closed_form_equals_the_parameter_gradient(tmp_path, direction):
    generator = torch.Generator().manual_seed(2)
    images, texts = torch.randn(12, 8, generator=generator), torch.randn(12, 8, generator=generator)
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(1 / 0.07)))
    quantity = Temperature(every(1), scale=logit_scale, log_scale=True, logits=True,
                           clamp=(0.0, math.log(100.0)), direction=direction)  # fmt: skip
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        record = _clip_step(monitor, logit_scale, images, texts, direction)
    # NTXentLoss says it sums the two directions: the closed form is their sum too
    assert record["temperature_log_scale_grad"] == pytest.approx(
        record["temperature_log_scale_grad_observed"], rel=1e-4)  # fmt: skip
    scores = loops.cosines(images.tolist(), texts.tolist())
    eye = [[i == j for j in range(12)] for i in range(12)]
    rows = loops.temperature_gradient(scores, eye, 1 / 0.07)
    if direction == "both":
        columns = [list(column) for column in zip(*scores, strict=True)]
        rows = rows + loops.temperature_gradient(columns, eye, 1 / 0.07)
    assert record["temperature_log_scale_grad"] == pytest.approx(rows, rel=1e-4)
    assert record["temperature_scale"] == pytest.approx(1 / 0.07, rel=1e-6)
    assert record["temperature_clamp_hit"] == 0.0


def test_clamp_hit_at_either_bound_and_a_plain_scale():
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]))
    for value, hit in ((math.log(100.0), 1.0), (0.0, 1.0), (2.0, 0.0)):
        quantity = Temperature(scale=lambda value=value: torch.tensor(value), log_scale=True,
                               clamp=(0.0, math.log(100.0)))  # fmt: skip
        assert float(quantity.compute(view)["temperature_clamp_hit"]) == hit
    values = Temperature(scale=20.0).compute(view)  # sentence-transformers' fixed scale
    assert float(values["temperature_scale"]) == 20.0
    assert "temperature_log_scale_grad_observed" not in values
    scores = loops.cosines(torch.eye(3).tolist(), torch.eye(3).tolist())
    positives = [[False, True, False], [True, False, False], [False, False, False]]
    candidates = [[i != j for j in range(3)] for i in range(3)]
    expected = loops.temperature_gradient(scores, positives, 20.0, candidates)
    assert float(values["temperature_log_scale_grad"]) == pytest.approx(expected)
    default = Temperature().compute(view)  # no scale: 1 / the Monitor's tau
    assert float(default["temperature_scale"]) == pytest.approx(1 / view.tau)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: Temperature(scale="20"), "scale must be a number, a tensor or a callable"),
    (lambda: Temperature(scale=True), "scale must be a number, a tensor or a callable"),
    (lambda: Temperature(scale=torch.ones(2)), "scale must hold one value"),
    (lambda: Temperature(log_scale=1), "log_scale must be True or False"),
    (lambda: Temperature(logits="yes"), "logits must be True, False or None"),
    (lambda: Temperature(clamp=(5.0, 1.0)), "clamp must be a pair"),
    (lambda: Temperature(clamp=(0.0,)), "clamp must be a pair"),
    (lambda: Temperature(direction="sideways"), "direction must be 'i2t', 't2i', 'both'"),
    (lambda: Temperature(scale=-1.0), r"scale must be a scale s > 0 and finite; got -1.0"),
    (lambda: Temperature(scale=0), r"scale must be a scale s > 0 and finite; got 0"),
    (lambda: Temperature(scale=math.nan), r"scale must be a scale s > 0 and finite; got nan"),
    (lambda: Temperature(scale=math.inf, log_scale=True), "scale must be a finite log s"),
    (lambda: ChanceLevel(terms=0), "terms must be a positive integer"),
])  # fmt: skip
def test_bad_options_are_refused_when_made(make, match):
    with pytest.raises(GradlabError, match=match):
        make()


def test_a_learnable_scale_itself_reads_its_gradient_times_the_scale(tmp_path):
    generator = torch.Generator().manual_seed(3)
    queries, answers = (
        torch.randn(9, 4, generator=generator),
        torch.randn(9, 4, generator=generator),
    )
    scale = torch.nn.Parameter(torch.tensor(20.0))  # s itself, not log s
    with Monitor(tmp_path, quantities=[Temperature(every(1), scale=scale, logits=True,
                                                   direction="i2t")]) as monitor:  # fmt: skip
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
        unit_q = torch.nn.functional.normalize(queries, dim=1)
        unit_a = torch.nn.functional.normalize(answers, dim=1)
        loss_fn(scale * unit_q @ unit_a.T, torch.eye(9, dtype=torch.bool)).backward()
        record = monitor.step()
    expected = float(scale.grad) * 20.0  # dL/dlog s = s dL/ds
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(expected, rel=1e-6)
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-4)


def test_a_cross_modal_batch_defaults_to_both_directions():
    generator = torch.Generator().manual_seed(4)
    images, texts = torch.randn(5, 3, generator=generator), torch.randn(5, 3, generator=generator)
    view = BatchView(embeddings=images, candidates=texts, positives=torch.eye(5, dtype=torch.bool))
    got = float(Temperature(scale=10.0).compute(view)["temperature_log_scale_grad"])
    scores = loops.cosines(images.tolist(), texts.tolist())
    eye = [[i == j for j in range(5)] for i in range(5)]
    columns = [list(column) for column in zip(*scores, strict=True)]
    expected = (loops.temperature_gradient(scores, eye, 10.0)
                + loops.temperature_gradient(columns, eye, 10.0)) / 2  # fmt: skip
    assert got == pytest.approx(expected, rel=1e-6)


def test_schedules_are_kept():
    for quantity in (ChanceLevel(every(3)), Temperature(every(3)), Geometry(every(3)),
                     Margins(every(3))):  # fmt: skip
        assert [quantity.should_compute(step) for step in range(4)] == [True, False, False, True]


def test_values_are_float64_from_float32_inputs():
    """A float32 batch, a float32 learnable scale with its gradient, a float32 loss: every
    logged value is float64, and the clamp is hit exactly on its bound."""
    scale = torch.nn.Parameter(torch.tensor(20.0))
    scale.grad = torch.tensor(0.5)
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]),
                     loss=torch.tensor(0.25))  # fmt: skip
    log_scale = torch.nn.Parameter(torch.tensor(3.0))
    log_scale.grad = torch.tensor(-0.25)
    quantities = [Temperature(scale=scale, clamp=(1.0, 20.0)), Temperature(scale=20.0),
                  Temperature(log_scale=True), ChanceLevel(), Geometry(), Margins(),
                  Temperature(scale=log_scale, log_scale=True)]  # fmt: skip
    for quantity in quantities:
        for key, value in quantity.compute(view).items():
            assert value.dtype == torch.float64, (type(quantity).__name__, key)
    values = quantities[0].compute(view)
    assert float(values["temperature_clamp_hit"]) == 1.0  # s = 20.0 sits on the upper bound
    assert float(values["temperature_log_scale_grad_observed"]) == 0.5 * 20.0
    default = quantities[2].compute(view)  # no scale, log_scale: still s = 1 / tau
    assert float(default["temperature_scale"]) == pytest.approx(1 / view.tau)
    chance = quantities[3].compute(view)  # in-batch: C = 2 candidates
    assert float(chance["chance_level"]) == math.log(2)
    assert float(chance["loss_minus_chance"]) == pytest.approx(0.25 - math.log(2))


def test_one_candidate_has_chance_level_zero():
    view = BatchView(embeddings=torch.eye(2), labels=torch.tensor([0, 0]), loss=torch.tensor(0.3))
    values = ChanceLevel().compute(view)  # in-batch, 2 items: 1 candidate per query
    assert float(values["chance_level"]) == 0.0
    assert float(values["loss_minus_chance"]) == pytest.approx(0.3)


@pytest.mark.parametrize("points", [torch.eye(2), torch.tensor([[1.0], [-1.0], [2.0]])])
def test_small_batches_still_log_the_uniformity(points):
    """Two points, or one dimension: the uniformity is defined (N >= 2) and logged."""
    labels = torch.arange(len(points)) % 2
    values = Geometry().compute(BatchView(embeddings=points, labels=labels))
    assert float(values["geometry_uniformity"]) == pytest.approx(loops.uniformity(points.tolist()))


@pytest.mark.parametrize(("make", "message"), [
    (lambda: ChanceLevel(terms=1.5),
     "terms must be a positive integer (InfoNCE terms the loss sums, 1 or 2) or None (the "
     "loss's own); got 1.5"),
    (lambda: Temperature(scale="20"),
     "scale must be a number, a tensor or a callable returning one; got str"),
    (lambda: Temperature(clamp=(1.0, 1.0)),
     "clamp must be a pair (low, high) of numbers with low < high; got (1.0, 1.0)"),
    (lambda: Temperature(clamp=(0, True)),
     "clamp must be a pair (low, high) of numbers with low < high; got (0, True)"),
])  # fmt: skip
def test_bad_options_word_for_word(make, message):
    with pytest.raises(GradlabError) as caught:
        make()
    assert str(caught.value) == message


def test_every_direction_is_accepted():
    view = BatchView(embeddings=torch.eye(3), candidates=torch.eye(3),
                     positives=torch.eye(3, dtype=torch.bool))  # fmt: skip
    for direction in ("i2t", "t2i", "both"):
        assert "temperature_log_scale_grad" in Temperature(direction=direction).compute(view)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_scale_is_the_one_the_loss_used_not_the_optimizers_next(tmp_path, dtype):
    # The documented loop: loss, backward, optimizer.step(), then monitor.step(). The logged
    # scale and its closed form belong to the call, before the update moved the parameter.
    generator = torch.Generator().manual_seed(5)
    queries = torch.randn(9, 4, generator=generator, dtype=dtype)
    answers = torch.randn(9, 4, generator=generator, dtype=dtype)
    scale = torch.nn.Parameter(torch.tensor(20.0, dtype=dtype))
    optimizer = torch.optim.SGD([scale], lr=50.0)  # a visible move of the scale
    with Monitor(tmp_path, quantities=[Temperature(every(1), scale=scale, logits=True,
                                                   direction="i2t")]) as monitor:  # fmt: skip
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
        unit_q = torch.nn.functional.normalize(queries, dim=1)
        unit_a = torch.nn.functional.normalize(answers, dim=1)
        loss_fn(scale * unit_q @ unit_a.T, torch.eye(9, dtype=torch.bool)).backward()
        observed = float(scale.grad) * 20.0  # dL/dlog s at the scale the loss used
        optimizer.step()
        assert abs(float(scale) - 20.0) > 1e-3  # the optimizer moved it
        record = monitor.step()
    assert record["temperature_scale"] == pytest.approx(20.0, rel=1e-12)
    cosines = loops.cosines(queries.tolist(), answers.tolist())
    eye = [[i == j for j in range(9)] for i in range(9)]
    expected = loops.temperature_gradient(cosines, eye, 20.0)
    tolerance = 1e-9 if dtype == torch.float64 else 1e-4
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=tolerance)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(observed, rel=1e-6)


def test_a_negative_log_scale_is_a_scale_below_one():
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]))
    values = Temperature(scale=-1.0, log_scale=True).compute(view)
    assert float(values["temperature_scale"]) == pytest.approx(math.exp(-1.0))


def _score_run(tmp_path, loss, quantity, scale=1.0, size=6):
    generator = torch.Generator().manual_seed(5)
    queries, answers = (torch.nn.functional.normalize(torch.randn(size, 4, generator=generator),
                        dim=1) for _ in range(2))  # fmt: skip
    scores = scale * queries @ answers.T
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(loss)
        loss_fn(scores.requires_grad_(), torch.eye(size, dtype=torch.bool)).backward()
        record = monitor.step()
    return record, scores.detach().double().tolist()


def test_without_a_scale_the_watched_losses_own_softmax_scale_is_read(tmp_path):
    # NT-Xent at temperature 0.1 has logits 10 S: not 1 / the Monitor's tau (100)
    record, scores = _score_run(tmp_path, gradlab.NTXentLoss(0.1, direction="i2t"),
                                Temperature(every(1)))  # fmt: skip
    assert record["temperature_scale"] == pytest.approx(10.0)
    eye = [[i == j for j in range(6)] for i in range(6)]
    expected = loops.temperature_gradient(scores, eye, 10.0)  # rows, the loss's direction
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-6)


def test_a_loss_that_is_no_softmax_logs_no_closed_form(tmp_path):
    # SigLIP's sigmoid of each pair, VSE++'s triplet, NT-Xent summed over the queries: the
    # softmax-expected logit minus the positive one is not their dL/d log s
    scale = torch.nn.Parameter(torch.tensor(2.0))
    for index, loss in enumerate((gradlab.SigLIPLoss(), gradlab.MaxViolationTripletLoss(),
                                  gradlab.NTXentLoss(1.0, reduction="sum"))):  # fmt: skip
        record, _ = _score_run(tmp_path / str(index), loss,
                               Temperature(every(1), scale=scale, log_scale=True))
        assert "temperature_log_scale_grad" not in record, loss
        assert record["temperature_scale"] == pytest.approx(math.exp(2.0))
    record, _ = _score_run(tmp_path / "mean", gradlab.NTXentLoss(1.0),
                           Temperature(every(1), scale=scale, log_scale=True))
    assert "temperature_log_scale_grad" in record


def test_a_triplet_loss_without_a_scale_logs_no_scale_and_says_why(tmp_path):
    # VSE++'s hinge on cosine scores holds no scale: 1 / the Monitor's tau (100) is no value
    # of it, so Temperature() logs nothing and the header says why
    with Monitor(tmp_path / "none", quantities=[Temperature(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.MaxViolationTripletLoss(0.2))
        scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
        loss_fn(scores.requires_grad_(), torch.eye(4, dtype=torch.bool)).backward()
        record = monitor.step()
    assert not any(key.startswith("temperature") for key in record or {})
    assert monitor.not_logged["temperature"] == (
        "has no scale to log for MaxViolationTripletLoss: it is no softmax and holds no scale "
        "(1 / the Monitor's tau is no scale of it); give Temperature(scale=...) a parameter of "
        "the loss to follow it")  # fmt: skip
    # a scale given to follow (a parameter of the user's) is logged as before
    record, _ = _score_run(tmp_path / "given", gradlab.MaxViolationTripletLoss(0.2),
                           Temperature(every(1), scale=20.0))  # fmt: skip
    assert record["temperature_scale"] == 20.0


def test_a_loss_that_declares_nothing_still_reads_one_over_tau(tmp_path):
    # a loss of one's own says nothing of a softmax: the fallback 1 / tau stays, nothing is
    # left out (gradlab's AP losses say they are none: test_temperature_warnings.py)
    embeddings = torch.randn(6, 4, generator=torch.Generator().manual_seed(1))
    with Monitor(tmp_path, tau=0.05, quantities=[Temperature(every(1))]) as monitor:
        loss_fn = monitor.watch(lambda embeddings, labels: embeddings.square().mean())
        loss_fn(embeddings.requires_grad_(), torch.arange(6) % 2).backward()
        record = monitor.step()
    assert monitor.not_logged == {}
    assert record["temperature_scale"] == pytest.approx(20.0, rel=1e-12)


@pytest.mark.parametrize("terms", [1, 2, 3])
def test_chance_level_takes_any_positive_number_of_terms(terms):
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]),
                     loss=torch.tensor(0.0))  # fmt: skip
    values = ChanceLevel(terms=terms).compute(view)
    assert float(values["chance_level"]) == pytest.approx(terms * math.log(2.0), rel=1e-15)


def test_a_step_of_a_scale_free_loss_logs_no_scale():
    # read by hand, a view whose loss says it is no softmax and holds no scale: no 1 / tau

    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]), tau=0.01,
                     softmax=SoftmaxLogits(None, "i2t", info_nce=False))  # fmt: skip
    assert Temperature().compute(view) == {}
    values = Temperature(scale=5.0).compute(view)
    assert float(values["temperature_scale"]) == 5.0


def test_siglip_s_scale_is_its_own_not_one_over_tau(tmp_path):
    # SigLIP's logits are t S + b: without a scale, Temperature reads t (here 4), not 1 / tau
    record, _ = _score_run(tmp_path, gradlab.SigLIPLoss(scale=4.0, bias=-1.0),
                           Temperature(every(1)))  # fmt: skip
    assert record["temperature_scale"] == 4.0
    assert "temperature_log_scale_grad" not in record


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_the_clamp_is_hit_as_the_parameters_dtype_holds_its_bound(dtype):
    # clamp_ at ln 100 leaves a bfloat16 parameter at 4.59375, below ln 100 = 4.605...
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]))
    parameter = torch.tensor(10.0, dtype=dtype).clamp_(0.0, math.log(100.0))
    quantity = Temperature(scale=parameter, log_scale=True, clamp=(0.0, math.log(100.0)))
    assert float(quantity.compute(view)["temperature_clamp_hit"]) == 1.0
    below = torch.tensor(4.5, dtype=dtype)
    quantity = Temperature(scale=below, log_scale=True, clamp=(0.0, math.log(100.0)))
    assert float(quantity.compute(view)["temperature_clamp_hit"]) == 0.0


def test_a_scale_below_one_is_a_scale():
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]))
    assert float(Temperature(scale=0.5).compute(view)["temperature_scale"]) == 0.5


def test_the_default_scale_is_one_over_tau_in_float64(tmp_path):
    # a loss that says no scale (SmoothAP): 1 / tau, not its float32 rounding
    view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]), tau=0.03)
    assert float(Temperature().compute(view)["temperature_scale"]) == 1 / 0.03


def test_a_declared_scale_is_read_in_float64(tmp_path):
    # open_clip hands its loss a float32 logit_scale: log s and back lose nothing more

    for number in (1 / 0.07, 33.3):  # exp(log s) in float32 is off by 2e-7 for 33.3
        declared = torch.tensor(number, dtype=torch.float32)
        view = BatchView(embeddings=torch.eye(3), labels=torch.tensor([0, 0, 1]),
                         softmax=SoftmaxLogits(declared, "i2t"))  # fmt: skip
        value = float(Temperature(log_scale=True).compute(view)["temperature_scale"])
        assert value == pytest.approx(float(declared), rel=1e-13)


def test_one_direction_of_a_loss_that_sums_two_is_not_doubled(tmp_path):
    record, scores = _score_run(tmp_path, gradlab.NTXentLoss(1.0),  # both directions, summed
                                Temperature(every(1), scale=3.0, direction="i2t"))
    eye = [[i == j for j in range(6)] for i in range(6)]
    expected = loops.temperature_gradient(scores, eye, 3.0)  # the rows' closed form alone
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-6)


def test_the_observed_gradient_is_the_watched_calls_own_under_accumulation_and_a_weight(
    tmp_path,
):
    # Two micro-batches of one optimizer step, each loss weighted 1/2 and then 3 (a loss
    # weight): scale.grad sums both calls and carries the weights; the logged gradient is the
    # last call's own dL/dlog s, which the closed form of that call's matrix equals.
    generator = torch.Generator().manual_seed(6)
    batches = [(torch.randn(7, 4, generator=generator, dtype=torch.float64),
                torch.randn(7, 4, generator=generator, dtype=torch.float64)) for _ in range(2)]
    log_scale = torch.nn.Parameter(torch.tensor(math.log(12.0), dtype=torch.float64))
    quantity = Temperature(every(1), scale=log_scale, log_scale=True, logits=True,
                           direction="i2t")  # fmt: skip
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
        for queries, answers in batches:
            unit_q = torch.nn.functional.normalize(queries, dim=1)
            unit_a = torch.nn.functional.normalize(answers, dim=1)
            loss = loss_fn(log_scale.exp() * unit_q @ unit_a.T, torch.eye(7, dtype=torch.bool))
            (loss / 2 * 3).backward()
        record = monitor.step()
    last = loops.cosines(*(t.tolist() for t in batches[1]))
    eye = [[i == j for j in range(7)] for i in range(7)]
    expected = loops.temperature_gradient(last, eye, 12.0)
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-9)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(expected, rel=1e-9)
    assert float(log_scale.grad) != pytest.approx(expected, rel=1e-3)  # not scale.grad


def test_the_scale_is_hooked_only_from_a_logged_call_to_its_step(tmp_path):
    # off-schedule steps cost nothing: no hook of the Monitor stays on the parameter
    log_scale = torch.nn.Parameter(torch.tensor(2.0))
    quantity = Temperature(lambda step: step == 0, scale=log_scale, log_scale=True, logits=True)
    with Monitor(tmp_path, quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0))
        for step in range(3):
            scores = log_scale.exp() * torch.eye(4)
            loss = loss_fn(scores, torch.eye(4, dtype=torch.bool))
            assert len(log_scale._backward_hooks or {}) == (1 if step == 0 else 0)
            loss.backward()
            monitor.step()
            assert not log_scale._backward_hooks


def test_a_learnable_scale_is_followed_step_after_step_and_a_pickled_copy_follows_too(tmp_path):
    # each logged step hooks the parameter for its own call's gradient and lets the hook go
    # once read; a pickled copy (as a spawned trainer gets it) holds no hook of the original
    # and follows its own parameter's steps
    import pickle

    generator = torch.Generator().manual_seed(8)
    quantity = Temperature(every(1), scale=torch.nn.Parameter(torch.tensor(math.log(1 / 0.07))),
                           log_scale=True, logits=True, direction="i2t")  # fmt: skip
    for name in ("original", "copy"):
        watched = quantity if name == "original" else pickle.loads(pickle.dumps(quantity))
        logit_scale = watched.scale
        assert (logit_scale is quantity.scale) == (name == "original")
        with Monitor(tmp_path / name, quantities=[watched]) as monitor:
            for _ in range(3):
                images = torch.randn(6, 4, generator=generator)
                texts = torch.randn(6, 4, generator=generator)
                logit_scale.grad = None
                record = _clip_step(monitor, logit_scale, images, texts, "i2t")
                observed = float(logit_scale.grad)  # the parameter is log s: dL/d log s
                assert record["temperature_log_scale_grad_observed"] == pytest.approx(
                    observed, rel=1e-6)  # fmt: skip
                assert record["temperature_log_scale_grad"] == pytest.approx(
                    observed, rel=1e-4)  # fmt: skip


def test_an_in_batch_loss_over_both_directions_has_b_minus_1_candidates_each_way():
    # in-batch, a query is not its own candidate in either direction: 2 ln(B - 1)
    size = 9
    view = BatchView(embeddings=torch.ones(size, 3), labels=torch.arange(size) % 3,
                     loss=torch.tensor(2 * math.log(size - 1)))  # fmt: skip
    view.softmax = SoftmaxLogits(direction="both", terms=2)
    values = ChanceLevel().compute(view)
    assert float(values["chance_level"]) == pytest.approx(2 * math.log(size - 1))


@pytest.mark.parametrize(("declared", "told", "expected"), [
    # sentence-transformers' symmetric MNRL: a scale declared, the directions from the recording
    (SoftmaxLogits(20.0), "both", (math.log(8) + math.log(4)) / 2),
    (None, "both", (math.log(8) + math.log(4)) / 2),
    (SoftmaxLogits(20.0), "i2t", math.log(8)),
    # the loss's own declaration wins over what an integration says
    (SoftmaxLogits(20.0, "both", terms=2), "i2t", math.log(8) + math.log(4)),
])  # fmt: skip
def test_chance_level_reads_the_directions_an_integration_says(declared, told, expected):
    positives = torch.zeros(4, 8, dtype=torch.bool)
    positives[:, 0] = True
    view = BatchView(embeddings=torch.randn(4, 2), candidates=torch.randn(8, 2),
                     positives=positives, loss=torch.tensor(1.0), softmax=declared,
                     score_direction=told)  # fmt: skip
    values = ChanceLevel().compute(view)
    assert float(values["chance_level"]) == pytest.approx(expected, rel=1e-15)
    assert float(values["loss_minus_chance"]) == pytest.approx(1.0 - expected, rel=1e-15)


@pytest.mark.parametrize(("dtype", "scale"), [(torch.float32, 2.0**-45), (torch.float64, 2.0**-45),
                                              (torch.float64, 2.0**600)])  # fmt: skip
def test_the_logged_geometry_does_not_depend_on_the_embeddings_scale(tmp_path, dtype, scale):
    # rows of norm below 1e-12 came out shorter than 1 (geometry_std 10x too small: a collapse
    # that was not there), and float64 rows whose norms overflow came out as zeros
    embeddings, labels = _labelled_batch()
    records = []
    for index, factor in enumerate((1.0, scale)):
        with Monitor(tmp_path / str(index), preset="default", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            leaf = (embeddings.to(dtype) * factor).requires_grad_(True)
            loss_fn(leaf, labels).backward()
            records.append(monitor.step())
    keys = [key for key in records[0] if key.startswith("geometry_")]
    assert "geometry_std" in keys and "geometry_effective_rank" in keys
    assert [records[1][key] for key in keys] == [records[0][key] for key in keys]
