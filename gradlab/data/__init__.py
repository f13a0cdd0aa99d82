"""Bundled real data (scikit-learn's digits), class-balanced samplers, synthetic generators."""

from gradlab.data.digits import DigitsSplit, load_digits_split
from gradlab.data.samplers import ClassBalancedBatches

__all__ = ["ClassBalancedBatches", "DigitsSplit", "load_digits_split"]
