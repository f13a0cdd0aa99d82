"""Geometry, temperature and chance level at their edges: a batch of one query, values kept on
the batch's device (the meta device stands in for an accelerator: a value created on the CPU by
mistake shows up there), and the in-batch uniformity read from the step's own score matrix."""

from __future__ import annotations

import math

import pytest
import torch
from torch.overrides import TorchFunctionMode

import gradlab
from gradlab.functional import geometry
from gradlab.monitor import (
    ChanceLevel,
    Geometry,
    Margins,
    Monitor,
    OperatingRegion,
    Temperature,
    every,
)
from gradlab.monitor.batch import BatchView
from gradlab.validation import skip_value_checks
from tests.helpers.second_rank import MirrorRank
from tests.reference import geometry_loops as loops


def test_one_query_logs_what_one_point_defines_and_nothing_else():
    query, candidates = torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    view = BatchView(embeddings=query, candidates=candidates,
                     positives=torch.tensor([[True, False]]))  # fmt: skip
    values = Geometry().compute(view)
    # no spread of one point (its std, 0, would read as a collapse), no uniformity, no rank
    assert set(values) == {"geometry_alignment", "geometry_modality_gap"}
    # |u - v|^2 of the unit query (0.6, 0.8) and its positive (1, 0)
    assert float(values["geometry_alignment"]) == pytest.approx((0.6 - 1.0) ** 2 + 0.8**2)
    gap = loops.modality_gap(query.tolist(), candidates.tolist())
    assert float(values["geometry_modality_gap"]) == pytest.approx(gap)


def test_two_queries_log_every_key_again():
    view = BatchView(embeddings=torch.eye(2), candidates=torch.eye(2),
                     positives=torch.eye(2, dtype=torch.bool))  # fmt: skip
    assert set(Geometry().compute(view)) == set(Geometry.keys)


def _on_meta(**extra) -> BatchView:
    embeddings = torch.empty(6, 4, device="meta")
    labels = torch.empty(6, dtype=torch.long, device="meta")
    return BatchView(embeddings=embeddings, labels=labels, tau=0.05, **extra)


@pytest.mark.parametrize("quantity", [
    ChanceLevel(),
    Temperature(),  # 1 / tau
    Temperature(scale=20.0),  # a number
    Temperature(scale=torch.tensor(math.log(20.0)), log_scale=True),  # a CPU tensor
], ids=["chance", "tau", "number", "tensor"])  # fmt: skip
def test_values_stay_on_the_batchs_device(quantity):
    view = _on_meta(loss=torch.empty((), device="meta"))
    with torch.no_grad(), skip_value_checks():
        values = quantity.compute(view)
    assert values and {str(value.device) for value in values.values()} == {"meta"}


def test_the_observed_gradient_is_moved_to_the_batchs_device():
    scale = torch.nn.Parameter(torch.tensor(math.log(20.0)))
    scale.grad = torch.tensor(0.25)  # on the CPU, as an optimizer on another device leaves it
    with torch.no_grad(), skip_value_checks():
        values = Temperature(scale=scale, log_scale=True).compute(_on_meta())
    assert str(values["temperature_log_scale_grad_observed"].device) == "meta"


class _Products(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.matmul, torch.mm, torch.Tensor.matmul, torch.Tensor.__matmul__):
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_in_batch_uniformity_reads_the_steps_score_matrix_instead_of_a_second_product():
    generator = torch.Generator().manual_seed(0)
    view = BatchView(embeddings=torch.randn(12, 5, generator=generator),
                     labels=torch.arange(12) % 3)  # fmt: skip
    assert view.scores.shape == (12, 12)  # the step's matrix exists first (the Monitor's case)
    with _Products() as products:
        values = Geometry().compute(view)
    assert products.count == 1  # the effective rank's Gram matrix only
    expected = loops.uniformity(view.embeddings.tolist())
    assert float(values["geometry_uniformity"]) == pytest.approx(expected, rel=1e-6)


def test_a_positive_masked_out_of_the_candidates_leaves_the_alignment():
    # A recorded layout whose candidate mask drops a positive (a masked false negative, as
    # a loss that filters suspected duplicates records it): the alignment runs over the
    # positives that are candidates only.
    points = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]])
    view = BatchView(embeddings=points, labels=torch.tensor([0, 0, 0]))
    layout = view.layout
    candidates = layout.candidate_mask.clone()
    candidates[0, 1] = candidates[1, 0] = False  # the pair (0, 1) is no candidate
    view.layout = type(layout)(layout.scores, layout.positives, candidates)
    kept = [(0, 2), (2, 0), (1, 2), (2, 1)]
    unit = points.tolist()
    expected = sum((unit[i][0] - unit[j][0]) ** 2 + (unit[i][1] - unit[j][1]) ** 2
                   for i, j in kept) / len(kept)  # fmt: skip
    value = float(Geometry().compute(view)["geometry_alignment"])
    assert value == pytest.approx(expected)
    assert value != pytest.approx(float(Geometry().compute(
        BatchView(embeddings=points, labels=torch.tensor([0, 0, 0])))["geometry_alignment"]))


def _labelled(seed: int = 2):
    generator = torch.Generator().manual_seed(seed)
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4])  # two queries without a positive
    embeddings = torch.randint(-2, 3, (len(labels), 3), generator=generator).float()
    return embeddings + 0.01 * (embeddings == 0).all(dim=1, keepdim=True)  # no zero row


def test_margins_read_the_step_s_sort_and_log_what_the_dense_pass_logs(monkeypatch):
    # Coarse integer embeddings: many tied cosine scores. After P has sorted the rows, the
    # margins count by searches of that sort; they must log exactly what the dense pass does.
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4])
    sorted_view = BatchView(embeddings=_labelled(), labels=labels)
    OperatingRegion().compute(sorted_view)
    assert sorted_view.has_sort
    dense = Margins().compute(BatchView(embeddings=_labelled(), labels=labels))
    calls = []
    original = geometry.query_margins
    monkeypatch.setattr(geometry, "query_margins",
                        lambda *a, **k: calls.append(1) or original(*a, **k))  # fmt: skip
    searched = Margins().compute(sorted_view)
    assert not calls  # the sorted path ran
    assert searched.keys() == dense.keys() == set(Margins.keys)
    assert all(torch.equal(searched[k], dense[k]) for k in dense)
    expected = loops.margins(*(t.tolist() for t in (
        sorted_view.scores, sorted_view.layout.positives, sorted_view.layout.candidate_mask)))
    logged = [float(searched[key]) for key in Margins.keys]
    assert logged == pytest.approx(expected, abs=1e-6)


def test_a_layout_with_its_own_candidate_mask_keeps_the_dense_margins_and_alignment():
    # A layout a loss recorded (suspected duplicates masked out): the in-batch shortcuts, which
    # assume the query is the only non-candidate, must not run, even after a sort.
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4])
    view = BatchView(embeddings=_labelled(), labels=labels)
    layout = view.layout
    candidates = layout.candidate_mask.clone()
    candidates[:, 5] = False  # column 5 is no one's candidate
    candidates[5, 5] = False
    view.layout = type(layout)(layout.scores, layout.positives, candidates)
    OperatingRegion().compute(view)
    margins, geometry_values = Margins().compute(view), Geometry().compute(view)
    expected = loops.margins(view.scores.tolist(), layout.positives.tolist(), candidates.tolist())
    assert [float(margins[key]) for key in Margins.keys] == pytest.approx(expected, abs=1e-6)
    keep = layout.positives & candidates
    cosine = layout.scores.double()
    alignment = float((2 - 2 * cosine[keep]).clamp(min=0).mean())
    assert float(geometry_values["geometry_alignment"]) == pytest.approx(alignment)


def _spy(monkeypatch, *names):
    """Count the calls of ``gradlab.functional.geometry`` functions the quantities make."""
    calls = dict.fromkeys(names, 0)
    for name in names:
        original = getattr(geometry, name)

        def counted(*args, _name=name, _original=original, **kwargs):
            calls[_name] += 1
            return _original(*args, **kwargs)

        monkeypatch.setattr(geometry, name, counted)
    return calls


@pytest.mark.parametrize("size,dims", [(2, 3), (6, 1), (9, 4)])
def test_the_in_batch_step_takes_alignment_and_uniformity_from_one_copy(monkeypatch, size,
                                                                        dims):  # fmt: skip
    # Two points, one dimension: still the one-copy path, the values of the two functions.
    generator = torch.Generator().manual_seed(size)
    embeddings = torch.randn(size, dims, generator=generator)
    labels = torch.arange(size) // 2  # pairs (and a singleton)
    expected = Geometry().compute(BatchView(embeddings=embeddings, labels=labels))
    # the Monitor's call: in_batch_alignment_uniformity of its own checked tensors
    calls = _spy(monkeypatch, "_in_batch_alignment_uniformity", "alignment", "uniformity")
    values = Geometry().compute(BatchView(embeddings=embeddings, labels=labels))
    assert calls == {"_in_batch_alignment_uniformity": 1, "alignment": 0, "uniformity": 0}
    assert values.keys() == expected.keys() and "geometry_uniformity" in values
    assert all(torch.equal(values[key], expected[key]) for key in values)
    unit = torch.nn.functional.normalize(embeddings.double(), dim=1).tolist()
    pairs = [(i, j) for i in range(size) for j in range(size) if i != j and labels[i] == labels[j]]
    distance = [sum((a - b) ** 2 for a, b in zip(unit[i], unit[j], strict=True)) for i, j in pairs]
    assert float(values["geometry_alignment"]) == pytest.approx(
        sum(distance) / len(distance), rel=1e-5, abs=1e-7)


def test_one_in_batch_query_logs_no_spread_and_no_pairs():
    values = Geometry().compute(BatchView(embeddings=torch.tensor([[3.0, 4.0]]),
                                          labels=torch.tensor([0])))  # fmt: skip
    assert set(values) == {"geometry_alignment"}
    assert math.isnan(float(values["geometry_alignment"]))  # no positive pair


def test_a_layout_with_its_own_mask_still_reads_the_step_s_scores_for_uniformity(monkeypatch):
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4])
    view = BatchView(embeddings=_labelled(), labels=labels)
    layout = view.layout
    view.layout = type(layout)(layout.scores, layout.positives, layout.candidate_mask.clone())
    calls = _spy(monkeypatch, "_in_batch_alignment_uniformity", "uniformity")
    with _Products() as products:
        values = Geometry().compute(view)
    assert products.count == 1  # the effective rank's Gram matrix only
    assert calls == {"_in_batch_alignment_uniformity": 0, "uniformity": 1}
    expected = loops.uniformity(view.embeddings.tolist())
    assert float(values["geometry_uniformity"]) == pytest.approx(expected, rel=1e-6)


class _Sorts(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (torch.sort, torch.Tensor.sort, torch.argsort, torch.Tensor.argsort):
            self.count += 1
        return func(*args, **(kwargs or {}))


def test_margins_search_the_step_s_sort_instead_of_sorting_again():
    labels = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 4])
    view = BatchView(embeddings=_labelled(), labels=labels)
    OperatingRegion().compute(view)
    with _Sorts() as sorts:
        Margins().compute(view)
    assert sorts.count == 0


# ---- a learnable scale's hook: a pickle mid-step, a scale without gradient, a frozen one ----


def _cosines(generator, rows=6, width=4):
    """Two batches of unit rows (float64) and their cosine matrix by float64 loops."""
    queries, answers = (
        torch.nn.functional.normalize(
            torch.randn(rows, width, generator=generator, dtype=torch.float64), dim=1
        )
        for _ in range(2)
    )
    return queries, answers, loops.cosines(queries.tolist(), answers.tolist())


def _eye(rows):
    return [[i == j for j in range(rows)] for i in range(rows)]


def test_a_learnable_scale_pickles_between_its_watched_call_and_the_step(tmp_path):
    # the hook on the parameter lives from the watched call to monitor.step(): a trainer that
    # pickles its callbacks then (a checkpoint, a spawned worker) gets a copy without it
    import pickle

    generator = torch.Generator().manual_seed(11)
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(10.0), dtype=torch.float64))
    quantity = Temperature(every(1), scale=logit_scale, log_scale=True, logits=True,
                           direction="i2t")  # fmt: skip
    queries, answers, scores = _cosines(generator)
    with Monitor(tmp_path / "original", quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
        loss = loss_fn(logit_scale.exp() * queries @ answers.T, torch.eye(6, dtype=torch.bool))
        copy = pickle.loads(pickle.dumps(quantity))  # mid-step: the hook is on the parameter
        loss.backward()
        record = monitor.step()
    expected = loops.temperature_gradient(scores, _eye(6), 10.0)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(expected, rel=1e-9)
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-9)
    # the copy holds its own parameter, no hook on it, and follows it
    assert copy.scale is not logit_scale and not copy.scale._backward_hooks
    queries, answers, scores = _cosines(generator)
    with Monitor(tmp_path / "copy", quantities=[copy]) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
        logits = copy.scale.exp() * queries @ answers.T
        loss_fn(logits, torch.eye(6, dtype=torch.bool)).backward()
        record = monitor.step()
    expected = loops.temperature_gradient(scores, _eye(6), 10.0)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(expected, rel=1e-9)
    assert float(copy.scale.grad) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("scale", ["number", "tensor", "callable", "the loss's own"])
def test_a_scale_without_a_gradient_reads_every_call_without_a_warning(tmp_path, scale):
    # a fixed scale (sentence-transformers' 20), a tensor or a callable without a gradient, or
    # none (the loss's 1 / temperature): nothing to hook, and the call is read as any other
    import warnings

    given = {"number": 20.0, "tensor": torch.tensor(20.0), "callable": lambda: torch.tensor(20.0),
             "the loss's own": None}[scale]  # fmt: skip
    queries, answers, scores = _cosines(torch.Generator().manual_seed(12))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[Temperature(every(1), scale=given)]) as monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=0.05, direction="i2t"))
            cosines = (queries @ answers.T).requires_grad_()
            loss_fn(cosines, torch.eye(6, dtype=torch.bool)).backward()
            record = monitor.step()
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == []
    assert monitor.skipped_calls == 0
    assert record["temperature_scale"] == pytest.approx(20.0, rel=1e-12)
    expected = loops.temperature_gradient(scores, _eye(6), 20.0)
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-9)
    assert "temperature_log_scale_grad_observed" not in record  # no gradient to read


def test_a_scale_frozen_between_two_micro_batches_logs_the_gradient_it_got(tmp_path):
    # the temperature is frozen after the first micro-batch of a step (requires_grad_(False)):
    # the last call's backward sends it nothing, so its own gradient, the first call's, is
    # logged, beside the closed form of the last call's matrix
    import warnings

    generator = torch.Generator().manual_seed(13)
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(8.0), dtype=torch.float64))
    quantity = Temperature(every(1), scale=logit_scale, log_scale=True, logits=True,
                           direction="i2t")  # fmt: skip
    batches = [_cosines(generator) for _ in range(2)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path, quantities=[quantity]) as monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(temperature=1.0, direction="i2t"))
            for queries, answers, _ in batches:  # the model's embeddings: they need a gradient
                logits = logit_scale.exp() * queries.requires_grad_() @ answers.T
                loss_fn(logits, torch.eye(6, dtype=torch.bool)).backward()
                logit_scale.requires_grad_(False)  # frozen from the second micro-batch on
            record = monitor.step()
    assert [str(w.message) for w in caught if w.category is RuntimeWarning] == []
    first = loops.temperature_gradient(batches[0][2], _eye(6), 8.0)
    last = loops.temperature_gradient(batches[1][2], _eye(6), 8.0)
    assert record["temperature_log_scale_grad_observed"] == pytest.approx(first, rel=1e-9)
    assert record["temperature_log_scale_grad"] == pytest.approx(last, rel=1e-9)
    assert record["temperature_scale"] == pytest.approx(8.0, rel=1e-12)


def test_under_torch_distributed_the_scale_is_the_one_the_watched_call_used(
    tmp_path, one_rank_group, monkeypatch
):
    # the Monitor gathers the ranks' rows into a global batch; the scale it logs is still the
    # one this rank's loss call used, not the one the optimizer step moved it to before
    # monitor.step(). A second rank (simulated) holds this rank's rows.
    MirrorRank(monkeypatch)
    generator = torch.Generator().manual_seed(14)
    embeddings = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    logit_scale = torch.nn.Parameter(torch.tensor(math.log(10.0), dtype=torch.float64))
    quantity = Temperature(every(1), scale=logit_scale, log_scale=True)
    with Monitor(tmp_path / "run", quantities=[quantity]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.requires_grad_(), labels).backward()
        with torch.no_grad():
            logit_scale.add_(1.0)  # the optimizer's step, before monitor.step()
        record = monitor.step()
    assert record["temperature_scale"] == pytest.approx(10.0, rel=1e-12)
    # the closed form of the global batch (both ranks' rows), each row against the others
    rows, classes = embeddings.tolist() * 2, labels.tolist() * 2
    scores = loops.cosines(rows, rows)
    others = [[i != j for j in range(12)] for i in range(12)]
    positives = [[i != j and classes[i] == classes[j] for j in range(12)] for i in range(12)]
    expected = loops.temperature_gradient(scores, positives, 10.0, others)
    assert record["temperature_log_scale_grad"] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("sizes", [
    (3,) * 8,  # one group of positives holds every query
    (3,) * 7 + (1,),  # a query without a positive: one group, not every row
    (3, 4) * 3,  # two groups
    (2, 3, 4, 5, 1),  # four groups: the masked pass
])  # fmt: skip
def test_margins_from_the_loss_s_positive_groups_log_what_the_masked_pass_logs(tmp_path, sizes):
    # The hardest positive of each query read from the watched SmoothAP's groups of positives
    # (their scores, shared with the gradient counts), and the positives' row counts shared with
    # the degenerate-batch flag, against a loss that records nothing (the masked passes over
    # every entry): the same margins bit for bit, and the float64 loops' to rounding.
    generator = torch.Generator().manual_seed(len(sizes))
    labels = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    labels = labels[torch.randperm(len(labels), generator=generator)]
    embeddings = torch.randn(len(labels), 5, generator=generator)

    def record(loss_fn, name):
        with Monitor(tmp_path / name, preset="default", every=1) as monitor:
            leaf = embeddings.clone().requires_grad_(True)
            monitor.watch(loss_fn)(leaf, labels).backward()
            return monitor.step()

    grouped = record(gradlab.SmoothAPLoss(0.05), "groups")
    masked = record(lambda emb, _labels: emb.square().sum(), "masked")
    for key in Margins.keys:
        assert grouped[key] == masked[key] or (math.isnan(grouped[key]) and math.isnan(masked[key]))
    points, same = embeddings.tolist(), (labels[:, None] == labels[None, :]).tolist()
    size = len(points)
    positives = [[same[i][j] and i != j for j in range(size)] for i in range(size)]
    candidates = [[i != j for j in range(size)] for i in range(size)]
    reference = loops.margins(loops.cosines(points, points), positives, candidates)
    assert [grouped[key] for key in Margins.keys] == pytest.approx(reference, abs=1e-6)
