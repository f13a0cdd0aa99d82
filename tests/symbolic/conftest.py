"""Audit records shared by the symbolic tests, each claim checked (with its mutants) once.

Records are kept for the test session, so the tests about the whole audit and the test of each
claim (``test_claim_records.py``) share one check per claim. A per-claim test that finds no
record builds its claim inside the test, from the claim's own module: mutation testing runs
only the tests that called a mutated function on the clean run, so the test of a claim must
itself call the code that builds and checks that claim. Nothing is cached at module level:
mutmut forks each mutant's run from a clean run, and a module-level cache would hand it the
clean run's records.
"""

from collections.abc import Callable

import pytest

from gradlab.symbolic import run_audit, supplementary_claims
from gradlab.symbolic.audit import MODULES, all_claims


@pytest.fixture(scope="session")
def p_vs_batch_size() -> dict:
    """The quick P-vs-m measurement that ``make audit`` passes (``gradlab audit --measure``)."""
    from gradlab.experiments import p_vs_batch_size

    return p_vs_batch_size.measure(quick=True)


@pytest.fixture(scope="session")
def audit_record(p_vs_batch_size) -> Callable[[str], dict]:
    """``audit_record(claim_id)``: the record (with mutants) of one claim, once per session.

    The claims are those of ``make audit``: the empirical claim gets the quick measurement.
    """
    ordered = all_claims(p_vs_batch_size=p_vs_batch_size)

    def claims_of(module):
        if module is supplementary_claims:
            return module.claims(p_vs_batch_size)
        return module.claims()

    module_of = {claim.id: module for module in MODULES for claim in claims_of(module)}
    cache: dict[str, dict] = {}

    def record(claim_id: str) -> dict:
        if claim_id not in cache:
            claim = next(c for c in claims_of(module_of[claim_id]) if c.id == claim_id)
            cache[claim_id] = run_audit([claim], mutants=True)[0]
        return cache[claim_id]

    record.claim_ids = [claim.id for claim in ordered]  # type: ignore[attr-defined]
    record.claims = {claim.id: claim for claim in ordered}  # type: ignore[attr-defined]
    record.cache = cache  # type: ignore[attr-defined]
    return record


@pytest.fixture(scope="session")
def audit_records(audit_record) -> list[dict]:
    claims = audit_record.claims.values()
    missing = [claim for claim in claims if claim.id not in audit_record.cache]
    for fresh in run_audit(missing, mutants=True):
        audit_record.cache[fresh["id"]] = fresh
    return [audit_record.cache[claim_id] for claim_id in audit_record.claim_ids]


@pytest.fixture(scope="session")
def records(audit_records) -> dict[str, dict]:
    return {record["id"]: record for record in audit_records}
