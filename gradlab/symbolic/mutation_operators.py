"""Mutation operators: slightly wrong versions of a claim's accepted form, made by rule.

A check is only as good as its ability to reject a wrong formula. Each operator here takes a
:class:`~gradlab.symbolic.claims.Form` and returns mutants of it: the same form with one small
change to its :attr:`~gradlab.symbolic.claims.Form.value`, named by what changed. The value may
be a SymPy expression or relation, a number, or a dict / tuple / list of those (the parameters of
a transcribed procedure); the operators walk SymPy trees generically (``Add``, ``Mul``, ``Pow``,
``Sum`` / ``Product`` limits, relations, ``Piecewise`` pieces and conditions, the arguments of
functions) and the entries of containers. A code string (pseudocode) has no tree: no operator
applies to it, and the claim says so in its ``inapplicable`` reasons.

The operators, in the order :func:`generate` applies them (:data:`OPERATORS`):

- ``sign``: the sign of the whole value, of one term of a sum (not inside a ``Sum`` /
  ``Product`` / ``Integral``'s limits: a bound's slips are ``shift``'s), or of one side of a
  relation.
- ``shift``: strict <-> non-strict for a relation; a ``Sum`` / ``Product`` bound, an integer
  symbol (an index) or an integer constant shifted by 1.
- ``factor``: one factor of a product dropped (numbers first); the value multiplied by 2.
- ``term``: one term of a sum dropped; two terms of a difference swapped (``a - b -> b - a``);
  one piece of a ``Piecewise`` or one condition of an ``And`` / ``Or`` dropped.
- ``exponent``: a numeric power ``p`` changed to ``p - 1`` or ``p + 1`` (``R**2 -> R``).
- ``log``: a ``log`` factor removed (``log(a) -> a``) or added (``times log(M)``), for orders.
- ``swap``: two symbols exchanged everywhere, two arguments of a function, the two sides of a
  relation, or the values of two entries of a dict / tuple.

Each operator returns at most :data:`CAP` mutants in a fixed order, so an audit of a hundred
claims stays fast. :func:`generate` runs them all and discards a mutant whose text equals one
of ``exclude_texts`` (the printed form, the correction) or an earlier mutant; the audit drops a
mutant that its check accepts only when SymPy *proves* it equal to the form (:func:`equivalent`:
``simplify(a - b) == 0``, e.g. swapping the arguments of a symmetric function): such a mutant is
not wrong, so no check could kill it.

Example:
    >>> import sympy as sp
    >>> from gradlab.symbolic.claims import Form
    >>> from gradlab.symbolic.mutation_operators import exponent, generate
    >>> R, A = sp.symbols("R A", positive=True)
    >>> [m.text() for m in exponent(Form(A / R**2))]
    ['A/R', 'A/R**3']
    >>> [(operator, m.name) for operator, m in generate(Form(A / R**2))][:3]
    [('sign', 'sign flipped'), ('factor', 'factor A dropped'), ('factor', 'factor R**(-2) dropped')]
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from itertools import combinations, islice, pairwise
from typing import Any, Protocol

import sympy as sp
from sympy.concrete.expr_with_limits import ExprWithLimits
from sympy.core.function import AppliedUndef
from sympy.core.relational import Relational

from gradlab.errors import GradlabError


class FormLike(Protocol):
    """What an operator needs of a form: :class:`gradlab.symbolic.claims.Form` (a dataclass).

    Declared here, not imported, so that the claims module can use the operators without an
    import cycle; mutants are made with :func:`dataclasses.replace`.
    """

    value: Any
    name: str

    def text(self) -> str: ...

OPERATORS = ("sign", "shift", "factor", "term", "exponent", "log", "swap")
"""The operator names, in the order :func:`generate` applies them."""

CAP = 4
"""At most this many mutants per operator and form."""

_STRICT = {sp.StrictLessThan: sp.LessThan, sp.LessThan: sp.StrictLessThan,
           sp.StrictGreaterThan: sp.GreaterThan, sp.GreaterThan: sp.StrictGreaterThan}  # fmt: skip
_NUMBERS = (int, float, sp.Number)

Path = tuple  # keys / indices from the value's root to a node


# --- walking a value: every node with its path, and rebuilding with one node replaced ---------


def _in_limits(value: Any, path: Path) -> bool:
    """Whether the node at ``path`` lies in the limits of a ``Sum``, ``Product`` or
    ``Integral`` (past its first argument): a term's sign flipped there reverses the bounds,
    which SymPy reads as minus the sum over the gap (a slip no one makes; the ``shift``
    operator moves bounds)."""
    node = value
    for step in path:
        if isinstance(node, ExprWithLimits) and step != 0:
            return True
        node = dict(_children(node))[step]
    return False


def _children(node: Any) -> list[tuple[Any, Any]]:
    """``(step, child)`` pairs of a node: dict keys, tuple indices, SymPy argument indices."""
    if isinstance(node, dict):
        return list(node.items())
    if isinstance(node, (tuple, list)):
        return list(enumerate(node))
    if isinstance(node, sp.MatrixBase):
        return [(index, entry) for index, entry in enumerate(node)]
    if isinstance(node, sp.Basic) and not node.is_Atom:
        return list(enumerate(node.args))
    return []


def _nodes(value: Any, path: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Every node of ``value``, pre-order (a node before its children), with its path."""
    yield path, value
    for step, child in _children(value):
        yield from _nodes(child, (*path, step))


def _rebuilt(node: Any, path: Path, new: Any) -> Any:
    """``node`` with the node at ``path`` replaced by ``new`` (SymPy re-canonicalises)."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    if isinstance(node, dict):
        return {**node, step: _rebuilt(node[step], rest, new)}
    if isinstance(node, (tuple, list)):
        items = list(node)
        items[step] = _rebuilt(items[step], rest, new)
        return type(node)(items)
    if isinstance(node, sp.MatrixBase):
        entries = list(node)
        entries[step] = _rebuilt(entries[step], rest, new)
        return type(node)(node.rows, node.cols, entries)
    args = list(node.args)
    args[step] = _rebuilt(args[step], rest, new)
    return node.func(*args)


def _parent(value: Any, path: Path) -> Any:
    node = value
    for step in path[:-1]:
        container = isinstance(node, (dict, tuple, list, sp.MatrixBase))
        node = node[step] if container else node.args[step]
    return node


def _is_root(value: Any, path: Path) -> bool:
    """True for the top of a SymPy tree: the value itself or an entry of a container."""
    return not path or not isinstance(_parent(value, path), sp.Basic)


def _short(node: Any, width: int = 40) -> str:
    text = sp.sstr(node) if isinstance(node, sp.Basic) else str(node)
    return text if len(text) <= width else text[: width - 3] + "..."


def _where(path: Path, value: Any) -> str:
    """``" in <key>"`` for a node inside a dict entry, naming which entry changed."""
    if path and isinstance(value, dict):
        return f" in {path[0]}"
    if path and isinstance(value, (tuple, list)):
        return f" in part {path[0] + 1}"
    return ""


def _is_expr(node: Any) -> bool:
    return isinstance(node, sp.Expr) and not isinstance(node, sp.MatrixBase)


def _is_number(node: Any) -> bool:
    return isinstance(node, _NUMBERS) and not isinstance(node, bool)


def _free_symbols(value: Any) -> list[sp.Symbol]:
    """The symbols free in ``value`` that no sum, product or integral of it binds: renaming or
    shifting a bound variable would move its limits, and a free symbol that shares its name
    would be captured, so both are left alone."""
    free: set = set()
    bound: set = set()
    for path, node in _nodes(value):
        if isinstance(node, sp.Basic) and _is_root(value, path):
            free |= {s for s in node.free_symbols if isinstance(s, sp.Symbol)}
            bound |= {v for inner in node.atoms(ExprWithLimits) for v in inner.variables}
    return sorted(free - bound, key=sp.default_sort_key)


def _substituted(value: Any, changes: dict) -> Any:
    """``value`` with ``xreplace`` applied to every SymPy node of it (containers kept)."""
    if isinstance(value, dict):
        return {key: _substituted(entry, changes) for key, entry in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_substituted(entry, changes) for entry in value)
    if isinstance(value, sp.Basic):
        return value.xreplace(changes)
    return value


# --- the rules: each yields (description, new value) candidates, in a fixed order -------------

Candidates = Iterator[tuple[str, Any]]


def _sign_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        where = _where(path, value)
        if _is_root(value, path) and (_is_expr(node) or _is_number(node)) and node != 0:
            yield f"sign flipped{where}", _rebuilt(value, path, -node)
        if isinstance(node, Relational):
            for side, name in ((0, "left"), (1, "right")):
                if node.args[side] != 0:
                    flipped = node.func(*(-a if i == side else a for i, a in enumerate(node.args)))
                    yield f"sign of the {name} side flipped{where}", _rebuilt(value, path, flipped)
        if isinstance(node, sp.Add) and not _in_limits(value, path):
            for index, term in enumerate(node.args):
                terms = [-t if i == index else t for i, t in enumerate(node.args)]
                yield (f"sign of term {_short(term)} flipped{where}",
                       _rebuilt(value, path, sp.Add(*terms)))  # fmt: skip


def _shift_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        where = _where(path, value)
        if type(node) in _STRICT:
            yield (f"{node.rel_op} -> {_STRICT[type(node)].rel_op}{where}",
                   _rebuilt(value, path, _STRICT[type(node)](*node.args)))  # fmt: skip
        if isinstance(node, (sp.Sum, sp.Product, sp.Integral)):
            for index, limit in enumerate(node.limits):
                if len(limit) != 3:
                    continue
                for bound, name in ((1, "lower"), (2, "upper")):
                    for delta in (1, -1):
                        limits = list(node.limits)
                        moved = list(limit)
                        moved[bound] = limit[bound] + delta
                        limits[index] = tuple(moved)
                        changed = node.func(node.function, *limits)
                        yield (f"{name} bound of {limit[0]}: {_short(limit[bound])} -> "
                               f"{_short(limit[bound] + delta)}{where}",
                               _rebuilt(value, path, changed))  # fmt: skip
    for symbol in _free_symbols(value):
        if symbol.is_integer:
            for delta, sign in ((1, "+"), (-1, "-")):
                yield (f"index {symbol} -> {symbol} {sign} 1",
                       _substituted(value, {symbol: symbol + delta}))  # fmt: skip
    for path, node in _nodes(value):
        if not _integer_constant(value, path, node):
            continue
        where = _where(path, value)
        for delta in (1, -1):
            shifted = node + delta
            yield f"constant {node} -> {shifted}{where}", _rebuilt(value, path, shifted)


def _integer_constant(value: Any, path: Path, node: Any) -> bool:
    """An integer that a reader could misread by 1: a term, a side, an argument, an entry.

    Coefficients and exponents are left to ``factor`` and ``exponent``.
    """
    if isinstance(node, bool) or not isinstance(node, (int, sp.Integer)):
        return False
    if _is_root(value, path):
        return True
    parent = _parent(value, path)
    return isinstance(parent, (sp.Add, Relational, sp.Function)) and not isinstance(
        parent, (sp.Pow, sp.Mul)
    )


def _factor_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        if not isinstance(node, sp.Mul):
            continue
        where = _where(path, value)
        coefficient, rest = node.as_coeff_Mul()
        if coefficient.is_Number and abs(coefficient) != 1:
            kept = rest if coefficient > 0 else -rest
            yield f"factor {_short(abs(coefficient))} dropped{where}", _rebuilt(value, path, kept)
        symbolic = [f for f in node.args if not f.is_Number]
        for index, factor in enumerate(node.args):
            if factor.is_Number or len(symbolic) < 2:
                continue  # -s_j is a signed term, not a product: sign and term handle it
            others = sp.Mul(*(f for i, f in enumerate(node.args) if i != index))
            yield f"factor {_short(factor)} dropped{where}", _rebuilt(value, path, others)
    for path, node in _nodes(value):
        if not _is_root(value, path):
            continue
        where = _where(path, value)
        if (_is_expr(node) or _is_number(node)) and node != 0:
            yield f"multiplied by 2{where}", _rebuilt(value, path, 2 * node)
        elif isinstance(node, Relational) and node.args[0] != 0:
            doubled = node.func(2 * node.args[0], node.args[1])
            yield f"left side multiplied by 2{where}", _rebuilt(value, path, doubled)


def _term_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        where = _where(path, value)
        if isinstance(node, sp.Add):
            for index, term in enumerate(node.args):
                rest = sp.Add(*(t for i, t in enumerate(node.args) if i != index))
                yield f"term {_short(term)} dropped{where}", _rebuilt(value, path, rest)
            positive = [t for t in node.args if not t.could_extract_minus_sign()]
            negative = [t for t in node.args if t.could_extract_minus_sign()]
            for plus in positive:
                for minus in negative:
                    others = [t for t in node.args if t not in (plus, minus)]
                    swapped = sp.Add(*others, -minus, -plus)
                    yield (f"{_short(plus)} and {_short(-minus)} swapped in a difference{where}",
                           _rebuilt(value, path, swapped))  # fmt: skip
        if isinstance(node, sp.Piecewise) and len(node.args) > 1:
            for index, piece in enumerate(node.args):
                pieces = [p for i, p in enumerate(node.args) if i != index]
                yield (f"piece {index + 1} ({_short(piece.expr)}) dropped{where}",
                       _rebuilt(value, path, sp.Piecewise(*pieces)))  # fmt: skip
        if isinstance(node, (sp.And, sp.Or)):
            for index, condition in enumerate(node.args):
                rest = node.func(*(c for i, c in enumerate(node.args) if i != index))
                yield f"condition {_short(condition)} dropped{where}", _rebuilt(value, path, rest)


def _exponent_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        if not (isinstance(node, sp.Pow) and node.exp.is_Rational):
            continue
        where = _where(path, value)
        for delta in (1, -1):
            power = node.exp + delta
            if power == 0:
                continue
            changed = node.base**power
            yield (f"exponent of {_short(node.base)}: {node.exp} -> {power}{where}",
                   _rebuilt(value, path, changed))  # fmt: skip


def _log_candidates(value: Any) -> Candidates:
    for path, node in _nodes(value):
        where = _where(path, value)
        if isinstance(node, sp.Mul):
            for index, factor in enumerate(node.args):
                if isinstance(factor, sp.log) or (
                    isinstance(factor, sp.Pow) and isinstance(factor.base, sp.log)
                ):
                    others = sp.Mul(*(f for i, f in enumerate(node.args) if i != index))
                    yield (f"log factor {_short(factor)} removed{where}",
                           _rebuilt(value, path, others))  # fmt: skip
        if isinstance(node, sp.log):
            inside = node.args[0]
            yield f"{_short(node)} -> {_short(inside)}{where}", _rebuilt(value, path, inside)
    for path, node in _nodes(value):
        if _is_root(value, path) and _is_expr(node) and not node.is_number:
            for symbol in sorted(node.free_symbols, key=sp.default_sort_key):
                yield f"times log({symbol}){_where(path, value)}", _rebuilt(
                    value, path, node * sp.log(symbol)
                )


def _swap_candidates(value: Any) -> Candidates:
    for first, second in combinations(_free_symbols(value), 2):
        yield f"{first} <-> {second}", _substituted(value, {first: second, second: first})
    for path, node in _nodes(value):
        where = _where(path, value)
        if isinstance(node, Relational):
            yield f"sides swapped{where}", _rebuilt(value, path, node.func(node.rhs, node.lhs))
        elif (isinstance(node, sp.Function) and len(node.args) >= 2
              and not isinstance(node, (sp.Piecewise, sp.And, sp.Or))):  # fmt: skip
            for i, j in combinations(range(len(node.args)), 2):
                args = list(node.args)
                args[i], args[j] = args[j], args[i]
                yield (f"arguments {i + 1} and {j + 1} of {node.func} swapped{where}",
                       _rebuilt(value, path, node.func(*args)))  # fmt: skip
    if isinstance(value, (dict, tuple, list)):
        steps = [step for step, entry in _children(value) if _is_expr(entry) or _is_number(entry)]
        for first, second in combinations(steps, 2):
            if value[first] == value[second]:
                continue
            changed = _rebuilt(_rebuilt(value, (first,), value[second]), (second,), value[first])
            names = (first, second) if isinstance(value, dict) else (first + 1, second + 1)
            yield f"values of {names[0]} and {names[1]} swapped", changed


_RULES: dict[str, Callable[[Any], Candidates]] = {
    "sign": _sign_candidates,
    "shift": _shift_candidates,
    "factor": _factor_candidates,
    "term": _term_candidates,
    "exponent": _exponent_candidates,
    "log": _log_candidates,
    "swap": _swap_candidates,
}


# --- equivalence: a mutant SymPy proves equal to the form is not a mutant ---------------------


def _numeric_point(symbols: Iterable[sp.Symbol], seed: int) -> dict:
    generator = random.Random(seed)
    point = {}
    for symbol in symbols:
        if symbol.is_integer:
            point[symbol] = sp.Integer(generator.randint(2, 9))
        else:
            point[symbol] = sp.Rational(generator.randint(11, 97), generator.randint(3, 13))
    return point


_HARD_TO_EVALUATE = (sp.Sum, sp.Product, sp.Integral, sp.Derivative, sp.Indexed,
                     AppliedUndef)  # fmt: skip


def _differs_numerically(difference: sp.Expr) -> bool:
    """True if ``difference`` is clearly non-zero at a random point (a cheap refutation)."""
    if difference.has(*_HARD_TO_EVALUATE):
        return False  # evaluating unevaluated sums (Euler-Maclaurin) costs seconds: not cheap
    symbols = sorted(difference.free_symbols, key=sp.default_sort_key)
    for seed in (1, 2):
        try:
            number = complex(difference.xreplace(_numeric_point(symbols, seed)).evalf(30))
        except (TypeError, ValueError, ZeroDivisionError):
            return False  # undefined functions, sums left symbolic: let simplify decide
        if number != number or abs(number) == float("inf"):
            return False
        if abs(number) > 1e-12:
            return True
    return False


_PROOF_SIZE = 60
"""``simplify`` is asked only of a difference with at most this many operations and without a
sum or ``Piecewise`` (simplify takes seconds on those): a mutant not proven equal stays one."""


def _zero(difference: sp.Expr) -> bool:
    if difference == 0:
        return True
    if _differs_numerically(difference):
        return False
    if difference.has(sp.Sum) and sp.count_ops(difference) <= _PROOF_SIZE:
        # a finite sum SymPy can sum in closed form (sum of k over 1..n against 0..n): proven
        # by the closed forms; one it cannot stays unproven
        try:
            difference = difference.doit()
        except Exception:  # SymPy cannot sum it: not proven equal
            return False
        if difference == 0:
            return True
    if difference.has(sp.Sum, sp.Piecewise) or sp.count_ops(difference) > _PROOF_SIZE:
        return False
    try:
        return sp.simplify(difference) == 0
    except Exception:  # SymPy cannot decide: not proven equal, so the mutant stays
        return False


def equivalent(first: Any, second: Any, domain: dict | None = None) -> bool:
    """True only if SymPy *proves* two form values equal (``simplify(a - b) == 0`` per part).

    Containers are compared entry by entry, numbers and strings by value. Two inequalities are
    equal when their sides' differences are (``1 - s >= Delta`` is ``1 - Delta >= s``), two
    equations when the differences are equal up to sign. An expression with a ``Piecewise`` in
    one variable is compared on the whole real line: at every boundary point of its conditions
    and on every open interval between them (:func:`_piecewise_equal`). Anything not proven equal
    counts as different.

    Args:
        first: one form value.
        second: the other.
        domain: substitutions the source's definitions fix, applied to both values first (for
            instance ``{b_(t+1): b_t + Delta, Delta: Delta_positive}`` where ``Delta_positive``
            is a positive symbol: equal bin widths, a positive width). None: no substitution.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> x, y = sp.symbols("x y")
        >>> equivalent(sp.Max(x, y), sp.Max(y, x)), equivalent(x - y, y - x)
        (True, False)
        >>> equivalent(1 - x >= y, 1 - y >= x), equivalent(1 - x >= y, 1 - y > x)
        (True, False)
        >>> left = sp.Piecewise((1, (x >= 0) & (x < 1)), (2, (x < 0) & (x >= -1)), (0, True))
        >>> equivalent(left, sp.Piecewise((1, (x >= 0) & (x < 1)), (2, (x <= 0) & (x >= -1)),
        ...                               (0, True)))  # x = 0: the first piece wins either way
        True
    """
    if domain:
        first, second = _substituted(first, domain), _substituted(second, domain)
    if isinstance(first, dict) and isinstance(second, dict):
        return first.keys() == second.keys() and all(equivalent(first[k], second[k]) for k in first)
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)):
        return len(first) == len(second) and all(map(equivalent, first, second))
    if isinstance(first, sp.MatrixBase) and isinstance(second, sp.MatrixBase):
        return first.shape == second.shape and all(map(equivalent, first, second))
    if _is_number(first) or _is_number(second):  # 0.5 and 1/2, 1 and sin^2 + cos^2: as SymPy's
        if not all(isinstance(v, (sp.Basic, *_NUMBERS)) for v in (first, second)):
            return first == second  # a number and a string or a container: never equal
        first, second = sp.sympify(first), sp.sympify(second)
    if _is_expr(first) and _is_expr(second):
        if first == second:  # the same tree (oo - oo would be NaN, not 0)
            return True
        piecewise = first.has(sp.Piecewise) or second.has(sp.Piecewise)
        if piecewise and _piecewise_equal(first, second):
            return True
        return _zero(sp.expand(first - second))
    if isinstance(first, sp.Basic) and isinstance(second, sp.Basic):
        if first == second:
            return True
        if isinstance(first, Relational) and isinstance(second, Relational):
            return _same_relation(first, second)
        return False
    return first == second


_ORIENTED = {sp.GreaterThan: (">=", 1), sp.LessThan: (">=", -1),
             sp.StrictGreaterThan: (">", 1), sp.StrictLessThan: (">", -1)}  # fmt: skip
"""An inequality as ``(kind, sign)``: ``a >= b`` is ``a - b >= 0``, ``a <= b`` is ``b - a >= 0``."""


def _same_relation(first: Relational, second: Relational) -> bool:
    """Two relations proven equal: the same inequality of their sides' differences (or the same
    equation up to the sign of the difference)."""
    if all(map(equivalent, first.args, second.args)) and type(first) is type(second):
        return True
    one, other = first.lhs - first.rhs, second.lhs - second.rhs
    if type(first) in _ORIENTED and type(second) in _ORIENTED:
        (kind, sign), (kind_other, sign_other) = _ORIENTED[type(first)], _ORIENTED[type(second)]
        return kind == kind_other and _zero(sp.expand(sign * one - sign_other * other))
    if type(first) is type(second) and isinstance(first, (sp.Eq, sp.Ne)):
        return _zero(sp.expand(one - other)) or _zero(sp.expand(one + other))
    return False


def relation_truth(relation: Relational) -> Any:
    """``sp.true`` / ``sp.false`` if SymPy can tell the sign of ``lhs - rhs``, else None.

    Example:
        >>> w, x = sp.Symbol("w", positive=True), sp.Symbol("x")
        >>> relation_truth(sp.Gt(w, 0, evaluate=False)), relation_truth(sp.Ge(x, 0))
        (True, None)
    """
    difference = sp.factor(sp.simplify(relation.lhs - relation.rhs))
    if isinstance(relation, (sp.Eq, sp.Ne)):
        zero = difference.is_zero
        return None if zero is None else sp.sympify(zero == isinstance(relation, sp.Eq))
    kind, sign = _ORIENTED[type(relation)]
    oriented = sign * difference
    truth = oriented.is_nonnegative if kind == ">=" else oriented.is_positive
    return None if truth is None else sp.sympify(truth)


def _boundary(relation: Relational, variable: sp.Symbol) -> sp.Expr | None:
    """Where ``relation`` (linear in ``variable``, a non-zero numeric slope) changes truth."""
    difference = sp.expand(relation.lhs - relation.rhs)
    slope = difference.coeff(variable)
    if not slope.is_number or slope == 0 or sp.expand(difference - slope * variable).has(variable):
        return None
    return sp.simplify(-(difference - slope * variable) / slope)


def _sample_points(points: list[sp.Expr]) -> list[sp.Expr] | None:
    """The boundary points in order, a point inside each open interval between them and one
    beyond each end (``a + (b - a)/(1 + v)``, ``v`` a positive dummy: every point of the interval
    at once); None if SymPy cannot order them."""
    unique: list[sp.Expr] = []
    for point in points:
        if not any(sp.simplify(point - seen) == 0 for seen in unique):
            unique.append(point)
    for a, b in combinations(unique, 2):
        if sp.simplify(a - b).is_zero is not False or sp.simplify(a - b).is_positive is None:
            return None
    ordered = sorted(unique, key=functools.cmp_to_key(
        lambda a, b: 1 if sp.simplify(a - b).is_positive else -1))  # fmt: skip
    v = sp.Dummy("v", positive=True)
    inside = [a + (b - a) / (1 + v) for a, b in pairwise(ordered)]
    return [ordered[0] - v, *ordered, *inside, ordered[-1] + v]


def _piecewise_equal(first: sp.Expr, second: sp.Expr) -> bool:
    """True if SymPy proves two expressions with ``Piecewise`` parts equal on the whole line.

    For a variable that every condition compares linearly with an expression of the other
    symbols, the boundary points are ordered (their differences must have a known sign); at
    each point, inside each open interval and beyond each end every condition is decided and
    the two selected pieces must simplify to the same expression.
    """
    relations = [r for e in (first, second) for p in e.atoms(sp.Piecewise)
                 for _, condition in p.args for r in sp.sympify(condition).atoms(Relational)]
    if not relations:
        return False
    common = set.intersection(*(r.free_symbols for r in relations))
    for variable in sorted(common, key=sp.default_sort_key):
        points = [_boundary(r, variable) for r in relations]
        samples = None if any(p is None for p in points) else _sample_points(points)
        if samples is None:
            continue
        if all(_equal_at(first, second, variable, x) for x in samples):
            return True
    return False


def _equal_at(first: sp.Expr, second: sp.Expr, variable: sp.Symbol, point: sp.Expr) -> bool:
    """Both expressions at ``variable = point``, every condition decided, proven equal."""
    values = []
    for expression in (first, second):
        value = expression.xreplace({variable: point})
        undecided = False

        def decide(relation: Relational) -> Any:
            nonlocal undecided
            truth = relation_truth(relation)
            undecided = undecided or truth is None
            return relation if truth is None else truth

        value = value.replace(lambda node: isinstance(node, Relational), decide)
        if undecided or value.has(sp.Piecewise):
            return False
        values.append(value)
    return sp.simplify(values[0] - values[1]) == 0


def _same(first: Any, second: Any) -> bool:
    """Equal after SymPy's automatic canonicalisation (cheap; :func:`equivalent` proves more)."""
    try:
        return bool(first == second)
    except (TypeError, ValueError):  # a matrix or relation refusing a truth value
        return False


# --- the public operators ---------------------------------------------------------------------


def _apply(operator: str, form: FormLike, limit: int) -> list[FormLike]:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise GradlabError(f"limit must be a non-negative int; got {limit!r}")
    own = form.text()
    seen = {own}
    found: list[FormLike] = []
    for description, value in _RULES[operator](form.value):
        if len(found) >= limit:
            break
        candidate = replace(form, value=value, name=description)
        text = candidate.text()
        if text in seen:
            continue
        seen.add(text)
        found.append(candidate)
    return found


def sign(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Flip the sign of the whole value, of one term of a sum, or of one side of a relation.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> a, b = sp.symbols("a b")
        >>> [m.text() for m in sign(Form(a - b))]
        ['-a + b', '-a - b', 'a + b']
    """
    return _apply("sign", form, limit)


def shift(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Strict <-> non-strict; a sum's bound, an integer index or an integer constant by +-1.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> s = sp.Symbol("s")
        >>> [m.name for m in shift(Form(s < 1))]
        ['< -> <=', 'constant 1 -> 2', 'constant 1 -> 0']
    """
    return _apply("shift", form, limit)


def factor(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Drop one factor of a product (numeric coefficients first), or multiply the value by 2.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> x, y = sp.symbols("x y")
        >>> [m.text() for m in factor(Form(x * y / 2))]  # 2 * (x*y/2) repeats the first
        ['x*y', 'y/2', 'x/2']
    """
    return _apply("factor", form, limit)


def term(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Drop one term of a sum, swap the two sides of a difference, drop a piece or condition.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> R = sp.Symbol("R")
        >>> [m.text() for m in term(Form(R - 1))]
        ['R', '-1', '1 - R']
    """
    return _apply("term", form, limit)


def exponent(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Change a numeric power ``p`` to ``p + 1`` or ``p - 1`` (never to 0).

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> R = sp.Symbol("R")
        >>> [m.name for m in exponent(Form(R**2))]
        ['exponent of R: 2 -> 3', 'exponent of R: 2 -> 1']
    """
    return _apply("exponent", form, limit)


def log(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Remove a ``log`` factor (``log(a) -> a``) or multiply by ``log`` of a symbol.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> M = sp.Symbol("M", positive=True)
        >>> [m.text() for m in log(Form(M**2 * sp.log(M)))]
        ['M**2', 'M**3', 'M**2*log(M)**2']
    """
    return _apply("log", form, limit)


def swap(form: FormLike, limit: int = CAP) -> list[FormLike]:
    """Exchange two symbols, two arguments of a function, the sides of a relation, two entries.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> i, j = sp.symbols("s_i s_j")
        >>> [m.text() for m in swap(Form(i - 2 * j))]
        ['-2*s_i + s_j']
    """
    return _apply("swap", form, limit)


OPERATOR_FUNCTIONS: dict[str, Callable[..., list[FormLike]]] = {
    "sign": sign, "shift": shift, "factor": factor, "term": term,
    "exponent": exponent, "log": log, "swap": swap,
}  # fmt: skip
"""Operator name -> function, in the order of :data:`OPERATORS`."""


def generate(
    form: FormLike, exclude_texts: Iterable[str] = (), *, cap: int = CAP
) -> list[tuple[str, FormLike]]:
    """Every operator's mutants of ``form``: ``(operator, mutant)`` pairs, in a fixed order.

    A candidate is discarded when its text equals one of ``exclude_texts`` (the printed form and
    the correction), the form's own text or an earlier mutant's, or its value equals the form's
    after SymPy's canonicalisation. Each operator contributes at most ``cap`` mutants that pass
    those filters. Proving equivalence costs a ``simplify``: the audit asks :func:`equivalent`
    only of a mutant its check does not reject, and drops the mutant if it is proven equal.

    Args:
        form: the accepted form (the printed one when it holds, else the correction).
        exclude_texts: texts no mutant may have.
        cap: at most this many mutants per operator.

    Returns:
        ``(operator name, Form)`` pairs; each Form's ``name`` says what changed.

    Raises:
        GradlabError: if ``cap`` is not a non-negative int.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> s_i, s_j = sp.symbols("s_i s_j")
        >>> for operator, mutant in generate(Form(s_i - s_j), cap=1):
        ...     print(f"{operator:6} {mutant.text():22} {mutant.name}")
        sign   -s_i + s_j             sign flipped
        factor 2*s_i - 2*s_j          multiplied by 2
        term   -s_j                   term s_i dropped
        log    (s_i - s_j)*log(s_i)   times log(s_i)
    """
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise GradlabError(f"cap must be a non-negative int; got {cap!r}")
    if isinstance(form.value, str):
        return []
    seen = {form.text(), *exclude_texts}
    out: list[tuple[str, FormLike]] = []
    for operator in OPERATORS:
        taken = 0
        for description, value in _RULES[operator](form.value):
            if taken >= cap:
                break
            candidate = replace(form, value=value, name=description)
            text = candidate.text()
            if text in seen:
                continue
            seen.add(text)
            if _same(value, form.value):
                continue
            out.append((operator, candidate))
            taken += 1
    return out


def inapplicable_to_code(what: str = "pseudocode string") -> dict[str, str]:
    """The ``inapplicable`` reasons of a form whose value is a code string: no operator applies.

    Example:
        >>> inapplicable_to_code()["sign"]
        'pseudocode string: no SymPy tree'
    """
    return {operator: f"{what}: no SymPy tree" for operator in OPERATORS}


def candidates(operator: str, value: Any) -> list[tuple[str, Any]]:
    """All ``(description, value)`` candidates of one operator, unfiltered and uncapped.

    Example:
        >>> import sympy as sp
        >>> from gradlab.symbolic.claims import Form
        >>> x = sp.Symbol("x")
        >>> candidates("exponent", x**2)
        [('exponent of x: 2 -> 3', x**3), ('exponent of x: 2 -> 1', x)]
    """
    if operator not in _RULES:
        raise GradlabError(f"operator must be one of {OPERATORS}; got {operator!r}")
    return list(islice(_RULES[operator](value), 1000))
