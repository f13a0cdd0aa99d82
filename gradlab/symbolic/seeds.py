"""The seed documents as citations (authors, title, venue, year), read from the seed texts.

Authors and titles are the ones printed at the top of each seed file. Where a seed does not print
its venue or year, ``printed`` says so and the value comes from elsewhere (the seeds' README or
another seed's bibliography), named in ``source``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Seed:
    """One seed document."""

    key: str
    authors: str
    title: str
    venue: str
    year: str
    part: str
    source: str

    def citation(self) -> str:
        """``Authors (year). Title. Venue, part.``"""
        title = self.title if self.title[-1] in "?!." else f"{self.title}."
        return f"{self.authors} ({self.year}). {title} {self.venue}, {self.part}."


LESSONS = "Do Lessons from Metric Learning Generalize to Image-Caption Retrieval?"

SEEDS = {
    seed.key: seed
    for seed in (
        Seed("000_e0f8edb24a02ffe3", "Bleeker & de Rijke",
             LESSONS, "ECIR", "2022",
             "appendix A, short version",
             "authors, title: the text's header; venue, year: not printed in the text (the paper's "
             "publication record)"),
        Seed("001_69c8c92ba6da9a08", "Bleeker & de Rijke",
             LESSONS, "ECIR", "2022",
             "appendices A-B, long version",
             "authors, title: the text's header; venue, year: not printed in the text (the paper's "
             "publication record)"),
        Seed("002_9d7d2555864f9baa", "Brown, Xie, Kalogeiton & Zisserman",
             "Smooth-AP: Smoothing the Path Towards Large-Scale Image Retrieval", "ECCV", "2020",
             "supplementary material",
             "authors, title: the text's header; venue, year: reference [1] of Bleeker & de "
             "Rijke (2022)"),
        Seed("003_9ae9ec3ce43e30ad", "He, Cakir, Bargal & Sclaroff",
             "Hashing as Tie-Aware Learning to Rank", "CVPR", "2018", "supplementary material",
             "title: the text's header; authors, venue, year: not printed in the text (the "
             "paper's publication record)"),
        Seed("004_e426679a66883031", "Zhong, Li & Li",
             "Deep Metric Learning with False Positive Probability", "preprint", "n.d.",
             "paper with appendix",
             "authors, title: the text's header; venue and year are not printed in the text"),
    )
}  # fmt: skip


def citation(key: str) -> str:
    """The citation of a seed key, or the key itself for a claim of your own."""
    return SEEDS[key].citation() if key in SEEDS else key


def paper_label(key: str) -> str:
    """A short name of an audited paper for progress lines: authors, year and part.

    Args:
        key: a seed key of :data:`SEEDS`, or the key of a claim of your own (returned as is).

    Returns:
        The first author (``et al.`` for three or more, both names for two), the year and the
        part of the paper.

    Example:
        >>> paper_label("002_9d7d2555864f9baa")
        'Brown et al. 2020, supplementary material'
    """
    if key not in SEEDS:
        return key
    seed = SEEDS[key]
    authors = seed.authors.replace(" & ", ", ").split(", ")
    names = authors[0] + (" et al." if len(authors) > 2 else f" & {authors[1]}"
                          if len(authors) == 2 else "")  # fmt: skip
    return f"{names} {seed.year}, {seed.part}"
