"""Claims, verdicts and the checks that derive verdicts by computation.

A claim is a printed statement of a seed, taken as data: a SymPy expression or a small numeric
procedure transcribed from the seed, next to the definitions it should follow from. A check
compares the two and returns a :class:`Verdict`; nothing restates a result as its own proof.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import sympy as sp

VERDICTS = ("holds", "holds-with-correction", "fails", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: a verdict from :data:`VERDICTS` and what supports it."""

    verdict: str
    detail: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}; got {self.verdict!r}")


@dataclass(frozen=True)
class Claim:
    """One printed claim of a seed and the check that decides it.

    Attributes:
        seed: seed file name without ``.txt``.
        label: ``eq<N>``, ``lemma1``, ``prop2`` or ``claim-<short-name>``.
        statement: the claim in words.
        formula: the claim as printed (plain text).
        method: how the verdict is derived.
        check: computes the verdict.
    """

    seed: str
    label: str
    statement: str
    formula: str
    method: str
    check: Callable[[], Verdict] = field(repr=False, compare=False)

    @property
    def id(self) -> str:
        return f"{self.seed}:{self.label}"


def _random_points(symbols: Sequence[sp.Symbol], count: int, seed: int, sampler=None):
    generator = random.Random(seed)
    for _ in range(count):
        if sampler is not None:
            yield sampler(generator)
        else:
            yield {
                s: sp.Rational(generator.randint(1, 97), generator.randint(1, 13)) for s in symbols
            }


def _difference_at(expression: sp.Expr, point: dict) -> sp.Expr:
    value = expression.subs(point)
    return sp.nsimplify(value) if value.is_Rational else value.evalf(50)


def _concretize(expression: sp.Expr) -> sp.Expr:
    """Replace abstract functions ``f(x)`` by distinct concrete polynomials, then evaluate.

    An identity in abstract functions must hold for every choice, so a non-zero value for one
    concrete choice is a counterexample.
    """
    from sympy.core.function import AppliedUndef

    replaced = expression
    for k, applied in enumerate(sorted(expression.atoms(AppliedUndef), key=str)):
        argument = sp.Dummy("u")
        polynomial = sp.Lambda(argument, (k + 2) * argument**2 + (k + 1) * argument + k + 3)
        replaced = replaced.replace(applied.func, polynomial)
    return replaced.doit()


def _is_zero(expression: sp.Expr, symbols: Sequence[sp.Symbol], sampler, points: int):
    """``(True, None)`` if ``expression`` is identically zero, else ``(False, counterexample)``.

    First ``sympy.simplify``; if that does not reduce to 0, exact rational (or 50-digit)
    evaluation at random points decides, and a non-zero value is a counterexample.
    """
    simplified = sp.simplify(expression)
    if simplified == 0:
        return True, None, "sympy.simplify reduces the difference to 0"
    concrete = _concretize(simplified)
    for point in _random_points(symbols, points, seed=len(str(expression)), sampler=sampler):
        value = _difference_at(concrete, point)
        if value != 0 and abs(complex(value)) > 1e-40:
            shown = {str(k): str(v) for k, v in point.items()}
            return False, (shown, str(sp.N(value, 8))), "counterexample by exact evaluation"
    return True, None, f"the difference vanishes at {points} random points (50 digits)"


def symbolic_equality(
    printed: sp.Expr,
    truth: sp.Expr,
    symbols: Sequence[sp.Symbol],
    *,
    corrected: sp.Expr | None = None,
    sampler: Callable[[random.Random], dict] | None = None,
    points: int = 12,
    note: str = "",
) -> Verdict:
    """Decide whether ``printed`` equals ``truth`` identically; try ``corrected`` if not."""
    same, counterexample, how = _is_zero(printed - truth, symbols, sampler, points)
    suffix = f" {note}" if note else ""
    if same:
        return Verdict("holds", f"{how}.{suffix}")
    point, value = counterexample
    detail = f"printed minus true is {value} at {point}."
    if corrected is not None:
        fixed, _, fixed_how = _is_zero(corrected - truth, symbols, sampler, points)
        if fixed:
            return Verdict(
                "holds-with-correction",
                f"{detail} Corrected form {sp.sstr(corrected)} holds ({fixed_how}).{suffix}",
            )
    return Verdict("fails", detail + suffix)


def numeric_agreement(
    printed: Callable[[object], float],
    truth: Callable[[object], float],
    cases: Iterable[object],
    *,
    tolerance: float,
    corrected: Callable[[object], float] | None = None,
    correction_text: str = "",
    note: str = "",
) -> Verdict:
    """Compare ``printed(case)`` with ``truth(case)`` over cases; try ``corrected`` on failure."""
    cases = list(cases)
    worst, worst_case = 0.0, 0
    for index, case in enumerate(cases):
        error = abs(float(printed(case)) - float(truth(case)))
        if error > worst:
            worst, worst_case = error, index
    suffix = f" {note}" if note else ""
    if worst <= tolerance:
        return Verdict(
            "holds", f"max |printed - true| = {worst:.2e} over {len(cases)} cases.{suffix}"
        )
    detail = f"max |printed - true| = {worst:.3g} (case {worst_case} of {len(cases)})."
    if corrected is not None:
        fixed = max(abs(float(corrected(c)) - float(truth(c))) for c in cases)
        if fixed <= tolerance:
            return Verdict(
                "holds-with-correction",
                f"{detail} {correction_text} agrees to {fixed:.2e}.{suffix}",
            )
    return Verdict("fails", detail + suffix)


def predicate(
    holds: bool, detail_if_holds: str, detail_if_fails: str, *, correction: str = ""
) -> Verdict:
    """A verdict from a computed truth value (for inequalities, supports, limits)."""
    if holds:
        return Verdict("holds", detail_if_holds)
    if correction:
        return Verdict("holds-with-correction", f"{detail_if_fails} {correction}")
    return Verdict("fails", detail_if_fails)
