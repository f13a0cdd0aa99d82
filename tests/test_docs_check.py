"""tools/docs_check.py sees what a reader would: a missing figure and a broken link are found,
the intact site has no problem (needs Playwright and a Chromium, as the report's check does)."""

from __future__ import annotations

import shutil

import pytest

from gradlab.report.browser_check import find_chromium
from tools.docs_check import build_site, check_site, nav_pages

pytest.importorskip("playwright.sync_api")
if find_chromium() is None:
    pytest.skip("no Chromium on this machine", allow_module_level=True)

pytestmark = pytest.mark.slow  # a site build and a browser
PAGES = [("Home", ""), ("Benchmarks", "benchmarks/")]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("site")
    completed = build_site(folder)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return folder


def test_the_nav_pages_start_at_home_and_name_every_section():
    pages = nav_pages()
    assert pages[0] == ("Home", "")
    assert ("Benchmarks", "benchmarks/") in pages and ("gradlab", "api/gradlab/") in pages


def test_the_intact_site_has_no_problem_and_a_screenshot_per_page(built, tmp_path):
    problems, shots = check_site(built, tmp_path, pages=PAGES)
    assert problems == []
    assert [shot.name for shot in shots] == ["01-home.png", "02-benchmarks.png"]
    assert all(shot.stat().st_size > 10_000 for shot in shots)


def test_a_missing_figure_and_a_broken_link_are_reported(built, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(built, site)
    (site / "figures" / "loss_cost.png").unlink()
    index = site / "index.html"
    index.write_text(index.read_text().replace('href="losses/"', 'href="nowhere/"', 1))
    problems, _ = check_site(site, tmp_path / "shots", pages=PAGES)
    assert any("image not shown" in p and p.startswith("benchmarks/") for p in problems)
    assert "index: broken link nowhere/" in problems
