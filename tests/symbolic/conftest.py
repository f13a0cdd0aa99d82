"""Audit records shared by the symbolic tests, each claim checked (with its mutants) once.

Records are computed one claim at a time and kept for the test session, so a test about one
claim (``test_claim_records.py``, and what mutation testing selects) runs that claim's check
only, while the tests about the whole audit share one pass over every claim. The cache lives in
a session fixture, not at module level: mutmut runs each mutant's tests in a process forked
after a clean run, and a module-level cache would hand it the clean run's records.
"""

from collections.abc import Callable

import pytest

from gradlab.symbolic import run_audit
from gradlab.symbolic.audit import all_claims


@pytest.fixture(scope="session")
def audit_record() -> Callable[[str], dict]:
    """``audit_record(claim_id)``: the record (with mutants) of one claim, once per session."""
    claims = {claim.id: claim for claim in all_claims()}
    cache: dict[str, dict] = {}

    def record(claim_id: str) -> dict:
        if claim_id not in cache:
            cache[claim_id] = run_audit([claims[claim_id]], mutants=True)[0]
        return cache[claim_id]

    record.claim_ids = list(claims)  # type: ignore[attr-defined]
    record.claims = claims  # type: ignore[attr-defined]
    return record


@pytest.fixture(scope="session")
def audit_records(audit_record) -> list[dict]:
    return [audit_record(claim_id) for claim_id in audit_record.claim_ids]


@pytest.fixture(scope="session")
def records(audit_records) -> dict[str, dict]:
    return {record["id"]: record for record in audit_records}
