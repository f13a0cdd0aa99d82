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


def test_the_digits_reach_every_level_and_the_file():
    value = {"a": [np.array([1.23456]), (2.34567,)], "b": torch.tensor(3.45678)}
    assert rounded(value, digits=3) == {"a": [[1.23], [2.35]], "b": 3.46}
    assert dumps(1.23456, digits=3) == "1.23"


def test_write_json_rounds_to_the_digits_it_is_given(tmp_path):
    path = write_json(tmp_path / "r.json", 1.23456, digits=3)
    assert path.read_text() == "1.23\n"


def test_other_objects_are_written_as_their_text(tmp_path):
    assert rounded(tmp_path) == str(tmp_path)
    assert rounded({"where": tmp_path / "a"}) == {"where": str(tmp_path / "a")}


def test_the_text_is_indented_by_one_space():
    assert dumps({"a": [1, 2.5]}) == '{\n "a": [\n  1,\n  2.5\n ]\n}'
