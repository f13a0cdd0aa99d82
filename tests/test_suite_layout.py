"""The test suite's own rules, read from its source: tests follow behaviour, not the code's text.

* No test module imports another test module (shared code lives in ``tests/helpers/``, oracles
  in ``tests/reference/``, fixtures in ``conftest.py``).
* No test reads a docstring (``__doc__``, ``inspect.getdoc``): wording is not behaviour.
* No test imports an underscore name of gradlab or patches one, beyond the list below of those
  still to be moved to public inputs; the list may only shrink (it is empty now).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

PRIVATE_STILL_USED: dict[str, set[str]] = {}
"""Test file -> the private gradlab names it still uses (to be replaced by public inputs or
public reference modules by the owners of those modules); the list may only shrink."""


def _test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("test_*.py") if "helpers" not in p.parts)


NAMEDTUPLE_API = {"_fields", "_field_defaults", "_asdict", "_replace", "_make"}
"""Underscore names that are public API (``typing.NamedTuple``'s)."""


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__") and name not in NAMEDTUPLE_API


def imported_test_modules(tree: ast.Module) -> list[str]:
    """Modules named ``test_*`` that a module imports (absolute or relative)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level or any(part.startswith("test_") for part in module.split(".")):
                found.append("." * node.level + module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names
                      if any(part.startswith("test_") for part in a.name.split("."))]  # fmt: skip
    return found


def private_gradlab_uses(tree: ast.Module) -> set[str]:
    """Underscore names of gradlab a module imports, reads as attributes of a gradlab module it
    imported, or patches by name (``monkeypatch.setattr(module, "_name", ...)``)."""
    used, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "gradlab":
            for alias in node.names:
                if _is_private(alias.name):
                    used.add(f"{node.module}.{alias.name}")
                else:
                    modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gradlab":
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in modules:
                used.add(f"{base.id}.{node.attr}")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setattr" and len(node.args) >= 2):  # fmt: skip
            target, name = node.args[0], node.args[1]
            if (isinstance(target, ast.Name) and target.id in modules
                    and isinstance(name, ast.Constant) and isinstance(name.value, str)
                    and _is_private(name.value)):  # fmt: skip
                used.add(f"{target.id}.{name.value}")
    return used


def reads_docstrings(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "__doc__":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "getdoc":
            return True
    return False


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from tests.monitor.test_shared import x\n", ["tests.monitor.test_shared"]),
        ("from .test_html import PNG\n", [".test_html"]),
        ("import tests.test_losses\n", ["tests.test_losses"]),
        ("from tests.helpers.training import train\n", []),
        ("from tests.reference.smooth_ap_loops import cosine\n", []),
    ],
)
def test_the_import_scan_finds_test_modules_only(source, expected):
    assert imported_test_modules(ast.parse(source)) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from gradlab.monitor.batch import _order_key, BatchView\n",
         {"gradlab.monitor.batch._order_key"}),
        ("from gradlab.monitor import lock\nlock._read('x')\n", {"lock._read"}),
        ("import gradlab.monitor.batch as b\ndef t(monkeypatch):\n"
         "    monkeypatch.setattr(b, '_hidden', 1)\n", {"b._hidden"}),
        ("from gradlab import Monitor\nMonitor.__init__\n", set()),
        ("from gradlab.functional import GradientAnatomy\nGradientAnatomy._fields\n", set()),
        ("from collections import namedtuple\nx._private\n", set()),
    ],
)  # fmt: skip
def test_the_private_scan_finds_imports_attributes_and_patches(source, expected):
    assert private_gradlab_uses(ast.parse(source)) == expected


@pytest.mark.slow
def test_no_test_module_imports_another():
    offenders = {
        path.relative_to(TESTS).as_posix(): found
        for path in _test_modules()
        if (found := imported_test_modules(_tree(path)))
    }
    assert offenders == {}


@pytest.mark.slow
def test_no_test_reads_a_docstring():
    offenders = [p.relative_to(TESTS).as_posix() for p in _test_modules()
                 if reads_docstrings(_tree(p))]  # fmt: skip
    assert offenders == []


@pytest.mark.slow
def test_private_gradlab_names_are_only_those_still_listed():
    new = {}
    for path in _test_modules():
        name = path.relative_to(TESTS).as_posix()
        extra = private_gradlab_uses(_tree(path)) - PRIVATE_STILL_USED.get(name, set())
        if extra:
            new[name] = sorted(extra)
    assert new == {}, "drive these through public inputs (or a public reference module)"


def skips_without_cuda_by_hand(tree: ast.Module) -> bool:
    """A ``skipif(not torch.cuda.is_available(), ...)``: a CUDA test that ``pytest -m gpu``
    (``tools/device_check.sh``, the one run on a GPU) would not select."""
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "skipif" and node.args):  # fmt: skip
            continue
        condition = node.args[0]
        if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
            called = condition.operand
            if (isinstance(called, ast.Call) and isinstance(called.func, ast.Attribute)
                    and called.func.attr == "is_available"):  # fmt: skip
                return True
    return False


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("@pytest.mark.skipif(not torch.cuda.is_available(), reason='x')\ndef test(): pass\n",
         True),
        ("@pytest.mark.skipif(torch.cuda.is_available(), reason='measured there')\n"
         "def test(): pass\n", False),
        ("@pytest.mark.gpu\ndef test(): pass\n", False),
    ],
)  # fmt: skip
def test_the_cuda_scan_finds_a_hand_made_skip(source, expected):
    assert skips_without_cuda_by_hand(ast.parse(source)) is expected


@pytest.mark.slow
def test_cuda_tests_carry_the_gpu_marker():
    offenders = [p.relative_to(TESTS).as_posix() for p in _test_modules()
                 if skips_without_cuda_by_hand(_tree(p))]  # fmt: skip
    assert offenders == [], "mark them @pytest.mark.gpu (conftest skips them without CUDA)"
