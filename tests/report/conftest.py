"""The quick report, run once for the test session by the tests that read it.

``gradlab report --quick`` takes about a minute of two cores; the test of its outputs and the
test that its sections give the same numbers side by side as one after the other read the same
run. Their modules run on one worker under ``make test`` (``SHARED_FIXTURE_MODULES`` in
``tests/conftest.py``), which runs the report once.
"""

from pathlib import Path

import pytest

from gradlab.cli import main

QUICK_REPORT_WORKERS = 2
"""The run's ``--workers``: its sections overlap their waits, its seeds run side by side."""


@pytest.fixture(scope="session")
def quick_report(tmp_path_factory) -> Path:
    """The folder of ``gradlab report --out FOLDER --quick --workers 2``."""
    out = tmp_path_factory.mktemp("quick_report") / "report"
    arguments = ["report", "--out", str(out), "--quick", "--workers", str(QUICK_REPORT_WORKERS)]
    assert main(arguments) == 0
    return out
