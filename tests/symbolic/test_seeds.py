"""Citations: a title gets its final full stop once, a claim of your own keeps its own key."""

import types

import pytest

from gradlab.symbolic import seeds
from gradlab.symbolic.seeds import SEEDS, Seed, citation, paper_label


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


def test_paper_labels_name_authors_year_and_part(monkeypatch):
    assert paper_label("002_9d7d2555864f9baa") == "Brown et al. 2020, supplementary material"
    assert paper_label("000_e0f8edb24a02ffe3") == ("Bleeker & de Rijke 2022, appendix A, short "
                                                   "version")  # fmt: skip
    assert paper_label("004_e426679a66883031") == "Zhong et al. n.d., paper with appendix"
    monkeypatch.setitem(seeds.SEEDS, "one", types.SimpleNamespace(authors="Knuth", year=1997,
                                                                  part="volume 1"))  # fmt: skip
    assert paper_label("one") == "Knuth 1997, volume 1"
    assert paper_label("no such paper") == "no such paper"
