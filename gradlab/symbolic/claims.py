"""Claims as data, checks as functions of that data, verdicts derived by computation.

A :class:`Claim` holds the *printed form* of a statement once, as a :class:`Form`: a SymPy
expression, or the parameters of a small numeric procedure transcribed from the paper, or a piece
of pseudocode. Its check is a function ``check(form) -> Verdict`` that compares the form with
what it should follow from (the definitions, autograd, brute force); the displayed formula (plain
text and LaTeX) is rendered from the same form, so display and check cannot diverge.

A correction is data too: :func:`evaluate` returns ``holds-with-correction`` only when the same
check, run on the corrected form, returns ``holds``. The check itself is tested by mutants of the
*accepted* form (the printed form when it holds, else the correction): the claim's hand-written
slips plus the mutants of :mod:`gradlab.symbolic.mutation_operators` (a flipped sign, a shifted
bound, a dropped factor or term, a changed exponent or log factor, swapped arguments). A mutant
is *killed* when the check rejects it (:data:`REJECTED`: ``fails``, ``inconclusive`` or
``not-reproduced``); a mutant of a claim that is not testable here comes back
``not-testable-here`` as its claim does, which rejects nothing. A check returns only ``holds``,
``fails`` or ``inconclusive``, and only through :func:`decide`, :func:`symbolic_equality`,
:func:`numeric_agreement` or :func:`undecided`, each of which computes the outcome.

Example: audit a derivation of your own (the gradient of the softplus ``log(1 + e^x)``):

    >>> import sympy as sp
    >>> from gradlab.symbolic import Claim, Form, audit_claim, negated, symbolic_equality
    >>> x = sp.Symbol("x", real=True)
    >>> printed = Form(sp.exp(x) / (1 + sp.exp(x)), lhs="d softplus/dx")
    >>> def check(form):
    ...     return symbolic_equality(form.value, sp.diff(sp.log(1 + sp.exp(x)), x), [x])
    >>> claim = Claim("mine", "eq1", "softplus' is the sigmoid", printed, check,
    ...               method="sympy.diff", mutants=(negated(printed),))
    >>> record = audit_claim(claim, mutants=True)
    >>> record["verdict"], record["mutants"] == record["mutants_killed"], record["mutant_operators"]
    ('holds', True, 6)
    >>> for m in record["mutant_results"][:2]:
    ...     print(m["operator"], m["formula"], m["killed"])
    slip d softplus/dx = -exp(x)/(exp(x) + 1) True
    sign d softplus/dx = exp(x)/(exp(x) - 1) True
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.mutation_operators import equivalent, generate
from gradlab.validation import check_bool, check_in_range

VERDICTS = ("holds", "holds-with-correction", "fails", "inconclusive",
            "reproduced", "not-reproduced", "not-testable-here")
"""Derivations and statements checked by computation get the first four; an empirical claim about
the authors' experiments gets ``reproduced`` / ``not-reproduced`` (each naming the setting: data,
model, steps, seeds) or ``not-testable-here`` (it needs the authors' data), never ``fails``."""
_HOLDS, _CORRECTED, _FAILS, _UNDECIDED, _REPRODUCED, _NOT_REPRODUCED, _NOT_TESTABLE = VERDICTS
_LAMBDIFIED = re.compile(r"<lambdifygenerated-\d+>")
PRINTED_RESULTS_ONLY = ("Only the printed numbers are checked: the experiment itself is not "
                        "rerun here.")
"""The note of a claim about the authors' experiments that is checked on the numbers they
printed (a table, a figure's values): its verdict says what those numbers show, not that the
experiment reproduces."""
CORRECTION_UNDECIDED = "The correction was checked, but its check could not decide it:"
"""The words of a failing claim's detail whose correction the check could not decide
(``inconclusive``): the claim stays ``fails``, wrong as printed with no correction shown to hold,
and the correction's own reason follows these words."""
FAILURES = ("wrong-value", "undefined", "ill-typed")
"""How a form that does not hold as printed fails its check (a :class:`Verdict`'s ``failure``,
a record's ``failure``), as the check found it: ``wrong-value``, it gives a number at some legal
input and the number is wrong; ``undefined``, it gives no number at some legal input (NaN, an
infinity, a division by zero, a pole) and no wrong number anywhere the check looked;
``ill-typed``, what it computes has a shape or type that cannot be the claimed object (a
``(9, 9)`` matrix where a rank per item is meant). A check that finds several says the first of
``ill-typed``, ``wrong-value``, ``undefined`` it found: a wrong number is a stronger finding
than a missing one."""
_WRONG_VALUE, _UNDEFINED, _ILL_TYPED = FAILURES
FAILURE_WORDS = dict(zip(FAILURES, (
    ("gives a wrong value", "give a wrong value"),
    ("is undefined at a legal input", "are undefined at a legal input"),
    ("has the wrong shape or type", "have the wrong shape or type"),
), strict=True))  # fmt: skip
"""Each of :data:`FAILURES` as a verb phrase, for one claim and for several."""
EMPIRICAL_VERDICTS = VERDICTS[4:]
REJECTED = (_FAILS, _UNDECIDED, _NOT_REPRODUCED)
"""The verdicts that kill a mutant: the check rejects it (``holds``, ``reproduced`` and
``not-testable-here`` do not: a check that cannot look at the data cannot reject a wrong form)."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: a verdict from :data:`VERDICTS` and what supports it.

    Example:
        >>> from gradlab.symbolic import Verdict, decide
        >>> verdict = decide(sum(range(5)) == 10, "0 + 1 + 2 + 3 + 4 = 10", "not 10")
        >>> isinstance(verdict, Verdict), verdict.verdict, verdict.detail
        (True, 'holds', '0 + 1 + 2 + 3 + 4 = 10')
    """

    verdict: str
    detail: str
    failure: str | None = None
    """For ``fails`` and ``holds-with-correction`` (the printed form's), how the form failed,
    one of :data:`FAILURES`, set by the check from what it computed (``wrong-value`` when it
    says nothing else); ``None`` for every other verdict."""

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise GradlabError(f"verdict must be one of {VERDICTS}; got {self.verdict!r}")
        if not isinstance(self.detail, str):
            raise GradlabError(f"detail must be a str (what supports the verdict); got "
                               f"{type(self.detail).__name__} {self.detail!r}")  # fmt: skip
        if self.verdict not in (_FAILS, _CORRECTED):
            if self.failure is not None:
                raise GradlabError(f"failure must be None for the verdict {self.verdict!r} (only "
                                   f"a form that fails has one); got {self.failure!r}")  # fmt: skip
        elif self.failure is None:
            object.__setattr__(self, "failure", _WRONG_VALUE)
        elif self.failure not in FAILURES:
            raise GradlabError(f"failure must be one of {FAILURES} (how the form fails); got "
                               f"{self.failure!r}")  # fmt: skip


def point_text(point: Mapping[Any, Any]) -> str:
    """A point of a verdict's detail as a reader writes it: ``x = 3/7, n = 5``.

    Example:
        >>> import sympy as sp
        >>> point_text({sp.Symbol("x"): sp.Rational(3, 7), "n": 5})
        'x = 3/7, n = 5'
    """
    return ", ".join(f"{name} = {value}" for name, value in point.items())


def _default_text(value: Any) -> str:
    if isinstance(value, sp.MatrixBase):  # one line; sstr breaks a matrix over several
        return f"Matrix({sp.sstr(value.tolist())})"
    if isinstance(value, sp.Basic):
        return sp.sstr(value)
    if isinstance(value, dict):
        return ", ".join(f"{k} = {_default_text(v)}" for k, v in value.items())
    if isinstance(value, (tuple, list)):
        return "; ".join(_default_text(v) for v in value)
    return str(value)


def _escape(text: str) -> str:
    """Plain text for ``\\text{...}``: LaTeX's special characters escaped."""
    for char in "\\{}_^&%$#~":
        text = text.replace(char, "\\" + char if char not in "\\^~" else " ")
    return text


def _default_latex(value: Any) -> str:
    if isinstance(value, sp.Basic):
        return sp.latex(value)
    if isinstance(value, dict):
        pairs = (f"\\text{{{_escape(k)}}} = {_default_latex(v)}" for k, v in value.items())
        return r",\ ".join(pairs)
    if isinstance(value, (tuple, list)):
        return r";\ ".join(_default_latex(v) for v in value)
    return r"\text{" + _escape(str(value)) + "}"


def _check_text_fields(kind: str, instance: object, names: tuple[str, ...]) -> None:
    """Refuse, by name, a field of ``instance`` (a :class:`Form` or :class:`Claim`) that is not
    a str."""
    for name in names:
        value = getattr(instance, name)
        if not isinstance(value, str):
            raise GradlabError(f"{kind}'s {name} must be a str; got {type(value).__name__} "
                               f"{value!r}")  # fmt: skip


@dataclass(frozen=True)
class Form:
    r"""A printed (or corrected, or mutated) form of a claim: the data its check receives.

    Attributes:
        value: a SymPy expression / relation, a dict of named SymPy pieces or numbers (the
            parameters of a transcribed procedure), or a code string (pseudocode, a numpy
            expression) that the check executes.
        lhs: what the value equals, for display (``"dG/dx"``); empty for bare values.
        name: ``"printed"``, ``"corrected"`` or a description of the mutation.
        render: optional ``value -> str`` for values that SymPy cannot print (pseudocode).
        context: the printed statement around the value (shown before it).

    Example:
        >>> from gradlab.symbolic import Form
        >>> import sympy as sp
        >>> z = sp.Symbol("z", real=True)
        >>> printed = Form(sp.exp(-z) / (1 + sp.exp(-z))**2, lhs="sigma'(z)")
        >>> print(printed.text())
        sigma'(z) = exp(-z)/(1 + exp(-z))**2
        >>> print(printed.latex())
        \text{sigma'(z)} = \frac{e^{- z}}{\left(1 + e^{- z}\right)^{2}}
    """

    value: Any
    lhs: str = ""
    name: str = "printed"
    render: Callable[[Any], str] | None = field(default=None, repr=False, compare=False)
    context: str = ""

    def __post_init__(self) -> None:
        if self.value is None:
            raise GradlabError("Form's value must be the printed form (a SymPy expression or "
                               "relation, a dict of parameters, or a code string); got None")
        _check_text_fields("Form", self, ("lhs", "name", "context"))
        if self.render is not None and not callable(self.render):
            raise GradlabError(f"Form's render must be None or a function value -> str; got "
                               f"{type(self.render).__name__} {self.render!r}")  # fmt: skip

    def text(self) -> str:
        """The plain-text formula, generated from :attr:`value` (``context`` names the rest)."""
        body = self.render(self.value) if self.render else _default_text(self.value)
        body = f"{self.lhs} = {body}" if self.lhs else body
        return f"{self.context}, with {body}" if self.context else body

    def latex(self) -> str:
        """The LaTeX formula, generated from :attr:`value` (pseudocode as verbatim text)."""
        if self.render is not None:
            return r"\texttt{" + _escape(self.text()) + "}"
        body = _default_latex(self.value)
        body = f"\\text{{{_escape(self.lhs)}}} = {body}" if self.lhs else body
        return f"\\text{{{_escape(self.context)}, with }} {body}" if self.context else body


def mutant(form: Form, value: Any, name: str) -> Form:
    """A hand-made mutant: ``form`` with a new value and a description of the change.

    Raises:
        GradlabError: ``form`` not a :class:`Form`, ``name`` not a non-empty str.

    Example:
        >>> from gradlab.symbolic import Form, mutant
        >>> import sympy as sp
        >>> x = sp.Symbol("x")
        >>> mutant(Form(x**2, lhs="f"), x**3, "exponent 3").text()
        'f = x**3'
    """
    if not isinstance(form, Form):
        raise GradlabError(f"form must be a Form (e.g. Form(expression, lhs=...)); got "
                           f"{type(form).__name__} {form!r}")  # fmt: skip
    if not isinstance(name, str) or not name.strip():
        raise GradlabError(f"name must be a non-empty str (what the mutant changes); got "
                           f"{name!r}")  # fmt: skip
    return replace(form, value=value, name=name)


def _check_algebraic(name: str, value: object, what: str) -> None:
    """Refuse a value that is not a SymPy expression or a number (a string, a procedure's
    dict), naming the argument and what takes it."""
    if isinstance(value, bool) or not isinstance(value, (sp.Expr, int, float)):
        relation = (" (a relation or a logical statement is not one: pass its two sides "
                    "apart)") if isinstance(value, sp.Basic) else ""  # fmt: skip
        raise GradlabError(f"{name} must be a SymPy expression or a number ({what}){relation}; "
                           f"got {type(value).__name__} {value!r}")  # fmt: skip


def negated(form: Form) -> Form:
    """The sign-flipped mutant ``-value``.

    Example:
        >>> from gradlab.symbolic import Form, negated
        >>> import sympy as sp
        >>> x = sp.Symbol("x")
        >>> negated(Form(x**2, lhs="f")).text()
        'f = -x**2'
    """
    _check_form(form)
    _check_algebraic("form.value", form.value, "negated flips its sign")
    return mutant(form, -form.value, "sign flipped")


def scaled(form: Form, factor: Any = 2) -> Form:
    """The mutant ``factor * value`` (a doubled or dropped factor).

    Example:
        >>> from gradlab.symbolic import Form, scaled
        >>> import sympy as sp
        >>> tau = sp.Symbol("tau", positive=True)
        >>> mutated = scaled(Form(1 / tau, lhs="g"), tau)  # the 1/tau dropped
        >>> mutated.name, mutated.text()
        ('multiplied by tau', 'g = 1')
    """
    _check_form(form)
    _check_algebraic("form.value", form.value, "scaled multiplies it")
    _check_algebraic("factor", factor, "scaled multiplies form.value by it")
    if sp.sympify(factor) == 1:
        raise GradlabError("factor must not be 1 (the mutant would be the form itself); got "
                           f"{factor!r}")  # fmt: skip
    if sp.sympify(factor).has(sp.nan, sp.oo, -sp.oo, sp.zoo):
        raise GradlabError(f"factor must be finite (a mutant of nan or oo times the form "
                           f"checks no slip); got {factor!r}")  # fmt: skip
    return mutant(form, form.value * factor, f"multiplied by {factor}")


def substituted(form: Form, changes: dict, name: str) -> Form:
    """The mutant with SymPy ``subs`` applied (swapped arguments, shifted indices).

    Raises:
        GradlabError: ``form`` not a :class:`Form` with a SymPy value, ``changes`` not a dict.

    Example:
        >>> from gradlab.symbolic import Form, substituted
        >>> import sympy as sp
        >>> i, j = sp.symbols("i j")
        >>> substituted(Form(i - j, lhs="D_ij"), {i: j, j: i}, "i <-> j").text()
        'D_ij = -i + j'
    """
    _check_form(form)
    if not isinstance(form.value, (sp.Basic, sp.MatrixBase)):
        raise GradlabError(f"form.value must be a SymPy object (substituted applies SymPy's "
                           f"subs); got {type(form.value).__name__} {form.value!r}")  # fmt: skip
    if not isinstance(changes, dict):
        raise GradlabError(f"changes must be a dict old -> new (e.g. {{i: j, j: i}}); got "
                           f"{type(changes).__name__} {changes!r}")  # fmt: skip
    return mutant(form, form.value.subs(changes, simultaneous=True), name)


def with_parameters(form: Form, name: str, **changes: Any) -> Form:
    """The mutant of a procedure form (a dict value) with some parameters changed.

    Raises:
        GradlabError: ``form`` not a :class:`Form` whose value is a dict, or a change of a
            parameter it does not have (a misspelt name: the mutant would change nothing).

    Example:
        >>> from gradlab.symbolic import Form, with_parameters
        >>> printed = Form({"bins": 10, "width": 0.2}, lhs="histogram")
        >>> with_parameters(printed, "one bin more", bins=11).text()
        'histogram = bins = 11, width = 0.2'
    """
    _check_form(form)
    if not isinstance(form.value, dict):
        raise GradlabError(f"form.value must be a dict of parameters (with_parameters changes "
                           f"some); got {type(form.value).__name__} {form.value!r}")  # fmt: skip
    unknown = [key for key in changes if key not in form.value]
    if unknown:
        raise GradlabError(f"with_parameters changes the form's own parameters "
                           f"({', '.join(map(repr, form.value)) or 'none'}); got "
                           f"{', '.join(map(repr, unknown))}")  # fmt: skip
    return mutant(form, {**form.value, **changes}, name)


def _check_form(form: object) -> None:
    if not isinstance(form, Form):
        raise GradlabError(f"form must be a Form (e.g. Form(expression, lhs=...)); got "
                           f"{type(form).__name__} {form!r}")  # fmt: skip


@dataclass(frozen=True)
class Claim:
    """One printed claim of a paper, its printed form as data and the check that decides it.

    Attributes:
        seed: the key of the text the claim is from (the records' ``seed`` field, the first
            part of :attr:`id`); any name, for a derivation of your own (``"my-notes"``).
        label: ``eq<N>``, ``lemma1``, ``prop2`` or ``claim-<short-name>``.
        statement: the claim in words.
        printed: the form as printed.
        check: ``check(form) -> Verdict``; returns ``holds``, ``fails`` or ``inconclusive``.
        method: how the verdict is derived.
        correction: the corrected form, if the printed one fails and a fix is known.
        mutants: hand-written "plausible slips": mutants of the accepted form (see
            :meth:`accepted`), each named by what a reader would get wrong. The audit adds the
            mutants of :mod:`gradlab.symbolic.mutation_operators` to them.
        note: context added to the verdict's detail (cites the paper's own equation numbers).
        inapplicable: operator name -> why that mutation operator does not apply to this form
            (``"pseudocode string: no SymPy tree"``).
        cause: a short identifier of the root cause that records with one underlying problem
            share (``"sign-convention D_ij = s_i - s_j"``); empty when the claim holds.
        domain: substitutions the source's definitions fix (``{b_(t+1): b_t + Delta}``, a
            positive symbol for a width), under which a mutant the check accepts is proven equal
            to the accepted form (:func:`gradlab.symbolic.mutation_operators.equivalent`).

    Example: a printed form with a sign slip, and its correction (the gradient of the InfoNCE
    loss of van den Oord, Li & Vinyals, 2018, Eq. 4, with respect to a negative logit is that
    logit's softmax probability):

        >>> from gradlab.symbolic import Claim, Form, evaluate, mutant, symbolic_equality
        >>> import sympy as sp
        >>> s = sp.symbols("s0:3", real=True)
        >>> softmax = [sp.exp(v) / sum(sp.exp(u) for u in s) for v in s]
        >>> def check(form):
        ...     return symbolic_equality(form.value, sp.diff(-sp.log(softmax[0]), s[1]), s)
        >>> printed = Form(-softmax[1], lhs="dL/ds_1")
        >>> claim = Claim("my-notes", "eq3", "InfoNCE gradient of a negative logit", printed,
        ...               check, correction=mutant(printed, softmax[1], "corrected"))
        >>> claim.id, evaluate(claim).verdict
        ('my-notes:eq3', 'holds-with-correction')
    """

    seed: str
    label: str
    statement: str
    printed: Form
    check: Callable[[Form], Verdict] = field(repr=False, compare=False)
    method: str = ""
    correction: Form | None = None
    mutants: tuple[Form, ...] = ()
    note: str = ""
    inapplicable: dict[str, str] = field(default_factory=dict, compare=False)
    cause: str = ""
    domain: dict = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        _check_text_fields("Claim", self, ("seed", "label", "statement"))
        for name in ("seed", "label"):  # the record's id is seed:label
            value = getattr(self, name)
            if not value or any(c.isspace() or c == ":" for c in value):
                raise GradlabError(f"Claim's {name} must be a non-empty name without spaces or "
                                   f"':' (the record's id is seed:label, e.g. my-notes:eq3); "
                                   f"got {value!r}")  # fmt: skip
        if not isinstance(self.printed, Form):
            raise GradlabError(
                f"Claim's printed must be a Form (e.g. Form(expression, lhs=...)); got "
                f"{type(self.printed).__name__} {self.printed!r}"
            )
        if not callable(self.check):
            raise GradlabError(
                f"Claim's check must be a callable check(form) -> Verdict; got {self.check!r}"
            )
        if self.correction is not None and not isinstance(self.correction, Form):
            raise GradlabError(
                f"Claim's correction must be None or a Form; got "
                f"{type(self.correction).__name__} {self.correction!r}"
            )
        if not isinstance(self.mutants, (tuple, list)) or not all(
            isinstance(form, Form) for form in self.mutants
        ):
            raise GradlabError(
                f"Claim's mutants must be a tuple of Forms (negated(printed), mutant(...)); "
                f"got {self.mutants!r}"
            )

    @property
    def id(self) -> str:
        return f"{self.seed}:{self.label}"

    def accepted(self, verdict: Verdict | None = None) -> Form:
        """The form the check accepts: the printed one when it holds, else the correction.

        Mutants are made from this form. Without a correction (the printed form fails or is
        undecided and no fix is known) it is the printed form.

        Args:
            verdict: the printed form's verdict, if already computed (else it is computed).
        """
        if self.correction is None:
            return self.printed
        verdict = self.check(self.printed) if verdict is None else verdict
        return self.printed if verdict.verdict == _HOLDS else self.correction


def evaluate(claim: Claim, form: Form | None = None) -> Verdict:
    """Run ``claim.check`` on the printed form, then on the correction.

    ``holds-with-correction`` comes out only for the printed form, when its check fails and the
    same check of ``claim.correction`` holds. Any other ``form`` (a mutant) gets the check's own
    verdict: a mutant is never turned into ``holds-with-correction``. A correction given for a
    printed form that does not fail is not checked, and the detail says so. When the check
    cannot decide the correction (``inconclusive``), the claim stays ``fails`` (wrong as
    printed, and no correction is shown to hold), and the detail says that the correction could
    not be decided (:data:`CORRECTION_UNDECIDED`), with the check's reason.

    Raises:
        GradlabError: ``claim`` not a :class:`Claim`, ``form`` neither ``None`` nor a
            :class:`Form`, or a check that returns no :class:`Verdict`.

    Example:
        >>> from gradlab.symbolic import Claim, Form, decide, evaluate
        >>> check = lambda form: decide(form.value == 4, "2 + 2 = 4", f"2 + 2 is not {form.value}")
        >>> claim = Claim("my-notes", "eq1", "2 + 2", Form(5), check, correction=Form(4))
        >>> print(evaluate(claim).detail)
        2 + 2 is not 5 Corrected: 4; checked: 2 + 2 = 4
        >>> evaluate(claim, Form(3)).verdict
        'fails'
    """
    if not isinstance(claim, Claim):
        raise GradlabError(f"claim must be a Claim; got {type(claim).__name__} {claim!r}")
    if form is not None:
        _check_form(form)  # an expression itself: wrap it, Form(expression)
    if form is not None and form is not claim.printed:
        return _checked(claim, form)
    first = _checked(claim, claim.printed)
    if claim.correction is None:
        return first
    if first.verdict != _FAILS:  # the correction is checked only when the printed form fails
        state = "holds" if first.verdict == _HOLDS else f"is {first.verdict}"
        return replace(first, detail=f"{first.detail} The correction given was not checked "
                       f"(only a printed form that fails is corrected; this one "
                       f"{state}).")  # fmt: skip
    fixed = _checked(claim, claim.correction)
    if fixed.verdict == _UNDECIDED:  # not shown to hold, nor shown not to
        return replace(first, detail=f"{first.detail} {CORRECTION_UNDECIDED} {fixed.detail}")
    if fixed.verdict != _HOLDS:
        return replace(first, detail=f"{first.detail} The correction was checked and does not "
                       f"hold either: {fixed.detail}")  # fmt: skip
    return Verdict(
        _CORRECTED,
        f"{first.detail} Corrected: {' / '.join(claim.correction.text().splitlines())}; "
        f"checked: {fixed.detail}",
        first.failure,  # how the printed form failed
    )


def _checked(claim: Claim, form: Form) -> Verdict:
    verdict = claim.check(form)
    if not isinstance(verdict, Verdict):
        raise GradlabError(
            f"{claim.id}: check must return a Verdict (from decide, symbolic_equality, "
            f"numeric_agreement or undecided); got {type(verdict).__name__} {verdict!r}"
        )
    if verdict.verdict == _CORRECTED:
        raise GradlabError(f"{claim.id}: a check may not return {_CORRECTED!r} itself")
    return verdict


SLIP = "slip"
"""The operator name of a hand-written mutant (a claim's ``mutants``)."""


def claim_mutants(claim: Claim, accepted: Form | None = None) -> list[tuple[str, Form]]:
    """The mutants the audit checks: the claim's slips, then the operators' mutants.

    Each is a mutant of the accepted form (:meth:`Claim.accepted`). A mutant whose text equals
    the printed form's or the correction's, or an earlier mutant's, is left out: it is not a
    slip, and checking it would test nothing. A name that several mutants share (one change
    made at two places: ``sign of term 1 flipped`` where ``1`` is added twice) is numbered in
    the order they are checked, ``sign of term 1 flipped (1 of 2)``; a name no other mutant has
    is kept as it is.

    Returns:
        ``(operator, Form)`` pairs; hand-written slips have the operator :data:`SLIP`.
    """
    accepted = claim.accepted() if accepted is None else accepted
    seen = {claim.printed.text()} | ({claim.correction.text()} if claim.correction else set())
    pairs: list[tuple[str, Form]] = []
    for form in claim.mutants:
        text = form.text()
        if text not in seen:
            seen.add(text)
            pairs.append((SLIP, form))
    # every generated mutant is checked, even of an operator the claim calls inapplicable: a
    # reason explains a missing operator, it never removes a mutant
    # at most 4 per operator (mutation_operators.CAP): the whole audit, about 1900 mutants of 125
    # claims, takes about 23 s on a two-core machine
    return _told_apart(pairs + generate(accepted, exclude_texts=seen))


def _told_apart(pairs: list[tuple[str, Form]]) -> list[tuple[str, Form]]:
    """``pairs`` with each name that several mutants share numbered ``(k of n)``."""
    totals: dict[str, int] = {}
    for _, form in pairs:
        totals[form.name] = totals.get(form.name, 0) + 1
    seen: dict[str, int] = {}
    numbered = []
    for operator, form in pairs:
        if totals[form.name] > 1:
            seen[form.name] = seen.get(form.name, 0) + 1
            form = replace(form, name=f"{form.name} ({seen[form.name]} of {totals[form.name]})")
        numbered.append((operator, form))
    return numbered


def audit_claim(claim: Claim, *, mutants: bool = False) -> dict:
    """The JSON record of one claim; with ``mutants`` every mutant is checked as well.

    With ``mutants`` the record gets ``mutated_form`` (``"printed"`` or ``"correction"``: the
    accepted form; when the check accepts neither, the correction if there is one, else the
    printed form, and then its mutants that hold are candidate corrections, not survivors of a
    weak check, as :func:`gradlab.symbolic.format_markdown` says), ``mutant_results`` (per
    mutant a dict of ``operator``, ``mutant`` (its name), ``formula``, ``verdict`` and
    ``killed``, true when the verdict is one of :data:`REJECTED` and the check accepted some
    form of the claim, the mutated one or a mutant (a check that accepts no form, one that
    rejects everything or never decides, kills nothing: its rejections tell no wrong form from
    a right one); a mutant found inconclusive
    also has ``detail``, why the check could not decide, so that a mutant the check cannot
    evaluate is told apart from one it rejects), the counts ``mutants``,
    ``mutant_operators`` (distinct operators, :data:`SLIP` included) and ``mutants_killed``,
    ``inapplicable`` (operator -> why it does not apply) and ``equivalent_mutants_dropped``
    (the operators' mutants the check accepts that SymPy proves equal to the accepted form,
    under the claim's ``domain`` when it has one, which the name then states).

    Raises:
        GradlabError: ``claim`` not a :class:`Claim`, ``mutants`` not a bool, a check that
            returns no :class:`Verdict`. An exception the check raises on the printed form or
            the correction propagates (:func:`gradlab.symbolic.run_audit` records it as
            ``inconclusive``); one it raises on a mutant makes that mutant ``inconclusive``.

    Example:
        >>> from gradlab.symbolic import Claim, Form, audit_claim, symbolic_equality
        >>> import sympy as sp
        >>> z = sp.Symbol("z", real=True)
        >>> sigma = 1 / (1 + sp.exp(-z))
        >>> printed = Form(sigma * (1 - sigma), lhs="sigma'")
        >>> check = lambda form: symbolic_equality(form.value, sp.diff(sigma, z), [z])
        >>> record = audit_claim(Claim("my-notes", "eq2", "sigma' = sigma (1 - sigma)", printed,
        ...                            check), mutants=True)
        >>> record["verdict"], record["detail"]
        ('holds', 'sympy.simplify reduces printed minus true to 0.')
        >>> record["mutants_killed"] == record["mutants"] > 0
        True
        >>> sorted(record["mutant_results"][0])  # a mutant found inconclusive adds "detail"
        ['formula', 'killed', 'mutant', 'operator', 'verdict']
    """
    if not isinstance(claim, Claim):
        raise GradlabError(f"claim must be a Claim; got {type(claim).__name__} {claim!r}")
    check_bool("mutants", mutants)
    verdict = evaluate(claim)
    record = {
        "id": claim.id,
        "seed": claim.seed,
        "label": claim.label,
        "claim": {
            "statement": claim.statement,
            "formula": claim.printed.text(),
            "latex": claim.printed.latex(),
            "correction": claim.correction.text() if claim.correction else None,
        },
        "method": claim.method,
        "verdict": verdict.verdict,
        "failure": verdict.failure,
        "detail": f"{verdict.detail} {claim.note}".strip(),
        "cause": claim.cause,
    }
    if mutants:
        printed_holds = verdict.verdict == _HOLDS
        accepted = claim.printed if printed_holds or claim.correction is None else claim.correction
        outcomes, equivalent_dropped = [], []
        given = f" (given {_default_text(claim.domain)})" if claim.domain else ""
        for operator, form in claim_mutants(claim, accepted):
            got = _mutant_verdict(claim, form)
            accepted_as_equal = operator != SLIP and got.verdict == _HOLDS
            if accepted_as_equal and equivalent(form.value, accepted.value, claim.domain or None):
                equivalent_dropped.append(form.name + given)  # proven equal: not a wrong formula
                continue
            outcome = {"operator": operator, "mutant": form.name, "formula": form.text(),
                       "verdict": got.verdict, "killed": got.verdict in REJECTED}
            if got.verdict == _UNDECIDED:  # rejected because the check could not evaluate it
                # (without the counter SymPy's lambdify puts in its code's file name, which
                # depends on what the process evaluated before: the record stays reproducible)
                outcome["detail"] = _LAMBDIFIED.sub("<lambdifygenerated>", got.detail)
            outcomes.append(outcome)
        # a no to a mutant shows the check tells forms apart only if it said yes to some form
        # (the one it mutates, or a mutant: a candidate correction); a check that says no to
        # everything, or decides nothing, kills nothing
        if not (verdict.verdict in (_HOLDS, _CORRECTED, _REPRODUCED)
                or any(o["verdict"] in (_HOLDS, _REPRODUCED) for o in outcomes)):  # fmt: skip
            for outcome in outcomes:
                outcome["killed"] = False
        record["mutated_form"] = "printed" if accepted is claim.printed else "correction"
        record["mutants"] = len(outcomes)
        record["mutant_operators"] = len({o["operator"] for o in outcomes})
        record["mutants_killed"] = sum(o["killed"] for o in outcomes)
        record["mutant_results"] = outcomes
        record["inapplicable"] = dict(claim.inapplicable)
        record["equivalent_mutants_dropped"] = equivalent_dropped
    return record


def _mutant_verdict(claim: Claim, form: Form) -> Verdict:
    """The check's verdict on a mutant; a check that raises rejects it (``inconclusive``).

    A mutant may divide by zero or take a root of a negative number where the accepted form
    does not: the checks compare the infinite or NaN values it gives, so NumPy's floating-point
    warnings for them are silenced here (they said nothing about the claim and filled
    ``gradlab report``'s output)."""
    try:
        with np.errstate(all="ignore"):
            return _checked(claim, form)
    except Exception as error:  # the mutant is malformed for the check: it is not accepted
        return undecided(f"the check raised {type(error).__name__} on this mutant: {error}")


# --- the deciding helpers: each computes its outcome ------------------------------------------


def decide(condition: bool, detail_if_holds: str, detail_if_fails: str, *,
           failure: str = _WRONG_VALUE) -> Verdict:
    """``holds`` if the *computed* ``condition`` is true, else ``fails`` with ``failure``.

    ``failure`` (one of :data:`FAILURES`) says how a form that fails fails, as the check found
    it: ``wrong-value`` (the default: the computed value differs), ``undefined`` where what it
    found is a NaN, an infinity or a division by zero at a legal input, ``ill-typed`` where it
    found a shape or type that cannot be the claimed object. It is ignored when the condition
    holds.

    Raises:
        GradlabError: ``condition`` not a bool (Python's, NumPy's or SymPy's ``true`` /
            ``false``): a number such as NaN is truthy, and a SymPy relation with free symbols
            (``x > 0``) has no truth value; a detail not a str; ``failure`` not one of
            :data:`FAILURES`.

    Example:
        >>> import math
        >>> from gradlab.symbolic import decide
        >>> decide(2**10 == 1024, "2^10 = 1024", "2^10 is not 1024")
        Verdict(verdict='holds', detail='2^10 = 1024', failure=None)
        >>> decide(float("nan") < 1e-9, "agrees", "the error is nan, not below 1e-9").verdict
        'fails'
        >>> value = float("inf")  # what the form gives at a legal input: no number
        >>> decide(math.isfinite(value), "finite", f"it is {value}", failure="undefined").failure
        'undefined'
    """
    if not isinstance(condition, (bool, np.bool_, sp.logic.boolalg.BooleanAtom)):
        relation = (" (a SymPy relation with free symbols has no truth value: substitute "
                    "numbers first)") if isinstance(condition, sp.Basic) else ""  # fmt: skip
        raise GradlabError(f"condition must be a computed bool (True or False){relation}; got "
                           f"{type(condition).__name__} {condition!r}")  # fmt: skip
    details = (("detail_if_holds", detail_if_holds), ("detail_if_fails", detail_if_fails))
    for name, detail in details:
        if not isinstance(detail, str):
            raise GradlabError(f"{name} must be a str (what supports the verdict); got "
                               f"{type(detail).__name__} {detail!r}")  # fmt: skip
    if failure not in FAILURES:
        raise GradlabError(f"failure must be one of {FAILURES} (how a form that fails fails); "
                           f"got {failure!r}")  # fmt: skip
    if condition:
        return Verdict(_HOLDS, detail_if_holds)
    return Verdict(_FAILS, detail_if_fails, failure)


def undecided(reason: str) -> Verdict:
    """``inconclusive``: the data needed to decide is missing (the reason says which).

    Example: an asymptotic claim that SymPy cannot take the limit of is not a failure.

        >>> from gradlab.symbolic import Form, decide
        >>> import sympy as sp
        >>> n = sp.Symbol("n", positive=True)
        >>> def check(form):
        ...     gap = sp.limit(form.value - sp.harmonic(n), n, sp.oo)
        ...     if not gap.is_number:  # SymPy returned an unevaluated limit
        ...         return undecided(f"sympy.limit cannot evaluate it: {gap}")
        ...     return decide(gap == 0, "the gap tends to 0", f"the gap tends to {gap}")
        >>> check(Form(sp.log(n) + sp.EulerGamma)).verdict
        'holds'
        >>> check(Form(sp.log(n))).detail
        'the gap tends to -EulerGamma'
    """
    if not isinstance(reason, str) or not reason.strip():
        raise GradlabError(f"reason must be a non-empty str (what is missing to decide); got "
                           f"{reason!r}")  # fmt: skip
    return Verdict(_UNDECIDED, reason)


def _sign(symbol: sp.Symbol, signs: random.Random) -> int:
    """The sign of a default point's coordinate: ``-1`` for a symbol declared negative or
    nonpositive, ``+1`` or ``-1`` at random for one declared real without a sign, else ``+1``
    (positive, nonnegative or undeclared: ranks, counts, temperatures)."""
    if symbol.is_nonpositive:  # negative ones too
        return -1
    if symbol.is_real and not symbol.is_nonnegative:
        return signs.choice((1, -1))
    return 1


def _random_points(symbols: Sequence[sp.Symbol], count: int, seed: int, sampler=None):
    generator = random.Random(seed)
    # A stream of its own, so that the magnitudes are those of positive symbols and a sign is
    # independent of its magnitude (Random(-seed) is Random(seed): an int seed's sign is
    # dropped, and the first symbol's sign then came from its own numerator's bits).
    signs = random.Random(f"signs {seed}")
    for _ in range(count):
        if sampler is not None:
            yield sampler(generator)
        else:
            yield {s: _coordinate(s, generator, signs) for s in symbols}


SCALES = (0, 0, 0, 1, 2, 3, 4)
"""Powers of ten a default coordinate of a symbol of either sign (a score, a logit: declared
``real=True`` alone) is divided by, drawn at random: most points at the scale of ``p / q``,
some 10 to 10,000 times smaller, near 0 (a slip of a sigmoid's slope at ``tau = 0.001`` shows
only where ``x / tau`` is of order one: at larger ``|x|`` both sides are its tails)."""


def _coordinate(symbol: sp.Symbol, generator: random.Random, signs: random.Random) -> sp.Rational:
    """A default point's coordinate: ``p / q`` (``p`` up to 97, ``q`` up to 13), for a symbol
    of either sign divided by a power of ten of :data:`SCALES`, or ``p`` alone for a symbol
    declared ``integer=True`` (a count, an index), with the sign of :func:`_sign`. ``q`` and
    the scale are drawn either way, so that the other symbols' coordinates do not depend on
    them."""
    numerator, denominator = generator.randint(1, 97), generator.randint(1, 13)
    scale = generator.choice(SCALES)
    either_sign = symbol.is_real and symbol.is_nonnegative is None and symbol.is_nonpositive is None
    if symbol.is_integer:
        magnitude = sp.Integer(numerator)
    else:
        magnitude = sp.Rational(numerator, denominator * 10 ** (scale if either_sign else 0))
    return magnitude * _sign(symbol, signs)


THRESHOLD_OFFSETS = (0, sp.Rational(-1, 97), sp.Rational(1, 97))
"""Where a threshold's points lie: at it and just either side (a shifted or a closed bound
differs from the true one there alone); an integer symbol's lie at the integers at and beside
it instead (:func:`_beside`)."""


def _thresholds(expression: sp.Expr, symbols: Sequence[sp.Symbol]) -> list[tuple]:
    """``(symbol, value)`` of every threshold of ``expression`` in one of ``symbols``: where a
    condition of a ``Piecewise`` (or any relation) turns, where two arguments of a ``Min`` or
    ``Max`` cross, where an ``Abs``, ``sign`` or ``Heaviside`` changes its branch; each a
    rational root of a difference linear in that one symbol (its slope a real constant,
    rational or not). In the order found, at most 16."""
    differences = [relation.lhs - relation.rhs
                   for relation in expression.atoms(sp.core.relational.Relational)]  # fmt: skip
    for extreme in expression.atoms(sp.Min, sp.Max):
        differences += [a - b for i, a in enumerate(extreme.args) for b in extreme.args[i + 1:]]
    for kink in expression.atoms(sp.Abs, sp.sign, sp.Heaviside):
        differences.append(kink.args[0])
    found: list[tuple] = []
    for difference in sorted(differences, key=sp.default_sort_key):
        free = difference.free_symbols
        if len(free) != 1 or not free <= set(symbols):
            continue
        (symbol,) = free
        slope = sp.diff(difference, symbol)  # a real constant, rational or not (sqrt(2))
        if not (slope.is_number and slope.is_extended_real) or slope.is_zero is not False:
            continue
        root = -difference.subs(symbol, 0) / slope
        if root.is_Rational and (symbol, root) not in found:
            found.append((symbol, root))
    return found[:16]


def _beside(symbol: sp.Symbol, root: sp.Rational) -> list[sp.Rational]:
    """The values at and beside a threshold ``root`` of ``symbol``: ``root`` plus each of
    :data:`THRESHOLD_OFFSETS`, or for a symbol declared ``integer=True`` (which takes no value
    1/97 off an integer) the integers at and beside it, the floors and ceilings of ``root``,
    ``root - 1`` and ``root + 1`` (a threshold at 98 is tried at 98, 97 and 99; one at 5/2
    at 2, 3, 1 and 4)."""
    if not symbol.is_integer:
        return [root + offset for offset in THRESHOLD_OFFSETS]
    integers: list[sp.Rational] = []
    for value in (root, root - 1, root + 1):
        for integer in (sp.floor(value), sp.ceiling(value)):
            if integer not in integers:
                integers.append(integer)
    return integers


def _threshold_points(expression: sp.Expr, symbols: Sequence[sp.Symbol], seed: int) -> list:
    """Points at and beside each threshold of :func:`_thresholds` (the other symbols at a
    default point; :func:`_beside` says where), those the symbol's declared sign allows; an
    integer that two thresholds of one symbol share is tried once."""
    points, seen = [], set()
    base = next(_random_points(symbols, 1, seed=-seed - 1))
    for symbol, root in _thresholds(expression, symbols):
        for value in _beside(symbol, root):
            allowed = not ((symbol.is_positive and value <= 0)
                           or (symbol.is_negative and value >= 0)
                           or (symbol.is_nonnegative and value < 0)
                           or (symbol.is_nonpositive and value > 0)
                           or (symbol.is_integer and (symbol, value) in seen))  # fmt: skip
            if allowed:
                seen.add((symbol, value))
                points.append({**base, symbol: value})
    return points


class _UnevaluableError(Exception):
    """Raised by :func:`_difference_at` where mpmath runs out of memory or overflows: its text
    says so, and the point is no evidence either way."""


def _difference_at(
    expression: sp.Expr, point: dict, digits: int = 50, working: int = 100
) -> sp.Expr:
    """``expression`` at ``point``: exact where it is rational, else to ``digits`` digits.

    A finite sum whose bound the point fixes is summed first (evaluating it numerically fails
    on a term ``1/0``; summed, it is ``zoo``, a witness; SymPy evaluates a product with a
    factor ``1/0`` to ``zoo`` itself). What SymPy cannot
    evaluate at all comes back as ``nan`` (no evidence at this point), not as its exception;
    where mpmath raises ``MemoryError`` or ``OverflowError`` (a number too large for it, such
    as ``exp(t) s`` inside an ``exp`` at ``t = 43``), :class:`_UnevaluableError` is raised
    instead, so that the point is named as one that cannot be evaluated.
    """
    # xreplace, not subs: a plain substitution of symbols by rationals (the expression is
    # concrete by now), re-evaluated exactly; subs' extra machinery doubled the audit's time.
    value = expression.xreplace(point)
    if value.is_Rational:
        return value
    try:
        if value.has(sp.Sum):
            value = value.doit()
            if value.is_Rational:
                return value
        return value.evalf(digits, maxn=working)  # nsimplify sent 2e-40 to 0
    except (TypeError, ValueError, NotImplementedError, ZeroDivisionError):
        return sp.nan
    except (MemoryError, OverflowError) as error:
        kind = type(error).__name__
        raise _UnevaluableError(f"too large for mpmath to evaluate ({kind})") from None


def _exact(point: dict) -> dict:
    """A sampler's point with every float replaced by the rational it stores exactly (a float
    evaluates to 15 digits, so an identity would leave a residue of 1e-17 that reads as a
    witness)."""
    exact = {}
    for symbol, value in point.items():
        value = sp.sympify(value)
        exact[symbol] = value.xreplace({f: sp.Rational(f) for f in value.atoms(sp.Float)})
    return exact


CONFIRMING_DIGITS = 5000
"""The working precision (digits) SymPy may reach when a witness whose 50- and 100-digit values
agree is evaluated the last time."""

REFINING_DIGITS = 200
"""The working precision (digits) SymPy may reach when a value whose 50- and 100-digit values
differ is evaluated the last time (every residue of an identity is)."""


def _witness(value: sp.Expr, expression: sp.Expr, point: dict) -> sp.Expr | None:
    """The witness a 50-digit ``value`` of ``expression`` at ``point`` stands for, ``None``
    when it is the residue of a cancellation, or ``nan`` when a finer evaluation gives no
    number (the point is then undefined, as one whose 50-digit value is ``nan``: no evidence
    either way).

    An exact (rational) or infinite value decides by itself. Otherwise the expression is
    evaluated again to 100 digits, SymPy's working precision held to 100 digits (as for
    ``value``), and once more under a cap of :data:`CONFIRMING_DIGITS`; it is a witness when
    that last value agrees with the capped 100-digit one to 30 digits. What an identity leaves
    of a cancellation changes with the cap, however large it is (``sin(x)**2 + cos(x)**2 - 1``;
    at ``s = -1000`` the ``-1`` that ``(e^s + 1) e^-s - (1 + e^-s)`` leaves under a cap of 100
    digits, at 50 digits and at 100 alike), while a true value keeps its leading digits, however
    small it is (a sigmoid's slope at ``x / tau = 7000`` is about ``1e-3040``). The 50-digit
    value is not compared: under a cancellation of more than about 100 digits it keeps fewer
    than 30 (``exp(s) - 1 - s`` at ``s = 3e-80`` is off by a quarter). When it differs from the
    100-digit value, as every residue's does, a cap of :data:`REFINING_DIGITS` is tried first:
    most residues change there already, at little cost, and what does not change (at
    ``s = -600`` the identity above leaves ``8.9e-103`` under both caps) meets the last cap.
    SymPy raises its working precision only where it meets a cancellation, so a higher cap
    costs nothing where there is none.
    """
    if value.is_infinite or value.is_Rational:
        return value if value != 0 else None

    def agree(first: sp.Expr, second: sp.Expr) -> bool:
        return bool(sp.Abs(first - second) <= sp.Abs(second) * sp.Rational(1, 10**30))

    rough = _difference_at(expression, point, 100, working=100)
    if rough.has(sp.nan) or not rough.is_number:  # no 100-digit value: nothing confirms it,
        return sp.nan  # nor shows it a residue: undefined there, as a nan at 50 digits is
    caps = (CONFIRMING_DIGITS,) if agree(value, rough) else (REFINING_DIGITS, CONFIRMING_DIGITS)
    for cap in caps:
        fine = _difference_at(expression, point, 100, working=cap)
        if fine.has(sp.nan) or not fine.is_number:
            return sp.nan
        if fine == 0 or not agree(rough, fine):
            return None
    return fine


def _concretize(expression: sp.Expr) -> sp.Expr:
    """Replace abstract functions ``f(x)`` by distinct concrete polynomials, then evaluate.

    An identity in abstract functions must hold for every choice, so a non-zero value for one
    concrete choice is a counterexample.
    """

    replaced = expression
    for applied, polynomial in _stand_ins(expression):
        replaced = replaced.replace(applied.func, polynomial)
    return replaced.doit()


def _stand_ins(expression: sp.Expr) -> list[tuple]:
    """``(f(x), Lambda)`` for each abstract function of ``expression``: its applications in
    name order, the ``k``-th making ``k + 3 + T_k(u)`` the function's stand-in, ``T_k`` the
    polynomial of degree :data:`STAND_IN_DEGREE` of :func:`_stand_in_terms`; of several
    arguments ``k + 3 + sum_i T_(k+i)(u_i) + (k + 1 + sum_i (k + 2)^i u_i) prod_i u_i``, whose
    mixed partials are not 0 and, from one function to the next, no multiples of each other.
    An earlier application of the same function made its stand-in (``T(0)`` and ``T(d)`` are
    one function)."""
    from sympy.core.function import AppliedUndef

    stand_ins, seen = [], set()
    for k, applied in enumerate(sorted(expression.atoms(AppliedUndef), key=str)):
        if applied.func in seen:
            continue
        seen.add(applied.func)
        arguments = [sp.Dummy(f"u{i}") for i in range(1, len(applied.args) + 1)]
        polynomial = k + 3 + sum(_stand_in_terms(u, k + i) for i, u in enumerate(arguments))
        if len(arguments) > 1:  # mixed partial derivatives of every order up to 3: not 0
            weights = k + 1 + sum((k + 2) ** i * u for i, u in enumerate(arguments, start=1))
            polynomial += sp.Mul(*arguments) * weights
        stand_ins.append((applied, sp.Lambda(tuple(arguments), sp.expand(polynomial))))
    return stand_ins


STAND_IN_DEGREE = 7
"""The degree of an abstract function's stand-in: an identity that holds for every polynomial
of this degree (one about its 8th derivative) is told apart from a true one by no point."""


def _stand_in_terms(u: sp.Symbol, k: int) -> sp.Expr:
    """``sum over i = 1..7 of c_i u^i`` with distinct non-zero rationals ``c_i`` of both signs
    (every derivative up to the 7th is non-zero, and none a multiple of another)."""
    return sum(sp.Rational((-1) ** (i * (k + 1)) * (k + 2 * i + 1), k + i + 1) * u**i
               for i in range(1, STAND_IN_DEGREE + 1))  # fmt: skip


def _stand_ins_text(expression: sp.Expr) -> str:
    """``", with R_Omega(x) = 2*x**2 + x + 3, ..."`` for the witness (empty without any); a
    function applied to other than symbols is shown of ``u``."""
    said = []
    for applied, polynomial in _stand_ins(expression):
        arguments = applied.args if all(isinstance(a, sp.Symbol) for a in applied.args) else (
            tuple(sp.Symbol("u" if len(applied.args) == 1 else f"u{i}")
                  for i in range(1, len(applied.args) + 1)))  # fmt: skip
        said.append(f"{applied.func}({', '.join(map(str, arguments))}) = "
                    f"{sp.sstr(polynomial(*arguments))}")  # fmt: skip
    return f", with {', '.join(said)}" if said else ""


def _is_zero(expression: sp.Expr, symbols: Sequence[sp.Symbol], sampler, points: int,
             also: frozenset = frozenset()):  # fmt: skip
    """``(True, None, how)`` if ``expression`` is identically zero, else a counterexample.

    Exact rational (or 50-digit) evaluation at random points first: a non-zero value is a
    counterexample. If every point vanishes, ``sympy.simplify`` is asked for a proof. ``also``:
    symbols every point must give besides the expression's (the truth's, for its value at the
    witness).
    """
    concrete = _concretize(expression)
    free = concrete.free_symbols | also
    _check_covered(free, symbols, "symbols")
    undefined = []  # (point, what it is) where printed minus true is not a finite number
    too_large = 0  # of them, the points mpmath cannot evaluate
    seed = len(symbols) * 7 + points
    # with the default points, also those at and beside each threshold (a sampler says where
    # its symbols may lie: its points alone)
    extra = [] if sampler is not None else _threshold_points(concrete, symbols, seed)
    for point in (*_random_points(symbols, points, seed=seed, sampler=sampler), *extra):
        if sampler is not None:
            if not isinstance(point, dict):
                raise GradlabError(f"sampler must return a dict symbol -> value (a point); got "
                                   f"{type(point).__name__} {point!r}")  # fmt: skip
            _check_sampled_point(point, free)
        shown = point_text(point)
        point = _exact(point)
        try:
            value = _difference_at(concrete, point)
            # nan (undefined minus undefined, 0/0) is no evidence either way at this point; an
            # infinite difference (a pole of one side only) is a witness like any non-zero one
            if value.has(sp.nan) or not value.is_number:
                undefined.append((shown, f"{value} (not a number)"))
                continue
            found = _witness(value, concrete, point)
            if found is sp.nan:  # a number at 50 digits, none when evaluated more finely
                undefined.append((shown, f"{_value_text(value)} at 50 digits and not a number "
                                         "at 100 digits"))  # fmt: skip
                continue
        except _UnevaluableError as error:  # no evidence either, as nan is: no value to go on
            undefined.append((shown, str(error)))
            too_large += 1
            continue
        if found is not None:
            how = ("exact evaluation" if value.is_Rational or value.is_infinite
                   else "100 digits, the same to 30 of them at a higher working precision")
            how += _stand_ins_text(expression)  # abstract functions: the ones evaluated
            if sampler is None:  # the symbols the witness has positive for want of a sign
                how += _drawn_positive(symbols, point)
            return False, (shown, _value_text(found), point, found), how
    if sp.simplify(expression) == 0:
        return True, None, "sympy.simplify reduces printed minus true to 0"
    where = f"{points} random points" + (
        f" and {len(extra)} at and beside its thresholds" if extra else "")
    drawn = _drawn_positive(symbols) if sampler is None else ""
    if undefined:
        shown, value = undefined[0]
        others = "" if len(undefined) == points + len(extra) else ", and vanishes at the others"
        what = (f"{value} at {len(undefined)} of {where} (the first: {shown}{drawn})"
                if too_large in (0, len(undefined)) else  # one kind of point: the first's
                f"not a number at {len(undefined) - too_large} and too large for mpmath to "
                f"evaluate at {too_large} of {where} (the first: {shown}, where it is {value}"
                f"{drawn})")
        avoid = "undefined or too large to evaluate" if too_large else "undefined"
        return None, None, (
            f"printed minus true is {what}{others}; sympy.simplify does not reduce it to 0: the "
            f"random points cannot decide (pass a sampler that avoids the points where printed "
            f"or true is {avoid})"
        )
    return True, None, f"printed minus true vanishes at {where} (50 digits{drawn})"


def _drawn_positive(symbols: Sequence[sp.Symbol], point: dict | None = None) -> str:
    """``"; x, y drawn > 0: no sign declared"`` for the symbols that the default points draw
    positive only because no sign is declared (:func:`_sign`; with ``point``, those positive
    there); empty without any. A verdict that rests on such points says so: it says nothing of
    where those symbols are negative (``sqrt(x**2)`` against ``x``)."""
    names = [str(symbol) for symbol in symbols
             if not (symbol.is_real or symbol.is_nonnegative or symbol.is_nonpositive)
             and (point is None or point[symbol] > 0)]  # fmt: skip
    return f"; {', '.join(names)} drawn > 0: no sign declared" if names else ""


def _declared(symbol: sp.Symbol) -> str:
    """The sign and kind a symbol is declared with, in words (``real, positive``)."""
    kinds = ("real", "integer", "positive", "negative", "nonnegative", "nonpositive")
    said = [kind for kind in kinds if symbol.assumptions0.get(kind)]
    return ", ".join(said) or "no assumptions"


def _check_sampled_point(point: dict, free: set) -> None:
    """Refuse a sampler's point that is not one the claim is about: a key that is not a SymPy
    symbol (its name, ``"x"``), a free symbol of printed and truth left out, or a value that is
    not a finite real number where its symbol is declared (``tau = -1`` for a positive tau, ``x
    = 1j`` for a real x, ``n = 2.5`` for an integer n, ``x = inf``, a string). Such a point
    decides nothing the claim states: at ``x = inf`` a sigmoid's slope without its ``1 / tau``
    and the true one are both 0, and the wrong form held."""
    for key in point:
        if not isinstance(key, sp.Symbol):
            raise GradlabError(f"the sampler's point must map SymPy symbols to values; got the "
                               f"key {type(key).__name__} {key!r} (use the symbol itself, not "
                               "its name)")  # fmt: skip
    _check_covered(free, point, "the sampler's point")
    for symbol in sorted(free, key=str):
        value = point[symbol]
        problem = _outside_declaration(symbol, value)
        if problem:
            raise GradlabError(
                f"the sampler's point must give each symbol a finite real number where the "
                f"symbol is declared; got {symbol} = {value!r} ({type(value).__name__}), "
                f"{problem}"
            )


def _outside_declaration(symbol: sp.Symbol, value: object) -> str | None:
    """Why ``value`` is no point of ``symbol`` (a few words), or ``None`` when it is one."""
    if isinstance(value, (str, bytes, bool, np.bool_)):
        return "which is not a number"
    try:
        number = sp.sympify(value, strict=True)
    except (sp.SympifyError, TypeError, ValueError):
        return "which is not a number"
    if not getattr(number, "is_number", False):
        return "which is not a number"
    if number.has(sp.nan) or number.is_finite is False:
        return "which is not finite"
    if number.is_real is False:
        return "which is not a real number"
    declared = _declared(symbol)
    for kind, holds in (("integer", number.is_integer), ("positive", number.is_positive),
                        ("negative", number.is_negative),
                        ("nonnegative", number.is_nonnegative),
                        ("nonpositive", number.is_nonpositive)):  # fmt: skip
        if symbol.assumptions0.get(kind) and holds is False:
            return f"but {symbol} is declared {declared}"
    return None


def _check_covered(free: set, given: Iterable, name: str) -> None:
    """Refuse, naming them, free symbols of printed minus true that ``given`` leaves out: a
    point without them cannot be evaluated to a number."""
    left_out = free - set(given)
    missing = sorted(map(str, left_out))
    if missing:
        # Symbol("x") and Symbol("x", real=True) are two symbols with one name
        named = {str(symbol): symbol for symbol in given if isinstance(symbol, sp.Symbol)}
        twins = [f"{symbol} ({_declared(symbol)}) in printed or truth, {symbol} "
                 f"({_declared(named[str(symbol)])}) in {name}"
                 for symbol in sorted(left_out, key=str) if str(symbol) in named]  # fmt: skip
        same_name = (f" ({'; '.join(twins)}: two symbols with one name; declare each once and "
                     "use it on both sides)") if twins else ""  # fmt: skip
        # the twins' explanation names what was given; else the symbols given, in full
        passed = "" if twins else f" (given: {', '.join(sorted(map(str, given))) or 'none'})"
        raise GradlabError(f"{name} must include every free symbol of printed and truth; "
                           f"missing {', '.join(missing)}{passed}{same_name}")  # fmt: skip


def symbolic_equality(
    printed: sp.Expr,
    truth: sp.Expr,
    symbols: Sequence[sp.Symbol],
    *,
    sampler: Callable[[random.Random], dict] | None = None,
    points: int = 12,
    relative: bool = False,
) -> Verdict:
    """``holds`` if ``printed`` equals ``truth`` identically, else ``fails`` with a witness.

    Both are evaluated at ``points`` random points first; a non-zero difference is the witness,
    however small: exact where it is rational, else to 50 digits, then to 100 twice, under
    SymPy's working precision held to 100 digits and under a higher one, a witness when those
    two agree to 30 digits (what an identity leaves of a cancellation changes with the working
    precision instead). A ``sampler``'s
    floats are taken as the rationals they store. The default points draw each symbol as a
    fraction ``p / q`` (``p`` up to 97, ``q`` up to 13) with the sign its declaration allows:
    positive for a symbol declared positive or nonnegative and for an undeclared one (ranks,
    counts, temperatures; a detail that rests on these points names such a symbol,
    ``x drawn > 0: no sign declared``, as does a witness where it is positive), negative for
    one declared negative or nonpositive, and either sign at random for one declared
    ``real=True`` alone (scores and logits: declare them so); a symbol declared
    ``integer=True`` (a count, an index) takes the integer ``p`` alone; a symbol of either
    sign is also divided by a power of ten up to 10^4 (:data:`SCALES`), so that some points lie
    near 0. Each threshold in one
    symbol (a ``Piecewise`` condition, the crossing of two arguments of a ``Min`` or ``Max``,
    the kink of an ``Abs``) adds points at it and just either side of it, for an integer symbol
    the integers at and beside it (the floors and ceilings of the threshold and of it plus and
    minus 1); an abstract function is evaluated as a polynomial of degree 7
    (:data:`STAND_IN_DEGREE`), named in the witness. An infinite
    difference (a pole of one side only) is a witness too; a NaN one (``0/0``, both sides
    undefined) is no evidence either way, nor is a point where mpmath cannot evaluate the
    difference (a ``MemoryError`` or ``OverflowError``: a number too large for it, such as
    ``exp(e^43 s)``). If every other point vanishes, ``sympy.simplify`` is asked for a proof;
    without one the verdict is ``holds`` and its detail says that it rests on the random
    points, or ``inconclusive`` when some points gave NaN or could not be evaluated (its detail
    names one).

    A ``fails`` is ``wrong-value`` (its ``failure``), or ``undefined`` where the witness is an
    infinite difference and the printed form is what has no value there (a pole of the truth
    alone is a wrong value of the printed form).

    With ``relative`` the witness also gives the true value there (evaluated as the witness is,
    so that a true value under a deep cancellation keeps its digits) and the relative error
    ``|printed - true| / |true|``, so that a sign error does not read like rounding. An infinite
    value (SymPy's ``zoo``, ``oo``) reads ``infinite``; so does the relative error of an infinite
    difference or of a true value of 0 (``undefined`` where both are infinite).

    Raises:
        GradlabError: ``printed`` or ``truth`` not an expression, ``symbols`` not a list of
            symbols or missing a free symbol of ``printed - truth`` (with ``relative``, of
            ``truth`` too), or a ``sampler`` point missing one, keyed by a name instead of
            the symbol, or giving one a value that is not a finite real number inside its
            declaration (``inf``, NaN, a complex or a string; a positive symbol at 0, an
            integer one at 2.5), ``points`` not a positive integer.

    An exception raised by ``sampler`` itself reaches the caller as it is (your code's error,
    with its traceback).

    Example:
        >>> from gradlab.symbolic import symbolic_equality
        >>> import sympy as sp
        >>> x = sp.Symbol("x", positive=True)
        >>> detail = symbolic_equality(-x, x, [x], relative=True).detail
        >>> for part in detail.split("; "):
        ...     print(part)
        printed minus true is -174.00000 at x = 87 (exact evaluation)
        true value 87.000000, relative error 2 (200 %).
        >>> u = sp.Symbol("u")  # no sign declared: drawn positive, and the detail says so
        >>> print(symbolic_equality(sp.sqrt(u**2), u, [u]).detail)
        printed minus true vanishes at 12 random points (50 digits; u drawn > 0: no sign declared).
    """
    for name, value in (("printed", printed), ("truth", truth)):
        _check_algebraic(name, value, "symbolic_equality compares them")
    if not isinstance(symbols, (list, tuple)) or not all(
        isinstance(symbol, sp.Symbol) for symbol in symbols
    ):
        raise GradlabError(
            f"symbols must be a list or tuple of SymPy symbols (e.g. [x]); got {symbols!r}"
        )
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise GradlabError(f"points must be a positive integer (the random points evaluated); "
                           f"got {points!r}")  # fmt: skip
    if sampler is not None and not callable(sampler):
        raise GradlabError(f"sampler must be None or a function of a random.Random returning "
                           f"a dict symbol -> value; got {type(sampler).__name__} "
                           f"{sampler!r}")  # fmt: skip
    check_bool("relative", relative)
    # with relative, the truth's value at the witness needs its symbols too, one that cancels
    # in printed - truth included
    also = frozenset(_concretize(sp.sympify(truth)).free_symbols) if relative else frozenset()
    same, counterexample, how = _is_zero(sp.sympify(printed) - truth, symbols, sampler, points,
                                         also)  # fmt: skip
    if same is None:
        return undecided(f"{how}.")
    witness, failure = "", _WRONG_VALUE
    if not same:
        point, difference, raw_point, value = counterexample
        if value.is_infinite:  # a pole of one side: undefined if it is the printed form's
            try:
                at = _difference_at(_concretize(sp.sympify(printed)), raw_point)
                failure = _WRONG_VALUE if at.is_finite else _UNDEFINED
            except _UnevaluableError:  # too large to evaluate: a number, not shown undefined
                pass
        witness = f"printed minus true is {difference} at {point} ({how})"
        if relative:
            try:
                true_value = _true_value_at(_concretize(sp.sympify(truth)), raw_point)
                witness += (f"; true value {_value_text(true_value)}, "
                            f"{_relative(value, true_value)}")
            except _UnevaluableError as error:
                witness += f"; the true value there is {error}"
        witness += "."
    return decide(same, f"{how}.", witness, failure=failure)


def _true_value_at(truth: sp.Expr, point: dict) -> sp.Expr:
    """The true value at a witness, evaluated as the witness is (:func:`_witness`): its
    50-digit value stands only where a finer working precision confirms it, so that a true
    value under a cancellation of more than about 100 digits (``exp(s) - 1 - s`` at
    ``s = 3e-80``, whose 50-digit value is off by a quarter) is not printed wrong; the residue
    of a cancellation is 0, and a value that a finer evaluation cannot give is ``nan``."""
    value = _difference_at(truth, point)
    if value.has(sp.nan) or not value.is_number:
        return value
    found = _witness(value, truth, point)
    return sp.Integer(0) if found is None else found


def _value_text(value: sp.Expr) -> str:
    """A value of a verdict's detail to 8 digits; ``infinite`` for SymPy's ``zoo``, ``oo`` and
    ``-oo`` (a pole: its sign says nothing more)."""
    return "infinite" if value.is_infinite else str(sp.N(value, 8))


def _magnitude(value: Any) -> float:
    """``|value|`` as a float: ``inf`` for an infinite SymPy value (``complex(zoo)`` is nan)."""
    if isinstance(value, sp.Basic) and value.is_infinite:
        return math.inf
    return abs(complex(value))


def _relative(difference: Any, true_value: Any) -> str:
    """``relative error R (P %)`` of a difference against the true value: ``infinite`` for an
    infinite difference or a true value of 0, ``undefined`` where the difference is NaN or
    both are infinite."""
    error, size = _magnitude(difference), _magnitude(true_value)
    if math.isnan(error) or math.isnan(size) or (math.isinf(error) and math.isinf(size)):
        return "relative error undefined"
    ratio = error / size if size else math.inf
    if math.isinf(ratio):
        return "relative error infinite"
    return f"relative error {ratio:.3g} ({100 * ratio:.3g} %)"


def numeric_agreement(
    printed: Callable[[object], float],
    truth: Callable[[object], float],
    cases: Iterable[object],
    *,
    tolerance: float,
    relative: bool = False,
) -> Verdict:
    """``holds`` if ``|printed(case) - truth(case)| <= tolerance`` for every case.

    With ``relative`` the detail also gives the relative error ``|printed - true| / |true|``
    at the case of the largest absolute error. A failing detail names that case by its position
    in ``cases``, counted from 1 ("case 2 of 2" is the last). A printed value that is NaN where
    the true one is a number fails there; a case whose *true* value is NaN compares nothing, so
    when every other case agrees the verdict is ``inconclusive`` and names it, as it is with no
    cases at all. ``holds`` rests on these cases alone: its detail gives their number and the
    largest error. A case where both values are the same infinity (a pole, an overflow of
    both) agrees, and the detail counts such cases. A ``fails`` is ``undefined`` (its
    ``failure``) when every case that fails gives NaN or an infinity, ``wrong-value`` when one
    gives a wrong number.

    Raises:
        GradlabError: ``tolerance`` not a finite number >= 0, ``printed`` or ``truth`` not
            callable, ``cases`` not an iterable, ``relative`` not a bool (all checked before any
            case runs); a case where ``printed`` or ``truth`` returns something that is not one
            real number (a vector, a complex number).

    An exception raised by ``printed`` or ``truth`` (a ``ZeroDivisionError`` at a case) reaches
    the caller as it is, with its traceback: they are your code. A case where a value is
    undefined returns NaN instead.

    Example:
        >>> from gradlab.symbolic import numeric_agreement
        >>> verdict = numeric_agreement(lambda c: -c, lambda c: c, [1e-4, 2e-4], tolerance=1e-6,
        ...                             relative=True)
        >>> print(verdict.verdict, verdict.detail)
        fails max |printed - true| = 0.0004 (case 2 of 2); relative error 2 (200 %) there.
    """
    check_in_range("tolerance", tolerance, 0.0, reason="the largest |printed - true| that agrees")
    for name, function in (("printed", printed), ("truth", truth)):
        if not callable(function):
            raise GradlabError(f"{name} must be a function of a case returning a number; got "
                               f"{type(function).__name__} {function!r}")  # fmt: skip
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Iterable):
        raise GradlabError(f"cases must be an iterable of cases (a list); got "
                           f"{type(cases).__name__} {cases!r}")  # fmt: skip
    check_bool("relative", relative)
    cases = list(cases)
    worst, worst_case, worst_true = 0.0, 0, 0.0
    no_truth = []  # the cases whose true value is NaN: nothing to compare with there
    wrong_value = False  # a case where the printed value is a number, and a wrong one
    infinite = 0  # cases where both are the same infinity: they agree, and the detail says so
    for index, case in enumerate(cases):
        true_value = _real(truth, case, "truth", index, len(cases))
        value = _real(printed, case, "printed", index, len(cases))
        if math.isnan(true_value):
            no_truth.append(index)
            continue
        error = 0.0 if value == true_value else abs(value - true_value)  # equal infinities agree
        infinite += math.isinf(true_value) and value == true_value
        wrong_value = wrong_value or (math.isfinite(value) and not error <= tolerance)
        # NaN counts as the worst, and the first one stays: a later case must not replace it
        if not error <= worst and not math.isnan(worst):
            worst, worst_case, worst_true = error, index, true_value
    there = f"; {_relative(worst, worst_true)} there" if relative and worst else ""
    if infinite:  # an error of 0 there is no difference of two numbers: said, not hidden
        there += (f"; printed and true are the same infinity at {infinite} of them (taken "
                  "as agreeing)")
    compared = len(cases) - len(no_truth)
    if worst <= tolerance and (no_truth or not cases):
        if not compared:
            every = f"every one of the {len(cases)} cases" if len(cases) > 1 else "its one case"
            nan = f"the true value is nan at {every}: " if cases else ""
            return undecided(f"{nan or 'no cases: '}nothing was compared.")
        return undecided(
            f"the true value is nan at {len(no_truth)} of {len(cases)} cases (first: case "
            f"{no_truth[0] + 1}), so nothing was compared there; max |printed - true| = "
            f"{worst:.2e} over the other {compared}."
        )
    return decide(
        worst <= tolerance,
        f"max |printed - true| = {worst:.2e} over {len(cases)} case"
        f"{'' if len(cases) == 1 else 's'}{there}.",
        f"max |printed - true| = {worst:.3g} (case {worst_case + 1} of {len(cases)}){there}.",
        # where every case that fails gives NaN or an infinity, the form is undefined there
        failure=_WRONG_VALUE if wrong_value else _UNDEFINED,
    )


def _real(function: Callable[[object], Any], case: object, name: str, index: int,
          count: int) -> float:
    """``function(case)`` as a float; a value that is not one real number is refused by name
    (a string or a bool too, which ``float`` would read)."""
    value = function(case)
    try:
        if isinstance(value, (str, bytes, bool, np.bool_)) or str(
            getattr(value, "dtype", "")
        ) in ("bool", "torch.bool"):  # fmt: skip (numbers only: float() reads '1' and True)
            raise TypeError
        return float(value)
    except (TypeError, ValueError) as error:
        raise GradlabError(
            f"{name}(case) must return one real number; got {type(value).__name__} {value!r} "
            f"at case {index + 1} of {count} (compare a vector entry by entry: one case each)"
        ) from error


def all_hold(verdicts: Sequence[Verdict], prefix: str = "") -> Verdict:
    """Combine several verdicts: the first that does not hold, else the first. Among several
    that fail as that one does, the first of the strongest :data:`FAILURES` kind (``ill-typed``,
    then ``wrong-value``, then ``undefined``) is said, with its own detail: a wrong number found
    by a later check outweighs a missing one found by an earlier."""
    worst = next((v for v in verdicts if v.verdict != _HOLDS), verdicts[0])
    if worst.failure is not None:
        order = (_ILL_TYPED, _WRONG_VALUE, _UNDEFINED)
        alike = [v for v in verdicts if v.verdict == worst.verdict]
        worst = min(alike, key=lambda v: order.index(v.failure))  # the first of the strongest
    return replace(worst, detail=prefix + worst.detail)
