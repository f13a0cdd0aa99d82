"""Two GradlabTrainerCallbacks on one trainer: refused at attach when they share a folder
(the second Monitor failed inside train() with advice to pass resume=True)."""

import re
import warnings

import pytest

pytest.importorskip("transformers")

import gradlab
from gradlab.errors import GradlabError, RunExistsError
from gradlab.integrations.transformers import GradlabTrainerCallback
from gradlab.monitor.sinks import read_segments
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
    """The whole refusal while the first callback has not trained (no advice to remove it)."""
    folder = str((tmp_path / "out" / "gradlab_logs").resolve())
    return "^" + re.escape(
        f"trainer already holds a GradlabTrainerCallback writing to {folder!r}; one folder takes "
        "one Monitor: watch every loss with one callback and attach it once, or give each "
        "callback its own log_dir") + "$"


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


def test_a_second_callback_reporting_under_the_same_prefix_is_refused(tmp_path):
    # its own log_dir, the default prefix: the Trainer's logs kept the first callback's values
    # and the warning called them the Trainer's, advising the prefix already in use
    made, first = trainer(tmp_path)
    first.attach(made)
    with pytest.raises(GradlabError) as raised:
        GradlabTrainerCallback(tmp_path / "second", preset="cheap").attach(made)
    assert str(raised.value) == (
        "trainer already holds a GradlabTrainerCallback reporting to the Trainer's logs under "
        "prefix='gradlab/'; the logs keep one value per key, so this callback's would be lost: "
        "give it its own prefix (prefix='gradlab_2/'), or watch every loss with one callback")


def test_callbacks_with_their_own_folders_and_prefixes_both_train_and_report(tmp_path):
    first = GradlabTrainerCallback(preset="cheap")
    second = GradlabTrainerCallback(tmp_path / "second", prefix="gradlab_2/", preset="cheap")
    ones = first.watch(gradlab.NTXentLoss(0.05), inputs="scores")  # each its own loss
    twos = second.watch(gradlab.NTXentLoss(0.1), inputs="scores")
    made = in_batch_trainer_class()(
        model=tiny_bert(), args=training_arguments(tmp_path / "out", max_steps=2),
        train_dataset=PairDataset(16),
        loss_fn=lambda scores, positives: ones(scores, positives) + twos(scores, positives),
    )  # fmt: skip
    first.attach(made)
    second.attach(made)
    made.train()
    assert (tmp_path / "out" / "gradlab_logs" / "metrics.jsonl").is_file()
    assert (tmp_path / "second" / "metrics.jsonl").is_file()
    assert second.monitor is None  # closed at the end
    logged = [entry for entry in made.state.log_history if "gradlab/loss" in entry]
    assert [entry["step"] for entry in logged] == [1, 2]
    assert all(entry["gradlab/loss"] + entry["gradlab_2/loss"] == pytest.approx(entry["loss"])
               for entry in logged)  # both reported: their sum is the Trainer's loss


def test_two_callbacks_passed_with_one_prefix_are_told_to_take_their_own(tmp_path):
    # passed in callbacks=[...] (no attach to refuse them): the second's values were said to
    # clash with "the Trainer's" keys, and the advice was the prefix already in use
    first = GradlabTrainerCallback(preset="cheap")
    second = GradlabTrainerCallback(tmp_path / "second", preset="cheap")
    ones = first.watch(gradlab.NTXentLoss(0.05), inputs="scores")
    twos = second.watch(gradlab.NTXentLoss(0.1), inputs="scores")
    made = in_batch_trainer_class()(
        model=tiny_bert(), args=training_arguments(tmp_path / "out", max_steps=2),
        train_dataset=PairDataset(16), callbacks=[first, second],
        loss_fn=lambda scores, positives: ones(scores, positives) + twos(scores, positives),
    )  # fmt: skip
    with pytest.warns(RuntimeWarning) as caught:
        made.train()
    told = [str(w.message) for w in caught if "already" in str(w.message)]
    assert len(told) == 1 and told[0].startswith(
        "GradlabTrainerCallback: the Trainer's logs hold ['gradlab/degenerate_batch', ")
    assert told[0].endswith(
        "already, under this callback's prefix='gradlab/': another gradlab callback of the "
        "Trainer reports there, its values are kept and this callback's are in metrics.jsonl "
        "only; give each callback its own prefix (prefix='gradlab_2/') to report both (later "
        "such steps are not warned about)")


def test_training_the_same_trainer_again_says_how_and_that_way_works(tmp_path):
    # was: "resume and overwrite are arguments of GradlabTrainerCallback(...)", and a new
    # callback with overwrite=True was then refused at attach (the trainer still held the first)
    made, first = trainer(tmp_path)
    first.attach(made)
    made.train()
    folder = str((tmp_path / "out" / "gradlab_logs").resolve())
    with pytest.raises(RunExistsError) as raised:
        made.train()
    assert str(raised.value).endswith(
        "; this GradlabTrainerCallback logged an earlier train() there (a callback logs one "
        "run): to train that trainer again, replace the callback: "
        "trainer.remove_callback(callback), then watch the loss with a new "
        "GradlabTrainerCallback(log_dir=...) in a folder of its own (gradlab plot draws the two "
        "runs side by side), GradlabTrainerCallback(overwrite=True) (this run replaced) or "
        "GradlabTrainerCallback(resume=True) (the new records follow this run's and replace its "
        "steps in gradlab plot), and attach it; to train another trainer, give it its own "
        "GradlabTrainerCallback with its own log_dir")
    assert raised.value.__cause__ is None  # its message quoted whole: said once in a traceback
    assert raised.value.__suppress_context__
    with pytest.raises(GradlabError) as refused:  # a new one while the first is still there
        GradlabTrainerCallback(overwrite=True).attach(made)
    assert str(refused.value) == (
        f"trainer already holds a GradlabTrainerCallback writing to {folder!r}; one folder takes "
        "one Monitor: watch every loss with one callback and attach it once, or give each "
        "callback its own log_dir; that callback's train() has ended: to train again, remove it "
        "first (trainer.remove_callback(that_callback))")
    made.remove_callback(first)  # the way the messages give
    again = GradlabTrainerCallback(preset="cheap", resume=True)
    made.loss_fn = again.watch(gradlab.NTXentLoss(0.05), inputs="scores")
    again.attach(made)
    made.train()
    segments = read_segments(tmp_path / "out" / "gradlab_logs" / "metrics.jsonl")
    assert [[record["step"] for record in records] for _, records in segments] == [[1, 2], [1, 2]]


def test_resuming_with_other_settings_is_warned_at_the_train_line(tmp_path):
    # was: the warning named transformers' trainer_callback.py, where on_train_begin is called
    made, first = trainer(tmp_path)
    first.attach(made)
    made.train()
    made.remove_callback(first)
    again = GradlabTrainerCallback(preset="default", resume=True)  # the first run: "cheap"
    made.loss_fn = again.watch(gradlab.NTXentLoss(0.05), inputs="scores")
    again.attach(made)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        made.train()
    said = [w for w in caught if "with other settings" in str(w.message)]
    assert [w.filename for w in said] == [__file__]


def test_a_callback_attached_to_a_second_trainer_is_refused_until_the_first_lets_it_go(tmp_path):
    # was accepted: the second trainer's train() was then refused as a rerun "of this trainer"
    # (the first trainer's run), or with overwrite=True replaced the first trainer's records
    first_trainer, callback = trainer(tmp_path)
    callback.attach(first_trainer)
    second_trainer = in_batch_trainer_class()(
        model=tiny_bert(), args=training_arguments(tmp_path / "other", max_steps=2),
        train_dataset=PairDataset(16),
        loss_fn=callback.watch(gradlab.NTXentLoss(0.05), inputs="scores"),
    )  # fmt: skip
    with pytest.raises(GradlabError) as refused:
        callback.attach(second_trainer)
    assert str(refused.value) == (
        f"this GradlabTrainerCallback is attached to another Trainer already "
        f"({type(first_trainer).__name__} at {id(first_trainer):#x}); a callback logs one run: "
        "give each trainer its own GradlabTrainerCallback with its own log_dir, or take it off "
        "the other first: other_trainer.remove_callback(callback)")
    assert callback not in second_trainer.callback_handler.callbacks
    callback.attach(first_trainer)  # the same trainer again: only moved
    first_trainer.remove_callback(callback)  # the way the message gives
    callback.attach(second_trainer)
    second_trainer.train()
    (_, records), = read_segments(tmp_path / "other" / "gradlab_logs" / "metrics.jsonl")
    assert [record["step"] for record in records] == [1, 2]
