"""The image studies called from Python run the study ``gradlab study`` runs by default.

Each default of the three study functions is compared with what ``gradlab study --help`` says
its option defaults to (read from the help a user sees), and the temperature and slope
threshold with the bundled miniature's (Brown et al. 2020: tau = 0.01, eps = 0.005)."""

import inspect
import io
import re
import sys

import pytest

from gradlab.cli import main
from gradlab.experiments import image_studies, p_vs_batch_size

STUDIES = {"p-vs-batch-size": image_studies.p_vs_batch_size_on_images,
           "losses": image_studies.loss_comparison_on_images,
           "anatomy": image_studies.anatomy_on_images}  # fmt: skip
OPTIONS = {"--split": "split", "--backbone": "backbone", "--embedding-dim": "embedding_dim",
           "--image-size": "image_size", "--epochs": "epochs", "--lr": "lr",
           "--loader-workers": "workers", "--device": "device"}  # fmt: skip


@pytest.fixture(scope="module")
def help_text():
    with pytest.raises(SystemExit) as stopped, pytest.MonkeyPatch.context() as patch:
        shown = io.StringIO()
        patch.setattr(sys, "stdout", shown)
        main(["study", "--help"])
    assert stopped.value.code == 0
    return " ".join(shown.getvalue().split())  # argparse's line breaks as single spaces


def _cli_default(text: str, option: str) -> str:
    entry = re.search(rf"{re.escape(option)} [A-Z_N]+ (.*?)\(default: ([^),]*)", text)
    assert entry is not None, option
    return entry.group(2)


@pytest.mark.parametrize("name", list(STUDIES))
def test_each_studys_defaults_are_the_commands(help_text, name):
    defaults = {key: p.default for key, p in inspect.signature(STUDIES[name]).parameters.items()}
    for option, parameter in OPTIONS.items():
        shown = _cli_default(help_text, option)
        assert defaults[parameter] == type(defaults[parameter])(shown), (name, option, shown)
    assert defaults["amp"] is False and "--amp mixed precision (default: off)" in help_text
    assert list(defaults["seeds"]) == [int(_cli_default(help_text, "--seeds"))]
    sizes = re.search(r"\(default: ([\d,]+) for p-vs-batch-size, (\d+) for losses and anatomy\)",
                      help_text)  # fmt: skip
    expected = sizes.group(1) if name == "p-vs-batch-size" else sizes.group(2)
    assert list(defaults["batch_sizes"]) == [int(m) for m in expected.split(",")]


@pytest.mark.parametrize("name", list(STUDIES))
def test_each_study_defaults_to_the_bundled_miniatures_temperature_and_threshold(name):
    bundled = inspect.signature(p_vs_batch_size.measure).parameters
    mine = inspect.signature(STUDIES[name]).parameters
    for key in ("tau", "eps"):
        if key in mine:
            assert mine[key].default == bundled[key].default, (name, key)
