"""The audit records that fall short of the mutant done-when today, each with its reason.

One list for every test that checks the done-when; a test fails when the set changes (a new
shortfall, or a listed record fixed: then remove it here). Empty: every record meets it. The
empirical claims that are not testable here have no mutants and say, for every operator, why
(a check that cannot look at the authors' data rejects no form); ``gradlab.symbolic.audit.
mutant_shortfalls`` accepts that and nothing else in place of three mutants.
"""

KNOWN_SHORTFALLS: dict[str, str] = {}
"""Record id -> why it falls short of the done-when."""
