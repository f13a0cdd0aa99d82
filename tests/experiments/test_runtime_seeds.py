"""The studies' seeds: at least one, distinct whole numbers >= 0, refused before any work."""

from __future__ import annotations

import numpy as np
import pytest

from gradlab.errors import GradlabError
from gradlab.experiments import digit_scenes, loss_comparison, p_vs_batch_size
from gradlab.experiments.runtime import check_seeds


@pytest.mark.parametrize(("seeds", "expected"), [
    ((0, 2), [0, 2]), ([5], [5]), (range(3), [0, 1, 2]), ((np.int64(4), 0), [4, 0]),
])  # fmt: skip
def test_seeds_come_back_as_a_list_of_ints_in_their_order(seeds, expected):
    checked = check_seeds(seeds)
    assert checked == expected and all(type(seed) is int for seed in checked)


@pytest.mark.parametrize(("seeds", "message"), [
    ((), "seeds must name at least one seed; got none"),
    ([0, 1, 0], "seeds must be distinct whole numbers >= 0; got [0, 1, 0]"),
    ([1.5], "seeds must be distinct whole numbers >= 0; got [1.5]"),
    ([2.0], "seeds must be distinct whole numbers >= 0; got [2.0]"),
    ([-1], "seeds must be distinct whole numbers >= 0; got [-1]"),
    ([True], "seeds must be distinct whole numbers >= 0; got [True]"),
    (["0"], "seeds must be distinct whole numbers >= 0; got ['0']"),
    ([0, 2**32], "seeds must be whole numbers from 0 to 2**32 - 1; got [0, 4294967296]"),
    (3, "seeds must be a sequence of distinct whole numbers >= 0; got 3"),
    ("01", "seeds must be a sequence of distinct whole numbers >= 0; got '01'"),
])  # fmt: skip
def test_bad_seeds_are_refused_with_what_was_given(seeds, message):
    with pytest.raises(GradlabError) as refused:
        check_seeds(seeds)
    assert str(refused.value) == message


def test_the_largest_seed_is_taken():
    assert check_seeds([0, 2**32 - 1]) == [0, 2**32 - 1]


@pytest.mark.parametrize("study", [loss_comparison, p_vs_batch_size, digit_scenes])
def test_each_bundled_study_refuses_a_repeated_seed_before_any_task(monkeypatch, study):
    handed = []
    monkeypatch.setattr(study, "run_tasks", lambda *args, **kwargs: handed.append(args))
    with pytest.raises(GradlabError, match=r"^seeds must be distinct whole numbers >= 0; got "
                       r"\[0, 0\]$"):  # fmt: skip
        study.measure(seeds=(0, 0))
    assert handed == []
