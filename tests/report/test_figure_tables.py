"""draw_figures: every entry of a figure table computed with the quick flag as given, its
results written as JSON and handed to its plot with the PNG path, in a folder it creates."""

from __future__ import annotations

import json

import pytest

from gradlab.report.figure_tables import (
    LOSS_FIGURES,
    OPERATING_REGION_FIGURES,
    P_VS_BATCH_SIZE_10_CLASSES,
    TIE_AWARE_FIGURES,
    draw_figures,
)


@pytest.mark.parametrize("quick", [True, False])
def test_each_entry_is_computed_saved_and_plotted(tmp_path, quick):
    calls = []

    def compute(name):
        return lambda flag: {"name": name, "quick": flag, "values": [0.5, 0.25]}

    def plot(results, path):
        calls.append((results, path))
        path.write_bytes(b"png")

    table = {"first": (compute("first"), plot), "second": (compute("second"), plot)}
    folder = tmp_path / "not" / "there"  # parents are created too
    results = draw_figures(table, folder, quick)
    expected = {name: {"name": name, "quick": quick, "values": [0.5, 0.25]} for name in table}
    assert results == expected
    for name in table:
        assert json.loads((folder / f"{name}.json").read_text()) == expected[name]
    assert calls == [
        (expected["first"], folder / "first.png"),
        (expected["second"], folder / "second.png"),
    ]
    # drawing again into the same folder overwrites
    assert draw_figures(table, folder, quick) == expected
    assert sorted(p.name for p in folder.iterdir()) == [
        "first.json",
        "first.png",
        "second.json",
        "second.png",
    ]


def test_the_tables_name_disjoint_figures():
    tables = [OPERATING_REGION_FIGURES, P_VS_BATCH_SIZE_10_CLASSES, TIE_AWARE_FIGURES, LOSS_FIGURES]
    names = [name for table in tables for name in table]
    assert len(names) == len(set(names))
    assert all(callable(c) and callable(p) for table in tables for c, p in table.values())
