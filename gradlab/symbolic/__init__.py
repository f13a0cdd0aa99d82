"""SymPy derivations and the audit of four papers' printed equations (``gradlab audit``).

The claim API is public: build a :class:`Claim` from a printed :class:`Form` and a check
``check(form) -> Verdict`` (use :func:`symbolic_equality`, :func:`numeric_agreement` or
:func:`decide`, and :func:`undecided` with the reason when it cannot decide), give it mutants
(:func:`negated`, :func:`scaled`, :func:`substituted`, :func:`mutant`), and run
:func:`audit_claim` or :func:`run_audit`.

A verdict is one of :data:`VERDICTS`; the first four are those of a derivation:

    >>> from gradlab.symbolic import VERDICTS
    >>> VERDICTS[:4]
    ('holds', 'holds-with-correction', 'fails', 'inconclusive')
"""

from gradlab.extras import require_installed

# The audit extra (its claim tables use all four), checked before the submodules import it; found,
# not imported (scikit-learn alone takes about a second to import, and only two claims read it).
require_installed(("mpmath", "scipy", "sklearn", "sympy"), "audit", "gradlab.symbolic")

from gradlab.symbolic.audit import all_claims, format_markdown, format_table, run_audit  # noqa: E402
from gradlab.symbolic.claims import (  # noqa: E402 (after the check of the extra)
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
    undecided,
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
    "undecided",
    "with_parameters",
]
