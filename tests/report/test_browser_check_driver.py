"""The browser check's reading of what the browser reports, with a stand-in for Playwright.

The stand-in plays a browser that has loaded a page: it answers the page probe with the anchors,
images, sections and stray tags given to it, sends the console messages and failed requests given
to it, and writes a PNG for each screenshot it is asked for. The tests check what a reader of the
check's output relies on: each problem named with the section it sits in, one screenshot per
section (tiles for a tall one) that covers it to its end, the browser closed whatever happens,
and the command's exit code. A real Chromium renders real pages in test_browser_check.py (seconds
per start, so not here).
"""

from __future__ import annotations

import math
import os
import sys
import types
from pathlib import Path

import pytest

from gradlab.errors import GradlabError
from gradlab.extras import install_hint
from gradlab.report import browser_check
from gradlab.report.browser_check import (
    CHROMIUM_ARGS,
    CHROMIUM_NAMES,
    check_report_in_browser,
    find_chromium,
)
from tests.helpers.images import PNG


class _Message:
    def __init__(self, kind, text):
        self.type, self.text = kind, text


class _Request:
    def __init__(self, url):
        self.url = url


class _Page:
    def __init__(self, browser, viewport):
        self.browser, self.viewport = browser, viewport
        self.handlers = {}
        self.shots = []
        self.visited = None

    def on(self, event, handler):
        self.handlers.setdefault(event, []).append(handler)

    def goto(self, url, wait_until=None):
        # Playwright accepts these four only
        assert wait_until in {"load", "domcontentloaded", "networkidle", "commit"}, wait_until
        self.visited = (url, wait_until)
        for kind, text in self.browser.console:
            for handler in self.handlers.get("console", []):
                handler(_Message(kind, text))
        for url_failed in self.browser.failed:
            for handler in self.handlers.get("requestfailed", []):
                handler(_Request(url_failed))

    def evaluate(self, script):
        assert isinstance(script, str) and script.startswith("() =>"), script  # a JS function
        if self.browser.fail_on_evaluate:
            raise RuntimeError("the page crashed")
        return self.browser.probe

    def screenshot(self, path, full_page=False, clip=None):
        Path(path).write_bytes(PNG)
        self.shots.append({"name": Path(path).name, "full_page": full_page, "clip": clip})


class _Browser:
    """Chromium as Playwright drives it, on a page whose probe and events are given."""

    def __init__(self, probe, console=(), failed=(), fail_on_evaluate=False):
        self.probe, self.console, self.failed = probe, list(console), list(failed)
        self.fail_on_evaluate = fail_on_evaluate
        self.launched = None
        self.pages = []
        self.closed = False

    # playwright.sync_api.sync_playwright() -> context manager -> .chromium.launch(...)
    def sync_playwright(self):
        browser = self

        class _Context:
            def __enter__(self):
                return types.SimpleNamespace(chromium=types.SimpleNamespace(launch=browser.launch))

            def __exit__(self, *exc):
                return False

        return _Context()

    def launch(self, executable_path, args):
        self.launched = {"executable_path": executable_path, "args": list(args)}
        return self

    def new_page(self, viewport):
        page = _Page(self, viewport)
        self.pages.append(page)
        return page

    def close(self):
        self.closed = True


def _probe(sections, height, width=1280, anchors=(), images=(), raw_tags=()):
    return {
        "sections": [{"id": i, "title": t, "top": top} for i, t, top in sections],
        "height": height,
        "width": width,
        "anchors": [{"what": w, "top": top} for w, top in anchors],
        "images": [{"what": w, "top": top} for w, top in images],
        "rawTags": list(raw_tags),
    }


@pytest.fixture
def report(tmp_path):
    folder = tmp_path / "report"
    folder.mkdir()
    (folder / "index.html").write_text("<!DOCTYPE html><html><body>page</body></html>")
    return folder


@pytest.fixture
def chromium(tmp_path):
    executable = tmp_path / "bin" / "my-chromium"
    executable.parent.mkdir()
    executable.write_text("#!/bin/sh\n")
    return executable


def _install(monkeypatch, browser):
    module = types.ModuleType("playwright.sync_api")
    module.sync_playwright = browser.sync_playwright
    monkeypatch.setitem(sys.modules, "playwright.sync_api", module)
    return browser


THREE = [("key-findings", "Key findings", 100.0), ("audit", "Audit", 700.0),
         ("", "Untitled one", 1500.0)]  # fmt: skip


def test_each_problem_is_named_with_the_section_it_sits_in(monkeypatch, report, chromium):
    probe = _probe(
        THREE, height=2000.0,
        anchors=[("#nowhere", 40.0), ("#gone", 100.0), ("#lost", 699.5), ("#far", 1999.0)],
        images=[("Figure 3", 700.0), ("data:image/png;base64,AAAA", 1600.0)],
        raw_tags=["<div class='x'>", "</span>"],
    )  # fmt: skip
    _install(monkeypatch, _Browser(probe))
    result = check_report_in_browser(report, chromium=chromium)
    assert result.problems == [
        "broken anchor: #nowhere (above the first section)",
        "broken anchor: #gone (in section 'Key findings')",  # at its heading: inside it
        "broken anchor: #lost (in section 'Key findings')",
        "broken anchor: #far (in section 'Untitled one')",
        "image not shown: Figure 3 (in section 'Audit')",
        "image not shown: data:image/png;base64,AAAA (in section 'Untitled one')",
        "HTML shown as text: <div class='x'>",
        "HTML shown as text: </span>",
    ]
    assert not result.ok


def test_console_errors_and_failed_requests_are_problems_other_messages_not(
    monkeypatch, report, chromium
):
    long_url = "file:///" + "x" * 200
    browser = _install(monkeypatch, _Browser(
        _probe(THREE, height=2000.0),
        console=[("warning", "deprecated"), ("error", "Uncaught TypeError: f"), ("log", "hi")],
        failed=[long_url],
    ))  # fmt: skip
    result = check_report_in_browser(report, chromium=chromium)
    assert result.problems == ["console error: Uncaught TypeError: f",
                               f"failed request: {long_url[:120]}"]  # fmt: skip
    assert len(result.problems[1]) == len("failed request: ") + 120
    assert browser.closed


def test_a_sound_page_is_ok_and_every_section_is_one_screenshot_to_its_end(
    monkeypatch, report, chromium, tmp_path
):
    browser = _install(monkeypatch, _Browser(_probe(THREE, height=2000.0, width=1333)))
    shots = tmp_path / "new" / "shots"
    # the screenshots' clips take the page's own width (1333), here within the window's
    result = check_report_in_browser(report, shots, chromium=chromium, width=1400, height=640)
    assert result.ok and result.problems == []
    assert browser.launched == {"executable_path": str(chromium), "args": CHROMIUM_ARGS}
    (page,) = browser.pages
    assert page.viewport == {"width": 1400, "height": 640}
    assert page.visited == ((report / "index.html").resolve().as_uri(), "load")
    names = ["top.png", "section-01-key-findings.png", "section-02-audit.png",
             "section-03-untitled.png"]  # fmt: skip
    assert [path.name for path in result.screenshots] == names
    assert all(path.parent == shots and path.read_bytes() == PNG for path in result.screenshots)
    # the top screen as the viewport shows it; each section clipped from the whole page
    assert page.shots[0] == {"name": "top.png", "full_page": False, "clip": None}
    tops, ends = [100.0, 700.0, 1500.0], [700.0, 1500.0, 2000.0]
    for shot, top, end in zip(page.shots[1:], tops, ends, strict=True):
        assert shot["full_page"] is True
        assert shot["clip"] == {"x": 0, "y": top, "width": 1333, "height": end - top}
    assert result.sections == ["Key findings", "Audit", "Untitled one"]
    assert result.section_heights == [end - top for top, end in zip(tops, ends, strict=True)]
    assert result.tile_heights == [[end - top] for top, end in zip(tops, ends, strict=True)]
    assert browser.closed
    # a second check writes over the first one's screenshots
    again = check_report_in_browser(report, shots, chromium=chromium)
    assert [path.name for path in again.screenshots] == names


def test_a_tall_section_is_saved_as_numbered_tiles_that_cover_it(monkeypatch, report, chromium):
    sections = [("short", "Short", 0.0), ("tall", "Tall", 300.0)]
    browser = _install(monkeypatch, _Browser(_probe(sections, height=1350.0)))
    result = check_report_in_browser(report, chromium=chromium, max_tile_height=400)
    assert [path.name for path in result.screenshots] == [
        "top.png", "section-01-short.png",
        "section-02-tall-1.png", "section-02-tall-2.png", "section-02-tall-3.png",
    ]  # fmt: skip
    assert all(path.parent == report / "screenshots" for path in result.screenshots)
    clips = [shot["clip"] for shot in browser.pages[0].shots[1:]]
    assert [(clip["y"], clip["height"]) for clip in clips] == [
        (0.0, 300.0), (300.0, 400.0), (700.0, 400.0), (1100.0, 250.0),
    ]  # fmt: skip
    assert result.section_heights == [300.0, 1050.0]
    assert result.tile_heights == [[300.0], [400.0, 400.0, 250.0]]
    assert len(result.tile_heights[1]) == math.ceil(1050.0 / 400)


def test_a_section_of_no_height_still_gets_one_pixel(monkeypatch, report, chromium):
    sections = [("a", "A", 500.0), ("b", "B", 500.0)]
    _install(monkeypatch, _Browser(_probe(sections, height=500.0)))
    result = check_report_in_browser(report, chromium=chromium)
    assert result.section_heights == [1.0, 1.0]
    assert result.tile_heights == [[1.0], [1.0]]


def test_the_browser_is_closed_when_the_page_fails(monkeypatch, report, chromium):
    browser = _install(monkeypatch, _Browser(_probe(THREE, 2000.0), fail_on_evaluate=True))
    with pytest.raises(RuntimeError, match="crashed"):
        check_report_in_browser(report, chromium=chromium)
    assert browser.closed


def test_without_playwright_the_extra_is_named(monkeypatch, report, chromium):
    monkeypatch.setitem(sys.modules, "playwright.sync_api", None)
    with pytest.raises(GradlabError) as raised:
        check_report_in_browser(report, chromium=chromium)
    assert str(raised.value) == (
        f"the browser check needs Playwright: {install_hint('browser')}"
    )
    assert not (report / "screenshots").exists()


def test_a_browser_that_is_not_there_is_named(monkeypatch, report, tmp_path):
    missing = tmp_path / "no-such-chromium"
    with pytest.raises(GradlabError) as raised:
        check_report_in_browser(report, chromium=missing)
    assert str(raised.value) == (
        f"chromium: no browser found (tried {missing}); install Debian's chromium or set "
        "GRADLAB_CHROMIUM"
    )
    monkeypatch.delenv("GRADLAB_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(GradlabError) as raised:
        check_report_in_browser(report)
    assert f"(tried {', '.join(CHROMIUM_NAMES)})" in str(raised.value)
    assert not (report / "screenshots").exists()


def _executable(folder, name):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def test_find_chromium_takes_the_argument_then_the_variable_then_path_in_order(
    monkeypatch, tmp_path
):
    late, early = tmp_path / "late", tmp_path / "early"
    _executable(late, CHROMIUM_NAMES[0])
    _executable(early, CHROMIUM_NAMES[-1])
    monkeypatch.setenv("PATH", os.pathsep.join([str(early), str(late)]))
    monkeypatch.delenv("GRADLAB_CHROMIUM", raising=False)
    # by name, in CHROMIUM_NAMES' order, not by the folder that comes first on PATH
    assert find_chromium() == late / CHROMIUM_NAMES[0]
    (late / CHROMIUM_NAMES[0]).unlink()
    assert find_chromium() == early / CHROMIUM_NAMES[-1]
    monkeypatch.setenv("GRADLAB_CHROMIUM", "/opt/from-variable")
    assert find_chromium() == Path("/opt/from-variable")
    assert find_chromium("/opt/from-argument") == Path("/opt/from-argument")
    monkeypatch.setenv("GRADLAB_CHROMIUM", "")
    assert find_chromium() == early / CHROMIUM_NAMES[-1]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_chromium() is None


def test_the_command_exit_codes_and_lines(monkeypatch, report, chromium, tmp_path, capsys):
    monkeypatch.delenv("GRADLAB_CHROMIUM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # only --chromium names a browser
    _install(monkeypatch, _Browser(_probe(THREE, 2000.0)))
    shots = tmp_path / "shots"
    argv = [str(report), "--screenshots", str(shots), "--chromium", str(chromium)]
    assert browser_check.main(argv) == 0
    out = capsys.readouterr().out
    assert out == f"4 screenshots (3 sections) in {shots}; 0 problems\n"

    _install(monkeypatch, _Browser(_probe(THREE, 2000.0, anchors=[("#x", 800.0)])))
    assert browser_check.main([str(report), "--chromium", str(chromium)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "problem: broken anchor: #x (in section 'Audit')",
        f"4 screenshots (3 sections) in {report / 'screenshots'}; 1 problems",
    ]

    assert browser_check.main([str(tmp_path / "no-report"), "--chromium", str(chromium)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("gradlab: report_dir must hold an index.html")
    assert captured.err.count("\n") == 1


def test_the_command_help_says_what_it_checks(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "400")  # one line per option
    with pytest.raises(SystemExit) as stop:
        browser_check.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m gradlab.report.browser_check")
    assert "Look at the report as a person would" in out
    assert "default: REPORT_DIR/screenshots" in out
    text = " ".join(out.split())
    assert "report_dir a folder written by gradlab report options:" in text
    assert text.endswith(
        "--screenshots SCREENSHOTS default: REPORT_DIR/screenshots "
        "--chromium CHROMIUM browser executable (default: found on PATH)"
    )


def test_the_defaults_are_a_1280_by_900_viewport_and_tiles_of_2400_pixels(
    monkeypatch, report, chromium
):
    sections = [("exact", "Exact", 0.0), ("over", "Over", 2400.0)]
    browser = _install(monkeypatch, _Browser(_probe(sections, height=4800.5)))
    result = check_report_in_browser(report, chromium=chromium)
    assert browser.pages[0].viewport == {"width": 1280, "height": 900}
    assert result.tile_heights == [[2400.0], [2400.0, 0.5]]
    assert [path.name for path in result.screenshots] == [
        "top.png", "section-01-exact.png", "section-02-over-1.png", "section-02-over-2.png",
    ]  # fmt: skip


def test_tiles_of_one_pixel_are_allowed(monkeypatch, report, chromium):
    _install(monkeypatch, _Browser(_probe([("a", "A", 10.0)], height=13.0)))
    result = check_report_in_browser(report, chromium=chromium, max_tile_height=1)
    assert result.tile_heights == [[1.0, 1.0, 1.0]]


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "400"])
def test_a_bad_tile_height_is_refused_before_any_browser_starts(monkeypatch, report, chromium,
                                                                bad):  # fmt: skip
    browser = _install(monkeypatch, _Browser(_probe([("a", "A", 10.0)], height=13.0)))
    with pytest.raises(GradlabError) as raised:
        check_report_in_browser(report, chromium=chromium, max_tile_height=bad)
    assert str(raised.value) == (
        f"max_tile_height must be a positive int (CSS pixels); got {bad!r}"
    )
    assert browser.pages == []


def test_a_folder_without_a_page_is_named_with_the_page_it_lacks(tmp_path):
    with pytest.raises(GradlabError) as raised:
        check_report_in_browser(tmp_path)
    page = str(tmp_path / "index.html")
    assert str(raised.value) == f"report_dir must hold an index.html; {page!r} is missing"


def test_a_page_without_sections_gets_the_top_screenshot_only(
    monkeypatch, report, chromium, capsys
):
    _install(monkeypatch, _Browser(_probe([], height=500.0)))
    assert browser_check.main([str(report), "--chromium", str(chromium)]) == 0
    shots = report / "screenshots"
    assert capsys.readouterr().out == f"1 screenshots (0 sections) in {shots}; 0 problems\n"
    assert sorted(path.name for path in shots.iterdir()) == ["top.png"]


def test_the_command_help_is_plain_text_without_backticks(capsys, monkeypatch):
    """--help is read in a terminal, where reST's ``literal`` markup is noise."""
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as stop:
        browser_check.main(["--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert "`" not in out
    assert "render index.html in headless Chromium" in out


@pytest.mark.parametrize(("page_width", "problems"), [
    (1000, []),
    (1001, ["page wider than the window: 1001 CSS pixels at a width of 1000"]),
])  # fmt: skip
def test_a_page_wider_than_its_window_is_a_problem(
    monkeypatch, report, chromium, tmp_path, page_width, problems
):
    _install(monkeypatch, _Browser(_probe(THREE, height=2000.0, width=page_width)))
    result = check_report_in_browser(report, tmp_path / "shots", chromium=chromium, width=1000,
                                     height=640)  # fmt: skip
    assert result.problems == problems
