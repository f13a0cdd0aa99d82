"""The words a reader sees in the committed figures: every title, label, legend entry, tick label
and annotation names a paper by its authors, never by the project's own keys for it."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.text import Text

from gradlab.report.figure_tables import (
    LOSS_FIGURES,
    OPERATING_REGION_FIGURES,
    P_VS_BATCH_SIZE_10_CLASSES,
    TIE_AWARE_FIGURES,
)
from tests.helpers.figure_layout import captured_figures

FIGURES = Path(__file__).resolve().parents[2] / "figures"
TABLES = {**OPERATING_REGION_FIGURES, **P_VS_BATCH_SIZE_10_CLASSES, **TIE_AWARE_FIGURES,
          **LOSS_FIGURES}  # fmt: skip
PAPER_AS_SEED = re.compile(r"\bseeds? `?00[0-4]|\bseed(?:'s)? (?:Eq|paper|definition)",
                           re.IGNORECASE)  # fmt: skip
"""The project's internal name of an audited paper (``seed 002``, ``seed Eq. 1``); a random seed
(``3 seeds``, ``the seed spread``) is not one."""


def test_the_pattern_finds_a_paper_called_a_seed_but_not_random_seeds():
    for text in ("seed 002: tau = 0.01", "untrained: P, seed Eq. 1", "the seed's definition"):
        assert PAPER_AS_SEED.search(text), text
    for text in ("3 seeds (faint: each seed)", "within the seed spread", "Brown et al., Eq. 1"):
        assert not PAPER_AS_SEED.search(text), text


def _words(figure) -> list[str]:
    return [t.get_text() for t in figure.findobj(Text) if t.get_text().strip()]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TABLES))
def test_a_committed_figure_names_papers_not_internal_keys(monkeypatch, tmp_path, name):
    _, plot = TABLES[name]
    with captured_figures(monkeypatch, importlib.import_module(plot.__module__)) as figures:
        plot(FIGURES / f"{name}.json", tmp_path / f"{name}.png")
    words = [w for figure in figures for w in _words(figure)]
    for figure in figures:
        plt.close(figure)
    assert words
    assert [w for w in words if PAPER_AS_SEED.search(w)] == []
