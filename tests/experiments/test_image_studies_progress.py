"""What `gradlab study` says while it works: one named stage per training run and per embedding
of the test split, in the plain lines a log file gets (stderr is not a terminal here), with the
units of its steps. A study of several runs that said nothing, or said "None", would leave a
user unable to tell which run a long wait belongs to."""

from __future__ import annotations

import re

import pytest

from gradlab.backbones import build_backbone
from gradlab.cli import main
from gradlab.data.image_folder import image_folder
from gradlab.experiments.image_studies import ANATOMY_LOSSES, embed_split
from gradlab.experiments.loss_comparison import loss_functions
from gradlab.progress import set_progress_mode
from tests.helpers.study_images import write_images

pytest.importorskip("PIL.Image")

FAST = ["--backbone", "tests.helpers.backbones:four_channel_resnet", "--image-size", "16",
        "--embedding-dim", "8", "--batch-sizes", "8", "--seeds", "0", "--lr", "1e-3"]  # fmt: skip
CLASSES = ("bench", "chair", "fan", "kettle", "sofa", "vase")
"""Four images each: the first half trains, the second is the test split."""


@pytest.fixture
def data(tmp_path):
    for name in CLASSES:
        write_images(tmp_path / "data" / name, 4)
    set_progress_mode("lines")
    yield tmp_path / "data"
    set_progress_mode("auto")


def stages(err: str) -> list[str]:
    """The progress lines' stages and counts, in order: ``(stage, 'n unit')`` per start."""
    return re.findall(r"^gradlab: (.+) \((\d+ \w+)\) \.\.\.$", err, flags=re.MULTILINE)


@pytest.mark.parametrize(("study", "names"), [
    ("losses", list(loss_functions(batch_size=8))),
    ("anatomy", list(ANATOMY_LOSSES)),
])  # fmt: skip
@pytest.mark.slow
def test_every_training_run_and_test_embedding_is_a_named_stage(data, tmp_path, capsys, study,
                                                                 names):  # fmt: skip
    code = main(["study", study, "--data", str(data), "--out", str(tmp_path / "out"), *FAST])
    err = capsys.readouterr().err
    assert code == 0, err
    started = stages(err)
    trained = [(stage, count) for stage, count in started if stage.endswith(": training")]
    # seed 0 and m = 8 (FAST): one training stage per loss, in the study's order
    assert [stage for stage, _ in trained] == [
        f"{study}: seed 0, m = 8, {name}: training" for name in names]
    assert all(count.endswith(" steps") for _, count in trained)
    # each run's retrieval is measured on the test split: 12 images, one batch, said in batches
    embedded = [(stage, count) for stage, count in started if stage.startswith("embedding")]
    assert embedded[-len(names):] == [("embedding the test split", "1 batch")] * len(names)
    assert "None" not in err
    for stage, _ in started:  # every stage that starts ends, named the same
        assert re.search(rf"^gradlab: {re.escape(stage)} done \(", err, flags=re.MULTILINE)


def test_a_split_embedded_without_a_stage_name_says_nothing(data, capsys):
    split = image_folder(data, "test", image_size=16)  # the second half: 12 images
    model = build_backbone(FAST[1], embedding_dim=8, image_size=16)
    assert embed_split(model, split).shape == (12, 8)
    assert capsys.readouterr().err == ""
    embed_split(model, split, desc="embedding the test split")  # named: a stage of its own
    assert stages(capsys.readouterr().err) == [("embedding the test split", "1 batch")]


@pytest.mark.slow
def test_no_progress_silences_every_stage_as_in_report_and_audit(data, tmp_path, capsys):
    code = main(["study", "p-vs-batch-size", "--data", str(data), "--out",
                 str(tmp_path / "out"), "--no-progress", *FAST])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 0, err
    assert stages(err) == [] and " done (" not in err
    set_progress_mode("lines")  # the fixture's mode again, for the same run said stage by stage
    assert main(["study", "p-vs-batch-size", "--data", str(data), "--out",
                 str(tmp_path / "again"), *FAST]) == 0  # fmt: skip
    assert stages(capsys.readouterr().err) != []
