"""A griffe extension for the API reference: ``Example:`` sections render as examples.

gradlab's docstrings write Google style's singular ``Example:``; griffe parses only
``Examples:`` into a doctest section and renders the singular as prose, where a doctest's
output such as ``[0, 4, 8]`` would read as a markdown link. mkdocs.yml loads this extension
(``extensions: [tools/docs_griffe.py]``); the docstrings themselves stay as written.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_SINGULAR = re.compile(r"^(\s*)Example:\s*$", re.MULTILINE)


class ExampleSections(griffe.Extension):
    """Rewrite a docstring's ``Example:`` heading to ``Examples:`` when griffe loads it."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _SINGULAR.sub(r"\1Examples:", obj.docstring.value)
