"""The digits split against scikit-learn's own arrays: seen and unseen classes never mix.

The reference walks scikit-learn's digits in their stored order and sorts each image into the
seen or the unseen side by its label, scaling the 0..16 grey levels to [0, 1].
"""

from __future__ import annotations

import sys

import pytest
import torch

from gradlab import GradlabError
from gradlab.data import load_digits_split


def _by_hand(seen_classes):
    from sklearn.datasets import load_digits

    digits = load_digits()
    sides = {True: ([], []), False: ([], [])}
    for image, label in zip(digits.data.tolist(), digits.target.tolist(), strict=True):
        images, labels = sides[label in seen_classes]
        images.append([grey / 16 for grey in image])
        labels.append(label)
    return sides


@pytest.mark.parametrize("seen_classes", [None, (2, 7), (9,)])
def test_the_split_is_scikit_learns_digits_scaled_and_sorted_by_class(seen_classes):
    split = load_digits_split() if seen_classes is None else load_digits_split(seen_classes)
    sides = _by_hand((0, 1, 2, 3, 4) if seen_classes is None else seen_classes)
    for images, labels, side in ((split.train_images, split.train_labels, sides[True]),
                                 (split.test_images, split.test_labels, sides[False])):  # fmt: skip
        assert images.dtype == torch.float32 and labels.dtype == torch.int64
        assert labels.tolist() == side[1]
        assert torch.equal(images, torch.tensor(side[0], dtype=torch.float32))


@pytest.mark.parametrize("seen_classes", [(), (-1,), (10,), (3, 11)])
def test_seen_classes_outside_0_to_9_are_refused_with_the_value(seen_classes):
    message = f"seen_classes must be a non-empty subset of 0..9; got {seen_classes}"
    with pytest.raises(GradlabError) as caught:
        load_digits_split(seen_classes)
    assert str(caught.value) == message


def test_without_scikit_learn_the_error_names_the_studies_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(GradlabError) as caught:
        load_digits_split()
    assert "gradlab-ranking[studies]" in str(caught.value)
    assert str(caught.value).startswith("gradlab.data needs the sklearn package")


def test_labels_are_int64_even_where_scikit_learn_stores_int32_targets(monkeypatch):
    # numpy's default integer is int32 on Windows before numpy 2, and scikit-learn's targets
    # follow it; the split promises int64 labels whatever the platform gives.
    import sklearn.datasets

    real = sklearn.datasets.load_digits()
    real.target = real.target.astype("int32")
    monkeypatch.setattr(sklearn.datasets, "load_digits", lambda: real)
    split = load_digits_split((2, 7))
    assert split.train_labels.dtype == torch.int64 and split.test_labels.dtype == torch.int64
    assert sorted(set(split.train_labels.tolist())) == [2, 7]
    assert sorted(set(split.test_labels.tolist())) == [0, 1, 3, 4, 5, 6, 8, 9]
