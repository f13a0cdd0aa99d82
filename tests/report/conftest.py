"""The quick report, run once for the test session by the tests that read it.

``gradlab report --quick`` takes about a minute of two cores; the test of its outputs and the
test that its sections give the same numbers side by side as one after the other read the same
run. A test that asks for :func:`quick_report` runs on the worker that holds it (``make test``
runs ``pytest -n 2 --dist loadgroup``).
"""

from pathlib import Path

import pytest

from gradlab.cli import main

QUICK_REPORT_WORKERS = 2
"""The run's ``--workers``: its sections overlap their waits, its seeds run side by side."""


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the group marks
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here) and "quick_report" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("quick_report"))


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory) -> Path:
    """The folder of ``gradlab report --out FOLDER --quick --workers 2``."""
    out = tmp_path_factory.mktemp("quick_report") / "report"
    arguments = ["report", "--out", str(out), "--quick", "--workers", str(QUICK_REPORT_WORKERS)]
    assert main(arguments) == 0
    return out
