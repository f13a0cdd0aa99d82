"""Audit records shared by the symbolic tests, each claim checked (with its mutants) once.

The records are computed one claim at a time and cached, so a test about one claim (as
``test_claim_records.py`` has, and as mutation testing selects) runs that claim's check only,
while the tests about the whole audit share one pass over every claim.
"""

import functools

import pytest

from gradlab.symbolic import run_audit
from gradlab.symbolic.audit import all_claims


@functools.cache
def _claims_by_id() -> dict:
    return {claim.id: claim for claim in all_claims()}


@functools.cache
def audit_record(claim_id: str) -> dict:
    """The audit record (with mutants) of one claim, computed once per test process."""
    return run_audit([_claims_by_id()[claim_id]], mutants=True)[0]


@pytest.fixture(scope="session")
def audit_records() -> list[dict]:
    return [audit_record(claim_id) for claim_id in _claims_by_id()]


@pytest.fixture(scope="session")
def records(audit_records) -> dict[str, dict]:
    return {record["id"]: record for record in audit_records}
