"""Audit records shared by the symbolic tests, each claim checked (with its mutants) once.

Records are kept for the test session, so the tests about the whole audit and the test of each
claim (``test_claim_records.py``) share one check per claim. A per-claim test that finds no
record builds its claim inside the test, from the claim's own module: mutation testing runs
only the tests that called a mutated function on the clean run, so the test of a claim must
itself call the code that builds and checks that claim. Nothing is cached at module level:
mutmut forks each mutant's run from a clean run, and a module-level cache would hand it the
clean run's records.

Only the empirical claim (Smooth-AP's batch-size conjecture) needs the quick P-vs-m
measurement, which trains networks (about 10 CPU-s): it is taken when that claim's record is
first asked for, so the tests of every other claim (the non-slow tier) never pay it.
"""

from collections.abc import Callable, Iterator, Mapping

import pytest

from gradlab.symbolic import run_audit
from gradlab.symbolic.audit import MODULES, all_claims

MEASURED_LABEL = "claim-p-grows-with-batch-size"
"""The one claim decided by a measurement passed in; its tests are marked slow."""


@pytest.fixture(scope="session")
def p_vs_batch_size() -> dict:
    """The quick P-vs-m measurement that ``make audit`` passes (``gradlab audit --measure``)."""
    from gradlab.experiments import p_vs_batch_size

    return p_vs_batch_size.measure(quick=True)


@pytest.fixture(scope="session")
def audit_record(request) -> Callable[[str], dict]:
    """``audit_record(claim_id)``: the record (with mutants) of one claim, once per session.

    The claims are those of ``make audit``: the empirical claim gets the quick measurement,
    taken on the first call for that claim only.
    """
    ordered = all_claims()
    module_of = {claim.id: module for module in MODULES for claim in module.claims()}
    cache: dict[str, dict] = {}

    def claim_of(claim_id: str):
        module = module_of[claim_id]
        if claim_id in record.measured_ids:
            return next(c for c in module.claims(request.getfixturevalue("p_vs_batch_size"))
                        if c.id == claim_id)  # fmt: skip
        return next(c for c in module.claims() if c.id == claim_id)

    def record(claim_id: str) -> dict:
        if claim_id not in cache:
            cache[claim_id] = run_audit([claim_of(claim_id)], mutants=True)[0]
        return cache[claim_id]

    record.claim_ids = [claim.id for claim in ordered]  # type: ignore[attr-defined]
    record.claim_of = claim_of  # type: ignore[attr-defined]
    record.measured_ids = {claim.id for claim in ordered  # type: ignore[attr-defined]
                           if claim.label == MEASURED_LABEL}  # fmt: skip
    record.cache = cache  # type: ignore[attr-defined]
    return record


class _Records(Mapping):
    """Claim id -> record, each claim checked when first read (``in`` and iteration check none)."""

    def __init__(self, audit_record: Callable[[str], dict]) -> None:
        self._record = audit_record

    def __getitem__(self, claim_id: str) -> dict:
        if claim_id not in self._record.claim_ids:
            raise KeyError(claim_id)
        return self._record(claim_id)

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self._record.claim_ids

    def __iter__(self) -> Iterator[str]:
        return iter(self._record.claim_ids)

    def __len__(self) -> int:
        return len(self._record.claim_ids)


@pytest.fixture(scope="session")
def audit_records(audit_record) -> list[dict]:
    """Every record of ``make audit`` (the measured claim included: it trains), in its order."""
    missing = [audit_record.claim_of(claim_id) for claim_id in audit_record.claim_ids
               if claim_id not in audit_record.cache]  # fmt: skip
    for fresh in run_audit(missing, mutants=True):
        audit_record.cache[fresh["id"]] = fresh
    return [audit_record.cache[claim_id] for claim_id in audit_record.claim_ids]


@pytest.fixture(scope="session")
def records(audit_record) -> Mapping[str, dict]:
    """Claim id -> record, checking only the claims a test reads."""
    return _Records(audit_record)
