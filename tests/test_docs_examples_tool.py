"""``make docs`` keeps a committed example figure that another CPU redraws with a few pixels
changed, and replaces one that shows something else (tools/docs_examples.py)."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.image import imsave

from tools.docs_examples import PIXEL_SHARE, same_picture


def _png(path, pixels):
    imsave(path, pixels)
    return path


@pytest.fixture
def picture(tmp_path):
    """A 100 x 100 RGBA picture (10,000 pixels) saved as ``old.png``, and its pixels."""
    pixels = np.zeros((100, 100, 4))
    pixels[..., 3] = 1.0
    pixels[:, 40:60, 0] = 1.0  # a red band
    return _png(tmp_path / "old.png", pixels), pixels


def _changed(pixels, count):
    """The pixels with the first ``count`` pixels of the top row turned white."""
    changed = pixels.copy()
    changed.reshape(-1, 4)[:count, :3] = 1.0
    return changed


def test_the_same_picture_is_kept(picture, tmp_path):
    old, pixels = picture
    assert same_picture(old, _png(tmp_path / "new.png", pixels))


def test_up_to_the_pixel_share_of_changed_pixels_is_the_same_picture(picture, tmp_path):
    old, pixels = picture
    allowed = int(PIXEL_SHARE * pixels.shape[0] * pixels.shape[1])  # 10 of 10,000
    assert same_picture(old, _png(tmp_path / "few.png", _changed(pixels, allowed)))
    assert not same_picture(old, _png(tmp_path / "more.png", _changed(pixels, allowed + 1)))


def test_a_faint_change_of_every_pixel_is_a_new_picture(picture, tmp_path):
    old, pixels = picture
    fainter = pixels.copy()
    fainter[..., 1] = 2 / 255  # every pixel, barely visible
    assert not same_picture(old, _png(tmp_path / "faint.png", fainter))


def test_another_size_or_no_committed_figure_is_a_new_picture(picture, tmp_path):
    old, pixels = picture
    assert not same_picture(old, _png(tmp_path / "wide.png", np.concatenate([pixels] * 2, 1)))
    assert not same_picture(tmp_path / "missing.png", old)
