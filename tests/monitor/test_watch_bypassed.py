"""A Monitor whose watched loss is never called says so at the first step that would log.

The common slip: ``monitor.watch(loss_fn)`` without keeping its return value, so training
calls the original loss and every record is empty. Without the warning, ``metrics.jsonl`` holds
a header and nothing else, and nothing tells why.
"""

import inspect
import math
import warnings

import pytest
import torch

import gradlab
from gradlab.monitor import PRESETS, read_jsonl
from gradlab.monitor.anatomy import Anatomy
from gradlab.monitor.quantities import Loss
from gradlab.monitor.schedules import every


def _train(monitor, loss_fn, steps=3):
    line = None
    for _ in range(steps):
        embeddings = torch.randn(8, 4, requires_grad=True)
        loss_fn(embeddings, torch.arange(8) % 2).backward()
        line = inspect.currentframe().f_lineno + 1
        monitor.step()
    return line


def _unwatched(caught):
    return [w for w in caught if "logs nothing" in str(w.message)]


def test_training_with_the_original_loss_warns_once_at_the_callers_line(tmp_path):
    loss_fn = gradlab.SmoothAPLoss(0.05)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            monitor.watch(loss_fn)  # the slip: the wrapped loss is dropped
            line = _train(monitor, loss_fn)
    told = _unwatched(caught)
    assert len(told) == 1
    assert "step 0" in str(told[0].message) and "monitor.watch() returned" in str(told[0].message)
    assert (told[0].filename, told[0].category) == (__file__, RuntimeWarning)
    assert told[0].lineno in range(line - 5, line + 1)  # inside _train's loop, at step()
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert records == []


def test_a_monitor_watching_nothing_says_nothing_is_watched(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            _train(monitor, gradlab.SmoothAPLoss(0.05))
    told = _unwatched(caught)
    assert len(told) == 1 and "no watched loss or attached module" in str(told[0].message)


def test_the_wrapped_loss_logs_and_does_not_warn(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            _train(monitor, monitor.watch(gradlab.SmoothAPLoss(0.05)))
    assert _unwatched(caught) == []
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]


def test_an_off_schedule_step_without_a_call_does_not_warn(tmp_path):
    never_due = [gradlab.monitor.Loss(lambda step: step >= 5)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, quantities=never_due) as monitor:
            monitor.watch(gradlab.SmoothAPLoss(0.05))
            monitor.step()  # step 0 logs nothing by schedule: no call is expected
            monitor.close(log_last_step=False)
    assert _unwatched(caught) == []


def test_a_second_step_call_per_optimizer_step_warns_once_at_the_callers_line(tmp_path):
    # monitor.step() twice per optimizer step silently numbered the records 0, 2, 4...
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(3):
                embeddings = torch.randn(8, 4, requires_grad=True)
                loss_fn(embeddings, torch.arange(8) % 2).backward()
                monitor.step()
                line = inspect.currentframe().f_lineno + 1
                monitor.step()  # the slip
    told = [w for w in caught if "once per optimizer step" in str(w.message)]
    assert len(told) == 1
    assert (told[0].filename, told[0].lineno, told[0].category) == (__file__, line, RuntimeWarning)
    assert "step 1" in str(told[0].message)
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 2, 4]  # the records stay as they were


def test_the_second_step_call_warning_says_what_happened_and_what_to_do(tmp_path):
    with pytest.warns(RuntimeWarning) as caught:
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(2):
                loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2).backward()
                monitor.step()
                monitor.step()
    told = [str(w.message) for w in caught if "once per optimizer step" in str(w.message)]
    assert told == [
        "gradlab.Monitor: monitor.step() closed step 1 without a call of the watched loss since "
        "it closed step 0; if monitor.step() runs twice per optimizer step, the logged step "
        "numbers run ahead of the optimizer's: call monitor.step() once per optimizer step, "
        "after backward (later such steps are not warned about)"]


def test_one_step_call_per_watched_call_does_not_warn(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap") as monitor:  # off-schedule steps too
            _train(monitor, monitor.watch(gradlab.SmoothAPLoss(0.05)), steps=12)
    assert not [w for w in caught if "once per optimizer step" in str(w.message)]


def _before_backward(caught):
    return [w for w in caught if "before backward reached" in str(w.message)]


def _step_before_backward(folder, steps=3):
    """SmoothAP under the full preset, monitor.step() before loss.backward(): the warnings and
    the line of the slip."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(folder, preset="full", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            for _ in range(steps):
                loss = loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2)
                line = inspect.currentframe().f_lineno + 1
                monitor.step()  # the slip
                loss.backward()
    return _before_backward(caught), line


def test_a_step_closed_before_backward_warns_once_naming_what_logged_nothing(tmp_path):
    # monitor.step() before loss.backward(): the gradient quantities logged nothing, in silence
    told, _ = _step_before_backward(tmp_path)
    assert len(told) == 1 and told[0].category is RuntimeWarning
    assert str(told[0].message) == (
        "gradlab.Monitor: monitor.step() closed step 0 before backward reached the inputs of "
        "its last watched call, so embedding_grad_norm, gradient_agreement, anatomy logged "
        "nothing for it: call monitor.step() after loss.backward(), and make a call that is not "
        "trained after it (an evaluation, a display) under torch.no_grad() (later such steps "
        "are not warned about)")
    _, records = read_jsonl(tmp_path / "metrics.jsonl")
    assert not any("embedding_grad_norm" in record or "anatomy_active_negatives_mean" in record
                   for record in records)  # the records stay as they were


def test_an_attached_model_stepped_before_backward_is_told_the_slip(tmp_path):
    # an attached model has no loss value to read for the non-finite case: the plain slip
    model = torch.nn.Linear(4, 4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
            monitor.attach(model, torch.arange(8) % 2)
            output = model(torch.randn(8, 4)).sum()
            monitor.step()  # the slip
            output.backward()
    (told,) = _before_backward(caught)
    assert str(told.message).startswith(
        "gradlab.Monitor: monitor.step() closed step 0 before backward reached the inputs of "
        "its last watched call, so embedding_grad_norm")


def test_the_step_before_backward_warning_points_at_the_callers_step(tmp_path):
    (told,), line = _step_before_backward(tmp_path, steps=1)
    assert (told.filename, told.lineno) == (__file__, line)


def test_a_score_matrix_loss_stepped_before_backward_names_the_anatomy(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the anatomy alone: dL/dS is the only gradient a quantity reads
        with gradlab.Monitor(tmp_path, quantities=[Anatomy(every(1))]) as monitor:
            loss_fn = monitor.watch(gradlab.NTXentLoss(0.1))
            scores = torch.randn(4, 4, requires_grad=True)
            loss = loss_fn(scores, torch.eye(4, dtype=torch.bool))
            monitor.step()
            loss.backward()
    (told,) = _before_backward(caught)
    assert ", so anatomy logged nothing" in str(told.message)


@pytest.mark.parametrize("preset", ["full", "cheap"])
def test_steps_after_backward_and_steps_without_gradient_quantities_do_not_warn(tmp_path, preset):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path / preset, preset=preset, every=1) as monitor:
            _train(monitor, monitor.watch(gradlab.SmoothAPLoss(0.05)), steps=4)
        quantities = [Loss(every(1)), Anatomy(every(10))]  # the anatomy is due at step 0 only
        with gradlab.Monitor(tmp_path / "no_gradient", quantities=quantities) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            _train(monitor, loss_fn, steps=1)
            loss = loss_fn(torch.randn(8, 4, requires_grad=True), torch.arange(8) % 2)
            monitor.step()  # before backward, but nothing due at step 1 reads a gradient
            loss.backward()
        with gradlab.Monitor(tmp_path / "no_graph", preset="full", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            with torch.no_grad():  # no graph: no gradient to wait for
                loss_fn(torch.randn(8, 4), torch.arange(8) % 2)
            record = monitor.step()
    assert _before_backward(caught) == []
    assert "loss" in record and monitor.skipped_calls == 0  # the call was read as it is


@pytest.mark.parametrize("preset", ["cheap", "full"])
def test_embeddings_outside_the_graph_of_a_trained_loss_warn_once(tmp_path, preset):
    # a frozen encoder (its output made under no_grad) and a loss with its own parameters:
    # backward runs, but no gradient ever reaches the embeddings, and embedding_grad_norm
    # was left out of every record without a word; the full preset names every quantity
    # that reads that gradient

    class ProjectedSmoothAP(gradlab.SmoothAPLoss):
        """SmoothAP with a trained projection of its own (so that backward runs)."""

        def __init__(self):
            super().__init__(0.05)
            self.projection = torch.nn.Linear(4, 4)

        def forward(self, embeddings, labels):
            return super().forward(self.projection(embeddings), labels)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset=preset, every=1) as monitor:
            loss_fn = monitor.watch(ProjectedSmoothAP())
            reading = ", ".join(quantity.name for quantity in PRESETS[preset]
                                if "embedding_grad" in quantity.needs
                                and quantity.name not in monitor.not_logged)  # fmt: skip
            for _ in range(2):
                loss_fn(torch.randn(8, 4), torch.arange(8) % 2).backward()
                monitor.step()
    told = [w for w in caught if "do not require grad" in str(w.message)]
    assert not [w for w in caught if "built no graph" in str(w.message)]  # the loss built one
    assert len(told) == 1 and (told[0].category, told[0].filename) == (RuntimeWarning, __file__)
    assert str(told[0].message) == (
        "gradlab.Monitor: step 0: the embeddings the watched loss was called on do not require "
        f"grad (made under torch.no_grad() or detached: a frozen encoder), so {reading} "
        "logged nothing; the other quantities are logged (later such steps are not warned "
        "about)")
    assert "," in reading or preset == "cheap"


def test_a_call_with_gradients_off_says_so_when_it_builds_no_graph(tmp_path):
    # made under torch.no_grad() before any training call (so read, not passed through): the
    # warning gave "an evaluation outside torch.no_grad()" as the likely cause
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="cheap", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            model = torch.nn.Linear(4, 4)
            with torch.no_grad():
                loss_fn(model(torch.randn(8, 4)), torch.arange(8) % 2)
            monitor.step()
    told = [str(w.message) for w in caught if "built no graph" in str(w.message)]
    assert told == [
        "gradlab.Monitor: step 0: the watched call built no graph (it was made with gradients "
        "off: under torch.no_grad() or torch.inference_mode()), so embedding_grad_norm logged "
        "nothing; the other quantities are logged (later such steps are not warned about)"]


def test_a_call_that_builds_no_graph_says_which_quantities_log_nothing(tmp_path):
    # neither the embeddings nor the loss required grad (an evaluation without no_grad, a
    # frozen model): the gradient keys were missing from every record without a word
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, preset="full", every=1) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(0.05))
            reading = ", ".join(quantity.name for quantity in PRESETS["full"]
                                if quantity.needs & {"embedding_grad", "score_grad"}
                                and quantity.name not in monitor.not_logged)  # fmt: skip
            records = []
            for _ in range(2):
                loss_fn(torch.randn(8, 4), torch.arange(8) % 2)  # no graph: no backward
                records.append(monitor.step())
    told = [w for w in caught if "built no graph" in str(w.message)]
    assert len(told) == 1 and (told[0].category, told[0].filename) == (RuntimeWarning, __file__)
    assert str(told[0].message) == (
        "gradlab.Monitor: step 0: the watched call built no graph (neither the embeddings nor "
        "the loss require grad: an evaluation outside torch.no_grad(), or a frozen model), so "
        f"{reading} logged nothing; the other quantities are logged (later such steps are not "
        "warned about)")
    assert "embedding_grad_norm" in reading and "anatomy" in reading
    assert all("loss" in record and "embedding_grad_norm" not in record for record in records)


def _cosine_loss(rows, labels, scale=1.0):  # a user's loss; scale nan makes it not finite
    unit = torch.nn.functional.normalize(rows, dim=1)
    return (1 - unit @ unit.T).mean() * scale


@pytest.mark.parametrize(("scale", "said"), [
    (float("nan"), "step 1's watched loss was nan and got no backward"),
    (float("inf"), "step 1's watched loss was inf and got no backward"),
    (1.0, "monitor.step() closed step 1 before backward reached the inputs"),  # skipped anyway
])  # fmt: skip
def test_a_step_whose_loss_was_not_finite_and_skipped_is_told_to_skip_the_step(
    tmp_path, scale, said
):
    # the hint was to call monitor.step() after backward, which the loop did not skip by
    # mistake: it skipped backward for a loss that was not finite
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gradlab.Monitor(tmp_path, every=1) as monitor:
            watched = monitor.watch(_cosine_loss)
            for step in range(3):
                rows = torch.randn(8, 4, requires_grad=True)
                loss = watched(rows, torch.arange(4).repeat(2), scale if step == 1 else 1.0)
                if step != 1:  # the loop skips step 1's backward
                    loss.backward()
                monitor.step()
    messages = [str(w.message) for w in caught if "embedding_grad_norm logged nothing" in
                str(w.message)]  # fmt: skip
    assert len(messages) == 1 and said in messages[0], messages
    skip = "should skip monitor.step() too" in messages[0]
    assert skip == (not math.isfinite(scale))
    advice = (" logged nothing for it: a loop that skips backward and the optimizer step for a "
              "loss that is not finite should skip monitor.step() too, so that the records stay "
              "one per optimizer step (later such steps are not warned about)"
              if skip else
              " logged nothing for it: call monitor.step() after loss.backward(), and make a "
              "call that is not trained after it (an evaluation, a display) under "
              "torch.no_grad() (later such steps are not warned about)")  # fmt: skip
    assert messages[0].startswith(f"gradlab.Monitor: {said}")
    assert messages[0].endswith(advice), messages[0]
