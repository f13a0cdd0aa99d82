"""GradlabTrainerCallback's events called in the Trainer's order with stand-in arguments.

No ``Trainer.train`` (seconds, for the mutation group): ``args`` and ``state`` are stand-ins with
the fields the callback reads, and :func:`train_steps` calls the events as
``transformers.Trainer`` does (``on_step_begin``, the loss, backward, ``on_pre_optimizer_step``,
``global_step += 1``, ``on_step_end``, ``on_log`` on logging steps). Logged losses are compared
with the loss called outside the callback.
"""

import gc
import linecache
import sys
import warnings
import weakref
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import (
    DEFAULT_FOLDER,
    GradlabTrainerCallback,
    LossForward,
)
from gradlab.monitor import read_jsonl


def arguments(tmp_path, **fields):
    return SimpleNamespace(**{"output_dir": str(tmp_path / "out"), "logging_steps": 1,
                              "report_to": [], **fields})  # fmt: skip


def trainer_state(global_step=0, logging_steps=None):
    return SimpleNamespace(global_step=global_step, logging_steps=logging_steps, log_history=[])


def batch(seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(6, 6, generator=generator, requires_grad=True)
    return scores, torch.eye(6, dtype=torch.bool)


def train_steps(callback, args, state, loss_fn, steps, micro_batches=1, log_every=1):
    """The Trainer's event order; returns the logs dict of each logging step and the loss
    value of each micro-batch."""
    logs_per_step, losses = {}, []
    for _ in range(steps):
        callback.on_step_begin(args, state, None)
        for micro in range(micro_batches):
            scores, positives = batch(100 * state.global_step + micro)
            value = loss_fn(scores, positives=positives)  # keywords reach the loss too
            value.backward()
            losses.append(value.item())
        callback.on_pre_optimizer_step(args, state, None)
        state.global_step += 1
        callback.on_step_end(args, state, None)
        if state.global_step % log_every == 0:
            logs = {"loss": losses[-1]}
            state.log_history.append({**logs, "step": state.global_step})
            callback.on_log(args, state, None, logs=logs)
            logs_per_step[state.global_step] = logs
    return logs_per_step, losses


def reference_loss(seed):
    return gradlab.NTXentLoss(0.05)(*batch(seed)).item()


def test_records_carry_the_global_step_after_the_optimizer_step_and_reach_the_logs(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap", prefix="g/")
    args, state = arguments(tmp_path), trainer_state()
    assert callback.run_dir is None  # no train() yet
    callback.on_train_begin(args, state, None)
    logs, losses = train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 3)
    callback.on_train_end(args, state, None)
    assert callback.monitor is None and callback.run_dir == tmp_path / "out" / DEFAULT_FOLDER
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3]  # as log_history counts
    assert losses == pytest.approx([reference_loss(100 * step) for step in range(3)], rel=1e-6)
    for record, entry in zip(records, state.log_history, strict=True):
        step = record["step"]
        assert logs[step]["g/loss"] == record["loss"] == pytest.approx(losses[step - 1])
        assert entry["step"] == step and entry["g/loss"] == record["loss"]
        assert "g/step" not in logs[step] and entry["loss"] == logs[step]["loss"]
        gradlab_keys = {key for key in logs[step] if key.startswith("g/")}
        assert gradlab_keys == {f"g/{key}" for key in record if key != "step"}


def test_with_gradient_accumulation_the_last_micro_batch_of_each_step_is_logged(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    _, losses = train_steps(callback, args, state, loss_fn, 2, micro_batches=3)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]
    assert [record["loss"] for record in records] == pytest.approx(
        [reference_loss(2), reference_loss(102)], rel=1e-6)
    assert losses[2] == pytest.approx(reference_loss(2), rel=1e-6)


def test_a_resumed_training_continues_the_step_numbers(tmp_path):
    callback = GradlabTrainerCallback(tmp_path / "run", preset="cheap")
    args, state = arguments(tmp_path), trainer_state(global_step=10)
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 2)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [11, 12]
    assert [entry["step"] for entry in state.log_history if "gradlab/loss" in entry] == [11, 12]


def test_calls_outside_a_training_step_are_passed_through_and_not_logged(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    assert loss_fn(*batch(0)).item() == reference_loss(0)  # before training starts
    callback.on_train_begin(args, state, None)
    loss_fn(*batch(5)).backward()  # an evaluation before the first step
    callback.on_step_begin(args, state, None)
    loss_fn(*batch(0)).backward()
    callback.on_pre_optimizer_step(args, state, None)
    state.global_step += 1
    callback.on_step_end(args, state, None)
    loss_fn(*batch(5)).backward()  # an evaluation between the steps
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1]
    assert records[0]["loss"] == pytest.approx(reference_loss(0), rel=1e-6)


def test_on_log_adds_each_step_once_and_only_to_its_own_history_entry(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    callback.on_log(args, state, None, logs={"loss": 1.0})  # nothing recorded yet
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 1)
    assert "gradlab/loss" in state.log_history[-1]
    summary = {"train_runtime": 1.0}  # the Trainer's closing summary at the same step
    state.log_history.append({**summary, "step": 1})
    callback.on_log(args, state, None, logs=summary)
    assert summary == {"train_runtime": 1.0}
    assert "gradlab/loss" not in state.log_history[-1]
    callback.on_log(args, state, None, logs=None)  # no logs: nothing to do
    state.global_step = 2  # a log of a later step whose record does not exist
    later = {"loss": 2.0}
    state.log_history.append({**later, "step": 2})
    callback.on_log(args, state, None, logs=later)
    assert later == {"loss": 2.0} and "gradlab/loss" not in state.log_history[-1]
    callback.on_train_end(args, state, None)


def test_the_history_entry_of_another_step_is_left_alone(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 1, log_every=2)
    state.log_history.append({"eval_loss": 3.0, "step": 0})  # not this step's entry
    logs = {"loss": 1.0}
    callback.on_log(args, state, None, logs=logs)
    assert "gradlab/loss" in logs and state.log_history[-1] == {"eval_loss": 3.0, "step": 0}
    callback.on_train_end(args, state, None)


@pytest.mark.parametrize(
    ("options", "state_steps", "argument_steps", "logged"),
    [
        ({}, 2, 1, [2, 4]),  # the state's logging_steps first
        ({}, None, 3, [3, 4]),  # then the arguments'
        ({}, None, 0, [1, 2, 3, 4]),  # then every step
        ({"every": 1}, 2, 2, [1, 2, 3, 4]),  # an explicit schedule is kept
    ],
)
def test_without_a_schedule_the_monitor_logs_on_the_logging_steps(tmp_path, options, state_steps,
                                                                 argument_steps, logged):
    callback = GradlabTrainerCallback(preset="cheap", **options)
    args = arguments(tmp_path, logging_steps=argument_steps)
    state = trainer_state(logging_steps=state_steps)
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 4)
    callback.on_train_end(args, state, None)  # and the last step, 4, if the schedule skipped it
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == logged


def test_explicit_quantities_keep_their_own_schedules(tmp_path):
    from gradlab.monitor import quantities

    callback = GradlabTrainerCallback(quantities=[quantities.Loss()])
    args, state = arguments(tmp_path, logging_steps=3), trainer_state()
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 2)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]  # the default schedule, not 3


def test_without_an_output_dir_the_folder_is_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path, output_dir=None), trainer_state()
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 1)
    callback.on_train_end(args, state, None)
    assert (tmp_path / DEFAULT_FOLDER / "metrics.jsonl").is_file()


def test_a_second_training_feeds_its_own_monitor(tmp_path):
    callback = GradlabTrainerCallback(tmp_path / "run", preset="cheap", every=2, resume=True)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, loss_fn, 3)
    callback.on_train_begin(args, state, None)  # not closed: the next train() closes it
    train_steps(callback, args, state, loss_fn, 1)
    callback.on_train_end(args, state, None)
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    # Step 3 (off the schedule) of the unclosed run is not logged; step 4 is the second run's.
    assert len(headers) == 2 and [record["step"] for record in records] == [2, 4]
    assert records[1]["loss"] == pytest.approx(reference_loss(300), rel=1e-6)


def test_an_evaluation_after_the_last_step_does_not_hide_it(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap", every=2)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    loss_fn(*batch(7))  # an evaluation before the first step
    train_steps(callback, args, state, loss_fn, 3)
    loss_fn(*batch(7))  # the evaluation at the end of training, after on_step_end
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [2, 3]  # the last step, off the schedule
    assert records[1]["loss"] == pytest.approx(reference_loss(200), rel=1e-6)


def test_an_unattached_callback_warns_once_naming_the_backends(tmp_path):
    def run(callback, report_to):
        args, state = arguments(tmp_path, report_to=report_to), trainer_state()
        callback.on_train_begin(args, state, None)
        train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 2)
        callback.on_train_end(args, state, None)

    with pytest.warns(RuntimeWarning, match=r"not attached.*\(wandb, tensorboard\) ran before") \
            as caught:
        run(GradlabTrainerCallback(tmp_path / "a", preset="cheap"), ["wandb", "tensorboard"])
    (warning,) = [w for w in caught if "not attached" in str(w.message)]
    text = str(warning.message)
    assert text.startswith("GradlabTrainerCallback was not attached with callback.attach(trainer)")
    assert text.endswith("did not receive gradlab's values (metrics.jsonl and "
                         "state.log_history have them)")  # where the values are instead
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run(GradlabTrainerCallback(tmp_path / "b", preset="cheap"), [])
        attached = GradlabTrainerCallback(tmp_path / "c", preset="cheap")
        attached.attach(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[])))
        run(attached, ["wandb"])


def reporting(name):
    return type(name, (), {"__module__": "transformers.integrations.integration_utils"})()


def test_attach_puts_the_callback_before_the_first_reporting_callback_once():
    other, wandb, board = object(), reporting("WandbCallback"), reporting("TensorBoardCallback")
    callback = GradlabTrainerCallback()
    callbacks = [other, wandb, callback, board]
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=callbacks))
    assert callback.attach(trainer) is callback and callback.attached
    assert callbacks == [other, callback, wandb, board]
    plain = [other]
    GradlabTrainerCallback().attach(SimpleNamespace(callback_handler=SimpleNamespace(
        callbacks=plain)))  # fmt: skip
    assert plain[0] is other and len(plain) == 2  # no reporting callback: at the end
    with pytest.raises(GradlabError, match=r"^trainer must be a transformers\.Trainer.*Namespace"):
        callback.attach(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=None)))


class _WeakTrainer:
    """A trainer as attach reads one (a callback_handler), which takes weak references."""

    def __init__(self):
        self.callback_handler = SimpleNamespace(callbacks=[])


def test_an_attached_callback_does_not_keep_its_trainer_alive():
    callback, trainer = GradlabTrainerCallback(), _WeakTrainer()
    callback.attach(trainer)
    alive = weakref.ref(trainer)
    del trainer
    gc.collect()
    assert alive() is None  # a trainer dropped by its loop is freed, the callback or not


@pytest.mark.parametrize("make", [_WeakTrainer, lambda: SimpleNamespace(
    callback_handler=SimpleNamespace(callbacks=[]))], ids=["weak", "no weak references"])
def test_a_callback_held_by_one_trainer_is_refused_by_another(make):
    # a trainer that takes no weak reference is held by a plain one: still refused
    callback, first, second = GradlabTrainerCallback(), make(), make()
    callback.attach(first)
    with pytest.raises(GradlabError, match=r"^this GradlabTrainerCallback is attached to "
                                           r"another Trainer already"):  # fmt: skip
        callback.attach(second)
    first.callback_handler.callbacks.remove(callback)  # taken off the first: free to move
    assert callback.attach(second) is callback


def test_watch_wraps_a_plain_loss_and_keeps_its_name_and_attributes():
    def my_loss(scores, positives):
        return gradlab.NTXentLoss(0.1)(scores, positives)

    my_loss.temperature = 0.1  # an attribute of the function, read through the wrapper
    callback = GradlabTrainerCallback()
    wrapped = callback.watch(my_loss)
    assert wrapped.__name__ == "my_loss" and wrapped.__wrapped__ is my_loss
    assert wrapped.temperature == 0.1

    class Callable:  # a loss object without a __name__: named after its class
        def __call__(self, scores, positives):
            return scores.sum()

    assert callback.watch(Callable()).__name__ == "Callable"
    module = callback.watch(gradlab.NTXentLoss(0.1))
    assert module.__name__ == "NTXentLoss" and module.temperature == 0.1
    mse = torch.nn.MSELoss()
    assert callback.watch(mse) is not mse  # not a sentence-transformers loss: wrapped
    blank = type(wrapped).__new__(type(wrapped))  # no attributes yet (as copy and pickle see it)
    for name in ("callback", "loss_fn", "watched", "watch_inputs", "__getstate__x"):
        with pytest.raises(AttributeError, match=name):
            getattr(blank, name)


def test_loss_forward_calls_the_class_s_forward_under_the_class_name():
    module = torch.nn.L1Loss()
    call = LossForward(module)
    module.forward = lambda *args: torch.tensor(-1.0)  # a patched forward is not called
    assert call(torch.zeros(3), target=torch.full((3,), 2.0)).item() == 2.0
    assert call.__name__ == "L1Loss" and call.loss_module is module


def test_a_sentence_transformers_loss_keeps_its_class_and_is_fed_inside_steps(tmp_path):
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import losses

    from gradlab.integrations.sentence_transformers import RecordingSimilarity
    from tests.helpers.hf_models import caption_pairs, sentence_features, static_model

    model = static_model()
    loss = losses.MultipleNegativesRankingLoss(model, similarity_fct=RecordingSimilarity())
    features = sentence_features(model, *caption_pairs(6))
    expected = loss(features, None).item()
    callback = GradlabTrainerCallback(preset="full")
    assert callback.watch(loss) is loss and type(loss) is losses.MultipleNegativesRankingLoss
    assert loss(features, None).item() == expected  # outside a step: the loss itself
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callback.watch(loss) is loss  # a notebook cell run again: watched once
    assert loss.forward.callback is callback and type(loss.forward.loss_fn) is LossForward
    # A notebook cell run again: a new callback takes the loss over (the first sees no more
    # calls), once, and says so (two callbacks alive: the first logged nothing, unexplained);
    # the first callback may take it back.
    first, callback = callback, GradlabTrainerCallback(preset="full")
    taken = (r"^GradlabTrainerCallback: loss_fn MultipleNegativesRankingLoss was watched by "
             r"another GradlabTrainerCallback; it is now watched by this one alone, and the "
             r"other logs none of its calls")  # fmt: skip
    with pytest.warns(RuntimeWarning, match=taken) as caught:
        assert callback.watch(loss) is loss and loss.forward.callback is callback
    assert [w.filename for w in caught] == [__file__]
    assert str(caught[0].message) == (
        "GradlabTrainerCallback: loss_fn MultipleNegativesRankingLoss was watched by another "
        "GradlabTrainerCallback; it is now watched by this one alone, and the other logs none "
        "of its calls (a loss module is watched by one callback at a time: a notebook cell run "
        "again, or the callback attached to the Trainer?)")
    assert callback.watch(loss) is loss and loss.forward.callback is callback
    with pytest.warns(RuntimeWarning, match=taken):
        assert first.watch(loss) is loss and loss.forward.callback is first
    with pytest.warns(RuntimeWarning, match=taken):
        assert callback.watch(loss) is loss and loss.forward.callback is callback
    assert loss(features, None).item() == expected
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    value = loss(features, None)
    value.backward()
    callback.on_pre_optimizer_step(args, state, None)
    state.global_step += 1
    callback.on_step_end(args, state, None)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1]
    assert records[0]["loss"] == pytest.approx(expected, rel=1e-6) == value.item()
    assert any(key.startswith("anatomy_i2t_") for key in records[0])  # its score matrix was read


def test_a_second_train_call_forwards_its_own_steps_again(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    for run in ("first", "second"):
        args, state = arguments(tmp_path / run), trainer_state()
        callback.on_train_begin(args, state, None)
        assert callback.last_record is None  # nothing of the previous run is forwarded
        logs, _ = train_steps(callback, args, state, loss_fn, 2)
        callback.on_train_end(args, state, None)
        assert [step for step, entry in logs.items() if "gradlab/loss" in entry] == [1, 2]
        _, records = read_jsonl(tmp_path / run / "out" / DEFAULT_FOLDER / "metrics.jsonl")
        assert [record["step"] for record in records] == [1, 2]


def test_the_step_numbers_follow_global_step_even_after_a_step_without_an_optimizer_event(
    tmp_path,
):
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    state.global_step = 4  # steps the callback did not see (a subclass that skipped its events)
    train_steps(callback, args, state, loss_fn, 1)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [5]  # as state.log_history numbers it


def test_an_evaluation_before_any_step_is_not_a_watched_call(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "watched calls but no step" would warn
        for run, steps in (("first", 1), ("second", 0)):  # the second: evaluation only
            args, state = arguments(tmp_path / run), trainer_state()
            callback.on_train_begin(args, state, None)
            loss_fn(*batch(7))
            train_steps(callback, args, state, loss_fn, steps)
            callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "second" / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert records == []


def test_the_unattached_warning_points_at_the_line_that_called_on_log(tmp_path):
    callback = GradlabTrainerCallback(tmp_path / "run", preset="cheap")
    args, state = arguments(tmp_path, report_to=["wandb"]), trainer_state()
    callback.on_train_begin(args, state, None)
    with pytest.warns(RuntimeWarning, match="not attached") as caught:
        train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 1)
    callback.on_train_end(args, state, None)
    (warning,) = [w for w in caught if "not attached" in str(w.message)]
    # The Trainer's callback handler's line, not gradlab's (here: train_steps' on_log call).
    assert warning.filename == __file__
    assert "callback.on_log(" in linecache.getline(warning.filename, warning.lineno)


def test_an_evaluation_before_the_first_step_is_not_logged_as_that_step(tmp_path):
    # eval_on_start: the Trainer evaluates between on_train_begin and the first on_step_begin;
    # a first step that never calls the watched loss then has nothing to log
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    callback.on_train_begin(args, state, None)
    scores, positives = batch(5)
    value = loss_fn(scores, positives=positives)  # the evaluation, its mask by keyword
    assert value.item() == reference_loss(5)
    value.backward()
    callback.on_step_begin(args, state, None)
    with pytest.warns(RuntimeWarning, match="step 1 logs nothing in .*: no watched loss"):
        callback.on_pre_optimizer_step(args, state, None)
    state.global_step += 1
    callback.on_step_end(args, state, None)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert records == []


def test_an_unreadable_call_and_another_tau_warn_at_the_users_line(tmp_path):
    """Inside a training step the Monitor is reached through the callback's wrappers: its
    warnings name the user's compute_loss line, not a frame of gradlab's."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(tau=0.1, every=1)
    unreadable = callback.watch(lambda embeddings: embeddings.pow(2).sum())
    smooth_ap = callback.watch(gradlab.SmoothAPLoss(0.05))
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    embeddings = torch.randn(8, 4, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        unreadable(embeddings)  # one argument: the Monitor cannot read it
        smooth_ap(embeddings, torch.arange(8) % 2)  # tau 0.05, the Monitor's 0.1
    callback.on_train_end(args, state, None)
    told = [(w.filename, w.lineno, str(w.message)) for w in caught]
    assert [(name, number) for name, number, _ in told] == [(__file__, line),
                                                            (__file__, line + 1)]  # fmt: skip
    assert "cannot read" in told[0][2] and "tau=0.1 differs" in told[1][2]


def _told_at_the_optimizer_step(callback, args, state, phrase):
    """The warnings holding ``phrase`` that the step's event gives (then the run ends), and
    the line of this file that runs the event: a trainer's line stands there."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        callback.on_pre_optimizer_step(args, state, None)
    callback.on_train_end(args, state, None)
    return [w for w in caught if phrase in str(w.message)], line


def test_a_step_time_warning_names_the_line_that_runs_the_step(tmp_path):
    """A loss that is NaN on finite scores (0 / 0) is warned about when the step is logged;
    under the callback that is the line that runs the Trainer's event, not the callback."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    loss_fn = callback.watch(lambda scores, positives: scores.sum() * 0 / 0, inputs="scores")
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    scores, positives = batch(0)
    loss_fn(scores, positives)
    told, line = _told_at_the_optimizer_step(callback, args, state, "loss is nan")
    assert [(w.filename, w.lineno) for w in told] == [(__file__, line)]


def test_a_trainer_that_never_calls_the_watched_loss_is_told_at_the_step_s_line(tmp_path):
    """compute_loss calling the loss itself, not the one watch() returned: the first step
    says so, naming the line that runs it and callback.watch, not a frame of gradlab's."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    loss = gradlab.NTXentLoss(0.1)
    callback.watch(loss)  # the wrapped loss is dropped
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    loss(*batch(0)).backward()
    told, line = _told_at_the_optimizer_step(callback, args, state, "logs nothing")
    assert [(w.filename, w.lineno) for w in told] == [(__file__, line)]
    assert "callback.watch(loss_fn)" in str(told[0].message)


def test_the_unattached_warning_names_the_line_that_runs_the_trainer_not_transformers(tmp_path):
    """The Trainer calls on_log through its CallbackHandler: the warning skips its frames."""
    from transformers import TrainerControl
    from transformers.trainer_callback import CallbackHandler

    args, state = arguments(tmp_path, report_to=["tensorboard"]), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    handler = CallbackHandler([callback], None, None, None, None)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    loss_fn(*batch(0)).backward()
    callback.on_pre_optimizer_step(args, state, None)
    state.global_step += 1
    callback.on_step_end(args, state, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        handler.on_log(args, state, TrainerControl(), logs={"loss": 1.0})
    callback.on_train_end(args, state, None)
    told = [w for w in caught if "not attached" in str(w.message)]
    assert [(w.filename, w.lineno) for w in told] == [(__file__, line)]


# --- the logging schedule read from the arguments (stand-ins of the fields the Trainer has) ---


class _NoLength:
    """A training dataloader over an iterable dataset: it has no length."""

    def __iter__(self):
        return iter(())


@pytest.mark.parametrize(
    ("fields", "dataloader", "steps", "logged"),
    [
        # 5 batches, 2 per optimizer step: steps of 2, 2 and 1 batches, 3 per epoch
        ({"gradient_accumulation_steps": 2}, [0] * 5, 6, [3, 6]),
        ({}, [0] * 5, 6, [5, 6]),  # arguments without the field: one batch per step
        ({"gradient_accumulation_steps": None}, [0] * 5, 6, [5, 6]),  # unset: one as well
        ({"gradient_accumulation_steps": 1}, [0], 3, [1, 2, 3]),  # one step per epoch
        ({}, _NoLength(), 5, [4, 5]),  # no length: logging_steps (4), then the last step
        ({}, [], 5, [4, 5]),  # no batches: logging_steps as well
    ],
    ids=["accumulating", "no-accumulation-field", "accumulation-unset", "one-batch",
         "no-length", "no-batches"],
)
def test_epoch_logging_given_as_a_plain_string_logs_each_epoch_s_last_step(
        tmp_path, fields, dataloader, steps, logged):  # fmt: skip
    """``logging_strategy="epoch"`` (a string, as a user's arguments may hold it): the Monitor
    logs every ``ceil(batches / accumulation)`` optimizer steps, the Trainer's epoch length."""
    callback = GradlabTrainerCallback(preset="cheap")
    args = arguments(tmp_path, logging_steps=4, logging_strategy="epoch", **fields)
    state = trainer_state()
    callback.on_train_begin(args, state, None, train_dataloader=dataloader)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), steps)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == logged


def test_logging_first_step_with_logging_steps_of_two_logs_step_one_too(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args = arguments(tmp_path, logging_steps=2, logging_first_step=True)
    state = trainer_state()
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, callback.watch(gradlab.NTXentLoss(0.05)), 4)
    callback.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 4]


def _logged_none_warnings(callback, args, state, steps, dataloader=None):
    """Run ``steps`` stand-in steps of a loss the Monitor cannot read (one argument), end the
    training, and return the callback's 'logged none' warnings."""
    loss_fn = callback.watch(lambda embeddings: embeddings.pow(2).sum())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_begin(args, state, None, train_dataloader=dataloader)
        for _ in range(steps):
            callback.on_step_begin(args, state, None)
            loss_fn(torch.randn(8, 4, requires_grad=True)).backward()
            callback.on_pre_optimizer_step(args, state, None)
            state.global_step += 1
            callback.on_step_end(args, state, None)
        callback.on_train_end(args, state, None)
    return [str(w.message) for w in caught if "logged none" in str(w.message)]


@pytest.mark.parametrize(("first_step", "told"), [(True, 0), (False, 1)])
def test_an_unreadable_run_is_blamed_on_the_schedule_only_without_a_logging_step(
        tmp_path, first_step, told):  # fmt: skip
    """logging_steps=10 and 3 steps: with logging_first_step, step 1 was a logging step (the
    Monitor said why it skipped the calls); without it no logging step came."""
    callback = GradlabTrainerCallback(preset="cheap")
    args = arguments(tmp_path, logging_steps=10, logging_first_step=first_step)
    assert len(_logged_none_warnings(callback, args, trainer_state(), 3)) == told


def test_the_logged_none_warning_names_the_epoch_schedule(tmp_path):
    """logging_strategy="epoch" with 10 batches an epoch, and a run of 3 steps."""
    callback = GradlabTrainerCallback(preset="cheap")
    args = arguments(tmp_path, logging_steps=500, logging_strategy="epoch",
                     gradient_accumulation_steps=1)  # fmt: skip
    told = _logged_none_warnings(callback, args, trainer_state(), 3, dataloader=[0] * 10)
    assert told == [
        "GradlabTrainerCallback logged none of the 3 training steps while training: it logs on "
        "the Trainer's logging steps (logging_strategy='epoch': every 10 steps) and the run "
        "ended first (the last step alone, without its gradients, is added when training "
        "ends, if the loss allows); set logging_steps in the training arguments (or "
        "GradlabTrainerCallback(every=n)) below the number of steps"
    ]


def test_the_logged_none_warning_says_why_an_unsized_epoch_falls_back_to_logging_steps(tmp_path):
    """logging_strategy="epoch" over an iterable dataset (no length): the Trainer logs when an
    epoch ends, which the callback cannot count ahead; it said logging_steps=500 alone."""
    callback = GradlabTrainerCallback(preset="cheap")
    args = arguments(tmp_path, logging_steps=500, logging_strategy="epoch",
                     gradient_accumulation_steps=1)  # fmt: skip
    told = _logged_none_warnings(callback, args, trainer_state(), 3, dataloader=iter([0] * 10))
    assert told == [
        "GradlabTrainerCallback logged none of the 3 training steps while training: it logs on "
        "the Trainer's logging steps (logging_strategy='epoch' with a training dataloader that "
        "has no length, so epochs are not counted: logging_steps=500 instead) and the run "
        "ended first (the last step alone, without its gradients, is added when training "
        "ends, if the loss allows); set logging_steps in the training arguments (or "
        "GradlabTrainerCallback(every=n)) below the number of steps"
    ]


def test_a_first_step_without_any_call_is_not_called_an_unwatched_dataset_s_step(tmp_path):
    """The Monitor says that nothing was called; the warning about a dataset dict's
    unwatched losses is for steps without calls after steps with calls."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    callback.watch(gradlab.NTXentLoss(0.1))
    callback.on_train_begin(args, state, None)
    callback.on_step_begin(args, state, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_pre_optimizer_step(args, state, None)
    callback.on_train_end(args, state, None)
    assert not [w for w in caught if "called none of the losses" in str(w.message)]


def test_a_step_without_a_watched_call_is_told_at_the_step_s_line(tmp_path):
    """A step that called none of the watched losses after one that did (a dataset dict with
    an unwatched loss): the warning names the line that runs the Trainer's event."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, loss_fn, 1)
    callback.on_step_begin(args, state, None)
    told, line = _told_at_the_optimizer_step(callback, args, state, "called none of the losses")
    assert [(w.filename, w.lineno) for w in told] == [(__file__, line)]


def test_an_empty_prefix_never_overwrites_the_trainer_s_own_values(tmp_path):
    """A new user's trial: with prefix="" gradlab's 'loss' (its last micro-batch's) replaced the
    Trainer's averaged loss in logs and log_history; the Trainer's value is kept, once warned."""
    callback = GradlabTrainerCallback(preset="cheap", prefix="")
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    for step in (1, 2):
        train_steps(callback, args, state, loss_fn, 1, log_every=100)  # no on_log of its own
        logs = {"loss": 123.0 + step}
        state.log_history.append({**logs, "step": state.global_step})
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            callback.on_log(args, state, None, logs=logs)
        assert logs["loss"] == state.log_history[-1]["loss"] == 123.0 + step
        assert "degenerate_batches" in logs  # gradlab's other keys still added
        assert all(w.filename == __file__ for w in caught)  # the caller's line
        messages = [str(w.message) for w in caught if w.category is RuntimeWarning]
        assert messages == ([] if step == 2 else [
            "GradlabTrainerCallback: the Trainer's logs hold ['loss'] already, which gradlab's "
            "record also has under prefix='': the Trainer's values are kept and gradlab's are in "
            "metrics.jsonl only; give a prefix (the default 'gradlab/') to report both (later "
            "such steps are not warned about)"])
    callback.on_train_end(args, state, None)


@pytest.mark.parametrize("make", [lambda: gradlab.NTXentLoss(0.05),
                                  lambda: (lambda scores, positives: scores.mean())])
def test_a_loss_watched_again_is_wrapped_once(tmp_path, make):
    # callback.watch(callback.watch(loss)) (a notebook cell run again) wrapped it twice: each
    # step warned that two watched losses were called
    callback, original = GradlabTrainerCallback(preset="cheap"), make()
    loss_fn = callback.watch(original, inputs="scores")
    assert callback.watch(loss_fn, inputs="scores") is loss_fn
    other = GradlabTrainerCallback(preset="cheap")
    again = other.watch(loss_fn, inputs="scores")  # another callback's: unwrapped, then its own
    assert again.__wrapped__ is original  # not the first callback's wrapper in a second one
    assert callback.watch(loss_fn, inputs="scores") is loss_fn
    args, state = arguments(tmp_path), trainer_state()
    other.on_train_begin(args, state, None)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "two watched losses were called"
        train_steps(other, args, state, again, 2)
    other.on_train_end(args, state, None)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]


@pytest.mark.parametrize("n", [0, -2, "2", 2.0, True])
def test_logging_steps_refuses_what_is_no_positive_integer(n):
    # LoggingSteps(0) was accepted and raised ZeroDivisionError inside training
    from gradlab.integrations.transformers import LoggingSteps

    with pytest.raises(GradlabError, match=rf"^n must be a positive integer; got {n!r}$"):
        LoggingSteps(n)


def test_logging_steps_refuses_a_first_that_is_no_bool_and_a_last_that_is_no_step():
    from gradlab.integrations.transformers import LoggingSteps

    with pytest.raises(GradlabError, match=r"^first must be True or False; got 'yes'$"):
        LoggingSteps(4, first="yes")
    with pytest.raises(GradlabError, match=r"^last must be a positive integer; got 0$"):
        LoggingSteps(4, last=0)
    steps = LoggingSteps(3, first=False, last=7)
    assert [step for step in range(1, 10) if steps(step)] == [3, 6, 7, 9]
    assert [repr(s) for s in (steps, LoggingSteps(4), LoggingSteps(4, last=9))] == [
        "LoggingSteps(3, first=False, last=7)", "LoggingSteps(4)", "LoggingSteps(4, last=9)"]
    assert [step for step in range(1, 10) if LoggingSteps(4, last=9)(step)] == [1, 4, 8, 9]


@pytest.mark.parametrize("restart", [0, 1, 2])
def test_resume_behind_the_run_s_last_step_warns_that_steps_will_repeat(tmp_path, restart):
    """resume=True while the Trainer starts over (no resume_from_checkpoint): its steps were
    logged again in silence, after the earlier ones. A Trainer resumed from a checkpoint is
    quiet, at the run's end or before it (the interrupted run logged past its checkpoint: the
    documented case, which warned that the user should do what they had done)."""
    first = GradlabTrainerCallback(tmp_path / "run", preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    first.on_train_begin(args, state, None)
    train_steps(first, args, state, first.watch(gradlab.NTXentLoss(0.05)), 2)
    first.on_train_end(args, state, None)
    again = GradlabTrainerCallback(tmp_path / "run", preset="cheap", resume=True)
    resumed = trainer_state(global_step=restart)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again.on_train_begin(args, resumed, None)
        if restart == 0:  # the first record written: the Monitor's own warning of a run
            # gone back would repeat the callback's
            train_steps(again, args, resumed, again.watch(gradlab.NTXentLoss(0.05)), 1)
    again.on_train_end(args, state, None)
    assert all(w.filename == __file__ for w in caught)  # the lines that started training
    # one warning, of any category: not the Monitor's own of a run gone back too
    messages = [str(w.message) for w in caught]
    assert messages == ([] if restart > 0 else [
        f"GradlabTrainerCallback: resume=True continues the run in {str(tmp_path / 'run')!r}, "
        "whose last logged step is 2, but the Trainer starts at step 1: its steps 1-2 will be "
        "logged again after the earlier "
        "ones, and gradlab plot draws the later records of those steps in place of the "
        "earlier; resume the Trainer too "
        "(trainer.train(resume_from_checkpoint=True)), or pass overwrite=True to start the "
        "folder afresh"])


def test_resume_after_a_run_that_logged_step_0_alone_does_not_warn(tmp_path):
    # a folder whose last logged step is 0 (a plain Monitor's first step) and a Trainer at
    # its start: the Trainer's step 1 follows it, nothing is logged twice
    with gradlab.Monitor(tmp_path / "run", preset="cheap", every=1) as monitor:
        loss_fn = monitor.watch(gradlab.NTXentLoss(0.05))
        scores = torch.randn(4, 4, requires_grad=True)
        loss_fn(scores, torch.eye(4, dtype=torch.bool)).backward()
        monitor.step()
    again = GradlabTrainerCallback(tmp_path / "run", preset="cheap", resume=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        again.on_train_begin(arguments(tmp_path), trainer_state(global_step=0), None)
    again.on_train_end(arguments(tmp_path), trainer_state(), None)


@pytest.mark.usefixtures("offline_trackers")  # a wandb or mlflow sink: offline, left clean
@pytest.mark.parametrize("sink", ["tensorboard", "wandb", "mlflow"])
@pytest.mark.parametrize(("report_to", "twice", "attached"), [
    ("sink", True, True), ("all", True, True), ("other", False, True), ("none", False, True),
    ("sink", False, False)])  # fmt: skip
def test_a_sink_that_report_to_also_feeds_warns_of_values_logged_twice(tmp_path, sink, report_to,
                                                                         twice, attached):
    """sinks=["mlflow"] beside report_to="mlflow" wrote every gradlab value twice a step into
    the same MLflow run. An unattached callback's values reach no report_to backend (that has
    its own warning), so it does not warn of this."""
    other = "tensorboard" if sink != "tensorboard" else "mlflow"
    report_to = {"sink": [sink], "other": [other], "all": "all", "none": []}[report_to]
    callback = GradlabTrainerCallback(preset="cheap", sinks=["jsonl", sink])
    if attached:
        callback.attach(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[])))
    args = arguments(tmp_path, report_to=report_to)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_begin(args, trainer_state(), None)
    callback.on_train_end(args, trainer_state(), None)
    caught = [w for w in caught if w.category is RuntimeWarning]
    shown = [report_to] if isinstance(report_to, str) else report_to
    assert [str(w.message) for w in caught] == ([
        f"GradlabTrainerCallback: sinks {[sink]} and report_to {shown} both send gradlab's "
        "values to the same backend, so each is logged twice per step: the Trainer's report_to "
        "receives them through on_log already; drop those sinks"] if twice else [])
    assert all(w.filename == __file__ for w in caught)  # the line that started training


def test_a_monitor_closed_by_hand_during_training_warns_once_and_training_goes_on(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    callback.on_train_begin(args, state, None)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    train_steps(callback, args, state, loss_fn, 2)
    callback.monitor.close()  # in a loop, or in another callback
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, losses = train_steps(callback, args, state, loss_fn, 3)
        callback.on_train_end(args, state, None)
    assert [str(w.message) for w in caught] == [
        f"GradlabTrainerCallback: its Monitor of {str(tmp_path / 'out' / DEFAULT_FOLDER)!r} was "
        "closed by close() during training, before step 3: training goes on and the steps from "
        "3 on are not logged; the callback closes its Monitor itself when training ends (to "
        "log fewer steps, give GradlabTrainerCallback(every=n))"
    ]
    assert caught[0].category is RuntimeWarning
    assert caught[0].filename == __file__  # the loss call of train_steps, not gradlab's
    assert losses == pytest.approx([reference_loss(100 * step) for step in (2, 3, 4)], rel=1e-6)
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]
    assert callback.monitor is None and state.global_step == 5


def test_a_step_without_a_watched_call_after_one_call_is_told_in_the_callback_s_words(tmp_path):
    """One watched call in step 1, none in step 2 (a dataset dict with an unwatched loss): the
    callback says so once, and the Monitor's advice about calling monitor.step() twice, which
    does not apply, is not shown."""
    args, state = arguments(tmp_path), trainer_state()
    callback = GradlabTrainerCallback(preset="cheap", every=1)
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))
    callback.on_train_begin(args, state, None)
    train_steps(callback, args, state, loss_fn, 1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # steps 2 and 3 call no watched loss
            callback.on_step_begin(args, state, None)
            callback.on_pre_optimizer_step(args, state, None)
            state.global_step += 1
            callback.on_step_end(args, state, None)
    callback.on_train_end(args, state, None)
    assert [(w.category, str(w.message)) for w in caught] == [(
        RuntimeWarning,
        "GradlabTrainerCallback: training step 2 called none of the losses it watches, so it is "
        "not logged (a train_dataset dict with a loss per dataset: only the steps of the watched "
        "losses are logged; watch each loss with callback.watch to log every step); later such "
        "steps are not warned about")]


def test_overwrite_while_the_trainer_resumes_from_a_checkpoint_warns_before_removing(tmp_path):
    """overwrite=True and a Trainer resumed at step 1: the records of the earlier steps would
    go with the old run; the callback names itself in the warning."""
    first = GradlabTrainerCallback(tmp_path / "run", preset="cheap")
    args, state = arguments(tmp_path), trainer_state()
    first.on_train_begin(args, state, None)
    train_steps(first, args, state, first.watch(gradlab.NTXentLoss(0.05)), 2)
    first.on_train_end(args, state, None)
    again = GradlabTrainerCallback(tmp_path / "run", preset="cheap", overwrite=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again.on_train_begin(args, trainer_state(global_step=1), None)
    again.on_train_end(args, trainer_state(global_step=1), None)
    assert [(w.category, str(w.message), w.filename) for w in caught] == [(
        RuntimeWarning,
        f"GradlabTrainerCallback: overwrite=True will replace the run in "
        f"{str(tmp_path / 'run')!r} while the Trainer resumes from a checkpoint at step 1: the "
        "records of the steps before it go with the old files at the first new record, and the "
        "log starts mid-run; GradlabTrainerCallback(resume=True) keeps them and continues after "
        "them",
        __file__,
    )]
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]  # nothing removed yet


def test_a_sentence_transformers_loss_is_taken_over_quietly_once_its_callback_trained(tmp_path):
    """A new callback watching the loss of a callback whose train() ended (the same Trainer
    trained again) is the expected way: no warning. While that callback trains, the take-over
    is warned of: the training callback would log none of the loss's calls."""
    pytest.importorskip("sentence_transformers")
    from sentence_transformers.sentence_transformer import losses

    from gradlab.integrations.sentence_transformers import RecordingSimilarity
    from tests.helpers.hf_models import static_model

    loss = losses.MultipleNegativesRankingLoss(static_model(), similarity_fct=RecordingSimilarity())
    args = arguments(tmp_path)
    first = GradlabTrainerCallback(tmp_path / "first", preset="cheap")
    first.watch(loss)
    first.on_train_begin(args, trainer_state(), None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = GradlabTrainerCallback(tmp_path / "second", preset="cheap")
        assert second.watch(loss) is loss and loss.forward.callback is second
    first.on_train_end(args, trainer_state(), None)
    assert [(w.category, str(w.message)) for w in caught] == [(
        RuntimeWarning,
        "GradlabTrainerCallback: loss_fn MultipleNegativesRankingLoss was watched by another "
        "GradlabTrainerCallback; it is now watched by this one alone, and the other logs none "
        "of its calls (a loss module is watched by one callback at a time: a notebook cell run "
        "again, or the callback attached to the Trainer?)")]
    second.on_train_begin(args, trainer_state(), None)
    second.on_train_end(args, trainer_state(), None)  # its train() ended: trained again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        third = GradlabTrainerCallback(tmp_path / "third", preset="cheap")
        assert third.watch(loss) is loss and loss.forward.callback is third
    assert caught == []
