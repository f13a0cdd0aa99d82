"""gradlab.integrations.settings: the options every framework callback checks before training."""

from pathlib import Path

import pytest

from gradlab.errors import GradlabError
from gradlab.integrations.settings import callback_settings, resumed_behind_message
from gradlab.monitor.config import MonitorConfig


def test_a_log_folder_comes_back_as_a_path_and_none_stays_none(tmp_path):
    log_dir, prefix, options = callback_settings(str(tmp_path / "runs"), "g/", None, {})
    assert log_dir == tmp_path / "runs" and isinstance(log_dir, Path)
    assert prefix == "g/" and options == MonitorConfig()
    assert callback_settings(None, "", None, {})[0] is None


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
