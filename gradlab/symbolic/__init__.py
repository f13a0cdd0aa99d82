"""SymPy derivations and the audit of the seeds' printed equations (``gradlab audit``)."""

from gradlab.symbolic.audit import all_claims, format_markdown, format_table, run_audit
from gradlab.symbolic.claims import VERDICTS, Claim, Verdict, numeric_agreement, symbolic_equality

__all__ = [
    "VERDICTS",
    "Claim",
    "Verdict",
    "all_claims",
    "format_markdown",
    "format_table",
    "numeric_agreement",
    "run_audit",
    "symbolic_equality",
]
