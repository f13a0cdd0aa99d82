"""gradlab.integrations.settings: the options every framework callback checks before training."""

import warnings
from pathlib import Path

import pytest
import torch

import gradlab
from gradlab.errors import GradlabError
from gradlab.integrations.settings import (
    callback_settings,
    resumed_behind_message,
    warn_overwrite_on_resumed_trainer,
)
from gradlab.monitor.config import MonitorConfig
from tests.helpers.home import home_and_work


def test_a_log_folder_comes_back_as_a_path_and_none_stays_none(tmp_path):
    log_dir, prefix, options = callback_settings(str(tmp_path / "runs"), "g/", None, {})
    assert log_dir == tmp_path / "runs" and isinstance(log_dir, Path)
    assert prefix == "g/" and options == MonitorConfig()
    assert callback_settings(None, "", None, {})[0] is None


def test_a_callbacks_log_dir_under_tilde_is_in_the_home_folder(tmp_path, monkeypatch):
    home, work = home_and_work(tmp_path, monkeypatch)
    assert callback_settings("~/runs", "g/", None, {})[0] == home / "runs"
    assert list(work.iterdir()) == []


def test_a_log_dir_that_is_a_file_is_refused_naming_log_dir(tmp_path):
    (tmp_path / "notes.txt").write_text("a file")
    with pytest.raises(GradlabError) as error:
        callback_settings(tmp_path / "notes.txt", "g/", None, {})
    assert str(error.value).startswith("log_dir must be a folder")  # the callback's argument


def test_keyword_options_are_the_monitors_and_checked_by_it():
    options = callback_settings(None, "g/", None, {"preset": "cheap"})[2]
    assert options == MonitorConfig(preset="cheap")
    with pytest.raises(GradlabError, match="no_such_option"):
        callback_settings(None, "g/", None, {"no_such_option": 1})


@pytest.mark.parametrize(("given", "hint"), [
    ({"logdir": "x"}, " (did you mean 'log_dir' for 'logdir'?)"),
    ({"taux": 0.1, "prefx": "a/"}, " (did you mean 'prefix' for 'prefx', 'tau' for 'taux'?)"),
    ({"output_dir": "x"}, ""),  # nothing close: the names alone
    ({"presets": "cheap"}, " (did you mean 'preset' for 'presets'?)"),  # not 'resume' too
], ids=["own_keyword", "two_keywords", "none_close", "closest_of_two_close_names"])  # fmt: skip
def test_an_unknown_keyword_is_named_among_the_callbacks_own_and_the_monitors(given, hint):
    # GradlabTrainerCallback(logdir=...) listed the Monitor's options alone, not log_dir
    with pytest.raises(GradlabError) as error:
        callback_settings(None, "g/", None, given, callback="TheCallback",
                          own=("log_dir", "prefix", "options"))  # fmt: skip
    assert str(error.value) == (
        f"TheCallback takes its own ['log_dir', 'prefix', 'options'] and the Monitor's options "
        f"{MonitorConfig.names()}; got {sorted(given)}{hint}")


def test_an_unknown_keyword_without_the_callbacks_name_is_refused_for_the_callback():
    with pytest.raises(GradlabError) as error:
        callback_settings(None, "g/", None, {"logdir": "x"})
    assert str(error.value) == (
        f"the callback takes its own ['log_dir', 'prefix', 'options'] and the Monitor's options "
        f"{MonitorConfig.names()}; got ['logdir'] (did you mean 'log_dir' for 'logdir'?)")


def test_one_monitor_config_is_taken_as_given():
    config = MonitorConfig(preset="cheap")
    assert callback_settings(None, "g/", config, {})[2] is config


@pytest.mark.parametrize(
    ("options", "keywords", "shown"),
    [
        (MonitorConfig(), {"preset": "cheap"}, "['preset']"),
        ({"preset": "cheap"}, {}, "{'preset': 'cheap'} and []"),
    ],
)
def test_options_with_keywords_or_not_a_config_are_refused(options, keywords, shown):
    message = "options must be a MonitorConfig, given without other Monitor options; got "
    with pytest.raises(GradlabError) as error:
        callback_settings(None, "g/", options, keywords)
    assert str(error.value).startswith(message) and str(error.value).endswith(shown)


@pytest.mark.parametrize("prefix", [None, 3, b"g/"])
def test_a_prefix_that_is_not_a_string_is_refused(prefix):
    with pytest.raises(GradlabError, match=f"prefix must be a string; got {prefix!r}"):
        callback_settings(None, prefix, None, {})


@pytest.mark.parametrize(("last", "first", "steps"), [(3, 0, "steps 0-3"), (4, 4, "step 4")])
def test_the_resumed_behind_message_names_the_steps_logged_again(last, first, steps):
    message = resumed_behind_message("GradlabCallback", Path("runs") / "a", last, first,
                                     "trainer.fit(model, ckpt_path=...)")
    assert message == (
        f"GradlabCallback: resume=True continues the run in 'runs/a', whose last logged step "
        f"is {last}, but the Trainer starts at step {first}: its {steps} will be logged again "
        "after the earlier ones, and gradlab plot draws the later records of those steps in "
        "place of the earlier; resume the Trainer too (trainer.fit(model, ckpt_path=...)), or "
        "pass overwrite=True to start the folder afresh"
    )


def _a_run_with_records(folder) -> None:
    embeddings = torch.randn(8, 4, generator=torch.Generator().manual_seed(0))
    with gradlab.Monitor(folder, preset="cheap", every=1) as monitor:
        watched = monitor.watch(gradlab.SmoothAPLoss(0.05))
        watched(embeddings.requires_grad_(), torch.arange(8) % 2).backward()
        monitor.step()


def test_overwrite_on_a_resumed_trainer_warns_only_when_records_would_go(tmp_path):
    _a_run_with_records(tmp_path / "run")
    (tmp_path / "empty").mkdir()
    replacing = gradlab.Monitor(tmp_path / "run", preset="cheap", overwrite=True)
    fresh = gradlab.Monitor(tmp_path / "empty", preset="cheap", overwrite=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_overwrite_on_resumed_trainer("GradlabCallback", replacing, 0, ())  # from step 0
        warn_overwrite_on_resumed_trainer("GradlabCallback", fresh, 5, ())  # nothing to lose
        for first in (1, 5):  # step 0's record goes with a checkpoint at step 1 already
            warn_overwrite_on_resumed_trainer("GradlabCallback", replacing, first, ())
    replacing.close(), fresh.close()
    assert [(w.category, str(w.message), w.filename) for w in caught] == [(
        RuntimeWarning,
        f"GradlabCallback: overwrite=True will replace the run in {str(tmp_path / 'run')!r} "
        f"while the Trainer resumes from a checkpoint at step {first}: the records of the steps "
        "before it go with the old files at the first new record, and the log starts mid-run; "
        "GradlabCallback(resume=True) keeps them and continues after them",
        __file__,
    ) for first in (1, 5)]


@pytest.mark.parametrize(("last", "first", "steps"), [(5, 3, "steps 3-5"), (4, 4, "step 4")])
def test_a_resume_behind_the_runs_end_names_the_steps_logged_again(last, first, steps):
    assert resumed_behind_message("GradlabCallback", "runs/a", last, first, None) == (
        f"GradlabCallback: resume=True continues the run in 'runs/a', whose last logged step is "
        f"{last}, and the Trainer resumes from a checkpoint at step {first}: its {steps} will be "
        "logged again after the earlier ones, and gradlab plot draws the later records of those "
        "steps in place of the earlier")


@pytest.mark.parametrize("preset", ["cheap", "default", "full"])
def test_a_log_dir_named_like_a_preset_is_said_to_be_a_folder(tmp_path, monkeypatch, preset):
    # GradlabTrainerCallback("full") logged the default preset into a folder named full
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning) as caught:
        log_dir, _, options = callback_settings(preset, "gradlab/", None, {},
                                                callback="GradlabTrainerCallback")
    assert [(str(w.message), w.filename) for w in caught] == [(
        f"GradlabTrainerCallback: log_dir {preset!r} is the name of a preset; the run is written "
        f"to the folder {preset!r}. To choose the preset, pass preset={preset!r} (log_dir is the "
        "first argument)", __file__)]
    assert log_dir.name == preset and options.preset is None
    (tmp_path / preset).mkdir()  # a folder of that name that exists: meant, nothing said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        callback_settings(preset, "gradlab/", None, {})
        callback_settings(tmp_path / "runs" / preset, "gradlab/", None, {})  # a path: meant
