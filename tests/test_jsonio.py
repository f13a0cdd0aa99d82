"""Reproducible JSON: last-bit noise disappears, special floats stay standard JSON."""

from __future__ import annotations

import json
import math

import numpy as np
import torch

from gradlab.jsonio import dumps, rounded, write_json


def test_last_bit_noise_of_float64_sums_rounds_away():
    values = np.random.default_rng(0).random(1000)
    forward, backward = math.fsum(values), 0.0
    for value in values[::-1]:
        backward += value
    plain = 0.0
    for value in values:
        plain += value
    assert plain != backward or forward != plain  # the noise this module is for
    assert dumps({"s": plain}) == dumps({"s": backward}) == dumps({"s": forward})


def test_significant_digits_not_decimal_places():
    assert rounded(1.234567890123456e-9) == 1.23456789012e-9
    assert rounded(123456.7890123456) == 123456.789012
    assert rounded(1.234567890123456e-9, digits=3) == 1.23e-9


def test_special_floats_numpy_and_tensors():
    value = {"nan": math.nan, "up": math.inf, "down": -math.inf, "flag": True, "none": None,
             "array": np.array([0.5, 1.5]), "tensor": torch.tensor([2.0]),
             "tuple": (1, 2.5)}  # fmt: skip
    assert rounded(value) == {
        "nan": "NaN", "up": "Infinity", "down": "-Infinity", "flag": True, "none": None,
        "array": [0.5, 1.5], "tensor": [2.0], "tuple": [1, 2.5],
    }  # fmt: skip
    json.loads(dumps(value))  # standard JSON: no bare NaN


def test_write_json_round_trips(tmp_path):
    path = write_json(tmp_path / "r.json", {"a": [1.0, 2.25]})
    assert json.loads(path.read_text()) == {"a": [1.0, 2.25]}
    assert path.read_text().endswith("}\n")
