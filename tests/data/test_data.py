"""Digits split and class-balanced batches."""

import pytest
import torch

from gradlab import GradlabError
from gradlab.data import ClassBalancedBatches, load_digits_split


@pytest.mark.slow
def test_digits_split_is_disjoint_by_class_and_complete():
    split = load_digits_split()
    assert set(split.train_labels.tolist()) == {0, 1, 2, 3, 4}
    assert set(split.test_labels.tolist()) == {5, 6, 7, 8, 9}
    assert len(split.train_labels) + len(split.test_labels) == 1797
    assert float(split.train_images.min()) >= 0.0 and float(split.train_images.max()) <= 1.0


@pytest.mark.parametrize(("per_class", "classes"), [(4, 3), (7, 5), (50, 2)])
def test_batches_are_class_balanced(per_class, classes):
    labels = torch.tensor([0] * 20 + [1] * 30 + [2] * 5 + [3] * 12 + [4] * 9)
    sampler = ClassBalancedBatches(labels, per_class, classes, seed=1)
    batches = list(sampler)
    assert len(batches) == len(sampler) == -(-len(labels) // (per_class * classes))
    for batch in batches:
        counts = torch.bincount(labels[batch])
        assert sorted(counts[counts > 0].tolist()) == [per_class] * classes


def test_take_runs_through_epochs():
    labels = torch.arange(4).repeat_interleave(5)
    batches = ClassBalancedBatches(labels, 5, 4).take(7)
    assert len(batches) == 7


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"per_class": 0}, "per_class must be a positive integer"),
        ({"per_class": 2, "classes_per_batch": 9}, "at most the 3 classes present; got 9"),
        ({"per_class": 2, "classes_per_batch": 0}, "classes_per_batch must be a positive integer"),
        ({"labels": torch.zeros(5), "per_class": 2}, "labels must have an integer dtype"),
    ],
)
def test_sampler_errors(kwargs, message):
    arguments = {"labels": torch.tensor([0, 0, 1, 1, 2, 2]), **kwargs}
    with pytest.raises(GradlabError, match=message):
        ClassBalancedBatches(**arguments)


def test_seen_classes_error():
    with pytest.raises(GradlabError, match=r"seen_classes must be a non-empty subset of 0\.\.9"):
        load_digits_split(seen_classes=(3, 11))
