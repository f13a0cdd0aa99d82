"""Class-balanced samplers: defaults, small classes, independent draws, epochs and bad input."""

import pytest
import torch

from gradlab import GradlabError
from gradlab.data import ClassBalancedBatches, FixedCountBatches


def _same(first, second):
    if len(first) != len(second):
        return False
    return all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.mark.parametrize(
    "make",
    [
        lambda labels, **seed: ClassBalancedBatches(labels, 2, 2, **seed),
        lambda labels, **seed: FixedCountBatches(labels, 4, per_class=2, **seed),
    ],
)
def test_the_documented_default_seed_is_zero(make):
    labels = torch.arange(4).repeat_interleave(6)
    assert _same(make(labels).take(5), make(labels, seed=0).take(5))
    assert not _same(make(labels).take(5), make(labels, seed=1).take(5))


def test_without_classes_per_batch_every_batch_holds_every_class():
    labels = torch.tensor([0] * 4 + [1] * 7 + [2] * 3)
    for batch in ClassBalancedBatches(labels, per_class=2, seed=3).take(6):
        assert sorted(labels[batch].tolist()) == [0, 0, 1, 1, 2, 2]


def test_a_class_of_exactly_per_class_items_gives_each_item_once():
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    for batch in ClassBalancedBatches(labels, per_class=3, seed=4).take(20):
        assert sorted(batch.tolist()) == [0, 1, 2, 3, 4, 5]


def test_a_class_smaller_than_per_class_repeats_items_under_the_seed():
    labels = torch.tensor([0, 1, 1, 1, 1, 1, 2, 2])
    first = ClassBalancedBatches(labels, per_class=4, seed=6).take(8)
    again = ClassBalancedBatches(labels, per_class=4, seed=6).take(8)
    assert _same(first, again)
    for batch in first:
        assert torch.bincount(labels[batch]).tolist() == [4, 4, 4]
        assert (batch[labels[batch] == 0] == 0).all()


def test_batches_taken_in_whole_epochs_continue_where_they_stopped():
    labels = torch.arange(3).repeat_interleave(4)
    sampler = ClassBalancedBatches(labels, per_class=2, classes_per_batch=2, seed=2)
    epoch = len(sampler)
    assert epoch == 3
    pieces = sampler.take(epoch) + sampler.take(epoch)
    whole = ClassBalancedBatches(labels, per_class=2, classes_per_batch=2, seed=2).take(2 * epoch)
    assert _same(pieces, whole)


def test_fixed_count_classes_draw_their_items_independently():
    # item i has class i % 3 and slot i // 3 in its class; a batch of 3 classes x 2 items
    labels = torch.arange(3).repeat(6)
    differ = 0
    for batch in FixedCountBatches(labels, 6, per_class=2, seed=1).take(30):
        slots = {}
        for item in batch.tolist():
            slots.setdefault(item % 3, set()).add(item // 3)
        differ += len({frozenset(s) for s in slots.values()}) > 1
    # 15 slot pairs per class: all three classes drawing the same pair has probability 1/225
    assert differ >= 25


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ClassBalancedBatches(torch.arange(4), 1).take(0),
         "count must be a positive integer"),
        (lambda: FixedCountBatches(torch.arange(4).repeat(4), 4).take(0),
         "count must be a positive integer"),
        (lambda: FixedCountBatches(torch.zeros(8), 4), "labels must have an integer dtype"),
        (lambda: FixedCountBatches(torch.arange(4).repeat(4).to(torch.uint32), 4),
         r"labels must have a signed integer dtype or uint8; got torch.uint32 .* pass "
         r"labels.long\(\)$"),
        (lambda: ClassBalancedBatches(torch.arange(4).to(torch.uint16), 1),
         r"labels must have a signed integer dtype or uint8; got torch.uint16 .* pass "
         r"labels.long\(\)$"),
        (lambda: FixedCountBatches(torch.arange(4).repeat(4), 4, per_class=0),
         "per_class must be a positive integer"),
    ],
)  # fmt: skip
def test_bad_input_names_the_argument(make, message):
    with pytest.raises(GradlabError, match=message):
        make()
