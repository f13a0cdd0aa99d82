"""MAP@R of the studies (Musgrave et al. 2020, Sec. 3.2) against a plain loop and hand cases."""

import re

import pytest
import torch

from gradlab.errors import GradlabError
from gradlab.experiments.metrics import map_at_r
from tests.reference.retrieval_loops import map_at_r as map_at_r_loop


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_map_at_r_matches_a_loop_with_ties_and_empty_queries(seed):
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randint(0, 4, (10, 9), generator=generator)  # many ties
    scores = scores.double() if seed % 2 else scores.float()
    relevant = torch.rand(10, 9, generator=generator) < 0.35
    relevant[0] = False  # skipped: no relevant candidate
    relevant[1] = False
    relevant[1, seed] = True  # exactly one relevant candidate
    assert map_at_r(scores, relevant) == pytest.approx(map_at_r_loop(scores, relevant), abs=1e-12)


def test_map_at_r_by_hand():
    scores = torch.tensor([[0.9, 0.8, 0.7, 0.1], [0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8]])
    # R = 2: a hit at 1 only -> 1/2; R = 1: ranked last -> 0; R = 0: skipped
    relevant = torch.tensor([[True, False, True, False], [True, False, False, False],
                             [False, False, False, False]])  # fmt: skip
    assert map_at_r(scores, relevant) == 0.25
    # Only the first R positions count: both relevant items in the top 2 give AP 1.
    assert map_at_r(torch.tensor([[0.2, 0.9, 0.8]]), torch.tensor([[False, True, True]])) == 1.0
    # Every candidate relevant: each position holds a hit.
    assert map_at_r(torch.tensor([[0.3, 0.1, 0.2]]), torch.ones(1, 3, dtype=torch.bool)) == 1.0


def test_tied_scores_rank_the_earlier_candidate_first():
    scores = torch.zeros(1, 4)
    assert map_at_r(scores, torch.tensor([[True, False, False, False]])) == 1.0
    assert map_at_r(scores, torch.tensor([[False, True, False, False]])) == 0.0
    assert map_at_r(scores, torch.tensor([[True, False, False, True]])) == 0.5


def test_ties_keep_index_order_in_a_long_row():
    # 120 equal scores (a sort that is not stable reorders ties from about 100 items on): the
    # 10 relevant candidates listed first fill the first 10 positions, so AP@R is 1.
    relevant = torch.zeros(2, 120, dtype=torch.bool)
    relevant[:, :10] = True
    assert map_at_r(torch.zeros(2, 120), relevant) == 1.0


@pytest.mark.parametrize(
    ("scores", "relevant", "named"),
    [
        (torch.zeros(4), torch.zeros(4, dtype=torch.bool), "scores"),
        (torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.bool), "scores"),
        (torch.zeros(2, 3), torch.zeros(2, 3), "relevant"),
        (torch.zeros(2, 3), torch.zeros(3, dtype=torch.bool), "relevant"),
        (
            torch.zeros(2, 3),
            torch.zeros(2, 4, dtype=torch.bool),
            "relevant must have shape (2, 3) (one flag per score); got (2, 4)",
        ),
    ],
)
def test_bad_input_is_named(scores, relevant, named):
    with pytest.raises(GradlabError, match="^" + re.escape(named)):
        map_at_r(scores, relevant)
