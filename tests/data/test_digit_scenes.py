"""Digit scenes: every caption parses back to its scene, boxes hold their digits, determinism."""

import pytest
import torch

from gradlab import GradlabError
from gradlab.data.digit_scenes import (
    RELATION_PHRASES,
    describes,
    load_digit_scenes,
    parse_caption,
    tokenize,
    vocabulary,
)

OPPOSITE = {"left": "right", "right": "left", "above": "below", "below": "above"}


@pytest.fixture(scope="module")
def scenes():
    return load_digit_scenes(300, split="train", seed=4)


def _objects(scenes, index):
    count = int(scenes.counts[index])
    digits = scenes.digits[index, :count].tolist()
    cells = [tuple(cell) for cell in scenes.cells[index, :count].tolist()]
    return digits, cells


def _holds_in_pixels(box, other, relation):
    """The relation read from the pixel boxes alone (not from the grid cells)."""
    top, left, bottom, right = box
    o_top, o_left, o_bottom, o_right = other
    return {
        "left": right <= o_left,
        "right": left >= o_right,
        "above": bottom <= o_top,
        "below": top >= o_bottom,
    }[relation]


def test_every_caption_round_trips_to_its_scene(scenes):
    for index, captions in enumerate(scenes.captions):
        digits, cells = _objects(scenes, index)
        assert len(captions) == 5 and 2 <= len(digits) <= 4
        for caption in captions:
            parsed = parse_caption(caption)
            assert describes(digits, cells, parsed), caption
            assert sorted([parsed.subject] + [d for _, d in parsed.clauses]) == sorted(digits)


def test_clauses_hold_in_pixel_coordinates(scenes):
    # An independent reading of each caption: find the boxes of its digits by value (scenes
    # with repeated digits are skipped) and check every relation on the pixel boxes.
    checked = 0
    for index, captions in enumerate(scenes.captions):
        digits, _ = _objects(scenes, index)
        if len(set(digits)) < len(digits):
            continue
        boxes = {d: scenes.boxes[index, slot].tolist() for slot, d in enumerate(digits)}
        for caption in captions:
            parsed = parse_caption(caption)
            for relation, other in parsed.clauses:
                assert _holds_in_pixels(boxes[parsed.subject], boxes[other], relation), caption
                checked += 1
    assert checked > 1000


def test_a_wrong_relation_or_digit_does_not_describe_the_scene(scenes):
    for index, captions in enumerate(scenes.captions[:100]):
        digits, cells = _objects(scenes, index)
        parsed = parse_caption(captions[0])
        relation, digit = parsed.clauses[0]
        flipped = parsed._replace(clauses=((OPPOSITE[relation], digit), *parsed.clauses[1:]))
        missing = parsed._replace(clauses=parsed.clauses[1:])
        wrong = parsed._replace(subject=(parsed.subject + 1) % 10)
        if len(set(digits)) == len(digits):
            assert not describes(digits, cells, flipped)
            assert not describes(digits, cells, wrong)
        assert not describes(digits, cells, missing)


def test_boxes_hold_their_digits():
    from sklearn.datasets import load_digits

    digits = load_digits()
    references = torch.as_tensor(digits.images, dtype=torch.float32) / 16.0
    scenes = load_digit_scenes(40, split="test", seed=2, noise=0.0)
    for index in range(40):
        for slot in range(int(scenes.counts[index])):
            top, left, bottom, right = scenes.boxes[index, slot].tolist()
            crop = scenes.images[index, 0, top:bottom, left:right]
            distance = (references - crop).abs().flatten(1).sum(dim=1)
            assert distance.min() < 1e-5
            assert digits.target[int(distance.argmin())] == int(scenes.digits[index, slot])


def test_deterministic_and_splits_differ():
    first, second = load_digit_scenes(20, seed=9), load_digit_scenes(20, seed=9)
    assert torch.equal(first.images, second.images) and first.captions == second.captions
    test = load_digit_scenes(20, split="test", seed=9)
    assert not torch.equal(first.images, test.images)


def test_tokens_spell_the_captions(scenes):
    words = {index: word for word, index in vocabulary().items()}
    for index in range(0, 300, 17):
        for k, caption in enumerate(scenes.captions[index]):
            ids = [i for i in scenes.tokens[index, k].tolist() if i]
            assert " ".join(words[i] for i in ids) == caption
    assert tokenize([["a one above a two"] * 5]).shape == (1, 5, 5)


def test_every_phrase_parses_to_its_relation():
    for relation, phrases in RELATION_PHRASES.items():
        for phrase in phrases:
            assert parse_caption(f"a one {phrase} a two").clauses == ((relation, 2),)


@pytest.mark.parametrize(
    ("caption", "message"),
    [
        ("a one", "must relate its subject"),
        ("one left of a two", "'a DIGIT' at token 0"),
        ("a ten left of a two", "'ten' where a digit word belongs"),
        ("a one beside a two", "no relation at token 2"),
        ("a one left of a two above a three", "needs ',' or 'and' at token 6"),
    ],
)
def test_parse_errors(caption, message):
    with pytest.raises(GradlabError, match=message):
        parse_caption(caption)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_scenes": 0}, "num_scenes must be a positive integer"),
        ({"num_scenes": 2, "split": "val"}, "split must be 'train' or 'test'; got 'val'"),
        ({"num_scenes": 2, "noise": -1.0}, "noise must be a non-negative finite number"),
    ],
)
def test_scene_errors(kwargs, message):
    with pytest.raises(GradlabError, match=message):
        load_digit_scenes(**kwargs)
