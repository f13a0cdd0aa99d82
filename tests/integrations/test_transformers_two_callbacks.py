"""Two GradlabTrainerCallbacks on one trainer: refused at attach when they share a folder
(the second Monitor failed inside train() with advice to pass resume=True)."""

import re

import pytest

pytest.importorskip("transformers")

import gradlab
from gradlab import GradlabError
from gradlab.integrations.transformers import GradlabTrainerCallback
from tests.helpers.hf_models import (
    PairDataset,
    in_batch_trainer_class,
    tiny_bert,
    training_arguments,
)


def trainer(tmp_path, callbacks=None):
    first = GradlabTrainerCallback(preset="cheap")
    return in_batch_trainer_class()(
        model=tiny_bert(), args=training_arguments(tmp_path / "out", max_steps=2),
        train_dataset=PairDataset(16), callbacks=callbacks,
        loss_fn=first.watch(gradlab.NTXentLoss(0.05), inputs="scores"),
    ), first  # fmt: skip


def refusal(tmp_path):
    folder = str((tmp_path / "out" / "gradlab_logs").resolve())
    return re.escape(
        f"trainer already holds a GradlabTrainerCallback writing to {folder!r}; one folder takes "
        "one Monitor: watch every loss with one callback and attach it once, or give each "
        "callback its own log_dir")


def test_a_second_callback_attached_to_the_same_folder_is_refused(tmp_path):
    made, first = trainer(tmp_path)
    first.attach(made)
    with pytest.raises(GradlabError, match=refusal(tmp_path)):
        GradlabTrainerCallback(tmp_path / "out" / "gradlab_logs").attach(made)
    first.attach(made)  # attaching the same callback again only moves it


def test_a_callback_passed_in_callbacks_and_another_attached_are_refused(tmp_path):
    made, first = trainer(tmp_path, callbacks=[GradlabTrainerCallback()])
    with pytest.raises(GradlabError, match=refusal(tmp_path)):
        first.attach(made)


def test_callbacks_with_their_own_folders_both_train(tmp_path):
    made, first = trainer(tmp_path)
    first.attach(made)
    second = GradlabTrainerCallback(tmp_path / "second", preset="cheap").attach(made)
    made.train()
    assert (tmp_path / "out" / "gradlab_logs" / "metrics.jsonl").is_file()
    assert (tmp_path / "second" / "metrics.jsonl").is_file()
    assert second.monitor is None  # closed at the end
