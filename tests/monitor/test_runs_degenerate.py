"""The Monitor logs degenerate batches: the watched loss's count, and this batch's flag; the
gradient counts of a batch (or query) with nothing to rank."""

import math
import warnings

import pytest
import torch

import gradlab
from gradlab import Monitor
from gradlab.functional.layouts import RetrievalLayout
from gradlab.losses import DegenerateBatchWarning
from gradlab.models import EmbeddingMLP
from gradlab.monitor import DegenerateBatches, GradientCounts, every, read_jsonl
from gradlab.monitor.batch import BatchView

# Labels per step: steps 1 and 3 are degenerate (all singletons), the others are not.
LABELS = [torch.arange(8) % 2, torch.arange(8), torch.arange(8) % 4, torch.arange(8),
          torch.arange(8) % 2, torch.arange(8) % 2]  # fmt: skip


def test_the_monitor_logs_the_running_count_and_the_flag(tmp_path):
    torch.manual_seed(0)
    model = EmbeddingMLP(16, 4)
    with Monitor(tmp_path, preset="cheap", every=every(2)) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with pytest.warns(DegenerateBatchWarning):
            for labels in LABELS:
                loss_fn(model(torch.randn(8, 16)), labels).backward()
                monitor.step()
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 2, 4, 5]  # every 2, and the last at close()
    # Counted on every step (off-schedule ones included): 0 before step 1, 1 after, 2 after 3.
    assert [r["degenerate_batches"] for r in records] == [0, 1, 2, 2]
    assert [r["degenerate_batch"] for r in records] == [0, 0, 0, 0]


def test_a_logged_degenerate_batch_is_flagged_for_any_loss(tmp_path):
    def plain_loss(embeddings, labels):  # not gradlab's: it keeps no count
        return embeddings.pow(2).sum()

    with Monitor(tmp_path, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(plain_loss)
        for labels in LABELS[:2]:
            loss_fn(torch.randn(8, 4, requires_grad=True), labels).backward()
            monitor.step()
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["degenerate_batch"] for r in records] == [0.0, 1.0]
    assert all("degenerate_batches" not in r for r in records)


@pytest.mark.parametrize(
    ("labels", "flag"),
    [(torch.arange(6), 1.0), (torch.zeros(6, dtype=torch.long), 1.0),
     (torch.tensor([0, 0, 1, 2, 3, 4]), 0.0)],
)  # fmt: skip
def test_the_flag_of_in_batch_labels(labels, flag):
    values = DegenerateBatches().compute(BatchView(embeddings=torch.randn(6, 3), labels=labels))
    assert values["degenerate_batch"].item() == flag


def test_the_flag_of_a_cross_modal_mask():
    batch = BatchView(embeddings=torch.randn(2, 3), candidates=torch.randn(4, 3),
                      positives=torch.tensor([[True] * 4, [False] * 4]))  # fmt: skip
    assert DegenerateBatches().compute(batch)["degenerate_batch"].item() == 1.0
    batch.positives = torch.tensor([[True, False, False, False], [False] * 4])
    assert DegenerateBatches().compute(batch)["degenerate_batch"].item() == 0.0


def test_every_preset_logs_it():
    assert all(DegenerateBatches in classes for classes in gradlab.monitor.PRESETS.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # importing and listing presets warns nothing
        assert DegenerateBatches.name == "degenerate_batches"


@pytest.mark.parametrize("preset", ["default", "full"])
def test_an_empty_batch_logs_its_loss_and_flag_and_stops_nothing(tmp_path, preset):
    # a sampler's empty last batch: SmoothAP's loss is 0 there; nothing else is defined on
    # it, and the next batch logs every key again
    torch.manual_seed(0)
    model = EmbeddingMLP(16, 4)
    with Monitor(tmp_path, preset=preset, every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateBatchWarning)
            warnings.simplefilter("error", RuntimeWarning)  # no quantity fails
            for size in (8, 0, 8):
                loss_fn(model(torch.randn(size, 16)), torch.arange(size) % 2).backward()
                monitor.step()
        assert monitor.disabled == {}
    _, (full, empty, again) = read_jsonl(tmp_path / "metrics.jsonl")
    assert empty == {"step": 1, "loss": 0.0, "degenerate_batches": 1, "degenerate_batch": 1}
    assert set(again) == set(full)



@pytest.mark.parametrize("preset", ["default", "full"])
def test_a_cross_modal_batch_without_candidates_stops_nothing(tmp_path, preset):
    # queries with no candidate at all (a retrieval batch whose gallery came back empty): no
    # score, so no ranking statistic and no modality gap; the queries' own geometry stays, and
    # the next batch logs every key again
    torch.manual_seed(0)
    queries, candidates = torch.randn(3, 4), torch.randn(5, 4)
    positives = torch.eye(3, 5, dtype=torch.bool)
    with Monitor(tmp_path, preset=preset, every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateBatchWarning)
            warnings.simplefilter("error", RuntimeWarning)  # no quantity fails
            for size in (5, 0, 5):
                leaf = queries.clone().requires_grad_(True)
                loss_fn(leaf, candidates=candidates[:size].requires_grad_(True),
                        positives=positives[:, :size]).backward()  # fmt: skip
                monitor.step()
        # none for the empty batch; gradient agreement reads no cross-modal call at all
        assert set(monitor.disabled) == ({"gradient_agreement"} if preset == "full" else set())
    _, (full, empty, again) = read_jsonl(tmp_path / "metrics.jsonl")
    assert set(again) == set(full)
    assert set(full) - set(empty) == {"geometry_modality_gap"}
    norms = queries.double().norm(dim=1)
    assert empty["embedding_norm_mean"] == pytest.approx(norms.mean().item(), rel=1e-12)
    assert empty["loss"] == 0.0 and empty["degenerate_batch"] == 1
    ranking = [key for key in empty if key.startswith(("anatomy_", "margin_", "p_cross"))]
    assert ranking and all(math.isnan(empty[key]) for key in ranking)

def test_a_count_summed_over_ranks_is_logged_on_the_batch_device():
    # under torch.distributed the count arrives as a 0-d tensor (every rank's, summed)
    for count in (torch.tensor(7), torch.tensor(7.0, dtype=torch.float64), 7):
        view = BatchView(embeddings=torch.zeros(4, 2), labels=torch.arange(4),
                         degenerate_batches=count)  # fmt: skip
        assert DegenerateBatches().compute(view)["degenerate_batches"].item() == 7.0
    meta = BatchView(embeddings=torch.zeros(4, 2, device="meta"),
                     degenerate_batches=torch.tensor(7))  # fmt: skip
    assert DegenerateBatches().compute(meta)["degenerate_batches"].device.type == "meta"


GRADIENT_COUNT_KEYS = ("gradient_count_mean", "queries_without_gradient",
                       "gradient_count_mean_weighted", "queries_without_gradient_weighted")


@pytest.mark.parametrize("labels", [torch.zeros(8, dtype=torch.long), torch.arange(8)],
                         ids=["one class", "all singletons"])  # fmt: skip
def test_gradient_counts_of_a_batch_without_ranking_signal_are_nan(tmp_path, labels):
    # no query has a negative (one class) or a positive (singletons): SmoothAP is 0 with a zero
    # gradient; a count of the positives' slopes (one class: 15.25 entries per query) or 0
    # queries without gradient would say otherwise
    torch.manual_seed(0)
    records = []
    with Monitor(tmp_path, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DegenerateBatchWarning)
            for step_labels in (labels, torch.arange(8) % 2):
                embeddings = torch.randn(8, 4, requires_grad=True)
                loss_fn(embeddings, step_labels).backward()
                records.append(monitor.step())
    degenerate, ranked = records
    assert degenerate["degenerate_batch"] == 1 and degenerate["embedding_grad_norm"] == 0
    assert [key for key in GRADIENT_COUNT_KEYS if not math.isnan(degenerate[key])] == []
    assert ranked["degenerate_batch"] == 0
    assert [key for key in GRADIENT_COUNT_KEYS if not math.isfinite(ranked[key])] == []


def test_a_cross_modal_query_without_negatives_counts_no_entry():
    # tau = 1: every cosine difference (|D| <= 2) has slope >= G(2)(1 - G(2)) = 0.105 > eps,
    # so a query ranking its candidates counts positives x (candidates - 1) entries
    generator = torch.Generator().manual_seed(0)
    positives = torch.tensor([[True, True, True, True],  # no negative: nothing to rank
                              [True, False, False, False],  # 1 x 3 entries
                              [False, True, True, False]])  # 2 x 3 entries  # fmt: skip
    view = BatchView(embeddings=torch.randn(3, 5, generator=generator),
                     candidates=torch.randn(4, 5, generator=generator), positives=positives,
                     tau=1.0)  # fmt: skip
    values = {key: float(value) for key, value in GradientCounts().compute(view).items()}
    assert values == {"gradient_count_mean": (0 + 3 + 6) / 3, "queries_without_gradient": 0.0}


def test_a_query_whose_unmasked_candidates_are_all_positive_counts_no_entry():
    # a layout an integration set (its candidate mask drops columns of query 0): query 0's
    # candidates are its two positives, nothing to rank; query 1 ranks 1 positive x 3 others
    generator = torch.Generator().manual_seed(0)
    positives = torch.tensor([[True, True, False, False], [False, False, True, False]])
    mask = torch.tensor([[True, True, False, False], [True, True, True, True]])
    view = BatchView(embeddings=torch.randn(2, 5, generator=generator),
                     candidates=torch.randn(4, 5, generator=generator), positives=positives,
                     tau=1.0)  # fmt: skip
    view.layout = RetrievalLayout(view.layout.scores, positives, mask)
    values = {key: float(value) for key, value in GradientCounts().compute(view).items()}
    assert values["gradient_count_mean"] == (0 + 3) / 2
    assert values["queries_without_gradient"] == 0.0


def test_a_query_with_a_single_negative_still_ranks():
    # tau = 1: every entry is in the window; a query ranks with one negative left, in-batch
    # (3 of class 0 and 1 of class 1: 2 positives x 2 other candidates each) and cross-modal
    # (3 positives of 4 candidates: 3 x 3)
    generator = torch.Generator().manual_seed(0)
    in_batch = BatchView(embeddings=torch.randn(4, 5, generator=generator),
                         labels=torch.tensor([0, 0, 0, 1]), tau=1.0)  # fmt: skip
    values = {key: float(value) for key, value in GradientCounts().compute(in_batch).items()}
    assert values == {"gradient_count_mean": (4 + 4 + 4 + 0) / 4, "queries_without_gradient": 0.0}
    cross_modal = BatchView(embeddings=torch.randn(1, 5, generator=generator),
                            candidates=torch.randn(4, 5, generator=generator),
                            positives=torch.tensor([[True, True, True, False]]), tau=1.0)
    values = {key: float(value) for key, value in GradientCounts().compute(cross_modal).items()}
    assert values == {"gradient_count_mean": 9.0, "queries_without_gradient": 0.0}
