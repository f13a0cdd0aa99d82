"""Each claim reproduces its committed record: verdict, detail, formulas, every mutant's verdict.

``benchmarks/results/audit.json`` is what ``make audit`` wrote; a change to a check, a printed
form, a mutant or a detail string shows up here as the one claim whose record moved (run
``make audit docs`` and commit when the change is intended). Timings are left out.
"""

import json
import re

import pytest

from tools.readme_audit import AUDIT_JSON
from tools.readme_blocks import ROOT

COMMITTED = {record["id"]: record for record in json.loads((ROOT / AUDIT_JSON).read_text())}


def _without_timing(record: dict) -> dict:
    return {key: value for key, value in json.loads(json.dumps(record)).items() if key != "seconds"}


MEASURED = "claim-p-grows-with-batch-size"
"""The claim decided by the quick P-vs-m measurement, which trains networks: slow tier only."""

FAST_TIER = {
    "000_e0f8edb24a02ffe3:eq4",  # smoothap_claims: a SymPy identity
    "002_9d7d2555864f9baa:claim-table-s1",  # supplementary_claims: the pseudocode executed
    "003_9ae9ec3ce43e30ad:eq9",  # tie_aware_claims: sympy.simplify
    "003_9ae9ec3ce43e30ad:eq17",  # tie_aware_claims: mpmath
    "003_9ae9ec3ce43e30ad:eq30",  # minibatch_claims: float64 against autograd
    "004_e426679a66883031:claim-fig4-caption",  # fappy_claims: float64 on three bins
}
"""The claims whose records `make test-fast` reproduces: one or two of each claim module, each
checked (with its mutants) in a fraction of a second. Every claim together takes about 40
CPU-seconds, so the others run in the slow tier (`make test`)."""


@pytest.mark.parametrize("claim_id", [
    claim_id if claim_id in FAST_TIER and not claim_id.endswith(f":{MEASURED}")
    else pytest.param(claim_id, marks=pytest.mark.slow)
    for claim_id in sorted(COMMITTED)
])  # fmt: skip
@pytest.mark.slow
def test_claim_reproduces_its_committed_record(audit_record, claim_id):
    fresh, committed = _without_timing(audit_record(claim_id)), _without_timing(COMMITTED[claim_id])
    if claim_id.endswith(f":{MEASURED}"):
        # The miniature trains in float32, whose last bits differ between CPU instruction sets
        # (t = -2.40 where the record was made, -2.15 on an AMD EPYC): its numbers are compared
        # as numbers of the same sentence, everything else exactly.
        fresh["detail"], committed["detail"] = (NUMBER.sub("#", fresh["detail"]),
                                                NUMBER.sub("#", committed["detail"]))  # fmt: skip
    assert fresh == committed


NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


@pytest.mark.slow
def test_the_fast_tier_reproduces_a_claim_of_every_claim_module():
    from gradlab.symbolic.audit import MODULES

    module_of = {claim.id: module for module in MODULES for claim in module.claims()}
    assert FAST_TIER <= set(COMMITTED)
    assert {module_of[claim_id] for claim_id in FAST_TIER} == set(MODULES)


@pytest.mark.slow  # checks every claim with its mutants: about 40 CPU-seconds
def test_no_check_leaves_a_global_precision_behind(audit_record):
    # check_expansion once set mpmath.mp.dps = 40 for good, so the claims after it computed
    # their errors at 40 digits: eq16's record depended on which claims ran before it.
    import mpmath

    before = mpmath.mp.dps
    for claim_id in audit_record.claim_ids:
        if claim_id in audit_record.measured_ids:
            continue  # decided from a dict passed in: no mpmath, and measuring it trains
        audit_record(claim_id)
        assert mpmath.mp.dps == before, claim_id


@pytest.mark.slow
def test_a_callers_mpmath_precision_does_not_change_a_record(audit_record):
    import mpmath

    from gradlab.symbolic import run_audit

    claim_id = "003_9ae9ec3ce43e30ad:eq16"  # its detail prints a float error at mpmath precision
    with mpmath.workdps(40):
        record = run_audit([audit_record.claim_of(claim_id)], mutants=True)[0]
    assert _without_timing(record) == _without_timing(COMMITTED[claim_id])
