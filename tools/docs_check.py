"""Look at the built docs site as a reader would: every page of the nav in headless Chromium.

``make docs-check`` (after ``make docs``) serves ``site/`` on a local port, opens each page of
mkdocs.yml's nav in Chromium (Playwright, as ``make report-check`` does for the report), saves a
screenshot of each top-level page into ``site/screenshots/`` and reports as problems every

* console error, failed request and HTTP error (a missing stylesheet, script or image),
* image the browser could not decode (``naturalWidth == 0``),
* link to an anchor on the same page with no element of that id,
* link to another page of the site that does not exist, or to an anchor it does not have.

Usage: ``python tools/docs_check.py SITE_DIR [--screenshots DIR] [--chromium PATH]``; exit code
0 when nothing is broken, 1 when a problem was found, 2 when no browser is available.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import re
import subprocess
import sys
import threading
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PAGE_PROBE = r"""() => {
  const ids = new Set(Array.from(document.querySelectorAll('[id]')).map(e => e.id));
  const links = Array.from(document.querySelectorAll('a[href]')).map(a => a.href);
  const anchors = Array.from(document.querySelectorAll('a[href^="#"]'))
    .map(a => decodeURIComponent(a.getAttribute('href').slice(1)))
    .filter(id => id && !ids.has(id));
  const images = Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)
    .map(i => i.alt || i.src.slice(0, 80));
  return {ids: Array.from(ids), links, anchors, images,
          height: document.documentElement.scrollHeight};
}"""


def nav_pages(config: Path = ROOT / "mkdocs.yml") -> list[tuple[str, str]]:
    """``(title, url path)`` of every page in the nav, in order (``index.md`` -> ``""``)."""
    import yaml

    nav = yaml.load(config.read_text(), Loader=yaml.BaseLoader)["nav"]
    pages: list[tuple[str, str]] = []

    def walk(entries: list) -> None:
        for entry in entries:
            for title, value in entry.items():
                if isinstance(value, list):
                    walk(value)
                else:
                    path = "" if value == "index.md" else value.removesuffix(".md") + "/"
                    pages.append((title, path.removesuffix("index/")))

    walk(nav)
    return pages


def build_site(folder: Path) -> subprocess.CompletedProcess:
    """``mkdocs build --strict`` of this checkout into ``folder`` (what ``make docs`` runs)."""
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # the check reports what matters
        pass


def _serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def _slug(title: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in title.lower()).strip("-")


def check_site(site: Path, screenshots: Path, chromium: str | None = None,
               max_height: int = 4000,
               pages: list[tuple[str, str]] | None = None) -> tuple[list[str], list[Path]]:
    """Problems found and screenshots written for ``pages`` (``(title, url path)``, default
    every nav page, :func:`nav_pages`) of the built ``site``."""
    from playwright.sync_api import sync_playwright

    from gradlab.report.browser_check import CHROMIUM_ARGS, find_chromium

    executable = find_chromium(chromium)
    if executable is None or not executable.exists():
        raise FileNotFoundError("no Chromium found: install Debian's chromium or set "
                                "GRADLAB_CHROMIUM")  # fmt: skip
    screenshots.mkdir(parents=True, exist_ok=True)
    server, base = _serve(site)
    problems: list[str] = []
    shots: list[Path] = []
    seen: dict[str, set[str]] = {}
    links: list[tuple[str, str]] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=str(executable),
                                                 args=CHROMIUM_ARGS)  # fmt: skip
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            current = {"url": ""}
            page.on("console", lambda m: m.type == "error" and problems.append(
                f"{current['url']}: console error: {m.text[:200]}"))  # fmt: skip
            page.on("requestfailed", lambda r: problems.append(
                f"{current['url']}: failed request: {r.url[:160]}"))  # fmt: skip
            page.on("response", lambda r: r.status >= 400 and problems.append(
                f"{current['url']}: HTTP {r.status}: {r.url[:160]}"))  # fmt: skip
            for number, (title, path) in enumerate(pages or nav_pages(), start=1):
                current["url"] = path or "index"
                page.goto(base + path, wait_until="networkidle")
                probe = page.evaluate(_PAGE_PROBE)
                seen[base + path] = set(probe["ids"])
                problems += [f"{current['url']}: broken anchor #{a}" for a in probe["anchors"]]
                problems += [f"{current['url']}: image not shown: {i}" for i in probe["images"]]
                links += [(current["url"], link) for link in probe["links"]]
                shot = screenshots / f"{number:02d}-{_slug(title)}.png"
                height = min(probe["height"], max_height)
                page.screenshot(path=str(shot), full_page=True,
                                clip={"x": 0, "y": 0, "width": 1280, "height": height})
                shots.append(shot)
            browser.close()
        for source, link in links:
            problems += _check_link(site, base, source, link, seen)
    finally:
        server.shutdown()
    return sorted(set(problems)), shots


def _check_link(site: Path, base: str, source: str, link: str,
                seen: dict[str, set[str]]) -> list[str]:
    """A link into the site must reach a file, and its anchor an id of that page."""
    if not link.startswith(base):
        return []  # external (the repository link): not fetched, the check runs offline
    target, _, fragment = link.partition("#")
    relative = urllib.parse.unquote(target[len(base):])
    file = site / relative
    if relative.endswith("/") or not relative:
        file = file / "index.html"
    if not file.is_file():
        return [f"{source}: broken link {relative or '/'}"]
    if fragment and target in seen and urllib.parse.unquote(fragment) not in seen[target]:
        return [f"{source}: broken anchor {relative}#{fragment}"]
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=re.sub(r"``(.+?)``", r"\1", __doc__.splitlines()[0]))  # plain text
    parser.add_argument("site", type=Path, help="the folder mkdocs build wrote (site/)")
    parser.add_argument("--screenshots", type=Path, help="default: SITE/screenshots")
    parser.add_argument("--chromium", help="browser executable (default: found on PATH)")
    arguments = parser.parse_args(argv)
    if not (arguments.site / "index.html").is_file():
        print(f"docs-check: {arguments.site}/index.html is missing; run make docs",
              file=sys.stderr)  # fmt: skip
        return 2
    folder = arguments.screenshots or arguments.site / "screenshots"
    try:
        problems, shots = check_site(arguments.site, folder, arguments.chromium)
    except (FileNotFoundError, ImportError) as error:
        print(f"docs-check: {error}", file=sys.stderr)
        return 2
    for problem in problems:
        print(f"problem: {problem}")
    print(f"{len(shots)} pages, screenshots in {folder}; {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
