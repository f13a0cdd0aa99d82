"""Look at the report as a person would: render ``index.html`` in headless Chromium.

The check loads the page in a real browser (Chromium driven by Playwright), saves a screenshot
of the top screen and of every ``<h2>`` section to its end (a section taller than one tile is
saved as several tiles, ``section-NN-<anchor>-K.png``, that together cover it), and reports as
problems, each named with the section it sits in, every

* link to an anchor (``href="#..."``) with no element of that id,
* image the browser could not decode (``naturalWidth == 0``),
* HTML tag shown as text (markup that was escaped instead of rendered),
* console error and failed request.

Run it with ``make report-check`` (after ``make report``) or
``python -m gradlab.report.browser_check REPORT_DIR [--screenshots DIR]``; the exit code is 1
when a problem was found and 2 when no browser is available. It needs the ``browser`` extra
(``gradlab-ranking[browser]``) and a Chromium binary (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gradlab.errors import GradlabError
from gradlab.extras import install_hint

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "chrome")
"""Executables tried, in order, when neither an argument nor ``GRADLAB_CHROMIUM`` names one."""

# Flags for a sandboxed machine without network: no first-run UI, no background connections.
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

_PAGE_PROBE = r"""() => {
  const ids = new Set(Array.from(document.querySelectorAll('[id]')).map(e => e.id));
  const top = e => e.getBoundingClientRect().top + window.scrollY;
  const anchors = Array.from(document.querySelectorAll('a[href^="#"]'))
    .filter(a => !ids.has(a.getAttribute('href').slice(1)))
    .map(a => ({what: '#' + a.getAttribute('href').slice(1), top: top(a)}));
  const images = Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => ({what: i.alt || i.src.slice(0, 60), top: top(i)}));
  const sections = Array.from(document.querySelectorAll('h2')).map(h => {
    return {id: h.id, title: h.textContent, top: top(h)};
  });
  const rawTags = (document.body.innerText.match(/<\/?[a-z][a-z0-9]*(\s[^<>]*)?>/gi) || [])
    .slice(0, 5);
  return {anchors, images, sections, rawTags, height: document.documentElement.scrollHeight,
          width: document.documentElement.scrollWidth};
}"""


@dataclass
class BrowserCheck:
    """What the browser saw: problems found and screenshots written.

    Attributes:
        problems: one line per problem, naming the section it sits in.
        screenshots: every PNG written (``top.png`` first, then each section's tiles).
        sections: the ``<h2>`` titles, in page order.
        section_heights: each section's height in CSS pixels, from its ``<h2>`` to the next.
        tile_heights: per section, the heights of its tiles (they sum to its height).
    """

    problems: list[str] = field(default_factory=list)
    screenshots: list[Path] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    section_heights: list[float] = field(default_factory=list)
    tile_heights: list[list[float]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def find_chromium(executable: str | Path | None = None) -> Path | None:
    """The Chromium to use: ``executable``, else ``$GRADLAB_CHROMIUM``, else one on ``PATH``."""
    for candidate in (executable, os.environ.get("GRADLAB_CHROMIUM")):
        if candidate:
            return Path(candidate)
    for name in CHROMIUM_NAMES:
        found = shutil.which(name)
        if found:
            return Path(found)
    return None


def check_report_in_browser(
    report_dir: str | Path,
    screenshots: str | Path | None = None,
    *,
    chromium: str | Path | None = None,
    width: int = 1280,
    height: int = 900,
    max_tile_height: int = 2400,
) -> BrowserCheck:
    """Render ``report_dir/index.html`` in headless Chromium and check what it shows.

    Args:
        report_dir: a folder written by ``gradlab report``.
        screenshots: folder for ``top.png`` and ``section-NN-<anchor>.png`` (default
            ``report_dir/screenshots``).
        chromium: the browser executable (see :func:`find_chromium`).
        width, height: the viewport, in CSS pixels.
        max_tile_height: a section taller than this is saved as several tiles of at most this
            height (CSS pixels) that cover it to its end.

    Returns:
        A :class:`BrowserCheck`; ``ok`` is true when nothing was broken.

    Raises:
        GradlabError: no ``index.html`` in ``report_dir``, ``max_tile_height`` below 1, or no
            browser or Playwright here.
    """
    if (
        isinstance(max_tile_height, bool)
        or not isinstance(max_tile_height, int)
        or max_tile_height < 1
    ):
        raise GradlabError(
            f"max_tile_height must be a positive int (CSS pixels); got {max_tile_height!r}"
        )
    page_path = Path(report_dir) / "index.html"
    if not page_path.is_file():
        raise GradlabError(f"report_dir must hold an index.html; {str(page_path)!r} is missing")
    executable = find_chromium(chromium)
    if executable is None or not executable.exists():
        raise GradlabError(
            f"chromium: no browser found (tried {executable or ', '.join(CHROMIUM_NAMES)}); "
            "install Debian's chromium or set GRADLAB_CHROMIUM"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise GradlabError(
            f"the browser check needs Playwright: {install_hint('browser')}"
        ) from None
    folder = Path(screenshots) if screenshots is not None else Path(report_dir) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    result = BrowserCheck()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(executable), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": width, "height": height})
            page.on(
                "console",
                lambda message: (
                    message.type == "error"
                    and result.problems.append(f"console error: {message.text}")
                ),
            )
            page.on(
                "requestfailed",
                lambda request: result.problems.append(f"failed request: {request.url[:120]}"),
            )
            page.goto(page_path.resolve().as_uri(), wait_until="load")
            probe = page.evaluate(_PAGE_PROBE)
            sections = probe["sections"]
            where = _section_finder(sections)
            result.problems += [
                f"broken anchor: {found['what']}{where(found['top'])}" for found in probe["anchors"]
            ]
            result.problems += [
                f"image not shown: {found['what']}{where(found['top'])}"
                for found in probe["images"]
            ]
            result.problems += [f"HTML shown as text: {tag}" for tag in probe["rawTags"]]
            if probe["width"] > width:  # the reader scrolls the whole page sideways
                result.problems.append(f"page wider than the window: {probe['width']} CSS "
                                       f"pixels at a width of {width}")  # fmt: skip
            top = folder / "top.png"
            page.screenshot(path=str(top))
            result.screenshots.append(top)
            for number, section in enumerate(sections, start=1):
                end = sections[number]["top"] if number < len(sections) else probe["height"]
                height = max(1.0, end - section["top"])
                tiles = section_tiles(section["top"], height, max_tile_height)
                stem = f"section-{number:02d}-{section['id'] or 'untitled'}"
                for index, (y, tile_height) in enumerate(tiles, start=1):
                    suffix = f"-{index}" if len(tiles) > 1 else ""
                    path = folder / f"{stem}{suffix}.png"
                    page.screenshot(
                        path=str(path),
                        full_page=True,
                        clip={"x": 0, "y": y, "width": probe["width"], "height": tile_height},
                    )
                    result.screenshots.append(path)
                result.sections.append(section["title"])
                result.section_heights.append(height)
                result.tile_heights.append([tile_height for _, tile_height in tiles])
        finally:
            browser.close()
    return result


def section_tiles(top: float, height: float, max_tile_height: int) -> list[tuple[float, float]]:
    """The ``(y, height)`` tiles covering ``[top, top + height)``, each at most ``max_tile_height``.

    Example:
        >>> section_tiles(100.0, 5000.0, 2400)
        [(100.0, 2400.0), (2500.0, 2400.0), (4900.0, 200.0)]
    """
    tiles = []
    covered = 0.0
    while covered < height:
        tile_height = min(float(max_tile_height), height - covered)
        tiles.append((top + covered, tile_height))
        covered += tile_height
    return tiles


def _section_finder(sections: list[dict]):
    """``top -> " (in section 'Title')"``: the last section starting at or above ``top``."""

    def where(top: float) -> str:
        inside = [section["title"] for section in sections if section["top"] <= top]
        return f" (in section {inside[-1]!r})" if inside else " (above the first section)"

    return where


def main(argv: list[str] | None = None) -> int:
    """``python -m gradlab.report.browser_check REPORT_DIR``: 0 ok, 1 problems, 2 no browser."""
    summary = re.sub(r"``(.+?)``", r"\1", __doc__.splitlines()[0])  # a terminal shows no reST
    parser = argparse.ArgumentParser(prog="python -m gradlab.report.browser_check",
                                     description=summary)  # fmt: skip
    parser.add_argument("report_dir", type=Path, help="a folder written by gradlab report")
    parser.add_argument("--screenshots", type=Path, help="default: REPORT_DIR/screenshots")
    parser.add_argument("--chromium", help="browser executable (default: found on PATH)")
    arguments = parser.parse_args(argv)
    try:
        result = check_report_in_browser(
            arguments.report_dir, arguments.screenshots, chromium=arguments.chromium
        )
    except GradlabError as error:
        print(f"gradlab: {error}", file=sys.stderr)
        return 2
    for problem in result.problems:
        print(f"problem: {problem}")
    print(
        f"{len(result.screenshots)} screenshots ({len(result.sections)} sections) in "
        f"{result.screenshots[0].parent}; {len(result.problems)} problems"
    )
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
