"""Several watched losses on one Monitor: each logged step is read with the loss called last.

An embedding loss (SmoothAP on ``[B, d]`` embeddings) and a score loss (NT-Xent on a ``[B, B]``
matrix) watched together, in either order: a step whose last call is the score loss logs no
embedding quantity (the matrix's rows are not embeddings), a step whose last call is SmoothAP
logs them from its embeddings, and no quantity is turned off for the run. References: norms and
the mean loss written out in float64 from the step's own tensors.
"""

import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import Monitor, read_jsonl


def _batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    embeddings = torch.randn(12, 5, generator=generator, dtype=torch.float64)
    labels = torch.arange(12) % 4
    # cosines, in [-1, 1], as NT-Xent scores them
    scores = torch.randn(6, 6, generator=generator, dtype=torch.float64).tanh()
    return embeddings, labels, scores


@pytest.mark.parametrize("order", ["score loss first", "embedding loss first"])
@pytest.mark.parametrize("preset", ["default", "full"])
def test_each_step_is_read_with_the_loss_called_last(tmp_path, order, preset):
    monitor = Monitor(tmp_path / "run", tau=0.05, preset=preset, every=1)
    if order == "score loss first":
        ntxent = monitor.watch(gradlab.NTXentLoss(0.1))
        smooth_ap = monitor.watch(gradlab.SmoothAPLoss(0.05))
    else:
        smooth_ap = monitor.watch(gradlab.SmoothAPLoss(0.05))
        ntxent = monitor.watch(gradlab.NTXentLoss(0.1))
    assert monitor.not_logged == {}  # each quantity is served by one of the two losses
    expected_norms = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # no quantity may fail and be turned off (checked below)
        for step in range(4):
            embeddings, labels, scores = _batch(step)
            embeddings.requires_grad_(True)
            scores.requires_grad_(True)
            positives = torch.eye(6, dtype=torch.bool)
            if step % 2 == 0:  # SmoothAP called last
                loss = ntxent(scores, positives) + smooth_ap(embeddings, labels)
                expected_norms[step] = sum(
                    float(torch.sqrt(sum(x * x for x in row))) for row in embeddings.detach()
                ) / len(embeddings)
            else:  # NT-Xent called last
                loss = smooth_ap(embeddings, labels) + ntxent(scores, positives)
            loss.backward()
            monitor.step()
    monitor.close()
    assert monitor.disabled == {}
    # the one warning: two losses before one step() log the last one's batch alone
    first, second = ("NTXentLoss", "SmoothAPLoss")
    assert [str(w.message) for w in caught] == [
        f"gradlab.Monitor: step 0: two watched losses were called before monitor.step() (the "
        f"watched loss {first}, then the watched loss {second}); the step logs the last call's "
        f"batch, so its values (the loss among them) are those of the watched loss {second} "
        "alone, not of their sum (later such steps are not warned about)"]
    assert caught[0].filename == __file__  # the line that called the loss
    assert caught[0].category is RuntimeWarning
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    by_step = {record["step"]: record for record in records}
    for step in (0, 2):
        assert by_step[step]["embedding_norm_mean"] == pytest.approx(expected_norms[step],
                                                                     rel=1e-12)  # fmt: skip
        assert "p_seed" in by_step[step] and "gradient_count_mean" in by_step[step]
        # SmoothAP's ranks weight the counts of the full preset
        assert ("gradient_count_mean_weighted" in by_step[step]) == (preset == "full")
    for step in (1, 3):
        record = by_step[step]
        assert not any(key.startswith(("embedding_norm", "embedding_grad", "geometry_", "p_seed"))
                       for key in record), sorted(record)  # fmt: skip
        assert "p_cross_modal" in record and "margin_mean" in record
        assert ("anatomy_i2t_active_negatives_mean" in record) == (preset == "full")


def test_a_quantity_neither_loss_serves_is_not_logged_with_both_reasons(tmp_path):
    monitor = Monitor(tmp_path / "run", tau=0.05, preset="full", every=1)
    monitor.watch(gradlab.NTXentLoss(0.1))
    monitor.watch(lambda scores, positives: scores.logsumexp(1).mean(), inputs="scores")
    # both on score matrices: the embedding norms need embeddings neither provides
    assert "embedding_norm" in monitor.not_logged
    assert "score matrix" in monitor.not_logged["embedding_norm"]
    monitor.close(log_last_step=False)


def test_the_full_preset_keeps_the_plain_gradient_counts_of_a_score_loss(tmp_path):
    # full adds to default: on a score loss (no SmoothAP ranks to weight by) it logs the plain
    # counts that default logs, the same values, and leaves out only the weighted ones
    logged = {}
    for preset in ("default", "full"):
        monitor = Monitor(tmp_path / preset, tau=0.05, preset=preset, every=1)
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))
        _, _, scores = _batch(0)
        loss_fn(scores.requires_grad_(True), torch.eye(6, dtype=torch.bool)).backward()
        logged[preset] = monitor.step()
        monitor.close()
        assert "gradient_counts" not in monitor.not_logged
    for key in ("gradient_count_mean", "queries_without_gradient"):
        assert logged["full"][key] == logged["default"][key]
    assert "gradient_count_mean_weighted" not in logged["full"]


def test_one_loss_called_twice_before_a_step_is_no_second_loss(tmp_path):
    """Gradient accumulation: the same watched loss on two micro-batches warns of nothing."""
    with Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for step in range(2):
                for micro in range(2):
                    embeddings, labels, _ = _batch(2 * step + micro)
                    loss_fn(embeddings.requires_grad_(True), labels).backward()
                monitor.step()


def test_an_evaluation_of_another_loss_before_the_training_call_is_no_second_loss(tmp_path):
    # a validation loss under no_grad before the step's training call: "two watched losses
    # were called ... not of their sum" was said, though nothing was summed
    with Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        train = monitor.watch(gradlab.SmoothAPLoss(0.05))
        validation = monitor.watch(gradlab.FastAPLoss())
        losses = []
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for step in range(2):
                embeddings, labels, _ = _batch(step)
                with torch.no_grad():
                    validation(embeddings, labels)
                loss = train(embeddings.clone().requires_grad_(True), labels)
                loss.backward()
                losses.append(loss.item())
                monitor.step()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["loss"] for record in records] == losses  # the training call's
    with pytest.warns(RuntimeWarning, match="two watched losses were called"):  # trained: said
        with Monitor(tmp_path / "summed", preset="cheap", every=1) as monitor:
            first = monitor.watch(gradlab.SmoothAPLoss(0.05))
            second = monitor.watch(gradlab.FastAPLoss())
            embeddings, labels, _ = _batch(0)
            leaf = embeddings.clone().requires_grad_(True)
            (first(leaf, labels) + second(leaf, labels)).backward()
            monitor.step()


def test_two_watched_losses_of_one_class_are_told_apart_in_the_warning(tmp_path):
    # "(the watched loss SmoothAPLoss, then the watched loss SmoothAPLoss)" said neither which
    # was which nor whose values the step logged
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        first, second = (monitor.watch(gradlab.SmoothAPLoss(tau)) for tau in (0.05, 0.1))
        embeddings = torch.randn(6, 4, requires_grad=True)
        labels = torch.tensor([0, 0, 1, 1, 2, 2])
        with pytest.warns(RuntimeWarning) as caught:
            (first(embeddings, labels) + second(embeddings, labels)).backward()
            monitor.step()
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: two watched losses were called before monitor.step() (the "
        "watched loss SmoothAPLoss, then another watched loss SmoothAPLoss); the step logs the "
        "last call's batch, so its values (the loss among them) are those of the one called "
        "last alone, not of their sum (later such steps are not warned about)"]


def test_two_monitors_follow_the_two_terms_of_one_objective(tmp_path):
    # the docs' recipe: a Monitor per loss, one backward, both stepped; each logs its own
    # loss, and both the whole objective's embedding gradient
    embeddings = torch.randn(16, 8, generator=torch.Generator().manual_seed(4),
                             dtype=torch.float64, requires_grad=True)  # fmt: skip
    labels = torch.arange(4).repeat_interleave(4)
    first, second = gradlab.SmoothAPLoss(0.05), gradlab.SmoothAPLoss(0.2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Monitor(tmp_path / "a", every=1) as one, Monitor(tmp_path / "b", every=1) as two:
            loss = one.watch(first)(embeddings, labels) + two.watch(second)(embeddings, labels)
            loss.backward()
            records = one.step(), two.step()
    assert [str(w.message) for w in caught] == []
    for record, loss_fn in zip(records, (first, second), strict=True):
        assert record["loss"] == pytest.approx(loss_fn(embeddings.detach(), labels).item(),
                                               rel=1e-12)  # fmt: skip
        whole = float(torch.sqrt(sum(g * g for g in embeddings.grad.flatten())))
        assert record["embedding_grad_norm"] == pytest.approx(whole, rel=1e-9)
