"""The Monitor's shared path: reusing SmoothAP's forward gives exactly the independent values.

With a recorded gradlab SmoothAP call (``gradlab.functional.losses.recording``) the quantities
read the loss's score matrix and its ranks ``A``/``C``; without one they compute both from the
embeddings. Both paths must log identical numbers, P and the (weighted) counts must come from one
sort and the decomposition / agreement / smooth AP from one sigmoid block, and both must match
brute-force float64 loops (tests/reference/) on a small batch.
"""

from __future__ import annotations

import math

import pytest
import torch

import gradlab
import gradlab.functional.diagnostics as diagnostics_module
from gradlab.functional.losses import recording
from gradlab.functional.operating_region import operating_region_width
from gradlab.monitor import (
    Decomposition,
    GradientAgreement,
    GradientCounts,
    OperatingRegion,
    RelaxationGap,
    WeightedGradientCounts,
)
from gradlab.monitor.batch import BatchView
from tests.helpers.monitor_values import logged_values
from tests.reference.monitor_loops import per_query_values, quantiles
from tests.reference.smooth_ap_loops import (
    loss_from_aps,
)

TAU = 0.1
LABELS = torch.tensor([0, 1, 0, 2, 1, 3, 0, 2, 4, 1, 3, 5, 0, 1])  # sizes 4, 4, 2, 2, 1, 1


def _embeddings(dtype=torch.float64, seed=3):
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(len(LABELS), 5, generator=generator, dtype=dtype)


def _views(dtype=torch.float64, tau=TAU, max_chunk=None):
    """The same batch twice: with the loss's record (shared) and without (independent)."""
    embeddings = _embeddings(dtype).requires_grad_(True)
    loss_fn = gradlab.SmoothAPLoss(tau)
    with recording() as records:
        loss = loss_fn(embeddings, LABELS)
    loss.backward()
    common = dict(embeddings=embeddings.detach(), labels=LABELS, loss=loss.detach(),
                  embedding_grad=embeddings.grad.detach(), tau=tau, loss_kind="exclude_query",
                  loss_tau=tau)  # fmt: skip
    return BatchView(**common, loss_record=records[-1]), BatchView(**common)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_shared_and_independent_paths_log_identical_values(dtype):
    shared, independent = _views(dtype)
    got, expected = logged_values(shared), logged_values(independent)
    assert got.keys() == expected.keys() and len(got) > 30
    different = {k: (got[k], expected[k]) for k in got if not _same(got[k], expected[k])}
    assert not different
    # and the shared path did reuse: the loss's own score matrix and ranks
    assert shared.layout.scores.data_ptr() == shared.loss_record.scores.data_ptr()
    assert shared.smooth_ap_forward(TAU) is shared.loss_record.forward


def _counting(monkeypatch, module, name):
    calls = []
    original = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(name)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_one_sigmoid_block_and_one_sort_per_logged_step(monkeypatch):
    shared, independent = _views()
    groups = len(shared.loss_record.forward.groups)  # one chunk each at the default budget
    blocks = _counting(monkeypatch, diagnostics_module, "sigmoid_block")
    grouping = _counting(monkeypatch, diagnostics_module, "group_by_positive_count")
    sorts = []
    original_sort = torch.Tensor.sort
    monkeypatch.setattr(torch.Tensor, "sort", lambda self, *a, **k: sorts.append(1)
                        or original_sort(self, *a, **k))  # fmt: skip
    sorted_quantities = (OperatingRegion, GradientCounts, WeightedGradientCounts)
    logged_values(shared, sorted_quantities)
    assert len(sorts) == 1
    logged_values(shared, (Decomposition, GradientAgreement))
    assert (len(blocks), len(grouping)) == (groups, 0)  # the loss's ranks reused
    sorts.clear(), blocks.clear()
    logged_values(independent, (*sorted_quantities, Decomposition, GradientAgreement))
    assert (len(sorts), len(blocks), len(grouping)) == (1, groups, 1)


# --- against brute-force float64 loops ---------------------------------------------------------


def test_both_paths_match_brute_force_loops():
    shared, independent = _views()
    embeddings, labels = shared.embeddings.tolist(), LABELS.tolist()
    loops = per_query_values(embeddings, labels, TAU)
    mean = lambda values: math.fsum(values) / len(values)  # noqa: E731
    for batch in (shared, independent):
        got = logged_values(batch)
        for key in ("p_seed", "p_off_diagonal", "p_without_query"):
            assert got[key] == pytest.approx(mean(loops[key]), rel=1e-12), key
        assert got["gradient_count_mean"] == pytest.approx(mean(loops["counts"]), rel=1e-12)
        assert got["gradient_count_mean_weighted"] == pytest.approx(mean(loops["weighted"]))
        with_positive = [c for c, q in zip(loops["weighted"], labels, strict=True)
                         if labels.count(q) > 1]  # fmt: skip
        assert got["queries_without_gradient_weighted"] == sum(c == 0 for c in with_positive)
        assert got["smooth_ap"] == pytest.approx(mean(loops["smooth"]), rel=1e-12)
        assert got["loss"] == pytest.approx(loss_from_aps(loops["smooth"]), rel=1e-12)
        assert got["exact_ap"] == pytest.approx(mean(loops["exact"]), rel=1e-12)
        for key, name in (("ad", "ad_norm"), ("cb", "cb_norm"), ("grad", "grad_norm"),
                          ("ad_share", "ad_share"), ("ratio", "ratio"), ("cosine", "cosine")):
            assert got[f"decomposition_{name}_mean"] == pytest.approx(mean(loops[key]), rel=1e-9)
            levels = quantiles(loops[key])
            for level, expected in zip(("q10", "q50", "q90"), levels, strict=True):
                assert got[f"decomposition_{name}_{level}"] == pytest.approx(expected, rel=1e-9)
        # the hand-written chain rule of agreement against autograd through the exact backward
        assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-12)
        assert got["gradient_agreement_relative_error"] < 1e-12


def test_a_record_with_another_tau_is_not_reused():
    shared, _ = _views(tau=TAU)
    shared.tau = 0.05  # the Monitor's tau differs from the loss's
    assert shared.smooth_ap_forward(0.05) is not shared.loss_record.forward
    assert shared.smooth_ap_forward(TAU) is shared.loss_record.forward
    _, reference = _views(tau=0.05)
    got, expected = shared.smooth_ap_terms(0.05).ap, reference.smooth_ap_terms(0.05).ap
    assert torch.allclose(got, expected, rtol=0, atol=0, equal_nan=True)


def test_windows_of_width_zero_count_nothing():
    shared, _ = _views()
    width = operating_region_width(100.0, 0.005)
    assert width == 0.0
    assert not shared.pair_counts(width).any()
    assert not shared.counts_at(shared.scores, width).any()
    assert not shared.query_inside(shared.scores, width).any()


def test_exact_ap_from_the_shared_sort_handles_ties_and_drops_the_query():
    """Each embedding three times: many tied scores, and the query ties with its copies."""
    from gradlab.functional import drop_diagonal, in_batch_layout, tie_aware_ap

    embeddings = _embeddings(torch.float64)[:6].repeat(3, 1)
    labels = torch.tensor([0, 1, 2, 0, 1, 3] * 3)
    batch = BatchView(embeddings=embeddings, labels=labels, tau=TAU)
    got = RelaxationGap().compute(batch)["exact_ap"]
    layout = in_batch_layout(embeddings, labels)
    expected = tie_aware_ap(drop_diagonal(layout.scores), drop_diagonal(layout.positives))
    assert got.item() == expected.nanmean().item()
