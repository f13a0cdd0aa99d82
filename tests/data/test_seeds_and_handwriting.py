"""What a reader of the studies relies on: samplers follow their seed, and the test images show
handwriting the training images never do.

The handwriting check is independent of gradlab's pools: every glyph of a noise-free,
unshifted image is looked up among all 1797 of scikit-learn's digit images by exhaustive
search, and the images used for training and for testing must be different ones.
"""

import pytest
import torch

from gradlab.data import ClassBalancedBatches, FixedCountBatches
from gradlab.data.digit_scenes import load_digit_scenes
from gradlab.data.digit_strings import CELL, load_digit_strings

pytest.importorskip("sklearn")


@pytest.fixture(scope="module")
def references():
    from sklearn.datasets import load_digits

    return torch.as_tensor(load_digits().images, dtype=torch.float32) / 16.0


def _source(references: torch.Tensor, glyph: torch.Tensor) -> int:
    """Index of the scikit-learn image ``glyph`` is (exact up to float rounding)."""
    distance = (references - glyph).abs().flatten(1).sum(dim=1)
    assert float(distance.min()) < 1e-5, "a glyph that is no scikit-learn digit image"
    return int(distance.argmin())


def _sequence(sampler, count=4):
    return [batch.tolist() for batch in sampler.take(count)]


@pytest.mark.parametrize("make", [
    lambda labels, seed: ClassBalancedBatches(labels, per_class=2, classes_per_batch=3,
                                              seed=seed),
    lambda labels, seed: FixedCountBatches(labels, batch_size=12, per_class=4, seed=seed),
], ids=["class-balanced", "fixed-count"])  # fmt: skip
def test_a_sampler_repeats_its_seed_and_differs_between_seeds(make):
    labels = torch.arange(10).repeat_interleave(6)
    runs = {seed: _sequence(make(labels, seed)) for seed in range(4)}
    assert _sequence(make(labels, 2)) == runs[2]
    distinct = {str(run) for run in runs.values()}
    assert len(distinct) == len(runs)  # every seed its own batches


def test_digit_strings_test_images_use_handwriting_never_trained_on(references):
    data = load_digit_strings(num_digits=2, per_class=4, seed=5, max_shift=0, noise=0.0)
    used = {}
    for split, images in (("train", data.train_images), ("test", data.test_images)):
        used[split] = {
            _source(references, images[index, 0, 1:9, CELL * slot + 1 : CELL * slot + 9])
            for index in range(0, len(images), 3) for slot in range(2)
        }  # fmt: skip
    assert used["train"] and used["test"]
    assert used["train"].isdisjoint(used["test"])


@pytest.mark.slow
def test_digit_scene_test_split_uses_handwriting_never_trained_on(references):
    used = {}
    for split in ("train", "test"):
        scenes = load_digit_scenes(40, split=split, seed=4, noise=0.0)
        used[split] = {
            _source(references, scenes.images[index, 0, top:bottom, left:right])
            for index in range(len(scenes.counts))
            for slot in range(int(scenes.counts[index]))
            for top, left, bottom, right in [scenes.boxes[index, slot].tolist()]
        }
    assert len(used["train"]) > 20 and len(used["test"]) > 20
    assert used["train"].isdisjoint(used["test"])
