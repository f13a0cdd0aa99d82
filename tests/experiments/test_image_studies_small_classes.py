"""`gradlab study` on long-tailed data (Stanford Online Products has 2 to 12 images per
product): a training class of fewer than 4 images cannot give a batch of the 4-per-class sampler
4 distinct images, so it is left out of training, said on stderr, recorded in the JSON and
stated on the page; the evaluation split keeps every image. Too few classes left is refused in
one line naming what was left out.

The expected counts come from the folders the tests write, not from the code under test."""

from __future__ import annotations

import json
import math

import pytest
import torch

from gradlab.cli import main
from gradlab.errors import GradlabError
from gradlab.experiments import image_studies
from tests.helpers.study_images import write_images

Image = pytest.importorskip("PIL.Image")

PER_CLASS = 4
"""Smooth-AP's sampler: 4 distinct images of each class in a batch (Brown et al., 2020)."""

FAST = ["--backbone", "tests.helpers.backbones:four_channel_resnet", "--image-size", "16",
        "--embedding-dim", "8", "--batch-sizes", "8", "--seeds", "0", "--lr", "1e-3"]  # fmt: skip

TRAIN = {"bench": 5, "bowl": 2, "chair": 4, "desk": 3, "fan": 6}
"""The class-halves folder's first half (sorted by name): it trains."""
TEST = {"kettle": 4, "lamp": 1, "mug": 3, "sofa": 4, "vase": 2}
"""Its second half, with classes of 1 to 3 images too: retrieval is measured on all of them."""


def kept(counts: dict) -> dict:
    return {name: count for name, count in counts.items() if count >= PER_CLASS}


def left(counts: dict) -> dict:
    return {name: count for name, count in counts.items() if count < PER_CLASS}


def class_halves(root, counts):
    for name, count in counts.items():
        write_images(root / name, count)
    return root


def sop_style(root, train: dict, test: dict, layout: str):
    """Stanford Online Products' layout (``Ebay_train.txt``, ``Ebay_test.txt``: class_id per
    image) or ``path label`` list files of the same images; the list files' paths."""
    image_id, lines = 0, {"train": [], "test": []}
    for split, counts in (("train", train), ("test", test)):
        for class_id, count in counts.items():
            for path in write_images(root / f"{split}_{class_id}_final", count):
                image_id += 1
                lines[split].append((image_id, class_id, path.relative_to(root).as_posix()))
    files = {}
    for split, rows in lines.items():
        if layout == "online-products":
            text = ["image_id class_id super_class_id path",
                    *(f"{i} {label} 1 {path}" for i, label, path in rows)]  # fmt: skip
            files[split] = root / f"Ebay_{split}.txt"
        else:
            text = [f"{path} {label}" for _, label, path in rows]
            files[split] = root / f"{split}.txt"
        files[split].write_text("\n".join(text) + "\n")
    return files


@pytest.fixture
def drawn(monkeypatch):
    """What the studies hand the sampler and every image file they open."""
    seen = {"labels": [], "batches": [], "opened": []}

    class WatchedSampler(image_studies.FixedCountBatches):
        def __init__(self, labels, *args, **kwargs):
            super().__init__(labels, *args, **kwargs)
            seen["labels"].append(labels.clone())

        def take(self, count):
            batches = super().take(count)
            seen["batches"] += [batch.clone() for batch in batches]
            return batches

    real_open = Image.open

    def watched_open(path, *args, **kwargs):
        seen["opened"].append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(image_studies, "FixedCountBatches", WatchedSampler)
    monkeypatch.setattr(Image, "open", watched_open)
    return seen


def left_out_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if "left out" in line]


@pytest.mark.slow
def test_the_losses_study_trains_on_the_classes_that_fill_a_batch_and_says_what_it_left_out(
    tmp_path, capsys, drawn
):
    data = class_halves(tmp_path / "data", {**TRAIN, **TEST})
    out = tmp_path / "out"
    code = main(["study", "losses", "--data", str(data), "--out", str(out), *FAST])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert "left out" not in stdout  # progress goes to stderr, what was written to stdout
    trained, dropped = kept(TRAIN), left(TRAIN)
    # one progress line with the counts and the names of the classes left out
    (line,) = left_out_lines(err)
    assert line.startswith("losses: ")
    assert (f"{len(dropped)} of the {len(TRAIN)} classes of the train split "
            f"({sum(dropped.values())} of its {sum(TRAIN.values())} images)") in line
    for name, count in dropped.items():
        assert f"'{name}' has {count}" in line
    assert not any(f"'{name}'" in line for name in trained)
    # the sampler draws from the kept classes' images alone: 4 distinct images of each
    (labels,) = drawn["labels"]
    assert sorted(torch.bincount(labels).tolist()) == sorted(trained.values())
    for batch in drawn["batches"]:
        assert len(set(batch.tolist())) == 8
        assert torch.bincount(labels[batch]).max() == PER_CLASS
    opened = {path.parent.name for path in drawn["opened"]}
    assert opened & set(TRAIN) == set(trained)  # no image of a left-out class is ever read
    assert set(TEST) <= opened  # every test class is ranked
    # the JSON records it; retrieval is measured on every test image
    settings = json.loads((out / "loss_comparison_m8.json").read_text())["settings"]
    assert settings["training_classes"] == {
        "min_images_per_class": PER_CLASS, "classes": len(trained),
        "images": sum(trained.values()), "left_out_classes": len(dropped),
        "left_out_images": sum(dropped.values()), "left_out_examples": dropped,
    }  # fmt: skip
    assert f"train split ({sum(trained.values())} images, {len(trained)} classes)" in (
        settings["data"]
    )
    assert f"test split ({sum(TEST.values())} images, {len(TEST)} classes)" in (
        settings["test_data"]
    )
    assert settings["steps"] == math.ceil(sum(trained.values()) / 8)
    # the page states it, and says so again when rendered from the JSON alone
    page = (out / "summary.md").read_text()
    stated = (f"Left out of training: {len(dropped)} of the training split's {len(TRAIN)} "
              f"classes ({sum(dropped.values())} of its {sum(TRAIN.values())} images)")  # fmt: skip
    assert stated in page and "'bowl' has 2" in page and "The test split keeps every" in page
    assert "Left out of training" in (out / "index.html").read_text()
    (out / "summary.md").unlink()
    assert main(["study", "losses", "--render", "--out", str(out)]) == 0
    assert (out / "summary.md").read_text() == page


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["online-products", "list"])
def test_stanford_online_products_style_data_trains_on_its_products_of_four_or_more(
    tmp_path, capsys, drawn, layout
):
    # class_ids as Ebay_train.txt numbers products; seven of ten have 2 or 3 images
    train = {"11": 2, "12": 3, "13": 4, "14": 2, "15": 5, "16": 3, "17": 2, "18": 3, "19": 2,
             "20": 4}  # fmt: skip
    test = {"31": 2, "32": 5, "33": 3}
    files = sop_style(tmp_path / "sop", train, test, layout)
    out = tmp_path / "out"
    listed = ["--list-file", str(files["train"])] if layout == "list" else []
    code = main(["study", "p-vs-batch-size", "--data", str(tmp_path / "sop"), "--out", str(out),
                 *FAST, *listed])  # fmt: skip
    _, err = capsys.readouterr()
    assert code == 0, err
    trained, dropped = kept(train), left(train)
    (line,) = left_out_lines(err)
    assert line.startswith("p-vs-batch-size: ")
    # five of the left-out products named, as the list names them, in its order
    named = [name for name in dropped if f"'{name}' has {dropped[name]}" in line]
    assert named == list(dropped)[:5]
    assert f"{len(dropped) - 5} more" in line
    (labels,) = drawn["labels"]
    assert sorted(torch.bincount(labels).tolist()) == sorted(trained.values())
    opened = {path.parent.name for path in drawn["opened"]}
    assert opened and opened <= {f"train_{name}_final" for name in trained}
    result = json.loads((out / "p_vs_batch_size.json").read_text())
    record = result["training_classes"]
    assert (record["classes"], record["images"]) == (len(trained), sum(trained.values()))
    assert record["left_out_classes"] == len(dropped)
    assert record["left_out_images"] == sum(dropped.values())
    steps = math.ceil(sum(trained.values()) / 8)
    assert result["settings"]["trained_at_m"]["steps"] == [steps]
    assert (f"Left out of training: {len(dropped)} of the training split's {len(train)} classes"
            in (out / "summary.md").read_text())  # fmt: skip


@pytest.mark.slow
def test_every_class_of_four_or_more_trains_as_before_and_nothing_is_said(tmp_path, capsys, drawn):
    full = {"bench": 4, "chair": 5, "desk": 6, "kettle": 4, "lamp": 4, "mug": 4}
    data = class_halves(tmp_path / "data", full)
    out = tmp_path / "out"
    assert main(["study", "p-vs-batch-size", "--data", str(data), "--out", str(out), *FAST]) == 0
    _, err = capsys.readouterr()
    assert left_out_lines(err) == []
    result = json.loads((out / "p_vs_batch_size.json").read_text())
    assert result["training_classes"]["left_out_classes"] == 0
    assert "Left out" not in (out / "summary.md").read_text()


@pytest.mark.parametrize("study", ["p-vs-batch-size", "losses", "anatomy"])
def test_a_batch_size_beyond_the_classes_left_counts_them_and_names_the_left_out(
    tmp_path, capsys, study
):
    data = class_halves(tmp_path / "data", {**TRAIN, **TEST})
    trained, dropped = kept(TRAIN), left(TRAIN)
    too_big = PER_CLASS * (len(trained) + 1)  # a size all the split's classes could make
    assert too_big <= PER_CLASS * len(TRAIN)
    out = tmp_path / "out"
    argv = ["study", study, "--data", str(data), "--out", str(out), *FAST,
            "--batch-sizes", str(too_big)]  # fmt: skip
    assert main(argv) == 2
    stdout, err = capsys.readouterr()
    assert stdout == "" and err.startswith("gradlab: ") and err.count("\n") == 1, err
    most = PER_CLASS * len(trained)
    assert f"--batch-sizes must be at most {PER_CLASS} x {len(trained)} classes = {most}" in err
    assert f"{len(dropped)} classes with fewer were left out" in err, err
    for name, count in dropped.items():
        assert f"'{name}' has {count}" in err
    assert err.endswith(f"got {too_big}\n") and not out.exists()


def test_a_split_with_one_class_of_four_or_more_is_refused_naming_the_others(tmp_path, capsys):
    counts = {"bench": 4, "bowl": 2, "cup": 3, "kettle": 4, "lamp": 4, "mug": 4}
    data = class_halves(tmp_path / "data", counts)
    out = tmp_path / "out"
    assert main(["study", "losses", "--data", str(data), "--out", str(out), *FAST]) == 2
    _, err = capsys.readouterr()
    assert err.count("\n") == 1, err
    assert "holds 1 class(es) with 4 or more images (bench); a batch needs two" in err, err
    assert "'bowl' has 2" in err and "'cup' has 3" in err and not out.exists()


def test_the_python_study_refuses_too_few_classes_left_before_training(tmp_path, drawn):
    data = class_halves(tmp_path / "data", {**TRAIN, **TEST})
    trained = kept(TRAIN)
    with pytest.raises(GradlabError, match=rf"at most 4 x {len(trained)} classes = "
                                           rf"{PER_CLASS * len(trained)} for this split "
                                           r"\(the classes with 4 or more images; "
                                           rf"{len(left(TRAIN))} classes with fewer"):  # fmt: skip
        image_studies.p_vs_batch_size_on_images(
            data, backbone="tests.helpers.backbones:four_channel_resnet", embedding_dim=8,
            image_size=16, batch_sizes=[PER_CLASS * (len(trained) + 1)],
        )  # fmt: skip
    assert drawn["batches"] == []


@pytest.mark.slow
def test_a_saved_study_that_left_classes_out_says_so_when_rendered(tmp_path, capsys):
    rows = [[0.30, 0.40], [0.31, 0.42]]
    record = {"min_images_per_class": 4, "classes": 9, "images": 50, "left_out_classes": 6,
              "left_out_images": 15, "left_out_examples": {"101": 2, "102": 3, "105": 2,
                                                           "107": 3, "108": 2}}  # fmt: skip
    measurement = {
        "batch_sizes": [8, 16], "data": "mine, train split (50 images, 9 classes)",
        "model": "net", "training_classes": record, "per_class": 4, "seeds": [0, 1],
        "tau": 0.01, "eps": 0.005,
        "settings": {"trained_at_m": {"P": rows, "P_positive_negative": rows,
                                      "P_negative_negative": rows,
                                      "P_diagonal": [[1 / 8, 1 / 16]] * 2,
                                      "P_own_row_column": [[0.0, 0.0]] * 2,
                                      "P_positive_rows": [[0.1, 0.1]] * 2,
                                      "P_negative_rows": [[0.1, 0.2]] * 2, "steps": [7, 4],
                                      "epochs": 1}},
    }  # fmt: skip
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(measurement))
    assert main(["study", "p-vs-batch-size", "--render", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "summary.md").read_text()
    assert ("Left out of training: 6 of the training split's 15 classes (15 of its 65 images), "
            "those with fewer than 4 images") in page
    assert "'101' has 2, '102' has 3, '105' has 2, '107' has 3, '108' has 2 and 1 more" in page
    # a JSON written before the record existed renders as it did
    del measurement["training_classes"]
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(measurement))
    assert main(["study", "p-vs-batch-size", "--render", "--out", str(tmp_path)]) == 0
    assert "Left out" not in (tmp_path / "summary.md").read_text()


SMALL_OPTIONS = {"backbone": "tests.helpers.backbones:four_channel_resnet", "image_size": 16,
                 "embedding_dim": 8, "batch_sizes": [8], "seeds": [0], "lr": 1e-3}  # fmt: skip


@pytest.mark.parametrize("study", ["p-vs-batch-size", "anatomy"])
@pytest.mark.slow
def test_the_p_and_anatomy_studies_say_and_record_what_they_left_out(tmp_path, capsys, study):
    data = class_halves(tmp_path / "data", {**TRAIN, **TEST})
    if study == "p-vs-batch-size":
        result = image_studies.p_vs_batch_size_on_images(data, **SMALL_OPTIONS)
        recorded = result["training_classes"]
    else:
        result = image_studies.anatomy_on_images(data, logs=1, **SMALL_OPTIONS)
        recorded = result["settings"]["training_classes"]
    trained, dropped = kept(TRAIN), left(TRAIN)
    (line,) = left_out_lines(capsys.readouterr().err)
    assert line.startswith(
        f"{study}: left out of training {len(dropped)} of the {len(TRAIN)} classes of the train "
        f"split ({sum(dropped.values())} of its {sum(TRAIN.values())} images): a batch takes 4 "
        "distinct images of each of its classes and these have fewer ("
    )  # fmt: skip
    assert recorded == {
        "min_images_per_class": PER_CLASS, "classes": len(trained),
        "images": sum(trained.values()), "left_out_classes": len(dropped),
        "left_out_images": sum(dropped.values()), "left_out_examples": dropped,
    }  # fmt: skip


@pytest.mark.parametrize(("record", "text"), [
    ({"left_out_classes": 2, "left_out_examples": {"a": 2, "b": 3}}, "'a' has 2, 'b' has 3"),
    ({"left_out_classes": 3, "left_out_examples": {"a": 2}}, "'a' has 2 and 2 more"),
    ({"left_out_classes": 4}, " and 4 more"),  # a record that names none
])  # fmt: skip
def test_the_left_out_examples_are_named_and_the_rest_counted(record, text):
    assert image_studies.left_out_examples(record) == text


def _split_by_hand(tmp_path, counts: dict, labels_beyond_paths: int = 0):
    """A split built without reading a folder (the attributes of ImageFolderSplit): ``counts``
    images per class name, in order; no image file is opened."""
    from gradlab.data.image_folder import ImageFolderSplit, eval_transform

    labels = [label for label, count in enumerate(counts.values()) for _ in range(count)]
    paths = [tmp_path / f"{index}.png" for index in range(len(labels) - labels_beyond_paths)]
    return ImageFolderSplit(tmp_path, "train", paths, torch.tensor(labels), list(counts),
                            eval_transform(8))  # fmt: skip


def test_a_class_named_without_any_image_is_left_out_with_none(tmp_path):
    """The last class name has no image at all: 0 is fewer than 4, so it is left out and
    counted like the class of 2."""
    split = _split_by_hand(tmp_path, {"ant": 4, "bee": 2, "cow": 5, "dog": 0})
    kept_split, record = image_studies.trainable_classes(split)
    assert record == {"min_images_per_class": PER_CLASS, "classes": 2, "images": 9,
                      "left_out_classes": 2, "left_out_images": 2,
                      "left_out_examples": {"bee": 2, "dog": 0}}  # fmt: skip
    assert kept_split.class_names == ["ant", "cow"]
    assert kept_split.labels.tolist() == [0] * 4 + [1] * 5
    assert kept_split.paths == split.paths[:4] + split.paths[6:]


def test_a_split_with_more_labels_than_images_is_refused_not_cut(tmp_path):
    """Leaving a class out pairs each image with its label: a split whose labels outnumber its
    paths cannot be paired, and silently dropping the extra labels would mislabel the rest."""
    split = _split_by_hand(tmp_path, {"ant": 4, "bee": 2, "cow": 5}, labels_beyond_paths=1)
    with pytest.raises(ValueError):
        image_studies.trainable_classes(split)
