"""`gradlab study p-vs-batch-size | losses | anatomy` on image folders written from the bundled
digits: the bundled studies' JSON schema, the report's figures and pages, and one-line errors
for bad input."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import torch

from gradlab.cli import main
from gradlab.errors import GradlabError
from gradlab.experiments.p_vs_batch_size import KEYS, summarize
from tests.helpers.study_images import CLASSES, SMALL, digit_images

Image = pytest.importorskip("PIL.Image")


@pytest.fixture(scope="module")
def online_products(tmp_path_factory):
    """Stanford Online Products' layout: Ebay_train.txt / Ebay_test.txt, class folders."""
    root = tmp_path_factory.mktemp("sop")
    rows = {"train": [], "test": []}
    for image_id, (label, number, picture) in enumerate(digit_images(), start=1):
        relative = f"digit_{label}_final/{number}.JPG"
        (root / relative).parent.mkdir(exist_ok=True)
        picture.save(root / relative, format="JPEG")
        rows["train" if label < CLASSES // 2 else "test"].append(
            f"{image_id} {label + 1} 1 {relative}"
        )
    for split, lines in rows.items():
        text = "\n".join(["image_id class_id super_class_id path", *lines]) + "\n"
        (root / f"Ebay_{split}.txt").write_text(text)
    return root


def _documented_command() -> list[str]:
    page = (Path(__file__).resolve().parents[2] / "docs" / "your-data.md").read_text()
    block = page.split("```bash\n", 1)[1].split("```", 1)[0]
    return shlex.split(block.replace("\\\n", " "))


def _options(words: list[str]) -> dict[str, str | None]:
    """``--flag value`` pairs; a flag without a value (``--amp``) maps to ``None``."""
    options, index = {}, 0
    while index < len(words):
        has_value = index + 1 < len(words) and not words[index + 1].startswith("--")
        options[words[index]] = words[index + 1] if has_value else None
        index += 2 if has_value else 1
    return options


@pytest.mark.slow
def test_the_fig_s7a_command_writes_the_bundled_schema_and_a_figure(
    online_products, tmp_path, capsys
):
    out = tmp_path / "study"
    # The command the docs give for a user's Online Products folder, with small sizes.
    words = _documented_command()
    assert words[:3] == ["gradlab", "study", "p-vs-batch-size"]
    options = _options(words[3:])
    assert options["--device"] == "cuda" and "--amp" in options and options["--epochs"] == "1"
    del options["--weights"]  # the user's checkpoint: random weights here
    options.update(_options(SMALL) | {"--data": str(online_products), "--out": str(out),
                                      "--device": "cpu"})  # fmt: skip
    argv = words[1:3]
    for flag, value in options.items():
        argv += [flag] if value is None else [flag, value]
    code = main(argv)
    assert code == 0, capsys.readouterr().err
    result = json.loads((out / "p_vs_batch_size.json").read_text())
    assert set(result) == {"batch_sizes", "data", "model", "training_classes", "per_class",
                           "seeds", "tau", "eps", "settings"}  # fmt: skip
    assert result["training_classes"]["left_out_classes"] == 0  # 6 images of every digit
    assert result["batch_sizes"] == [8, 16] and result["seeds"] == [0, 1]
    assert result["per_class"] == 4 and (result["tau"], result["eps"]) == (0.01, 0.005)
    setting = result["settings"]["trained_at_m"]
    for key in KEYS:
        assert len(setting[key]) == 2 and all(len(run) == 2 for run in setting[key]), key
    # 4 classes x 6 images = 24 images: ceil(24 / 8) = 3 and ceil(24 / 16) = 2 steps per epoch
    assert setting["steps"] == [3, 2] and setting["epochs"] == 1
    for run_p, *parts in zip(
        *(
            setting[key]
            for key in ("P", "P_diagonal", "P_own_row_column", "P_positive_rows", "P_negative_rows")
        ),
        strict=True,
    ):
        for index, value in enumerate(run_p):
            assert value == pytest.approx(sum(part[index] for part in parts), abs=1e-12)
    assert "train split (24 images, 4 classes)" in result["data"]
    assert summarize(result)["claim"]["verdict"] == "not-testable-here"
    assert (out / "p_vs_batch_size.png").read_bytes()[:4] == b"\x89PNG"
    err = capsys.readouterr().err
    assert "seed 1, m = 16: 2 steps" in err
    trend = summarize(result)["settings"]["trained_at_m"]["trend"]
    page = (out / "summary.md").read_text()
    assert f"P from m = 8 to m = 16: {trend} (paired t-test" in page
    assert "(p_vs_batch_size.png)" in page and (out / "index.html").is_file()


@pytest.fixture(scope="module")
def class_halves(tmp_path_factory):
    """The class-halves layout (CUB-200, Cars-196): root/<class>/<image>, first half trains."""
    root = tmp_path_factory.mktemp("halves")
    for label, number, picture in digit_images():
        (root / f"digit_{label}").mkdir(exist_ok=True)
        picture.save(root / f"digit_{label}" / f"{number}.png")
    return root


@pytest.fixture
def progress_lines():
    """Progress as plain lines on stderr, as in a log file, whatever the terminal."""
    from gradlab.progress import set_progress_mode

    set_progress_mode("lines")
    yield
    set_progress_mode("auto")


def _p_study_at_m_8(data: str, out, seeds: str, capsys) -> dict:
    """``gradlab study p-vs-batch-size`` at m = 8 on ``data``: its JSON (the command succeeded)."""
    argv = ["study", "p-vs-batch-size", "--data", data, "--out", str(out), *SMALL,
            "--batch-sizes", "8", "--seeds", seeds]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads((out / "p_vs_batch_size.json").read_text())


@pytest.mark.slow
def test_each_run_of_a_study_says_what_it_trains_before_its_result(
    class_halves, tmp_path, capsys, progress_lines
):
    result = _p_study_at_m_8(str(class_halves), tmp_path / "p", "0,1", capsys)
    steps = result["settings"]["trained_at_m"]
    lines = capsys.readouterr().err.splitlines()
    for seed in (0, 1):
        run = f"p-vs-batch-size: seed {seed}, m = 8"
        started = lines.index(f"gradlab: {run}: training ({steps['steps'][0]} steps) ...")
        (result,) = [number for number, line in enumerate(lines) if line.startswith(f"{run}: ")]
        assert started < result


@pytest.mark.slow
def test_a_study_of_the_current_folder_names_the_folder(
    class_halves, tmp_path, capsys, monkeypatch
):
    # --data . was described as ", train split (...)": the name of "." is empty
    monkeypatch.chdir(class_halves)
    result = _p_study_at_m_8(".", tmp_path / "p", "0", capsys)
    assert result["data"].startswith(f"{class_halves.name}, train split (")


def _schema(value):
    """The nested keys of a JSON value: dicts by key, lists by their first element."""
    if isinstance(value, dict):
        return {key: _schema(item) for key, item in value.items()}
    if isinstance(value, list) and value:
        return [_schema(value[0])]
    return type(value).__name__ if not isinstance(value, (int, float)) else "number"


def _bundled_loss_comparison(monkeypatch):
    """The bundled loss comparison at its smallest: one seed, two steps, 20 test numbers."""
    from gradlab.experiments import loss_comparison

    small = {"per_class": 4, "batch_size": 16, "steps": 2, "lr": 1e-3, "timing_repeats": 1,
             "test_numbers": 20, "validation_numbers": 20, "sweep": False}  # fmt: skip
    monkeypatch.setattr(loss_comparison, "settings", lambda quick: dict(small))
    return loss_comparison.measure(quick=True, seeds=(0,), workers=1)


@pytest.mark.slow
def test_the_losses_study_writes_the_bundled_schema_and_the_reports_page(
    class_halves, tmp_path, capsys, monkeypatch
):
    from gradlab.experiments.loss_comparison import loss_functions, summarize

    out = tmp_path / "losses"
    argv = ["study", "losses", "--data", str(class_halves), "--out", str(out), *SMALL,
            "--batch-sizes", "8", "--seeds", "0"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    result = json.loads((out / "loss_comparison_m8.json").read_text())
    bundled = _bundled_loss_comparison(monkeypatch)
    assert set(result) == set(bundled)
    assert set(result["losses"]) == set(bundled["losses"]) == set(loss_functions())
    # Only the bundled study chooses hyperparameters on held-out training numbers.
    chosen = {"sweep", "early_gradient_norm"}
    for name, run in result["losses"].items():
        assert _schema({k: v for k, v in run.items() if k != "metrics"}) == _schema(
            {k: v for k, v in bundled["losses"][name].items() if k not in {"metrics", *chosen}}
        ), name
        # mAP (tie-aware, the whole ranking) is left out at data-set scale; R-Precision added
        assert set(run["metrics"]) == set(bundled["losses"][name]["metrics"]) - {"mAP"} | {
            "R-Precision"
        }
        assert all(len(values) == 1 for values in run["metrics"].values())
    assert set(result["settings"]) >= set(bundled["settings"]) - {
        "test_numbers", "validation_numbers", "sweep", "gradient_steps", "selection_rule",
        "initialization"}  # fmt: skip
    # 4 train classes x 6 images = 24 images: 3 steps of 8 in one epoch
    assert result["settings"]["steps"] == 3 and result["settings"]["batch_size"] == 8
    assert "test split (24 images, 4 classes)" in result["settings"]["test_data"]
    summary = summarize(result)  # one seed: none ranked, only a loss without gradient apart
    assert summary["single_seed"] and summary["ranked"] == []
    assert sorted(summary["apart"]) == sorted(summary["no_gradient"])
    assert (out / "loss_comparison_m8.png").read_bytes()[:4] == b"\x89PNG"
    page = (out / "summary.md").read_text()
    assert "## Ranking losses at m = 8, on your data" in page
    timing = result["settings"]["timing"]  # one process trains, on torch's threads of this one
    assert (timing["processes"], timing["threads"]) == (1, torch.get_num_threads())
    assert f"{timing['threads']} torch thread" in page and "one training process at a" in page
    assert "![" in page and "(loss_comparison_m8.png)" in page
    assert (out / "index.html").read_text().count("<img") == 1
    # --render redraws the same page from the JSON alone
    written = page
    (out / "summary.md").unlink()
    assert main(["study", "losses", "--render", "--out", str(out)]) == 0
    assert (out / "summary.md").read_text() == written


@pytest.mark.slow
def test_the_anatomy_study_writes_the_scenes_schema_over_training(
    online_products, tmp_path, capsys
):
    from gradlab.experiments.digit_scenes import ANATOMY_KEYS, GEOMETRY_KEYS, LOSSES

    out = tmp_path / "anatomy"
    argv = ["study", "anatomy", "--data", str(online_products), "--out", str(out), *SMALL,
            "--batch-sizes", "8", "--seeds", "0", "--epochs", "2"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    result = json.loads((out / "gradient_anatomy.json").read_text())
    assert set(result) == {"settings", "seeds", "runs"} and list(result["runs"]) == ["m = 8"]
    runs = result["runs"]["m = 8"]
    assert set(runs) == set(LOSSES)
    for run in runs.values():
        # a run of digit_scenes.measure: {"recall", "loss_history", "anatomy", "geometry"}
        assert set(run) == {"recall", "loss_history", "anatomy", "geometry"}
        assert set(run["anatomy"]) == {"steps", "in_batch"}
        assert set(run["anatomy"]["in_batch"]) == set(ANATOMY_KEYS)
        steps = run["anatomy"]["steps"]
        assert steps[0] == 0 and steps[-1] == 5 and steps == sorted(set(steps))  # 2 x 3 steps
        for values in run["anatomy"]["in_batch"].values():
            assert len(values) == 1 and len(values[0]) == len(steps)
        assert len(run["loss_history"][0]) == 6 and "MAP@R" in run["recall"]
        # the scenes' geometry that needs no captions, at the same logged steps
        assert set(run["geometry"]) == set(GEOMETRY_KEYS) - {
            "uniformity_captions", "rank_share_captions", "modality_gap"}  # fmt: skip
        for values in run["geometry"].values():
            assert len(values) == 1 and len(values[0]) == len(steps)
    # VSE++'s max-violation sends gradient to one negative per query (or none): never more
    active = runs["VSE++ max-violation"]["anatomy"]["in_batch"]["active_negatives"][0]
    assert all(value <= 1.0 for value in active)
    assert (out / "gradient_anatomy.png").read_bytes()[:4] == b"\x89PNG"
    assert "| m = 8 | SmoothAP |" in (out / "summary.md").read_text()


def test_render_without_a_study_json_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["study", "anatomy", "--render", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds no gradient_anatomy.json" in err, err
    missing = tmp_path / "typo"  # a folder that is not there says so
    assert main(["study", "anatomy", "--render", "--out", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gradlab: {str(missing)!r} does not exist; give the folder a "
                   "gradlab study run wrote its gradient_anatomy.json into\n")


def test_render_of_another_study_than_the_folder_holds_names_the_one_it_holds(tmp_path, capsys):
    # "holds no gradient_anatomy.json" alone left the user to find that the folder holds a
    # losses run, rendered by gradlab study losses --render
    (tmp_path / "loss_comparison_m8.json").write_text("{}")
    assert main(["study", "anatomy", "--render", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == (f"gradlab: {str(tmp_path)!r} holds no gradient_anatomy.json of a gradlab "
                   "study; it holds loss_comparison_m8.json: render it with gradlab study "
                   f"losses --render --out {shlex.quote(str(tmp_path))}\n")


def test_a_study_without_data_is_one_line_and_exit_code_2(tmp_path, capsys):
    assert main(["study", "losses", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs --data FOLDER" in err, err


@pytest.mark.parametrize("study", ["p-vs-batch-size", "losses", "anatomy"])
@pytest.mark.parametrize(
    "change, message",
    [
        ({"--data": "/no/such/folder"}, "--data must be an existing folder of images"),
        ({"--lr": "-1"}, "--lr must be a positive finite number; got -1.0"),
        ({"--loader-workers": "-1"}, "--loader-workers must be an int from 0 to [0-9]+; got -1"),
        # a process each: 100000 of them fill the memory or hang
        ({"--loader-workers": "100000"},
         "--loader-workers must be an int from 0 to [0-9]+; got 100000"),
        # one batch of 16 images of 10^5 x 10^5 pixels: 1.8 TiB, the out-of-memory killer's
        ({"--image-size": "100000"}, r"--image-size 100000: one batch of 16 images of 100000 x "
                                     r"100000 pixels needs 1788\.1 GiB in float32 before the "
                                     r"backbone runs, more than the [0-9.]+ GiB available"),
        ({"--image-size": "0"}, "--image-size must be a positive integer; got 0"),
        ({"--embedding-dim": "0"}, "--embedding-dim must be a positive integer; got 0"),
        ({"--weights": "/no/such.pt"}, "--weights must be an existing file"),
        ({"--backbone": "no_such_net"}, "backbone must be 'timm:NAME'"),
        ({"--backbone": "no_such_module:net"}, "module 'no_such_module' cannot be imported"),
        ({"--backbone": "tests.helpers.backbones:nothing"}, "has no function 'nothing'"),
        ({"--data": "EMPTY"}, "must hold at least two class folders"),
        ({"--epochs": "0"}, "--epochs must be a positive integer; got 0"),
        # every batch is drawn before training: 10^15 epochs grew memory without end
        ({"--epochs": "1000000000000000"}, r"--epochs 1000000000000000: [0-9,]+ optimizer "
                                           r"steps at m = [0-9]+, whose batches and losses are "
                                           r"held in memory: at least [0-9.]+ GiB, more than the "
                                           r"[0-9.]+ GiB available; pass fewer epochs"),
        ({"--batch-sizes": "8,30"}, "--batch-sizes must be a multiple of 4"),
        ({"--batch-sizes": "8,x"}, "must be integers separated by commas"),
        ({"--batch-sizes": "8,64"}, r"at most 4 x 4 classes = 16"),
        ({"--weights": "WRONG"}, "do not fit backbone"),
        ({"--weights": "TEXT"}, "cannot be read as a checkpoint of tensors"),
        ({"--device": "banana"}, "--device must be cpu, cuda\\[:N\\] or mps"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2_before_training(
    online_products, tmp_path, capsys, study, change, message
):
    import torch

    from tests.helpers.backbones import four_channel_resnet

    wrong = tmp_path / "wrong.pt"
    torch.save(four_channel_resnet(width=2).state_dict(), wrong)
    options = dict(zip(SMALL[::2], SMALL[1::2], strict=True))
    options.update({"--data": str(online_products), "--out": str(tmp_path / "out")})
    (tmp_path / "empty").mkdir()
    (tmp_path / "notes.pt").write_text("not a checkpoint\n")
    placeholders = {"WRONG": str(wrong), "EMPTY": str(tmp_path / "empty"),
                    "TEXT": str(tmp_path / "notes.pt")}  # fmt: skip
    options.update({key: placeholders.get(value, value) for key, value in change.items()})
    argv = ["study", study] + [part for pair in options.items() for part in pair]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors (a malformed list) exit directly
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("study", ["losses", "anatomy"])
def test_training_on_the_evaluation_split_is_one_line_and_exit_code_2(
    online_products, tmp_path, capsys, study
):
    # --split test would train on the images retrieval is measured on
    argv = ["study", study, "--data", str(online_products), "--split", "test",
            "--out", str(tmp_path / "out"), *SMALL]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert f"--split test is the split gradlab study {study} measures retrieval on" in err
    assert "same images" in err and "split=" not in err  # the option, not the parameter
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("study", ["losses", "anatomy"])
def test_a_list_file_without_test_images_is_one_line_and_exit_code_2(
    online_products, tmp_path, capsys, study
):
    listing = tmp_path / "train.txt"
    rows = (online_products / "Ebay_train.txt").read_text().splitlines()[1:]
    listing.write_text("\n".join(f"{row.split()[3]} {row.split()[1]}" for row in rows) + "\n")
    argv = ["study", study, "--data", str(online_products), "--list-file", str(listing),
            "--out", str(tmp_path / "out"), *SMALL]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs --test-list-file" in err, err
    assert "test_list_file" not in err, err  # the option, not the parameter
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_render_writes_the_reports_verdict_on_a_saved_p_measurement(tmp_path, capsys):
    """A rising P over three seeds: the page carries summarize's trend and the table's means."""
    rows = [[0.30, 0.40], [0.31, 0.42], [0.29, 0.41]]
    parts = {"P_diagonal": [[1 / 8, 1 / 16]] * 3, "P_own_row_column": [[0.0, 0.0]] * 3,
             "P_positive_rows": [[0.1, 0.1]] * 3, "P_negative_rows": [[0.1, 0.2]] * 3}  # fmt: skip
    measurement = {
        "batch_sizes": [8, 16], "data": "mine, train split", "model": "net", "per_class": 4,
        "seeds": [0, 1, 2], "tau": 0.01, "eps": 0.005,
        "settings": {"trained_at_m": {"P": rows, "P_positive_negative": rows,
                                      "P_negative_negative": rows, **parts, "steps": [3, 2],
                                      "epochs": 1}},
    }  # fmt: skip
    (tmp_path / "p_vs_batch_size.json").write_text(json.dumps(measurement))
    assert main(["study", "p-vs-batch-size", "--render", "--out", str(tmp_path)]) == 0
    page = (tmp_path / "summary.md").read_text()
    trend = summarize(measurement)["settings"]["trained_at_m"]["trend"]
    assert f"P from m = 8 to m = 16: {trend} (paired t-test" in page
    mean = sum(row[1] for row in rows) / 3
    assert f"| 16 | 2 | {mean:.4f} ± " in page
    assert (tmp_path / "p_vs_batch_size.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_the_numbers_do_not_depend_on_the_loader_workers(class_halves):
    """Each image's crop comes from (seed, draw) alone: two worker processes load the same
    batches as this process does, so the trained networks' P agree exactly."""
    from gradlab.experiments.image_studies import p_vs_batch_size_on_images

    options = dict(backbone="tests.helpers.backbones:four_channel_resnet", embedding_dim=8,
                   image_size=16, batch_sizes=[8], seeds=[0], lr=1e-3)  # fmt: skip
    here = p_vs_batch_size_on_images(class_halves, workers=0, **options)
    loaded = p_vs_batch_size_on_images(class_halves, workers=2, **options)
    assert loaded == here
    reseeded = p_vs_batch_size_on_images(class_halves, workers=0, **options | {"seeds": [1]})
    assert reseeded["settings"] != here["settings"]  # the check can tell runs apart


def test_a_negative_worker_count_is_refused_before_training(class_halves):
    from gradlab.experiments.image_studies import loss_comparison_on_images

    with pytest.raises(GradlabError, match="workers must be a whole number >= 0; got -1"):
        loss_comparison_on_images(class_halves, workers=-1)


@pytest.mark.parametrize("workers", ["0", "1"])
def test_an_unreadable_image_is_one_line_and_exit_code_2_from_any_loader(
    class_halves, tmp_path, capsys, workers
):
    import shutil

    root = shutil.copytree(class_halves, tmp_path / "data")
    for image in (root / "digit_1").iterdir():  # every image of a training class: the first
        # batch holds one; a sound header (the check before training passes), pixels cut off
        raw = image.read_bytes()
        image.write_bytes(raw[: raw.index(b"IDAT") + 6])
    argv = ["study", "p-vs-batch-size", "--data", str(root), "--out", str(tmp_path / "out"),
            *SMALL, "--batch-sizes", "16", "--seeds", "0", "--loader-workers", workers]  # fmt: skip
    assert main(argv) == 2
    *progress, error = capsys.readouterr().err.splitlines()
    # the image's own message, without the worker's traceback or the exception's name, after
    # the lines of the run it stopped
    assert re.fullmatch(r"gradlab: image '[^']*digit_1[^']*' cannot be read: .*", error), error
    started, stopped = progress
    assert started == "gradlab: p-vs-batch-size: seed 0, m = 16: training (2 steps) ..."
    assert stopped.startswith("gradlab: p-vs-batch-size: seed 0, m = 16: training stopped (0 of 2")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("study", ["p-vs-batch-size", "losses"])
def test_unreadable_images_are_named_in_one_line_before_anything_trains(
    class_halves, tmp_path, capsys, study
):
    import shutil

    root = shutil.copytree(class_halves, tmp_path / "data")
    classes = sorted(path for path in root.iterdir() if path.is_dir())
    broken = sorted(classes[0].iterdir())[:4]  # the first half of the classes trains
    broken[0].write_bytes(b"xx")  # not an image
    broken[1].write_bytes(b"")  # empty
    broken[2].write_bytes(broken[2].read_bytes()[:12])  # a header cut short
    broken[3].write_bytes(b"\x89PNG\r\n\x1a\n")  # PNG's signature and nothing else
    argv = ["study", study, "--data", str(root), "--out", str(tmp_path / "out"), *SMALL,
            "--batch-sizes", "16", "--seeds", "0"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()  # no progress line: nothing started
    shown = ", ".join(rf"'{re.escape(str(path))}' \([^)]+\)" for path in broken[:3])
    assert re.fullmatch(rf"gradlab: 4 of \d+ images in the train split cannot be read: {shown} "
                        r"and 1 more", line), line  # fmt: skip
    assert not (tmp_path / "out").exists()


def test_unreadable_evaluation_images_are_named_before_anything_trains(
    class_halves, tmp_path, capsys
):
    import shutil

    root = shutil.copytree(class_halves, tmp_path / "data")
    bad = sorted(sorted(path for path in root.iterdir() if path.is_dir())[-1].iterdir())[0]
    bad.write_bytes(b"xx")  # the last class is in the evaluation half
    argv = ["study", "losses", "--data", str(root), "--out", str(tmp_path / "out"), *SMALL,
            "--batch-sizes", "16", "--seeds", "0"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    expected = (rf"gradlab: 1 of \d+ images in the test split cannot be read: "
                rf"'{re.escape(str(bad))}' \(cannot identify image file\)")  # fmt: skip
    assert re.fullmatch(expected, line), line


def _a_busy_machine(monkeypatch):
    """Two cores, two torch threads, a load average of 3: the busy machine's note is due."""
    import os

    import torch

    monkeypatch.setattr(os, "getloadavg", lambda: (3.0, 3.0, 3.0))
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    monkeypatch.setattr("gradlab.experiments.runtime.usable_cores", lambda: 2)


@pytest.mark.slow  # trains a tiny study: seconds
def test_a_busy_machine_is_said_after_the_checks_and_before_training(
    class_halves, tmp_path, capsys, monkeypatch
):
    # said before the checks, a refused study printed two lines, the note and its error
    import shutil

    _a_busy_machine(monkeypatch)
    root = shutil.copytree(class_halves, tmp_path / "data")
    sorted(sorted(path for path in root.iterdir() if path.is_dir())[0].iterdir())[0].write_bytes(
        b"xx")  # fmt: skip
    argv = ["study", "p-vs-batch-size", "--data", str(root), "--out", str(tmp_path / "out"),
            *SMALL, "--batch-sizes", "16", "--seeds", "0"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()  # the error alone
    assert "cannot be read" in line
    argv[3] = str(class_halves)
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    # the P study records no time: what the busy cores slow is the training itself
    assert err[0] == ("gradlab: the machine is busy (load average 3.0 over the last minute, 2 "
                      "cores): training runs on 2 torch threads, which wait for each other "
                      "behind the other processes, so it can take many times longer; on one "
                      "thread (OMP_NUM_THREADS=1) it waits for no other")
    assert len([line for line in err if "the machine is busy" in line]) == 1


@pytest.mark.parametrize("study", ["losses", "anatomy"])
def test_unreadable_images_of_both_splits_are_named_in_one_run(class_halves, tmp_path, capsys,
                                                               study):  # fmt: skip
    # the evaluation split's were named only once the training split's were mended
    import shutil

    root = shutil.copytree(class_halves, tmp_path / "data")
    classes = sorted(path for path in root.iterdir() if path.is_dir())
    trained, evaluated = sorted(classes[0].iterdir())[0], sorted(classes[-1].iterdir())[0]
    trained.write_bytes(b"xx")
    evaluated.write_bytes(b"")
    argv = ["study", study, "--data", str(root), "--out", str(tmp_path / "out"), *SMALL,
            "--batch-sizes", "16", "--seeds", "0"]  # fmt: skip
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.splitlines()
    expected = (rf"gradlab: 1 of \d+ images in the train split cannot be read: "
                rf"'{re.escape(str(trained))}' \([^)]+\); 1 of \d+ images in the test split "
                rf"cannot be read: '{re.escape(str(evaluated))}' \([^)]+\)")  # fmt: skip
    assert re.fullmatch(expected, line), line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("study", ["p-vs-batch-size", "losses", "anatomy"])
def test_test_images_without_a_list_file_is_one_line_and_exit_code_2(
    online_products, tmp_path, capsys, study
):
    """--test-list-file applies only with --list-file: alone it is refused, not ignored."""
    listing = tmp_path / "test.txt"
    listing.write_text("a.jpg 0\n")
    argv = ["study", study, "--data", str(online_products), "--test-list-file", str(listing),
            "--out", str(tmp_path / "out"), *SMALL]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--test-list-file" in err and "--list-file" in err, err
    assert str(listing) in err, err
    assert not (tmp_path / "out").exists()


def test_render_with_data_is_one_line_and_exit_code_2(tmp_path, capsys):
    # --render redraws what --out holds: a --data beside it would be silently ignored
    assert main(["study", "losses", "--render", "--out", str(tmp_path),
                 "--data", str(tmp_path / "images")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err == (f"gradlab: --data does not apply with --render (it redraws the study saved "
                   f"in --out); got --data {str(tmp_path / 'images')!r}\n")


def test_a_study_that_runs_out_of_memory_is_one_line_and_exit_code_2(
    online_products, tmp_path, capsys, monkeypatch
):
    # an --embedding-dim of 1e11 fails in the allocator (a traceback before): named options
    from gradlab.experiments import image_studies

    def allocate(*args, **kwargs):
        raise RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't "
                           "allocate memory: you tried to allocate 400000000000 bytes")

    monkeypatch.setattr(image_studies, "p_vs_batch_size_on_images", allocate)
    argv = ["study", "p-vs-batch-size", *SMALL, "--data", str(online_products),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "gradlab: the study ran out of memory; try a smaller --embedding-dim, --image-size or "
        "--batch-sizes\n")


@pytest.mark.parametrize("study", ["losses", "anatomy"])
def test_an_evaluation_split_without_a_query_is_refused_before_training(tmp_path, capsys, study):
    # four training classes of four images; four test classes of one image each: no image has
    # another of its class to retrieve, and every average ran over nothing (NaN, exit 0)
    from tests.helpers.study_images import write_images

    data = tmp_path / "data"
    for index in range(4):
        write_images(data / f"a{index}", 4)
        write_images(data / f"b{index}", 1)
    argv = ["study", study, *SMALL, "--batch-sizes", "8", "--seeds", "0", "--data", str(data),
            "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == ("gradlab: the evaluation split 'test' (4 images, 4 classes) holds no class "
                   "with two or more images: no image has another of its class to retrieve, so "
                   "retrieval would measure nothing; give each evaluation class at least two "
                   "images\n"), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("study, options, message", [
    ("p_vs_batch_size_on_images", {"device": "tpu"},
     "device must be cpu, cuda[:N] or mps; got 'tpu'"),
    ("loss_comparison_on_images", {"device": "tpu"},
     "device must be cpu, cuda[:N] or mps; got 'tpu'"),
    ("anatomy_on_images", {"device": "tpu"},
     "device must be cpu, cuda[:N] or mps; got 'tpu'"),
    ("p_vs_batch_size_on_images", {"eps": 0.0}, "eps must be a positive finite number; got 0.0"),
    ("p_vs_batch_size_on_images", {"eps": float("nan")},
     "eps must be a positive finite number; got nan"),
])  # fmt: skip
def test_a_bad_device_or_slope_threshold_from_python_is_refused_before_training(
    class_halves, progress_lines, capsys, study, options, message
):
    # device="tpu" ended in torch's RuntimeError after the data and the backbone were set up,
    # and eps=0 in a GradlabError after the first training batch ("training stopped (0 of 1
    # steps)"), where the docstrings say bad input is refused before any training
    import gradlab.experiments.image_studies as studies

    run = getattr(studies, study)
    small = {"image_size": 8, "embedding_dim": 4, "batch_sizes": [8], "epochs": 1}
    with pytest.raises(GradlabError) as raised:
        run(class_halves, **small, **options)
    assert str(raised.value) == message
    assert "training" not in capsys.readouterr().err


@pytest.mark.parametrize(("free", "refused"), [(8_000_000, False), (7_999_999, True)])
def test_epochs_are_refused_when_their_batches_and_losses_outgrow_free_memory(
    monkeypatch, free, refused
):
    # 40 images: 5 batches of 8 per epoch (3 of 16); each step holds 8 m bytes of indices and
    # STEP_BYTES of tensors, so 1000 epochs at m = 8 hold 5000 x (64 + 1536) = 8,000,000 bytes,
    # more than m = 16's 3000 x (128 + 1536)
    import torch

    from gradlab import memory
    from gradlab.errors import GradlabError
    from gradlab.experiments.image_studies import STEP_BYTES, check_training_length

    assert STEP_BYTES == 1536
    monkeypatch.setattr(memory, "available_bytes", lambda device: free)
    labels = torch.arange(40) % 10
    if not refused:
        check_training_length(labels, [16, 8], 1000)
        return
    with pytest.raises(GradlabError, match=r"^epochs 1000: 5,000 optimizer steps at m = 8, "
                                           r"whose batches and losses are held in memory"):
        check_training_length(labels, [16, 8], 1000)


def test_the_python_study_refuses_epochs_beyond_memory_before_training(class_halves):
    from gradlab.errors import GradlabError
    from gradlab.experiments.image_studies import p_vs_batch_size_on_images

    with pytest.raises(GradlabError, match=r"^epochs 1000000000000000: [0-9,]+ optimizer steps"):
        p_vs_batch_size_on_images(class_halves, backbone="tests.helpers.backbones:"
                                  "four_channel_resnet", embedding_dim=8, image_size=16,
                                  batch_sizes=[8], epochs=10**15)  # fmt: skip


def test_an_epochs_last_short_batch_is_counted(monkeypatch):
    # 44 images in batches of 8: ceil(44 / 8) = 6 batches an epoch, the last one short
    import torch

    from gradlab import memory
    from gradlab.errors import GradlabError
    from gradlab.experiments.image_studies import check_training_length

    labels = torch.arange(44) % 11
    monkeypatch.setattr(memory, "available_bytes", lambda device: 6000 * (64 + 1536) - 1)
    with pytest.raises(GradlabError, match=r"^epochs 1000: 6,000 optimizer steps at m = 8"):
        check_training_length(labels, [8], 1000)
