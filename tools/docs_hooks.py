"""MkDocs hooks: the committed figures join the site; folds and docstring roles render.

The figures are written by the analyses and the report into ``figures/`` at the repository
root (the README and the report cite them there); the docs pages show the same files
without a copy under ``docs/``. A page links one as ``../figures/NAME.png``, the path from
``docs/`` that the repository's web view resolves; for the site the link becomes
``figures/NAME.png``, the file :func:`on_files` adds. A ``<details>`` fold's markdown is parsed
on the site as GitHub parses it, and the docstrings' Sphinx roles become cross-references.
mkdocs.yml loads this file (``hooks: [tools/docs_hooks.py]``).
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
    markdown = _folds_as_markdown(markdown)
    if "/" in page.file.src_uri:  # a page in a subfolder keeps its links
        return markdown
    return _UP_TO_ROOT.sub(lambda match: f"]({match.group(1)}/", markdown)


_FOLD = re.compile(r"^<details>(<summary>.*?</summary>)?[ \t]*$", re.MULTILINE)


def _folds_as_markdown(markdown: str) -> str:
    """A ``<details>`` fold as GitHub shows it (markdown inside, the summary on the same line)
    becomes ``<details markdown="1">`` with its summary on a line of its own, which the site's
    ``md_in_html`` parses: without it the fold's lists and tables are one block of raw text."""
    return _FOLD.sub(lambda match: '<details markdown="1">'
                     + (f"\n{match.group(1)}" if match.group(1) else ""), markdown)  # fmt: skip


_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc|obj):<code>(~?)([A-Za-z_][\w.]*)"
                   r"(\(\))?</code>")  # fmt: skip
"""A Sphinx role of a docstring as the API pages render it: ``:func:<code>~a.b</code>``."""


def _roles_as_references(html: str, module: str | None) -> str:
    """Sphinx roles (``:class:`~gradlab.x.Y```, ``:func:`name```) of the docstrings become
    cross-references (a link where the name is documented, else its code) with the role
    dropped and, after ``~``, the last part of the name alone. A name that does not start
    with ``gradlab`` is looked up in ``module``, the API page's module."""

    def reference(match: re.Match) -> str:
        name = match.group(2)
        title = (name.rsplit(".", 1)[-1] if match.group(1) else name) + (match.group(3) or "")
        identifier = name if module is None or name.split(".")[0] == "gradlab" else (
            f"{module}.{name}")  # fmt: skip
        return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'

    return _ROLE.sub(reference, html)


def _api_module(src_uri: str) -> str | None:
    """``api/monitor.md`` -> ``gradlab.monitor``, ``api/gradlab.md`` -> ``gradlab``."""
    if not src_uri.startswith("api/"):
        return None
    stem = Path(src_uri).stem
    return "gradlab" if stem == "gradlab" else f"gradlab.{stem}"


_LITERAL_MARK = re.compile(r"::</p>(\s*<div class=\"highlight\">)")
"""reST's literal-block marker (``Usage::``) at the end of a paragraph that a code block
follows: Markdown renders the indented block as code already and shows the ``::`` as typed."""


def on_page_content(html: str, page, config, files) -> str:
    """The API pages' Sphinx roles as cross-references (:func:`_roles_as_references`), and a
    paragraph's ``::`` before a code block as one colon, as Sphinx shows it."""
    html = _LITERAL_MARK.sub(r":</p>\1", html)
    return _roles_as_references(html, _api_module(page.file.src_uri))
