"""The whole audit with mutants: every record's check is tested by mutants of its accepted form.

Done when, for every record: at least 3 mutants from at least 2 operators (or a stated reason
for each operator that made none), none equal to the printed form or the correction, all killed.
The records are the session's (``audit_records``, ``make audit``'s, the measured claim with the
quick measurement), checked once for every test module that reads them.
"""

import json
import re

import pytest
import sympy as sp

from gradlab.symbolic import run_audit
from gradlab.symbolic.audit import MIN_MUTANTS, MIN_OPERATORS, mutant_shortfalls
from gradlab.symbolic.claims import SLIP, Claim, Form, Verdict, decide, symbolic_equality
from gradlab.symbolic.mutation_operators import OPERATORS
from tests.helpers.audit_shortfalls import KNOWN_SHORTFALLS

pytestmark = pytest.mark.slow

REJECTING = ("fails", "inconclusive", "not-reproduced")
"""A mutant is killed when its check rejects it; not-testable-here rejects nothing."""


def _done_when(record: dict) -> list[str]:
    """The done-when, counted here from the mutant results themselves (not from the counts)."""
    results = record["mutant_results"]
    problems = []
    operators = {result["operator"] for result in results}
    missing = [op for op in OPERATORS if op not in operators and op not in record["inapplicable"]]
    untestable = record["verdict"] == "not-testable-here" and not missing and not results
    if len(results) < MIN_MUTANTS and not untestable:
        problems.append(f"{len(results)} mutants")
    if len(operators) < MIN_OPERATORS and missing:
        problems.append(f"operators {sorted(operators)}, no reason for {missing}")
    own = {record["claim"]["formula"], record["claim"]["correction"]}
    problems += [f"equals its own form: {r['formula']}" for r in results if r["formula"] in own]
    problems += [f"survives: {r['operator']}: {r['formula']}" for r in results
                 if r["verdict"] not in REJECTING]  # fmt: skip
    return problems


def test_every_record_has_enough_mutants_none_its_own_form_all_killed(audit_records):
    short = {record["id"]: _done_when(record) for record in audit_records if _done_when(record)}
    assert set(short) == set(KNOWN_SHORTFALLS), short


def test_the_counts_agree_with_the_mutant_results(audit_records):
    for record in audit_records:
        results = record["mutant_results"]
        assert record["mutants"] == len(results), record["id"]
        assert record["mutants_killed"] == sum(r["verdict"] in REJECTING for r in results)
        assert record["mutant_operators"] == len({r["operator"] for r in results})
        assert set(record["inapplicable"]) <= set(OPERATORS), record["id"]
        assert len({r["formula"] for r in results}) == len(results), record["id"]


def test_the_engines_shortfalls_are_the_done_when(audit_records):
    for record in audit_records:
        assert bool(mutant_shortfalls(record)) == bool(_done_when(record)), record["id"]


def test_no_record_uses_internal_words(audit_records):
    pattern = re.compile(r"\bissue \d+|\bseed 00\d", re.IGNORECASE)
    found = {r["id"]: pattern.findall(json.dumps(r)) for r in audit_records}
    assert {key: words for key, words in found.items() if words} == {}


def test_a_check_that_accepts_every_mutant_fails_the_done_when():
    # the engine can fail: a check that always holds kills nothing, and the record falls short
    R = sp.Symbol("R")
    always = Claim("mine", "eq14", "C = R - 1", Form(R - 1, lhs="C"),
                   lambda form: decide(True, "accepted", ""))  # fmt: skip
    honest = Claim("mine", "eq14b", "C = R - 1", Form(R - 1, lhs="C"),
                   lambda form: symbolic_equality(form.value, R - 1, [R]))  # fmt: skip
    weak, strong = run_audit([always, honest], mutants=True)
    assert _done_when(strong) == [] and mutant_shortfalls(strong) == []
    assert len(_done_when(weak)) == weak["mutants"] >= MIN_MUTANTS
    survivors = mutant_shortfalls(weak)
    assert len(survivors) == weak["mutants"]
    assert all(line.startswith("mutant survives") for line in survivors)
    assert weak["mutants_killed"] == 0 and strong["mutants_killed"] == strong["mutants"]


def test_a_record_of_slips_alone_needs_a_reason_for_every_operator():
    code = Form("s1 - s2", render=str)
    check = lambda form: decide(form.value == "s1 - s2", "same", "differs")  # noqa: E731
    slips = tuple(Form(text, name=text, render=str) for text in ("s2 - s1", "s1 + s2", "s1"))
    without, with_reasons = run_audit([
        Claim("mine", "claim-a", "code", code, check, mutants=slips),
        Claim("mine", "claim-b", "code", code, check, mutants=slips,
              inapplicable=dict.fromkeys(OPERATORS, "code string: no SymPy tree")),
    ], mutants=True)  # fmt: skip
    assert {r["operator"] for r in without["mutant_results"]} == {SLIP}
    assert _done_when(without) == [f"operators ['{SLIP}'], no reason for {list(OPERATORS)}"]
    assert _done_when(with_reasons) == [] and mutant_shortfalls(with_reasons) == []


def test_a_not_testable_claim_needs_a_reason_for_every_operator_and_kills_nothing():
    # its mutants come back not-testable-here, as it does: none is killed, so slips would
    # survive; without mutants it meets the done-when only with a reason for every operator
    untestable = lambda form: Verdict("not-testable-here", "needs their data")  # noqa: E731
    slip = (Form("P falls", name="direction flipped", render=str),)
    code = Form("P rises", render=str)
    reasons = dict.fromkeys(OPERATORS, "needs their data: no form can be rejected")
    slipped, some, every = run_audit([
        Claim("mine", "claim-a", "P rises", code, untestable, mutants=slip, inapplicable=reasons),
        Claim("mine", "claim-b", "P rises", code, untestable, inapplicable={"sign": "data"}),
        Claim("mine", "claim-c", "P rises", code, untestable, inapplicable=reasons),
    ], mutants=True)  # fmt: skip
    assert slipped["mutants_killed"] == 0 and mutant_shortfalls(slipped)
    assert "survives: slip: P falls" in _done_when(slipped)
    assert _done_when(some) and mutant_shortfalls(some)
    assert _done_when(every) == [] and mutant_shortfalls(every) == []
