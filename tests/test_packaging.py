"""The install: distribution name, metadata, extras, and what ``import gradlab`` pulls in.

The light-install checks run in subprocesses so that the test process's own imports (pytest,
hypothesis, the other tests' modules) cannot hide or cause a leak. The installed metadata is
read with :mod:`importlib.metadata`; it changes only when the package is reinstalled
(``pip install -e .``), which the first metadata test says when pyproject.toml moved ahead.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import gradlab
from gradlab import GradlabError
from gradlab.extras import (
    EXTRAS,
    MissingExtraError,
    install_hint,
    is_installed,
    missing_extra,
    require,
    require_installed,
)

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTION = "gradlab-ranking"
HEAVY = ("sympy", "mpmath", "matplotlib", "seaborn", "sklearn", "scipy", "tqdm")
"""Import names that the core (losses, functional, Monitor) must not need."""
HEAVY_DISTRIBUTIONS = {"sympy", "mpmath", "matplotlib", "seaborn", "scikit-learn", "scipy", "tqdm"}


def run_python(script: str, env: dict | None = None) -> str:
    """Run ``script`` in a fresh interpreter from the repository root; its stdout."""
    completed = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)], cwd=ROOT, capture_output=True,
        text=True, env={**os.environ, **(env or {})}, timeout=300,
    )  # fmt: skip
    assert completed.returncode == 0, completed.stderr[-4000:]
    return completed.stdout


def heavy_modules_after(statement: str) -> list[str]:
    script = f"""
        import sys
        {statement}
        heavy = {HEAVY!r}
        print(sorted({{m.split(".")[0] for m in sys.modules}} & set(heavy)))
    """
    return json.loads(run_python(script).strip().replace("'", '"'))


# --- (a) what `import gradlab` imports, and what it leaves alone ---------------------------------


@pytest.mark.slow
def test_import_gradlab_imports_no_optional_dependency_beyond_what_torch_imports():
    # torch itself imports tqdm when it is installed (torch.hub: `from tqdm import tqdm`), so the
    # baseline is what `import torch, numpy` pulls in; gradlab may add nothing to it.
    baseline = heavy_modules_after("import numpy, torch")
    with_gradlab = heavy_modules_after("import gradlab, gradlab.functional, gradlab.losses")
    assert set(with_gradlab) - set(baseline) == set()
    assert set(baseline) <= {"tqdm"}  # the check above is only meaningful if torch imports little


@pytest.mark.slow
def test_the_help_of_every_command_imports_no_optional_dependency_beyond_what_torch_imports():
    # `gradlab report --help` used to import the whole report (SymPy, SciPy, matplotlib and the
    # studies: seconds) to list its section names
    baseline = heavy_modules_after("import numpy, torch")
    for command in ("report", "audit", "plot", "study"):
        statement = (f"import contextlib, io\n        from gradlab.cli import main\n        "
                     f"with contextlib.redirect_stdout(io.StringIO()):\n            try:\n"
                     f"                main([{command!r}, '--help'])\n"
                     f"            except SystemExit:\n                pass")
        assert set(heavy_modules_after(statement)) - set(baseline) == set(), command


def test_the_report_s_section_names_are_its_sections_in_order():
    from gradlab.report import SECTION_NAMES
    from gradlab.report.runner import SECTIONS

    assert list(SECTION_NAMES) == list(SECTIONS)


def test_the_heavy_packages_are_installed_here_so_the_import_check_means_something():
    missing = [name for name in HEAVY if not is_installed(name)]
    assert missing == [], "the dev extra should install every optional package"


@pytest.mark.slow
def test_importing_gradlab_and_its_plotting_leaves_matplotlib_backend_alone():
    script = """
        import importlib, pkgutil
        import gradlab, gradlab.plotting
        for module in pkgutil.iter_modules(gradlab.plotting.__path__):
            importlib.import_module(f"gradlab.plotting.{module.name}")
        import matplotlib
        print(matplotlib.get_backend())
    """
    assert run_python(script, env={"MPLBACKEND": "svg"}).strip() == "svg"
    chosen = """
        import matplotlib
        matplotlib.use("pdf")  # a notebook's choice, made before gradlab is imported
        import gradlab.plotting, gradlab.plotting.monitor
        print(matplotlib.get_backend())
    """
    assert run_python(chosen, env={"MPLBACKEND": ""}).strip() == "pdf"


# --- (b) the installed metadata -----------------------------------------------------------------


def requirement_name(requirement: str) -> str:
    name = re.match(r"[A-Za-z0-9._-]+", requirement).group(0)
    return re.sub(r"[-_.]+", "-", name).lower()


def declared_extras() -> dict[str, list[str]]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return project["optional-dependencies"]


def test_installed_metadata_is_current_and_names_the_distribution():
    metadata = importlib.metadata.metadata(DISTRIBUTION)
    provided = set(metadata.get_all("Provides-Extra"))
    assert provided == set(declared_extras()), (
        "the installed metadata is older than pyproject.toml: run pip install --no-deps -e ."
    )
    assert metadata["Name"] == DISTRIBUTION
    assert importlib.metadata.version(DISTRIBUTION) == gradlab.__version__
    assert metadata["License-Expression"] == "MIT" and "LICENSE" in metadata.get_all("License-File")
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    assert metadata["Author"] or metadata["Author-email"]
    assert any(url.startswith("Repository, https://") for url in metadata.get_all("Project-URL"))


def test_the_version_is_written_once():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", gradlab.__version__)


def test_core_requirements_are_torch_and_numpy_only():
    requirements = importlib.metadata.requires(DISTRIBUTION)
    unconditional = {requirement_name(r) for r in requirements if "extra ==" not in r}
    assert unconditional == {"torch", "numpy"}


def extra_closure(extra: str, requirements: list[str]) -> set[str]:
    """Every distribution an extra installs, following self-references like gradlab-ranking[x]."""
    names, todo, seen = set(), [extra], set()
    while todo:
        current = todo.pop()
        seen.add(current)
        for requirement in requirements:
            marker = re.search(r'extra == "([^"]+)"', requirement)
            if marker is None or marker.group(1) != current:
                continue
            name = requirement_name(requirement)
            if name == DISTRIBUTION:
                inner = re.search(r"\[([^\]]+)\]", requirement).group(1).split(",")
                todo.extend(e.strip() for e in inner if e.strip() not in seen)
            else:
                names.add(name)
    return names


def test_the_extras_install_what_their_parts_need():
    requirements = importlib.metadata.requires(DISTRIBUTION)
    assert {"sympy", "mpmath"} <= extra_closure("audit", requirements)
    assert {"matplotlib", "seaborn"} <= extra_closure("plot", requirements)
    assert HEAVY_DISTRIBUTIONS <= extra_closure("studies", requirements)
    expected = {"pml": "pytorch-metric-learning", "tensorboard": "tensorboard", "wandb": "wandb",
                "mlflow": "mlflow-skinny", "lightning": "lightning"}  # fmt: skip
    for extra, name in expected.items():
        assert name in extra_closure(extra, requirements), extra
    everything = set().union(*(extra_closure(e, requirements) for e in [*expected, "studies"]))
    assert everything <= extra_closure("all", requirements)
    assert extra_closure("all", requirements) | {"pytest", "ruff", "playwright"} <= extra_closure(
        "dev", requirements
    )


def declared_closure(extra: str) -> set[str]:
    """Every distribution ``extra`` installs as pyproject.toml declares it (self-references
    such as gradlab-ranking[x] followed), read from the file, not the installed metadata."""
    extras, names, todo, seen = declared_extras(), set(), [extra], set()
    while todo:
        current = todo.pop()
        seen.add(current)
        for requirement in extras[current]:
            if requirement_name(requirement) == DISTRIBUTION:
                inner = re.search(r"\[([^\]]+)\]", requirement).group(1).split(",")
                todo.extend(e.strip() for e in inner if e.strip() not in seen)
            else:
                names.add(requirement_name(requirement))
    return names


@pytest.mark.slow
def test_each_command_s_extra_declares_every_package_the_command_checks_for():
    from gradlab.cli import EXTRA_OF_COMMAND

    # import name -> distribution, as installed here (PIL is Pillow's, sklearn scikit-learn's)
    distributions = importlib.metadata.packages_distributions()
    for command, (extra, modules) in EXTRA_OF_COMMAND.items():
        for module in modules:
            names = {requirement_name(name) for name in distributions[module]}
            assert names & declared_closure(extra), (command, module, extra)


def test_gradlab_extras_lists_exactly_the_declared_extras():
    assert set(EXTRAS) == set(declared_extras())


def repository_texts() -> dict[str, str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split()  # fmt: skip
    suffixes = (".py", ".md", ".toml", ".txt", ".cfg", ".yml", ".yaml", "Makefile")
    texts = {}
    for name in listed:
        path = ROOT / name
        if name.endswith(suffixes) and path.is_file():
            texts[name] = path.read_text(errors="replace")
    return texts


@pytest.mark.slow
def test_every_install_hint_names_an_existing_extra_of_the_free_name():
    texts = repository_texts()
    named = {}
    for name, text in texts.items():
        if name.startswith("tests/"):
            continue  # tests name made-up extras on purpose
        for match in re.finditer(re.escape(DISTRIBUTION) + r"\[([A-Za-z0-9_,\s-]+)\]", text):
            for extra in match.group(1).split(","):
                named.setdefault(extra.strip(), name)
        calls = r"(?<!>>> )\b(?:require|missing_extra|require_extra)\(\s*\"[^\"]+\",\s*\"([^\"]+)\""
        if name.startswith("gradlab/"):
            for match in re.finditer(calls, text):
                named.setdefault(match.group(1), name)
    assert {"plot", "audit", "pml", "lightning", "studies"} <= set(named)  # the scan finds them
    unknown = {extra: where for extra, where in named.items() if extra not in declared_extras()}
    assert unknown == {}


@pytest.mark.slow
def test_no_text_tells_users_to_install_the_taken_name():
    taken = re.compile(r"(?<![\w-])gradlab\[[a-z]")  # gradlab on PyPI is an unrelated project
    offenders = [
        name for name, text in repository_texts().items()
        if name != "CHANGELOG.md" and taken.search(text)  # the changelog records old -> new
    ]  # fmt: skip
    assert offenders == []


# --- gradlab.extras -----------------------------------------------------------------------------


def test_require_returns_the_module_when_installed():
    assert require("json", "plot") is sys.modules["json"]


@pytest.mark.parametrize(
    ("module", "extra", "feature", "start"),
    [("gradlab_no_such_package.child", "plot", "a feature", "a feature needs the "),
     ("gradlab_no_such_package", "audit", None, "gradlab_no_such_package needs the ")],
)  # fmt: skip
def test_require_names_the_extra_and_the_missing_package(module, extra, feature, start):
    expected = (
        f"{start}gradlab_no_such_package package, which is not installed; "
        f"install it with: {install_hint(extra)}"
    )
    with pytest.raises(GradlabError, match=f"^{re.escape(expected)}$"):
        require(module, extra, feature)


def test_require_names_the_package_a_module_imports_when_that_one_is_missing(tmp_path,
                                                                            monkeypatch):
    # the module is there; the package it imports is not: the message names the latter
    (tmp_path / "gradlab_wrapper_here.py").write_text("import gradlab_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(GradlabError) as caught:
        require("gradlab_wrapper_here", "plot", "a feature")
    assert str(caught.value) == (
        "a feature needs the gradlab_no_such_dependency package, which is not installed; "
        f"install it with: {install_hint('plot')}"
    )
    assert caught.value.name == "gradlab_no_such_dependency"


@pytest.mark.parametrize("extra", ["", "plots", "gradlab" + "[plot]", None])
def test_an_unknown_extra_is_refused_before_any_import(extra):
    with pytest.raises(GradlabError, match=r"extra must be one of \[.*'plot'.*\]; got "):
        require("gradlab_no_such_package", extra)
    with pytest.raises(GradlabError, match=re.escape(repr(extra))):
        install_hint(extra)


def test_missing_extra_and_is_installed():
    assert is_installed("json") and not is_installed("gradlab_no_such_package.child")
    error = missing_extra("matplotlib.pyplot", "plot")
    assert str(error).startswith("matplotlib.pyplot needs the matplotlib package")
    assert (error.name, error.extra) == ("matplotlib.pyplot", "plot")


def test_require_installed_names_the_first_missing_module_and_its_extra():
    require_installed(["json", "math"], "audit")  # present: nothing to say
    with pytest.raises(MissingExtraError) as caught:
        require_installed(["json", "gradlab_no_such_package", "gradlab_nor_this"], "audit",
                          "gradlab.symbolic")  # fmt: skip
    assert (caught.value.name, caught.value.extra) == ("gradlab_no_such_package", "audit")
    assert str(caught.value).startswith("gradlab.symbolic needs the gradlab_no_such_package")
    with pytest.raises(GradlabError, match="extra must be one of"):
        require_installed(["json"], "no_such_extra")


def test_a_missing_extra_is_a_gradlab_error_and_an_import_error():
    # code that skips an optional part on `except ImportError` (the report's sections) still can
    for caught in (GradlabError, ImportError, ValueError):
        with pytest.raises(caught):
            require("gradlab_no_such_package", "studies")


# --- (c) the core works with every optional package blocked -------------------------------------

BLOCKER = """
import importlib.abc, sys

BLOCKED = set({blocked!r})


class Blocker(importlib.abc.MetaPathFinder):
    # as if the packages were not installed: any import of them fails
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked)", name=name)
        return None


assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
sys.meta_path.insert(0, Blocker())
"""

BLOCKED = (*HEAVY, "tensorboard", "pytorch_metric_learning", "lightning")


@pytest.mark.slow
def test_the_core_works_without_any_optional_package(tmp_path):
    script = BLOCKER.format(blocked=BLOCKED) + textwrap.dedent(f"""
        import doctest, importlib, inspect, json, pkgutil
        import torch
        import gradlab, gradlab.functional, gradlab.losses

        torch.manual_seed(0)
        results = {{}}

        # every public loss: embedding losses take (embeddings, labels), score losses
        # (scores, positives); forward and backward, finite
        embeddings = torch.randn(12, 8, dtype=torch.float64, requires_grad=True)
        labels = torch.arange(4).repeat_interleave(3)
        queries = torch.randn(6, 8, dtype=torch.float64, requires_grad=True)
        candidates = torch.randn(6, 8, dtype=torch.float64)
        positives = torch.eye(6, dtype=torch.bool)
        losses = [
            getattr(gradlab, n) for n in gradlab.__all__
            if n.endswith("Loss") and getattr(gradlab, n) is not gradlab.RankingLoss
        ]
        for cls in losses:
            loss_fn = cls()
            try:
                loss, leaf = loss_fn(embeddings, labels), embeddings
            except (gradlab.GradlabError, TypeError) as first:
                try:
                    scores = torch.nn.functional.normalize(queries, dim=1) @ candidates.T
                    loss, leaf = loss_fn(scores, positives), queries
                except (gradlab.GradlabError, TypeError):
                    raise first
            leaf.grad = None
            loss.backward()
            assert torch.isfinite(loss) and torch.isfinite(leaf.grad).all(), cls.__name__
            results[cls.__name__] = float(loss.detach())

        # the Monitor with its JSONL sink over a few steps
        model = torch.nn.Linear(8, 4).double()
        inputs = torch.randn(12, 8, dtype=torch.float64)
        with gradlab.Monitor({str(tmp_path / "run")!r}, sinks=["jsonl"]) as monitor:
            loss_fn = monitor.watch(gradlab.SmoothAPLoss(tau=0.05))
            for _ in range(3):
                loss_fn(model(inputs), labels).backward()
                monitor.step()

        # the runnable examples of gradlab.functional and gradlab.losses, but those of the one
        # function whose float64 reference is SciPy's digamma and its result (checked below)
        modules = [gradlab.losses] + [
            importlib.import_module(f"gradlab.functional.{{m.name}}")
            for m in pkgutil.iter_modules(gradlab.functional.__path__)
        ]
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        examples = 0
        for module in modules:
            for test in doctest.DocTestFinder().find(module, module.__name__):
                if test.examples and not test.name.endswith((".harmonic_log_error",
                                                                   ".HarmonicLogError")):
                    runner.run(test)
                    examples += len(test.examples)
        assert runner.failures == 0, runner.failures
        results["doctest_examples"] = examples

        # parts that need an extra say which one
        def error_of(action):
            try:
                action()
            except gradlab.GradlabError as error:
                return str(error)
            raise AssertionError(f"no GradlabError from {{action}}")

        from gradlab.progress import progress, set_progress_mode
        set_progress_mode("bar")
        results["missing"] = [
            ["plot", error_of(lambda: importlib.import_module("gradlab.plotting.monitor"))],
            ["tensorboard", error_of(lambda: gradlab.Monitor({str(tmp_path / "tb")!r},
                                                             sinks=["tensorboard"]))],
            ["pml", error_of(lambda: importlib.import_module("gradlab.interop.pml"))],
            ["audit", error_of(lambda: importlib.import_module("gradlab.symbolic"))],
            ["audit", error_of(lambda: gradlab.functional.harmonic_log_error(10.0, 2.0))],
            ["lightning", error_of(
                lambda: importlib.import_module("gradlab.integrations.lightning"))],
            ["studies", error_of(lambda: progress(range(2), desc="a stage"))],
            ["studies", error_of(
                lambda: importlib.import_module("gradlab.data").load_digits_split())],
        ]
        results["leaked"] = sorted({{m.split(".")[0] for m in sys.modules}} & BLOCKED)
        print(json.dumps(results))
    """)
    results = json.loads(run_python(script).strip().splitlines()[-1])
    assert len([name for name in results if name.endswith("Loss")]) >= 6
    assert results["doctest_examples"] > 20
    assert results["leaked"] == []
    for extra, message in results.pop("missing"):
        assert f"pip install 'gradlab-ranking[{extra}]'" in message, message
    log = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in log if '"step"' in line]
    assert [record["step"] for record in records] == [0, 1, 2]
    assert all(len(record) > 3 for record in records)  # the default preset's quantities


@pytest.mark.slow
def test_import_gradlab_is_lazy_and_its_names_are_the_modules_objects():
    """``import gradlab`` loads no torch (so the CLI refuses bad options before paying for it);
    each top-level name resolves, on first use, to the object its module defines."""
    code = """
import sys
import gradlab
print("torch" in sys.modules)
import gradlab.losses, gradlab.monitor, gradlab.functional, gradlab.siglip_loss
same = [getattr(gradlab, n) is getattr(gradlab.losses, n)
        for n in gradlab.__all__ if n.endswith(("Loss", "Warning")) and n != "SigLIPLoss"]
print(len(same), all(same), gradlab.Monitor is gradlab.monitor.Monitor,
      gradlab.SigLIPLoss is gradlab.siglip_loss.SigLIPLoss)
try:
    gradlab.no_such_name
except AttributeError as error:
    print("AttributeError", error)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    lines = result.stdout.splitlines()
    assert lines[0] == "False"
    assert lines[1] == "8 True True True"
    assert lines[2] == "AttributeError module 'gradlab' has no attribute 'no_such_name'"


@pytest.mark.slow
def test_import_gradlab_symbolic_loads_scikit_learn_only_when_a_claim_reads_it():
    # scikit-learn's import costs about a second; two claims use it as their AP reference
    code = """
import sys
import gradlab.symbolic
print("sklearn" in sys.modules)
from gradlab.symbolic.smoothap_claims import claims
claim = next(c for c in claims() if "scikit-learn" in c.method)
print(gradlab.symbolic.audit_claim(claim)["verdict"] in gradlab.symbolic.VERDICTS,
      "sklearn" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.split() == ["False", "True", "True"]


def test_the_cli_refuses_an_unwritable_output_before_importing_torch():
    code = """
import sys
from gradlab.cli import main
print(main(["audit", "--json", "/proc/x.json"]), "torch" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)  # fmt: skip
    assert result.stdout.split() == ["2", "False"]
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("argv", "blocked", "extra"),
    [
        (["audit"], "scipy", "audit"),
        (["audit", "--mutants"], "sklearn", "audit"),
        (["report", "--quick", "--out", "{tmp}/r"], "matplotlib", "studies"),
        (["report", "--only", "no_such_section"], "tqdm", "studies"),
        (["plot", "{tmp}/no_such_run"], "seaborn", "plot"),
    ],
)
def test_a_command_without_its_extra_is_one_line_and_exit_2(tmp_path, argv, blocked, extra):
    """Each command checks its extra before any work: one line naming the extra, exit code 2,
    nothing written (a user who installed only the core, or only ``[plot]``)."""
    argv = [word.replace("{tmp}", str(tmp_path)) for word in argv]
    code = f"""
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {blocked!r}:
            raise ImportError(f"blocked {{name}}", name=name)
        return None

sys.meta_path.insert(0, Block())
from gradlab.cli import main
print(main({argv!r}))
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)  # fmt: skip
    assert result.stdout.strip() == "2", result.stderr[-3000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"pip install '{DISTRIBUTION}[{extra}]'" in lines[0]
    assert list(tmp_path.iterdir()) == []


def test_a_copy_installed_from_a_folder_is_told_how_to_add_an_extra_there(tmp_path):
    """The distribution name is the index's; a clone installed with ``pip install -e .`` (or
    ``pip install .``) is also given the command for its own folder, which works whether or
    not the name is on the index. The folder and mode are pip's record of this install."""
    records = [found.read_text("direct_url.json")
               for found in importlib.metadata.distributions(name="gradlab-ranking")]  # fmt: skip
    recorded = next((json.loads(text) for text in records if text), None)
    index_form = "pip install 'gradlab-ranking[plot]'"
    if recorded is None or not recorded["url"].startswith("file://"):
        assert install_hint("plot") == index_form
    else:
        folder = recorded["url"].removeprefix("file://")
        mode = "-e " if recorded["dir_info"].get("editable") else ""
        assert install_hint("plot") == (f"pip install {mode}'{folder}[plot]' (the folder this "
                                        f"copy was installed from; from the package index: "
                                        f"{index_form})")  # fmt: skip
    assert install_hint("plot", installed_from=None) == index_form
    odd = tmp_path / "it's here"
    hint = install_hint("audit", installed_from=(odd, False))
    assert hint.startswith(f"pip install {shlex.quote(f'{odd}[audit]')} (the folder this copy")
    assert shlex.split(hint.split(" (the folder")[0]) == ["pip", "install", f"{odd}[audit]"]


@pytest.mark.slow
def test_the_report_without_its_plotting_packages_names_the_studies_extra():
    # matplotlib hidden (a finder that refuses it): importing the report names the extra that
    # installs every package the report needs, not the plotting extra of its first import
    out = run_python("""
        import sys
        class Refuse:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("matplotlib", "seaborn"):
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        sys.meta_path.insert(0, Refuse())
        try:
            from gradlab.report import run_report
        except Exception as error:
            print(type(error).__name__, error.extra, str(error).split(";")[0])
    """)
    assert out.strip() == ("MissingExtraError studies gradlab.report needs the matplotlib "
                           "package, which is not installed")


def test_the_mlflow_extra_installs_the_store_mlflow_writes_to_by_default():
    # MLflow 3 tracks into sqlite:///mlflow.db unless told otherwise: with mlflow-skinny alone
    # (the extra's only requirement) the MLflow sink dropped every record there
    assert {"mlflow-skinny", "sqlalchemy", "alembic"} <= declared_closure("mlflow")
