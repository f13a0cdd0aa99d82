"""`gradlab study p-vs-batch-size` on image folders written from the bundled digits: the bundled
study's JSON schema, the figure, and one-line errors for bad input."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from gradlab.cli import main
from gradlab.experiments.p_vs_batch_size import KEYS, summarize

Image = pytest.importorskip("PIL.Image")
CLASSES = 8
PER_CLASS = 6
SMALL = [
    "--backbone", "tests.helpers.backbones:four_channel_resnet", "--image-size", "16",
    "--embedding-dim", "8", "--batch-sizes", "8,16", "--seeds", "0,1", "--lr", "1e-3",
]  # fmt: skip


def _digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    for label in range(CLASSES):
        for number, row in enumerate((digits.target == label).nonzero()[0][:PER_CLASS]):
            pixels = (digits.images[row] * 255 / 16).astype("uint8")
            yield label, number, Image.fromarray(pixels, mode="L").convert("RGB")


@pytest.fixture(scope="module")
def online_products(tmp_path_factory):
    """Stanford Online Products' layout: Ebay_train.txt / Ebay_test.txt, class folders."""
    root = tmp_path_factory.mktemp("sop")
    rows = {"train": [], "test": []}
    for image_id, (label, number, picture) in enumerate(_digits(), start=1):
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
    assert set(result) == {"batch_sizes", "data", "model", "per_class", "seeds", "tau", "eps",
                           "settings"}  # fmt: skip
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


@pytest.mark.parametrize(
    "change, message",
    [
        ({"--data": "/no/such/folder"}, "root must be an existing folder of images"),
        ({"--backbone": "no_such_net"}, "backbone must be 'timm:NAME'"),
        ({"--batch-sizes": "8,30"}, "batch size must be a multiple of 4"),
        ({"--batch-sizes": "8,x"}, "must be integers separated by commas"),
        ({"--batch-sizes": "8,64"}, r"at most 4 x 4 classes = 16"),
        ({"--weights": "WRONG"}, "do not fit backbone"),
        ({"--device": "banana"}, "--device must be a torch device"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2_before_training(
    online_products, tmp_path, capsys, change, message
):
    import torch

    from tests.helpers.backbones import four_channel_resnet

    wrong = tmp_path / "wrong.pt"
    torch.save(four_channel_resnet(width=2).state_dict(), wrong)
    options = dict(zip(SMALL[::2], SMALL[1::2], strict=True))
    options.update({"--data": str(online_products), "--out": str(tmp_path / "out")})
    options.update(
        {key: str(wrong) if value == "WRONG" else value for key, value in change.items()}
    )
    argv = ["study", "p-vs-batch-size"] + [part for pair in options.items() for part in pair]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors (a malformed list) exit directly
        code = exit_.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and re.search(message, err), err
    assert not (tmp_path / "out").exists()
