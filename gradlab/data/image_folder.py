"""Image data sets on disk with the metric-learning conventions: class-disjoint train and test.

Three layouts, picked by ``layout`` (``"auto"`` looks at the folder):

* ``"class-halves"``: an ``ImageFolder`` tree ``root/<class>/<image>``; classes sorted by name,
  the first half trains and the second half tests. That is the convention of CUB-200-2011
  (classes 1-100 train, 101-200 test) and Cars-196 (1-98 / 99-196) in Oh Song et al., 2016
  ("Deep Metric Learning via Lifted Structured Feature Embedding", Sec. 5) and the papers after.
  A class folder without images is refused: it would move a class from one half to the other.
  So is an image the layout would not read, in ``root`` itself or in a folder inside a class
  folder, rather than left out unsaid. Hidden folders and files (names starting with ``.``) are
  skipped.
* ``"online-products"``: Stanford Online Products as distributed: ``root/Ebay_train.txt`` and
  ``root/Ebay_test.txt``, each a header line ``image_id class_id super_class_id path`` and one
  line per image (``path`` relative to ``root``).
* ``"list"``: an explicit ``list_file`` of ``path label`` lines (paths relative to ``root``;
  the label is a line's last word, so a path may hold spaces; blank lines and lines starting
  with ``#`` are skipped); ``split`` is then only a name.

The lists are read as UTF-8, whatever the machine's locale; a byte-order mark (as Windows
editors and spreadsheets write one) is dropped.

``"auto"`` is ``"online-products"`` when ``root`` holds ``Ebay_train.txt``, else
``"class-halves"``. Images are read with Pillow when an item is fetched, as 8-bit RGB (16- and
32-bit integer levels and float intensities in [0, 1] scaled, not clipped, to 8 bits); the
standard transforms
(:func:`train_transform`, :func:`eval_transform`) are written in plain torch (resize, crop, flip,
ImageNet normalisation) so that no torchvision is needed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from gradlab.errors import GradlabError
from gradlab.validation import check_positive_int

SPLITS = ("train", "test")
LAYOUTS = ("auto", "class-halves", "online-products", "list")
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff", ".ppm",
                  ".pgm")  # fmt: skip
"""The files a class folder's images are read from: torchvision's ``ImageFolder``'s, and GIF."""
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)

Transform = Callable[[object], torch.Tensor]


@dataclass
class ImageFolderSplit(torch.utils.data.Dataset):
    """One split of an image data set: ``dataset[i]`` is ``(image [3, H, W] float, label)``.

    Attributes:
        root: the data set's folder.
        split: ``"train"`` or ``"test"``: the split asked for (with the ``"list"`` layout, any
            name the caller gives); only ``"train"`` images are augmented.
        paths: image files, in a fixed order.
        labels: ``[N]`` int64 labels, renumbered ``0..classes-1`` in order of first appearance.
        class_names: the original class of each label (folder name or list/Ebay id).
        transform: ``PIL image -> tensor``.

    Example:
        >>> from PIL import Image
        >>> split = ImageFolderSplit(Path("."), "test", [], torch.zeros(0, dtype=torch.long), [],
        ...                          eval_transform(8))
        >>> len(split), tuple(split.transform(Image.new("RGB", (9, 9))).shape)
        (0, (3, 8, 8))
    """

    root: Path
    split: str
    paths: list[Path]
    labels: torch.Tensor
    class_names: list[str]
    transform: Transform

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from PIL import Image

        path = self.paths[index]
        try:
            with Image.open(path) as image:
                picture = _as_rgb(image)
        except (OSError, ValueError) as error:
            raise GradlabError(f"image {str(path)!r} cannot be read: {error}") from None
        return self.transform(picture), int(self.labels[index])


SHOWN_UNREADABLE = 3
"""How many unreadable images :func:`check_images` names; it counts the rest."""


def check_images(paths: Sequence[str | Path], what: str = "images") -> None:
    """Refuse unreadable images before any work: each file's header, read by Pillow.

    Pillow's ``Image.open`` reads a file's header only (format, mode, size), so the check is
    cheap (well under a millisecond a file with the files in the operating system's cache; a
    cold disk adds one read per file) and finds a file that is no image, an empty
    or truncated header, a format Pillow cannot read, or a missing file. Pixel data damaged
    after a sound header is found only when the image is decoded, in training.

    Args:
        paths: the image files.
        what: the images in words, for the error (``"images in the train split"``).

    Raises:
        GradlabError: one line naming the first :data:`SHOWN_UNREADABLE` unreadable files with
            Pillow's reason, and how many more there are.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> (folder / "broken.png").write_bytes(b"not a png")
        9
        >>> check_images([folder / "broken.png"])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
            ...
        gradlab.errors.GradlabError: 1 of 1 images cannot be read: '.../broken.png' (cannot identify image file)
    """  # noqa: E501
    check_image_groups([(paths, what)])


def check_image_groups(groups: Sequence[tuple[Sequence[str | Path], str]]) -> None:
    """:func:`check_images` of several groups at once (a study's training and evaluation
    splits): one error that names the unreadable files of every group, so a second run does
    not find those of the next group only after the first group's are mended.

    Args:
        groups: ``(paths, what)`` pairs, as :func:`check_images` takes them.

    Raises:
        GradlabError: one line, the groups with unreadable files in turn, separated by ``;``.

    Example:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("train.png", "test.png"):
        ...     _ = (folder / name).write_bytes(b"not a png")
        >>> check_image_groups([([folder / "train.png"], "images in the train split"),
        ...                     ([folder / "test.png"], "images in the test split")])
        ... # doctest: +ELLIPSIS +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
            ...
        gradlab.errors.GradlabError: 1 of 1 images in the train split cannot be read:
        '.../train.png' (cannot identify image file); 1 of 1 images in the test split cannot be
        read: '.../test.png' (cannot identify image file)
    """
    from PIL import Image

    said = []
    for paths, what in groups:
        unreadable: list[str] = []
        for path in paths:
            try:
                with Image.open(path):
                    pass
            except (OSError, ValueError, Image.DecompressionBombError) as error:
                reason = getattr(error, "strerror", None) or str(error)
                reason = reason.replace(repr(str(path)), "").strip()  # the path is named once
                unreadable.append(f"{str(path)!r} ({reason or type(error).__name__})")
        if unreadable:
            shown = ", ".join(unreadable[:SHOWN_UNREADABLE])
            more = len(unreadable) - SHOWN_UNREADABLE
            rest = f" and {more} more" if more > 0 else ""
            said.append(f"{len(unreadable)} of {len(paths)} {what} cannot be read: "
                        f"{shown}{rest}")  # fmt: skip
    if said:
        raise GradlabError("; ".join(said))


INT32_TOP = 2**31 - 1
"""The largest level of a 32-bit signed integer image (Pillow's mode ``I``)."""


def _as_rgb(picture):
    """A PIL image as 8-bit RGB, with wider levels scaled to 8 bits, not clipped.

    Pillow's ``convert("RGB")`` clips every level above 255 to white instead of scaling; the
    modes that hold wider levels are scaled here first, each by the range its file declares:

    * ``I;16`` (a 16-bit greyscale PNG or TIFF): level ``v`` becomes ``round(v / 257)``
      (65535 -> 255);
    * ``I`` (32-bit signed integers): Pillow also opens 16-bit data so (a 16-bit PGM, for
      one), so its levels are 16-bit ones (``round(v / 257)``) unless the file declares 32 bits
      per sample (a TIFF's BitsPerSample), when ``v`` becomes ``round(255 v / (2^31 - 1))``;
      negative levels are 0 and levels past the declared range are 255;
    * ``F`` (32-bit floats): intensities in [0, 1], the convention of float images (scikit-image,
      OpenCV); ``v`` becomes ``round(255 v)``, values outside [0, 1] are clipped and NaN is 0.

    Every other mode is Pillow's ``convert``.

    Example:
        >>> from PIL import Image
        >>> grey = Image.new("I;16", (2, 2), 32896)  # mid-grey in 16 bits
        >>> _as_rgb(grey).getpixel((0, 0))
        (128, 128, 128)
        >>> _as_rgb(Image.new("F", (2, 2), 0.5)).getpixel((0, 0))
        (128, 128, 128)
    """
    from PIL import Image

    mode = picture.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        import numpy

        levels = numpy.asarray(picture).astype(numpy.float64)
        if mode == "F":
            scaled = numpy.nan_to_num(levels, nan=0.0) * 255.0
        else:
            bits = getattr(picture, "tag_v2", {}).get(258, (16,)) if mode == "I" else (16,)
            top = INT32_TOP if max(bits) > 16 else 65535
            scaled = levels * (255.0 / top)
        levels = numpy.round(numpy.clip(scaled, 0.0, 255.0))
        picture = Image.fromarray(levels.astype(numpy.uint8))
    return picture.convert("RGB")


def image_folder(
    root: str | Path,
    split: str = "train",
    *,
    layout: str = "auto",
    list_file: str | Path | None = None,
    transform: Transform | None = None,
    image_size: int = 224,
) -> ImageFolderSplit:
    """One split of an image data set on disk (see the module docstring for the layouts).

    Args:
        root: the data set's folder.
        split: ``"train"`` or ``"test"``.
        layout: ``"auto"``, ``"class-halves"``, ``"online-products"`` or ``"list"``;
            ``"auto"`` is ``"list"`` when a ``list_file`` is given (as ``gradlab study
            --list-file`` has it), else ``"online-products"`` where ``Ebay_train.txt`` is,
            else ``"class-halves"``.
        list_file: the ``path label`` file of the ``"list"`` layout.
        transform: ``PIL image -> tensor``; default :func:`train_transform` for ``"train"``,
            else :func:`eval_transform`, at ``image_size``.
        image_size: side of the square images the default transforms make.

    Returns:
        An :class:`ImageFolderSplit`; its ``labels`` feed :class:`gradlab.data.FixedCountBatches`.

    Raises:
        GradlabError: a missing or malformed folder or list file, named with what was expected,
            before any image is read.

    Example:
        >>> import tempfile
        >>> from PIL import Image
        >>> root = Path(tempfile.mkdtemp())
        >>> for name in ("a", "b", "c", "d"):
        ...     (root / name).mkdir()
        ...     for i in range(2):
        ...         Image.new("RGB", (8, 8)).save(root / name / f"{i}.png")
        >>> train = image_folder(root, "train", image_size=4)
        >>> len(train), train.class_names, tuple(train[0][0].shape)
        (4, ['a', 'b'], (3, 4, 4))
    """
    if not isinstance(root, (str, os.PathLike)):
        raise GradlabError(f"root must be a folder path (str or os.PathLike); got {root!r}")
    if list_file is not None and not isinstance(list_file, (str, os.PathLike)):
        raise GradlabError(f"list_file must be a file path (str or os.PathLike); got {list_file!r}")
    root = Path(root)
    if layout == "auto" and list_file is not None:  # what the list file says, not the folder
        layout = "list"
    if split not in SPLITS and layout != "list":
        raise GradlabError(f"split must be one of {SPLITS}; got {split!r}")
    if layout not in LAYOUTS:
        raise GradlabError(f"layout must be one of {LAYOUTS}; got {layout!r}")
    check_positive_int("image_size", image_size)
    if not root.is_dir():
        raise GradlabError(f"root must be an existing folder of images; {str(root)!r} is not")
    if layout == "auto":
        layout = "online-products" if (root / "Ebay_train.txt").is_file() else "class-halves"
    if layout == "list":
        if list_file is None:
            raise GradlabError("list_file must name a 'path label' file with layout='list'")
        entries = _read_list(Path(list_file), root)
    elif list_file is not None:
        raise GradlabError(f"list_file is read only with layout='list'; got layout={layout!r}")
    elif layout == "online-products":
        entries = _read_online_products(root, split)
    else:
        entries = _class_halves(root, split)
    listing = list_file if layout == "list" else root / f"Ebay_{split}.txt"
    if layout != "class-halves":  # a folder holds each file once
        _refuse_repeats(entries, listing)
    missing = [path for path, _ in entries if not path.is_file()]
    if missing:
        # a list's path may hold spaces: one that is missing may be a line of three words
        split_at = (f" (each line of {str(list_file)!r} is 'path label': the label is its last "
                    "word, and the words before it the path)"
                    if layout == "list" and _has_space(missing[0], root)
                    else "")  # fmt: skip
        listed = f"listed in {str(listing)!r}" if layout != "class-halves" else "listed"
        raise GradlabError(
            f"{len(missing)} of {len(entries)} images {listed} "
            f"{'is' if len(missing) == 1 else 'are'} missing under {str(root)!r}, "
            f"e.g. {str(missing[0])!r}{split_at}"
        )
    names: dict[str, int] = {}
    labels = [names.setdefault(name, len(names)) for _, name in entries]
    if transform is None:
        transform = train_transform(image_size) if split == "train" else eval_transform(image_size)
    return ImageFolderSplit(
        root=root,
        split=split,
        paths=[path for path, _ in entries],
        labels=torch.tensor(labels, dtype=torch.long),
        class_names=list(names),
        transform=transform,
    )


def _refuse_repeats(entries: list[tuple[Path, str]], listing: object) -> None:
    """Refuse a list (a list file, ``Ebay_*.txt``) that names one image more than once: a
    repeated test image is its own nearest neighbour (recall at 1 of an untrained network
    rises to 1), and a repeated training image counts as two images of its class. Paths are
    compared as absolute, normalised paths (``a/./b.png`` is ``a/b.png``, and a line that
    gives the path from ``/`` names the same image as one relative to the root), without
    reading the disk: two names of one file through a link are not seen."""
    seen: dict[str, list[str]] = {}
    for path, label in entries:
        seen.setdefault(os.path.abspath(path), []).append(label)
    repeated = {path: labels for path, labels in seen.items() if len(labels) > 1}
    if not repeated:
        return
    path, labels = next(iter(repeated.items()))
    under = (f"under labels {', '.join(repr(label) for label in dict.fromkeys(labels))}"
             if len(set(labels)) > 1 else f"each time under label {labels[0]!r}")
    raise GradlabError(
        f"{str(listing)!r} names {len(repeated)} image(s) more than once (the first: "
        f"{path!r}, {len(labels)} times, {under}); list each image once: a repeated test image "
        "retrieves its own copy, and a repeated training image counts twice in its class"
    )


def _is_image(name: str) -> bool:
    """Whether a file of this name is an image of a class folder (hidden files never are)."""
    return Path(name).suffix.lower() in IMAGE_SUFFIXES and not name.startswith(".")


SHOWN_STRAY = 3
"""How many images outside the class folders' own level :func:`_refuse_stray_images` names."""


def _refuse_stray_images(root: Path, classes: list[str]) -> None:
    """Refuse images the class-halves layout would not read: in ``root`` itself (no class) or
    in a folder inside a class folder (torchvision's ``ImageFolder`` would read them as the
    class's, a tree of classes would want them apart), so none is dropped unsaid. Hidden
    folders (``.ipynb_checkpoints``) are not looked into; links to folders are not followed."""
    stray = [entry.name for entry in sorted(root.iterdir())
             if _is_image(entry.name) and entry.is_file()]  # fmt: skip
    for name in classes:
        for folder, inside, files in os.walk(root / name):
            inside[:] = sorted(entry for entry in inside if not entry.startswith("."))
            if Path(folder) != root / name:
                stray += [os.path.relpath(os.path.join(folder, file), root)
                          for file in sorted(files) if _is_image(file)]  # fmt: skip
    if not stray:
        return
    shown = ", ".join(repr(path) for path in stray[:SHOWN_STRAY])
    more = len(stray) - SHOWN_STRAY
    one = len(stray) == 1
    raise GradlabError(
        f"{len(stray)} image{'' if one else 's'} under {str(root)!r} "
        f"{'is' if one else 'are'} not directly in a class folder, and the class-halves layout "
        f"(root/<class>/<image>) would not read {'it' if one else 'them'}: {shown}"
        f"{f' and {more} more' if more > 0 else ''}; put each image directly into its class "
        "folder, or move it out of the data folder"
    )


def _class_halves(root: Path, split: str) -> list[tuple[Path, str]]:
    # hidden entries (.ipynb_checkpoints, macOS's ._name.jpg resource forks) are neither
    # classes nor images
    classes = sorted(entry.name for entry in root.iterdir()
                     if entry.is_dir() and not entry.name.startswith("."))  # fmt: skip
    _refuse_stray_images(root, classes)  # before the folders are counted: named, not dropped
    if len(classes) < 2:
        raise GradlabError(
            f"{str(root)!r} must hold at least two class folders (<class>/<image> in it), "
            f"or Ebay_train.txt and Ebay_test.txt; found {len(classes)} folder(s)"
        )
    half = len(classes) // 2
    chosen = classes[:half] if split == "train" else classes[half:]
    images = {
        name: [path for path in sorted((root / name).iterdir()) if _is_image(path.name)]
        for name in classes
    }  # fmt: skip
    entries = [(path, name) for name in chosen for path in images[name]]
    if not entries:
        raise GradlabError(
            f"the {split} classes of {str(root)!r} ({chosen[0]} .. {chosen[-1]}) hold no images "
            f"(expected files ending in {', '.join(IMAGE_SUFFIXES)})"
        )
    empty = [name for name in classes if not images[name]]
    if empty:  # each folder is a class of the halves: an empty one would move a class over
        named = ", ".join(repr(name) for name in empty[:5])
        raise GradlabError(
            f"{len(empty)} of the {len(classes)} class folders of {str(root)!r} "
            f"{'holds' if len(empty) == 1 else 'hold'} no images "
            f"({named}{' ...' if len(empty) > 5 else ''}; expected files ending in "
            f"{', '.join(IMAGE_SUFFIXES)}); the classes are halved by folder, so remove or fill "
            "them"
        )
    return entries


def _text_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 list file (a byte-order mark is no part of line 1); a file that is
    not UTF-8 text (an image passed as the list, a Latin-1 label) is refused naming the line."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        line = data[: error.start].count(b"\n") + 1
        raise GradlabError(
            f"{str(path)!r} must be UTF-8 text; line {line} holds the byte "
            f"0x{data[error.start]:02x}, which UTF-8 does not allow there (is it the list "
            "file, saved as UTF-8?)"
        ) from None


def _read_online_products(root: Path, split: str) -> list[tuple[Path, str]]:
    listing = root / f"Ebay_{split}.txt"
    if not listing.is_file():
        raise GradlabError(
            f"Stanford Online Products needs {str(listing)!r} (as distributed: a header "
            "'image_id class_id super_class_id path', then one line per image)"
        )
    lines = _text_lines(listing)
    header = lines[0].split() if lines else []
    if header != ["image_id", "class_id", "super_class_id", "path"]:
        raise GradlabError(
            f"{str(listing)!r} line 1 must be 'image_id class_id super_class_id path'; "
            f"got {lines[0] if lines else '(empty file)'!r}"
        )
    entries = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 4 or not fields[1].isdigit():
            raise GradlabError(
                f"{str(listing)!r} line {number} must be 'image_id class_id super_class_id "
                f"path' with an integer class_id; got {line!r}"
            )
        entries.append((root / fields[3], fields[1]))
    if not entries:
        raise GradlabError(f"{str(listing)!r} lists no images")
    return entries


def _has_space(path: Path, root: Path) -> bool:
    """Whether the part of ``path`` a list file gave (below ``root``) holds a space."""
    listed = path.relative_to(root) if path.is_relative_to(root) else path
    return any(character.isspace() for character in str(listed))


def _read_list(list_file: Path, root: Path) -> list[tuple[Path, str]]:
    if not list_file.is_file():
        raise GradlabError(f"list_file {str(list_file)!r} does not exist")
    entries = []
    for number, line in enumerate(_text_lines(list_file), start=1):
        fields = line.rsplit(maxsplit=1)
        if not line.strip() or line.lstrip().startswith("#"):  # a blank line or a comment
            continue
        if len(fields) != 2:
            raise GradlabError(
                f"{str(list_file)!r} line {number} must be 'path label'; got {line!r}"
            )
        entries.append((root / fields[0], fields[1]))
    if not entries:
        raise GradlabError(f"{str(list_file)!r} lists no images ('path label' lines)")
    return entries


def _to_tensor(picture) -> torch.Tensor:
    data = torch.frombuffer(bytearray(picture.tobytes()), dtype=torch.uint8)
    image = data.view(picture.height, picture.width, 3).permute(2, 0, 1)
    return image.to(torch.float32) / 255.0


def _normalise(image: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(IMAGENET_MEAN).view(3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(3, 1, 1)
    return (image - mean) / std


def eval_transform(image_size: int = 224) -> Transform:
    """Resize the short side to ``image_size * 8 / 7`` (256 for 224), centre-crop, normalise.

    Example:
        >>> from PIL import Image
        >>> tuple(eval_transform(16)(Image.new("RGB", (40, 20))).shape)
        (3, 16, 16)
    """
    check_positive_int("image_size", image_size)
    short = round(image_size * 8 / 7)

    def apply(picture) -> torch.Tensor:
        from PIL import Image

        scale = short / min(picture.size)
        width, height = (max(image_size, round(side * scale)) for side in picture.size)
        resized = picture.resize((width, height), Image.BILINEAR)
        left, top = (width - image_size) // 2, (height - image_size) // 2
        crop = resized.crop((left, top, left + image_size, top + image_size))
        return _normalise(_to_tensor(crop))

    return apply


def train_transform(image_size: int = 224, seed: int | None = None) -> Transform:
    """Random resized crop (scale 0.16-1, aspect 3/4-4/3), horizontal flip, normalise.

    The usual metric-learning training augmentation (e.g. Brown et al., 2020, Sec. 5.1).
    ``seed`` makes the crops repeatable (a private generator; torch's global one is untouched).

    Example:
        >>> from PIL import Image
        >>> tuple(train_transform(16, seed=0)(Image.new("RGB", (40, 20))).shape)
        (3, 16, 16)
    """
    check_positive_int("image_size", image_size)
    generator = torch.Generator()
    fresh = int.from_bytes(os.urandom(8), "little") >> 1
    generator.manual_seed(seed if seed is not None else fresh)

    def uniform(low: float, high: float) -> float:
        return low + (high - low) * torch.rand((), generator=generator).item()

    def apply(picture) -> torch.Tensor:
        from PIL import Image

        width, height = picture.size
        box = (0, 0, width, height)
        for _ in range(10):
            area = width * height * uniform(0.16, 1.0)
            ratio = math.exp(uniform(math.log(3 / 4), math.log(4 / 3)))
            crop_w, crop_h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if 0 < crop_w <= width and 0 < crop_h <= height:
                left = int(uniform(0, width - crop_w + 1))
                top = int(uniform(0, height - crop_h + 1))
                box = (left, top, left + crop_w, top + crop_h)
                break
        crop = picture.crop(box).resize((image_size, image_size), Image.BILINEAR)
        if uniform(0.0, 1.0) < 0.5:
            crop = crop.transpose(Image.FLIP_LEFT_RIGHT)
        return _normalise(_to_tensor(crop))

    return apply
