"""A training that raises: the attached GradlabTrainerCallback frees its folder.

The Trainer has no exception event; ``attach`` wraps ``trainer.train`` so that a training that
raises closes the Monitor (without the last record) and releases its lock, as the Lightning
callback's ``on_exception`` does. A notebook cell run again after a crash (a new Trainer and a
new callback on the same ``output_dir``, in the same process) then trains. The first tests use a
stand-in trainer whose ``train`` calls the events as ``transformers.Trainer`` does (fast); the
last ones a real Trainer on a tiny BERT.
"""

import inspect
import json
import socket
import subprocess
import sys
import warnings
from types import SimpleNamespace

import pytest

pytest.importorskip("transformers")

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import DEFAULT_FOLDER, GradlabTrainerCallback
from gradlab.monitor import read_jsonl, read_segments
from gradlab.monitor.lock import LOCK_NAME
from tests.helpers.hf_models import scores_and_positives
from tests.helpers.warning_frames import frame_named_by_stacklevel


class StandInTrainer:
    """``train`` runs the Trainer's events for ``steps`` steps and raises ``error`` at the
    beginning of step ``raise_at`` (1-based) when one is given."""

    def __init__(self, output_dir, loss_fn, steps=4, raise_at=None, error=RuntimeError):
        self.args = SimpleNamespace(output_dir=str(output_dir), logging_steps=1, report_to=[])
        self.state = SimpleNamespace(global_step=0, logging_steps=None, log_history=[])
        self.callback_handler = SimpleNamespace(callbacks=[])
        self.loss_fn, self.steps, self.raise_at, self.error = loss_fn, steps, raise_at, error

    def event(self, name):
        for callback in self.callback_handler.callbacks:
            getattr(callback, name)(self.args, self.state, None)

    def train(self):
        self.event("on_train_begin")
        for _ in range(self.steps):
            self.event("on_step_begin")
            if self.state.global_step + 1 == self.raise_at:
                raise self.error(f"failed at step {self.raise_at}")
            self.loss_fn(*scores_and_positives(self.state.global_step)).backward()
            self.event("on_pre_optimizer_step")
            self.state.global_step += 1
            self.event("on_step_end")
        self.event("on_train_end")
        return "trained"


def attached(tmp_path, raise_at=None, error=RuntimeError, **options):
    callback = GradlabTrainerCallback(preset="cheap", **options)
    trainer = StandInTrainer(tmp_path / "out", callback.watch(gradlab.NTXentLoss(0.05)),
                             raise_at=raise_at, error=error)  # fmt: skip
    callback.attach(trainer)
    return callback, trainer


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
def test_a_training_that_raises_closes_its_monitor_and_releases_the_lock(tmp_path, error):
    callback, trainer = attached(tmp_path, raise_at=3, error=error)
    with pytest.raises(error, match="failed at step 3"):  # the training's own exception
        trainer.train()
    folder = tmp_path / "out" / DEFAULT_FOLDER
    assert callback.monitor is None and not (folder / LOCK_NAME).exists()
    _, records = read_jsonl(folder / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]  # no last record for step 3


def test_a_step_the_schedule_skipped_is_not_logged_after_a_crash(tmp_path):
    # every 2nd step: 2 is logged, 3 is closed off schedule, the crash comes at step 4; a
    # normal end would add step 3 as the last step, a crash does not
    _, trainer = attached(tmp_path, raise_at=4, every=2)
    with pytest.raises(RuntimeError, match="failed at step 4"):
        trainer.train()
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [2]


def test_the_same_cell_run_again_trains_into_the_same_folder(tmp_path):
    _, crashed = attached(tmp_path, raise_at=3)
    with pytest.raises(RuntimeError):
        crashed.train()
    _, trainer = attached(tmp_path, overwrite=True)  # a new callback, the same output_dir
    assert trainer.train() == "trained"
    headers, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert len(headers) == 1 and [record["step"] for record in records] == [1, 2, 3, 4]
    assert records[0]["loss"] == pytest.approx(
        gradlab.NTXentLoss(0.05)(*scores_and_positives(0)).item(), rel=1e-6)
    # Neither resume nor overwrite: the folder holds a run (not "in use by another Monitor").
    _, refused = attached(tmp_path)
    with pytest.raises(GradlabError, match="already holds a run") as caught:
        refused.train()
    assert "in use" not in str(caught.value)
    # where resume and overwrite go: the callback's arguments, not the Trainer's
    assert str(caught.value).endswith(
        "(resume and overwrite are arguments of GradlabTrainerCallback(...))")


@pytest.mark.parametrize("checkpoint", [1, 3])
def test_a_trainer_resumed_into_a_run_without_resume_is_told_the_callbacks_argument(tmp_path,
                                                                                    checkpoint):
    # the error named resume and overwrite alone, which reads as the Trainer's resume when
    # the Trainer itself was resumed from a checkpoint
    _, trainer = attached(tmp_path)
    trainer.train()
    _, resumed = attached(tmp_path)
    resumed.state.global_step = checkpoint  # as the Trainer sets it before train begins
    with pytest.raises(GradlabError) as caught:
        resumed.train()
    assert str(caught.value).endswith(
        "(resume and overwrite are arguments of GradlabTrainerCallback(...); the Trainer resumes "
        f"from a checkpoint at step {checkpoint}: GradlabTrainerCallback(resume=True) continues "
        "the run's records from there)")


def test_a_folder_held_by_a_crashed_unattached_callback_names_the_way_out(tmp_path):
    # passed as callbacks=[...] (not attached), a failed train() keeps its Monitor open; the
    # next callback into that folder was told to close() a Monitor the user does not hold
    def unattached(**options):
        callback = GradlabTrainerCallback(preset="cheap", **options)
        trainer = StandInTrainer(tmp_path / "out", callback.watch(gradlab.NTXentLoss(0.05)))
        trainer.callback_handler.callbacks.append(callback)
        return callback, trainer

    crashed, trainer = unattached()
    trainer.raise_at = 3
    with pytest.raises(RuntimeError, match="failed at step 3"):
        trainer.train()
    _, again = unattached(overwrite=True)
    with pytest.raises(GradlabError, match="is in use by another Monitor") as raised:
        again.train()
    assert str(raised.value).endswith(
        ". Here it is the Monitor of another GradlabTrainerCallback of this process, whose "
        "train() did not end (it failed with the callback passed as callbacks=[...]: "
        "callback.attach(trainer) releases the folder when training fails): close it with "
        "that_callback.monitor.close(), or give this callback another folder")
    crashed.monitor.close()  # the way out it names
    _, trainer = unattached(overwrite=True)
    assert trainer.train() == "trained"


def test_a_folder_held_by_a_plain_monitor_is_not_blamed_on_a_callback(tmp_path):
    # the advice about a crashed callback is for a folder a callback holds, not any folder
    idle = GradlabTrainerCallback(preset="cheap")  # another callback of the process, idle
    folder = tmp_path / "out" / DEFAULT_FOLDER
    holder = gradlab.Monitor(folder, preset="cheap", every=1)
    loss_fn = holder.watch(gradlab.NTXentLoss(0.05))
    loss_fn(*scores_and_positives(0)).backward()
    holder.step()  # its first record: the folder is claimed
    callback = GradlabTrainerCallback(preset="cheap", overwrite=True)
    trainer = StandInTrainer(tmp_path / "out", callback.watch(gradlab.NTXentLoss(0.05)))
    callback.attach(trainer)
    with pytest.raises(GradlabError, match="is in use by another Monitor") as raised:
        trainer.train()
    assert "GradlabTrainerCallback" not in str(raised.value) and idle.monitor is None
    holder.close()


def test_a_folder_a_plain_monitor_claimed_is_not_blamed_on_a_callback_yet_to_log_there(tmp_path):
    # callback A opened its Monitor on the folder and logged nothing (no claim); a plain
    # Monitor of the process then claimed it: B's refusal blamed A, as the folder's lock was
    # this process's and A's Monitor pointed there
    folder = tmp_path / "run"
    args = SimpleNamespace(output_dir=None, logging_steps=1)
    first = GradlabTrainerCallback(folder, preset="cheap")
    first.on_train_begin(args, SimpleNamespace(global_step=0, logging_steps=None), None)
    holder = gradlab.Monitor(folder, preset="cheap", every=1)
    loss_fn = holder.watch(gradlab.NTXentLoss(0.05))
    loss_fn(*scores_and_positives(0)).backward()
    holder.step()  # its first record: the folder is claimed
    with pytest.raises(GradlabError) as by_monitor:
        gradlab.Monitor(folder, preset="cheap")
    second = GradlabTrainerCallback(folder, preset="cheap")
    with pytest.raises(GradlabError) as by_callback:
        second.on_train_begin(args, SimpleNamespace(global_step=0, logging_steps=None), None)
    assert "of this very process" in str(by_monitor.value)
    assert str(by_callback.value) == str(by_monitor.value)
    holder.close()
    # A's end writes its header, and finds the plain Monitor's run there: runs never merge
    with pytest.raises(GradlabError, match="already holds a run"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # A's Monitor logged nothing: it says so
        first.on_train_end(args, None, None)


def test_another_callback_training_in_the_process_keeps_its_folder(tmp_path):
    other = GradlabTrainerCallback(tmp_path / "other", preset="cheap")
    other.on_train_begin(SimpleNamespace(output_dir=None, logging_steps=1),
                         SimpleNamespace(global_step=0, logging_steps=None), None)  # fmt: skip
    loss_fn = other.watch(gradlab.NTXentLoss(0.05))
    other.on_step_begin(None, SimpleNamespace(global_step=0), None)
    loss_fn(*scores_and_positives(0)).backward()
    other.on_pre_optimizer_step(None, None, None)  # its first record: the folder is claimed
    assert (tmp_path / "other" / LOCK_NAME).exists()
    _, trainer = attached(tmp_path, raise_at=2)
    with pytest.raises(RuntimeError):
        trainer.train()
    assert other.monitor is not None and (tmp_path / "other" / LOCK_NAME).exists()
    other.on_train_end(None, None, None)
    assert not (tmp_path / "other" / LOCK_NAME).exists()


def test_a_crash_before_any_step_is_not_reported_as_a_missing_monitor_step(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    loss_fn = callback.watch(gradlab.NTXentLoss(0.05))

    class FailingBackward(StandInTrainer):  # the loss is called, then backward fails
        def train(self):
            self.event("on_train_begin")
            self.event("on_step_begin")
            self.loss_fn(*scores_and_positives(0))
            raise RuntimeError("backward failed")

    trainer = FailingBackward(tmp_path / "out", loss_fn)
    callback.attach(trainer)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # "call monitor.step()" would be wrong
        with pytest.raises(RuntimeError, match="backward failed"):
            trainer.train()
    assert callback.monitor is None and not callback.in_step
    # the call of the step that failed is not logged as a last step
    log = tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl"
    assert not log.exists() or read_jsonl(log)[1] == []


def test_a_training_wrapped_by_someone_else_after_attach_is_not_wrapped_again(tmp_path):
    callback, trainer = attached(tmp_path)
    ours = trainer.train

    def timed(*args, **kwargs):  # another tool wraps train after gradlab did
        return ours(*args, **kwargs)

    timed.__wrapped__ = ours  # as functools.update_wrapper leaves it (without the attributes)
    trainer.train = timed
    callback.attach(trainer)
    assert trainer.train is timed  # gradlab's wrapper found under the other one


def test_attached_twice_the_training_is_wrapped_once_and_still_returns(tmp_path):
    callback, trainer = attached(tmp_path)
    wrapper = trainer.train
    callback.attach(trainer)
    assert trainer.train is wrapper and trainer.callback_handler.callbacks == [callback]
    assert trainer.train() == "trained"  # the wrapper returns what train returns
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3, 4]


# --- a real Trainer --------------------------------------------------------------------------


def crashing_trainer_class(raise_at):
    """InBatchTrainer whose ``compute_loss`` raises at optimizer step ``raise_at`` (1-based)."""
    from tests.helpers.hf_models import in_batch_trainer_class

    base = in_batch_trainer_class()

    class CrashingTrainer(base):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if model.training and self.state.global_step + 1 == raise_at:
                raise RuntimeError(f"a data bug at step {raise_at}")
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    return CrashingTrainer


@pytest.mark.slow
def test_a_trainer_cell_that_crashed_runs_again_in_the_same_process(tmp_path):
    pytest.importorskip("accelerate")
    from tests.helpers.hf_models import PairDataset, tiny_bert, training_arguments

    kept = []  # a notebook keeps the crashed cell's objects (its variables, the traceback)

    def cell(raise_at=None, **options):
        callback = GradlabTrainerCallback(preset="cheap", **options)
        trainer = crashing_trainer_class(raise_at)(
            model=tiny_bert(), args=training_arguments(tmp_path / "out"),
            train_dataset=PairDataset(32), loss_fn=callback.watch(gradlab.NTXentLoss(0.05)),
        )  # fmt: skip
        callback.attach(trainer)
        kept.append((callback, trainer))
        trainer.train()
        return trainer

    with pytest.raises(RuntimeError, match="a data bug at step 3"):
        cell(raise_at=3)
    folder = tmp_path / "out" / DEFAULT_FOLDER
    assert not (folder / LOCK_NAME).exists()
    trainer = cell(overwrite=True)  # a new Trainer and callback, the same output_dir
    headers, records = read_jsonl(folder / "metrics.jsonl")
    assert len(headers) == 1 and [record["step"] for record in records] == [1, 2, 3, 4, 5]
    for record, loss in zip(records, trainer.losses, strict=True):
        assert record["loss"] == pytest.approx(loss, rel=1e-6)


def _checkpointing(output_dir, max_steps: int, raise_at=None, **options):
    """A callback and a tiny BERT Trainer (checkpoints every 2 steps) it is attached to."""
    from tests.helpers.hf_models import PairDataset, tiny_bert, training_arguments

    callback = GradlabTrainerCallback(preset="cheap", **options)
    arguments = training_arguments(output_dir, max_steps=max_steps, save_strategy="steps",
                                   save_steps=2)  # fmt: skip
    trainer = crashing_trainer_class(raise_at)(
        model=tiny_bert(), args=arguments, train_dataset=PairDataset(64),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05)),
    )  # fmt: skip
    callback.attach(trainer)
    return callback, trainer


@pytest.mark.slow
def test_after_a_crash_resume_continues_from_the_checkpoint_under_a_new_header(tmp_path):
    pytest.importorskip("accelerate")
    kept = []  # as in a notebook: the crashed cell's objects stay alive

    def cell(raise_at=None, checkpoint=None, **options):
        callback, trainer = _checkpointing(tmp_path / "out", 6, raise_at, **options)
        kept.append((callback, trainer))
        trainer.train(resume_from_checkpoint=checkpoint)
        return trainer

    with pytest.raises(RuntimeError, match="a data bug at step 4"):
        cell(raise_at=4)  # a checkpoint at step 2; steps 1-3 logged
    trainer = cell(checkpoint=True, resume=True)  # the last checkpoint: step 2
    segments = read_segments(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [[record["step"] for record in records] for _, records in segments] == [
        [1, 2, 3], [3, 4, 5, 6]]
    assert segments[1][0]["resumed"]["from_step"] == 3
    for record, loss in zip(segments[1][1], trainer.losses, strict=True):
        assert record["loss"] == pytest.approx(loss, rel=1e-6)



@pytest.mark.slow
def test_a_resumption_from_a_checkpoint_before_the_logs_end_is_said_at_trainer_train(tmp_path):
    # A crash at step 4 after a checkpoint at step 2 and steps 1-3 logged: resumed from the
    # checkpoint, the Trainer trains step 3 again. The Monitor says so, at the user's
    # trainer.train() line, not inside transformers, which calls the callback's step().
    pytest.importorskip("accelerate")
    kept = []

    def cell(raise_at=None, checkpoint=None, **options):
        callback, trainer = _checkpointing(tmp_path / "out", 4, raise_at, **options)
        kept.append((callback, trainer))
        trainer.train(resume_from_checkpoint=checkpoint)

    with pytest.raises(RuntimeError, match="a data bug at step 4"):
        cell(raise_at=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cell(checkpoint=True, resume=True)
    said = [w for w in caught
            if "resumes at step 3, at or before its last record" in str(w.message)]
    assert [w.filename for w in said] == [__file__]
    source = inspect.getsourcelines(cell)
    assert said[0].lineno == source[1] + next(
        i for i, line in enumerate(source[0]) if "trainer.train(" in line)


@pytest.mark.slow
def test_overwrite_on_a_trainer_resumed_from_a_checkpoint_warns_before_anything_is_removed(
    tmp_path,
):
    pytest.importorskip("accelerate")

    def train(checkpoint=None, **options):
        _, trainer = _checkpointing(tmp_path / "out", 4, **options)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.train(resume_from_checkpoint=checkpoint)
        return [w for w in caught if "overwrite=True will replace" in str(w.message)]

    assert train() == []
    told = train(checkpoint=str(tmp_path / "out" / "checkpoint-2"), overwrite=True)
    folder = tmp_path / "out" / DEFAULT_FOLDER
    assert [str(w.message) for w in told] == [
        f"GradlabTrainerCallback: overwrite=True will replace the run in {str(folder)!r} "
        "while the Trainer resumes from a checkpoint at step 2: the records of the steps "
        "before it go with the old files at the first new record, and the log starts "
        "mid-run; GradlabTrainerCallback(resume=True) keeps them and continues after them"
    ]
    assert told[0].filename == __file__  # the train() call
    _, records = read_jsonl(folder / "metrics.jsonl")
    assert [record["step"] for record in records] == [3, 4]


def test_a_monitor_that_cannot_close_never_hides_the_training_s_exception(tmp_path, monkeypatch):
    callback, trainer = attached(tmp_path, raise_at=3)

    class BreakClose:  # a callback after ours: its Monitor's close() fails
        def __getattr__(self, name):
            return lambda *arguments: None

        def on_train_begin(self, *arguments):
            def close(log_last_step=True):
                raise OSError("disk gone")

            callback.monitor.close = close

    trainer.callback_handler.callbacks.append(BreakClose())
    told = []

    def record(message, category=UserWarning, stacklevel=1, **kwargs):  # mutmut-proof frames
        frame = frame_named_by_stacklevel(stacklevel)
        told.append((str(message), category, frame.f_code.co_filename, frame.f_lineno))

    with monkeypatch.context() as patch:
        patch.setattr(warnings, "warn", record)
        with pytest.raises(RuntimeError, match="failed at step 3"):
            line = inspect.currentframe().f_lineno + 1
            trainer.train()
    assert told == [("GradlabTrainerCallback could not close its Monitor after training raised: "
                     "OSError: disk gone", RuntimeWarning, __file__, line)]  # the train() call
    assert callback.monitor is None


@pytest.mark.parametrize(("logging_steps", "state_steps"), [(10, None), (1, 10), (None, 10)])
def test_a_run_shorter_than_the_logging_steps_says_why_its_log_is_empty(
    tmp_path, logging_steps, state_steps
):
    _, trainer = attached(tmp_path)
    trainer.args.logging_steps, trainer.state.logging_steps = logging_steps, state_steps
    with pytest.warns(RuntimeWarning) as caught:
        assert trainer.train() == "trained"
    (message,) = [str(w.message) for w in caught if "logged none" in str(w.message)]
    assert message == (
        "GradlabTrainerCallback logged none of the 4 training steps while training: it logs on "
        "the Trainer's logging steps (logging_steps=10) and the run ended first (the last step "
        "alone, without its gradients, is added when training ends, if the loss allows); set "
        "logging_steps in the training arguments (or GradlabTrainerCallback(every=n)) below the "
        "number of steps")
    _, records = read_jsonl(tmp_path / "out" / DEFAULT_FOLDER / "metrics.jsonl")
    assert [record["step"] for record in records] == [4]  # the last step, added at the end


@pytest.mark.parametrize("options", [{}, {"every": 10}])
def test_a_run_with_records_or_its_own_schedule_does_not_warn_of_logging_steps(tmp_path, options):
    _, trainer = attached(tmp_path, **options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert trainer.train() == "trained"
    assert not [w for w in caught if "logged none" in str(w.message)]


def test_a_folder_another_process_locked_is_refused_with_the_lock_s_words_alone(tmp_path):
    """Callback A has opened its Monitor on the folder but logged nothing (no lock of this
    process), and another live process holds the folder's lock: B's refusal names that
    process, as the Monitor's own refusal does, and does not blame A."""
    folder = tmp_path / "run"
    args = SimpleNamespace(output_dir=None, logging_steps=1)
    first = GradlabTrainerCallback(folder, preset="cheap")
    first.on_train_begin(args, SimpleNamespace(global_step=0, logging_steps=None), None)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / LOCK_NAME).write_text(json.dumps(
            {"host": socket.gethostname(), "pid": other.pid, "token": "other"}))
        with pytest.raises(GradlabError) as by_monitor:
            gradlab.Monitor(folder, preset="cheap")
        second = GradlabTrainerCallback(folder, preset="cheap")
        with pytest.raises(GradlabError) as by_callback:
            second.on_train_begin(args, SimpleNamespace(global_step=0, logging_steps=None), None)
    finally:
        other.kill()
        other.wait()
    assert f"(process {other.pid} on " in str(by_monitor.value)
    assert str(by_callback.value) == str(by_monitor.value)
    first.on_train_end(args, None, None)


@pytest.mark.slow
def test_a_failing_sinks_warning_is_said_at_trainer_train(tmp_path):
    # The run folder's fault warning skipped gradlab and torch frames alone: under the Trainer
    # it named a line inside transformers, which calls the callback's step().
    pytest.importorskip("accelerate")
    import errno

    from gradlab.monitor import Sink

    class Remote(Sink):  # not a file: its write fails at the second step's record
        def write(self, record: dict) -> None:
            if record["step"] == 2:
                raise ConnectionResetError(errno.ECONNRESET, "Connection reset by peer")

    def cell():
        _, trainer = _checkpointing(tmp_path / "out", 3, sinks=["jsonl", Remote()], every=1)
        trainer.train()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cell()
    said = [w for w in caught if "Connection reset by peer" in str(w.message)]
    assert said and [w.filename for w in said] == [__file__] * len(said)
    source = inspect.getsourcelines(cell)
    assert said[0].lineno == source[1] + next(
        i for i, line in enumerate(source[0]) if "trainer.train(" in line)
