"""Image folders on disk: the class-halves, Online Products and list layouts written from the
bundled digits, class-disjoint splits, the transforms, and one-line errors for bad folders."""

from __future__ import annotations

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
         "1 of 1 listed images are missing"),
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
    with pytest.raises(GradlabError, match="list_file is read only with layout='list'"):
        image_folder(class_folders, list_file=tmp_path / "x.txt")
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
