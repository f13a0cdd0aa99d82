"""The anatomy quantity in a Monitor: logged values against independent computations, the
direction split, and the run header when the loss exposes no score matrix."""

import contextlib
import math

import pytest
import torch

import gradlab
import gradlab.monitor.monitor as monitor_module
from gradlab.functional import (
    gradient_anatomy,
    max_violation_triplet_loss,
    nt_xent_loss,
    smooth_ap,
)
from gradlab.monitor import Monitor, every, read_jsonl
from gradlab.monitor.anatomy import Anatomy
from tests.monitor.test_values import expected_anatomy
from tests.reference.anatomy_loops import anatomy_one_query


def _scores(seed=0, queries=6, candidates=18):
    generator = torch.Generator().manual_seed(seed)
    scores = (torch.rand(queries, candidates, generator=generator) * 2 - 1).requires_grad_(True)
    positives = torch.arange(queries).unsqueeze(1) == (torch.arange(candidates) % queries)
    return scores, positives


def _log(tmp_path, loss_fn, scores, positives, inputs="scores"):
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(loss_fn, inputs=inputs)
        loss_fn(scores, positives).backward()
        return monitor.step()


@pytest.mark.parametrize("margin", [0.1, 0.6])
def test_max_violation_split_by_direction_matches_the_closed_form(tmp_path, margin):
    """i2t: a query gets gradient on exactly its hardest negative iff a positive violates the
    margin against it; t2i the same over columns. Computed here with loops over the scores."""
    scores, positives = _scores()
    with torch.no_grad():  # the first three image queries rank their captions far ahead
        scores[:3] += 3.0 * positives[:3]
    record = _log(tmp_path, gradlab.MaxViolationTripletLoss(margin), scores, positives)
    rows, flags = scores.detach().tolist(), positives.tolist()
    columns, column_flags = scores.detach().T.tolist(), positives.T.tolist()
    for prefix, matrix, mask in (("i2t", rows, flags), ("t2i", columns, column_flags)):
        violated = []
        for row, row_flags in zip(matrix, mask, strict=True):
            hardest = max(s for s, p in zip(row, row_flags, strict=True) if not p)
            violated.append(any(margin - s + hardest > 0
                                for s, p in zip(row, row_flags, strict=True) if p))  # fmt: skip
        share = sum(violated) / len(violated)
        assert record[f"anatomy_{prefix}_active_negatives_mean"] == pytest.approx(share)
        assert record[f"anatomy_{prefix}_queries_without_gradient"] == pytest.approx(1 - share)
        if any(violated):
            assert record[f"anatomy_{prefix}_hardest_1pct_share"] == 1.0
    assert 0 < record["anatomy_i2t_active_negatives_mean"] < 1  # both outcomes occur


def test_a_function_on_scores_gives_row_and_column_anatomy_of_the_whole_gradient(tmp_path):
    scores, positives = _scores(1)
    record = _log(tmp_path, lambda s, p: nt_xent_loss(s, p, 0.1), scores, positives)
    leaf = scores.detach().clone().requires_grad_(True)
    nt_xent_loss(leaf, positives, 0.1).backward()
    for prefix, grad, s, p in (("i2t", leaf.grad, leaf.detach(), positives),
                               ("t2i", leaf.grad.T, leaf.detach().T, positives.T)):  # fmt: skip
        anatomy = gradient_anatomy(grad, s, p)
        expected = anatomy.active_negatives.double().mean().item()
        assert record[f"anatomy_{prefix}_active_negatives_mean"] == pytest.approx(expected)


def test_smooth_ap_loss_anatomy_is_its_exact_score_gradient(tmp_path):
    generator = torch.Generator().manual_seed(3)
    embeddings = torch.randn(16, 4, generator=generator, requires_grad=True)
    labels = torch.arange(16) % 4
    record = _log(tmp_path, gradlab.SmoothAPLoss(0.05), embeddings, labels, inputs="embeddings")
    layout = gradlab.functional.in_batch_layout(embeddings.detach().double(), labels)
    leaf = layout.scores.clone().requires_grad_(True)
    gradlab.functional.mean_ap_loss(
        gradlab.functional.smooth_ap(leaf, layout.positives, 0.05, candidates=layout.candidates),
        leaf,
    ).backward()
    anatomy = gradient_anatomy(leaf.grad, leaf.detach(), layout.positives, layout.candidates)
    assert record["anatomy_active_negatives_mean"] == pytest.approx(
        anatomy.active_negatives.double().mean().item()
    )
    assert "anatomy_i2t_active_negatives_mean" not in record  # in-batch: no direction


def test_a_loss_without_score_matrix_logs_no_anatomy_and_the_header_says_why(tmp_path):
    embeddings = torch.randn(12, 4, requires_grad=True)
    labels = torch.arange(12) % 3
    with Monitor(tmp_path / "run", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.FastAPLoss())
        loss_fn(embeddings, labels).backward()
        record = monitor.step()
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    reasons = headers[0]["not_logged"]
    assert "FastAPLoss" in reasons["anatomy"] and "inputs='scores'" in reasons["anatomy"]
    assert "not SmoothAP" in reasons["gradient_agreement"]
    assert not any(k.startswith(("anatomy_", "gradient_agreement")) for k in record)
    assert "p_seed" in record  # the SmoothAP diagnostics of the scores still apply


def test_score_inputs_skip_the_embedding_quantities_with_a_reason(tmp_path):
    scores, positives = _scores(2)
    with Monitor(tmp_path / "run", preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        loss_fn(scores, positives).backward()
        record = monitor.step()
    headers, _ = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert set(headers[0]["not_logged"]) >= {"embedding_norm", "decomposition"}
    assert not any(k.startswith(("embedding_", "decomposition_")) for k in record)
    assert "p_cross_modal" in record and "anatomy_t2i_hardest_10pct_share" in record
    assert math.isfinite(record["anatomy_i2t_active_rank_depth"])


def test_plot_draws_the_anatomy_family_for_both_directions(tmp_path):
    from gradlab.plotting.monitor import plot_run

    scores, positives = _scores(4)
    scores = torch.nn.Parameter(scores.detach())
    optimizer = torch.optim.SGD([scores], lr=0.5)
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.MaxViolationTripletLoss(0.2), inputs="scores")
        for _ in range(6):
            loss_fn(scores, positives).backward()
            optimizer.step()
            optimizer.zero_grad()
            monitor.step()
    # The optimizer updated the leaf scores in place before each step(): the anatomy still
    # describes the scores the loss saw (only the hardest negative gets gradient).
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    for direction in ("i2t", "t2i"):
        assert {r[f"anatomy_{direction}_hardest_1pct_share"] for r in records} == {1.0}
    written = {path.name for path in plot_run(tmp_path / "run", tmp_path / "figures")}
    assert {"anatomy_active_negatives.png", "anatomy_hardness.png",
            "anatomy_without_gradient.png"} <= written  # fmt: skip


def test_smooth_ap_without_a_recorded_graph_uses_the_shared_exact_gradient(tmp_path, monkeypatch):
    """Both SmoothAP paths (hook on the loss's recorded scores; the step's shared closed-form
    dL/dS when nothing was recorded) log the same anatomy."""
    import contextlib

    import gradlab.monitor.monitor as monitor_module

    generator = torch.Generator().manual_seed(5)
    embeddings = torch.randn(20, 4, generator=generator, requires_grad=True)
    labels = torch.arange(20) % 5
    hooked = _log(tmp_path / "a", gradlab.SmoothAPLoss(0.05), embeddings, labels, "embeddings")
    monkeypatch.setattr(monitor_module, "recording", contextlib.nullcontext)
    shared = _log(tmp_path / "b", gradlab.SmoothAPLoss(0.05), embeddings, labels, "embeddings")
    assert "anatomy_active_negatives_mean" in hooked and "anatomy_active_negatives_mean" in shared
    for key, value in hooked.items():
        if key.startswith("anatomy_"):
            assert shared[key] == pytest.approx(value, rel=1e-5, nan_ok=True), key


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        (dict(absolute_threshold=-1.0), "absolute_threshold"),
        (dict(absolute_threshold=float("nan")), "absolute_threshold"),
        (dict(relative_threshold=2.0), "relative_threshold"),
        (dict(relative_threshold="0.1"), "relative_threshold"),
    ],
)
def test_bad_anatomy_options_name_the_argument(kwargs, argument):
    with pytest.raises(gradlab.GradlabError, match=argument):
        Anatomy(**kwargs)


def test_attach_after_watch_keeps_the_watched_loss_explanation(tmp_path):
    with Monitor(tmp_path / "run", quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(gradlab.NTXentLoss(), inputs="scores")
        monitor.attach(torch.nn.Linear(2, 2), labels=torch.zeros(2, dtype=torch.long))
        assert "anatomy" not in monitor.not_logged


def test_rank_depth_is_zero_for_the_hardest_and_one_for_the_easiest(tmp_path):
    """A loss on the hardest negative only gives depth 0; on the easiest only, depth 1."""
    scores, positives = _scores(6)
    negatives = scores.detach().masked_fill(positives, float("nan"))

    def easiest_only(s, p):
        easiest = negatives.nan_to_num(float("inf")).argmin(dim=1)
        return s.gather(1, easiest.unsqueeze(1)).sum()

    for loss_fn, depth in ((lambda s, p: max_violation_triplet_loss(s, p, 5.0, direction="i2t"),
                            0.0), (easiest_only, 1.0)):  # fmt: skip
        record = _log(tmp_path / str(depth), loss_fn, scores, positives)
        assert record["anatomy_i2t_active_rank_depth"] == pytest.approx(depth)
        assert record["anatomy_i2t_deepest_active_rank"] == pytest.approx(depth)


@pytest.mark.parametrize("layout", ["exclude_query", "include_query", "cross_modal"])
@pytest.mark.parametrize("recorded", [True, False])
def test_smooth_ap_anatomy_in_every_layout_with_and_without_the_loss_record(
    tmp_path, monkeypatch, layout, recorded
):
    """The anatomy of gradlab's SmoothAPLoss is that of its dL/dS, here by autograd through the
    forward, read by the anatomy loops; both the hooked record and the shared exact gradient."""
    if not recorded:
        monkeypatch.setattr(monitor_module, "recording", contextlib.nullcontext)
    generator = torch.Generator().manual_seed(8)
    queries = torch.randn(9, 3, generator=generator, dtype=torch.float64)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3])
    normalized = torch.nn.functional.normalize(queries, dim=1)
    if layout == "cross_modal":
        candidates = torch.randn(5, 3, generator=generator, dtype=torch.float64)
        positives = labels.unsqueeze(1) == torch.tensor([0, 1, 2, 0, 1]).unsqueeze(0)
        arguments = (queries.clone().requires_grad_(True), candidates, positives)
        scores = normalized @ torch.nn.functional.normalize(candidates, dim=1).T
        mask, keep, prefix = positives, torch.ones_like(positives), "anatomy_i2t_"
    else:
        arguments = (queries.clone().requires_grad_(True), labels)
        scores = normalized @ normalized.T
        mask = labels.unsqueeze(0) == labels.unsqueeze(1)
        keep = torch.ones_like(mask)
        if layout == "exclude_query":
            mask, keep = mask.fill_diagonal_(False), keep.fill_diagonal_(False)
        prefix = "anatomy_"
    loss_fn = gradlab.SmoothAPLoss(0.1, include_query=layout == "include_query")
    with Monitor(tmp_path, quantities=[Anatomy(every(1))]) as monitor:
        monitor.watch(loss_fn)(*arguments).backward()
        record = monitor.step()
    leaf = scores.clone().requires_grad_(True)
    aps = smooth_ap(leaf, mask, 0.1, candidates=None if keep.all() else keep,
                    backward="autograd")  # fmt: skip
    (1 - aps[~aps.isnan()].mean()).backward()
    per_query = [anatomy_one_query(leaf.grad[q].tolist(), scores[q].tolist(), mask[q].tolist(),
                                   keep[q].tolist(), 1e-10, 1e-2)
                 for q in range(scores.shape[0])]  # fmt: skip
    kept = [a for a in per_query if a["num_positives"] and a["num_negatives"]]
    for key, value in expected_anatomy(kept).items():  # every logged key
        assert record[f"{prefix}{key}"] == pytest.approx(value, rel=1e-9, abs=1e-12), key
    assert not [key for key in record if key.startswith("anatomy_") and
                not key.startswith(prefix)]  # fmt: skip
