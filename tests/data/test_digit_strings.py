"""Digit strings: class counts, disjoint number halves, determinism, the fixed-count sampler."""

import pytest
import torch

from gradlab import GradlabError
from gradlab.data import FixedCountBatches, load_digit_strings
from gradlab.data.digit_strings import CELL


@pytest.fixture(scope="module")
def strings():
    return load_digit_strings(num_digits=3, per_class=4, seed=3)


def test_class_counts_and_disjoint_halves(strings):
    train, test = strings.train_labels, strings.test_labels
    assert set(train.tolist()).isdisjoint(test.tolist())
    assert set(train.tolist()) | set(test.tolist()) == set(range(1000))
    assert len(set(train.tolist())) == len(set(test.tolist())) == 500
    assert torch.bincount(train, minlength=1000)[train.unique()].eq(4).all()
    assert torch.bincount(test, minlength=1000)[test.unique()].eq(4).all()
    assert strings.train_images.shape == (2000, 1, CELL, 3 * CELL)
    assert 0.0 <= float(strings.test_images.min()) and float(strings.test_images.max()) <= 1.0


def test_each_cell_shows_its_digit():
    # Independent check of the rendering: with no noise and no shift, a cell's pixels are an
    # 8 x 8 sklearn image of the labelled digit, found by exhaustive search over all 1797.
    from sklearn.datasets import load_digits

    digits = load_digits()
    references = torch.as_tensor(digits.images, dtype=torch.float32) / 16.0
    data = load_digit_strings(num_digits=2, per_class=4, seed=1, max_shift=0, noise=0.0)
    for index in range(0, len(data.train_labels), 37):
        number = int(data.train_labels[index])
        for position, value in enumerate((number // 10, number % 10)):
            cell = data.train_images[index, 0, 1:9, CELL * position + 1 : CELL * position + 9]
            distance = (references - cell).abs().flatten(1).sum(dim=1)
            assert distance.min() < 1e-5
            assert digits.target[int(distance.argmin())] == value


def test_deterministic_given_seed():
    first = load_digit_strings(num_digits=2, seed=7)
    second = load_digit_strings(num_digits=2, seed=7)
    other = load_digit_strings(num_digits=2, seed=8)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert not torch.equal(first.train_images, other.train_images)


@pytest.mark.parametrize("batch_size", [16, 64, 400, 2000])
def test_fixed_count_batches_hold_four_per_class(strings, batch_size):
    sampler = FixedCountBatches(strings.train_labels, batch_size, per_class=4, seed=0)
    for batch in sampler.take(3):
        labels = strings.train_labels[batch]
        counts = torch.bincount(labels)
        assert len(batch) == batch_size and len(batch.unique()) == batch_size
        assert sorted(counts[counts > 0].tolist()) == [4] * (batch_size // 4)


def test_fixed_count_batches_deterministic_and_epoch_length(strings):
    first = FixedCountBatches(strings.train_labels, 64, seed=5).take(2)
    second = FixedCountBatches(strings.train_labels, 64, seed=5).take(2)
    assert all(torch.equal(a, b) for a, b in zip(first, second, strict=True))
    assert len(list(FixedCountBatches(strings.train_labels, 64))) == -(-2000 // 64)


def test_fixed_count_batches_uneven_classes_draw_distinct_members():
    labels = torch.tensor([0] * 9 + [1] * 4 + [2] * 6)
    for batch in FixedCountBatches(labels, 12, seed=2).take(20):
        assert len(batch.unique()) == 12
        assert torch.bincount(labels[batch]).tolist() == [4, 4, 4]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 10}, "batch_size must be a multiple of per_class=4; got 10"),
        ({"batch_size": 16}, r"at most per_class x classes = 12 \(3 classes present\); got 16"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"labels": torch.tensor([0, 0, 0, 1, 1, 1, 1]), "batch_size": 8}, "class 0 has 3"),
    ],
)
def test_fixed_count_batches_errors(kwargs, message):
    arguments = {"labels": torch.arange(3).repeat_interleave(4), **kwargs}
    with pytest.raises(GradlabError, match=message):
        FixedCountBatches(**arguments)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_digits": 4}, "num_digits must be 2 or 3; got 4"),
        ({"per_class": 3}, "per_class must be at least 4"),
        ({"max_shift": 2}, "max_shift must be 0 or 1; got 2"),
        ({"noise": -0.1}, "noise must be a non-negative finite number; got -0.1"),
    ],
)
def test_digit_strings_errors(kwargs, message):
    with pytest.raises(GradlabError, match=message):
        load_digit_strings(**kwargs)
