"""The examples of the public API's docstrings, run as a reader pastes them: in an empty
namespace, so each must import what it uses (``help(gradlab.Monitor)`` shows no module
globals)."""

from __future__ import annotations

import doctest
import importlib
import io
import warnings
from collections.abc import Iterator

PUBLIC_MODULES = (
    "gradlab", "gradlab.functional", "gradlab.losses", "gradlab.monitor", "gradlab.symbolic",
    "gradlab.plotting", "gradlab.integrations.lightning", "gradlab.integrations.transformers",
    "gradlab.integrations.sentence_transformers", "gradlab.integrations.open_clip",
    "gradlab.integrations.recorded", "gradlab.interop.pml",
)
"""The modules whose public names a user reaches (their ``__all__``, else the names the
module defines without a leading underscore)."""

FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def public_objects(module_name: str) -> Iterator[tuple[str, object]]:
    """``(dotted name, object)`` of each public name of ``module_name``."""
    try:
        module = importlib.import_module(module_name)
    except ImportError:  # an integration whose extra is not installed here: its own tests skip
        return
    names = getattr(module, "__all__", None)
    if names is None:
        names = [name for name, value in vars(module).items() if not name.startswith("_")
                 and getattr(value, "__module__", None) == module_name]  # fmt: skip
    for name in names:
        yield f"{module_name}.{name}", getattr(module, name)


def docstring_examples() -> dict[str, doctest.DocTest]:
    """Every docstring example of the public objects (methods included), by its doctest name,
    each object once (the first public name it is reached by)."""
    found: dict[str, doctest.DocTest] = {}
    seen: set[int] = set()
    finder = doctest.DocTestFinder(recurse=True, exclude_empty=True)
    for module_name in PUBLIC_MODULES:
        for dotted, value in public_objects(module_name):
            if id(value) in seen or not (callable(value) or isinstance(value, type)):
                continue
            seen.add(id(value))
            for test in finder.find(value, name=dotted, globs={}):
                if test.examples and test.name not in found:
                    found[test.name] = test
    return found


def run_in_an_empty_namespace(test: doctest.DocTest) -> str:
    """Run ``test`` with no globals; return the report of its failures ("" when it passes)."""
    test.globs = {}
    report = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runner.run(test, out=report.write, clear_globs=True)
    return report.getvalue()
