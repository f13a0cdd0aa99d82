"""GradlabCallback: the Monitor inside Trainer.fit (CPU; DDP with gloo in two processes)."""

import csv
import importlib
import socket
import sys
import warnings

import pytest
import torch

pytest.importorskip("lightning")

from lightning.pytorch.loggers import CSVLogger

import gradlab
from gradlab import GradlabError
from gradlab.functional import in_batch_layout, operating_region_proportion
from gradlab.integrations.lightning import DEFAULT_FOLDER, GradlabCallback
from gradlab.models import EmbeddingMLP
from gradlab.monitor import read_jsonl
from tests.helpers.lightning_module import (
    LitRetrieval,
    ddp_worker,
    loader,
    quiet_trainer,
    rank_batch,
)
from tests.helpers.processes import run_two_ranks


def test_fit_logs_the_training_steps_and_forwards_them_to_the_loggers(tmp_path):
    callback = GradlabCallback(tau=0.05)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(
        max_steps=20, callbacks=[callback], logger=CSVLogger(tmp_path), val_check_interval=10,
        limit_val_batches=2, num_sanity_val_steps=0,
    )  # fmt: skip
    trainer.fit(module, loader(20), loader(2, seed=1))
    assert callback.monitor is None and module.val_calls > 0
    log_dir = tmp_path / "lightning_logs" / "version_0"
    headers, records = read_jsonl(log_dir / "gradlab_logs" / "metrics.jsonl")
    # Default schedule: steps 0-9 and 10; the last step, 19, at the end of training (after
    # which validation runs: its loss calls must not count as the last step).
    assert len(headers) == 1 and [r["step"] for r in records] == [*range(11), 19]
    for record in records:  # the training losses, not the validation ones
        assert record["loss"] == pytest.approx(module.train_losses[record["step"]], rel=1e-6)
    assert "p_seed" in records[0] and "embedding_grad_norm" in records[0]
    assert "embedding_grad_norm" not in records[-1]  # no gradient is kept off-schedule
    with (log_dir / "metrics.csv").open(newline="") as handle:
        forwarded = [row for row in csv.DictReader(handle) if row.get("gradlab/loss")]
    assert [int(row["step"]) for row in forwarded] == [r["step"] for r in records]
    for row, record in zip(forwarded, records, strict=True):
        assert float(row["gradlab/loss"]) == pytest.approx(record["loss"], rel=1e-6)
        assert float(row["gradlab/p_seed"]) == pytest.approx(record["p_seed"], rel=1e-6)


def test_an_empty_prefix_that_repeats_a_key_the_module_logs_warns_once(tmp_path):
    # prefix="" and the module's self.log("loss"): Lightning's CSV held two rows per step,
    # silently (the Hugging Face callback warned in the same case)
    class LoggingLoss(LitRetrieval):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.log("loss", loss + 100.0)
            return loss

    def fit(prefix: str):
        callback = GradlabCallback(preset="cheap", every=1, prefix=prefix)
        module = LoggingLoss(callback.watch(gradlab.SmoothAPLoss(0.05)))
        trainer = quiet_trainer(max_steps=3, callbacks=[callback], log_every_n_steps=1,
                                logger=CSVLogger(tmp_path, version=prefix or "bare"))  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.fit(module, loader(3))
        return [w for w in caught if "GradlabCallback" in str(w.message)]

    assert fit("gradlab/") == []
    (warning,) = fit("")  # once, not once per step
    assert str(warning.message) == (
        "GradlabCallback: the module logs ['loss'] itself (self.log), which gradlab's record "
        "also has under prefix='': the Trainer's loggers receive two values of each at the "
        "same step (Lightning's CSVLogger writes two rows per step); give a prefix (the "
        "default 'gradlab/') to tell them apart (later such steps are not warned about)"
    )
    assert warning.category is RuntimeWarning and warning.filename == __file__
    with (tmp_path / "lightning_logs" / "bare" / "metrics.csv").open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["loss"]]
    assert [row["step"] for row in rows] == ["0", "0", "1", "1", "2", "2"]  # as said


def test_the_watched_loss_is_the_loss_outside_training_and_keeps_its_attributes(tmp_path):
    import pickle

    loss_fn = gradlab.SmoothAPLoss(0.05)
    watched = GradlabCallback(tmp_path / "run").watch(loss_fn)
    embeddings, labels = torch.randn(8, 4), torch.arange(8) % 2
    assert torch.equal(watched(embeddings, labels), loss_fn(embeddings, labels))
    assert watched.tau == 0.05 and watched.__wrapped__ is loss_fn
    assert pickle.loads(pickle.dumps(watched)).tau == 0.05  # ddp_spawn pickles the module


@pytest.mark.parametrize("make", [lambda: gradlab.SmoothAPLoss(0.05),
                                  lambda: (lambda embeddings, labels: embeddings.sum())])
def test_a_loss_watched_again_is_wrapped_once(tmp_path, make):
    # callback.watch(callback.watch(loss)) wrapped it twice: a fit warned that two watched
    # losses were called before monitor.step()
    callback, original = GradlabCallback(tmp_path / "run", preset="cheap", every=1), make()
    loss_fn = callback.watch(original)
    assert callback.watch(loss_fn) is loss_fn
    with pytest.warns(RuntimeWarning, match="was watched by another GradlabCallback"):
        other = GradlabCallback(tmp_path / "other").watch(loss_fn)
    assert other.__wrapped__ is original and callback.watch(loss_fn) is loss_fn
    module = LitRetrieval(callback.watch(loss_fn))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "two watched losses were called"
        quiet_trainer(max_steps=2, logger=False, callbacks=[callback]).fit(module, loader(2))
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [record["step"] for record in records] == [0, 1]


def test_a_loss_watched_by_a_second_callback_warns_that_the_first_logs_nothing(tmp_path):
    # cb2.watch(cb1.watch(loss)) in one Trainer: cb1's folder held a header only, and its
    # warning told the user to train with the wrapped loss, which they did
    first = GradlabCallback(tmp_path / "a", preset="cheap", every=1)
    second = GradlabCallback(tmp_path / "b", preset="cheap", every=1)
    watched = first.watch(gradlab.SmoothAPLoss(0.05))
    with pytest.warns(RuntimeWarning) as caught:
        loss_fn = second.watch(watched)
    assert [str(w.message) for w in caught] == [
        "GradlabCallback: loss_fn SmoothAPLoss was watched by another GradlabCallback; it is "
        "now watched by this one alone, and the other logs none of its calls (a loss is "
        "watched by one callback at a time: a notebook cell run again, or two callbacks given "
        "one loss?)"
    ]
    assert caught[0].filename == __file__  # the watch() call

    def my_loss(embeddings, labels):  # a function: named by its own name, not "function"
        return gradlab.SmoothAPLoss(0.05)(embeddings, labels)

    with pytest.warns(RuntimeWarning) as caught:
        second.watch(first.watch(my_loss))
    assert str(caught[0].message).startswith("GradlabCallback: loss_fn my_loss was watched by ")
    trainer = quiet_trainer(max_steps=2, logger=False, callbacks=[first, second])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the first's "step 0 logs nothing"
        trainer.fit(LitRetrieval(loss_fn), loader(2))
    assert read_jsonl(tmp_path / "a" / "metrics.jsonl")[1] == []  # as said
    assert [r["step"] for r in read_jsonl(tmp_path / "b" / "metrics.jsonl")[1]] == [0, 1]


def _two_losses(first, second):
    ones = first.watch(gradlab.SmoothAPLoss(0.05))
    twos = second.watch(gradlab.SmoothAPLoss(0.1))
    return lambda embeddings, labels: ones(embeddings, labels) + twos(embeddings, labels)


@pytest.mark.parametrize("ahead", [0, 1])
def test_a_second_callback_on_the_same_folder_is_refused_at_setup(tmp_path, ahead):
    # both with the default folder: step 0 trained, then the fit crashed in monitor.step() on
    # the other's lock, advising to close() a Monitor the user never held; another callback
    # ahead of them in the Trainer's list is passed over, not the end of the search
    from lightning.pytorch.callbacks import Callback

    first, second = GradlabCallback(preset="cheap"), GradlabCallback(preset="cheap")
    trainer = quiet_trainer(max_steps=2, logger=CSVLogger(tmp_path),
                            callbacks=[*(Callback() for _ in range(ahead)), first, second])
    folder = (tmp_path / "lightning_logs" / "version_0" / DEFAULT_FOLDER).resolve()
    with pytest.raises(GradlabError) as raised:
        trainer.fit(LitRetrieval(_two_losses(first, second)), loader(2))
    assert str(raised.value) == (
        f"trainer already holds a GradlabCallback writing to {str(folder)!r}; one folder takes "
        "one Monitor: watch every loss with one callback, or give each callback its own log_dir")
    assert trainer.global_step == 0  # refused before any step
    # by the first of the two, before its Monitor opened: nothing was written there, so the fit
    # with the clash mended starts afresh (no run to resume or overwrite)
    assert not (folder / "metrics.jsonl").exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_trainer(max_steps=2, logger=CSVLogger(tmp_path), callbacks=[first]).fit(
            LitRetrieval(first.watch(gradlab.SmoothAPLoss(0.05))), loader(2))
    assert [str(w.message) for w in caught if "gradlab" in str(w.message).lower()] == []


def test_two_callbacks_forwarding_under_one_prefix_are_refused_and_under_two_both_log(
        tmp_path):
    # own folders, one prefix: the loggers got two values of gradlab/loss at each step, silently
    first = GradlabCallback(tmp_path / "a", preset="cheap", every=1)
    second = GradlabCallback(tmp_path / "b", preset="cheap", every=1)
    trainer = quiet_trainer(max_steps=2, logger=CSVLogger(tmp_path), callbacks=[first, second])
    with pytest.raises(GradlabError) as raised:
        trainer.fit(LitRetrieval(_two_losses(first, second)), loader(2))
    assert str(raised.value) == (
        "trainer already holds a GradlabCallback forwarding to its loggers under "
        "prefix='gradlab/'; the loggers would get two values of each key at one step: give "
        "this callback its own prefix (prefix='gradlab_2/'), or watch every loss with one "
        "callback")
    first = GradlabCallback(tmp_path / "c", preset="cheap", every=1)
    second = GradlabCallback(tmp_path / "d", prefix="gradlab_2/", preset="cheap", every=1)
    logger = CSVLogger(tmp_path, name="two")
    quiet_trainer(max_steps=2, logger=logger, callbacks=[first, second]).fit(
        LitRetrieval(_two_losses(first, second)), loader(2))
    with (tmp_path / "two" / "version_0" / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for key in ("gradlab/loss", "gradlab_2/loss"):  # each callback's values, once per step
        assert [int(row["step"]) for row in rows if row.get(key)] == [0, 1]


@pytest.mark.parametrize("clash", ["folder", "prefix"])
def test_two_clashing_callbacks_write_nothing_and_the_corrected_fit_runs(tmp_path, clash):
    # the refusal came at the second callback's setup, after the first had opened its Monitor:
    # the first folder kept a header, so the fit rerun with the second callback corrected was
    # refused again, now as a folder that holds a run
    first = GradlabCallback(tmp_path / "a", preset="cheap", every=1)
    second = GradlabCallback(tmp_path / ("a" if clash == "folder" else "b"),
                             prefix="gradlab_2/" if clash == "folder" else "gradlab/",
                             preset="cheap", every=1)  # fmt: skip
    trainer = quiet_trainer(max_steps=2, logger=CSVLogger(tmp_path), callbacks=[first, second])
    with pytest.raises(GradlabError, match="trainer already holds a GradlabCallback"):
        trainer.fit(LitRetrieval(_two_losses(first, second)), loader(2))
    assert trainer.global_step == 0
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()  # nothing written
    first = GradlabCallback(tmp_path / "a", preset="cheap", every=1)  # the same first callback
    second = GradlabCallback(tmp_path / "c", prefix="gradlab_2/", preset="cheap", every=1)
    trainer = quiet_trainer(max_steps=2, logger=CSVLogger(tmp_path), callbacks=[first, second])
    trainer.fit(LitRetrieval(_two_losses(first, second)), loader(2))
    for name in ("a", "c"):
        assert [r["step"] for r in read_jsonl(tmp_path / name / "metrics.jsonl")[1]] == [0, 1]


def test_a_failing_fit_closes_the_monitor_with_valid_records(tmp_path):
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)), fail_at=5)
    trainer = quiet_trainer(max_steps=20, callbacks=[callback], logger=False)
    with pytest.raises(RuntimeError, match="on purpose"):
        trainer.fit(module, loader(20))
    assert callback.monitor is None
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert len(headers) == 1 and [r["step"] for r in records] == [0, 1, 2, 3, 4]


def test_a_second_fit_into_the_same_log_dir_is_refused(tmp_path):
    def fit(**options):
        callback = GradlabCallback(tmp_path / "run", preset="cheap", **options)
        module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
        # the raw optimizer moves no global_step: max_steps would never be reached
        quiet_trainer(max_epochs=1, callbacks=[callback], logger=False).fit(module, loader(3))

    fit()
    with pytest.raises(GradlabError, match=r"resume=True.*overwrite=True.*\(resume and "
                       r"overwrite are arguments of GradlabCallback\(\.\.\.\)\)$"):  # fmt: skip
        fit()
    fit(resume=True)  # a new fit from step 0, appended: the Monitor's steps are the Trainer's
    headers, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 0, 1, 2]
    assert headers[1]["resumed"]["from_step"] == 0


def test_fits_without_a_logger_from_one_folder_are_numbered_runs(tmp_path):
    # Lightning's log_dir is its default_root_dir without a logger (not None): each fit still
    # gets the next version, as Lightning numbers its own runs, instead of a refusal
    for options in ({"logger": False}, {"logger": False}, {"fast_dev_run": 2}):
        callback = GradlabCallback(preset="cheap", every=1)
        module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
        quiet_trainer(max_steps=2, callbacks=[callback], default_root_dir=tmp_path,
                      **options).fit(module, loader(2))  # fmt: skip
    root = tmp_path / DEFAULT_FOLDER
    assert sorted(path.name for path in root.iterdir()) == ["version_0", "version_1", "version_2"]
    for version in range(3):
        _, records = read_jsonl(root / f"version_{version}" / "metrics.jsonl")
        assert [r["step"] for r in records] == [0, 1]


def test_run_dir_names_the_folder_each_fit_wrote_and_stays_after_the_fit(tmp_path):
    # after fit, monitor was None and log_dir None (the default folder): nothing said where
    # the run went, version_1 here
    (tmp_path / DEFAULT_FOLDER / "version_0").mkdir(parents=True)  # an earlier run's
    chosen = GradlabCallback(tmp_path / "mine", preset="cheap", every=1)
    expected = {"logger=None": tmp_path / DEFAULT_FOLDER / "version_1",
                "csv": tmp_path / "csv" / "lightning_logs" / "version_0" / DEFAULT_FOLDER,
                "log_dir": tmp_path / "mine"}  # fmt: skip
    for name, folder in expected.items():
        callback = chosen if name == "log_dir" else GradlabCallback(preset="cheap", every=1)
        assert callback.run_dir is None  # no fit yet
        module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
        options = ({"logger": CSVLogger(tmp_path / "csv")} if name == "csv"
                   else {"fast_dev_run": 2})  # fmt: skip
        quiet_trainer(max_steps=2, callbacks=[callback], default_root_dir=tmp_path,
                      **options).fit(module, loader(2))  # fmt: skip
        assert callback.monitor is None, name
        assert callback.run_dir == folder, name
        _, records = read_jsonl(callback.run_dir / "metrics.jsonl")
        assert [r["step"] for r in records] == [0, 1], name


def _fit_from_checkpoint(tmp_path, max_steps: int, checkpoint, kept, **options):
    """A checkpointing fit into ``tmp_path / "run"`` (from ``checkpoint``, if given): the trainer
    and the warnings whose message ``kept`` keeps."""
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1, **options)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(max_steps=max_steps, callbacks=[callback], logger=False,
                            default_root_dir=tmp_path, enable_checkpointing=True)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(8), ckpt_path=checkpoint)
    return trainer, [w for w in caught if kept(str(w.message))]


def test_overwrite_on_a_fit_restored_from_a_checkpoint_warns_before_anything_is_removed(
    tmp_path,
):
    def fit(max_steps: int, checkpoint=None, **options):
        return _fit_from_checkpoint(tmp_path, max_steps, checkpoint,
                                    lambda text: "overwrite=True will replace" in text, **options)

    first, told = fit(4)
    checkpoint = tmp_path / "first.ckpt"
    first.save_checkpoint(checkpoint)
    assert told == []  # no earlier run
    _, told = fit(6, overwrite=True)  # starts over at step 0: nothing before it is lost
    assert told == []
    _, told = fit(8, checkpoint, overwrite=True)
    assert [str(w.message) for w in told] == [
        f"GradlabCallback: overwrite=True will replace the run in {str(tmp_path / 'run')!r} "
        "while the Trainer resumes from a checkpoint at step 4: the records of the steps "
        "before it go with the old files at the first new record, and the log starts "
        "mid-run; GradlabCallback(resume=True) keeps them and continues after them"
    ]
    assert told[0].filename == __file__  # the fit() call
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [4, 5, 6, 7]  # what the warning said


def test_a_resumed_fit_without_a_logger_goes_on_with_the_last_numbered_run(tmp_path):
    # resume=True without a logger opened the next version_N: the run was split over two
    # folders, the second one's header saying it resumed nothing
    def fit(resume: bool, max_steps: int, checkpoint=None):
        callback = GradlabCallback(preset="cheap", every=1, resume=resume)
        module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
        trainer = quiet_trainer(max_steps=max_steps, callbacks=[callback], logger=False,
                                default_root_dir=tmp_path, enable_checkpointing=True)  # fmt: skip
        trainer.fit(module, loader(8), ckpt_path=checkpoint)
        return trainer

    first = fit(False, 4)
    checkpoint = tmp_path / "first.ckpt"
    first.save_checkpoint(checkpoint)
    fit(True, 8, checkpoint)
    root = tmp_path / DEFAULT_FOLDER
    assert sorted(path.name for path in root.iterdir()) == ["version_0"]
    headers, records = read_jsonl(root / "version_0" / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(8))
    assert headers[1]["resumed"]["from_step"] == 4
    fit(False, 2)  # without resume: the next numbered run, as before
    assert sorted(path.name for path in root.iterdir()) == ["version_0", "version_1"]


def test_resume_from_a_checkpoint_before_the_run_s_last_step_warns_that_steps_repeat(tmp_path):
    # fit(ckpt_path=<step 3>) into a run that logged steps 0-5 logged 3-5 again silently,
    # while a fit that started over at step 0 warned
    def fit(max_steps: int, checkpoint=None, **options):
        return _fit_from_checkpoint(tmp_path, max_steps, checkpoint,
                                    lambda text: "gradlab" in text.lower(), **options)

    first, _ = fit(3)
    checkpoint = tmp_path / "step3.ckpt"
    first.save_checkpoint(checkpoint)
    _, told = fit(6, checkpoint, resume=True)  # goes on right after the run's last step
    assert told == []
    _, told = fit(6, checkpoint, resume=True)  # the run now ends at step 5
    assert [str(w.message) for w in told] == [
        f"GradlabCallback: resume=True continues the run in {str(tmp_path / 'run')!r}, whose "
        "last logged step is 5, and the Trainer resumes from a checkpoint at step 3: its steps "
        "3-5 will be logged again after the earlier ones, and gradlab plot draws the later "
        "records of those steps in place of the earlier"
    ]
    assert told[0].category is RuntimeWarning and told[0].filename == __file__
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2, 3, 4, 5, 3, 4, 5]  # as said


def test_resume_without_the_trainer_s_checkpoint_warns_that_steps_repeat(tmp_path):
    # The second fit starts at step 0 again: its steps 0-1 followed the first fit's 0-1 in
    # metrics.jsonl without a word (the Hugging Face callback warned in this very case).
    def fit(**options):
        callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1, **options)
        module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
        trainer = quiet_trainer(max_steps=2, callbacks=[callback], logger=False,
                                default_root_dir=tmp_path)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            trainer.fit(module, loader(4))
        return [w for w in caught if "gradlab" in str(w.message).lower()]

    assert fit() == []
    (warning,) = fit(resume=True)
    assert str(warning.message) == (
        f"GradlabCallback: resume=True continues the run in {str(tmp_path / 'run')!r}, whose "
        "last logged step is 1, but the Trainer starts at step 0: its steps 0-1 will be logged "
        "again after the earlier ones, and gradlab plot draws the later records of those "
        "steps in place of the earlier; resume the Trainer too (trainer.fit(model, "
        "ckpt_path=...)), or pass overwrite=True to start the folder afresh"
    )
    assert warning.category is RuntimeWarning and warning.filename == __file__
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 0, 1]  # as said


def test_the_hugging_face_callback_in_a_lightning_trainer_names_the_right_one(tmp_path):
    # the two callbacks' names are close: Lightning raised AttributeError ('setup', then
    # 'on_exception' while handling it)
    pytest.importorskip("transformers")
    from gradlab.integrations.transformers import GradlabTrainerCallback

    module = LitRetrieval(gradlab.SmoothAPLoss(0.05))
    trainer = quiet_trainer(max_steps=1, logger=False, callbacks=[GradlabTrainerCallback()])
    with pytest.raises(GradlabError) as raised:
        trainer.fit(module, loader(1))
    assert str(raised.value) == (
        "GradlabTrainerCallback is the callback of Hugging Face's (and sentence-transformers') "
        "Trainer; Lightning's Trainer takes gradlab.integrations.lightning.GradlabCallback")


def test_a_callback_left_out_of_the_trainer_says_so_once(tmp_path):
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = LitRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)))
    with torch.no_grad():  # a loss computed without a gradient (evaluation): no warning
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            module.loss_fn(torch.randn(8, 4), torch.arange(8) % 2)
    with pytest.warns(RuntimeWarning, match=r"no Trainer has set the callback up") as caught:
        quiet_trainer(max_steps=3, logger=False).fit(module, loader(3))  # callbacks forgotten
    (warning,) = [w for w in caught if "GradlabCallback" in str(w.message)]
    assert str(warning.message) == (
        "gradlab: a loss watched by this GradlabCallback computed a gradient, but no Trainer "
        "has set the callback up, so nothing is logged; if this is training, pass the "
        "callback to the Trainer: Trainer(callbacks=[callback])")  # fmt: skip
    assert warning.filename.endswith("lightning_module.py")  # the training_step's line
    assert not (tmp_path / "run").exists()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_ddp_fit_writes_from_rank_zero_with_the_global_batch(tmp_path):
    run_two_ranks(ddp_worker, (_free_port(), str(tmp_path)), "a ddp fit")
    runs = sorted(tmp_path.rglob("metrics.jsonl"))
    assert len(runs) == 1, runs
    headers, records = read_jsonl(runs[0])
    assert len(headers) == 1 and [r["step"] for r in records] == [0]  # rank 1 wrote nothing
    torch.manual_seed(0)
    model = EmbeddingMLP(64, 16)
    with torch.no_grad():
        parts = [rank_batch(rank) for rank in range(2)]
        embeddings = torch.cat([model(images) for images, _ in parts])
        labels = torch.cat([labels for _, labels in parts])
    scores = in_batch_layout(embeddings, labels, include_query=True).scores
    expected = operating_region_proportion(scores, 0.05).mean().item()  # the loss's tau
    assert records[0]["p_seed"] == pytest.approx(expected, rel=1e-6)
    local = in_batch_layout(embeddings[:12], labels[:12], include_query=True).scores
    assert operating_region_proportion(local, 0.05).mean().item() != pytest.approx(expected)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: GradlabCallback(temperature=0.1),
         r"^GradlabCallback takes its own \['log_dir', 'prefix', 'forward_to_loggers', 'options'\] "
         r"and the Monitor's options \[.tau., "),
        (lambda: GradlabCallback(prefix=3), r"prefix must be a string"),
        (lambda: GradlabCallback(forward_to_loggers="yes"), r"forward_to_loggers must be"),
        (lambda: GradlabCallback().watch(42), r"loss_fn must be callable"),
        (
            lambda: GradlabCallback().watch(gradlab.SmoothAPLoss),
            r"not a class.*SmoothAPLoss\(\.\.\.\)",
        ),
        (
            lambda: GradlabCallback().watch(gradlab.SmoothAPLoss(), inputs="emb"),
            r"inputs must be one of \('embeddings', 'scores', 'in_batch_scores'\) or None; "
            r"got 'emb'",
        ),
        (lambda: GradlabCallback(log_dir=42), r"log_dir must be a folder path"),
    ],
)
def test_bad_calls_raise_naming_the_argument(call, message):
    with pytest.raises(GradlabError, match=message):
        call()


def test_a_log_dir_that_is_a_file_is_refused_at_the_call(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(GradlabError, match=r"log_dir must be a folder.*existing file"):
        GradlabCallback(tmp_path / "file")


def test_without_lightning_the_extra_is_named(monkeypatch):
    monkeypatch.delitem(sys.modules, "gradlab.integrations.lightning")
    monkeypatch.setitem(sys.modules, "lightning.pytorch", None)
    with pytest.raises(GradlabError, match=r"pip install .gradlab-ranking\[lightning\]."):
        importlib.import_module("gradlab.integrations.lightning")


def test_a_watched_function_keeps_its_attributes_and_refuses_what_it_lacks(tmp_path):
    # a loss that is a plain function (no module: the callback's wrapper itself answers)
    def ranking_loss(embeddings, labels):
        return embeddings.sum() * 0.0

    ranking_loss.tau = 0.05
    watched = GradlabCallback(tmp_path / "run").watch(ranking_loss)
    assert not isinstance(watched, torch.nn.Module)
    assert watched.tau == 0.05 and watched.__wrapped__ is ranking_loss
    with pytest.raises(AttributeError, match=r"^'function' object has no attribute 'margin'$"):
        watched.margin  # the function's own error, not one of the wrapper's  # noqa: B018
    half_built = object.__new__(type(watched))  # as unpickling makes it, before its state
    for own in ("callback", "loss_fn", "watch_inputs", "_inner", "__setstate__"):
        with pytest.raises(AttributeError, match=f"^{own}$"):  # not a recursion into loss_fn
            getattr(half_built, own)


def test_a_loss_weighted_by_zero_under_fit_is_said_at_the_fit_call(tmp_path):
    # the warning that the gradient quantities read a zero gradient pointed inside Lightning
    class ZeroWeight(LitRetrieval):
        def training_step(self, batch, batch_idx):
            return 0.0 * super().training_step(batch, batch_idx)  # a weight that starts at 0

    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = ZeroWeight(callback.watch(gradlab.SmoothAPLoss(0.05)))
    trainer = quiet_trainer(max_steps=2, callbacks=[callback], logger=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(2))
    told = [w for w in caught if "multiplied by 0" in str(w.message)]
    assert [(str(w.message), w.filename) for w in told] == [(
        "gradlab.Monitor: step 0: the watched loss reached backward multiplied by 0 (a loss "
        "weight of 0?), so embedding_grad_norm read a zero gradient, not the loss's own (later "
        "such steps are not warned about)", __file__)]


@pytest.mark.usefixtures("offline_trackers")
@pytest.mark.parametrize(("sinks", "forward", "said"), [
    (["jsonl", "wandb"], True, ["wandb"]),
    (["jsonl", "tensorboard"], True, ["tensorboard"]),
    (["wandb", "jsonl", "tensorboard"], True, ["tensorboard", "wandb"]),  # one warning
    (["jsonl", "csv"], True, []),  # Lightning's CSVLogger is no sink's backend
    (["jsonl", "wandb"], False, []),  # nothing forwarded: the sink alone writes to W&B
])  # fmt: skip
def test_a_sink_beside_a_logger_of_its_backend_warns_that_each_value_is_logged_twice(
    tmp_path, sinks, forward, said
):
    # sinks=["wandb"] beside a WandbLogger logged every value twice in the one W&B run, the
    # sink's copy at the logger's previous step, silently
    pytest.importorskip("wandb")
    from lightning.pytorch.loggers import TensorBoardLogger, WandbLogger

    loggers = [CSVLogger(tmp_path), TensorBoardLogger(tmp_path / "tb"),
               WandbLogger(project="p", offline=True, save_dir=str(tmp_path))]  # fmt: skip
    callback = GradlabCallback(tmp_path / "run", preset="cheap", sinks=sinks,
                               forward_to_loggers=forward)  # fmt: skip
    trainer = quiet_trainer(max_steps=1, callbacks=[callback], logger=loggers)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback.setup(trainer, None, "fit")
    callback.monitor.close()
    told = [(str(w.message), w.category, w.filename) for w in caught
            if "twice per step" in str(w.message)]  # fmt: skip
    kinds = {"wandb": "WandbLogger", "tensorboard": "TensorBoardLogger"}
    named = ", ".join(sorted(kinds[name] for name in said))
    assert told == ([(
        f"GradlabCallback: sinks {said} and the Trainer's {named} both send gradlab's values "
        "to the same backend, so each is logged twice per step: the callback forwards every "
        "record to the Trainer's loggers already; drop those sinks (or pass "
        "forward_to_loggers=False)", RuntimeWarning, __file__)] if said else [])  # fmt: skip


class _ManualRetrieval(LitRetrieval):
    """Manual optimization; ``raw``: the optimizer itself is stepped, not Lightning's wrapper."""

    def __init__(self, loss_fn, raw: bool, callback: GradlabCallback | None = None):
        super().__init__(loss_fn)
        self.automatic_optimization = False
        self.raw = raw
        self.callback = callback  # given: its Monitor is stepped by hand after each step

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers(use_pl_optimizer=not self.raw)
        images, labels = batch
        loss = self.loss_fn(self.net(images), labels)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()
        if self.callback is not None:
            self.callback.monitor.step()


@pytest.mark.parametrize("raw", [True, False])
def test_manual_optimization_that_steps_the_raw_optimizer_is_told_why_nothing_is_logged(
    tmp_path, raw
):
    # the only word was the Monitor's "monitor.step() was never called", of a Monitor the
    # callback's user never holds
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = _ManualRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)), raw)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the raw optimizer moves no global_step: max_steps would never be reached
        quiet_trainer(max_epochs=1, callbacks=[callback], logger=False).fit(module, loader(3))
    told = [str(w.message) for w in caught if "gradlab" in str(w.message).lower()
            and "never" in str(w.message)]  # fmt: skip
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    if not raw:  # Lightning's optimizer runs the hook: every step logged
        assert told == [] and [r["step"] for r in records] == [0, 1, 2]
        return
    assert records == []
    assert told == [
        "GradlabCallback: 3 watched call(s) but Lightning never called on_before_optimizer_step, "
        "where the callback steps the Monitor, so nothing was logged in "
        f"{str(tmp_path / 'run')!r}: under manual optimization step the LightningOptimizer that "
        "self.optimizers() returns (optimizer.step()), not the optimizer itself "
        "(self.optimizers(use_pl_optimizer=False))"]


def test_the_same_trainer_fitting_again_goes_on_with_a_monitor_stepped_by_hand(tmp_path):
    # a raw optimizer leaves the Trainer's step at 0: the second fit started the count over
    # (0, 1, 2, 0, 1, 2) and warned to resume the Trainer from a checkpoint, which a step
    # that never moves cannot follow
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = _ManualRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)), raw=True,
                              callback=callback)  # fmt: skip
    trainer = quiet_trainer(max_epochs=1, callbacks=[callback], logger=False)
    trainer.fit(module, loader(3))
    trainer.fit_loop.max_epochs = 2
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(module, loader(3))
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == list(range(6))
    assert [str(w.message) for w in caught if "gradlab" in str(w.message).lower()] == []


def test_manual_optimization_that_steps_the_monitor_by_hand_logs_and_is_not_told_otherwise(
    tmp_path,
):
    # the callback warned "nothing was logged" when it had not stepped the Monitor itself,
    # though the user's training_step had, and every step was logged
    callback = GradlabCallback(tmp_path / "run", preset="cheap", every=1)
    module = _ManualRetrieval(callback.watch(gradlab.SmoothAPLoss(0.05)), raw=True,
                              callback=callback)  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_trainer(max_epochs=1, callbacks=[callback], logger=False).fit(module, loader(3))
    _, records = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1, 2]
    assert [str(w.message) for w in caught if "never" in str(w.message)] == []
