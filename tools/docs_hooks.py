"""MkDocs hook: the committed figures of ``figures/`` join the site as ``figures/...``.

The figures are written by the analyses and the report into ``figures/`` at the repository
root (the README and the report cite them there); the docs pages show the same files
without a copy under ``docs/``. A page links one as ``../figures/NAME.png``, the path from
``docs/`` that the repository's web view resolves; for the site the link becomes
``figures/NAME.png``, the file :func:`on_files` adds. mkdocs.yml loads this file
(``hooks: [tools/docs_hooks.py]``).
"""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("figures",)
"""Folders under the repository root whose PNG files the site serves at the same path."""


def on_files(files: Files, config) -> Files:
    """Add every ``FOLDER/**/*.png`` as a site file at ``FOLDER/...``."""
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.png")):
            relative = path.relative_to(ROOT).as_posix()
            files.append(File(relative, src_dir=str(ROOT), dest_dir=config["site_dir"],
                              use_directory_urls=config["use_directory_urls"]))  # fmt: skip
    return files


_UP_TO_ROOT = re.compile(r"\]\(\.\./(" + "|".join(FOLDERS) + r")/")


def on_page_markdown(markdown: str, page, config, files) -> str:
    """``](../figures/...`` (a page's link as the repository shows it) becomes the site's
    ``](figures/...``, for pages directly under ``docs/``."""
    if "/" in page.file.src_uri:  # a page in a subfolder keeps its links
        return markdown
    return _UP_TO_ROOT.sub(lambda match: f"]({match.group(1)}/", markdown)
