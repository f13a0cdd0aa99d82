"""The audit records that fall short of the mutant done-when today, each with its reason.

One list for every test that checks the done-when; a test fails when the set changes (a new
shortfall, or a listed record fixed: then remove it here).
"""

NOT_TESTABLE_WITHOUT_MUTANTS = {
    # Empirical claims the audit cannot rerun (not testable here): no slips written yet.
    "002_9d7d2555864f9baa:claim-fig-s1-s4-gains": "not testable here; no slips written yet",
    "002_9d7d2555864f9baa:claim-p-explains-table5": "not testable here; no slips written yet",
    "002_9d7d2555864f9baa:claim-p-grows-with-batch-size": "not testable here; no slips written",
}

SURVIVORS_JUDGED_EQUIVALENT = {
    # Judged equivalent by hand, not yet proved by the engine.
    "004_e426679a66883031:eq3": "4 strict/non-strict flips of a kernel continuous at its ends",
    "004_e426679a66883031:claim-algorithm1-guard": "1 - Delta >= s is 1 - s >= Delta",
    "004_e426679a66883031:claim-lemma1-value": "a flip Piecewise never reaches (first piece wins)",
}

KNOWN_SHORTFALLS = NOT_TESTABLE_WITHOUT_MUTANTS | SURVIVORS_JUDGED_EQUIVALENT
