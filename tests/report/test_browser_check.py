"""The browser check sees what a person would: it passes a sound page and catches broken ones."""

from __future__ import annotations

import itertools
import math

import pytest

from gradlab.errors import GradlabError
from gradlab.report.browser_check import check_report_in_browser, find_chromium, section_tiles
from gradlab.report.html import markdown_to_html
from tests.helpers.deadline import deadline
from tests.helpers.images import PNG

pytest.importorskip("playwright.sync_api")
if find_chromium() is None:
    pytest.skip("no Chromium on this machine", allow_module_level=True)


def _report(folder, markdown):
    (folder / "figures").mkdir(parents=True, exist_ok=True)
    (folder / "figures" / "a.png").write_bytes(PNG)
    (folder / "index.html").write_text(markdown_to_html(markdown, folder))
    return folder


SOUND = "\n\n".join([
    "# gradlab report", "## Key findings", "- one finding ([Figure 1](#figure-1))",
    "## First section", "![A caption](figures/a.png)", "## Second section", "text",
])  # fmt: skip


@pytest.mark.slow
def test_a_sound_page_passes_with_one_screenshot_per_section(tmp_path):
    result = check_report_in_browser(_report(tmp_path / "ok", SOUND), tmp_path / "shots")
    assert result.ok, result.problems
    assert result.sections == ["Key findings", "First section", "Second section"]
    names = sorted(path.name for path in result.screenshots)
    assert names[-1] == "top.png" and len(names) == 4
    for path in result.screenshots:
        assert path.read_bytes()[:8] == bytes.fromhex("89504e470d0a1a0a")


@pytest.mark.parametrize(
    "broken, expected",
    [
        ("- see [the table](#no-such-anchor)",
         "broken anchor: #no-such-anchor (in section 'Second section')"),
        # each case starts Chromium (seconds): the fast tier checks the first only
        pytest.param("![Lost figure](figures/missing.png)",
                     "image not shown: Lost figure (in section 'Second section')",
                     marks=pytest.mark.slow),
        pytest.param("A cell with <div class='x'> in it.", "HTML shown as text: <div class='x'>",
                     marks=pytest.mark.slow),
    ],
)  # fmt: skip
def test_broken_pages_are_reported(tmp_path, broken, expected):
    result = check_report_in_browser(_report(tmp_path / "bad", SOUND + "\n\n" + broken))
    assert not result.ok
    assert expected in result.problems


def test_a_folder_without_a_page_is_named(tmp_path):
    with pytest.raises(GradlabError, match=r"index\.html"):
        check_report_in_browser(tmp_path)


@pytest.mark.slow  # starts Chromium: seconds
def test_a_broken_image_is_named_with_the_section_it_sits_in(tmp_path):
    markdown = SOUND.replace("## Second section", "![Gone](figures/gone.png)\n\n## Second section")
    result = check_report_in_browser(_report(tmp_path / "bad", markdown))
    assert "image not shown: Gone (in section 'First section')" in result.problems


@pytest.mark.slow  # starts Chromium: seconds
def test_a_tall_section_is_tiled_to_its_end(tmp_path):
    tall = "\n\n".join(f"Paragraph {n} of a long section." for n in range(120))
    markdown = SOUND.replace("## Second section\n\ntext", "## Second section\n\n" + tall)
    result = check_report_in_browser(
        _report(tmp_path / "tall", markdown), tmp_path / "shots", max_tile_height=400
    )
    assert result.ok, result.problems
    last_height, last_tiles = result.section_heights[-1], result.tile_heights[-1]
    assert last_height > 2000  # 120 paragraphs: several tiles of 400 px are needed
    assert len(last_tiles) == math.ceil(last_height / 400)
    assert sum(last_tiles) == pytest.approx(last_height) and max(last_tiles) <= 400
    tiles = sorted(p.name for p in result.screenshots if p.name.startswith("section-03"))
    assert tiles[0] == "section-03-second-section-1.png" and len(tiles) == len(last_tiles)
    for heights, section_height in zip(result.tile_heights, result.section_heights, strict=True):
        assert sum(heights) == pytest.approx(section_height)


@pytest.fixture
def bounded():
    """section_tiles returns in microseconds; one that never ends its loop (which would fill
    the memory with tiles) fails its test after 2 s instead."""
    with deadline(2.0, "section_tiles has not returned after 2 s"):
        yield


@pytest.mark.parametrize(
    "top, height, limit",
    [(0.0, 1.0, 1), (10.0, 2400.0, 2400), (10.0, 2400.5, 2400), (37.5, 9999.0, 700)],
)
def test_tiles_cover_a_section_exactly_without_overlap(top, height, limit, bounded):
    tiles = section_tiles(top, height, limit)
    assert tiles[0][0] == top
    for (y, h), (next_y, _) in itertools.pairwise(tiles):
        assert next_y == y + h and h == limit
    assert tiles[-1][0] + tiles[-1][1] == pytest.approx(top + height)
    assert 0 < tiles[-1][1] <= limit


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "400"])
def test_a_bad_tile_height_is_refused_before_the_browser_starts(tmp_path, bad):
    with pytest.raises(GradlabError, match="max_tile_height"):
        check_report_in_browser(_report(tmp_path / "ok", SOUND), max_tile_height=bad)


WIDE_TABLE = "| " + " | ".join(f"column {n}" for n in range(30)) + " |\n|" + " --- |" * 30 + \
    "\n| " + " | ".join(f"value {n}" for n in range(30)) + " |"


@pytest.mark.slow
def test_a_narrow_window_scrolls_a_wide_table_not_the_page(tmp_path):
    # at 420 px the report's audit tables widened the page to 751 px
    narrow = check_report_in_browser(_report(tmp_path / "table", SOUND + "\n\n" + WIDE_TABLE),
                                     tmp_path / "shots", width=420)  # fmt: skip
    assert narrow.ok, narrow.problems
    unbreakable = SOUND + "\n\n" + "x" * 400  # no table, no code: the page itself widens
    wide = check_report_in_browser(_report(tmp_path / "word", unbreakable), tmp_path / "more",
                                   width=420)  # fmt: skip
    assert [p for p in wide.problems if p.startswith("page wider than the window: ")], wide.problems
