"""Every logged Monitor quantity against a brute-force float64 loop on a small batch.

The references are plain Python loops over floats (``tests/reference/``) or torch autograd
through a SmoothAP written here with loops; none calls the code under test. Cases the shared-path
test (test_shared.py) leaves open: the cheap quantities, P across modalities and at another
eps, the plain counts and their "queries without gradient", cross-modal counts (every candidate
kept), the relaxation gap's sign, gradient agreement against an independent loss, the anatomy's
every key with a candidate mask, and the NaN/inf-dropping summaries at the 10/50/90 % levels.
"""

from __future__ import annotations

import math

import pytest
import torch
from scipy.optimize import brentq

import gradlab
from gradlab import GradlabError
from gradlab.functional.losses import recording
from gradlab.monitor import (
    EmbeddingGradNorm,
    EmbeddingNorms,
    GradientAgreement,
    GradientCounts,
    Loss,
    Monitor,
    OperatingRegion,
    RelaxationGap,
    WeightedGradientCounts,
    adapters,
    every,
    row_summaries,
)
from gradlab.monitor.anatomy import Anatomy, anatomy_values
from gradlab.monitor.batch import BatchView
from tests.reference.anatomy_loops import anatomy_one_query
from tests.reference.geometry_loops import margins
from tests.reference.monitor_loops import anatomy_summary, per_query_values, quantiles
from tests.reference.operating_region_loops import gradient_count, proportion
from tests.reference.smooth_ap_loops import cosine, slope, smooth_ap_one_query
from tests.reference.tie_aware_loops import average_precision

TAU = 0.1


def _fsum_mean(values):
    return math.fsum(values) / len(values)


def _width(tau, eps):
    """The half-width w of the operating region: slope(w) = eps, by bracketing (scipy)."""
    return brentq(lambda d: slope(d, tau) - eps, 0.0, 50 * tau, xtol=1e-15)


def _random(shape, seed, dtype=torch.float64):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


def _compute(quantity, batch):
    with torch.no_grad():
        return {key: value.item() for key, value in quantity.compute(batch).items()}


# --- summaries: finite entries only, quantiles at 10/50/90 % -----------------------------------


def test_summaries_drop_nan_and_infinities_and_take_the_10_50_90quantiles():
    finite = [0.3, -1.2, 4.0, 2.5, 0.0, 7.25, -0.5, 1.0, 3.3, 9.0, 0.1]
    row = [*finite[:4], math.nan, *finite[4:8], math.inf, -math.inf, *finite[8:]]
    second = [5.0, math.nan, math.nan]
    rows = torch.tensor([row, [*second, *[math.nan] * 11]], dtype=torch.float64)
    values = row_summaries(["first", "second"], rows)
    got = {key: value.item() for key, value in values.items()}
    for prefix, kept in (("first", finite), ("second", [5.0])):
        assert got[f"{prefix}_mean"] == pytest.approx(_fsum_mean(kept), rel=1e-15)
        for name, expected in zip(("q10", "q50", "q90"), quantiles(kept), strict=True):
            assert got[f"{prefix}_{name}"] == pytest.approx(expected, rel=1e-15), (prefix, name)
    empty = row_summaries(["none"], torch.full((1, 4), math.nan))
    assert all(math.isnan(value.item()) for value in empty.values())


@pytest.mark.parametrize(("prefixes", "shape"), [(["a"], (2, 3)), (["a", "b", "c"], (2, 3)),
                                                 (["a", "b", "c"], (3,))])  # fmt: skip
def test_summaries_refuse_rows_that_are_not_one_per_prefix(prefixes, shape):
    with pytest.raises(GradlabError) as refused:
        row_summaries(prefixes, torch.zeros(shape))
    assert str(refused.value) == (
        "row_summaries needs rows [k, n] with one row per prefix: got "
        f"{len(prefixes)} prefixes and rows of shape {shape}"
    )


# --- loss, embedding norms, gradient norms: a loss with a known gradient -----------------------


def test_loss_and_norms_equal_loops_on_a_loss_with_a_known_gradient(tmp_path):
    embeddings = _random((6, 3), 1).requires_grad_(True)
    weights = _random((6, 3), 2)  # d(sum(E * W))/dE = W
    quantities = [Loss(every(1)), EmbeddingNorms(every(1)), EmbeddingGradNorm(every(1))]
    with Monitor(tmp_path, quantities=quantities) as monitor:
        loss_fn = monitor.watch(lambda e, y: (e * weights).sum() + 0.125)
        loss = loss_fn(embeddings, torch.tensor([0, 0, 1, 1, 2, 2]))
        loss.backward()
        record = monitor.step()
    rows, grad_rows = embeddings.detach().tolist(), weights.tolist()
    expected_loss = math.fsum(x * w for r, g in zip(rows, grad_rows, strict=True)
                              for x, w in zip(r, g, strict=True)) + 0.125  # fmt: skip
    assert record["loss"] == pytest.approx(expected_loss, rel=1e-14)
    norms = [math.sqrt(math.fsum(x * x for x in r)) for r in rows]
    assert record["embedding_norm_mean"] == pytest.approx(_fsum_mean(norms), rel=1e-14)
    assert record["embedding_norm_min"] == pytest.approx(min(norms), rel=1e-14)
    assert record["embedding_norm_max"] == pytest.approx(max(norms), rel=1e-14)
    grad_norms = [math.sqrt(math.fsum(x * x for x in g)) for g in grad_rows]
    whole = math.sqrt(math.fsum(x * x for g in grad_rows for x in g))
    assert record["embedding_grad_norm"] == pytest.approx(whole, rel=1e-14)
    assert record["embedding_grad_norm_row_mean"] == pytest.approx(_fsum_mean(grad_norms),
                                                                   rel=1e-14)  # fmt: skip


# --- operating region: width and P, in-batch and cross-modal, at another eps --------------------


@pytest.mark.parametrize("eps", [0.005, 0.05])
def test_operating_region_in_batch_and_width_equal_loops(eps):
    embeddings, labels = _random((9, 4), 3), torch.tensor([0, 1, 2, 0, 1, 2, 0, 1, 3])
    got = _compute(OperatingRegion(eps=eps), BatchView(embeddings=embeddings, labels=labels,
                                                       tau=TAU))  # fmt: skip
    assert got["operating_region_width"] == pytest.approx(_width(TAU, eps), rel=1e-9)
    rows = [[cosine(a, b) for b in embeddings.tolist()] for a in embeddings.tolist()]
    seed = [proportion(r, TAU, eps) for r in rows]
    off = [proportion(r, TAU, eps, include_diagonal=False) for r in rows]
    others = [proportion([s for c, s in enumerate(r) if c != q], TAU, eps, include_diagonal=False)
              for q, r in enumerate(rows)]  # fmt: skip
    assert got["p_seed"] == pytest.approx(_fsum_mean(seed), rel=1e-12)
    assert got["p_off_diagonal"] == pytest.approx(_fsum_mean(off), rel=1e-12)
    assert got["p_without_query"] == pytest.approx(_fsum_mean(others), rel=1e-12)
    assert "p_cross_modal" not in got


def test_operating_region_cross_modal_equals_loops():
    queries, candidates = _random((4, 3), 4), _random((7, 3), 5)
    positives = torch.arange(4).unsqueeze(1) == (torch.arange(7) % 4).unsqueeze(0)
    batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=TAU)
    got = _compute(OperatingRegion(eps=0.02), batch)
    rows = [[cosine(q, c) for c in candidates.tolist()] for q in queries.tolist()]
    expected = _fsum_mean([proportion(r, TAU, 0.02) for r in rows])
    assert got["p_cross_modal"] == pytest.approx(expected, rel=1e-12)
    assert got["operating_region_width"] == pytest.approx(_width(TAU, 0.02), rel=1e-9)
    assert not {"p_seed", "p_off_diagonal", "p_without_query"} & set(got)



def test_a_float16_batch_with_an_all_zero_row_logs_p_and_margins_of_its_cosines(tmp_path):
    """A zero embedding scores 0 against every row (as in float32); in float16 its cosine
    scores were NaN from finite embeddings, so P came out of NaN comparisons (below 0) while
    nothing was flagged as not finite. Cosines of these rows are 0 or 1 exactly in float16."""
    rows = [[1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [0.0, 3.0], [0.0, 0.0], [1.0, 0.0]]
    labels = [0, 0, 1, 1, 2, 2]
    embeddings = torch.tensor(rows, dtype=torch.float16, requires_grad=True)
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(TAU))
        loss_fn(embeddings, torch.tensor(labels)).backward()
        record = monitor.step()
    scores = [[cosine(a, b) if any(a) and any(b) else 0.0 for b in rows] for a in rows]
    assert math.isfinite(record["loss"])
    seed = [proportion(r, TAU, 0.005) for r in scores]
    off = [proportion(r, TAU, 0.005, include_diagonal=False) for r in scores]
    others = [proportion([s for c, s in enumerate(r) if c != q], TAU, 0.005,
                         include_diagonal=False) for q, r in enumerate(scores)]  # fmt: skip
    assert record["p_seed"] == pytest.approx(_fsum_mean(seed), rel=1e-12)
    assert record["p_off_diagonal"] == pytest.approx(_fsum_mean(off), rel=1e-12)
    assert record["p_without_query"] == pytest.approx(_fsum_mean(others), rel=1e-12)
    keep = [[q != c for c in range(6)] for q in range(6)]
    same = [[labels[q] == labels[c] and q != c for c in range(6)] for q in range(6)]
    expected = margins(scores, same, keep)
    for key, value in zip(("margin_positive_score", "margin_hardest_negative", "margin_mean",
                           "margin_violation_share", "margin_recall_at_1"), expected,
                          strict=True):  # fmt: skip
        assert record[key] == pytest.approx(value, rel=1e-12), key

# --- gradient counts: the candidate mask, both code paths, cross-modal -------------------------


def _in_batch_count_reference(embeddings, labels, tau, threshold, weighted):
    size = len(labels)
    counts = []
    for q in range(size):
        row = [cosine(embeddings[q], embeddings[c]) for c in range(size)]
        positives = [labels[c] == labels[q] and c != q for c in range(size)]
        keep = [c != q for c in range(size)]  # the query is not its own candidate
        counts.append(gradient_count(row, positives, tau, threshold, weighted, keep))
    return counts


def _batch_with_record(embeddings, labels, tau):
    """A BatchView holding what a watched gradlab SmoothAPLoss recorded (its positive groups)."""
    with recording() as records:
        gradlab.SmoothAPLoss(tau)(embeddings, labels)
    return BatchView(embeddings=embeddings, labels=labels, tau=tau, loss_record=records[-1])


# One positive group (every class of 3), two groups, four groups (on a CPU the positives packed
# row by row), and a class holding most of the batch (rows with more positives than half the
# columns: the search of every entry).
LABEL_SETS = [[0, 1, 2] * 3, [0, 0, 1, 1, 1, 2, 2, 3, 3, 3], [0, 0, 1, 1, 1, 2, 2, 2, 2, 3, 3,
              3, 3, 3, 4], [0, 0, 0, 0, 0, 0, 0, 1, 1, 2]]  # fmt: skip


@pytest.mark.parametrize("labels", LABEL_SETS)
@pytest.mark.parametrize("recorded", [True, False])
@pytest.mark.parametrize("threshold", [0.005, 0.5, 5.0])  # 5 > 1 / (4 tau): an empty window
def test_plain_and_weighted_counts_equal_loops_without_the_query(labels, recorded, threshold):
    embeddings = _random((len(labels), 3), len(labels)) * 0.3
    tensor = torch.tensor(labels)
    batch = (_batch_with_record(embeddings, tensor, TAU) if recorded
             else BatchView(embeddings=embeddings, labels=tensor, tau=TAU))  # fmt: skip
    quantity = GradientCounts(eps=threshold, weighted=True)
    got = _compute(quantity, batch)
    # it declares what it logs, and needs what the plain counts need, SmoothAP's terms for the
    # weighted ones (optional: a loss without them logs the plain counts)
    assert set(quantity.keys) == set(got) == {
        f"{name}{suffix}" for name in ("gradient_count_mean", "queries_without_gradient")
        for suffix in ("", "_weighted")}  # fmt: skip
    assert quantity.needs >= GradientCounts(eps=threshold).needs
    assert "smooth_ap_terms" in quantity.optional_needs
    for suffix, weighted in (("", False), ("_weighted", True)):
        counts = _in_batch_count_reference(embeddings.tolist(), labels, TAU, threshold, weighted)
        assert got[f"gradient_count_mean{suffix}"] == pytest.approx(_fsum_mean(counts), rel=1e-12)
        has_positive = [labels.count(label) > 1 for label in labels]
        without = sum(c == 0 and p for c, p in zip(counts, has_positive, strict=True))
        assert got[f"queries_without_gradient{suffix}"] == without


@pytest.mark.parametrize("cls", [GradientCounts, WeightedGradientCounts])
def test_the_counts_take_eps_and_still_read_threshold_with_a_future_warning(cls):
    # the slope bound was `threshold` here and `eps` in OperatingRegion and gradient_counts
    labels = [0, 0, 1, 1, 2, 2]
    embeddings = _random((6, 3), 6) * 0.3
    batch = BatchView(embeddings=embeddings, labels=torch.tensor(labels), tau=TAU)
    counts = _in_batch_count_reference(embeddings.tolist(), labels, TAU, 0.5, False)
    assert _compute(cls(eps=0.5), batch)["gradient_count_mean"] == pytest.approx(
        _fsum_mean(counts), rel=1e-12)
    assert _fsum_mean(counts) != pytest.approx(_fsum_mean(  # the setting is read: 0.5 counts
        _in_batch_count_reference(embeddings.tolist(), labels, TAU, 0.005, False)))
    with pytest.warns(FutureWarning, match=f"^{cls.__name__}'s threshold is now called eps") \
            as said:
        old = cls(threshold=0.5)
    assert [w.filename for w in said] == [__file__]  # at the caller's line
    assert (old.eps, old.threshold) == (0.5, 0.5)
    assert _compute(old, batch)["gradient_count_mean"] == pytest.approx(_fsum_mean(counts),
                                                                         rel=1e-12)
    with pytest.raises(GradlabError) as caught:
        cls(eps=0.5, threshold=0.5)
    assert str(caught.value) == f"{cls.__name__} got eps and threshold, its old name; pass eps only"
    saved = cls(eps=0.5).__dict__  # pickled before the rename: its setting under threshold
    state = {("threshold" if key == "eps" else key): value for key, value in saved.items()}
    restored = cls.__new__(cls)
    restored.__setstate__(state)
    assert restored.eps == 0.5 and "threshold" not in vars(restored)


@pytest.mark.parametrize("recorded", [True, False])
def test_a_batch_of_singletons_has_no_count(recorded):
    """No query has a positive (so none has a ranking to learn): every key is NaN, undefined,
    on each path (without the loss's groups, no positive to pack)."""
    embeddings = _random((5, 3), 5)
    labels = torch.arange(5)
    batch = (_batch_with_record(embeddings, labels, TAU) if recorded
             else BatchView(embeddings=embeddings, labels=labels, tau=TAU))  # fmt: skip
    got = _compute(GradientCounts(), batch)
    assert set(got) == {"gradient_count_mean", "queries_without_gradient"}
    assert all(math.isnan(value) for value in got.values())


def test_counts_reach_zero_for_some_queries_and_not_for_queries_without_positives():
    # Spread-out scores and a large threshold: some queries with positives count nothing, and a
    # singleton (no positive, count 0) must not be counted among the queries without gradient.
    labels = [0, 0, 1, 1, 2, 3, 3, 4]
    embeddings = _random((len(labels), 3), 7)
    got = _compute(
        GradientCounts(threshold=2.0),
        BatchView(embeddings=embeddings, labels=torch.tensor(labels), tau=TAU),
    )
    counts = _in_batch_count_reference(embeddings.tolist(), labels, TAU, 2.0, False)
    has_positive = [labels.count(label) > 1 for label in labels]
    without = sum(c == 0 and p for c, p in zip(counts, has_positive, strict=True))
    assert 0 < without < sum(has_positive)
    assert got["queries_without_gradient"] == without
    assert "gradient_count_mean_weighted" not in got  # weighted=False by default


def _cross_modal_counts(queries, candidates, positives, threshold, weighted):
    """Per query: the gradient count of the float64 loops (every candidate kept)."""
    counts = []
    for q, vector in enumerate(queries.tolist()):
        row = [cosine(vector, c) for c in candidates.tolist()]
        counts.append(gradient_count(row, positives[q].tolist(), TAU, threshold, weighted))
    return counts


def test_cross_modal_counts_keep_every_candidate():
    queries, candidates = _random((5, 3), 8) * 0.2, _random((9, 3), 9) * 0.2
    positives = torch.arange(5).unsqueeze(1) == (torch.arange(9) % 5).unsqueeze(0)
    positives[4] = False  # a query without positive
    batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=TAU)
    got = _compute(GradientCounts(threshold=0.3, weighted=True), batch)
    for suffix, weighted in (("", False), ("_weighted", True)):
        counts = _cross_modal_counts(queries, candidates, positives, 0.3, weighted)
        assert got[f"gradient_count_mean{suffix}"] == pytest.approx(_fsum_mean(counts), rel=1e-12)
        without = sum(c == 0 for c, p in zip(counts, positives.any(1).tolist(), strict=True) if p)
        assert got[f"queries_without_gradient{suffix}"] == without


@pytest.mark.parametrize(("num_queries", "num_candidates"), [(4, 9), (9, 4)])
@pytest.mark.parametrize("recorded", [True, False])
def test_cross_modal_counts_of_two_positive_groups_are_per_query(
    num_queries, num_candidates, recorded
):
    """Queries with one and with two positives (two groups), fewer or more than the candidates."""
    queries = _random((num_queries, 3), 31) * 0.2
    candidates = _random((num_candidates, 3), 32) * 0.2
    positives = torch.zeros(num_queries, num_candidates, dtype=torch.bool)
    for q in range(num_queries):
        positives[q, q % num_candidates] = True
        if q % 2:
            positives[q, (q + 1) % num_candidates] = True
    record = None
    if recorded:
        with recording() as records:
            gradlab.SmoothAPLoss(TAU)(queries, candidates=candidates, positives=positives)
        record = records[-1]
    batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=TAU,
                      loss_record=record)  # fmt: skip
    got = _compute(GradientCounts(threshold=0.3, weighted=True), batch)
    for suffix, weighted in (("", False), ("_weighted", True)):
        counts = _cross_modal_counts(queries, candidates, positives, 0.3, weighted)
        assert got[f"gradient_count_mean{suffix}"] == pytest.approx(_fsum_mean(counts), rel=1e-12)
        assert got[f"queries_without_gradient{suffix}"] == sum(c == 0 for c in counts)


# --- relaxation gap: smooth minus exact, the query not its own candidate -----------------------


def test_relaxation_gap_is_smooth_minus_exact_in_batch_and_cross_modal():
    labels = [0, 1, 0, 2, 1, 0, 3, 2]
    embeddings = _random((len(labels), 3), 10)
    queries, candidates = _random((3, 3), 11), _random((6, 3), 12)
    positives = torch.tensor([[1, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]]) > 0
    for tau in (0.05, 1.0):  # a large tau: smooth AP far from the exact AP (a clear sign)
        expected_smooth, expected_exact = [], []
        for q, label in enumerate(labels):
            others = [c for c in range(len(labels)) if c != q]
            scores = [cosine(embeddings[q].tolist(), embeddings[c].tolist()) for c in others]
            relevant = [labels[c] == label for c in others]
            if any(relevant):
                expected_smooth.append(smooth_ap_one_query(scores, relevant, tau))
                order = sorted(range(len(others)), key=lambda k, s=scores: -s[k])
                expected_exact.append(average_precision(order, relevant))
        batch = BatchView(embeddings=embeddings, labels=torch.tensor(labels), tau=tau)
        _check_gap(_compute(RelaxationGap(), batch), expected_smooth, expected_exact)
        expected_smooth, expected_exact = [], []
        for q, vector in enumerate(queries.tolist()):
            relevant = positives[q].tolist()
            if any(relevant):
                scores = [cosine(vector, c) for c in candidates.tolist()]
                expected_smooth.append(smooth_ap_one_query(scores, relevant, tau))
                order = sorted(range(len(scores)), key=lambda k, s=scores: -s[k])
                expected_exact.append(average_precision(order, relevant))
        batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=tau)
        _check_gap(_compute(RelaxationGap(), batch), expected_smooth, expected_exact)


def _check_gap(got, smooth, exact):
    assert got["smooth_ap"] == pytest.approx(_fsum_mean(smooth), rel=1e-12)
    assert got["exact_ap"] == pytest.approx(_fsum_mean(exact), rel=1e-12)
    gap = _fsum_mean(smooth) - _fsum_mean(exact)
    assert abs(gap) > 1e-3
    assert got["relaxation_gap"] == pytest.approx(gap, rel=1e-10)


# --- gradient agreement against a SmoothAP written here (torch autograd, loops) ---------------


def _loop_smooth_ap_loss(embeddings, labels, tau, include_query):
    """``1 - mean smooth AP`` with Python loops over torch scalars (differentiable, float64)."""
    normalized = embeddings / embeddings.norm(dim=1, keepdim=True)
    return loop_smooth_ap_loss_of_scores(normalized @ normalized.T, labels, tau, include_query)


def loop_smooth_ap_loss_of_scores(scores, labels, tau, include_query):
    """``1 - mean smooth AP`` of a cosine score matrix, by the loops (differentiable)."""
    size, aps = len(labels), []
    for q in range(size):
        candidates = [c for c in range(size) if include_query or c != q]
        positive = [c for c in candidates if labels[c] == labels[q]]
        if not positive:
            continue
        total = 0
        for i in positive:
            rank_all, rank_positive = 1.0, 1.0
            for j in candidates:
                if j != i:
                    g = torch.sigmoid((scores[q, j] - scores[q, i]) / tau)
                    rank_all = rank_all + g
                    rank_positive = rank_positive + (g if j in positive else 0.0)
            total = total + rank_positive / rank_all
        aps.append(total / len(positive))
    return 1 - sum(aps) / len(aps)


class SmoothAPLoss(torch.nn.Module):
    """Shaped like pytorch-metric-learning's (``temperature``, the query its own candidate),
    which the Monitor is told is SmoothAP through a registered adapter (:func:`_as_smooth_ap`):
    the loop SmoothAP plus ``extra * sum(E * R)``."""

    def __init__(self, temperature, extra, direction):
        super().__init__()
        self.temperature, self.extra, self.direction = temperature, extra, direction

    def forward(self, embeddings, labels):
        loss = _loop_smooth_ap_loss(embeddings, labels.tolist(), self.temperature, True)
        return loss + self.extra * (embeddings * self.direction).sum()


def _as_smooth_ap(loss_fn, inputs):
    """A loss adapter, registered by the test, that recognises the SmoothAPLoss above."""
    if not isinstance(loss_fn, SmoothAPLoss):
        return None
    return adapters.embedding_adapter(loss_fn, loss_kind="include_query",
                                      loss_tau=loss_fn.temperature)  # fmt: skip


class LoopExcludingQuery(gradlab.SmoothAPLoss):
    """gradlab's SmoothAPLoss as the Monitor sees it (query excluded), computed by the loops."""

    def forward(self, embeddings, labels):
        return _loop_smooth_ap_loss(embeddings, labels.tolist(), self.tau, False)


@pytest.mark.parametrize(("include_query", "extra"), [(True, 0.0), (True, 0.01), (False, 0.0)])
def test_gradient_agreement_against_an_independent_smooth_ap(tmp_path, monkeypatch,
                                                            include_query, extra):  # fmt: skip
    monkeypatch.setattr(adapters, "ADAPTERS", [_as_smooth_ap, *adapters.ADAPTERS])
    embeddings = _random((8, 3), 13).requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    direction = _random((8, 3), 14)
    loss_fn = (SmoothAPLoss(0.2, extra, direction) if include_query
               else LoopExcludingQuery(0.2))  # fmt: skip
    with Monitor(tmp_path, quantities=[GradientAgreement(every(1))]) as monitor:
        loss = monitor.watch(loss_fn)(embeddings, labels)
        loss.backward()
        record = monitor.step()
    # The reference gradient of SmoothAP alone, by autograd through the loops.
    leaf = embeddings.detach().clone().requires_grad_(True)
    _loop_smooth_ap_loss(leaf, labels.tolist(), 0.2, include_query).backward()
    analytic, actual = leaf.grad.flatten(), embeddings.grad.flatten()
    assert torch.allclose(actual, analytic + extra * direction.flatten(), rtol=1e-12, atol=1e-15)
    expected_cosine = torch.dot(analytic, actual) / (analytic.norm() * actual.norm())
    expected_error = (analytic - actual).norm() / analytic.norm()
    assert record["gradient_agreement_cosine"] == pytest.approx(expected_cosine.item(), abs=1e-12)
    assert record["gradient_agreement_relative_error"] == pytest.approx(
        expected_error.item(), rel=1e-9, abs=1e-12
    )
    if extra:
        assert record["gradient_agreement_relative_error"] > 0.1  # a visible disagreement
        assert record["gradient_agreement_cosine"] < 0.999


# --- anatomy: every logged key against the loop definitions, with a candidate mask ------------


def test_anatomy_values_equal_loops_for_every_key():
    queries, columns = 7, 12
    generator = torch.Generator().manual_seed(15)
    magnitude = 10.0 ** (
        -4 * torch.rand(queries, columns, generator=generator, dtype=torch.float64)
    )
    grad = torch.randn(queries, columns, generator=generator, dtype=torch.float64) * magnitude
    grad[2] = 0.0  # a query without any gradient
    grad[3, ::2] = 1e-12  # entries at or below the absolute threshold
    scores = torch.rand(queries, columns, generator=generator, dtype=torch.float64)
    positives = (torch.arange(columns) % queries).unsqueeze(0) == torch.arange(queries).unsqueeze(1)
    positives[5] = False  # no positive: left out of every summary
    positives[6] = True  # no negative: left out too
    candidates = torch.ones(queries, columns, dtype=torch.bool)
    candidates[:, 0] = False  # a column that is no candidate (its gradient is the largest)
    grad[:, 0] = 10.0
    absolute, relative = 1e-9, 0.05
    got = {k: v.item() for k, v in anatomy_values("x_", grad, scores, positives, candidates,
                                                  absolute, relative).items()}  # fmt: skip
    per_query = [anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                   candidates[q].tolist(), absolute, relative)
                 for q in range(queries)]  # fmt: skip
    kept = [a for a in per_query if a["num_positives"] > 0 and a["num_negatives"] > 0]
    assert len(kept) == queries - 2
    expected = anatomy_summary(kept)
    assert set(got) == {f"x_{key}" for key in expected}
    for key, value in expected.items():
        assert got[f"x_{key}"] == pytest.approx(value, rel=1e-12, abs=1e-15), key
    assert 0 < expected["queries_without_gradient"] < 1
    assert len({a["active_negatives"] for a in kept}) > 2  # the quantiles are not all equal


def test_anatomy_quantity_uses_its_thresholds_and_the_default_ones():
    from gradlab.functional.gradient_anatomy import (
        DEFAULT_ABSOLUTE_THRESHOLD,
        DEFAULT_RELATIVE_THRESHOLD,
    )
    from gradlab.monitor.batch import ScoreCapture

    assert (DEFAULT_ABSOLUTE_THRESHOLD, DEFAULT_RELATIVE_THRESHOLD) == (1e-10, 1e-2)
    generator = torch.Generator().manual_seed(16)
    grad = torch.randn(5, 8, generator=generator, dtype=torch.float64)
    grad *= 10.0 ** (-3 * torch.rand(5, 8, generator=generator, dtype=torch.float64))
    scores = torch.rand(5, 8, generator=generator, dtype=torch.float64)
    positives = (torch.arange(8) % 5).unsqueeze(0) == torch.arange(5).unsqueeze(1)
    capture = ScoreCapture("i2t", scores, positives, grad=grad)
    batch = BatchView(embeddings=scores, positives=positives, score_captures=[capture])
    for quantity, (absolute, relative) in (
        (Anatomy(), (1e-10, 1e-2)),
        (Anatomy(relative_threshold=0.3), (1e-10, 0.3)),
        (Anatomy(absolute_threshold=0.5), (0.5, 1e-2)),
    ):
        got = _compute(quantity, batch)
        active = [anatomy_one_query(grad[q].tolist(), scores[q].tolist(), positives[q].tolist(),
                                    [True] * 8, absolute, relative)["active_negatives"]
                  for q in range(5)]  # fmt: skip
        assert got["anatomy_i2t_active_negatives_mean"] == pytest.approx(_fsum_mean(active))


# --- decomposition on a batch where CB outweighs AD for a query ---------------------------------


def test_decomposition_summaries_equal_loops_where_cb_outweighs_ad():
    from gradlab.monitor.quantities import Decomposition

    labels = [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]
    embeddings = _random((12, 4), 3)
    loops = per_query_values(embeddings.tolist(), labels, TAU)
    assert any(a < c for a, c in zip(loops["ad"], loops["cb"], strict=True))
    batch = BatchView(embeddings=embeddings, labels=torch.tensor(labels), tau=TAU)
    got = _compute(Decomposition(), batch)
    names = ("ad_norm", "cb_norm", "grad_norm", "ad_share", "ratio", "cosine")
    for key, name in zip(("ad", "cb", "grad", "ad_share", "ratio", "cosine"), names, strict=True):
        values = loops[key]
        assert got[f"decomposition_{name}_mean"] == pytest.approx(_fsum_mean(values), rel=1e-9)
        for level, expected in zip(("q10", "q50", "q90"), quantiles(values), strict=True):
            assert got[f"decomposition_{name}_{level}"] == pytest.approx(expected, rel=1e-9)


def test_decomposition_of_pairs_has_no_cb_term_and_no_ratio_or_cosine():
    # One positive per query: CB sums over the query's other positives, of which there are none.
    from gradlab.monitor.quantities import Decomposition

    labels = [0, 0, 1, 1, 2, 2, 3, 3]
    embeddings = _random((8, 4), 5)
    loops = per_query_values(embeddings.tolist(), labels, TAU)
    assert loops["cb"] == [0.0] * 8 and all(value > 0 for value in loops["ad"])
    got = _compute(Decomposition(), BatchView(embeddings=embeddings, labels=torch.tensor(labels),
                                              tau=TAU))  # fmt: skip
    assert got["decomposition_cb_norm_mean"] == 0.0
    assert got["decomposition_ad_norm_mean"] == pytest.approx(_fsum_mean(loops["ad"]), rel=1e-9)
    assert all(math.isnan(got[f"decomposition_{name}_{level}"]) for name in ("ratio", "cosine")
               for level in ("mean", "q10", "q50", "q90"))  # fmt: skip


# --- values stay on the embeddings' device -------------------------------------------------------


def test_sync_free_quantities_compute_on_the_embeddings_device():
    """The meta device stands in for an accelerator (no GPU here): a tensor made on the CPU by
    mistake (a dropped ``device=``) fails to mix with it or shows in the values' device."""
    from gradlab.monitor import DegenerateBatches
    from gradlab.validation import skip_value_checks

    embeddings = _random((12, 4), 18).to("meta")
    labels = (torch.arange(12) % 3).to("meta")
    batch = BatchView(embeddings=embeddings, labels=labels, loss=embeddings.sum(), tau=TAU,
                      embedding_grad=embeddings * 2, degenerate_batches=2)  # fmt: skip
    quantities = [Loss(), EmbeddingNorms(), EmbeddingGradNorm(), OperatingRegion(),
                  GradientCounts(), DegenerateBatches()]  # fmt: skip
    with torch.no_grad(), skip_value_checks():
        values = {k: v for q in quantities for k, v in q.compute(batch).items()}
        values.update(row_summaries(["rows"], torch.randn(1, 5).to("meta")))
    assert len(values) > 15
    assert {value.device.type for value in values.values()} == {"meta"}


def test_an_empty_operating_region_gives_zero_proportions():
    # eps above the sigmoid's largest slope 1/(4 tau): the region is empty, w = 0, every P = 0.
    embeddings, labels = _random((6, 3), 19), torch.tensor([0, 0, 1, 1, 2, 2])
    batch = BatchView(embeddings=embeddings, labels=labels, tau=TAU)
    got = _compute(OperatingRegion(eps=1.01 / (4 * TAU)), batch)
    assert got == {"operating_region_width": 0.0, "p_seed": 0.0, "p_off_diagonal": 0.0,
                   "p_without_query": 0.0}  # fmt: skip


@pytest.mark.parametrize(
    ("size", "undefined"),
    [
        (1, {"p_off_diagonal", "p_without_query"}),  # no pair i != j
        (2, {"p_without_query"}),  # no other candidate pair
        (3, set()),
    ],
)
def test_small_batches_log_nan_for_the_proportions_they_do_not_define(size, undefined):
    embeddings = _random((size, 3), 20)
    batch = BatchView(embeddings=embeddings, labels=torch.arange(size) % 2, tau=TAU)
    got = _compute(OperatingRegion(eps=0.05), batch)
    assert set(got) == {"p_seed", "p_off_diagonal", "p_without_query", "operating_region_width"}
    assert {key for key, value in got.items() if math.isnan(value)} == undefined
    rows = [[cosine(a, b) for b in embeddings.tolist()] for a in embeddings.tolist()]
    assert got["p_seed"] == pytest.approx(_fsum_mean([proportion(r, TAU, 0.05) for r in rows]))


def test_relaxation_gap_with_more_queries_than_candidates():
    queries, candidates = _random((7, 3), 21), _random((3, 3), 22)
    positives = (torch.arange(7) % 3).unsqueeze(1) == torch.arange(3).unsqueeze(0)
    batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=1.0)
    smooth, exact = _cross_modal_aps(queries, candidates, positives, 1.0)
    _check_gap(_compute(RelaxationGap(), batch), smooth, exact)


def _cross_modal_aps(queries, candidates, positives, tau):
    """Per query: smooth AP and exact AP from the float64 loops."""
    smooth, exact = [], []
    for q, vector in enumerate(queries.tolist()):
        relevant = positives[q].tolist()
        scores = [cosine(vector, c) for c in candidates.tolist()]
        smooth.append(smooth_ap_one_query(scores, relevant, tau))
        order = sorted(range(len(scores)), key=lambda k, s=scores: -s[k])
        exact.append(average_precision(order, relevant))
    return smooth, exact


def test_relaxation_gap_of_float32_scores_averages_in_float64():
    """Saturated sigmoids make every smooth AP exact in float32 (1, 1 and 1/2); their mean 5/6
    is not a float32 number, so a float32 average would miss the float64 one by ~1e-8."""
    queries = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    candidates = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    positives = torch.tensor([[True, False], [True, False], [True, False]])
    batch = BatchView(embeddings=queries, candidates=candidates, positives=positives, tau=0.01)
    smooth, exact = _cross_modal_aps(queries, candidates, positives, 0.01)
    assert smooth == exact == [1.0, 1.0, 0.5]
    got = _compute(RelaxationGap(), batch)
    assert got["smooth_ap"] == pytest.approx(_fsum_mean(smooth), rel=1e-12)
    assert got["exact_ap"] == pytest.approx(_fsum_mean(exact), rel=1e-12)


def _on_meta(tensor):
    return None if tensor is None else tensor.detach().to("meta")


def test_quantities_reading_the_loss_record_compute_on_the_embeddings_device():
    """As above, for the quantities that need SmoothAP's groups: given the watched loss's record
    (moved to the meta device), nothing is read back and every value stays on that device."""
    import dataclasses

    from gradlab.functional.losses import SmoothAPForward
    from gradlab.validation import skip_value_checks

    embeddings = _random((12, 4), 23)
    labels = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 4, 4])  # two groups: 2 and 1 positives
    with recording() as records:
        gradlab.SmoothAPLoss(TAU)(embeddings, labels)
    record = records[-1]
    groups = [dataclasses.replace(g, queries=_on_meta(g.queries),
                                  positive_columns=_on_meta(g.positive_columns))
              for g in record.forward.groups]  # fmt: skip
    ranks = [(_on_meta(a), _on_meta(c)) for a, c in record.forward.ranks]
    on_meta = record._replace(scores=_on_meta(record.scores), positives=_on_meta(record.positives),
                              candidate_mask=_on_meta(record.candidate_mask),
                              forward=SmoothAPForward(groups, ranks))  # fmt: skip
    batch = BatchView(embeddings=_on_meta(embeddings), labels=_on_meta(labels), tau=TAU,
                      loss_record=on_meta)  # fmt: skip
    with torch.no_grad(), skip_value_checks():
        values = {**RelaxationGap().compute(batch),
                  **GradientCounts(weighted=True).compute(batch)}  # fmt: skip
    assert len(values) == 7
    assert {value.device.type for value in values.values()} == {"meta"}


# --- more cases the mutants asked for -----------------------------------------------------------


@pytest.mark.parametrize("recorded", [True, False])
def test_counts_in_an_empty_operating_region_are_zero(recorded):
    labels = torch.tensor([0, 0, 1, 1, 1, 2])
    embeddings = _random((6, 3), 24)
    batch = (_batch_with_record(embeddings, labels, TAU) if recorded
             else BatchView(embeddings=embeddings, labels=labels, tau=TAU))  # fmt: skip
    got = _compute(GradientCounts(threshold=1.01 / (4 * TAU), weighted=True), batch)
    assert got["gradient_count_mean"] == 0.0 and got["gradient_count_mean_weighted"] == 0.0
    assert got["queries_without_gradient"] == 5.0  # every query with a positive (not label 2)


def test_half_precision_norms_are_taken_in_float64():
    # 300 in float16: the squares (9e4) overflow float16's 65504, the norms (about 520) do not.
    embeddings = torch.full((4, 3), 300.0, dtype=torch.float16)
    batch = BatchView(embeddings=embeddings, embedding_grad=embeddings, tau=TAU)
    got = {**_compute(EmbeddingNorms(), batch), **_compute(EmbeddingGradNorm(), batch)}
    norm = math.sqrt(3 * 300.0**2)
    assert got["embedding_norm_mean"] == pytest.approx(norm, rel=1e-12)
    assert got["embedding_grad_norm"] == pytest.approx(2 * norm, rel=1e-12)  # sqrt(4) rows


def test_agreement_is_only_computed_for_a_smooth_ap_loss_on_in_batch_embeddings():
    embeddings, labels = _random((6, 3), 25), torch.tensor([0, 0, 1, 1, 2, 2])
    grad = _random((6, 3), 26)
    common = dict(embeddings=embeddings, embedding_grad=grad, tau=TAU, loss_tau=TAU)
    assert _compute(GradientAgreement(), BatchView(**common, labels=labels)) == {}  # no kind
    positives = torch.eye(6, dtype=torch.bool)
    cross = BatchView(**common, candidates=_random((6, 3), 27), positives=positives,
                      loss_kind="exclude_query")  # fmt: skip
    assert _compute(GradientAgreement(), cross) == {}
    assert _compute(GradientAgreement(), BatchView(embeddings=embeddings, labels=labels, tau=TAU,
                                                   loss_kind="exclude_query")) == {}  # fmt: skip


def test_agreement_uses_the_loss_tau_or_the_monitor_tau_without_one(tmp_path):
    embeddings = _random((8, 3), 13).requires_grad_(True)
    labels = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
    _loop_smooth_ap_loss(embeddings, labels.tolist(), 0.2, False).backward()
    grad = embeddings.grad.clone()
    for loss_tau, monitor_tau in ((0.2, 0.7), (None, 0.2)):
        batch = BatchView(embeddings=embeddings.detach(), labels=labels, embedding_grad=grad,
                          tau=monitor_tau, loss_kind="exclude_query",
                          loss_tau=loss_tau)  # fmt: skip
        got = _compute(GradientAgreement(), batch)
        assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-12), loss_tau


@pytest.mark.parametrize(
    ("labels", "positives", "flag"),
    [
        ([0, 0, 1], None, 0.0),  # queries 0 and 1: one positive, one negative each
        ([0, 0, 0], None, 1.0),  # no negative anywhere
        (None, [[True, False], [True, False], [True, False]], 0.0),  # per row: one and one
        (None, [[True, True], [False, False]], 1.0),  # no row has both
    ],
)
@pytest.mark.parametrize("layout_made", [False, True], ids=["alone", "after_the_layout"])
def test_degenerate_batch_flag_per_row(labels, positives, flag, layout_made):
    from gradlab.monitor import DegenerateBatches

    if labels is not None:
        batch = BatchView(embeddings=_random((len(labels), 2), 28), labels=torch.tensor(labels))
    else:
        mask = torch.tensor(positives)
        batch = BatchView(embeddings=_random((mask.shape[0], 2), 28), positives=mask,
                          candidates=_random((mask.shape[1], 2), 29))  # fmt: skip
    if layout_made:  # another quantity of the step made the masks: the counts come from them
        assert batch.layout is not None
    assert _compute(DegenerateBatches(), batch) == {"degenerate_batch": flag}


@pytest.mark.parametrize("queries", [0, 1])
def test_anatomy_of_no_or_one_summarized_query(queries):
    # No query: every value NaN. One query with a positive and a negative: its own values.
    generator = torch.Generator().manual_seed(30)
    grad = torch.randn(2, 5, generator=generator, dtype=torch.float64)[:queries]
    grad[:, 1] = math.nan  # a NaN gradient counts as 0
    scores = torch.rand(2, 5, generator=generator, dtype=torch.float64)[:queries]
    positives = torch.tensor([[True, False, True, False, False]] * 2)[:queries]
    got = {k: v.item() for k, v in anatomy_values("x_", grad, scores, positives).items()}
    if queries == 0:
        assert all(math.isnan(value) for value in got.values())
        return
    one = anatomy_one_query(grad[0].tolist(), scores[0].tolist(), positives[0].tolist(),
                            [True] * 5, 1e-10, 1e-2)  # fmt: skip
    assert got["x_active_negatives_mean"] == one["active_negatives"]
    assert got["x_active_negatives_q90"] == one["active_negatives"]
    assert got["x_active_positives"] == one["active_positives"]
    assert got["x_hardest_10pct_share"] == pytest.approx(one["share_10"], rel=1e-12)


@pytest.mark.parametrize("queries", [4, 0])  # 0: no query at all, the quantiles' empty case
def test_anatomy_values_compute_on_the_embeddings_device(queries):
    from gradlab.validation import skip_value_checks

    grad = _random((4, 6), 31)[:queries].to("meta")
    scores = _random((4, 6), 32)[:queries].to("meta")
    positives = (torch.eye(4, 6, dtype=torch.bool))[:queries].to("meta")
    with skip_value_checks():
        values = anatomy_values("x_", grad, scores, positives)
    assert {value.device.type for value in values.values()} == {"meta"}


# --- gradient agreement in the precisions and magnitudes a training step hands the Monitor ----
# The reference is autograd through the loop SmoothAP in float64 on the very values the quantity
# sees; the expected agreement is the mathematical one (cosine 1, relative error 0) with a
# tolerance derived from the precision the quantity computes in.

AGREEMENT_LABELS = torch.tensor([0, 1, 2, 0, 1, 2, 0, 3])
AGREEMENT_TAU = 0.2


def _reference_grad(embeddings, labels=AGREEMENT_LABELS, tau=AGREEMENT_TAU):
    """dLoss/dE of SmoothAP (query excluded) in float64 by autograd through the loops."""
    leaf = embeddings.detach().to(torch.float64).requires_grad_(True)
    _loop_smooth_ap_loss(leaf, labels.tolist(), tau, False).backward()
    return leaf.grad


def _agreement(embeddings, grad, labels=AGREEMENT_LABELS, tau=AGREEMENT_TAU):
    batch = BatchView(embeddings=embeddings, labels=labels, embedding_grad=grad, tau=tau,
                      loss_kind="exclude_query", loss_tau=tau)  # fmt: skip
    with torch.no_grad():
        got = GradientAgreement().compute(batch)
    return {key: value.item() for key, value in got.items()}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_chain_rule_is_taken_in_float32(dtype):
    # Half-precision scores are rounded (to 2^-11 or 2^-8), in the watched loss as in the
    # Monitor, so the reference differentiates the loops at the Monitor's own scores and takes
    # the chain rule back to the embeddings in float64. Norms far from the half-precision grid:
    # rounding them to it would scale each row of the analytic gradient by its own error.
    embeddings = (50 * _random((8, 3), 31)).to(dtype)
    batch = BatchView(embeddings=embeddings, labels=AGREEMENT_LABELS, tau=AGREEMENT_TAU)
    leaf = embeddings.to(torch.float64).requires_grad_(True)
    normalized = leaf / leaf.norm(dim=1, keepdim=True)
    product = normalized @ normalized.T  # its value replaced by the Monitor's scores below
    scores = batch.scores.to(torch.float64) + (product - product.detach())
    loop_smooth_ap_loss_of_scores(
        scores, AGREEMENT_LABELS.tolist(), AGREEMENT_TAU, False
    ).backward()
    got = _agreement(embeddings, leaf.grad)
    # float32 throughout: a few float32 roundings (2^-24 each) per entry, amplified by 1/tau;
    # half-precision norms would err by about 1e-4 (float16) or 1e-3 (bfloat16).
    assert got["gradient_agreement_relative_error"] < 1e-5
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-9)


def test_float32_gradient_is_compared_in_float64():
    # The gradient a float32 step backpropagates: the exact one rounded to float32. Rounding
    # moves the vector by about 2^-24 relatively, which changes the cosine of two nearly parallel
    # vectors only to second order (~1e-14); normalizing it in float32 would err by ~1e-8.
    embeddings = _random((8, 3), 32).to(torch.float32)
    grad = _reference_grad(embeddings).to(torch.float32)
    got = _agreement(embeddings, grad)
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-11)
    assert got["gradient_agreement_relative_error"] < 1e-5


def test_agreement_of_a_vanishing_gradient():
    # Each query's positive far above its negatives at a small tau: every sigmoid slope is about
    # exp(-1 / tau) / tau, so the gradient's norm is ~1e-13, far below torch's default
    # cosine_similarity eps (1e-8), which would clamp both norms and report a cosine near 0.
    centers = torch.eye(3, dtype=torch.float64)
    labels = torch.tensor([0, 0, 1, 1, 2, 2])
    embeddings = centers[labels] + 0.01 * _random((6, 3), 33)
    tau = 0.03
    grad = _reference_grad(embeddings, labels, tau)
    assert 1e-20 < grad.norm().item() < 1e-10  # the regime this test is about
    got = _agreement(embeddings, grad, labels, tau)
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-9)
    assert got["gradient_agreement_relative_error"] < 1e-9


@pytest.mark.parametrize("labels", [[0] * 6, list(range(6))], ids=["one class", "singletons"])
def test_agreement_without_ranking_signal_is_undefined_not_zero(labels):
    # every candidate a positive (AP 1 however they score), or no positive at all: SmoothAP's
    # gradient is 0 by definition
    labels = torch.tensor(labels)
    embeddings = _random((6, 3), 34)
    zero = torch.zeros_like(embeddings)
    both_zero = _agreement(embeddings, zero, labels)
    assert math.isnan(both_zero["gradient_agreement_cosine"])
    assert math.isnan(both_zero["gradient_agreement_relative_error"])
    # a loss that sends gradient where SmoothAP sends none: no direction, infinitely far
    # (however small that gradient: 1e-3 per entry)
    other = _agreement(embeddings, torch.full_like(embeddings, 1e-3), labels)
    assert math.isnan(other["gradient_agreement_cosine"])
    assert other["gradient_agreement_relative_error"] == math.inf


def test_agreement_with_a_zero_embedding_row():
    # a zero row has no direction: the loss sends it no gradient (gradlab's unit rows), and the
    # analytic gradient must not divide its tangent part by a floored norm of 0 (1e12 times)
    embeddings = _random((8, 3), 36)
    embeddings[2] = 0.0
    leaf = embeddings.clone().requires_grad_(True)
    rows = [leaf[i] / leaf[i].norm() if i != 2 else torch.zeros(3, dtype=torch.float64)
            for i in range(8)]  # fmt: skip
    normalized = torch.stack(rows)
    loop_smooth_ap_loss_of_scores(normalized @ normalized.T, AGREEMENT_LABELS.tolist(),
                                  AGREEMENT_TAU, False).backward()  # fmt: skip
    assert leaf.grad[2].abs().max() == 0 and leaf.grad.abs().max() > 0
    got = _agreement(embeddings, leaf.grad)
    assert got["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-12)
    assert got["gradient_agreement_relative_error"] < 1e-12


def test_agreement_of_smooth_ap_loss_with_a_zero_embedding_row(tmp_path):
    embeddings = _random((12, 6), 37).float()
    embeddings[0] = 0.0
    with Monitor(tmp_path, quantities=[GradientAgreement(every(1))]) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss_fn(embeddings.requires_grad_(True), torch.arange(4).repeat_interleave(3)).backward()
        record = monitor.step()
    assert record["gradient_agreement_cosine"] == pytest.approx(1.0, abs=1e-6)
    assert record["gradient_agreement_relative_error"] < 1e-5


def test_agreement_with_no_gradient_backpropagated_has_no_direction():
    # SmoothAP's gradient is not 0, the loss's is (a loss multiplied by 0): no cosine, and the
    # whole analytic gradient is the error
    embeddings = _random((8, 3), 35)
    got = _agreement(embeddings, torch.zeros_like(embeddings))
    assert math.isnan(got["gradient_agreement_cosine"])
    assert got["gradient_agreement_relative_error"] == 1.0


def test_decomposition_keeps_terms_whose_squares_underflow():
    """Every positive far above its query's negatives (D ~ -1.97, tau = 0.03): the AD terms are
    ~3e-27, normal float32 numbers whose squares underflow to 0, so an unscaled norm logs 0 and
    an AD share of NaN. The loops compute in Python floats, where the squares are still normal.
    One positive per query: CB is exactly 0, so the ratio and the cosine are undefined."""
    from gradlab.monitor.quantities import Decomposition

    tau = 0.03
    angles = [math.radians(degrees) for degrees in (0, 10, 180, 190)]
    embeddings = torch.tensor([[math.cos(angle), math.sin(angle)] for angle in angles])
    labels = [0, 0, 1, 1]
    loops = per_query_values(embeddings.tolist(), labels, tau)
    assert 0 < max(loops["ad"]) ** 2 < torch.finfo(torch.float32).tiny
    batch = BatchView(embeddings=embeddings, labels=torch.tensor(labels), tau=tau)
    got = _compute(Decomposition(), batch)
    for key, name in (("ad", "ad_norm"), ("cb", "cb_norm"), ("grad", "grad_norm"),
                      ("ad_share", "ad_share")):  # fmt: skip
        expected = _fsum_mean(loops[key])
        assert got[f"decomposition_{name}_mean"] == pytest.approx(expected, rel=1e-4), name
    assert loops["ratio"] == loops["cosine"] == []
    assert math.isnan(got["decomposition_ratio_mean"])
    assert math.isnan(got["decomposition_cosine_mean"])
