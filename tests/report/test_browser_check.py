"""The browser check sees what a person would: it passes a sound page and catches broken ones."""

from __future__ import annotations

import pytest

from gradlab.errors import GradlabError
from gradlab.report.browser_check import check_report_in_browser, find_chromium
from gradlab.report.html import markdown_to_html
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
        ("- see [the table](#no-such-anchor)", "broken anchor: #no-such-anchor"),
        ("![Lost figure](figures/missing.png)", "image not shown: Lost figure"),
        ("A cell with <div class='x'> in it.", "HTML shown as text: <div class='x'>"),
    ],
)
def test_broken_pages_are_reported(tmp_path, broken, expected):
    result = check_report_in_browser(_report(tmp_path / "bad", SOUND + "\n\n" + broken))
    assert not result.ok
    assert expected in result.problems


def test_a_folder_without_a_page_is_named(tmp_path):
    with pytest.raises(GradlabError, match=r"index\.html"):
        check_report_in_browser(tmp_path)
