"""SymPy derivations and the audit of the seeds' printed equations (``gradlab audit``).

The claim API is public: build a :class:`Claim` from a printed :class:`Form` and a check
``check(form) -> Verdict`` (use :func:`symbolic_equality`, :func:`numeric_agreement` or
:func:`decide`), give it mutants (:func:`negated`, :func:`scaled`, :func:`substituted`,
:func:`mutant`), and run :func:`audit_claim` or :func:`run_audit`.
"""

from gradlab.extras import missing_extra

try:  # the audit extra (its claim tables use all four), checked before the submodules import it
    import mpmath  # noqa: F401
    import scipy  # noqa: F401
    import sklearn  # noqa: F401
    import sympy  # noqa: F401
except ImportError as error:
    raise missing_extra(error.name or "sympy", "audit", "gradlab.symbolic") from error

from gradlab.symbolic.audit import all_claims, format_markdown, format_table, run_audit
from gradlab.symbolic.claims import (
    VERDICTS,
    Claim,
    Form,
    Verdict,
    audit_claim,
    decide,
    evaluate,
    mutant,
    negated,
    numeric_agreement,
    scaled,
    substituted,
    symbolic_equality,
    with_parameters,
)

__all__ = [
    "VERDICTS",
    "Claim",
    "Form",
    "Verdict",
    "all_claims",
    "audit_claim",
    "decide",
    "evaluate",
    "format_markdown",
    "format_table",
    "mutant",
    "negated",
    "numeric_agreement",
    "run_audit",
    "scaled",
    "substituted",
    "symbolic_equality",
    "with_parameters",
]
