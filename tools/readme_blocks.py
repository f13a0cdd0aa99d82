"""README and docs numbers from the JSON that produced them: ``make docs`` writes, tests check.

README.md and the pages under docs/ hold generated blocks between two markers::

    <!-- generated: NAME -->
    ...text written by BLOCKS[NAME](root)...
    <!-- /generated: NAME -->

``python tools/readme_blocks.py`` rewrites every block of every page from its JSON (``make
docs``); ``python tools/readme_blocks.py --check`` exits 1 naming each page and block that
differs (the test suite runs :func:`stale_pages`). To add a block, register a renderer
``root -> markdown`` in ``BLOCKS`` (by ``register``) and put the two markers into a page.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
Renderer = Callable[[Path], str]
BLOCKS: dict[str, Renderer] = {}
"""Block name -> renderer (reads JSON under ``root``, returns the block's markdown)."""

RENDERER_MODULES = (
    "tools.readme_tables",
    "tools.readme_anatomy",
    "tools.readme_audit",
    "tools.readme_monitor",
    "tools.readme_studies",
    "tools.readme_testing",
    "tools.docs_pages",
)
"""Modules whose import registers renderers (kept apart so each table has one home)."""

_BLOCK = re.compile(
    r"(<!-- generated: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- /generated: (?P=name) -->)",
    re.DOTALL,
)


def register(name: str) -> Callable[[Renderer], Renderer]:
    """Decorator: ``@register("losses-table")`` on a ``root -> markdown`` function."""

    def decorate(renderer: Renderer) -> Renderer:
        BLOCKS[name] = renderer
        return renderer

    return decorate


def load_json(root: Path, relative: str) -> dict:
    """A committed JSON result, by path relative to the repository root."""
    return json.loads((root / relative).read_text())


def _load_renderers() -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    for module in RENDERER_MODULES:
        importlib.import_module(module)


def render(readme: str, root: Path = ROOT) -> str:
    """``readme`` with every known block rewritten from its JSON."""
    _load_renderers()

    def replace(match: re.Match) -> str:
        renderer = BLOCKS.get(match["name"])
        if renderer is None:
            return match.group(0)
        body = renderer(root).rstrip("\n") + "\n"
        return f"{match.group(1)}{body}{match.group(4)}"

    return _BLOCK.sub(replace, readme)


def stale_blocks(readme: str, root: Path = ROOT) -> list[str]:
    """Names of the blocks whose text differs from a fresh rendering (unknown blocks too)."""
    _load_renderers()
    fresh = render(readme, root)
    stale = []
    for old, new in zip(_BLOCK.finditer(readme), _BLOCK.finditer(fresh), strict=True):
        if old["name"] not in BLOCKS:
            stale.append(f"{old['name']} (no renderer registered)")
        elif old["body"] != new["body"]:
            stale.append(old["name"])
    return stale


def pages(root: Path = ROOT) -> list[Path]:
    """README.md and every markdown page under docs/: the files that may hold blocks."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def block_names(text: str) -> list[str]:
    """The names of the generated blocks in ``text``, in order."""
    return [match["name"] for match in _BLOCK.finditer(text)]


def stale_pages(root: Path = ROOT, json_root: Path | None = None) -> list[str]:
    """``page: block`` for every block of :func:`pages` (under ``root``) that differs from a
    fresh rendering of the JSON under ``json_root`` (default ``root``)."""
    stale = []
    for page in pages(root):
        for name in stale_blocks(page.read_text(), json_root or root):
            stale.append(f"{page.relative_to(root).as_posix()}: {name}")
    return stale


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=re.sub(r"``(.+?)``", r"\1", __doc__.splitlines()[0]))  # plain text
    parser.add_argument("--check", action="store_true", help="exit 1 if a block is stale")
    arguments = parser.parse_args(argv)
    if arguments.check:
        stale = stale_pages()
        for name in stale:
            print(f"generated block out of date: {name} (run make docs)", file=sys.stderr)
        return 1 if stale else 0
    total = 0
    for page in pages():
        text = page.read_text()
        total += len(block_names(text))
        updated = render(text)
        if updated != text:
            page.write_text(updated)
    print(f"README.md and docs/: {total} generated blocks rendered")
    return 0


if __name__ == "__main__":
    # Run as a script, this file is ``__main__``; the renderers register into the importable
    # ``tools.readme_blocks``, so hand over to that module.
    sys.path.insert(0, str(ROOT))
    from tools import readme_blocks

    sys.exit(readme_blocks.main())
