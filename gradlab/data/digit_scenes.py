"""Digit scenes: compositional image-caption retrieval from real handwriting, offline.

A 30 x 30 canvas is a 3 x 3 grid of 10 x 10 cells; a scene puts 2-4 digits (8 x 8 images of
scikit-learn's digits, values drawn independently, repeats allowed) into distinct random cells,
each shifted by up to one pixel, plus Gaussian pixel noise. The ground-truth digit boxes play the
role of the detector regions of VSRN (Bleeker & de Rijke, 2022, appendix B.2).

Captions come from a small grammar over the digits and their spatial relations. A caption
names one digit (the subject) and relates it to every other digit of the scene::

    caption  := ["there is"] "a" DIGIT clause ("," clause)* ["and" clause]
    clause   := RELATION "a" DIGIT
    RELATION := "left of" | "to the left of" | "right of" | "to the right of"
              | "above" | "over" | "below" | "under"

"a seven left of a two , below a four" says the seven's cell is in a column left of the two's
and in a row below the four's. A relation is only used where it holds (left/right compare grid
columns, above/below grid rows). Each image has five paraphrases: the subject changes from
caption to caption, as do the order of the clauses, the relation chosen where two hold, and the
synonyms. :func:`parse_caption` maps a caption back to its structure and :func:`describes` tells
whether a scene satisfies it, so every caption can be checked against its scene.
"""

from __future__ import annotations

import itertools
import random
from typing import NamedTuple

import torch

from gradlab.data.digit_strings import digit_pools
from gradlab.errors import GradlabError
from gradlab.validation import check_positive_int

WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
RELATION_PHRASES = {
    "left": ("left of", "to the left of"),
    "right": ("right of", "to the right of"),
    "above": ("above", "over"),
    "below": ("below", "under"),
}
"""Relation -> its phrases (paraphrases of one another)."""

GRID = 3
CELL = 10
CAPTIONS_PER_IMAGE = 5


class DigitScenes(NamedTuple):
    """A split of digit scenes.

    Attributes:
        images: ``[N, 1, 30, 30]`` float32 in ``[0, 1]``.
        digits: ``[N, 4]`` int64 digit values, ``-1`` after the scene's last object.
        boxes: ``[N, 4, 4]`` int64 ``(top, left, bottom, right)`` of each digit's 8 x 8 box
            (pixel rows/columns, bottom/right exclusive); zeros for padding.
        cells: ``[N, 4, 2]`` int64 ``(row, column)`` grid cell of each object; ``-1`` padding.
        counts: ``[N]`` int64 number of digits (2-4).
        captions: ``N`` lists of five caption strings.
        tokens: ``[N, 5, L]`` int64 token ids of the captions (0 pads), see :func:`vocabulary`.
    """

    images: torch.Tensor
    digits: torch.Tensor
    boxes: torch.Tensor
    cells: torch.Tensor
    counts: torch.Tensor
    captions: list[list[str]]
    tokens: torch.Tensor


class ParsedCaption(NamedTuple):
    """A caption's structure: the subject's digit and ``(relation, digit)`` for each other one."""

    subject: int
    clauses: tuple[tuple[str, int], ...]


def vocabulary() -> dict[str, int]:
    """Token ids of every word the grammar can produce; 0 is padding.

    Example:
        >>> vocab = vocabulary()
        >>> vocab["<pad>"], len(vocab)
        (0, 25)
    """
    words = ["there", "is", "a", ",", "and", *WORDS]
    for phrases in RELATION_PHRASES.values():
        for phrase in phrases:
            words += [w for w in phrase.split() if w not in words]
    return {"<pad>": 0, **{word: index + 1 for index, word in enumerate(words)}}


def holding_relations(cell: tuple[int, int], other: tuple[int, int]) -> list[str]:
    """Relations of the object in ``cell`` to the one in ``other`` (grid row, column).

    Example:
        >>> holding_relations((2, 0), (0, 1))
        ['left', 'below']
    """
    relations = []
    if cell[1] != other[1]:
        relations.append("left" if cell[1] < other[1] else "right")
    if cell[0] != other[0]:
        relations.append("above" if cell[0] < other[0] else "below")
    return relations


def _caption(digits, cells, subject: int, rng: random.Random) -> str:
    others = [i for i in range(len(digits)) if i != subject]
    rng.shuffle(others)
    clauses = []
    for other in others:
        relation = rng.choice(holding_relations(cells[subject], cells[other]))
        phrase = rng.choice(RELATION_PHRASES[relation])
        clauses.append(f"{phrase} a {WORDS[digits[other]]}")
    opening = rng.choice(("", "there is ")) + f"a {WORDS[digits[subject]]}"
    if len(clauses) == 1:
        body = clauses[0]
    else:
        joiner = rng.choice((" , ", " and "))
        body = " , ".join(clauses[:-1]) + joiner + clauses[-1]
    return f"{opening} {body}"


def parse_caption(caption: str) -> ParsedCaption:
    """Map a caption back to its structure; raise on anything outside the grammar.

    Raises:
        GradlabError: the caption does not follow the grammar (the message names the token).

    Example:
        >>> parse_caption("there is a seven left of a two , under a four")
        ParsedCaption(subject=7, clauses=(('left', 2), ('below', 4)))
    """
    tokens = caption.split()
    phrase_to_relation = {
        tuple(phrase.split()): relation
        for relation, phrases in RELATION_PHRASES.items()
        for phrase in phrases
    }
    position = 0

    def expect_digit() -> int:
        nonlocal position
        if tokens[position : position + 1] != ["a"] or position + 1 >= len(tokens):
            raise GradlabError(f"caption must have 'a DIGIT' at token {position}: {caption!r}")
        word = tokens[position + 1]
        if word not in WORDS:
            raise GradlabError(f"caption has {word!r} where a digit word belongs: {caption!r}")
        position += 2
        return WORDS.index(word)

    if tokens[:2] == ["there", "is"]:
        position = 2
    subject = expect_digit()
    clauses = []
    while position < len(tokens):
        if clauses:
            if tokens[position] not in (",", "and"):
                raise GradlabError(f"caption needs ',' or 'and' at token {position}: {caption!r}")
            position += 1
        match = next(
            (
                (phrase, relation)
                for phrase, relation in sorted(phrase_to_relation.items(), key=lambda p: -len(p[0]))
                if tuple(tokens[position : position + len(phrase)]) == phrase
            ),
            None,
        )
        if match is None:
            raise GradlabError(f"caption has no relation at token {position}: {caption!r}")
        position += len(match[0])
        clauses.append((match[1], expect_digit()))
    if not clauses:
        raise GradlabError(f"caption must relate its subject to another digit: {caption!r}")
    return ParsedCaption(subject, tuple(clauses))


def describes(digits: list[int], cells: list[tuple[int, int]], parsed: ParsedCaption) -> bool:
    """Whether a scene (its digits and grid cells) satisfies a parsed caption.

    The caption must mention every object exactly once: some one-to-one assignment of its
    mentions to the scene's objects must match every digit and make every relation hold.

    Example:
        >>> describes([7, 2], [(0, 0), (0, 2)], parse_caption("a two right of a seven"))
        True
        >>> describes([7, 2], [(0, 0), (0, 2)], parse_caption("a two left of a seven"))
        False
    """
    mentions = [parsed.subject] + [digit for _, digit in parsed.clauses]
    if len(mentions) != len(digits):
        return False
    for order in itertools.permutations(range(len(digits))):
        if any(digits[o] != m for o, m in zip(order, mentions, strict=True)):
            continue
        subject_cell = cells[order[0]]
        if all(
            relation in holding_relations(subject_cell, cells[o])
            for o, (relation, _) in zip(order[1:], parsed.clauses, strict=True)
        ):
            return True
    return False


def load_digit_scenes(
    num_scenes: int, split: str = "train", seed: int = 0, noise: float = 0.1
) -> DigitScenes:
    """Generate ``num_scenes`` scenes with five captions each: deterministic given the seed.

    Args:
        num_scenes: how many images.
        split: ``"train"`` or ``"test"``: the two draw their digits from disjoint halves of
            scikit-learn's digit images (so test scenes show unseen handwriting).
        seed: fixes the image halves, the scenes, the captions and the noise (use the same seed
            for a train and a test split of one data set).
        noise: standard deviation of the Gaussian pixel noise.

    Raises:
        GradlabError: a non-positive ``num_scenes``, an unknown ``split``, negative ``noise``.

    Example:
        >>> scenes = load_digit_scenes(3, seed=0)
        >>> tuple(scenes.images.shape), len(scenes.captions[0])
        ((3, 1, 30, 30), 5)
    """
    check_positive_int("num_scenes", num_scenes)
    if split not in ("train", "test"):
        raise GradlabError(f"split must be 'train' or 'test'; got {split!r}")
    if not isinstance(noise, (int, float)) or not 0.0 <= noise < float("inf"):
        raise GradlabError(f"noise must be a non-negative finite number; got {noise!r}")
    generator = torch.Generator().manual_seed(seed)
    pools = digit_pools(generator)[0 if split == "train" else 1]
    offset = 0 if split == "train" else 1_000_003
    generator.manual_seed(seed * 2 + offset)
    rng = random.Random(seed * 2 + offset)
    images = torch.zeros(num_scenes, 1, GRID * CELL, GRID * CELL)
    digits = torch.full((num_scenes, 4), -1, dtype=torch.int64)
    boxes = torch.zeros(num_scenes, 4, 4, dtype=torch.int64)
    cells = torch.full((num_scenes, 4, 2), -1, dtype=torch.int64)
    counts = torch.zeros(num_scenes, dtype=torch.int64)
    captions: list[list[str]] = []
    for index in range(num_scenes):
        count = rng.randint(2, 4)
        chosen = rng.sample(range(GRID * GRID), count)
        values = [rng.randrange(10) for _ in range(count)]
        scene_cells = [(c // GRID, c % GRID) for c in chosen]
        for slot, (value, (row, column)) in enumerate(zip(values, scene_cells, strict=True)):
            pool = pools[value]
            picture = pool[int(torch.randint(len(pool), (1,), generator=generator))]
            top = row * CELL + 1 + rng.randint(-1, 1)
            left = column * CELL + 1 + rng.randint(-1, 1)
            images[index, 0, top : top + 8, left : left + 8] = picture
            boxes[index, slot] = torch.tensor([top, left, top + 8, left + 8])
            cells[index, slot] = torch.tensor([row, column])
            digits[index, slot] = value
        counts[index] = count
        subjects = list(range(count))
        rng.shuffle(subjects)
        captions.append(
            [_caption(values, scene_cells, subjects[k % count], rng) for k in range(5)]
        )
    images += noise * torch.randn(images.shape, generator=generator)
    return DigitScenes(
        images.clamp_(0.0, 1.0), digits, boxes, cells, counts, captions, tokenize(captions)
    )


def tokenize(captions: list[list[str]]) -> torch.Tensor:
    """``[N, 5, L]`` token ids (0 pads) of ``N`` lists of captions; ``L`` is the longest caption.

    Example:
        >>> tokenize([["a one left of a two"] * 5])[0, 0].tolist()
        [3, 7, 16, 17, 3, 8]
    """
    vocab = vocabulary()
    length = max(len(c.split()) for per_image in captions for c in per_image)
    tokens = torch.zeros(len(captions), CAPTIONS_PER_IMAGE, length, dtype=torch.int64)
    for index, per_image in enumerate(captions):
        for k, caption in enumerate(per_image):
            ids = [vocab[word] for word in caption.split()]
            tokens[index, k, : len(ids)] = torch.tensor(ids)
    return tokens
