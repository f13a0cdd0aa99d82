"""Two layers, one way: the library never imports the studies or the CLI (import-linter), there
is no import cycle in gradlab/, no private name crosses a package and no module is loaded
behind the import graph's back (``importlib``)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gradlab"

pytest.importorskip("importlinter")
grimp = pytest.importorskip("grimp")

LINT = (
    "import sys; from importlinter.cli import lint_imports; "
    "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))"
)


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    """``lint-imports`` on the package under ``root`` with ``root``'s pyproject.toml."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-c", LINT], cwd=root, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copytree(PACKAGE, tmp_path / "gradlab",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.slow
def test_the_layers_contract_is_kept():
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "The library never imports the studies or the CLI KEPT" in result.stdout


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "line"),
    [
        ("functional/x.py", "import gradlab.experiments\n"),
        ("monitor/x.py", "def later():\n    from gradlab.report import run_report\n"),
        ("losses_extra.py", "from gradlab import cli\n"),  # not listed: checked through losses
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, line):
    copy = _copy_of_the_package(tmp_path)
    (copy / "gradlab" / module).write_text(f'"""An upward import."""\n\n{line}')
    if module == "losses_extra.py":  # a library module reaching the CLI through a new module
        with (copy / "gradlab" / "losses.py").open("a") as losses:
            losses.write("\nimport gradlab.losses_extra  # noqa: E402\n")
    result = _lint_imports(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "The library never imports the studies or the CLI BROKEN" in result.stdout
    assert f"gradlab.{module.removesuffix('.py').replace('/', '.')}" in result.stdout


def _import_graph():
    return grimp.build_graph("gradlab", cache_dir=None)


def _contract() -> dict:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["id"] == "layers"]
    return contract


@pytest.mark.parametrize("package", ["gradlab", "gradlab.plotting"])
def test_package_inits_the_contract_cannot_list_reach_no_study(package):
    # A contract source includes its descendants, so the package inits of gradlab and
    # gradlab.plotting (library) cannot be listed; their own imports are checked here.
    graph = _import_graph()
    forbidden = set()
    for module in _contract()["forbidden_modules"]:
        forbidden |= {module} | set(graph.find_descendants(module))
    reached = sorted(
        m for m in forbidden if graph.chain_exists(importer=package, imported=m, as_packages=False)
    )
    assert reached == []


def test_every_module_is_on_one_side_of_the_contract():
    graph = _import_graph()
    contract = _contract()
    listed = set(contract["source_modules"]) | set(contract["forbidden_modules"])
    unlisted = sorted(m for m in graph.modules if m not in {"gradlab", "gradlab.plotting"}
                      and not any(m == x or m.startswith(x + ".") for x in listed))  # fmt: skip
    assert unlisted == []


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    grandchildren = sorted(graph.find_modules_directly_imported_by(child))
                    work.append((child, iter(grandchildren)))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def test_there_is_no_import_cycle_in_gradlab():
    graph = _import_graph()
    cycles = _cycles(graph)
    details = {
        " <-> ".join(cycle): [
            f"{a} -> {b} (line {d['line_number']})"
            for a in cycle for b in graph.find_modules_directly_imported_by(a) if b in cycle
            for d in graph.get_import_details(importer=a, imported=b)
        ]
        for cycle in cycles
    }  # fmt: skip
    assert cycles == [], details


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b", "p.c"):
        graph.add_module(module)
    graph.add_import(importer="p.a", imported="p.b")
    graph.add_import(importer="p.b", imported="p.c")
    assert _cycles(graph) == []
    graph.add_import(importer="p.c", imported="p.a")
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _owner(module: str) -> str:
    """The package that owns ``module``'s first private part (``a.b._c.d`` -> ``a.b``)."""
    parts = module.split(".")
    first = next(i for i, part in enumerate(parts) if _is_private(part))
    return ".".join(parts[:first])


def private_imports_across_packages(paths) -> list[str]:
    """``importer: from X import _name`` (or a private module) where the importer does not lie
    inside the package that owns the private name (Python's convention: a ``_name`` of package
    P is P's own, usable by P's modules and subpackages)."""
    found = []
    for path in paths:
        importer = _module_name(path)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            imported = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                source = node.module
                source_is_package = (ROOT / source.replace(".", "/") / "__init__.py").exists()
                package = source if source_is_package else source.rpartition(".")[0]
                if any(_is_private(part) for part in source.split(".")):
                    imported.append((source, _owner(source)))
                imported += [(f"{source}.{a.name}", package) for a in node.names
                             if _is_private(a.name)]  # fmt: skip
            elif isinstance(node, ast.Import):
                imported += [(a.name, _owner(a.name)) for a in node.names
                             if any(_is_private(part) for part in a.name.split("."))]  # fmt: skip
            for name, owner in imported:
                if not name.startswith("gradlab"):
                    continue
                inside = importer == owner or importer.startswith(owner + ".")
                if not inside:
                    found.append(f"{importer} (line {node.lineno}): {name}")
    return found


def _sources():
    """gradlab/ and the scripts that use it (analyses/, tools/, benchmarks/)."""
    folders = [PACKAGE, ROOT / "analyses", ROOT / "tools", ROOT / "benchmarks"]
    return [path for folder in folders for path in sorted(folder.rglob("*.py"))]


@pytest.mark.slow
def test_no_private_name_is_imported_across_packages():
    assert private_imports_across_packages(_sources()) == []


def test_the_private_name_scan_tells_inside_from_across(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "gradlab" / "data").mkdir(parents=True)
    (tmp_path / "gradlab" / "data" / "__init__.py").write_text("")
    (tmp_path / "gradlab" / "__init__.py").write_text("from gradlab._version import v\n")
    (tmp_path / "gradlab" / "data" / "a.py").write_text("from gradlab.data.b import _pools\n")
    (tmp_path / "gradlab" / "data" / "c.py").write_text("from gradlab._version import v\n")
    across = tmp_path / "gradlab" / "studies.py"
    across.write_text("import os\nfrom gradlab.data.b import _pools, public\n"
                      "import gradlab.data._cache\n"
                      "from gradlab.data._cache import x\n")  # fmt: skip
    files = sorted((tmp_path / "gradlab").rglob("*.py"))
    assert private_imports_across_packages(files) == [
        "gradlab.studies (line 2): gradlab.data.b._pools",
        "gradlab.studies (line 3): gradlab.data._cache",
        "gradlab.studies (line 4): gradlab.data._cache",
    ]


def _side_doors(paths) -> list[str]:
    """Calls that load a gradlab module by name at run time (``importlib.import_module``,
    ``__import__``) with a literal starting with ``gradlab``: edges no import reader sees."""
    found = []
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Call) or not node.args:
                continue
            function = node.func
            name = function.attr if isinstance(function, ast.Attribute) else getattr(
                function, "id", "")  # fmt: skip
            first = node.args[0]
            if (name in {"import_module", "__import__"} and isinstance(first, ast.Constant)
                    and str(first.value).startswith("gradlab")):  # fmt: skip
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {first.value}")
    return found


@pytest.mark.slow
def test_no_module_loads_gradlab_through_importlib():
    assert _side_doors(sorted(PACKAGE.rglob("*.py"))) == []


def test_the_side_door_scan_finds_one(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    door = tmp_path / "door.py"
    door.write_text("import importlib\nimportlib.import_module('gradlab.experiments.x')\n"
                    "importlib.import_module('wandb')\n__import__('gradlab.report')\n")  # fmt: skip
    assert _side_doors([door]) == [
        "door.py:2: gradlab.experiments.x",
        "door.py:4: gradlab.report",
    ]


def _design_names(text: str) -> set[str]:
    """The modules a stretch of docs/design.md names in backticks (``functional/``,
    ``plotting/monitor.py``, ``siglip_loss``), as dotted gradlab module names."""
    import re

    names = set()
    for name in re.findall(r"`([a-z_/]+?)(?:\.py)?/?`", text):
        names.add("gradlab." + name.strip("/").replace("/", "."))
    return names


def test_the_design_page_puts_every_module_on_the_side_the_contract_does():
    # the page's Layers paragraph lagged behind the contract (equivalence, jsonio, memory, ...
    # were library; backbones a study) and its tree left modules out
    text = (ROOT / "docs" / "design.md").read_text()
    paragraph = text.split("## Layers", 1)[1].strip().split("\n\n", 1)[0]
    library, studies = paragraph.split("**The studies**", 1)
    contract = _contract()
    missing_library = sorted(m for m in contract["source_modules"]
                             if m not in _design_names(library) and m != "gradlab._version")
    missing_studies = sorted(m for m in contract["forbidden_modules"]
                             if m not in _design_names(studies)
                             and not m.startswith("gradlab.plotting."))  # "study plotting"
    assert (missing_library, missing_studies) == ([], [])
    tree = text.split("```\ngradlab/", 1)[1].split("```", 1)[0]
    files = sorted(path.name for folder in (PACKAGE, PACKAGE / "monitor")
                   for path in folder.glob("*.py") if not path.name.startswith("_"))
    assert [name for name in files if name not in tree] == []
