"""GradlabCallback's hooks called directly with a stand-in Trainer (no ``Trainer.fit``: fast).

The stand-in has what the hooks read: ``training``, ``optimizers``, ``is_global_zero``,
``loggers``, ``log_dir``, ``default_root_dir`` and ``strategy.broadcast``. The logged losses are
compared with the loss called outside the callback.
"""

import json
import pickle
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("lightning")

from lightning.pytorch.loggers import CSVLogger

import gradlab
from gradlab.integrations.lightning import DEFAULT_FOLDER, GradlabCallback, TrainerLoggersSink
from gradlab.monitor import Sink, read_jsonl


class RecordingLogger:
    """A logger that keeps every ``log_metrics`` call (not a TensorBoard or CSV logger)."""

    def __init__(self, version=None):
        self.version = version
        self.calls = []

    def log_metrics(self, metrics, step=None):
        self.calls.append((dict(metrics), step))


def same(value):
    """One process's broadcast: the value itself."""
    return value


class StandInTrainer(SimpleNamespace):
    """A SimpleNamespace that can be weakly referenced, as a Trainer can."""


def stand_in_trainer(tmp_path, *, rank_zero=True, loggers=(), log_dir=None, broadcast=None):
    return StandInTrainer(
        training=True, optimizers=[object(), object()], is_global_zero=rank_zero,
        callbacks=[], logged_metrics={},
        loggers=list(loggers), log_dir=None if log_dir is None else str(log_dir),
        default_root_dir=str(tmp_path / "root"),
        strategy=SimpleNamespace(broadcast=broadcast or same),
    )  # fmt: skip


def batches(count):
    generator = torch.Generator().manual_seed(7)
    return [(torch.randn(12, 8, generator=generator, requires_grad=True), torch.arange(12) % 3)
            for _ in range(count)]  # fmt: skip


def run_steps(callback, trainer, count, loss_fn):
    """``count`` optimizer steps through the hooks; returns the losses of the training calls."""
    watched = callback.watch(loss_fn)
    losses = []
    for embeddings, labels in batches(count):
        loss = watched(embeddings, labels=labels)  # keywords reach the loss too
        loss.backward()
        losses.append(loss.item())
        callback.on_before_optimizer_step(trainer, None, trainer.optimizers[1])  # not the first
        callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    return losses


def test_the_sink_forwards_the_prefixed_scalars_at_the_record_s_step_from_rank_zero_only(
    tmp_path,
):
    first, second = RecordingLogger(), RecordingLogger()
    record = {"step": 7, "loss": 0.25, "count": 3, "note": "text", "flag": True}
    TrainerLoggersSink(stand_in_trainer(tmp_path, loggers=[first, second]), "run/").write(record)
    for logger in (first, second):
        assert logger.calls == [({"run/loss": 0.25, "run/count": 3.0}, 7)]
        assert type(logger.calls[0][1]) is int
    other = RecordingLogger()
    TrainerLoggersSink(stand_in_trainer(tmp_path, rank_zero=False, loggers=[other])).write(record)
    assert other.calls == []
    default = RecordingLogger()
    TrainerLoggersSink(stand_in_trainer(tmp_path, loggers=[default])).write(record)
    assert set(default.calls[0][0]) == {"gradlab/loss", "gradlab/count"}


def test_the_sink_forwards_nothing_of_a_record_without_a_number(tmp_path):
    # the Monitor's note of a disabled quantity alone: log_metrics({}, step) was called
    logger = RecordingLogger()
    note = {"step": 3, "disabled": {"own": "step 3: raised in compute(): ValueError: x"}}
    TrainerLoggersSink(stand_in_trainer(tmp_path, loggers=[logger])).write(note)
    assert logger.calls == []


def test_one_record_per_first_optimizer_step_numbered_from_zero_and_forwarded(tmp_path):
    logger = RecordingLogger()
    trainer = stand_in_trainer(tmp_path, loggers=[logger])
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1, prefix="lit/")
    callback.setup(trainer, None, "validate")
    assert callback.monitor is None  # only fitting opens the Monitor
    callback.setup(trainer, None, "fit")
    assert callback.monitor is not None
    losses = run_steps(callback, trainer, 3, gradlab.SmoothAPLoss(0.05))
    reference = [gradlab.SmoothAPLoss(0.05)(e.detach(), labels).item()
                 for e, labels in batches(3)]  # fmt: skip
    assert losses == pytest.approx(reference, rel=1e-6)
    callback.on_train_end(trainer, None)
    assert callback.monitor is None
    callback.on_fit_end(trainer, None)  # closing twice is harmless
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1, 2]
    assert [record["loss"] for record in records] == pytest.approx(reference, rel=1e-6)
    assert [step for _, step in logger.calls] == [0, 1, 2]
    assert [values["lit/loss"] for values, _ in logger.calls] == pytest.approx(reference,
                                                                                rel=1e-6)


def test_a_score_matrix_loss_of_your_own_is_watched_with_inputs_scores(tmp_path):
    """dL/dS of ``(weights * scores).sum()`` is ``weights``: row i gives gradient to i
    negatives (row 0 to its positive only), so 1.5 active negatives per query on average."""
    weights = torch.tensor([[1.0, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]])

    def my_loss(scores, positives):
        return (weights * scores).sum()

    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="full", every=1)
    watched = callback.watch(my_loss, inputs="scores")
    callback.setup(trainer, None, "fit")
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0), requires_grad=True)
    watched(scores, torch.eye(4, dtype=torch.bool)).backward()
    callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.on_train_end(trainer, None)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert records[0]["anatomy_i2t_active_negatives_mean"] == pytest.approx(1.5)
    assert records[0]["anatomy_i2t_queries_without_gradient"] == 0


def test_an_unreadable_training_call_warns_at_the_users_line(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    watched = callback.watch(lambda embeddings: embeddings.pow(2).sum())
    callback.setup(trainer, None, "fit")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        watched(torch.randn(8, 4, requires_grad=True))  # one argument: cannot be read
    callback.on_train_end(trainer, None)
    told = [w for w in caught if "cannot read" in str(w.message)]
    assert [(w.filename, w.lineno) for w in told] == [(__file__, line)]


def test_calls_outside_training_are_passed_through_and_not_logged(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    (embeddings, labels), (other, other_labels) = batches(2)
    with pytest.warns(RuntimeWarning, match="no Trainer has set the callback up"):
        value = watched(embeddings, labels)  # a gradient before setup: perhaps training
    assert torch.equal(value, gradlab.SmoothAPLoss(0.05)(embeddings, labels))
    callback.setup(trainer, None, "fit")
    trainer.training = False  # validation inside fit
    watched(other * 2.0, other_labels)
    trainer.training = True
    training_loss = watched(embeddings, labels)
    training_loss.backward()
    trainer.training = False
    watched(other * 2.0, other_labels)  # after backward, before the optimizer step
    callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.on_train_end(trainer, None)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0]
    assert records[0]["loss"] == pytest.approx(training_loss.item(), rel=1e-6)


def test_without_forwarding_the_loggers_receive_nothing(tmp_path):
    logger = RecordingLogger()
    trainer = stand_in_trainer(tmp_path, loggers=[logger])
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1,
                               forward_to_loggers=False)  # fmt: skip
    callback.setup(trainer, None, "fit")
    run_steps(callback, trainer, 2, gradlab.SmoothAPLoss(0.05))
    callback.on_train_end(trainer, None)
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1] and logger.calls == []


@pytest.mark.parametrize(
    ("end", "steps"),
    [
        (lambda callback, trainer: callback.on_train_end(trainer, None), [0, 2, 3]),
        (lambda callback, trainer: callback.on_fit_end(trainer, None), [0, 2, 3]),
        (lambda callback, trainer: callback.on_exception(trainer, None, RuntimeError()), [0, 2]),
        (lambda callback, trainer: callback.teardown(trainer, None, "fit"), [0, 2]),
    ],
)
def test_the_last_step_is_logged_at_the_end_of_training_not_after_a_failure(tmp_path, end,
                                                                           steps):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=2)
    callback.setup(trainer, None, "fit")
    run_steps(callback, trainer, 4, gradlab.SmoothAPLoss(0.05))
    callback.teardown(trainer, None, "validate")  # not the end of fitting
    assert callback.monitor is not None
    end(callback, trainer)
    assert callback.monitor is None
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == steps


def test_a_new_fit_opens_a_new_monitor_that_the_watched_loss_feeds(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=2, resume=True)
    loss_fn = gradlab.SmoothAPLoss(0.05)
    callback.setup(trainer, None, "fit")
    watched = callback.watch(loss_fn)
    for embeddings, labels in batches(2):
        watched(embeddings, labels).backward()
        callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.setup(trainer, None, "fit")  # the previous fit was not closed: setup closes it
    for embeddings, labels in batches(1):
        watched(embeddings, labels).backward()
        callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.on_train_end(trainer, None)
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    # Step 1 of the first fit (off the schedule) is not logged when the next fit closes the
    # unclosed Monitor: the resumed run's step 1 is the second fit's batch, logged at its end.
    assert len(headers) == 2 and [record["step"] for record in records] == [0, 1]
    assert headers[1]["resumed"]["from_step"] == 1
    ((embeddings, labels),) = batches(1)
    assert records[1]["loss"] == pytest.approx(loss_fn(embeddings, labels).item(), rel=1e-6)
    assert torch.equal(watched(embeddings, labels=labels),
                       loss_fn(embeddings, labels))  # after the fit: the loss itself


def test_the_watched_loss_pickles_after_a_training_call_and_reads_the_loss_s_attributes(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap")  # the default schedule
    callback.setup(trainer, None, "fit")
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    ((embeddings, labels),) = batches(1)
    watched(embeddings, labels).backward()
    callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.on_train_end(trainer, None)
    copy = pickle.loads(pickle.dumps(watched))  # a second fit with ddp_spawn pickles the module
    assert copy.tau == 0.05 and copy.callback.monitor is None
    blank = type(watched).__new__(type(watched))  # as unpickling sees it: no attributes yet
    for name in ("callback", "loss_fn", "_inner", "__reduce_ex__x", "tau"):
        with pytest.raises(AttributeError, match=name):
            getattr(blank, name)  # an AttributeError naming it, not a recursion


def test_the_monitor_s_steps_are_the_trainer_s_global_steps(tmp_path):
    # a fit resumed from a checkpoint at step 10 logs 10, 11, ...; micro-batches of one
    # optimizer step (accumulation) share the step
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    callback.setup(trainer, None, "fit")
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    for index, (embeddings, labels) in enumerate(batches(4)):
        trainer.global_step = 10 + index // 2  # two micro-batches per optimizer step
        callback.on_train_batch_start(trainer, None, (embeddings, labels), index)
        watched(embeddings, labels).backward()
        if index % 2:
            callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])
    callback.on_train_end(trainer, None)
    steps = [json.loads(line).get("step") for line in
             (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]  # fmt: skip
    assert steps == [None, 10, 11]  # the header, then the Trainer's steps


@pytest.mark.parametrize(("taken", "resume", "expected"), [
    ((), True, "version_0"),  # nothing to go on with: the first run
    (("version_0", "version_2", "version_x"), True, "version_2"),  # the last numbered run
    (("version_0", "version_2"), False, "version_3"),  # a new run
])  # fmt: skip
def test_without_a_logger_resume_goes_on_with_the_last_numbered_run(tmp_path, taken, resume,
                                                                    expected):
    root = tmp_path / "root" / DEFAULT_FOLDER
    for name in taken:
        (root / name).mkdir(parents=True)
    callback = GradlabCallback(preset="cheap", resume=resume)
    trainer = stand_in_trainer(tmp_path)  # no logger, no log_dir
    trainer.default_root_dir = str(tmp_path / "root")
    callback.setup(trainer, None, "fit")
    try:
        assert Path(callback.monitor.log_dir) == root / expected
    finally:
        callback.on_exception(trainer, None, RuntimeError())


def test_the_default_folder_is_under_the_trainer_s_log_dir(tmp_path):
    def folder(**options):
        callback = GradlabCallback(preset="cheap")
        trainer = stand_in_trainer(tmp_path, **options)
        callback.setup(trainer, None, "fit")
        try:
            return Path(callback.monitor.log_dir)
        finally:
            callback.on_exception(trainer, None, RuntimeError())

    csv = [CSVLogger(tmp_path / "csv")]
    assert folder(log_dir=tmp_path / "logs", loggers=csv) == tmp_path / "logs" / DEFAULT_FOLDER
    # no logger (fast_dev_run: no log_dir; logger=False: the root folder as log_dir): the
    # next free version under the root folder
    root = tmp_path / "root" / DEFAULT_FOLDER
    assert folder() == root / "version_0"
    assert folder(log_dir=tmp_path / "root") == root / "version_1"  # the last call made 0
    for taken in ("version_0", "version_3", "version_x", "notes"):
        (root / taken).mkdir(parents=True, exist_ok=True)
    (root / "version_9").write_text("a file, not a run")
    assert folder() == root / "version_4"
    # A logger whose folder is shared (W&B, MLflow): one folder per run id, chosen on rank 0.
    shared = [RecordingLogger(version="run7")]
    assert folder(log_dir=tmp_path / "cwd", loggers=shared) == (
        tmp_path / "cwd" / DEFAULT_FOLDER / "run7")
    assert folder(log_dir=tmp_path / "b", loggers=[RecordingLogger(version=None)]) == (
        tmp_path / "b" / DEFAULT_FOLDER)
    assert folder(log_dir=tmp_path / "c", loggers=[CSVLogger(tmp_path / "csv")]) == (
        tmp_path / "c" / DEFAULT_FOLDER)  # CSV and TensorBoard folders are per run already
    assert folder(log_dir=tmp_path / "d", loggers=shared, rank_zero=False) == (
        tmp_path / "d" / DEFAULT_FOLDER)  # this stand-in's broadcast keeps the local value
    chosen = str(tmp_path / "from_rank_zero")
    assert folder(log_dir=tmp_path / "e", broadcast=lambda value: chosen) == Path(chosen)


def test_options_given_as_a_monitor_config_are_used(tmp_path):
    from gradlab.monitor.config import MonitorConfig

    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", options=MonitorConfig(preset="cheap", every=3))
    callback.on_before_optimizer_step(trainer, None, trainer.optimizers[0])  # before setup: no-op
    callback.setup(trainer, None, "fit")
    run_steps(callback, trainer, 5, gradlab.SmoothAPLoss(0.05))
    callback.on_exception(trainer, None, RuntimeError())
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 3]


def test_the_default_prefix_is_gradlab(tmp_path):
    logger = RecordingLogger()
    trainer = stand_in_trainer(tmp_path, loggers=[logger])
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    callback.setup(trainer, None, "fit")
    losses = run_steps(callback, trainer, 1, gradlab.SmoothAPLoss(0.05))
    callback.on_train_end(trainer, None)
    assert logger.calls[0][0]["gradlab/loss"] == pytest.approx(losses[0], rel=1e-6)


def test_a_watched_loss_that_trains_before_any_trainer_set_it_up_warns_once(tmp_path):
    callback = GradlabCallback(preset="cheap")
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    embeddings, labels = torch.randn(8, 4), torch.arange(8) % 2
    with warnings.catch_warnings():  # no gradient (evaluation, a check by hand): no warning
        warnings.simplefilter("error", RuntimeWarning)
        watched(embeddings, labels)
    with pytest.warns(RuntimeWarning) as caught:
        for _ in range(3):  # the callback left out of the Trainer's callbacks: said once
            watched(embeddings.clone().requires_grad_(), labels)
    assert [str(w.message) for w in caught] == [
        "gradlab: a loss watched by this GradlabCallback computed a gradient, but no Trainer "
        "has set the callback up, so nothing is logged; if this is training, pass the "
        "callback to the Trainer: Trainer(callbacks=[callback])"]  # fmt: skip
    trainer = stand_in_trainer(tmp_path, log_dir=tmp_path / "logs", loggers=[CSVLogger(tmp_path)])
    callback.setup(trainer, None, "fit")  # set up: no more warnings, training calls logged
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        run_steps(callback, trainer, 2, gradlab.SmoothAPLoss(0.05))
    callback.on_exception(trainer, None, RuntimeError())


@pytest.mark.parametrize(("logged", "restart", "steps"), [
    (2, 0, "steps 0-1"), (1, 0, "step 0"), (2, 2, None), (2, 1, "step 1")])  # fmt: skip
def test_a_resumed_folder_ahead_of_the_fit_s_first_step_warns_that_steps_repeat(
    tmp_path, logged, restart, steps
):
    # the fit starts at step 0 (no checkpoint restored), or at a checkpoint's step before the
    # last logged one, after a run that logged steps already
    trainer = stand_in_trainer(tmp_path)
    first = GradlabCallback(tmp_path / "run", preset="cheap", every=1, tau=0.05)
    first.setup(trainer, None, "fit")
    run_steps(first, trainer, logged, gradlab.SmoothAPLoss(0.05))
    first.on_train_end(trainer, None)
    again = GradlabCallback(tmp_path / "run", preset="cheap", every=1, tau=0.05, resume=True)
    trainer.global_step = restart  # after Lightning restored a checkpoint, or not
    again.setup(trainer, None, "fit")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again.on_train_start(trainer, None)
    again.on_train_end(trainer, None)
    starts = ("but the Trainer starts at step 0" if restart == 0
              else f"and the Trainer resumes from a checkpoint at step {restart}")  # fmt: skip
    advice = ("; resume the Trainer too (trainer.fit(model, ckpt_path=...)), or pass "
              "overwrite=True to start the folder afresh" if restart == 0 else "")  # fmt: skip
    expected = [] if steps is None else [(
        f"GradlabCallback: resume=True continues the run in {str(tmp_path / 'run')!r}, whose "
        f"last logged step is {logged - 1}, {starts}: its {steps} will be logged again after "
        "the earlier ones, and gradlab plot draws the later records of those steps in place "
        f"of the earlier{advice}",
        RuntimeWarning, __file__)]
    assert [(str(w.message), w.category, w.filename) for w in caught] == expected


@pytest.mark.parametrize("restart", [0, 1, 2])
def test_overwrite_on_a_fit_restored_at_a_later_step_warns_before_removing(tmp_path, restart):
    trainer = stand_in_trainer(tmp_path)
    first = GradlabCallback(tmp_path / "run", preset="cheap", every=1, tau=0.05)
    first.setup(trainer, None, "fit")
    run_steps(first, trainer, 2, gradlab.SmoothAPLoss(0.05))
    first.on_train_end(trainer, None)
    again = GradlabCallback(tmp_path / "run", preset="cheap", every=1, tau=0.05, overwrite=True)
    trainer.global_step = restart  # a checkpoint restored at step 1 or 2, or a fresh fit
    again.setup(trainer, None, "fit")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again.on_train_start(trainer, None)
    again.on_train_end(trainer, None)
    expected = [] if restart == 0 else [(
        f"GradlabCallback: overwrite=True will replace the run in {str(tmp_path / 'run')!r} "
        f"while the Trainer resumes from a checkpoint at step {restart}: the records of the steps "
        "before it go with the old files at the first new record, and the log starts mid-run; "
        "GradlabCallback(resume=True) keeps them and continues after them",
        RuntimeWarning, __file__)]
    assert [(str(w.message), w.category, w.filename) for w in caught] == expected


def test_a_fit_at_step_0_in_a_new_folder_or_on_another_rank_is_quiet(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    trainer.global_step = 0
    fresh = GradlabCallback(tmp_path / "new", preset="cheap", resume=True)
    fresh.setup(trainer, None, "fit")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh.on_train_start(trainer, None)
        GradlabCallback(tmp_path / "unset").on_train_start(trainer, None)  # no Monitor yet
    fresh.on_train_end(trainer, None)


def test_a_monitor_closed_by_hand_during_training_warns_once_and_training_goes_on(tmp_path):
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    callback.setup(trainer, None, "fit")
    run_steps(callback, trainer, 2, gradlab.SmoothAPLoss(0.05))
    callback.monitor.close()  # in the LightningModule, or in another callback
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        losses = run_steps(callback, trainer, 3, gradlab.SmoothAPLoss(0.05))
        callback.on_train_end(trainer, None)
    assert [str(w.message) for w in caught] == [
        f"GradlabCallback: its Monitor of {str(tmp_path / 'run')!r} was closed by close() "
        "during training, before step 2: training goes on and the steps from 2 on are not "
        "logged; the callback closes its Monitor itself when training ends (to log fewer "
        "steps, give GradlabCallback(every=n))"
    ]
    assert caught[0].category is RuntimeWarning
    assert caught[0].filename == __file__  # the loss call of run_steps, not gradlab's
    reference = [gradlab.SmoothAPLoss(0.05)(e.detach(), labels).item()
                 for e, labels in batches(3)]  # fmt: skip
    assert losses == pytest.approx(reference, rel=1e-6)  # the loss, unchanged
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1]
    assert callback.monitor is None


class FailsToClose(Sink):
    """A sink whose close() raises, as a full disk would."""

    def write(self, record):
        pass

    def close(self):
        raise OSError("disk full")


def never_stepped_message(calls, folder):
    return (
        f"GradlabCallback: {calls} watched call(s) but Lightning never called "
        "on_before_optimizer_step, where the callback steps the Monitor, so nothing was logged "
        f"in {str(folder)!r}: under manual optimization step the LightningOptimizer that "
        "self.optimizers() returns (optimizer.step()), not the optimizer itself "
        "(self.optimizers(use_pl_optimizer=False))"
    )


def test_a_manual_optimization_fit_that_never_stepped_still_reports_a_sink_s_fault_at_its_end(
    tmp_path,
):
    # only the Monitor's own "monitor.step() was never called" is left unsaid: the callback
    # said it with its cause
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1,
                               sinks=["jsonl", FailsToClose()])  # fmt: skip
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    callback.setup(trainer, None, "fit")
    for embeddings, labels in batches(2):
        watched(embeddings, labels).backward()  # the raw optimizer's step: no hook
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_end(trainer, SimpleNamespace(automatic_optimization=False))
    assert [(str(w.message), w.category, w.filename) for w in caught] == [
        (never_stepped_message(2, tmp_path / "run"), RuntimeWarning, __file__),
        ("gradlab.Monitor: could not write the end of the run (FailsToClose "
         f"({str(tmp_path / 'run')!r}): disk full). Training goes on: a record that cannot be "
         "written is dropped (monitor.dropped_records counts them per sink), the sink is tried "
         "again at every logged step and the first record it takes notes the steps it missed "
         "(dropped_steps); later faults of the same sink are not reported again (strict=True "
         "raises instead)", RuntimeWarning, __file__),
    ]  # fmt: skip
    assert callback.monitor is None


@pytest.mark.parametrize("module", [None, SimpleNamespace(automatic_optimization=True)])
def test_a_fit_that_never_stepped_without_manual_optimization_gets_no_manual_advice(
    tmp_path, module
):
    # a module that does not say it optimizes by hand (automatic optimization whose every
    # training_step returned None): the Monitor's own warning, not the advice on
    # LightningOptimizer
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    callback.setup(trainer, None, "fit")
    ((embeddings, labels),) = batches(1)
    watched(embeddings, labels).backward()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_end(trainer, module)
    assert [(str(w.message), w.category) for w in caught] == [(
        f"gradlab.Monitor: 1 watched call(s) but monitor.step() was never called, so nothing "
        f"was logged in {str(tmp_path / 'run')!r}; call monitor.step() after each optimizer "
        "step", RuntimeWarning)]  # fmt: skip


def test_a_monitor_stepped_by_hand_under_manual_optimization_logs_its_last_step_at_the_end(
    tmp_path,
):
    # step 1 is off the schedule (every=2): the end of training logs it, as after any fit. A
    # raw optimizer leaves the Trainer's step at 0: the Monitor counts its own steps (each
    # batch's start set it back to 0), and the end does not say that nothing was logged
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=2)
    watched = callback.watch(gradlab.SmoothAPLoss(0.05))
    callback.setup(trainer, None, "fit")
    trainer.global_step = 0
    for index, (embeddings, labels) in enumerate(batches(2)):
        callback.on_train_batch_start(trainer, None, (embeddings, labels), index)
        watched(embeddings, labels).backward()
        callback.monitor.step()  # by hand: Lightning's hook never runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.on_train_end(trainer, SimpleNamespace(automatic_optimization=False))
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1]
    assert [str(w.message) for w in caught] == []


def test_a_batch_start_before_setup_or_after_the_end_does_nothing(tmp_path):
    # no Monitor to give the Trainer's step to (a fit that was never set up, or whose end
    # closed it): the hook does nothing, whatever the step
    trainer = stand_in_trainer(tmp_path)
    callback = GradlabCallback(tmp_path / "run", preset="cheap")
    trainer.global_step = 3
    callback.on_train_batch_start(trainer, None, None, 0)
    assert callback.monitor is None and not (tmp_path / "run").exists()


def test_a_loss_of_a_callback_pickled_by_gradlab_0_2_0_is_taken_over_quietly(tmp_path):
    # gradlab 0.2.0 pickled the callback's whole state, without the mark of a checkpoint's
    # copy: unpickling such a file gives a callback whose state lacks it, a copy all the same
    state = GradlabCallback(tmp_path / "old").__getstate__()
    del state["_restored"]  # the state as 0.2.0 wrote it
    old = pickle.loads(pickle.dumps(state))
    restored = GradlabCallback.__new__(GradlabCallback)
    restored.__dict__.update(old)  # what unpickling does without a __setstate__
    loss_fn = restored.watch(gradlab.SmoothAPLoss(0.05))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        GradlabCallback(tmp_path / "new").watch(loss_fn)
    assert caught == []
