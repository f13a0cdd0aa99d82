"""GradlabTrainerCallback: the Monitor inside a Hugging Face Trainer (tiny BERT, CPU, offline)."""

import math
import warnings

import pytest
import torch

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import GradlabTrainerCallback
from gradlab.monitor import read_jsonl
from gradlab.monitor.config import MonitorConfig
from tests.helpers.hf_models import (
    PairDataset,
    in_batch_trainer_class,
    tiny_bert,
    training_arguments,
)


def train(tmp_path, callback=None, attach=True, loss_fn=None, **arguments):
    """Train the tiny BERT for the arguments' steps; returns the trainer."""
    trainer_class = in_batch_trainer_class()
    loss_fn = loss_fn or gradlab.NTXentLoss(0.05)
    trainer = trainer_class(
        model=tiny_bert(), args=training_arguments(tmp_path / "out", **arguments),
        train_dataset=PairDataset(32), callbacks=[callback] if callback else None,
        loss_fn=callback.watch(loss_fn) if callback else loss_fn,
    )  # fmt: skip
    if callback is not None and attach:
        callback.attach(trainer)
    trainer.train()
    return trainer


def test_the_lightning_callback_in_a_hugging_face_trainer_names_the_right_one(tmp_path):
    # the two callbacks' names are close: the Trainer raised AttributeError ('on_init_end')
    pytest.importorskip("lightning")
    from gradlab.integrations.lightning import GradlabCallback

    with pytest.raises(GradlabError) as raised:
        in_batch_trainer_class()(model=tiny_bert(), args=training_arguments(tmp_path / "out"),
                                 train_dataset=PairDataset(8), callbacks=[GradlabCallback()],
                                 loss_fn=gradlab.NTXentLoss(0.05))  # fmt: skip
    expected = ("GradlabCallback is the callback of Lightning's Trainer; a Hugging Face (or "
                "sentence-transformers) Trainer takes "
                "gradlab.integrations.transformers.GradlabTrainerCallback")  # fmt: skip
    assert str(raised.value) == expected
    trainer = in_batch_trainer_class()(model=tiny_bert(), train_dataset=PairDataset(8),
                                       args=training_arguments(tmp_path / "out", max_steps=1),
                                       loss_fn=gradlab.NTXentLoss(0.05))  # fmt: skip
    trainer.add_callback(GradlabCallback())  # after the Trainer is made: its first event
    with pytest.raises(GradlabError) as raised:  # is train()'s (AttributeError 'on_train_begin')
        trainer.train()
    assert str(raised.value) == expected


def gradlab_entries(trainer, prefix="gradlab/"):
    return [entry for entry in trainer.state.log_history
            if any(key.startswith(prefix) for key in entry)]  # fmt: skip


def test_the_same_keys_and_steps_in_metrics_jsonl_and_in_the_trainer_history(tmp_path):
    callback = GradlabTrainerCallback(preset="full")
    trainer = train(tmp_path, callback)
    headers, records = read_jsonl(tmp_path / "out" / "gradlab_logs" / "metrics.jsonl")
    assert len(headers) == 1 and callback.monitor is None  # closed at the end
    # One record per optimizer step, numbered as the Trainer's global_step (1..5).
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5]
    entries = gradlab_entries(trainer)
    assert [entry["step"] for entry in entries] == [1, 2, 3, 4, 5]
    for record, entry in zip(records, entries, strict=True):
        logged = {key.removeprefix("gradlab/"): value for key, value in entry.items()
                  if key.startswith("gradlab/")}  # fmt: skip
        assert set(logged) == set(record) - {"step"}
        for key, value in logged.items():
            assert value == record[key] or (math.isnan(value) and math.isnan(record[key]))
    # The logged loss is the Trainer's own training loss of that step (one micro-batch).
    for record, loss in zip(records, trainer.losses, strict=True):
        assert record["loss"] == pytest.approx(loss, rel=1e-6)
    assert any(key.startswith("anatomy_i2t_") for key in records[0])  # dL/dS was read


def test_run_dir_names_the_folder_training_wrote_and_stays_after_it(tmp_path):
    # after train(), monitor was None and log_dir None (the default folder): nothing named it
    for given, folder in ((None, tmp_path / "out" / "gradlab_logs"),
                          (tmp_path / "mine", tmp_path / "mine")):  # fmt: skip
        callback = GradlabTrainerCallback(given, preset="cheap")
        assert callback.run_dir is None  # not trained yet
        train(tmp_path, callback, max_steps=2)
        assert callback.monitor is None and callback.run_dir == folder
        _, records = read_jsonl(callback.run_dir / "metrics.jsonl")
        assert [record["step"] for record in records] == [1, 2]


def test_the_parameters_are_bit_identical_with_and_without_the_callback(tmp_path):
    watched = train(tmp_path / "a", GradlabTrainerCallback(preset="full"))
    plain = train(tmp_path / "b")
    assert watched.losses == plain.losses
    for (name, first), (_, second) in zip(watched.model.named_parameters(),
                                          plain.model.named_parameters(), strict=True):  # fmt: skip
        assert torch.equal(first, second), name


def test_gradient_accumulation_logs_one_record_per_optimizer_step(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    trainer = train(tmp_path, callback, max_steps=3, gradient_accumulation_steps=2,
                    per_device_train_batch_size=4)  # fmt: skip
    _, records = read_jsonl(tmp_path / "out" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3]
    assert len(trainer.losses) == 6  # two micro-batches per optimizer step
    for record in records:  # the last micro-batch of each step
        assert record["loss"] == pytest.approx(trainer.losses[2 * record["step"] - 1], rel=1e-6)


def test_evaluation_calls_are_not_logged(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    trainer_class = in_batch_trainer_class()
    trainer = trainer_class(
        model=tiny_bert(), args=training_arguments(tmp_path, eval_strategy="steps", eval_steps=2),
        train_dataset=PairDataset(32), eval_dataset=PairDataset(16, seed=1),
        callbacks=[callback], loss_fn=callback.watch(gradlab.NTXentLoss(0.05)),
    )  # fmt: skip
    callback.attach(trainer)
    trainer.train()
    _, records = read_jsonl(tmp_path / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2, 3, 4, 5]
    for record, loss in zip(records, trainer.losses, strict=True):
        assert record["loss"] == pytest.approx(loss, rel=1e-6)  # training losses only
    assert any("eval_loss" in entry for entry in trainer.state.log_history)


def test_the_monitor_schedule_follows_the_logging_steps(tmp_path):
    callback = GradlabTrainerCallback(preset="cheap")
    trainer = train(tmp_path, callback, max_steps=6, logging_steps=3)
    _, records = read_jsonl(tmp_path / "out" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [3, 6]
    entries = gradlab_entries(trainer)
    assert [entry["step"] for entry in entries] == [3, 6]
    # gradlab/loss is the logged step's own loss; the Trainer's loss beside it is the mean of
    # the steps since its previous log (as the docs say).
    for entry in entries:
        step = entry["step"]
        assert entry["gradlab/loss"] == pytest.approx(trainer.losses[step - 1], rel=1e-6)
        assert entry["loss"] == pytest.approx(sum(trainer.losses[step - 3:step]) / 3, rel=1e-4)


@pytest.mark.slow
def test_attached_the_report_to_backends_receive_gradlab_values(tmp_path):
    event_accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator"
    )

    def tags(folder):
        files = sorted(folder.rglob("events.out.tfevents*"))
        accumulator = event_accumulator.EventAccumulator(str(files[-1].parent))
        accumulator.Reload()
        return accumulator.Tags()["scalars"]

    train(tmp_path / "a", GradlabTrainerCallback(preset="cheap"), report_to="tensorboard")
    attached = tags(tmp_path / "a")
    assert "train/gradlab/loss" in attached and "train/loss" in attached  # train/: the backend
    with pytest.warns(RuntimeWarning, match="not attached with callback.attach"):
        train(tmp_path / "b", GradlabTrainerCallback(preset="cheap"), attach=False,
              report_to="tensorboard")
    assert not any("gradlab/" in tag for tag in tags(tmp_path / "b"))


def test_the_console_lines_show_the_trainers_keys_and_the_backends_get_gradlabs(tmp_path,
                                                                                   capsys):
    # Attached before a report_to backend, the callback's values reached the printing
    # callback too: every console line carried every gradlab key (~3,000 characters a step
    # with the full preset). The console shows the Trainer's own keys; the backend and
    # log_history keep gradlab's.
    pytest.importorskip("tensorboard")
    trainer = train(tmp_path, GradlabTrainerCallback(preset="cheap"), max_steps=2,
                    report_to="tensorboard")  # disable_tqdm: PrinterCallback prints each log
    printed = [line for line in capsys.readouterr().out.splitlines() if "'loss'" in line]
    assert len(printed) == 2 and not any("gradlab/" in line for line in printed)
    entries = gradlab_entries(trainer)
    assert [entry["step"] for entry in entries] == [1, 2]
    assert all("loss" in entry and "gradlab/loss" in entry for entry in entries)


def test_attach_moves_the_callback_before_the_reporting_callbacks(tmp_path):
    from transformers.integrations import TensorBoardCallback

    callback = GradlabTrainerCallback()
    trainer_class = in_batch_trainer_class()
    trainer = trainer_class(model=tiny_bert(), args=training_arguments(tmp_path,
                            report_to="tensorboard"), train_dataset=PairDataset(8),
                            callbacks=[callback], loss_fn=gradlab.NTXentLoss(0.05))  # fmt: skip
    order = [type(c) for c in trainer.callback_handler.callbacks]
    assert order.index(GradlabTrainerCallback) > order.index(TensorBoardCallback)
    assert callback.attach(trainer) is callback
    order = [type(c) for c in trainer.callback_handler.callbacks]
    assert order.index(GradlabTrainerCallback) < order.index(TensorBoardCallback)
    assert order.count(GradlabTrainerCallback) == 1


def test_the_watched_loss_is_the_loss_outside_a_training_step():
    callback = GradlabTrainerCallback()
    loss_fn = gradlab.NTXentLoss(0.05)
    watched = callback.watch(loss_fn)
    scores = torch.randn(4, 4)
    positives = torch.eye(4, dtype=torch.bool)
    assert torch.equal(watched(scores, positives), loss_fn(scores, positives))
    assert watched.temperature == 0.05 and watched.__wrapped__ is loss_fn


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda tmp: GradlabTrainerCallback(prefix=3), "prefix must be a string; got 3"),
        (lambda tmp: GradlabTrainerCallback(preset="everything"), "preset must be one of"),
        (lambda tmp: GradlabTrainerCallback(options={"tau": 0.1}), "options must be a "
         "MonitorConfig"),
        (lambda tmp: GradlabTrainerCallback(log_dir=tmp / "file.txt"), "log_dir"),
        (lambda tmp: GradlabTrainerCallback().watch(3), "loss_fn must be callable"),
        (lambda tmp: GradlabTrainerCallback().attach(object()), "trainer must be a "
         "transformers.Trainer"),
    ],
)
def test_bad_arguments_are_refused_with_the_argument_and_the_value(tmp_path, make, match):
    (tmp_path / "file.txt").write_text("not a folder")
    with pytest.raises(GradlabError, match=match):
        make(tmp_path)


def test_no_warning_is_raised_when_nothing_is_reported(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        train(tmp_path, GradlabTrainerCallback(preset="cheap"), attach=False, max_steps=2)


def test_a_misspelt_keyword_is_named_with_the_callbacks_own_keywords():
    # GradlabTrainerCallback(logdir=...) listed the Monitor's options alone, not log_dir
    with pytest.raises(GradlabError) as error:
        GradlabTrainerCallback(logdir="runs/a")
    assert str(error.value) == (
        "GradlabTrainerCallback takes its own ['log_dir', 'prefix', 'options'] and the Monitor's "
        f"options {MonitorConfig.names()}; got ['logdir'] (did you mean 'log_dir' for "
        "'logdir'?)")
