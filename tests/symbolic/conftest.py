"""One audit run (with mutants) shared by the symbolic tests."""

import pytest

from gradlab.symbolic import run_audit


@pytest.fixture(scope="session")
def audit_records() -> list[dict]:
    return run_audit(mutants=True)


@pytest.fixture(scope="session")
def records(audit_records) -> dict[str, dict]:
    return {record["id"]: record for record in audit_records}
