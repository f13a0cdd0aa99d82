"""The image studies called from Python run the study ``gradlab study`` runs by default.

Each default of the three study functions is compared with what ``gradlab study --help`` says
its option defaults to (read from the help a user sees), and the temperature and slope
threshold with the bundled miniature's (Brown et al. 2020: tau = 0.01, eps = 0.005)."""

import inspect
import io
import re
import sys

import pytest
import torch

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
    assert defaults["amp"] is False
    assert re.search(r"--amp mixed precision: [^()]*\(default: off\)", help_text)
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


# What a study called with the folder alone trains with, read by spies on its collaborators
# (the network a stand-in of a few parameters, so that the default 224-pixel crops and
# 512-dimensional embeddings cost little), against the defaults the command's help documents,
# the bundled miniature's temperature and threshold, and docs/your-data.md's "at ten evenly
# spaced steps" of the anatomy.

LOGS = 10  # docs/your-data.md: the anatomy reads dL/dS "at ten evenly spaced steps"


class _ShownError(Exception):
    """Raised by a spy once a study has shown what it trains with."""


def _documented(help_text: str, name: str) -> dict:
    """The options of ``gradlab study NAME`` a user leaves out, as its help and the bundled
    miniature say them."""
    sizes = re.search(r"\(default: ([\d,]+) for p-vs-batch-size, (\d+) for losses and anatomy\)",
                      help_text)  # fmt: skip
    bundled = inspect.signature(p_vs_batch_size.measure).parameters
    return {
        "backbone": _cli_default(help_text, "--backbone"),
        "embedding_dim": int(_cli_default(help_text, "--embedding-dim")),
        "image_size": int(_cli_default(help_text, "--image-size")),
        "epochs": int(_cli_default(help_text, "--epochs")),
        "lr": float(_cli_default(help_text, "--lr")),
        "workers": int(_cli_default(help_text, "--loader-workers")),
        "device": _cli_default(help_text, "--device"),
        "seeds": [int(_cli_default(help_text, "--seeds"))],
        "amp": False,  # "--amp mixed precision: ... (default: off)"
        "batch_sizes": [
            int(m) for m in sizes.group(1 if name == "p-vs-batch-size" else 2).split(",")
        ],
        "tau": bundled["tau"].default,
        "eps": bundled["eps"].default,
    }


def _tiny_classes(tmp_path_factory, name: str, classes: int, digits: int):
    """``classes`` class folders of 4 tiny images each (the first half trains)."""
    from tests.helpers.study_images import write_images

    root = tmp_path_factory.mktemp(name)
    for label in range(classes):
        write_images(root / f"class_{label:0{digits}d}", 4, size=4)
    return root


@pytest.fixture(scope="module")
def wide_folder(tmp_path_factory):
    """128 classes of 4 tiny images: 64 train, enough for a batch of 256."""
    return _tiny_classes(tmp_path_factory, "wide", 128, 3)


@pytest.fixture(scope="module")
def narrow_folder(tmp_path_factory):
    """32 classes of 4 tiny images: 16 train (one batch of 64), 16 test."""
    return _tiny_classes(tmp_path_factory, "narrow", 32, 2)


def _spy(patch, *, stop_at_first_record=False) -> dict:
    from gradlab.experiments import loss_comparison

    seen: dict[str, list] = {key: [] for key in (
        "built", "forwards", "sampler", "takes", "workers", "lr", "tau", "proportions",
        "loss_functions", "evaluated")}  # fmt: skip

    def build(spec, **kwargs):
        seen["built"].append((spec, kwargs))
        model = torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(2), torch.nn.Flatten(),
                                    torch.nn.Linear(12, kwargs["embedding_dim"]))  # fmt: skip
        model.register_forward_hook(lambda module, inputs, output: seen["forwards"].append(
            (tuple(inputs[0].shape), inputs[0].device.type, output.dtype)))  # fmt: skip
        return model

    class Sampler(image_studies.FixedCountBatches):
        def __init__(self, labels, batch_size, per_class, **kwargs):
            super().__init__(labels, batch_size, per_class, **kwargs)
            seen["sampler"].append((batch_size, per_class, kwargs))

        def take(self, count):
            seen["takes"].append((count, len(self)))
            return super().take(count)

    class Images(image_studies.StudyImages):
        def loader(self, batches, workers=0):
            seen["workers"].append(workers)
            return super().loader(batches, workers)

    class Adam(torch.optim.Adam):
        def __init__(self, params, *args, **kwargs):
            super().__init__(params, *args, **kwargs)
            seen["lr"].append(self.defaults["lr"])

    class Loss(image_studies.SmoothAPLoss):
        def __init__(self, tau, *args, **kwargs):
            super().__init__(tau, *args, **kwargs)
            seen["tau"].append(tau)

    real_proportions = image_studies.close_pair_proportions

    def proportions(embeddings, labels, tau, eps):
        seen["proportions"].append((tau, eps))
        if stop_at_first_record:
            raise _ShownError
        return real_proportions(embeddings, labels, tau, eps)

    real_losses = loss_comparison.loss_functions

    def losses(tau, size):
        seen["loss_functions"].append((tau, size))
        return real_losses(tau, size)

    def evaluate(model, dataset, *args):
        seen["evaluated"].append(args)
        return dict.fromkeys(image_studies.LOSS_METRICS, 0.5)

    patch.setattr(image_studies, "build_backbone", build)
    patch.setattr(image_studies, "FixedCountBatches", Sampler)
    patch.setattr(image_studies, "StudyImages", Images)
    patch.setattr(image_studies, "SmoothAPLoss", Loss)
    patch.setattr(image_studies, "close_pair_proportions", proportions)
    patch.setattr(image_studies, "evaluate_split", evaluate)
    patch.setattr(loss_comparison, "loss_functions", losses)
    patch.setattr(torch.optim, "Adam", Adam)
    return seen


def _network(defaults) -> tuple:
    return (defaults["backbone"], {"embedding_dim": defaults["embedding_dim"], "weights": None,
                                   "image_size": defaults["image_size"]})  # fmt: skip


@pytest.mark.slow
def test_the_p_study_called_with_the_folder_alone_trains_as_the_help_says(help_text, wide_folder):
    defaults = _documented(help_text, "p-vs-batch-size")
    with pytest.MonkeyPatch.context() as patch, pytest.raises(_ShownError):
        seen = _spy(patch, stop_at_first_record=True)
        image_studies.p_vs_batch_size_on_images(wide_folder)
    size, side = defaults["batch_sizes"][0], defaults["image_size"]
    seed = defaults["seeds"][0]
    assert seen["built"] == [_network(defaults)] * 2  # the check, then the run's network
    assert seen["sampler"] == [(size, 4, {"seed": image_studies.run_seed(seed, size)})]
    ((count, per_epoch),) = seen["takes"]
    assert count == defaults["epochs"] * per_epoch
    assert seen["workers"] == [defaults["workers"]]
    assert seen["lr"] == [defaults["lr"]]
    assert seen["tau"] == [defaults["tau"]]
    assert seen["proportions"] == [(defaults["tau"], defaults["eps"])]
    # on the documented device, in float32 (no mixed precision)
    assert seen["forwards"][0] == ((size, 3, side, side), defaults["device"], torch.float32)


def _called_with_the_folder_alone(help_text, name, run, folder):
    """The defaults ``gradlab study NAME --help`` documents, what the study was handed (the
    spies) and its result, for the study called with the folder alone."""
    defaults = _documented(help_text, name)
    with pytest.MonkeyPatch.context() as patch:
        seen = _spy(patch)
        result = run(folder)
    return defaults, seen, result


def _assert_documented_settings(settings: dict, defaults: dict) -> None:
    for key in ("epochs", "lr", "device", "amp", "tau"):
        assert settings[key] == defaults[key], key


@pytest.mark.slow
def test_the_loss_study_called_with_the_folder_alone_trains_as_the_help_says(
    help_text, narrow_folder
):
    defaults, seen, result = _called_with_the_folder_alone(
        help_text, "losses", image_studies.loss_comparison_on_images, narrow_folder)
    (size,) = defaults["batch_sizes"]
    side = defaults["image_size"]
    assert list(result) == [size]
    settings = result[size]["settings"]
    _assert_documented_settings(settings, defaults)
    assert settings["test_data"] == "test split (64 images, 16 classes)"
    assert result[size]["seeds"] == defaults["seeds"]
    assert seen["built"] == [_network(defaults)] * 2
    losses = len(result[size]["losses"])
    assert seen["lr"] == [defaults["lr"]] * losses
    assert seen["loss_functions"] == [(defaults["tau"], size)]
    # the timing batch's loader, then each loss's training loader
    assert seen["workers"] == [0] + [defaults["workers"]] * losses
    assert seen["evaluated"] == [(defaults["device"], defaults["amp"], defaults["workers"])] * (
        1 + losses
    )
    ((count, per_epoch),) = seen["takes"]
    assert count == defaults["epochs"] * per_epoch == settings["steps"]
    assert set(seen["forwards"]) == {((size, 3, side, side), defaults["device"], torch.float32)}


@pytest.mark.slow
def test_the_anatomy_study_called_with_the_folder_alone_trains_as_the_help_says(
    help_text, narrow_folder
):
    defaults, seen, result = _called_with_the_folder_alone(
        help_text, "anatomy", image_studies.anatomy_on_images, narrow_folder)
    (size,) = defaults["batch_sizes"]
    side = defaults["image_size"]
    settings = result["settings"]
    _assert_documented_settings(settings, defaults)
    assert settings["batch_sizes"] == [size] and result["seeds"] == defaults["seeds"]
    assert seen["built"] == [_network(defaults)] * 2
    runs = len(image_studies.ANATOMY_LOSSES)
    assert seen["lr"] == [defaults["lr"]] * runs
    assert seen["workers"] == [defaults["workers"]] * runs
    assert seen["evaluated"] == [(defaults["device"], defaults["amp"], defaults["workers"])] * runs
    ((count, per_epoch),) = seen["takes"]
    assert count == defaults["epochs"] * per_epoch
    assert set(seen["forwards"]) == {((size, 3, side, side), defaults["device"], torch.float32)}


@pytest.mark.slow
def test_the_anatomy_study_logs_ten_evenly_spaced_steps_and_the_last(narrow_folder):
    """32 steps (4 epochs of 8 batches of 8): a record every ``32 // 10`` steps and the last."""
    with pytest.MonkeyPatch.context() as patch:
        _spy(patch)
        result = image_studies.anatomy_on_images(narrow_folder, batch_sizes=[8], epochs=4,
                                                 image_size=4, embedding_dim=4)  # fmt: skip
    every = 32 // LOGS
    expected = sorted(set(range(0, 32, every)) | {31})
    for name, run in result["runs"]["m = 8"].items():
        assert run["anatomy"]["steps"] == expected, name
