"""The decomposition's column weights taken from SmoothAP's own exact backward.

Inside ``recording_column_weights()`` the backward of a recorded SmoothAP loss call also writes
the ``[2, Q, C]`` weights ``(gA, gC)`` that ``smooth_ap_terms`` would compute from a second
sigmoid block. They must be those numbers bit for bit (the Monitor logs the same values with
and without them), and every value logged from them must still match float64 loops.
"""

from __future__ import annotations

import dataclasses
import importlib
import math

import pytest
import torch

import gradlab
import gradlab.functional.diagnostics as diagnostics_module
from gradlab.functional.diagnostics import smooth_ap_terms
from gradlab.functional.losses import recording
from gradlab.functional.smooth_ap import recording_column_weights
from gradlab.monitor import Decomposition, GradientAgreement, RelaxationGap
from gradlab.monitor.batch import BatchView, Workspace
from tests.helpers.monitor_values import logged_values
from tests.reference.monitor_loops import per_query_values

smooth_ap_module = importlib.import_module("gradlab.functional.smooth_ap")  # the function
# gradlab.functional.smooth_ap shadows the module's name on the package

UNEVEN = torch.tensor([0, 1, 0, 2, 1, 3, 0, 2, 4, 1, 3, 5, 0, 1])  # groups of 3, 3, 1, 1, 0, 0
EVEN = torch.arange(8).repeat_interleave(4)  # one group of every query


def _recorded_call(labels, dtype, tau, include_query=False, seed=0):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(len(labels), 6, generator=generator, dtype=dtype)
    embeddings.requires_grad_(True)
    loss_fn = gradlab.SmoothAPLoss(tau, include_query=include_query)
    with recording() as records, recording_column_weights() as weights:
        loss = loss_fn(embeddings, labels)
    loss.backward()
    return embeddings, loss, records[-1], weights


def _views(labels, dtype, tau):
    embeddings, loss, record, weights = _recorded_call(labels, dtype, tau)
    common = dict(embeddings=embeddings.detach(), labels=labels, loss=loss.detach(),
                  embedding_grad=embeddings.grad.detach(), tau=tau, loss_kind="exclude_query",
                  loss_tau=tau)  # fmt: skip
    recorded = BatchView(**common, loss_record=record, loss_column_weights=weights[0])
    return recorded, BatchView(**common, loss_record=record), BatchView(**common)


def _identical(got, expected):
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("labels", [UNEVEN, EVEN], ids=["groups", "one-group"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("include_query", [False, True])
def test_the_backward_records_the_weights_smooth_ap_terms_computes(labels, dtype, include_query):
    embeddings, _, record, weights = _recorded_call(labels, dtype, 0.05, include_query)
    assert len(weights) == 1 and weights[0].split is not None
    vectors = torch.nn.functional.normalize(embeddings.detach(), dim=1)
    recorded = weights[0].split.clone()
    computed = smooth_ap_terms(record.scores.detach(), record.positives, 0.05, vectors,
                               candidate_mask=record.candidate_mask,
                               forward=tuple(record.forward))  # fmt: skip
    # score_grad = gA - gC is written over gA: compare both halves through it and gC
    _identical(recorded[0] - recorded[1], computed.score_grad)
    from_split = smooth_ap_terms(record.scores.detach(), record.positives, 0.05, vectors,
                                 candidate_mask=record.candidate_mask,
                                 forward=tuple(record.forward),
                                 column_weights_split=recorded)  # fmt: skip
    for name in ("ap", "score_grad", "ad_term", "cb_term"):
        _identical(getattr(from_split, name), getattr(computed, name))
    # the groups and ranks handed on (a BatchView reads its forward from them)
    (groups, ranks), (expected_groups, expected_ranks) = from_split.forward, computed.forward
    assert len(groups) == len(expected_groups) and len(ranks) == len(expected_ranks)
    for group, expected in zip(groups, expected_groups, strict=True):
        _identical(group.queries, expected.queries)
    for (rank_a, rank_c), (expected_a, expected_c) in zip(ranks, expected_ranks, strict=True):
        _identical(rank_a, expected_a)
        _identical(rank_c, expected_c)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_the_monitor_logs_the_same_values_with_the_recorded_weights(dtype):
    recorded, shared, independent = _views(UNEVEN, dtype, 0.1)
    got = logged_values(recorded)
    assert recorded.loss_column_weights.split is None  # taken: no second sigmoid block
    for other in (shared, independent):
        expected = logged_values(other)
        assert got.keys() == expected.keys()
        assert all(got[k] == expected[k] or (math.isnan(got[k]) and math.isnan(expected[k]))
                   for k in got)  # fmt: skip


def test_values_from_the_recorded_weights_match_float64_loops():
    recorded, _, _ = _views(UNEVEN, torch.float64, 0.1)
    got = logged_values(recorded, (Decomposition, RelaxationGap, GradientAgreement))
    loops = per_query_values(recorded.embeddings.tolist(), UNEVEN.tolist(), 0.1)
    assert got["smooth_ap"] == pytest.approx(math.fsum(loops["smooth"]) / len(loops["smooth"]),
                                             rel=1e-12)  # fmt: skip
    for key, name in (("ad", "ad_norm"), ("cb", "cb_norm"), ("grad", "grad_norm")):
        mean = math.fsum(loops[key]) / len(loops[key])
        assert got[f"decomposition_{name}_mean"] == pytest.approx(mean, rel=1e-9), key
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-12)


def test_weights_of_another_tau_or_a_skipped_backward_are_not_used():
    recorded, _, _ = _views(EVEN, torch.float64, 0.1)
    assert recorded.smooth_ap_terms(0.2) is not None  # another tau: computed, weights kept
    assert recorded.loss_column_weights.split is not None
    embeddings = torch.randn(6, 3, requires_grad=True)
    with recording_column_weights() as weights:
        gradlab.SmoothAPLoss(0.1)(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]))
    assert weights[0].split is None  # no backward: nothing recorded


def test_a_query_without_negatives_leaves_the_weights_unrecorded():
    embeddings = torch.randn(4, 3, requires_grad=True)
    with recording_column_weights() as weights, pytest.warns(Warning, match="ranking signal"):
        loss = gradlab.SmoothAPLoss(0.1)(embeddings, torch.zeros(4, dtype=torch.long))
    loss.backward()
    assert weights[0].split is None  # smooth_ap_terms computes that group itself


def test_a_second_order_backward_records_nothing():
    embeddings = torch.randn(6, 3, requires_grad=True)
    with recording_column_weights() as weights:
        loss = gradlab.SmoothAPLoss(0.1)(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]))
    (grad,) = torch.autograd.grad(loss, embeddings, create_graph=True)
    assert weights[0].split is None and grad.requires_grad


def test_a_watched_loss_hands_its_weights_to_the_step(tmp_path, monkeypatch):
    blocks = []
    original = diagnostics_module.sigmoid_block
    monkeypatch.setattr(diagnostics_module, "sigmoid_block",
                        lambda *a, **k: blocks.append(1) or original(*a, **k))  # fmt: skip
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = torch.randn(16, 4, requires_grad=True)
        loss_fn(embeddings, torch.arange(16) % 4).backward()
        record = monitor.step()
    assert not blocks  # the decomposition, agreement and anatomy read the backward's weights
    assert record["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert math.isfinite(record["decomposition_ad_norm_mean"])


def test_from_the_second_step_the_backward_writes_into_the_monitors_workspace(tmp_path):
    size, kept = 128, []
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(3):
            embeddings = torch.randn(size, 8, requires_grad=True)
            loss_fn(embeddings, torch.arange(size) % 32).backward()
            monitor.step()
            kept.append(monitor.workspace.kept_bytes)
    # step 1: a fresh tensor (no workspace known yet); step 2: the weights' buffer joins the
    # Monitor's workspace; step 3: the same buffers again
    assert (kept[1] - kept[0], kept[2] - kept[1]) == (2 * size * size * 4, 0)


def test_a_view_tells_its_listener_the_workspace_it_is_given():
    seen = []
    view = BatchView(torch.eye(2), on_workspace=seen.append)
    view.workspace = None  # nothing to tell
    workspace = Workspace()
    view.workspace = workspace
    assert seen == [workspace]


@pytest.mark.parametrize(("preset", "recorded"), [("default", False), ("full", True)])
def test_the_backward_records_weights_only_when_a_quantity_reads_dl_ds(
    tmp_path, monkeypatch, preset, recorded
):
    calls = []
    original = smooth_ap_module.column_weights
    monkeypatch.setattr(smooth_ap_module, "column_weights",
                        lambda *a, **k: calls.append(1) or original(*a, **k))  # fmt: skip
    with gradlab.Monitor(tmp_path, preset=preset, every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        embeddings = torch.randn(16, 4, requires_grad=True)
        loss_fn(embeddings, torch.arange(16) % 4).backward()
        monitor.step()
    assert bool(calls) == recorded  # the default preset's backward does no extra work


@pytest.mark.parametrize("differs", ["tau", "budget", "shape", "dtype"])
def test_weights_recorded_under_other_settings_are_left_alone(differs):
    """Weights that do not describe the step's call (one setting differs, the others match) are
    neither taken nor read: the terms are computed, equal to a view without weights."""
    embeddings, loss, record, weights = _recorded_call(UNEVEN, torch.float64, 0.1)
    split = weights[0].split
    changed = {"tau": {"tau": 0.2}, "budget": {"budget": weights[0].budget // 2},
               "shape": {"split": split[:, :, :-1]},
               "dtype": {"split": split.to(torch.float32)}}[differs]  # fmt: skip
    other = dataclasses.replace(weights[0], **changed)
    common = dict(embeddings=embeddings.detach(), labels=UNEVEN, loss=loss.detach(),
                  embedding_grad=embeddings.grad.detach(), tau=0.1, loss_kind="exclude_query",
                  loss_tau=0.1, loss_record=record)  # fmt: skip
    terms = BatchView(**common, loss_column_weights=other).smooth_ap_terms(0.1)
    assert other.split is not None  # not taken
    expected = BatchView(**common).smooth_ap_terms(0.1)
    for name in ("ap", "score_grad", "ad_term", "cb_term"):
        _identical(getattr(terms, name), getattr(expected, name))


def test_weights_of_the_other_query_convention_are_left_alone():
    """The loss excluded the query; terms with the query as its own candidate (the seed's
    setting) are another computation: the recorded weights are not read for them."""
    recorded, _, independent = _views(UNEVEN, torch.float64, 0.1)
    terms = recorded.smooth_ap_terms(0.1, include_query=True)
    assert recorded.loss_column_weights.split is not None  # kept for the loss's own setting
    expected = independent.smooth_ap_terms(0.1, include_query=True)
    for name in ("ap", "score_grad", "ad_term", "cb_term"):
        _identical(getattr(terms, name), getattr(expected, name))


def test_nested_blocks_give_the_outer_one_the_inner_ones_weights_once_it_ends():
    # two Monitors, one watching the loss through the other: both read the same weights
    embeddings = torch.randn(6, 3, requires_grad=True)
    with recording_column_weights() as outer:
        with recording_column_weights() as inner:
            loss = gradlab.SmoothAPLoss(0.1)(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]))
            assert (len(inner), len(outer)) == (1, 0)
        assert (len(inner), len(outer)) == (1, 1)  # once the inner block ended
    assert outer[0] is inner[0]
    loss.backward()
    assert inner[0].split is not None  # filled by the backward, after both blocks ended


def test_a_cross_modal_call_records_the_weights_of_its_own_query_rows():
    # 5 queries x 4 candidates; query 0 has no positive, so the one group holds queries 1-4:
    # its weights go to those rows (not to rows 0-3), and row 0 stays 0
    generator = torch.Generator().manual_seed(0)
    queries = torch.randn(5, 6, generator=generator, dtype=torch.float64, requires_grad=True)
    candidates = torch.randn(4, 6, generator=generator, dtype=torch.float64)
    positives = torch.zeros(5, 4, dtype=torch.bool)
    positives[torch.arange(1, 5), torch.arange(4)] = True
    with recording() as records, recording_column_weights() as weights:
        loss = gradlab.SmoothAPLoss(0.05)(queries, candidates=candidates, positives=positives)
    loss.backward()
    record, recorded = records[-1], weights[0].split.clone()
    computed = smooth_ap_terms(record.scores.detach(), record.positives, 0.05,
                               torch.nn.functional.normalize(candidates, dim=1),
                               forward=tuple(record.forward))  # fmt: skip
    _identical(recorded[0] - recorded[1], computed.score_grad)
    assert (recorded[:, 0] == 0).all() and (recorded[:, 1:] != 0).any()


def test_the_workspace_buffer_logs_what_a_fresh_one_logs_in_float64(tmp_path, monkeypatch):
    # step 0 records the weights into a fresh tensor; from step 1 into the Monitor's workspace
    # (128 x 128 scores: large enough to be kept there), in the scores' dtype, so that every
    # step reads them (no second sigmoid block) and the same batch logs the same values
    blocks = []
    original = diagnostics_module.sigmoid_block
    monkeypatch.setattr(diagnostics_module, "sigmoid_block",
                        lambda *a, **k: blocks.append(1) or original(*a, **k))  # fmt: skip
    generator = torch.Generator().manual_seed(1)
    embeddings = torch.randn(128, 8, generator=generator, dtype=torch.float64)
    labels = torch.arange(128) % 32
    records = []
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(3):
            batch = embeddings.clone().requires_grad_(True)
            loss_fn(batch, labels).backward()
            records.append(monitor.step())
        assert monitor.workspace.kept_bytes > 0
    assert not blocks
    for later in records[1:]:
        assert {k: v for k, v in later.items() if k != "step"} == pytest.approx(
            {k: v for k, v in records[0].items() if k != "step"}, rel=0, abs=0, nan_ok=True)
