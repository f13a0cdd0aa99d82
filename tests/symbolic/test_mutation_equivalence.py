"""The equivalence machinery of the mutation operators: ``equivalent`` and ``relation_truth``.

An audit drops a mutant only when :func:`equivalent` *proves* it equal to the accepted form, so
these tests pin both directions on small values whose answer is settled by hand: an identity
(``sin**2 + cos**2 = 1``, ``|x| = x`` for ``x >= 0`` and ``-x`` otherwise) for "equal", and a
point where the two values differ, computed in exact arithmetic, for "different". They also
cover the containers a transcribed procedure uses (dicts, tuples, lists, matrices), which the
operators rebuild entry by entry, and the descriptions that shorten a long term to 40 characters.
"""

import pytest
import sympy as sp

from gradlab.symbolic.mutation_operators import candidates, equivalent, relation_truth

x, y, z, k, n = sp.symbols("x y z k n")
ONE = sp.sin(x) ** 2 + sp.cos(x) ** 2  # equals 1 for every x, but SymPy keeps it as written
ABS = sp.Piecewise((x, x >= 0), (-x, True))  # |x| written by cases


# --- containers: compared entry by entry --------------------------------------------------------


def test_tuples_and_lists_are_compared_entry_by_entry():
    # (x, sin^2 + cos^2) and (x, 1) agree in each entry (the Pythagorean identity).
    assert equivalent((x, ONE), (x, sp.Integer(1)))
    assert equivalent([x, ONE], [x, sp.Integer(1)])
    # Entry 2 differs: at x = 0, x + 1 = 1 but x = 0.
    assert not equivalent((x, x + 1), (x, x))
    # A one-entry tuple is not a two-entry tuple even though their first entries agree.
    assert not equivalent((x, y), (x,))
    assert not equivalent((x,), (x, y))


def test_a_container_is_never_equal_to_a_scalar():
    # A tuple, a dict or a matrix holding x is a different kind of value from x itself.
    assert not equivalent((x,), x)
    assert not equivalent(x, (x,))
    assert not equivalent({"a": x}, x)
    assert not equivalent(x, {"a": x})
    assert not equivalent(sp.Matrix([x]), x)
    assert not equivalent(x, sp.Matrix([x]))


def test_dicts_are_compared_key_by_key():
    assert equivalent({"a": ONE, "b": x}, {"a": sp.Integer(1), "b": x})
    # Same values under different keys: not the same parameters.
    assert not equivalent({"a": x}, {"b": x})
    # Value of "b": y vs x differ at (x, y) = (0, 1).
    assert not equivalent({"a": x, "b": y}, {"a": x, "b": x})


def test_matrices_are_compared_by_shape_and_entries():
    assert equivalent(sp.Matrix([[ONE, x]]), sp.Matrix([[1, x]]))
    # The same entries in a column and in a row: shapes (2, 1) and (1, 2) differ.
    assert not equivalent(sp.Matrix([x, y]), sp.Matrix([[x, y]]))
    # Entry (0, 1): x + 1 vs x differ by 1 everywhere.
    assert not equivalent(sp.Matrix([[x, x + 1]]), sp.Matrix([[x, x]]))


def test_domain_substitution_reaches_into_tuples():
    # With y := x both tuples read (x, 2x).
    assert equivalent((x, 2 * x), (y, x + y), domain={y: x})
    assert equivalent([x, 2 * x], [y, x + y], domain={y: x})
    # Without it, entry 1 differs at (x, y) = (0, 1).
    assert not equivalent((x, 2 * x), (y, x + y))


# --- numbers, strings, expressions ------------------------------------------------------------


def test_numbers_and_strings_are_compared_by_value():
    assert equivalent(2, 2)
    assert equivalent(2, sp.Integer(2))
    assert not equivalent(2, 3)
    assert equivalent("a = b", "a = b")
    assert not equivalent("a = b", "b = a")


def test_a_python_number_beside_an_expression_is_compared_as_a_number():
    # A form's part may be a plain int or float (a transcribed constant): 1 and 1.0 equal
    # sin^2 + cos^2 as the SymPy 1 does, 2 does not.
    assert equivalent(1, ONE) and equivalent(ONE, 1) and equivalent(1.0, ONE)
    assert not equivalent(2, ONE) and not equivalent(ONE, 2)
    assert not equivalent(x, 1)


def test_a_number_is_never_equal_to_its_string_or_to_a_container():
    assert not equivalent(2, "2") and not equivalent("2", 2)
    assert not equivalent(1, [1]) and not equivalent((1,), 1)


def test_the_same_tree_is_equal_even_where_its_difference_is_undefined():
    # oo - oo is NaN, not 0: equality of the trees decides first.
    assert equivalent(sp.oo, sp.oo) and equivalent(x + sp.oo, x + sp.oo)
    assert not equivalent(sp.oo, -sp.oo)


class _Undecidable(sp.Function):
    """A function SymPy cannot evaluate numerically and whose simplification raises."""

    def _eval_simplify(self, **kwargs):
        raise ValueError("no simplification")


def test_a_difference_sympy_fails_to_simplify_is_not_proven_equal():
    # Not evaluable at a point (no numeric refutation), and simplify raises on the difference:
    # undecided, so the two stay different (the mutant is kept).
    assert not equivalent(_Undecidable(x), 0)


def test_a_float_equals_the_rational_it_writes():
    assert equivalent(0.5, sp.Rational(1, 2)) and equivalent(sp.Rational(1, 2), 0.5)
    assert equivalent(sp.Float(0.25), sp.Rational(1, 4))
    assert not equivalent(0.5, sp.Rational(1, 3))


def test_a_sympy_number_equal_to_an_identity_is_proven_equal():
    # 1 = sin(x)**2 + cos(x)**2 for every x: a number against a non-number expression.
    assert equivalent(sp.Integer(1), ONE)
    assert equivalent(ONE, sp.Integer(1))
    # 2 != sin^2 + cos^2 = 1.
    assert not equivalent(sp.Integer(2), ONE)


def test_an_identity_is_proven_and_a_constant_offset_is_not():
    assert equivalent(x * ONE, x)
    assert equivalent((x + 1) ** 2, x**2 + 2 * x + 1)
    # (x + 1) - x = 1: never zero, so the two differ at every point.
    assert not equivalent(x + 1, x)
    assert not equivalent(ONE + 1, sp.Integer(1))
    # x - y and y - x differ at (1, 0): 1 vs -1.
    assert not equivalent(x - y, y - x)


def test_an_identity_with_an_undefined_function_is_proven():
    # f(x) * (sin^2 + cos^2) = f(x) whatever f is; f cannot be evaluated at a number.
    f = sp.Function("f")
    assert equivalent(f(x) * ONE, f(x))
    # f(x) + 1 vs f(x): differ by 1.
    assert not equivalent(f(x) + 1, f(x))


def test_an_identity_undefined_at_positive_points_is_proven():
    # |x| - x = 0 for x >= 0, so both sides are undefined there (division by zero); for x < 0
    # they agree because sin^2 + cos^2 = 1. A numeric point x > 0 gives nan, not a refutation.
    assert equivalent(ONE / (sp.Abs(x) - x), 1 / (sp.Abs(x) - x))


def test_an_identity_too_large_for_a_float_at_the_numeric_points_is_proven():
    # exp(10^6 x) at a numeric point x >= 11/13 is about 10^367000: the difference evaluates to
    # an infinite float there, which refutes nothing, so simplify decides (and proves it 0).
    assert equivalent(ONE * sp.exp(10**6 * x), sp.exp(10**6 * x))
    assert not equivalent(ONE * sp.exp(10**6 * x), 2 * sp.exp(10**6 * x))


@pytest.mark.slow
def test_the_proof_size_limit():
    # sum_{i<m} (sin(a_i)**2 + cos(a_i)**2) - m is 0. Its operations, counted by hand: per
    # term a sin, a cos and two powers (4), and 2m additions joining its 2m + 1 terms: 6m.
    # m = 10 gives 60 operations, at the limit, so simplify is asked and proves it; m = 11
    # gives 66, over the limit: not proven, so it counts as different.
    symbols = sp.symbols("a0:11")
    ten = sum(sp.sin(s) ** 2 + sp.cos(s) ** 2 for s in symbols[:10])
    eleven = sum(sp.sin(s) ** 2 + sp.cos(s) ** 2 for s in symbols)
    assert equivalent(ten, sp.Integer(10))
    assert not equivalent(eleven, sp.Integer(11))


def test_a_sum_or_piecewise_difference_is_not_handed_to_simplify():
    # All are 0 mathematically (a sum is linear: sum 2 f(k) = 2 sum f(k); the first piece is
    # sin^2 + cos^2 = 1), but a difference with a Sum SymPy cannot sum in closed form, or a
    # Piecewise whose condition is not linear in one variable, is never proven (simplify is
    # slow on those): it counts as different. One it sums in closed form is proven by that.
    assert equivalent(sp.Sum(2 * k, (k, 1, n)), 2 * sp.Sum(k, (k, 1, n)))
    unsummed = sp.Sum(sp.sin(k) / sp.factorial(k), (k, 1, n))
    assert not equivalent(sp.Sum(2 * sp.sin(k) / sp.factorial(k), (k, 1, n)), 2 * unsummed)
    first = sp.Piecewise((ONE, x * y > 1), (0, True))
    second = sp.Piecewise((1, x * y > 1), (0, True))
    assert not equivalent(first, second)


# --- Piecewise: compared on the whole line ------------------------------------------------------


def test_a_piecewise_against_a_plain_expression():
    # |x| by cases equals Abs(x): at x < 0 both are -x, at x >= 0 both are x.
    assert equivalent(ABS, sp.Abs(x))
    assert equivalent(sp.Abs(x), ABS)
    # The cases of |x| vs x: they differ at x = -1 (1 vs -1).
    assert not equivalent(ABS, x)
    assert not equivalent(x, ABS)


def test_relations_with_piecewise_sides():
    # |x| = 1 written with the cases of |x| and with Abs: the same equation, side by side.
    assert equivalent(sp.Eq(ABS, 1), sp.Eq(sp.Abs(x), 1))
    assert equivalent(sp.Ge(ABS, 1), sp.Ge(sp.Abs(x), 1))
    assert equivalent(sp.Lt(ABS, 1), sp.Lt(sp.Abs(x), 1))
    # |x| >= 1 vs x >= 1: at x = -2 the first holds and the second does not.
    assert not equivalent(sp.Ge(ABS, 1), sp.Ge(x, 1))


# --- relations ----------------------------------------------------------------------------------


def test_relations():
    assert equivalent(x > 0, x > 0)
    # 1 - x >= y and 1 - y >= x both say x + y <= 1.
    assert equivalent(1 - x >= y, 1 - y >= x)
    # Strict vs non-strict: at x + y = 1 the first holds, the second does not.
    assert not equivalent(1 - x >= y, 1 - y > x)
    # x = y and y - x = 0 are the same equation (difference up to sign).
    assert equivalent(sp.Eq(x, y), sp.Eq(y - x, 0))
    # x = y vs x = y + 1: at (0, 0) the first holds and the second does not.
    assert not equivalent(sp.Eq(x, y), sp.Eq(x, y + 1))


def test_a_relation_is_not_a_boolean_combination():
    # x > 0 vs (x > 0 and y > 0): at (1, -1) the first holds and the second does not.
    assert not equivalent(x > 0, sp.And(x > 0, y > 0))
    assert not equivalent(sp.And(x > 0, y > 0), x > 0)
    # And vs Or: at (1, -1) the Or holds and the And does not.
    assert not equivalent(sp.And(x > 0, y > 0), sp.Or(x > 0, y > 0))
    assert equivalent(sp.And(x > 0, y > 0), sp.And(y > 0, x > 0))


def test_relation_truth():
    w = sp.Symbol("w", positive=True)
    # w > 0 holds for a positive w; -w >= 0 never does; x >= 0 depends on x.
    assert relation_truth(sp.Gt(w, 0, evaluate=False)) is sp.true
    assert relation_truth(sp.Ge(-w, 0, evaluate=False)) is sp.false
    assert relation_truth(sp.Ge(x, 0)) is None
    assert relation_truth(sp.Eq(x, y)) is None
    # (w + 1)**2 - (w**2 + 2w + 1) = 0.
    assert relation_truth(sp.Eq((w + 1) ** 2, w**2 + 2 * w + 1, evaluate=False)) is sp.true


# --- rebuilding containers: the operators' candidates -------------------------------------------


def test_sign_candidates_inside_a_tuple_and_a_list():
    # y*(x + 1) in a tuple: the whole entry negated, then each term of x + 1 negated.
    for kind in (tuple, list):
        found = dict(candidates("sign", kind([y * (x + 1), z])))
        assert found["sign flipped in part 1"] == kind([-y * (x + 1), z])
        assert found["sign of term 1 flipped in part 1"] == kind([y * (x - 1), z])
        assert found["sign of term x flipped in part 1"] == kind([y * (1 - x), z])
        assert found["sign flipped in part 2"] == kind([y * (x + 1), -z])


def test_sign_candidates_inside_a_matrix():
    found = candidates("sign", sp.Matrix([[y * (x + 1), z]]))
    values = {name: value for name, value in found if name != "sign flipped"}
    assert values["sign of term 1 flipped"] == sp.Matrix([[y * (x - 1), z]])
    assert values["sign of term x flipped"] == sp.Matrix([[y * (1 - x), z]])
    flipped = [value for name, value in found if name == "sign flipped"]
    assert flipped == [sp.Matrix([[-y * (x + 1), z]]), sp.Matrix([[y * (x + 1), -z]])]
    assert all(value.shape == (1, 2) for _, value in found)


def test_swapping_symbols_inside_a_tuple_and_a_list():
    assert dict(candidates("swap", (x, 2 * y)))["x <-> y"] == (y, 2 * x)
    assert dict(candidates("swap", [x, 2 * y]))["x <-> y"] == [y, 2 * x]


def test_long_terms_are_shortened_to_40_characters():
    # A 40-character term is printed whole; a 41-character one as its first 37 characters
    # and "...", 40 in all.
    forty, forty_one = sp.Symbol("a" * 40), sp.Symbol("b" * 41)
    names = [name for name, _ in candidates("term", forty + forty_one)]
    assert f"term {'a' * 40} dropped" in names
    assert f"term {'b' * 37}... dropped" in names


def test_an_identity_in_a_matrix_entry_is_proven():
    # A[0, 0] * (sin^2 + cos^2) = A[0, 0]; a matrix entry cannot be given a numeric value.
    matrix = sp.MatrixSymbol("A", 2, 2)
    assert equivalent(matrix[0, 0] * ONE, matrix[0, 0])
    assert not equivalent(matrix[0, 0] + 1, matrix[0, 0])


def test_piecewise_pieces_are_compared_on_the_whole_open_interval():
    # On 0 < x < 2 one form is |x - 1|, the other 1 - x. They agree for x <= 1 but not above:
    # at x = 3/2, |1/2| = 1/2 while 1 - 3/2 = -1/2. Outside (0, 2) both are 0.
    inside = (x > 0) & (x < 2)
    first = sp.Piecewise((sp.Abs(x - 1), inside), (0, True))
    second = sp.Piecewise((1 - x, inside), (0, True))
    assert not equivalent(first, second)
    # With |x - 1| on both sides they are the same function.
    assert equivalent(first, sp.Piecewise((sp.Abs(1 - x), inside), (0, True)))


def test_a_sum_whose_shifted_bound_adds_a_zero_term_is_proven_equal():
    # sum of k over 0..n against 1..n: the k = 0 term is 0, yet the mutant was reported as a
    # survivor (equivalent() did not try to prove anything with a Sum in it)
    import sympy as sp

    from gradlab.symbolic.mutation_operators import equivalent

    k, n = sp.Symbol("k", integer=True), sp.Symbol("n", integer=True, positive=True)
    assert equivalent(sp.Sum(k, (k, 1, n)), sp.Sum(k, (k, 0, n)))
    assert not equivalent(sp.Sum(k, (k, 1, n)), sp.Sum(k, (k, 2, n)))  # drops k = 1
    assert not equivalent(sp.Sum(1 / k, (k, 1, n)), sp.Sum(1 / k, (k, 1, n + 1)))
