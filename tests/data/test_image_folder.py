"""Image folders on disk: the class-halves, Online Products and list layouts written from the
bundled digits, class-disjoint splits, the transforms, and one-line errors for bad folders."""

from __future__ import annotations

import math
import os
import re

import numpy
import pytest
import torch

from gradlab.data import FixedCountBatches
from gradlab.data.image_folder import eval_transform, image_folder, train_transform
from gradlab.errors import GradlabError

Image = pytest.importorskip("PIL.Image")
CLASSES = 6
PER_CLASS = 4


def _digit_images():
    from sklearn.datasets import load_digits

    digits = load_digits()
    for label in range(CLASSES):
        rows = (digits.target == label).nonzero()[0][:PER_CLASS]
        for number, row in enumerate(rows):
            pixels = (digits.images[row] * 255 / 16).astype("uint8")
            yield label, number, Image.fromarray(pixels, mode="L").convert("RGB").resize((32, 32))


@pytest.fixture(scope="module")
def class_folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits_folders")
    for label, number, picture in _digit_images():
        (root / f"class_{label:03d}").mkdir(exist_ok=True)
        picture.save(root / f"class_{label:03d}" / f"{number}.png")
    return root


@pytest.fixture(scope="module")
def online_products(tmp_path_factory):
    root = tmp_path_factory.mktemp("digits_sop")
    lines = {"train": [], "test": []}
    for image_id, (label, number, picture) in enumerate(_digit_images(), start=1):
        relative = f"class_{label}_final/{label}_{number}.JPG"
        (root / relative).parent.mkdir(exist_ok=True)
        picture.save(root / relative, format="JPEG")
        split = "train" if label < CLASSES // 2 else "test"
        lines[split].append(f"{image_id} {label + 1} 1 {relative}")
    for split, rows in lines.items():
        header = "image_id class_id super_class_id path"
        (root / f"Ebay_{split}.txt").write_text("\n".join([header, *rows]) + "\n")
    return root


@pytest.mark.parametrize("layout_fixture", ["class_folders", "online_products"])
def test_train_and_test_share_no_class_and_no_image(request, layout_fixture):
    root = request.getfixturevalue(layout_fixture)
    train, test = (
        image_folder(root, "train", image_size=16),
        image_folder(root, "test", image_size=16),
    )
    assert len(train) == len(test) == CLASSES // 2 * PER_CLASS
    assert not set(train.class_names) & set(test.class_names)
    assert not set(train.paths) & set(test.paths)
    assert torch.equal(torch.bincount(train.labels), torch.full((CLASSES // 2,), PER_CLASS))
    image, label = test[len(test) - 1]
    assert image.shape == (3, 16, 16) and image.dtype == torch.float32
    assert label == CLASSES // 2 - 1


def test_class_halves_take_the_first_half_of_the_sorted_classes(class_folders):
    train = image_folder(class_folders, "train")
    assert train.class_names == [f"class_{label:03d}" for label in range(CLASSES // 2)]


def test_a_list_file_gives_its_own_split(class_folders, tmp_path):
    listing = tmp_path / "pairs.txt"
    listing.write_text("class_000/0.png 7\nclass_005/1.png 9\n\nclass_000/2.png 7\n")
    chosen = image_folder(class_folders, "mine", layout="list", list_file=listing)
    assert [path.name for path in chosen.paths] == ["0.png", "1.png", "2.png"]
    assert chosen.labels.tolist() == [0, 1, 0] and chosen.class_names == ["7", "9"]
    # layout "auto" (the default) with a list file reads it, as gradlab study --list-file
    # does: it was refused with "list_file is read only with layout='list'; got
    # layout='class-halves'", a layout the caller never passed
    auto = image_folder(class_folders, "train", list_file=listing)
    assert auto.paths == chosen.paths and torch.equal(auto.labels, chosen.labels)


def test_the_four_per_class_sampler_takes_the_split_labels(class_folders):
    train = image_folder(class_folders, "train", image_size=8)
    batches = list(FixedCountBatches(train.labels, per_class=4, batch_size=8, seed=0))
    for batch in batches:
        assert torch.bincount(train.labels[batch]).max().item() == 4


def test_the_evaluation_transform_centre_crops_and_normalises():
    picture = Image.new("RGB", (70, 35), (255, 0, 0))
    picture.paste((0, 0, 255), (30, 10, 40, 25))  # a blue square in the middle
    image = eval_transform(16)(picture)
    assert image.shape == (3, 16, 16)
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    red, blue = (torch.tensor([1.0, 0, 0]) - mean) / std, (torch.tensor([0, 0, 1.0]) - mean) / std
    assert torch.allclose(image[:, 8, 8], blue, atol=1e-5)  # the centre survives the crop
    assert torch.allclose(image[:, 0, 0], red, atol=1e-5)


def test_training_crops_repeat_with_a_seed_and_vary_without_one():
    picture = Image.effect_noise((48, 40), 60).convert("RGB")
    first = [train_transform(16, seed=3)(picture) for _ in range(2)]
    assert torch.equal(first[0], first[1])
    shared = train_transform(16, seed=3)
    assert not torch.equal(shared(picture), shared(picture))
    state = torch.random.get_rng_state()
    train_transform(16)(picture)
    assert torch.equal(state, torch.random.get_rng_state())  # the global generator is untouched


def _broken_sop(root, header, row):
    (root / "Ebay_train.txt").write_text(f"{header}\n{row}\n")
    return root


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda tmp: tmp / "nowhere", "root must be an existing folder"),
        (lambda tmp: (tmp / "one").mkdir() or (tmp / "one" / "a").mkdir() or tmp / "one",
         "at least two class folders"),
        (lambda tmp: _broken_sop(tmp, "id class path", "1 1 a.jpg"),
         "line 1 must be 'image_id class_id super_class_id path'"),
        (lambda tmp: _broken_sop(tmp, "image_id class_id super_class_id path", "1 x 1 a.jpg"),
         "line 2 must be"),
        (lambda tmp: _broken_sop(tmp, "image_id class_id super_class_id path", "1 4 1 a.jpg"),
         r"1 of 1 images listed in '.*Ebay_train\.txt' is missing"),
    ],
)  # fmt: skip
def test_a_bad_folder_is_one_clear_error(tmp_path, make, message):
    with pytest.raises(GradlabError, match=message):
        image_folder(make(tmp_path), "train")


def test_an_empty_half_and_bad_arguments_are_refused(class_folders, tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    with pytest.raises(GradlabError, match="hold no images"):
        image_folder(tmp_path, "test")
    with pytest.raises(GradlabError, match="split must be one of"):
        image_folder(class_folders, "validation")
    with pytest.raises(GradlabError, match="layout must be one of"):
        image_folder(class_folders, layout="coco")
    with pytest.raises(GradlabError, match="list_file must name"):
        image_folder(class_folders, layout="list")
    with pytest.raises(GradlabError, match="list_file is read only with layout='list'; got "
                                           "layout='class-halves'"):  # fmt: skip
        image_folder(class_folders, layout="class-halves", list_file=tmp_path / "x.txt")
    with pytest.raises(GradlabError, match="image_size must be a positive integer"):
        image_folder(class_folders, image_size=0)
    bad = tmp_path / "bad.txt"
    bad.write_text("just-a-path\n")
    with pytest.raises(GradlabError, match="line 1 must be 'path label'"):
        image_folder(class_folders, layout="list", list_file=bad)


def test_an_unreadable_image_is_named_when_fetched(class_folders, tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "broken.png").write_bytes(b"not a png")
    split = image_folder(tmp_path, "train")
    with pytest.raises(GradlabError, match=r"broken\.png. cannot be read"):
        split[0]


def test_training_crops_are_flipped_left_to_right_about_half_the_time():
    ramp = torch.arange(64, dtype=torch.uint8).repeat(64, 1) * 4  # brighter to the right
    picture = Image.fromarray(ramp.numpy(), mode="L").convert("RGB")
    transform = train_transform(16, seed=11)
    flipped = [bool(image[0, :, 0].mean() > image[0, :, -1].mean()) for image in
               (transform(picture) for _ in range(60))]  # fmt: skip
    assert 15 <= sum(flipped) <= 45  # a fair coin: outside this range with p < 1e-4


# ---- the splits' contents and their default transforms ---------------------------------------


def test_a_split_knows_its_folder_and_name(class_folders):
    split = image_folder(class_folders, "test", image_size=8)
    assert split.root == class_folders and split.split == "test"
    assert split.labels.dtype == torch.int64


def _varies(split):
    fetched = [split[0][0] for _ in range(8)]  # a fresh crop and flip each time
    return any(not torch.equal(fetched[0], other) for other in fetched[1:])


def test_training_items_are_augmented_and_test_items_are_the_centre_crop(class_folders, tmp_path):
    size = 12
    train, test = (
        image_folder(class_folders, split, image_size=size) for split in ("train", "test")
    )
    assert _varies(train)
    with Image.open(test.paths[0]) as picture:
        centre = eval_transform(size)(picture.convert("RGB"))
    assert torch.equal(test[0][0], centre) and not _varies(test)
    listing = tmp_path / "pairs.txt"
    listing.write_text("class_003/0.png 7\nclass_005/1.png 9\n")
    mine = image_folder(class_folders, "train", layout="list", list_file=listing, image_size=size)
    assert _varies(mine)
    named = image_folder(class_folders, "mine", layout="list", list_file=listing, image_size=size)
    assert torch.equal(named[0][0], centre)  # a list's own split name: the evaluation transform


def test_the_default_image_side_is_224(class_folders):
    assert tuple(image_folder(class_folders, "test")[0][0].shape) == (3, 224, 224)
    picture = Image.new("RGB", (30, 20))
    assert (
        tuple(eval_transform()(picture).shape)
        == tuple(train_transform()(picture).shape)
        == (3, 224, 224)
    )


@pytest.mark.parametrize("mode", ["L", "RGBA", "P"])
def test_any_picture_mode_is_read_as_three_colour_channels(tmp_path, mode):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.new("RGB", (16, 16), (64, 128, 192)).convert(mode).save(tmp_path / name / "0.png")
    image, _ = image_folder(tmp_path, "test", image_size=14)[0]
    expected = eval_transform(14)(Image.new("RGB", (16, 16), (64, 128, 192)).convert(mode)
                                  .convert("RGB"))  # fmt: skip
    assert image.shape == (3, 14, 14) and torch.equal(image, expected)


def test_a_16_bit_greyscale_picture_reads_as_its_8_bit_levels(tmp_path):
    levels = numpy.arange(256, dtype=numpy.uint16).reshape(16, 16)  # every 8-bit level
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.fromarray(levels * 257).save(tmp_path / name / "0.png")  # 0..65535, 16 bits
    assert Image.open(tmp_path / "a" / "0.png").mode == "I;16"
    image, _ = image_folder(tmp_path, "test", image_size=14)[0]
    eight_bit = Image.fromarray(levels.astype(numpy.uint8)).convert("RGB")
    assert torch.equal(image, eval_transform(14)(eight_bit))


def test_16_bit_levels_between_the_8_bit_ones_read_as_the_nearest_8_bit_level(tmp_path):
    # levels that are no multiple of 257 (a 16-bit sensor's), each read as the 8-bit level k
    # whose 16-bit value 257 k is nearest: a brute-force search, not the scaling formula
    levels = numpy.random.default_rng(0).integers(0, 65536, (16, 16), dtype=numpy.uint16)
    levels[0, :4] = [65535, 65280, 128, 129]  # the top, 255 << 8, and either side of 128.5
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.fromarray(levels).save(tmp_path / name / "0.png")
    nearest = numpy.array([[min(range(256), key=lambda k: abs(257 * k - int(v))) for v in row]
                           for row in levels], dtype=numpy.uint8)  # fmt: skip
    assert nearest[0, :4].tolist() == [255, 254, 0, 1]
    image, _ = image_folder(tmp_path, "test", image_size=16)[0]
    assert torch.equal(image, eval_transform(16)(Image.fromarray(nearest).convert("RGB")))


@pytest.mark.parametrize("suffix", [".tif", ".tiff", ".ppm", ".pgm"])
def test_class_folders_of_the_formats_torchvision_reads_are_read(tmp_path, suffix):
    picture = Image.new("L", (16, 16), 90)  # PGM holds grey levels only
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        picture.save(tmp_path / name / f"0{suffix}")
    split = image_folder(tmp_path, "test", image_size=14)
    assert [path.name for path in split.paths] == [f"0{suffix}"]
    assert torch.equal(split[0][0], eval_transform(14)(picture.convert("RGB")))


def test_auto_picks_the_layout_from_the_folder(class_folders, online_products):
    for root, layout in ((class_folders, "class-halves"), (online_products, "online-products")):
        for split in ("train", "test"):
            auto, named = image_folder(root, split), image_folder(root, split, layout=layout)
            assert auto.paths == named.paths and torch.equal(auto.labels, named.labels)
    # the two layouts split the class-halves folder differently: the check can fail
    with pytest.raises(GradlabError):
        image_folder(class_folders, "train", layout="online-products")


def test_a_path_with_spaces_in_a_list_file_keeps_them(tmp_path):
    (tmp_path / "my class").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "my class" / "a b.png")
    listing = tmp_path / "list.txt"
    listing.write_text("my class/a b.png  cat 3\n")
    with pytest.raises(GradlabError, match=r"1 of 1 images listed in .* is missing"):  # label: last
        image_folder(tmp_path, "mine", layout="list", list_file=listing)
    listing.write_text("my class/a b.png 3\n")
    split = image_folder(tmp_path, "mine", layout="list", list_file=listing)
    assert split.paths == [tmp_path / "my class" / "a b.png"] and split.class_names == ["3"]


def test_a_list_file_line_with_more_words_names_how_it_was_split(tmp_path):
    (tmp_path / "a").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "a" / "0.png")
    listing = tmp_path / "list.txt"
    listing.write_text("a/0.png 3 extra\n")  # a third column: read as a path with a space
    assert _message(lambda: image_folder(tmp_path, "mine", list_file=listing)) == (
        f"1 of 1 images listed in {str(listing)!r} is missing under {str(tmp_path)!r}, "
        f"e.g. {str(tmp_path / 'a' / '0.png 3')!r} (each line of {str(listing)!r} is "
        "'path label': the label is its last word, and the words before it the path)"
    )


@pytest.mark.parametrize(("lines", "said"), [
    (["a/0.png 3", "a/1.png 3", "a/0.png 3"], "'{a0}', 2 times, each time under label '3'"),
    (["a/0.png 3", "./a/0.png 4", "a/1.png 3", "a//1.png 3", "a/0.png 5"],
     "'{a0}', 3 times, under labels '3', '4', '5'"),
    (["{root}/a/0.png 3", "a/0.png 3", "a/1.png 3"],  # from / and from the root: one file
     "'{a0}', 2 times, each time under label '3'"),
    (["a/0.png 3", "a/0.png 4"], "'{a0}', 2 times, under labels '3', '4'"),  # two labels
])  # fmt: skip
def test_a_list_file_naming_an_image_twice_is_refused(tmp_path, lines, said, monkeypatch):
    # a test list written out twice was read as twice the images: each retrieved its own copy
    # (an untrained network's recall at 1 rose to 1), and in training a class of two images
    # listed twice passed for four
    (tmp_path / "a").mkdir()
    for name in ("0.png", "1.png"):
        Image.new("RGB", (4, 4)).save(tmp_path / "a" / name)
    listing = tmp_path / "list.txt"
    listing.write_text("\n".join(lines).format(root=tmp_path) + "\n")
    repeated = 2 if len(lines) > 3 else 1
    monkeypatch.chdir(tmp_path)  # the root given relative to the working folder: "."
    assert _message(lambda: image_folder(".", "mine", list_file=listing)) == (
        f"{str(listing)!r} names {repeated} image(s) more than once (the first: "
        + said.format(a0=os.path.normpath(tmp_path / "a" / "0.png")) + "); list each image "
        "once: a repeated test image retrieves its own copy, and a repeated training image "
        "counts twice in its class")


def test_an_online_products_list_naming_an_image_twice_is_refused(online_products, tmp_path):
    listing = (online_products / "Ebay_test.txt").read_text().splitlines()
    (tmp_path / "Ebay_test.txt").write_text("\n".join([*listing, listing[1]]) + "\n")
    path = listing[1].split()[3]
    assert _message(lambda: image_folder(tmp_path, "test", layout="online-products",
                                         image_size=8)) == (
        f"{str(tmp_path / 'Ebay_test.txt')!r} names 1 image(s) more than once (the first: "
        f"{str(tmp_path / path)!r}, 2 times, each time under label {listing[1].split()[1]!r}); "
        "list each image once: a repeated test image retrieves its own copy, and a repeated "
        "training image counts twice in its class")


@pytest.mark.parametrize(("line", "hint"), [
    ("a/9.png 3", False),  # no space in what the line gave: no word about spaces
    ("a/my 9.png 3", True),
    ("{outside}/9.png 3", False),  # a path outside the root, given from /
])  # fmt: skip
def test_a_missing_listed_image_speaks_of_spaces_only_when_its_line_had_one(tmp_path, line,
                                                                            hint):
    # the root's own spaces are not the line's: a folder named "my data" is common
    root = tmp_path / "my data"
    (root / "a").mkdir(parents=True)
    Image.new("RGB", (4, 4)).save(root / "a" / "0.png")
    listing = tmp_path / "list.txt"
    listing.write_text("a/0.png 3\n" + line.format(outside=tmp_path / "elsewhere") + "\n")
    message = _message(lambda: image_folder(root, "mine", list_file=listing))
    assert message.startswith(f"1 of 2 images listed in {str(listing)!r} is missing under "
                              f"{str(root)!r}, e.g. ")  # the list named: a user has several
    assert ("each line of" in message) == hint


def test_comment_lines_of_a_list_file_are_skipped(tmp_path):
    (tmp_path / "a").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "a" / "0.png")
    listing = tmp_path / "list.txt"
    listing.write_text("# path label\n  # another\na/0.png 3\n")
    split = image_folder(tmp_path, "mine", list_file=listing)
    assert split.paths == [tmp_path / "a" / "0.png"] and split.class_names == ["3"]
    listing.write_text("# only a comment\n")
    assert _message(lambda: image_folder(tmp_path, "mine", list_file=listing)) == (
        f"{str(listing)!r} lists no images ('path label' lines)"
    )


def test_a_blank_line_in_an_online_products_list_is_skipped(online_products, tmp_path):
    listing = (online_products / "Ebay_test.txt").read_text().splitlines()
    (tmp_path / "Ebay_train.txt").write_text("\n".join([*listing[:3], "", *listing[3:]]) + "\n")
    for line in listing[1:]:
        path = line.split()[3]
        (tmp_path / path).parent.mkdir(exist_ok=True)
        (tmp_path / path).write_bytes((online_products / path).read_bytes())
    assert len(image_folder(tmp_path, "train", image_size=8)) == len(listing) - 1


def test_lists_saved_with_a_byte_order_mark_read_as_without_one(online_products, tmp_path):
    (tmp_path / "café").mkdir()
    Image.new("RGB", (4, 4)).save(tmp_path / "café" / "a.png")
    listing = tmp_path / "list.txt"
    listing.write_text("\ufeffcafé/a.png 3\n", encoding="utf-8")  # as Notepad saves UTF-8
    split = image_folder(tmp_path, "mine", layout="list", list_file=listing)
    assert split.paths == [tmp_path / "café" / "a.png"] and split.class_names == ["3"]
    sop = tmp_path / "sop"
    sop.mkdir()
    for name in ("Ebay_train.txt", "Ebay_test.txt"):
        text = (online_products / name).read_text(encoding="utf-8")
        (sop / name).write_text("\ufeff" + text, encoding="utf-8")
    for path in {line.split()[3] for line in text.splitlines()[1:]}:
        (sop / path).parent.mkdir(exist_ok=True)
        (sop / path).write_bytes((online_products / path).read_bytes())
    read, expected = image_folder(sop, "test"), image_folder(online_products, "test")
    assert [path.relative_to(sop) for path in read.paths] == [
        path.relative_to(online_products) for path in expected.paths
    ]
    assert read.class_names == expected.class_names


# ---- errors name the file, the line and what was expected ------------------------------------

SOP_HEADER = "image_id class_id super_class_id path"


def _message(call):
    with pytest.raises(GradlabError) as caught:
        call()
    return str(caught.value)


def test_missing_folders_and_images_are_named(tmp_path):
    nowhere = tmp_path / "nowhere"
    assert _message(lambda: image_folder(nowhere)) == (
        f"root must be an existing folder of images; {str(nowhere)!r} is not"
    )
    (tmp_path / "only").mkdir()
    assert f"{str(tmp_path)!r} must hold at least two class folders" in _message(
        lambda: image_folder(tmp_path)
    )
    (tmp_path / "Ebay_train.txt").write_text(f"{SOP_HEADER}\n1 1 1 a/gone.jpg\n2 1 1 a/b.jpg\n")
    assert _message(lambda: image_folder(tmp_path)) == (
        f"2 of 2 images listed in {str(tmp_path / 'Ebay_train.txt')!r} are missing under "
        f"{str(tmp_path)!r}, e.g. {str(tmp_path / 'a' / 'gone.jpg')!r}"
    )


def test_an_empty_half_names_its_classes_and_the_suffixes_read(tmp_path):
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).mkdir()
    (tmp_path / "c" / "notes.txt").write_text("not an image")
    assert _message(lambda: image_folder(tmp_path, "test")) == (
        f"the test classes of {str(tmp_path)!r} (c .. d) hold no images "
        "(expected files ending in .jpg, .jpeg, .png, .bmp, .gif, .webp, .tif, .tiff, .ppm, "
        ".pgm)"
    )


def test_a_class_folder_without_images_is_refused_not_halved_with_the_others(tmp_path):
    for name in ("a", "b", "c", "d", "e"):  # "b" empty: halving the folders trains a alone
        (tmp_path / name).mkdir()
        if name != "b":
            Image.new("RGB", (4, 4)).save(tmp_path / name / "0.png")
    (tmp_path / "b" / "notes.txt").write_text("not an image")
    for split in ("train", "test"):
        message = _message(lambda split=split: image_folder(tmp_path, split))
        assert message.startswith(
            f"1 of the 5 class folders of {str(tmp_path)!r} holds no images ('b'; expected files "
            "ending in .jpg"
        )


@pytest.mark.parametrize("empty", [2, 5, 6])
def test_several_class_folders_without_images_are_counted_and_the_first_five_named(tmp_path,
                                                                                    empty):
    empties = [f"e{index}" for index in range(empty)]
    for name in ["a", *empties, "z"]:  # "a" and "z", one in each half, hold a picture
        (tmp_path / name).mkdir()
        if name in ("a", "z"):
            Image.new("RGB", (4, 4)).save(tmp_path / name / "0.png")
    named = ", ".join(repr(name) for name in empties[:5])
    more = " ..." if empty > 5 else ""
    assert _message(lambda: image_folder(tmp_path, "train")) == (
        f"{empty} of the {empty + 2} class folders of {str(tmp_path)!r} hold no images "
        f"({named}{more}; expected files ending in .jpg, .jpeg, .png, .bmp, .gif, .webp, .tif, "
        ".tiff, .ppm, .pgm); the classes are halved by folder, so remove or fill them")


def test_hidden_folders_and_files_are_no_classes_and_no_images(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.new("RGB", (4, 4)).save(tmp_path / name / "0.png")
        (tmp_path / name / "._0.png").write_bytes(b"macOS resource fork")  # not a picture
    (tmp_path / ".ipynb_checkpoints").mkdir()  # Jupyter's, no images
    train, test = image_folder(tmp_path, "train"), image_folder(tmp_path, "test")
    assert (train.class_names, test.class_names) == (["a"], ["b"])
    assert train.paths == [tmp_path / "a" / "0.png"] and test.paths == [tmp_path / "b" / "0.png"]


def test_online_products_errors_name_the_list_and_the_expected_header(tmp_path):
    train = tmp_path / "Ebay_train.txt"
    train.write_text(f"{SOP_HEADER}\n")
    assert _message(lambda: image_folder(tmp_path, "test")) == (
        f"Stanford Online Products needs {str(tmp_path / 'Ebay_test.txt')!r} (as distributed: "
        f"a header '{SOP_HEADER}', then one line per image)"
    )
    assert _message(lambda: image_folder(tmp_path)) == f"{str(train)!r} lists no images"
    train.write_text("")
    assert _message(lambda: image_folder(tmp_path)) == (
        f"{str(train)!r} line 1 must be '{SOP_HEADER}'; got '(empty file)'"
    )
    train.write_text(f"id class path\n{SOP_HEADER}\n")
    assert _message(lambda: image_folder(tmp_path)) == (
        f"{str(train)!r} line 1 must be '{SOP_HEADER}'; got 'id class path'"
    )
    train.write_text(f"{SOP_HEADER}\n1 1 1 a.jpg\n1 x 1 a.jpg\n")
    assert _message(lambda: image_folder(tmp_path)) == (
        f"{str(train)!r} line 3 must be '{SOP_HEADER}' with an integer class_id; got '1 x 1 a.jpg'"
    )


def test_list_file_errors_name_the_file_and_the_line(class_folders, tmp_path):
    def read(listing):
        return _message(lambda: image_folder(class_folders, "x", layout="list",
                                             list_file=listing))  # fmt: skip

    listing = tmp_path / "list.txt"
    assert read(listing) == f"list_file {str(listing)!r} does not exist"
    listing.write_text("\n  \n")
    assert read(listing) == f"{str(listing)!r} lists no images ('path label' lines)"
    listing.write_text("class_000/0.png 1\nlonely\n")
    assert read(listing) == f"{str(listing)!r} line 2 must be 'path label'; got 'lonely'"
    assert _message(lambda: image_folder(class_folders, layout="list")) == (
        "list_file must name a 'path label' file with layout='list'"
    )


@pytest.mark.parametrize("transform", [eval_transform, train_transform])
def test_the_transforms_refuse_a_bad_image_side(transform):
    with pytest.raises(GradlabError, match=r"^image_size must be a positive integer"):
        transform(0)


# ---- the transforms' geometry, read from a picture whose pixels spell their coordinates ---------


def _coordinates(width, height):
    """Red 10 + 4 x, green 10 + 4 y, blue 200: every pixel says where it is, and padding (black)
    shows."""
    assert width <= 61 and height <= 61
    pixels = torch.stack(torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij"))
    rgb = torch.stack([10 + 4 * pixels[1], 10 + 4 * pixels[0], torch.full_like(pixels[0], 200)])
    return Image.fromarray(rgb.permute(1, 2, 0).to(torch.uint8).numpy(), mode="RGB")


def _pixels(image):
    """A transform's output back in 0..255 (its ImageNet normalisation undone)."""
    mean, std = torch.tensor([0.485, 0.456, 0.406]), torch.tensor([0.229, 0.224, 0.225])
    return (image * std.view(3, 1, 1) + mean.view(3, 1, 1)) * 255


def _box(image, width, height):
    """The picture's region an upscaled crop shows: (left, top, right, bottom), right and bottom
    exclusive, and whether it was flipped. Upscaling keeps the crop's corner pixels as they are."""
    pixels = _pixels(image)
    assert torch.allclose(pixels[2], torch.tensor(200.0), atol=0.01)  # no padding anywhere
    corners = pixels[:2, [0, -1]][:, :, [0, -1]]  # [channel, row, column]
    assert torch.allclose(corners, corners.round(), atol=0.01)
    xs, ys = ((corners[c].round() - 10) / 4 for c in (0, 1))
    assert torch.equal(xs, xs.round()) and torch.equal(ys, ys.round())
    left, right = int(xs.min()), int(xs.max())
    top, bottom = int(ys.min()), int(ys.max())
    assert 0 <= left <= right < width and 0 <= top <= bottom < height
    return left, top, right + 1, bottom + 1, bool(xs[0, 0] > xs[0, 1])


def _train_boxes(width, height, draws, size=64, seed=0):
    transform, picture = train_transform(size, seed=seed), _coordinates(width, height)
    return [_box(transform(picture), width, height) for _ in range(draws)]


@pytest.mark.slow
def test_training_crops_cover_16_to_100_percent_at_aspect_3_4_to_4_3():
    width, height = 60, 45
    boxes = _train_boxes(width, height, 300)
    sides = [(right - left, bottom - top) for left, top, right, bottom, _ in boxes]
    shares = [w * h / (width * height) for w, h in sides]
    aspects = [w / h for w, h in sides]
    # rounding each side to whole pixels moves the share and the aspect a little
    assert 0.16 * 0.9 <= min(shares) and max(shares) <= 1.0
    assert 0.75 * 0.94 <= min(aspects) and max(aspects) <= 4 / 3 / 0.94
    assert min(shares) < 0.25 and max(shares) > 0.7  # the whole range is drawn
    assert min(aspects) < 0.8 and max(aspects) > 1.25
    assert len(set(sides)) > 100


@pytest.mark.slow
def test_training_crops_reach_every_edge_of_the_picture():
    width, height = 7, 6
    boxes = _train_boxes(width, height, 400, size=16)
    assert any(left == 0 and right < width for left, _, right, _, _ in boxes)
    assert any(right == width and left > 0 for left, _, right, _, _ in boxes)
    assert any(top == 0 and bottom < height for _, top, _, bottom, _ in boxes)
    assert any(bottom == height and top > 0 for _, top, _, bottom, _ in boxes)
    assert any(right - left == width and bottom - top < height for left, top, right, bottom, _
               in boxes)  # fmt: skip
    assert any(bottom - top == height and right - left < width for left, top, right, bottom, _
               in boxes)  # fmt: skip


@pytest.mark.parametrize(("width", "height"), [(1, 3), (3, 1), (1, 1)])
def test_a_picture_one_pixel_across_still_gets_whole_pixel_crops(width, height):
    boxes = _train_boxes(width, height, 200, size=8)
    sides = {(right - left, bottom - top) for left, top, right, bottom, _ in boxes}
    assert all(w >= 1 and h >= 1 for w, h in sides)
    if width * height > 1:
        assert len(sides) > 1  # crops smaller than the picture, not only the whole of it


def test_a_strip_no_crop_fits_is_taken_whole():
    # 40 x 1: a crop of 16 % of the area at aspect <= 4/3 is at least two pixels high
    boxes = _train_boxes(40, 1, 50, size=48)
    assert {box[:4] for box in boxes} == {(0, 0, 40, 1)}
    assert 10 <= sum(box[4] for box in boxes) <= 40  # still flipped half the time


def test_the_evaluation_crop_is_the_central_seven_eighths_of_the_short_side():
    # image_size 14: the short side is resized to 14 * 8 / 7 = 16 pixels. A 16 x 16 picture is
    # not resized at all, so the crop is its central 14 x 14 pixels as they are.
    picture = _coordinates(16, 16)
    image = eval_transform(14)(picture)
    expected = torch.tensor(numpy.array(picture), dtype=torch.float32)  # [16, 16, 3]
    torch.testing.assert_close(_pixels(image), expected[1:15, 1:15].permute(2, 0, 1),
                               atol=1e-3, rtol=0)  # fmt: skip
    # twice as large: resized by 1/2 (each output pixel the mean of a 2 x 2 block), same crop
    half = eval_transform(14)(_coordinates(32, 32))
    torch.testing.assert_close(_pixels(half)[:2, 0, 0], torch.tensor([10 + 4 * 2.5] * 2),
                               atol=1e-3, rtol=0)  # fmt: skip


def test_resizing_never_overshoots_an_edge():
    # bilinear resampling mixes neighbours; a sharper kernel (bicubic, Lanczos) rings at edges
    picture = Image.new("RGB", (9, 9), (50, 50, 50))
    picture.paste((200, 200, 200), (4, 0, 9, 9))
    for transform in (eval_transform(40), train_transform(40, seed=0)):
        for _ in range(5):
            pixels = _pixels(transform(picture))
            assert pixels.min() >= 50 - 0.01 and pixels.max() <= 200 + 0.01
            assert ((pixels > 51) & (pixels < 199)).any()  # an edge pixel mixes the two


def test_unseeded_transforms_draw_fresh_seeds():
    picture = _coordinates(20, 20)
    drawn = [train_transform(16)(picture) for _ in range(30)]
    assert len({tuple(image.flatten().tolist()) for image in drawn}) > 20


def test_an_odd_evaluation_margin_leaves_its_extra_pixel_right_and_below():
    # image_size 14 and a short side of 16: not resized. 21 - 14 = 7 pixels of margin across
    # (3 left, 4 right), 16 - 14 = 2 down (1 and 1); turned on its side, 3 above and 4 below.
    for width, height, rows, columns in ((21, 16, slice(1, 15), slice(3, 17)),
                                         (16, 21, slice(3, 17), slice(1, 15))):  # fmt: skip
        picture = _coordinates(width, height)
        expected = torch.tensor(numpy.array(picture), dtype=torch.float32)[rows, columns]
        torch.testing.assert_close(_pixels(eval_transform(14)(picture)),
                                   expected.permute(2, 0, 1), atol=1e-3, rtol=0)  # fmt: skip


def _crops_by_hand(width, height, calls, seed):
    """The boxes and flips of ``calls`` random resized crops, from the seeded generator's uniform
    draws taken in order: per try the area's share of the picture in [0.16, 1) and the log of
    the aspect in [log 3/4, log 4/3); at the first try that fits the left and top edges; after
    ten tries that do not fit, the whole picture; then the flip, for a draw below one half."""
    draws = iter(torch.rand(calls * 30, generator=torch.Generator().manual_seed(seed)).tolist())

    def uniform(low, high):
        return low + (high - low) * next(draws)

    boxes = []
    for _ in range(calls):
        box = (0, 0, width, height)
        for _ in range(10):
            area = width * height * uniform(0.16, 1.0)
            ratio = math.exp(uniform(math.log(3 / 4), math.log(4 / 3)))
            crop_w, crop_h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
            if crop_w <= width and crop_h <= height:
                left = int(uniform(0, width - crop_w + 1))
                top = int(uniform(0, height - crop_h + 1))
                box = (left, top, left + crop_w, top + crop_h)
                break
        boxes.append((*box, uniform(0.0, 1.0) < 0.5))
    return boxes


@pytest.mark.parametrize(("width", "height", "size"), [(60, 45, 64), (7, 6, 16), (40, 1, 48)])
def test_training_crops_follow_the_seeded_generators_draws_one_by_one(width, height, size):
    # 7 x 6: some tries do not fit; 40 x 1: none does, so each crop takes 10 tries and the whole
    assert _train_boxes(width, height, 60, size=size, seed=5) == _crops_by_hand(width, height,
                                                                                60, seed=5)


@pytest.mark.slow
def test_a_draw_of_exactly_one_half_does_not_flip():
    # torch.rand draws multiples of 2^-24 in [0, 1): below one half is exactly half of them.
    # A strip takes 21 draws a crop (10 tries of two, then the flip); seed 47345's 569th flip
    # draw is exactly 0.5.
    draws = torch.rand(569 * 21, generator=torch.Generator().manual_seed(47345))
    assert draws[568 * 21 + 20].item() == 0.5
    boxes = _train_boxes(40, 1, 569, size=48, seed=47345)
    assert boxes[-1] == (0, 0, 40, 1, False)


def _pixels_read(tmp_path, array, suffix):
    """The 8-bit RGB pixels the data set reads from ``array`` saved as a ``suffix`` file."""
    from PIL import Image

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        Image.fromarray(array).save(tmp_path / name / f"0{suffix}")
    split = image_folder(tmp_path, "test")
    split.transform = lambda picture: numpy.asarray(picture)
    return split[0][0], Image.open(split.paths[0]).mode


def _grey(levels):
    """Expected 8-bit levels as a [1, N, 3] uint8 array."""
    return numpy.repeat(numpy.array([levels], dtype=numpy.uint8)[..., None], 3, axis=2)


def test_a_16_bit_pgm_opened_as_32_bit_integers_reads_as_its_8_bit_levels(tmp_path):
    values = [0, 128, 129, 385, 32896, 40000, 65407, 65535]
    read, mode = _pixels_read(tmp_path, numpy.array([values], dtype=numpy.uint16), ".pgm")
    assert mode == "I"  # Pillow opens 16-bit PGM data as 32-bit integers
    # round(v * 255 / 65535) in integers, halves up (no value here lies on a half)
    assert numpy.array_equal(read, _grey([(2 * 255 * v + 65535) // (2 * 65535) for v in values]))


def test_a_32_bit_integer_tiff_is_scaled_by_its_declared_range_not_clipped(tmp_path):
    top = 2**31 - 1
    values = [-5, 0, 1000, 70000, 2**24, 2**30, top - 1, top]
    read, mode = _pixels_read(tmp_path, numpy.array([values], dtype=numpy.int32), ".tif")
    assert mode == "I"
    expected = [max(0, (2 * 255 * v + top) // (2 * top)) for v in values]  # negative: 0
    assert expected[3:] != [255] * 5  # Pillow's convert would make every level above 255 white
    assert numpy.array_equal(read, _grey(expected))


def test_a_float_tiff_reads_as_intensities_in_0_to_1(tmp_path):
    values = [-0.5, 0.0, 0.125, 0.25, 0.5, 0.875, 1.0, 3.0, math.nan]  # exact in float32
    read, mode = _pixels_read(tmp_path, numpy.array([values], dtype=numpy.float32), ".tif")
    assert mode == "F"
    # 255 v rounded, clipped to 0..255, NaN as 0: 31.875 -> 32, 63.75 -> 64, 127.5 -> 128,
    # 223.125 -> 223
    assert numpy.array_equal(read, _grey([0, 0, 32, 64, 128, 223, 255, 255, 0]))


def test_check_images_names_the_first_three_unreadable_files_and_counts_the_rest(tmp_path):
    from PIL import Image

    from gradlab.data.image_folder import check_images

    good = tmp_path / "good.png"
    Image.new("RGB", (4, 4)).save(good)
    (tmp_path / "text.png").write_text("not a png")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "folder.png").mkdir()
    (tmp_path / "cut.png").write_bytes(good.read_bytes()[:12])
    paths = [good, tmp_path / "missing.png", tmp_path / "text.png", good, tmp_path / "empty.jpg",
             tmp_path / "folder.png", tmp_path / "cut.png"]  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        check_images(paths, "images in the train split")
    assert str(caught.value) == (
        f"5 of 7 images in the train split cannot be read: '{tmp_path / 'missing.png'}' (No such "
        f"file or directory), '{tmp_path / 'text.png'}' (cannot identify image file), "
        f"'{tmp_path / 'empty.jpg'}' (cannot identify image file) and 2 more"
    )
    with pytest.raises(GradlabError) as caught:
        check_images([*paths[1:3], tmp_path / "folder.png"])  # three: none counted apart
    assert str(caught.value) == (
        f"3 of 3 images cannot be read: '{tmp_path / 'missing.png'}' (No such file or "
        f"directory), '{tmp_path / 'text.png'}' (cannot identify image file), "
        f"'{tmp_path / 'folder.png'}' (Is a directory)"
    )
    with pytest.raises(GradlabError, match=r"^4 of 4 images cannot be read: .* and 1 more$"):
        check_images(paths[1:3] + paths[4:6])
    assert check_images([good, good]) is None
    assert check_images([]) is None


def test_check_images_refuses_a_decompression_bomb_and_names_a_reason_left_empty(
    tmp_path, monkeypatch
):
    from PIL import Image

    from gradlab.data.image_folder import check_images

    big = tmp_path / "big.png"
    Image.new("L", (16, 16)).save(big)
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)  # 256 pixels: over twice the limit
    head = r"^1 of 1 images cannot be read: '.*big\.png' "
    with pytest.raises(GradlabError, match=head + r"\(Image size \(256 pixels\) exceeds limit"):
        check_images([big])

    with pytest.raises(GradlabError, match=r"\(embedded null byte\)$"):
        check_images([tmp_path / "a\x00b.png"])  # Python's open raises ValueError

    def silent(path):
        raise OSError  # no message, no strerror: the error's type names it

    monkeypatch.setattr(Image, "open", silent)
    with pytest.raises(GradlabError, match=head + r"\(OSError\)$"):
        check_images([big])


@pytest.mark.parametrize("root", [None, 3, ["images"]])
def test_a_root_that_is_no_path_is_named_not_a_type_error(root):
    # Path(None) raised TypeError: expected str, bytes or os.PathLike object, not NoneType
    expected = f"root must be a folder path (str or os.PathLike); got {root!r}"
    with pytest.raises(GradlabError, match=f"^{re.escape(expected)}$"):
        image_folder(root, "train")
    list_file = None if root is None else root  # list_file is checked the same way
    if list_file is not None:
        with pytest.raises(GradlabError, match=r"^list_file must be a file path"):
            image_folder(".", "train", layout="list", list_file=list_file)


@pytest.mark.parametrize("content, line, byte", [
    (b"\x89PNG\r\n\x1a\n", 1, 0x89),  # an image passed as the list
    (b"a/0.png cat\nb/1.png caf\xe9\n", 2, 0xE9)],  # a Latin-1 label
    ids=["an image", "a latin-1 label"])  # fmt: skip
def test_a_list_file_that_is_not_utf8_is_refused_naming_its_line(
    class_folders, tmp_path, content, line, byte
):
    # a traceback ended in UnicodeDecodeError, and the CLI exited 1
    listing = tmp_path / "list.txt"
    listing.write_bytes(content)
    with pytest.raises(GradlabError) as raised:
        image_folder(class_folders, "mine", layout="list", list_file=listing)
    assert str(raised.value) == (
        f"{str(listing)!r} must be UTF-8 text; line {line} holds the byte 0x{byte:02x}, which "
        "UTF-8 does not allow there (is it the list file, saved as UTF-8?)")
    root = tmp_path / "sop"
    root.mkdir()
    (root / "Ebay_train.txt").write_bytes(
        b"image_id class_id super_class_id path\n1 1 1 caf\xe9/0.jpg\n")
    with pytest.raises(GradlabError, match=r"Ebay_train.txt' must be UTF-8 text; line 2 holds "
                       r"the byte 0xe9"):  # fmt: skip
        image_folder(root, "train", layout="online-products")


def _picture(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (4, 4)).save(path)


def _two_halves(root):
    for name in ("a", "b", "c", "d"):
        for number in range(2):
            _picture(root / name / f"{number}.png")


@pytest.mark.parametrize("split", ["train", "test"])
def test_images_outside_the_class_folders_level_are_refused_not_left_out(tmp_path, split):
    # an image in the data folder itself has no class; one in a folder inside a class folder
    # is in no class either: the layout reads root/<class>/<image> and would drop them unsaid
    _two_halves(tmp_path)
    _picture(tmp_path / "loose.png")
    for number in range(3):  # in the test half's class "c": refused from either split
        _picture(tmp_path / "c" / "sub" / f"x{number}.png")
    _picture(tmp_path / "a" / "sub" / "deeper" / "y.jpg")
    assert _message(lambda: image_folder(tmp_path, split)) == (
        f"5 images under {str(tmp_path)!r} are not directly in a class folder, and the "
        "class-halves layout (root/<class>/<image>) would not read them: 'loose.png', "
        f"{os.path.join('a', 'sub', 'deeper', 'y.jpg')!r}, {os.path.join('c', 'sub', 'x0.png')!r}"
        " and 2 more; put each image directly into its class folder, or move it out of the data "
        "folder")


def test_one_image_in_the_data_folder_itself_is_named_in_the_singular(tmp_path):
    _two_halves(tmp_path)
    _picture(tmp_path / "preview.jpg")
    assert _message(lambda: image_folder(tmp_path, "train")).startswith(
        f"1 image under {str(tmp_path)!r} is not directly in a class folder, and the "
        "class-halves layout (root/<class>/<image>) would not read it: 'preview.jpg'; put")


def test_a_flat_folder_of_images_is_refused_naming_its_images_not_its_folders(tmp_path):
    for number in range(4):
        _picture(tmp_path / f"{number}.png")
    assert _message(lambda: image_folder(tmp_path, "train")).startswith(
        f"4 images under {str(tmp_path)!r} are not directly in a class folder")


def test_other_files_and_hidden_folders_inside_class_folders_are_not_refused(tmp_path):
    _two_halves(tmp_path)
    (tmp_path / "README.txt").write_text("not an image")
    (tmp_path / "a" / "notes").mkdir()
    (tmp_path / "a" / "notes" / "labels.csv").write_text("not an image")
    _picture(tmp_path / "a" / ".ipynb_checkpoints" / "0-checkpoint.png")  # Jupyter's copy
    _picture(tmp_path / ".thumbnails" / "a.png")
    train = image_folder(tmp_path, "train")
    assert train.paths == [tmp_path / name / f"{n}.png" for name in ("a", "b") for n in (0, 1)]


def test_unreadable_files_of_two_groups_are_named_in_one_error(tmp_path):
    from gradlab.data.image_folder import check_image_groups

    (tmp_path / "train.png").write_bytes(b"xx")
    (tmp_path / "test.png").write_bytes(b"")
    Image.new("RGB", (4, 4)).save(tmp_path / "good.png")
    with pytest.raises(GradlabError) as raised:
        check_image_groups([([tmp_path / "train.png", tmp_path / "good.png"], "train images"),
                            ([tmp_path / "good.png"], "unused images"),
                            ([tmp_path / "test.png"], "test images")])  # fmt: skip
    train, test = str(raised.value).split("; ")
    assert train.startswith(f"1 of 2 train images cannot be read: {str(tmp_path / 'train.png')!r}")
    assert test.startswith(f"1 of 1 test images cannot be read: {str(tmp_path / 'test.png')!r}")
    assert check_image_groups([([tmp_path / "good.png"], "images")]) is None
