"""Citations: a title gets its final full stop once, a claim of your own keeps its own key."""

import pytest

from gradlab.symbolic.seeds import SEEDS, Seed, citation


def _seed(title: str) -> Seed:
    return Seed("k", "Doe & Roe", title, "NeurIPS", "2031", "appendix", "test")


@pytest.mark.parametrize(
    ("title", "printed"),
    [("Ranking X", "Ranking X."), ("Why rank?", "Why rank?"), ("Rank!", "Rank!"),
     ("Rank.", "Rank.")],
)  # fmt: skip
def test_a_title_ends_with_one_punctuation_mark(title, printed):
    assert _seed(title).citation() == f"Doe & Roe (2031). {printed} NeurIPS, appendix."


def test_a_key_that_is_not_a_seed_is_its_own_citation():
    assert citation("my-derivation") == "my-derivation"


def test_every_seed_is_cited_by_its_authors_year_and_title():
    for key, seed in SEEDS.items():
        text = citation(key)
        assert text.startswith(f"{seed.authors} ({seed.year}). {seed.title}")
