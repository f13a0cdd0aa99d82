"""Each claim's definition (no check run) against the committed audit, in milliseconds.

``test_claim_records.py`` compares whole records, which runs every claim's check and its
mutants' checks: seconds per claim. Most of a claim module is the definitions themselves (the
printed form, its correction, the mutants and their names, the method and note), and a wrong
definition shows in the record's text without running anything. This test compares those texts
only, so mutation testing (which runs the fastest covering test first) rejects a changed
definition in milliseconds and keeps the slow record tests for the checks.

The expected texts are those of ``benchmarks/results/audit.json``, the reviewed output of
``make audit`` (``test_claim_records.py`` keeps that file in step with the code).
"""

import json
from pathlib import Path

import pytest
import sympy

from gradlab.symbolic.audit import MODULES
from gradlab.symbolic.claims import SLIP, claim_mutants

TEXTS = ("statement", "formula", "latex", "correction")
AUDIT_JSON = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "audit.json"


def _committed_records() -> dict[str, dict]:
    return {record["id"]: record for record in json.loads(AUDIT_JSON.read_text())}


def _is_sign_flip(value, printed) -> bool:
    """Whether ``value`` is exactly ``-printed`` (SymPy expressions only: a dict of pieces or a
    code listing never is)."""
    if not (isinstance(value, sympy.Expr) and isinstance(printed, sympy.Expr)):
        return False
    return value == -printed  # negated() builds exactly this expression


def _module_name(module) -> str:
    return module.__name__.rsplit(".", 1)[-1]


@pytest.mark.slow
@pytest.mark.parametrize("module", MODULES, ids=_module_name)
def test_every_claim_definition_matches_the_committed_audit(module) -> None:
    committed = _committed_records()
    claims = module.claims()
    assert claims, f"{_module_name(module)} defines no claim"
    for claim in claims:
        record = committed.get(claim.id)
        assert record is not None, f"{claim.id} is not in the committed audit (run make audit)"
        defined = {
            "seed": claim.seed,
            "label": claim.label,
            "statement": claim.statement,
            "formula": claim.printed.text(),
            "latex": claim.printed.latex(),
            "correction": claim.correction.text() if claim.correction else None,
            "method": claim.method,
            "mutants": [(m.name, m.text()) for op, m in claim_mutants(claim) if op == SLIP],
        }
        expected = {
            "seed": record["seed"],
            "label": record["label"],
            **{key: record["claim"][key] for key in TEXTS},
            "method": record["method"],
            "mutants": [(m["mutant"], m["formula"]) for m in record["mutant_results"]
                        if m["operator"] == SLIP],  # the hand-written slips
        }
        assert defined == expected, claim.id
        # Form.name's documented values (public attributes the audit's texts do not show): the
        # printed form is "printed"; a correction is "corrected", or names the mutation of the
        # printed form it is (a correction that only flips the printed sign: "sign flipped").
        assert claim.printed.name == "printed", claim.id
        if claim.correction is not None:
            flipped = _is_sign_flip(claim.correction.value, claim.printed.value)
            expected_name = "sign flipped" if flipped else "corrected"
            assert claim.correction.name == expected_name, claim.id
        # The note ends the detail (audit_claim appends it after the check's own text).
        assert record["detail"].endswith(claim.note), claim.id


@pytest.mark.parametrize("module", MODULES, ids=_module_name)
@pytest.mark.slow
def test_no_hand_written_slip_repeats_the_printed_form_or_the_correction(module) -> None:
    """The audit leaves such a slip out (it is not a slip: checking it would test nothing), so
    a claim that lists one only seems to carry a mutant of its own."""
    for claim in module.claims():
        accepted = {claim.printed.text()}
        if claim.correction is not None:
            accepted.add(claim.correction.text())
        repeated = [slip.name for slip in claim.mutants if slip.text() in accepted]
        assert repeated == [], claim.id


def test_every_claim_checked_on_a_printed_result_says_the_experiment_was_not_rerun():
    # a table's or a figure's printed outcome (not a dataset's counts) holds only of what was
    # printed: its record must say so, or the audit reads as a reproduction
    import re

    from gradlab.symbolic.audit import all_claims
    from gradlab.symbolic.claims import PRINTED_RESULTS_ONLY

    on_results = [claim for claim in all_claims()
                  if re.search(r"arithmetic on (Table|the printed)|printed table|printed AP",
                               claim.method)]  # fmt: skip
    assert len(on_results) >= 8
    assert [c.id for c in on_results if PRINTED_RESULTS_ONLY not in c.note] == []
