"""A record describes the batch the loss saw at the watched call, whatever the loop does to
its tensors between that call and ``monitor.step()`` (an optimizer updating an embedding table
or a leaf score matrix in place, a memory bank enqueued before the step)."""

from __future__ import annotations

import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import read_jsonl


def _records(log_dir):
    return read_jsonl(log_dir / "metrics.jsonl")[1]


def _norm_mean(embeddings: torch.Tensor) -> float:
    # reference: the rows' Euclidean norms averaged in float64, by a loop
    rows = embeddings.detach().double()
    return sum(float(row.pow(2).sum().sqrt()) for row in rows) / rows.shape[0]


def test_an_embedding_table_the_optimizer_moves_before_step_is_logged_as_the_loss_saw_it(
        tmp_path):
    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(12, 6))
    optimizer = torch.optim.SGD([table], lr=10.0)
    labels = torch.arange(4).repeat_interleave(3)
    seen = []
    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(3):
            seen.append(_norm_mean(table))
            optimizer.zero_grad()
            loss_fn(table, labels).backward()
            optimizer.step()  # the table moves in place before the step is read
            monitor.step()
    logged = [record["embedding_norm_mean"] for record in _records(tmp_path)]
    assert seen[0] != pytest.approx(seen[1], rel=1e-3)  # the table did move
    assert logged == pytest.approx(seen, rel=1e-6)


def test_a_leaf_score_matrix_the_optimizer_moves_is_logged_as_the_loss_saw_it(tmp_path):
    torch.manual_seed(1)
    scores = torch.nn.Parameter(torch.randn(6, 6) * 0.3)
    positives = torch.eye(6, dtype=torch.bool)
    optimizer = torch.optim.SGD([scores], lr=5.0)
    with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1), inputs="scores")
        seen = float(scores.detach().double().diagonal().mean())
        loss_fn(scores, positives).backward()
        optimizer.step()
        monitor.step()
    (record,) = _records(tmp_path)
    assert float(scores.detach().double().diagonal().mean()) != pytest.approx(seen, rel=1e-2)
    assert record["margin_positive_score"] == pytest.approx(seen, rel=1e-6)


def test_a_memory_bank_enqueued_before_step_is_read_as_the_loss_saw_it(tmp_path):
    torch.manual_seed(2)
    queries = torch.nn.functional.normalize(torch.randn(4, 8), dim=1).requires_grad_(True)
    start = torch.nn.functional.normalize(torch.randn(10, 8), dim=1)
    arriving = torch.nn.functional.normalize(torch.randn(4, 8), dim=1)
    positives = torch.zeros(4, 10, dtype=torch.bool)
    positives[torch.arange(4), torch.arange(4)] = True
    logged = {}
    for copy in (False, True):
        folder = tmp_path / str(copy)
        with gradlab.Monitor(folder, preset="default", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            bank = start.clone()  # no gradient: a buffer
            candidates = bank.clone() if copy else bank
            loss_fn(queries, candidates=candidates, positives=positives).backward()
            bank[:4] = arriving  # enqueued before the step
            with warnings.catch_warnings():
                warnings.simplefilter("error", RuntimeWarning)  # copied: nothing to warn of
                monitor.step()
        logged[copy] = _records(folder)[0]
    keys = [key for key in logged[True] if key.startswith(("geometry_", "margin_", "p_"))]
    assert keys  # the candidates' values reach these
    assert {key: logged[False][key] for key in keys} == {key: logged[True][key] for key in keys}


def test_a_tensor_changed_in_place_that_the_monitor_did_not_copy_is_warned_about(tmp_path):
    # a model's output (not a leaf) is read without a copy; changed in place before the step,
    # the record would describe other values than the loss's: said, once, at the step
    torch.manual_seed(3)
    model = torch.nn.Linear(6, 6)
    inputs, labels = torch.randn(12, 6), torch.arange(4).repeat_interleave(3)
    with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor, \
            pytest.warns(RuntimeWarning) as caught:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(2):
            embeddings = model(inputs)
            loss_fn(embeddings, labels).backward()
            with torch.no_grad():
                embeddings.mul_(2.0)
            monitor.step()
    assert [(str(w.message), w.filename) for w in caught] == [(
        "gradlab.Monitor: step 0: the embeddings of the watched call were changed in place "
        "before monitor.step() read them; the record describes the changed values, not those "
        "the loss saw. Change a copy, or call monitor.step() before changing them", __file__)]


def _one_step(log_dir, display: str | None):
    torch.manual_seed(0)
    embeddings = torch.randn(12, 6, requires_grad=True)
    labels = torch.arange(4).repeat_interleave(3)
    with gradlab.Monitor(log_dir, preset="full", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        loss = loss_fn(embeddings, labels)
        if display == "with gradients":
            loss_fn(embeddings, labels).item()  # shown in a progress bar, never backpropagated
        elif display == "under no_grad":
            with torch.no_grad():
                loss_fn(embeddings, labels).item()
        loss.backward()
        monitor.step()
    return _records(log_dir)[0]


def test_a_second_call_never_backpropagated_logs_no_gradient_it_did_not_get(tmp_path):
    # backward reached the embeddings from the first call's loss: the second call's own dL/dS
    # never existed, and was logged as zeros ("no query gets gradient")
    alone = _one_step(tmp_path / "alone", None)
    with pytest.warns(RuntimeWarning) as caught:
        shown = _one_step(tmp_path / "shown", "with gradients")
    # what reads a gradient of the loss: dL/dS (the anatomy) or dL/d embeddings
    gradient_keys = [key for key in alone if key.startswith(
        ("anatomy_", "gradient_agreement_", "embedding_grad_norm"))]
    assert gradient_keys and not set(gradient_keys) & set(shown)
    assert {key: shown[key] for key in shown if key != "step"} == {
        key: alone[key] for key in alone if key not in gradient_keys and key != "step"}
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: backward reached the watched call's inputs but not its loss: "
        "the step's last watched call was not backpropagated (a second call for display, such "
        "as loss_fn(...).item(): make it under torch.no_grad()), so "
        "embedding_grad_norm, gradient_agreement, anatomy logged nothing for it (later such "
        "steps are not warned about)"]


def test_a_display_call_under_no_grad_changes_no_value(tmp_path):
    alone = _one_step(tmp_path / "alone", None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shown = _one_step(tmp_path / "shown", "under no_grad")
    assert shown == alone


def test_close_does_not_log_a_last_step_whose_leaf_the_optimizer_moved_since(tmp_path):
    # the step close() adds off the schedule is read from its last call's tensors then: an
    # embedding table the optimizer moved since gave the norm after the step, not the loss's
    torch.manual_seed(4)
    table = torch.nn.Parameter(torch.randn(16, 8))
    optimizer = torch.optim.SGD([table], lr=10.0)
    labels = torch.arange(4).repeat_interleave(4)
    monitor = gradlab.Monitor(tmp_path, preset="cheap")  # the default schedule: 0-10, then 50
    loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
    for _ in range(13):
        loss_fn(table, labels).backward()
        optimizer.step()
        optimizer.zero_grad()
        monitor.step()
    with pytest.warns(RuntimeWarning) as caught:
        monitor.close()
    assert [(str(w.message), w.filename) for w in caught] == [(
        "gradlab.Monitor: close() does not log the last step (12): the tensors of its last "
        "watched call were changed in place since the call (an optimizer step on an embedding "
        "table, a memory bank enqueued), so the values the loss saw are gone (a step the "
        "schedule logs is read at its call: every=1 logs each one)", __file__)]
    assert [record["step"] for record in _records(tmp_path)] == list(range(11))


def test_close_logs_the_last_step_of_a_models_output_as_before(tmp_path):
    torch.manual_seed(5)
    model = torch.nn.Linear(8, 8)
    optimizer = torch.optim.SGD(model.parameters(), lr=10.0)
    inputs, labels = torch.randn(16, 8), torch.arange(4).repeat_interleave(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with gradlab.Monitor(tmp_path, preset="cheap") as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(13):
                embeddings = model(inputs)
                loss_fn(embeddings, labels).backward()
                optimizer.step()
                optimizer.zero_grad()
                monitor.step()
            last = _norm_mean(embeddings)
    records = _records(tmp_path)
    assert [record["step"] for record in records] == [*range(11), 12]
    assert records[-1]["embedding_norm_mean"] == pytest.approx(last, rel=1e-6)


def test_a_display_call_logs_no_observed_temperature_gradient_of_another_call(tmp_path):
    # the scale's gradient came from the trained call (and was divided by a factor the
    # display call never got): logged as the display call's, times the loop's 4, silently
    import math

    from gradlab.monitor.geometry import Temperature

    torch.manual_seed(6)
    log_scale = torch.nn.Parameter(torch.tensor(math.log(10.0)))

    def clip(scores, positives):
        return torch.nn.functional.cross_entropy(scores * log_scale.exp(),
                                                 positives.int().argmax(1))  # fmt: skip

    queries = torch.nn.functional.normalize(torch.randn(8, 8), dim=1).requires_grad_(True)
    keys = torch.nn.functional.normalize(torch.randn(8, 8), dim=1)
    positives = torch.eye(8, dtype=torch.bool)
    with gradlab.Monitor(tmp_path, every=1, quantities=[Temperature(scale=log_scale,
                                                                    log_scale=True)]) as monitor:
        loss_fn = monitor.watch(clip, inputs="scores")
        scores = queries @ keys.T
        loss = loss_fn(scores, positives)
        with pytest.warns(RuntimeWarning) as caught:
            loss_fn(scores, positives).item()  # shown, never backpropagated
            (4 * loss).backward()
            record = monitor.step()
    assert "temperature_log_scale_grad_observed" not in record
    assert "temperature_log_scale_grad" in record  # the closed form needs no backward
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: backward reached the watched call's inputs but not its loss: "
        "the step's last watched call was not backpropagated (a second call for display, such "
        "as loss_fn(...).item(): make it under torch.no_grad()), so the observed parameter "
        "gradient logged nothing for it (later such steps are not warned about)"]


def test_a_score_matrix_changed_in_place_is_named_as_scores(tmp_path):
    torch.manual_seed(7)
    model = torch.nn.Linear(6, 6)
    inputs, positives = torch.randn(6, 6), torch.eye(6, dtype=torch.bool)
    with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor, \
            pytest.warns(RuntimeWarning) as caught:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.1), inputs="scores")
        scores = 0.4 * model(inputs).tanh()  # cosine-like, within [-1, 1] when doubled
        loss_fn(scores, positives).backward()
        seen = float(scores.detach().double().diagonal().mean())
        with torch.no_grad():
            scores.mul_(2.0)
        record = monitor.step()
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: the scores of the watched call were changed in place before "
        "monitor.step() read them; the record describes the changed values, not those the loss "
        "saw. Change a copy, or call monitor.step() before changing them"]
    assert record["margin_positive_score"] == pytest.approx(2 * seen, rel=1e-6)  # as said


def test_a_view_of_an_embedding_table_the_optimizer_moves_is_copied_at_the_call(tmp_path):
    # a slice of a parameter is no leaf (it has a grad_fn) but shares the leaf's memory
    torch.manual_seed(8)
    table = torch.nn.Parameter(torch.randn(20, 6))
    optimizer = torch.optim.SGD([table], lr=10.0)
    labels = torch.arange(4).repeat_interleave(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # copied: nothing changed to warn of
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            seen = _norm_mean(table[:12])
            loss_fn(table[:12], labels).backward()
            optimizer.step()
            monitor.step()
    assert _norm_mean(table[:12]) != pytest.approx(seen, rel=1e-3)
    assert _records(tmp_path)[0]["embedding_norm_mean"] == pytest.approx(seen, rel=1e-6)


def _changed_model_scores(tmp_path, inputs, change: bool):
    torch.manual_seed(9)
    model = torch.nn.Linear(6, 6)
    features = torch.randn(6, 6)
    own = torch.eye(6, dtype=torch.bool)
    pairs = own.roll(1, dims=0) | own.roll(-1, dims=0)  # a loss of one's own: view k and k +- 1

    def in_batch_loss(scores, positives):  # the query's own column masked, as SimCLR's
        logits = scores.masked_fill(own, -1e4)
        return (torch.logsumexp(logits, dim=1) - (logits * positives).sum(1) / 2).mean()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
            if inputs == "in_batch_scores":
                loss_fn, positives = monitor.watch(in_batch_loss, inputs=inputs), pairs
            else:  # a loss of one's own: no recorder hands the Monitor a copy of its own
                loss_fn = monitor.watch(lambda s, p: torch.nn.functional.cross_entropy(
                    s, p.int().argmax(1)), inputs=inputs)
                positives = own
            scores = model(features)
            loss_fn(scores, positives).backward()
            if change:
                with torch.no_grad():
                    scores.neg_()  # every row's order reversed
            record = monitor.step()
    return record, [str(w.message) for w in caught if "changed in place" in str(w.message)]


def test_the_anatomy_reads_a_model_output_score_matrix_as_the_loss_saw_it(tmp_path):
    # the matrix is shared (not copied) for the other quantities, which are warned about; the
    # anatomy's own copy at the call keeps its values those the loss saw
    unchanged, _ = _changed_model_scores(tmp_path / "a", "scores", change=False)
    changed, told = _changed_model_scores(tmp_path / "b", "scores", change=True)
    assert len(told) == 1
    anatomy = [key for key in unchanged if key.startswith("anatomy_")]
    assert anatomy and {k: changed[k] for k in anatomy} == {k: unchanged[k] for k in anatomy}


def test_in_batch_scores_are_copied_by_their_mask_and_never_warned_about(tmp_path):
    unchanged, _ = _changed_model_scores(tmp_path / "a", "in_batch_scores", change=False)
    changed, told = _changed_model_scores(tmp_path / "b", "in_batch_scores", change=True)
    assert told == []  # the masked copy is the record's: nothing changed under it
    assert changed == unchanged


def test_model_output_candidates_changed_in_place_are_warned_about_by_name(tmp_path):
    torch.manual_seed(10)
    model = torch.nn.Linear(8, 8)
    queries = torch.randn(4, 8, requires_grad=True)
    positives = torch.zeros(4, 10, dtype=torch.bool)
    positives[torch.arange(4), torch.arange(4)] = True  # (its version counter moves: 1)
    with gradlab.Monitor(tmp_path, preset="default", every=1) as monitor, \
            pytest.warns(RuntimeWarning) as caught:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        candidates = model(torch.randn(10, 8))
        loss_fn(queries, candidates=candidates, positives=positives).backward()
        with torch.no_grad():
            candidates.mul_(-1.0)
        monitor.step()
    assert [str(w.message) for w in caught] == [
        "gradlab.Monitor: step 0: the candidates of the watched call were changed in place "
        "before monitor.step() read them; the record describes the changed values, not those "
        "the loss saw. Change a copy, or call monitor.step() before changing them"]


def test_two_tensors_changed_in_place_are_named_together_and_display_calls_said_once(
        tmp_path):
    torch.manual_seed(11)
    model = torch.nn.Linear(8, 8)
    positives = torch.eye(4, 10, dtype=torch.bool)
    with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor, \
            pytest.warns(RuntimeWarning) as caught:
        loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
        for _ in range(2):
            queries, candidates = model(torch.randn(4, 8)), model(torch.randn(10, 8))
            loss = loss_fn(queries, candidates=candidates, positives=positives)
            loss_fn(queries, candidates=candidates, positives=positives).item()  # a display
            loss.backward()
            with torch.no_grad():
                queries.mul_(-1.0)
                candidates.mul_(-1.0)
            monitor.step()
    told = [str(w.message) for w in caught]
    assert told[0] == (
        "gradlab.Monitor: step 0: the embeddings and candidates of the watched call were "
        "changed in place before monitor.step() read them; the record describes the changed "
        "values, not those the loss saw. Change a copy, or call monitor.step() before changing "
        "them")
    assert len([m for m in told if "was not backpropagated" in m]) == 1  # once, not per step


@pytest.mark.parametrize("change", ["clip", "zero", "scale"])
def test_a_leaf_s_gradient_changed_in_place_before_step_is_logged_as_backward_left_it(
        tmp_path, change):
    """Autograd stores a leaf's gradient as the tensor its hook saw: clipping it, zeroing it
    (zero_grad(set_to_none=False)) or dividing it (GradScaler.unscale_) in place before
    monitor.step() changed the logged norm. The record holds the gradient backward left."""
    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(12, 6))
    labels = torch.arange(4).repeat_interleave(3)
    loss_fn = gradlab.SmoothAPLoss(0.05)
    (reference,) = torch.autograd.grad(loss_fn(table, labels), table)  # no Monitor
    expected = float(reference.double().pow(2).sum().sqrt())  # the batch's gradient norm
    with gradlab.Monitor(tmp_path, quantities=[gradlab.monitor.EmbeddingGradNorm()],
                         every=1) as monitor:  # fmt: skip
        watched = monitor.watch(loss_fn)
        watched(table, labels).backward()
        if change == "clip":
            torch.nn.utils.clip_grad_norm_([table], 0.01)
        elif change == "zero":
            table.grad.zero_()
        else:
            table.grad.div_(1024.0)
        monitor.step()
    (record,) = _records(tmp_path)
    assert record["embedding_grad_norm"] == pytest.approx(expected, rel=1e-6)


def test_a_quantity_that_changes_the_gradient_it_reads_leaves_the_trained_one_alone(tmp_path):
    class Normalising(gradlab.monitor.Quantity):
        name = "normalising"
        needs = frozenset({"embedding_grad"})
        keys = ("normalised",)

        def compute(self, batch):
            grad = batch.embedding_grad
            return {"normalised": grad.div_(grad.norm()).norm()}  # in place: a bug of its own

    torch.manual_seed(0)
    table = torch.nn.Parameter(torch.randn(12, 6))
    labels = torch.arange(4).repeat_interleave(3)
    (reference,) = torch.autograd.grad(gradlab.SmoothAPLoss(0.05)(table, labels), table)
    with gradlab.Monitor(tmp_path, quantities=[Normalising()], every=1) as monitor:
        monitor.watch(gradlab.SmoothAPLoss(0.05))(table, labels).backward()
        monitor.step()
    assert torch.equal(table.grad, reference)  # the optimizer steps on backward's gradient
