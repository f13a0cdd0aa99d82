"""MkDocs hook: the committed figures of ``figures/`` join the site as ``figures/...``.

The figures are written by the analyses and the report into ``figures/`` at the repository
root (the README and the report cite them there); the docs pages show the same files as
``figures/NAME.png`` without a copy under ``docs/``. mkdocs.yml loads this file
(``hooks: [tools/docs_hooks.py]``).
"""

from __future__ import annotations

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
