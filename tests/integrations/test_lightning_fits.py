"""GradlabCallback across fits: checkpoints that pickle the loss, the tuner, training further.

Each case is a Lightning habit a new user's trial ran into: ``save_hyperparameters()`` of a
module holding the watched loss, ``Tuner(trainer).lr_find`` before ``fit``, ``fit`` called again
to train further, and a later Trainer that leaves the callback out.
"""

import pickle
import warnings

import pytest
import torch

pytest.importorskip("lightning")

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.tuner import Tuner

import gradlab
from gradlab.integrations.lightning import DEFAULT_FOLDER, GradlabCallback
from gradlab.monitor import read_jsonl
from tests.helpers.lightning_module import LitRetrieval, loader, quiet_trainer


class SavesItsLoss(LitRetrieval):
    """Lightning's habit: every argument of ``__init__`` saved as a hyperparameter."""

    def __init__(self, loss_fn):
        super().__init__(loss_fn)
        self.save_hyperparameters()


def _gradlab_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "gradlab" in str(w.message)]


def test_a_checkpoint_that_pickles_the_watched_loss_is_written_during_the_fit(tmp_path):
    # the checkpoint pickled the callback's open Monitor: "cannot pickle '_io.FileIO' object"
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = SavesItsLoss(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(max_steps=3, callbacks=[callback], logger=False,
                            enable_checkpointing=True, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(module, loader(3))
    (checkpoint,) = (tmp_path / "checkpoints").glob("*.ckpt")
    assert torch.load(checkpoint, weights_only=False)["global_step"] == 3
    # written during the fit, it holds the callback without its Trainer
    assert b"lightning.pytorch.trainer.trainer" not in checkpoint.read_bytes()
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    # after the fit the pickled loss holds neither a Monitor nor the Trainer
    data = pickle.dumps(module.loss_fn)
    assert b"lightning.pytorch.trainer" not in data and b"FileIO" not in data
    loaded = pickle.loads(data)
    assert loaded.callback.monitor is None and loaded.tau == 0.05


def test_the_tuner_s_trial_steps_are_not_logged_and_the_fit_after_them_is(tmp_path):
    # lr_find's fit opened a Monitor, logged nothing (its trial steps run without this
    # callback), left a run in the folder, and the fit after it was refused
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(max_steps=3, callbacks=[callback], logger=False,
                            default_root_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Tuner(trainer).lr_find(module, train_dataloaders=loader(8), num_training=5,
                               early_stop_threshold=None, update_attr=False)  # fmt: skip
        assert not (tmp_path / "run").exists()
        trials = len(module.train_losses)
        trainer.fit(module, loader(3))
    assert _gradlab_warnings(caught) == []
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert trials == 5 and len(headers) == 1 and [r["step"] for r in records] == [0, 1, 2]
    assert [r["loss"] for r in records] == pytest.approx(module.train_losses[trials:], rel=1e-6)


@pytest.mark.parametrize(("log_dir", "overwrite"), [(None, False), ("run", False),
                                                   ("run", True)])  # fmt: skip
def test_fitting_the_same_trainer_again_goes_on_with_its_run(tmp_path, log_dir, overwrite):
    # the second fit was refused (a run in the folder), or without a logger went to a new
    # version_1 folder: training further on one Trainer is one run (overwrite=True replaced
    # what was there before the first fit, not the first fit's records)
    folder = tmp_path / log_dir if log_dir else tmp_path / DEFAULT_FOLDER / "version_0"
    callback = GradlabCallback(None if log_dir is None else folder, preset="cheap", every=1,
                               overwrite=overwrite)  # fmt: skip
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(max_steps=3, callbacks=[callback], logger=False,
                            default_root_dir=tmp_path)  # fmt: skip
    assert callback.run_dir is None  # no fit has opened a Monitor yet
    trainer.fit(module, loader(3))
    assert callback.run_dir == folder  # kept after the fit: the folder to plot
    trainer.fit_loop.epoch_loop.max_steps = 6
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(3))
    assert _gradlab_warnings(caught) == []
    headers, records = read_jsonl(folder / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(6))
    assert len(headers) == 2 and headers[1]["resumed"]["from_step"] == 3
    assert [r["loss"] for r in records] == pytest.approx(module.train_losses, rel=1e-6)
    assert not (tmp_path / DEFAULT_FOLDER / "version_1").exists()


def test_the_same_trainer_fitting_again_from_an_earlier_checkpoint_says_steps_repeat(tmp_path):
    # training further from the checkpoint of step 1 after the run logged steps 0-2: the
    # callback says so (once, the Monitor's own words left out), and steps 1-2 are logged again
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    every_step = ModelCheckpoint(dirpath=tmp_path / "checkpoints", every_n_train_steps=1,
                                 save_top_k=-1, filename="{step}")  # fmt: skip
    trainer = quiet_trainer(max_steps=3, callbacks=[callback, every_step], logger=False,
                            enable_checkpointing=True, default_root_dir=tmp_path)  # fmt: skip
    trainer.fit(module, loader(3))
    trainer.fit_loop.epoch_loop.max_steps = 5
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(3), ckpt_path=tmp_path / "checkpoints" / "step=1.ckpt")
    said = [str(w.message) for w in caught if "gradlab" in str(w.message).lower()]
    assert len(said) == 1 and said[0].startswith(
        f"GradlabCallback: resume=True continues the run in {str(tmp_path / 'run')!r}, whose "
        "last logged step is 2, and the Trainer resumes from a checkpoint at step 1: its steps "
        "1-2 will be logged again after the earlier ones")
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 1, 2, 3, 4]


def test_another_trainer_still_refuses_a_folder_that_holds_a_run(tmp_path):
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    quiet_trainer(max_steps=2, callbacks=[callback], logger=False).fit(module, loader(2))
    with pytest.raises(gradlab.GradlabError, match=r"already holds a run.*\(resume and "
                       r"overwrite are arguments of GradlabCallback\(\.\.\.\)\)$") as raised:
        quiet_trainer(max_steps=2, callbacks=[callback], logger=False).fit(module, loader(2))
    # the Monitor's message is quoted whole: not chained, which said it twice in a traceback
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_later_trainer_that_leaves_the_callback_out_says_that_nothing_is_logged(tmp_path):
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    quiet_trainer(max_steps=2, callbacks=[callback], logger=False).fit(module, loader(2))
    with pytest.warns(RuntimeWarning, match=r"no Trainer has set the callback up") as caught:
        quiet_trainer(max_steps=2, logger=False).fit(module, loader(2))  # callbacks forgotten
    assert len([w for w in caught if "GradlabCallback" in str(w.message)]) == 1
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]


def test_a_learning_rate_finder_among_the_callbacks_logs_only_the_training_after_it(tmp_path):
    # as a callback the finder searches at the start of the same fit, with the Trainer's
    # callbacks set aside: the search's calls must not be read as training steps
    from lightning.pytorch.callbacks import LearningRateFinder

    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    finder = LearningRateFinder(num_training_steps=5, early_stop_threshold=None,
                                update_attr=False)  # fmt: skip
    trainer = quiet_trainer(max_steps=3, callbacks=[finder, callback], logger=False,
                            default_root_dir=tmp_path)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(8))
    assert _gradlab_warnings(caught) == []
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert len(module.train_losses) == 8 and [r["step"] for r in records] == [0, 1, 2]
    assert [r["loss"] for r in records] == pytest.approx(module.train_losses[5:], rel=1e-6)


class ClosesTheMonitor(SavesItsLoss):
    """Closes the callback's Monitor by hand at step 1 (training goes on, with a warning)."""

    def __init__(self, loss_fn, callback):
        super().__init__(loss_fn)
        self.callback = callback

    def training_step(self, batch, batch_idx):
        if self.global_step == 1:
            self.callback.monitor.close()
        return super().training_step(batch, batch_idx)


def test_a_checkpoint_after_the_monitor_was_closed_by_hand_is_written(tmp_path):
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = ClosesTheMonitor(callback.watch(gradlab.SmoothAPLoss(0.05)), callback)
    trainer = quiet_trainer(max_steps=3, callbacks=[callback], logger=False,
                            enable_checkpointing=True, default_root_dir=tmp_path)  # fmt: skip
    with pytest.warns(RuntimeWarning, match=r"closed"):
        trainer.fit(module, loader(3))
    (checkpoint,) = (tmp_path / "checkpoints").glob("*.ckpt")
    assert torch.load(checkpoint, weights_only=False)["global_step"] == 3


def test_a_trainer_fitted_again_after_a_failure_takes_back_both_of_its_callbacks(tmp_path):
    # the failed fit left each callback's Monitor closed (on_exception) and its Trainer set
    # (Lightning runs no teardown hook after an exception): no twin of the other at the retry
    first = GradlabCallback(tmp_path / "a", preset="cheap", every=1)
    second = GradlabCallback(tmp_path / "b", prefix="gradlab_2/", preset="cheap", every=1)
    ones = first.watch(gradlab.SmoothAPLoss(0.05))
    twos = second.watch(gradlab.SmoothAPLoss(0.1))
    module = LitRetrieval(lambda embeddings, labels: ones(embeddings, labels)
                          + twos(embeddings, labels), fail_at=1)  # fmt: skip
    trainer = quiet_trainer(max_steps=3, callbacks=[first, second], logger=False)
    with pytest.raises(RuntimeError, match="on purpose"):
        trainer.fit(module, loader(3))
    module.fail_at = None
    trainer.fit(module, loader(3))  # the retry goes on with each callback's run
    for folder in ("a", "b"):
        _, records = read_jsonl(tmp_path / folder / "metrics.jsonl")
        assert [r["step"] for r in records] == [0, 1, 2]


def test_a_loss_whose_callback_has_fitted_warns_when_another_callback_takes_it(tmp_path):
    # a notebook cell run again after a fit, and a checkpoint's copy of the callback that a
    # fit set up since: either callback logs none of the loss's calls from then on
    def taken(loss_fn):
        with pytest.warns(RuntimeWarning) as caught:
            GradlabCallback(tmp_path / "other").watch(loss_fn)
        return [str(w.message) for w in caught]

    said = [
        "GradlabCallback: loss_fn SmoothAPLoss was watched by another GradlabCallback; it is "
        "now watched by this one alone, and the other logs none of its calls (a loss is "
        "watched by one callback at a time: a notebook cell run again, or two callbacks given "
        "one loss?)"
    ]
    callback = GradlabCallback(tmp_path / "a", preset="cheap", every=1, resume=True)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    quiet_trainer(max_steps=1, callbacks=[callback], logger=False).fit(module, loader(1))
    assert taken(module.loss_fn) == said
    restored = pickle.loads(pickle.dumps(module.loss_fn))
    quiet_trainer(max_steps=1, callbacks=[restored.callback], logger=False).fit(
        LitRetrieval(restored), loader(1))  # fmt: skip
    assert taken(restored) == said
