"""Bundled real data (scikit-learn's digits), data built from it, image folders on disk,
class-balanced samplers."""

from gradlab.data.digit_strings import DigitStrings, load_digit_strings
from gradlab.data.digits import DigitsSplit, load_digits_split
from gradlab.data.image_folder import (
    ImageFolderSplit,
    eval_transform,
    image_folder,
    train_transform,
)
from gradlab.data.samplers import ClassBalancedBatches, FixedCountBatches

__all__ = [
    "ClassBalancedBatches",
    "DigitStrings",
    "DigitsSplit",
    "FixedCountBatches",
    "ImageFolderSplit",
    "eval_transform",
    "image_folder",
    "load_digit_strings",
    "load_digits_split",
    "train_transform",
]
