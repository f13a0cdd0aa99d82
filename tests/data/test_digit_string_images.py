"""Digit-string images show their number: each cell is a pool glyph of the right digit, shifted by
at most one pixel, train glyphs from the train pool only, plus the stated Gaussian noise."""

import itertools
import sys

import pytest
import torch

from gradlab import GradlabError
from gradlab.data import load_digit_strings
from gradlab.data.digit_strings import clear_generated, digit_pools

SEED = 3


@pytest.fixture(autouse=True)
def _render_afresh():
    """Each test renders its images, never reads a set another test generated (the cache
    of load_digit_strings would otherwise hide the renderer from all but the first)."""
    clear_generated()


def _glyphs(image, digits):
    """The ``digits`` cells of a ``[1, 10, 10 * digits]`` image, each ``[10, 10]``."""
    return [image[0, :, 10 * p : 10 * (p + 1)] for p in range(digits)]


def _candidates(pool, shifts):
    padded = torch.nn.functional.pad(pool, (1, 1, 1, 1))
    return {(dy, dx): padded.roll((dy, dx), dims=(1, 2)) for dy, dx in shifts}


def _match(cell, candidates):
    """The shifts under which ``cell`` equals one of the candidate glyphs exactly."""
    found = set()
    for shift, glyphs in candidates.items():
        if (glyphs == cell).all(dim=(1, 2)).any():
            found.add(shift)
    return found


@pytest.mark.slow
@pytest.mark.parametrize(("num_digits", "max_shift"), [(2, 0), (3, 1)])
def test_every_cell_is_a_glyph_of_its_digit_from_its_own_pool(num_digits, max_shift):
    data = load_digit_strings(num_digits, per_class=4, seed=SEED, max_shift=max_shift, noise=0.0)
    train_pools, test_pools = digit_pools(torch.Generator().manual_seed(SEED))
    shifts = list(itertools.product(range(-max_shift, max_shift + 1), repeat=2))
    seen = set()
    for images, labels, own, other in [
        (data.train_images, data.train_labels, train_pools, test_pools),
        (data.test_images, data.test_labels, test_pools, train_pools),
    ]:
        step = 29 if num_digits == 3 else 3
        for image, label in zip(images[::step], labels[::step].tolist(), strict=True):
            digits = [int(d) for d in f"{label:0{num_digits}d}"]
            for cell, digit in zip(_glyphs(image, num_digits), digits, strict=True):
                found = _match(cell, _candidates(own[digit], shifts))
                assert found, f"a cell of {label} is no glyph of {digit} from its pool"
                assert not _match(cell, _candidates(other[digit], [(0, 0)])) or cell.sum() == 0
                seen |= found
    assert seen == set(shifts)


def test_the_noise_has_the_stated_spread_and_pixels_stay_in_the_unit_range():
    clean = load_digit_strings(2, per_class=4, seed=SEED, noise=0.0).train_images
    noisy = load_digit_strings(2, per_class=4, seed=SEED, noise=0.1).train_images
    assert float(noisy.min()) == 0.0 and float(noisy.max()) == 1.0
    middle = (clean > 0.35) & (clean < 0.65)
    spread = float((noisy - clean)[middle].std())
    assert 0.09 < spread < 0.11
    assert abs(float((noisy - clean)[middle].mean())) < 0.01


def test_shifts_spread_evenly_over_the_allowed_offsets():
    data = load_digit_strings(2, per_class=4, seed=SEED, max_shift=1, noise=0.0)
    train_pools, _ = digit_pools(torch.Generator().manual_seed(SEED))
    unshifted = total = 0
    for image, label in zip(data.train_images[::2], data.train_labels[::2].tolist(), strict=True):
        for cell, digit in zip(_glyphs(image, 2), divmod(label, 10), strict=True):
            total += 1
            unshifted += (0, 0) in _match(cell, _candidates(train_pools[digit], [(0, 0)]))
    # nine equally likely offsets: about 1 cell in 9 stays in place
    assert unshifted / total < 0.2


def test_the_noise_is_drawn_from_the_seed_not_the_global_generator():
    from gradlab.data import digit_strings

    images = []
    for global_seed in (1, 2):
        digit_strings.clear_generated()
        torch.manual_seed(global_seed)
        images.append(load_digit_strings(2, per_class=4, seed=SEED).train_images)
    assert torch.equal(*images)


def test_the_documented_defaults():
    assert all(
        torch.equal(a, b)
        for a, b in zip(
            load_digit_strings(2),
            load_digit_strings(2, per_class=8, seed=0, max_shift=1, noise=0.1),
            strict=True,
        )
    )


def test_the_pools_split_each_digit_in_half():
    from sklearn.datasets import load_digits

    counts = torch.bincount(torch.as_tensor(load_digits().target), minlength=10).tolist()
    train, test = digit_pools(torch.Generator().manual_seed(0))
    assert len(train) == len(test) == 10
    assert [len(p) for p in train] == [c // 2 for c in counts]
    assert [len(p) for p in test] == [c - c // 2 for c in counts]


def test_without_scikit_learn_the_pools_name_gradlab_data_and_the_studies_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(GradlabError) as caught:
        digit_pools(torch.Generator().manual_seed(0))
    assert str(caught.value).startswith("gradlab.data needs the sklearn package")
    assert "gradlab-ranking[studies]" in str(caught.value)
