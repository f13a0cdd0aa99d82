"""Every public name shows how it is used, in an example that runs as a doctest.

Classes and functions carry the example in their own docstring; constants (whose attribute
docstrings doctest does not collect) in their package's docstring. The examples themselves run
in ``make test`` (``--doctest-modules`` over ``gradlab/``); this test checks that each name HAS
one that doctest finds, so a new public name without an example fails here, and that each
example runs as a reader pastes it from ``help()``: in an empty namespace, importing what it
uses (``--doctest-modules`` runs it with the defining module's globals, which hide a missing
import).
"""

import ast
import doctest
import inspect
import itertools
import re
import sys
from pathlib import Path

import pytest

import gradlab
import gradlab.functional
import gradlab.losses
import gradlab.monitor
from tests.helpers.docstring_examples import docstring_examples, run_in_an_empty_namespace

PUBLIC = [gradlab, gradlab.functional, gradlab.losses, gradlab.monitor]
GRADLAB = Path(gradlab.__file__).resolve().parent


def _doctests(module) -> dict[str, list[str]]:
    """Name of each docstring doctest finds in ``module`` -> the source of its examples."""
    finder = doctest.DocTestFinder(exclude_empty=True)
    return {test.name: [example.source for example in test.examples]
            for test in finder.find(module)}  # fmt: skip


def _without_example(module) -> list[str]:
    missing = []
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isclass(obj) or inspect.isroutine(obj):
            home = sys.modules[obj.__module__]
            if not _doctests(home).get(f"{home.__name__}.{obj.__qualname__}"):
                missing.append(name)
        elif not any(re.search(rf"\b{re.escape(name)}\b", source)
                     for source in _doctests(module).get(module.__name__, [])):  # fmt: skip
            missing.append(name)  # a constant: shown in its package's example
    return missing


@pytest.mark.parametrize("module", PUBLIC, ids=lambda m: m.__name__)
def test_every_public_name_has_an_example_that_doctest_runs(module):
    assert _without_example(module) == []


def test_every_public_name_of_the_claim_api_has_an_example_that_doctest_runs():
    # gradlab.symbolic needs the audit extra, so it is not in PUBLIC
    pytest.importorskip("sympy")
    import gradlab.symbolic

    assert _without_example(gradlab.symbolic) == []


def test_a_public_name_without_an_example_is_found(monkeypatch):
    def undocumented_helper(x):
        """A summary, but no example."""
        return x

    undocumented_helper.__module__ = "gradlab.functional.harmonic"
    undocumented_helper.__qualname__ = "undocumented_helper"
    monkeypatch.setattr(gradlab.functional, "undocumented_helper", undocumented_helper,
                        raising=False)  # fmt: skip
    names = [*gradlab.functional.__all__, "undocumented_helper", "NOT_SHOWN"]
    monkeypatch.setattr(gradlab.functional, "__all__", names)
    monkeypatch.setattr(gradlab.functional, "NOT_SHOWN", 3, raising=False)
    missing = _without_example(gradlab.functional)
    assert "undocumented_helper" in missing and "NOT_SHOWN" in missing


def _orphaned_strings(source: str) -> list[int]:
    """Lines of a module's (or a class body's) string statements that follow another string
    statement: an attribute docstring cut off from its name by another's inserted above it."""
    tree = ast.parse(source)
    bodies = [tree.body] + [node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]

    def is_string(statement) -> bool:
        return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
            and isinstance(statement.value.value, str)  # fmt: skip

    return [after.lineno for body in bodies for before, after in itertools.pairwise(body)
            if is_string(before) and is_string(after)]  # fmt: skip


@pytest.mark.slow
def test_every_attribute_docstring_follows_its_name():
    # mkdocstrings reads the string right below a constant as its docstring: a second string
    # below it belongs to no name, and the constant above the first shows the wrong text
    found = {str(path.relative_to(GRADLAB)): lines for path in sorted(GRADLAB.rglob("*.py"))
             if (lines := _orphaned_strings(path.read_text(encoding="utf-8")))}  # fmt: skip
    assert found == {}


def test_an_orphaned_attribute_docstring_is_found():
    source = 'A = 1\n"""Of A."""\nB = 2\n"""Of B."""\n"""Of A, misplaced."""\n'
    assert _orphaned_strings(source) == [5]


EXAMPLES = docstring_examples()
"""The docstring examples of the public API (integrations included where their extra is
installed), by doctest name."""


def test_the_pasted_examples_cover_the_public_api():
    # the losses, the Monitor and its methods, the functional API, a quantity, the claim engine
    for name in ("gradlab.SmoothAPLoss", "gradlab.Monitor", "gradlab.Monitor.attach",
                 "gradlab.functional.tie_aware_ap", "gradlab.monitor.Loss",
                 "gradlab.symbolic.symbolic_equality"):  # fmt: skip
        assert name in EXAMPLES


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_example_runs_pasted_into_an_empty_namespace(name):
    assert run_in_an_empty_namespace(EXAMPLES[name]) == ""
