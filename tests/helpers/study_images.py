"""Small image folders for the `gradlab study` tests: the bundled digits as RGB images, and the
command-line sizes that make a study run in seconds."""

from __future__ import annotations

CLASSES = 8
PER_CLASS = 6
SMALL = [
    "--backbone", "tests.helpers.backbones:four_channel_resnet", "--image-size", "16",
    "--embedding-dim", "8", "--batch-sizes", "8,16", "--seeds", "0,1", "--lr", "1e-3",
]  # fmt: skip
"""Study options for a run of seconds on CPU."""


def digit_images():
    """``(label, number, image)``: the first ``PER_CLASS`` digits of each of ``CLASSES`` labels,
    as RGB PIL images."""
    from PIL import Image
    from sklearn.datasets import load_digits

    digits = load_digits()
    for label in range(CLASSES):
        for number, row in enumerate((digits.target == label).nonzero()[0][:PER_CLASS]):
            pixels = (digits.images[row] * 255 / 16).astype("uint8")
            yield label, number, Image.fromarray(pixels, mode="L").convert("RGB")


def write_images(folder, count: int, size: int = 8) -> list:
    """``count`` distinct ``size`` x ``size`` RGB PNGs ``0.png``, ``1.png``, ... in ``folder``
    (created); their paths."""
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for index in range(count):
        shade = (37 * index + 11 * len(folder.name)) % 256
        path = folder / f"{index}.png"
        Image.new("RGB", (size, size), (shade, 255 - shade, (5 * shade) % 256)).save(path)
        paths.append(path)
    return paths
