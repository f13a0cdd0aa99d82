"""Shared test settings: one torch thread per xdist worker, float64 where it matters."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)
settings.register_profile("ci", max_examples=40, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=40, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


collect_ignore_glob = ["helpers/*.py"]
"""The test helpers hold no tests and no examples; collected for doctests (``--doctest-modules``)
they imported Lightning and transformers into every worker before its first test."""

SLOW_DOCTESTS = {
    "gradlab.report.runner.run_report": "writes a whole report: seconds",
    "gradlab.plotting.scene_geometry.plot_scene_geometry": "draws and saves a figure: a second",
    "gradlab.symbolic.temperature_claims": "checks a claim in SymPy: a second",
    "gradlab.symbolic.claims.audit_claim": "audits a claim with its mutants: half a second",
    "gradlab.symbolic.claims.undecided": "audits a claim with its mutants: half a second",
    "gradlab.symbolic.audit.all_claims": "builds every paper's claims: a quarter of a second",
    "gradlab.symbolic.supplementary_claims.check_fig_s5": "a SymPy check: a fifth of a second",
    "gradlab.experiments.planner.plan": "measures a loss's time and memory: a second",
    "gradlab.experiments.planner.measure_loss": "times a loss's passes: a second",
    "gradlab.experiments.planner.PeakBytes": "collects garbage and holds 8 MiB: half a second",
    "gradlab.monitor.sinks.WandbSink": "starts an offline W&B run: half a second",
}
"""Library examples (doctests) that `make test-fast` leaves out; `make test` runs them."""

SHARED_FIXTURE_MODULES = {
    "audit": ("tests/symbolic/test_audit.py", "tests/symbolic/test_audit_mutants.py",
              "tests/symbolic/test_audit_output.py", "tests/symbolic/test_claim_records.py",
              "tests/symbolic/test_readme_audit.py"),
    "quick_report": ("tests/report/test_full_quick_report.py", "tests/report/test_side_by_side.py"),
}
"""Group -> the test modules that read one costly session fixture (the whole audit, checked
with its mutants; the quick report): under ``make test`` (``pytest -n 2 --dist loadgroup``) each
group's modules run on one worker, which builds the fixture once. xdist's own ``xdist_group``
mark does not group under pytest 9 (it renames a node id that pytest 9 no longer reads), so the
scheduler below groups by module; :data:`SHARED_FIXTURES` keeps the table complete."""

SHARED_FIXTURES = {"audit": ("audit_record", "audit_records"), "quick_report": ("quick_report",)}
"""Group -> the session fixtures its modules share; a test elsewhere that reads one is refused
at collection (it would build the fixture again on another worker)."""


def _group_of(nodeid: str) -> str | None:
    module = nodeid.split("::", 1)[0]
    return next((group for group, modules in SHARED_FIXTURE_MODULES.items()
                 if module in modules), None)  # fmt: skip


def _modules_with_module_fixtures() -> frozenset[str]:
    """The test modules that define a module-scoped fixture (``scope="module"`` in their text):
    their tests run on one worker, which builds the fixture once (split between the workers, the
    examples' module ran every example script twice, 33 s each time)."""
    root = Path(__file__).resolve().parent.parent
    modules = (root / "tests").rglob("test_*.py")
    return frozenset(path.relative_to(root).as_posix() for path in modules
                     if 'scope="module"' in path.read_text())  # fmt: skip


class _SharedFixtureScheduler:
    """xdist's scheduler hook, registered only where xdist is (``-p no:xdist``, as mutation
    testing runs, knows no such hook and would refuse it)."""

    @staticmethod
    def pytest_xdist_make_scheduler(config, log):
        """``--dist loadgroup``: xdist's load-group scheduling, each group of
        :data:`SHARED_FIXTURE_MODULES` one unit of work, each module with a module-scoped
        fixture one unit, every other test a unit of its own."""
        if config.getvalue("dist") != "loadgroup":
            return None
        from xdist.scheduler import LoadGroupScheduling

        whole_modules = _modules_with_module_fixtures()

        class SharedFixtureScheduling(LoadGroupScheduling):
            def _split_scope(self, nodeid: str) -> str:
                group, module = _group_of(nodeid), nodeid.split("::", 1)[0]
                if group is not None:
                    return f"shared fixture: {group}"
                return module if module in whole_modules else super()._split_scope(nodeid)

        return SharedFixtureScheduling(config, log)


def pytest_configure(config):
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_SharedFixtureScheduler(), "gradlab-shared-fixtures")


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by marker
def pytest_collection_modifyitems(config, items):
    for item in items:
        for group, fixtures in SHARED_FIXTURES.items():
            if set(fixtures) & set(getattr(item, "fixturenames", ())) and (
                    _group_of(item.nodeid) != group):  # fmt: skip
                raise pytest.UsageError(
                    f"{item.nodeid} reads the shared session fixture {fixtures} of group "
                    f"{group!r}: add its module to SHARED_FIXTURE_MODULES in tests/conftest.py")
    for item in items:
        if isinstance(item, pytest.DoctestItem) and item.name in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def offline_trackers(monkeypatch, tmp_path):
    """W&B offline and quiet, MLflow without telemetry: no network. MLflow's default store is
    ``sqlite:///mlflow.db`` in the working folder (the repository's root under ``make test``):
    a test's store is ``tmp_path/mlflow.db`` unless it sets another."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DISABLE_CODE", "true")
    monkeypatch.setenv("WANDB_DISABLE_GIT", "true")
    # W&B waits 30 s for its service process to start and 90 s for a run to: a loaded machine
    # (the suite on 2 cores beside other jobs) once took longer, and the sink, not strict,
    # dropped the records: "no offline run found" instead of the cause
    monkeypatch.setenv("WANDB__SERVICE_WAIT", "300")
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "300")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.setenv("DO_NOT_TRACK", "true")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    yield
    # MLflow keeps its tracking URI and active run in globals: leave none behind.
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        while mlflow.active_run() is not None:
            mlflow.end_run()
        mlflow.set_tracking_uri(None)  # None: back to MLFLOW_TRACKING_URI or the default


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C (SIGINT) raises KeyboardInterrupt in this process during the test, as at a
    terminal, also when the suite runs with SIGINT ignored (started as a background job)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(autouse=True)
def _an_idle_machine():
    """Each test sees an idle machine (a load average of 0): gradlab plan and gradlab study say
    when other processes hold the cores their times are taken on, which would otherwise
    depend on what else runs beside the tests. A test of that note sets the load itself.
    A patch of its own, not the ``monkeypatch`` fixture: an autouse fixture that asked for it
    would set it up before a test's other fixtures, and undo the test's own patches (of
    ``os.kill``) only after those fixtures' teardown had run under them."""
    patch = pytest.MonkeyPatch()
    if hasattr(os, "getloadavg"):
        patch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    yield
    patch.undo()


@pytest.fixture(autouse=True)
def _progress_mode_of_the_process():
    """Each test starts with the progress mode of a fresh process: a command run with
    ``--no-progress`` sets it for the whole process (as it should, in a real run), and a later
    test in the same worker then saw no progress lines."""
    from gradlab.progress import set_progress_mode

    set_progress_mode("auto")
    yield
    set_progress_mode("auto")


REPOSITORY = Path(__file__).resolve().parent.parent
TOOL_CACHES = {"__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".import_linter_cache"}
"""What the tools write into the checkout beside the tests (bytecode, pytest's cache,
Hypothesis's example database, the linters' caches; coverage's ``.coverage*`` files too)."""


def _new_files_of_the_checkout() -> set[str] | None:
    """The untracked and ignored paths of the checkout (``git status --porcelain --ignored``,
    folders collapsed), tool caches aside; ``None`` where the tests do not run from the top of a
    git work tree (an unpacked sdist, a copy such as mutmut's ``mutants/``) or git is missing."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=REPOSITORY,
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        if top.returncode or Path(top.stdout.strip()).resolve() != REPOSITORY:
            return None
        status = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--ignored"],
                                cwd=REPOSITORY, capture_output=True, text=True, timeout=60,
                                check=True)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    paths = {entry[3:] for entry in status.stdout.split("\0") if entry[:2] in ("??", "!!")}
    return {path for path in paths
            if not any(part in TOOL_CACHES or part.startswith(".coverage")
                       for part in Path(path).parts)}  # fmt: skip


@pytest.fixture(scope="session", autouse=True)
def _tests_leave_no_files_in_the_checkout(tmp_path_factory):
    """Fails the session when its tests left new files in the repository (an MLflow store,
    ``wandb/``, a figure) instead of ``tmp_path``: ``git status`` once at the start of each
    test process and once at its end. Under pytest-xdist each worker compares its own start and
    end; a file another worker's test wrote can show in both, never a file that was there
    before. A ``--basetemp`` inside the checkout holds the tests' ``tmp_path``: not a leak."""
    base = tmp_path_factory.getbasetemp().resolve()
    before = _new_files_of_the_checkout()
    yield
    if before is None:
        return
    after = _new_files_of_the_checkout()

    def holds_the_basetemp(path: str) -> bool:
        full = (REPOSITORY / path).resolve()  # an untracked folder is listed whole: "tmp/"
        return full == base or full in base.parents or base in full.parents

    left = sorted(path for path in (after or set()) - before if not holds_the_basetemp(path))
    if left:
        pytest.fail(
            f"the tests of this process (not only the one above), or a command run beside them, "
            f"left {left} in {REPOSITORY}: tests write into tmp_path (to find the test, run the "
            "test files one at a time without -n and watch git status --ignored)",
            pytrace=False,
        )
