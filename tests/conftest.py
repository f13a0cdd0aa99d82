"""Shared test settings: one torch thread per xdist worker, float64 where it matters."""

import os
import signal
import sys

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
}
"""Library examples (doctests) that `make test-fast` leaves out; `make test` runs them."""


@pytest.hookimpl(tryfirst=True)  # before -m "not slow" deselects by marker
def pytest_collection_modifyitems(config, items):
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
def _progress_mode_of_the_process():
    """Each test starts with the progress mode of a fresh process: a command run with
    ``--no-progress`` sets it for the whole process (as it should, in a real run), and a later
    test in the same worker then saw no progress lines."""
    from gradlab.progress import set_progress_mode

    set_progress_mode("auto")
    yield
    set_progress_mode("auto")

