"""The mutation operators on small expressions: each mutant derived by hand from the rule.

Expected mutants are written out from the operator's rule (what a reader would get wrong), not
taken from the code's output; SymPy prints them in its canonical order, so each expectation is
built as a SymPy object and compared by its text.
"""

import pytest
import sympy as sp

from gradlab.errors import GradlabError
from gradlab.symbolic.claims import Form
from gradlab.symbolic.mutation_operators import (
    CAP,
    OPERATORS,
    candidates,
    equivalent,
    exponent,
    factor,
    generate,
    inapplicable_to_code,
    log,
    shift,
    sign,
    swap,
    term,
)

a, b, x, y, z, R, A = sp.symbols("a b x y z R A")
M = sp.Symbol("M", positive=True)
k, n = sp.symbols("k n", integer=True)
t = sp.Symbol("t", integer=True)


def texts(forms):
    return [form.text() for form in forms]


def strs(*values):
    return [sp.sstr(value) for value in values]


def test_sign_flips_the_whole_value_then_each_term():
    # a - b: -(a - b); then term a -> -a; then term -b -> +b
    assert texts(sign(Form(a - b))) == strs(b - a, -a - b, a + b)


def test_sign_flips_one_side_of_a_relation():
    got = texts(sign(Form(sp.Lt(x - 1, y))))
    assert sp.sstr(sp.Lt(1 - x, y)) in got and sp.sstr(sp.Lt(x - 1, -y)) in got


def test_shift_turns_strict_into_non_strict_and_moves_constants_by_one():
    assert texts(shift(Form(sp.Lt(x, 1)))) == strs(sp.Le(x, 1), sp.Lt(x, 2), sp.Lt(x, 0))
    assert texts(shift(Form(sp.Ge(x, y)))) == strs(sp.Gt(x, y))


def test_shift_moves_each_bound_of_a_sum_by_one():
    got = texts(shift(Form(sp.Sum(t**2, (t, 1, n)))))
    assert got[:4] == strs(
        sp.Sum(t**2, (t, 2, n)), sp.Sum(t**2, (t, 0, n)),
        sp.Sum(t**2, (t, 1, n + 1)), sp.Sum(t**2, (t, 1, n - 1)),
    )  # fmt: skip


def test_a_sums_own_variable_is_neither_shifted_nor_swapped():
    # t is bound by the sum: moving it would move its limits (SymPy refuses t + 1 as a
    # variable), and swapping it with n would capture n. Only the bounds and the free n move
    # (n -> n +- 1 repeats the upper bound's move: a repeated mutant counts once).
    total = sp.Sum(t**2, (t, 1, n))
    assert texts(shift(Form(total), limit=10)) == strs(
        sp.Sum(t**2, (t, 2, n)), sp.Sum(t**2, (t, 0, n)),
        sp.Sum(t**2, (t, 1, n + 1)), sp.Sum(t**2, (t, 1, n - 1)),
    )  # fmt: skip
    assert [name for name, _ in candidates("shift", total)][4:] == [
        "index n -> n + 1", "index n -> n - 1"]  # fmt: skip
    assert dict(candidates("swap", total * x)) == {"n <-> x": sp.Sum(t**2, (t, 1, x)) * n}


def test_a_free_symbol_named_like_a_sums_variable_is_left_alone():
    # {s: sum_t t^2 up to n, u: t + k}: the t of u shares the bound t's name, so renaming it
    # would rename the sum's variable too (or be captured by it); k and n still move.
    value = {"s": sp.Sum(t**2, (t, 1, n)), "u": t + k}
    names = [name for name, _ in candidates("shift", value)]
    assert not any(name.startswith("index t") for name in names)
    assert "index k -> k + 1" in names and "index n -> n + 1" in names
    assert dict(candidates("swap", value))["k <-> n"] == {"s": sp.Sum(t**2, (t, 1, k)),
                                                         "u": t + n}  # fmt: skip
    assert not any("t <->" in name or "<-> t" in name for name, _ in candidates("swap", value))


def test_a_lambdas_own_argument_is_bound_too():
    # Lambda(x, x * y) binds x: only y and the free z can be exchanged.
    value = (sp.Lambda(x, x * y), z)
    assert [name for name, _ in candidates("swap", value) if "<->" in name] == ["y <-> z"]


def test_shift_moves_an_integer_index_everywhere_and_leaves_real_symbols_alone():
    assert texts(shift(Form(x / k))) == strs(x / (k + 1), x / (k - 1))
    assert texts(shift(Form(x / y))) == []  # no integer symbol, no integer constant


def test_factor_drops_each_factor_numbers_first_then_doubles():
    assert texts(factor(Form(3 * x * y))) == strs(x * y, 3 * y, 3 * x, 6 * x * y)


def test_factor_never_turns_a_negated_term_into_a_constant():
    # -b in a - b is a signed term: dropping b would leave a - 1, which is no slip of a factor
    assert texts(factor(Form(a - b))) == strs(2 * a - 2 * b)


def test_term_drops_each_term_then_swaps_the_difference():
    assert texts(term(Form(R - 1))) == strs(R, sp.Integer(-1), 1 - R)


def test_term_drops_a_piece_and_a_condition():
    piecewise = sp.Piecewise((x, sp.And(x >= 0, x <= 1)), (0, True))
    got = texts(term(Form(piecewise)))
    assert sp.sstr(sp.Piecewise((0, True))) in got  # piece 1 dropped
    assert sp.sstr(sp.Piecewise((x, x <= 1), (0, True))) in got  # condition x >= 0 dropped


def test_exponent_moves_a_numeric_power_by_one_and_never_to_zero():
    assert texts(exponent(Form(A / R**2))) == strs(A / R, A / R**3)
    assert texts(exponent(Form(R**2))) == strs(R**3, R)
    assert texts(exponent(Form(1 / R))) == strs(R**-2)  # -1 + 1 = 0 is no power


def test_log_removes_a_log_factor_or_adds_one():
    # M^2 log M: the log factor dropped; log(M) -> M; times log(M)
    assert texts(log(Form(M**2 * sp.log(M)))) == strs(M**2, M**3, M**2 * sp.log(M) ** 2)
    assert texts(log(Form(M**2))) == strs(M**2 * sp.log(M))


def test_swap_exchanges_symbols_sides_and_entries():
    s_i, s_j = sp.symbols("s_i s_j")
    assert texts(swap(Form(s_i - 2 * s_j))) == strs(s_j - 2 * s_i)
    assert sp.sstr(sp.Lt(1, x)) in texts(swap(Form(sp.Lt(x, 1))))
    entries = Form({"left": t, "right": t + 1})
    assert texts(swap(entries)) == ["left = t + 1, right = t"]


def test_operators_reach_into_dict_entries_and_name_the_entry():
    form = Form({"D": a - b, "n": 3})
    flipped = sign(form)
    assert flipped[0].text() == "D = -a + b, n = 3" and flipped[0].name == "sign flipped in D"
    assert "D = a - b, n = -3" in texts(flipped)
    assert "D = a - b, n = 4" in texts(shift(form))


def test_the_lhs_and_context_of_a_form_are_kept():
    form = Form(R**2, lhs="denominator", context="Eq. 14")
    assert texts(exponent(form)) == ["Eq. 14, with denominator = R**3",
                                     "Eq. 14, with denominator = R"]  # fmt: skip


def test_at_most_cap_mutants_per_operator_in_a_fixed_order():
    value = sum(sp.symbols("p0:9"))
    first, second = texts(sign(Form(value))), texts(sign(Form(value)))
    assert first == second and len(first) == CAP
    assert len(sign(Form(value), limit=2)) == 2
    assert len(candidates("sign", value)) == 10  # the whole sum, then each of its 9 terms


def test_generate_tags_each_mutant_with_its_operator_and_excludes_given_texts():
    form = Form(a - b)
    got = generate(form, exclude_texts={sp.sstr(b - a)})
    assert sp.sstr(b - a) not in [m.text() for _, m in got]
    assert {op for op, _ in got} <= set(OPERATORS)
    assert len({m.text() for _, m in got}) == len(got)  # no text twice
    assert form.text() not in [m.text() for _, m in got]
    assert [op for op, _ in generate(form, cap=1)] == ["sign", "factor", "term", "log"]


def test_generate_gives_nothing_for_a_code_string_and_the_reasons_say_why():
    assert generate(Form("D = s1 - s2")) == []
    reasons = inapplicable_to_code("numpy expression")
    assert set(reasons) == set(OPERATORS) and reasons["swap"] == "numpy expression: no SymPy tree"


def test_equivalence_is_proven_not_guessed():
    assert equivalent(sp.Max(x, y), sp.Max(y, x))
    assert equivalent((x + 1) ** 2, x**2 + 2 * x + 1)
    assert equivalent(sp.KroneckerDelta(k, n), sp.KroneckerDelta(n, k))
    assert not equivalent(x - y, y - x)
    assert not equivalent(sp.Lt(x, 1), sp.Le(x, 1))
    assert equivalent({"a": x * (y + 1)}, {"a": x * y + x}) and not equivalent({"a": x}, {"b": x})
    assert not equivalent(sp.Sum(1 / t, (t, 1, n)), sp.Sum(1 / t, (t, 1, n + 1)))


def test_two_inequalities_are_equal_when_their_differences_are():
    assert equivalent(1 - x >= y, 1 - y >= x) and equivalent(x >= y, y <= x)
    assert equivalent(sp.Lt(x, y + 1), sp.Gt(y - x, -1))
    assert not equivalent(1 - x >= y, 1 - y > x) and not equivalent(x >= y, x <= y)
    assert not equivalent(1 - x >= y, 1 - y >= 2 * x)
    assert equivalent(sp.Eq(x, y), sp.Eq(y - x, 0)) and not equivalent(sp.Eq(x, y), sp.Eq(x, 2 * y))


# the triangle of Eq. 3 (Zhong et al.): continuous at its three ends when the bins are equal
low, mid, high, width = sp.symbols("b_(t-1) b_t b_(t+1) Delta", real=True)
positive = sp.Symbol("Delta_(>0)", positive=True)
BINS = {low: mid - positive, high: mid + positive, width: positive}


def _triangle(left_open=False, middle_open=False):
    rise = (x > low) if left_open else (x >= low)
    top = (x < mid) if middle_open else (x <= mid)
    return sp.Piecewise(((x - low) / width, rise & top),
                        ((high - x) / width, (x >= mid) & (x <= high)), (0, True))  # fmt: skip


@pytest.mark.slow
def test_a_strict_bound_where_a_piecewise_is_continuous_is_proven_equal():
    assert equivalent(_triangle(left_open=True), _triangle(), BINS)
    assert equivalent(_triangle(middle_open=True), _triangle(), BINS)
    # without equal bins the triangle's top is not continuous: at x = b_t the open top takes
    # the falling piece, (b_(t+1) - b_t)/Delta instead of (b_t - b_(t-1))/Delta
    assert not equivalent(_triangle(middle_open=True), _triangle())
    point = {low: 0, mid: 1, high: 3, width: 1, x: 1}
    assert _triangle(middle_open=True).subs(point) == 2 and _triangle().subs(point) == 1
    # equal too (0 at b_(t-1) either way), but with the bins' order unknown nothing is proven
    assert not equivalent(_triangle(left_open=True), _triangle())


@pytest.mark.slow
def test_a_strict_bound_at_a_jump_or_an_unordered_boundary_is_not_proven_equal():
    assert not equivalent(sp.Piecewise((1, x < 0), (0, True)), sp.Piecewise((1, x <= 0), (0, True)))
    step = sp.Piecewise((width, (x >= mid) & (x < mid + width)), (0, True))
    closed = sp.Piecewise((width, (x >= mid) & (x <= mid + width)), (0, True))
    assert not equivalent(step, closed, {width: positive})  # the step is Delta > 0 at the end
    assert not equivalent(step, closed)  # Delta's sign unknown: the ends cannot be ordered
    # an earlier piece that already covers the flipped point: equal
    first_wins = sp.Piecewise((1, x >= 0), (2, (x <= 0) & (x > -1)), (0, True))
    assert equivalent(first_wins, sp.Piecewise((1, x >= 0), (2, (x < 0) & (x > -1)), (0, True)))


def test_relations_of_different_kinds_are_not_equal():
    assert not equivalent(x >= y, sp.Eq(x, y)) and not equivalent(sp.Eq(x, y), x >= y)
    assert not equivalent(sp.Eq(x, y), sp.Ne(x, y))
    assert equivalent(sp.Eq(x, y), sp.Eq(x - y, 0)) and equivalent(sp.Ne(x, y), sp.Ne(y, x))


def test_a_piecewise_proof_reads_the_boundary_off_a_slope_other_than_one():
    # SymPy keeps 2x + y^2 < 1 as written (2x < 1 it rewrites as x < 1/2); only x gives a
    # boundary, (1 - y^2)/2, where the two sides differ unless the value is 0 there
    level = 2 * x + y**2 - 1
    assert sp.Piecewise((1, level < 0), (0, True)).args[0][1] == (2 * x + y**2 < 1)
    assert not equivalent(sp.Piecewise((1, level < 0), (0, True)),
                          sp.Piecewise((1, level <= 0), (0, True)))  # fmt: skip
    assert equivalent(sp.Piecewise((level, level < 0), (0, True)),
                      sp.Piecewise((level, level <= 0), (0, True)))  # fmt: skip


def test_a_piecewise_proof_looks_inside_every_interval():
    # the two differ only strictly between 0 and 1
    inside = (x > 0) & (x < 1)
    one, two = sp.Piecewise((1, inside), (0, True)), sp.Piecewise((2, inside), (0, True))
    assert not equivalent(one, two)


def test_a_piecewise_proof_tries_each_variable_of_the_conditions():
    # x enters the conditions squared (no boundary in x); in y the boundary is -x^2
    shifted = y + x**2
    assert equivalent(sp.Piecewise((shifted, shifted >= 0), (0, True)),
                      sp.Piecewise((shifted, shifted > 0), (0, True)))  # fmt: skip


def test_what_a_piecewise_proof_cannot_decide_stays_unproven():
    flag = sp.Symbol("flag")  # a condition that is no relation: never decided
    assert not equivalent(sp.Piecewise((1, flag), (0, True)), sp.Integer(0))
    assert not equivalent(sp.Piecewise((1, (x < 0) & flag), (0, True)),
                          sp.Piecewise((1, (x <= 0) & flag), (0, True)))  # fmt: skip
    assert not equivalent(sp.Piecewise((1, x**2 < 1), (0, True)),
                          sp.Piecewise((1, x**2 <= 1), (0, True)))  # fmt: skip


def test_a_relation_is_decided_from_the_sign_of_its_difference():
    from gradlab.symbolic.mutation_operators import relation_truth

    w = sp.Symbol("w", positive=True)
    unevaluated = {"evaluate": False}
    assert relation_truth(sp.Eq(w - w, 0, **unevaluated)) == sp.true
    assert relation_truth(sp.Ne(w - w, 0, **unevaluated)) == sp.false
    assert relation_truth(sp.Eq(w, 0, **unevaluated)) == sp.false
    assert relation_truth(sp.Ne(w, 0, **unevaluated)) == sp.true
    assert relation_truth(sp.Ge(w - w, 0, **unevaluated)) == sp.true
    assert relation_truth(sp.Gt(w - w, 0, **unevaluated)) == sp.false
    assert relation_truth(sp.Le(w, 0, **unevaluated)) == sp.false
    assert relation_truth(sp.Lt(-w, 0, **unevaluated)) == sp.true
    assert relation_truth(sp.Ge(x, 0, **unevaluated)) is None
    assert relation_truth(sp.Eq(x, 0, **unevaluated)) is None


@pytest.mark.parametrize("bad", [-1, 1.5, True, "4"])
def test_a_bad_cap_is_refused_naming_the_value(bad):
    with pytest.raises(GradlabError, match=f"cap must be a non-negative int; got {bad!r}"):
        generate(Form(x), cap=bad)
    with pytest.raises(GradlabError, match="limit must be a non-negative int"):
        sign(Form(x), limit=bad)


def test_an_unknown_operator_is_refused_naming_the_choices():
    with pytest.raises(GradlabError, match=r"operator must be one of .*; got 'flip'"):
        candidates("flip", x)


# --- the rules applied by hand to small values: each list is derived in the comment above it --


def test_sign_walks_a_tuple_and_names_the_part_from_one():
    # the tuple itself is no expression; part 1 (a - b) is a root: flipped whole, then its terms
    # a and -b; part 2 (the int 3) is a root: flipped
    assert candidates("sign", (a - b, 3)) == [
        ("sign flipped in part 1", (b - a, 3)),
        ("sign of term a flipped in part 1", (-a - b, 3)),
        ("sign of term -b flipped in part 1", (a + b, 3)),
        ("sign flipped in part 2", (a - b, -3)),
    ]


def test_sign_flips_each_entry_of_a_matrix():
    # a matrix is no expression, its entries are roots: x, then 2
    got = candidates("sign", sp.Matrix([[x, 2]]))
    assert got == [("sign flipped", sp.Matrix([[-x, 2]])), ("sign flipped", sp.Matrix([[x, -2]]))]


def test_sign_flips_a_non_zero_constant_and_leaves_zero_alone():
    assert candidates("sign", sp.Integer(1)) == [("sign flipped", sp.Integer(-1))]
    assert candidates("sign", sp.Integer(0)) == []


def test_sign_names_the_side_of_a_relation_it_flips_and_skips_a_zero_side():
    # x < 1: the left side x, then the right side 1; a relation is not flipped as a whole
    assert candidates("sign", sp.Lt(x, 1)) == [
        ("sign of the left side flipped", sp.Lt(-x, 1)),
        ("sign of the right side flipped", sp.Lt(x, -1)),
    ]
    assert candidates("sign", sp.Lt(x, 0)) == [("sign of the left side flipped", sp.Lt(-x, 0))]
    # inside a dict entry the entry is named and the rest of the dict kept
    assert candidates("sign", {"c": sp.Lt(x, 1)}) == [
        ("sign of the left side flipped in c", {"c": sp.Lt(-x, 1)}),
        ("sign of the right side flipped in c", {"c": sp.Lt(x, -1)}),
    ]


def test_shift_names_the_entry_of_a_relation_it_loosens():
    # x < y: strict -> non-strict; x, y are real, no integer constant
    assert candidates("shift", {"c": sp.Lt(x, y)}) == [("< -> <= in c", {"c": sp.Le(x, y)})]


def test_shift_skips_a_limit_without_bounds_and_moves_the_next_one():
    # limits (x,) (indefinite: skipped) and (y, 0, 1): lower 0 -> 1, 0 -> -1, upper 1 -> 2,
    # 1 -> 0; x, y are real (no index) and the 0, 1 of a limit are bounds, not constants
    integral = sp.Integral(x * y, x, (y, 0, 1))
    assert candidates("shift", integral) == [
        ("lower bound of y: 0 -> 1", sp.Integral(x * y, x, (y, 1, 1))),
        ("lower bound of y: 0 -> -1", sp.Integral(x * y, x, (y, -1, 1))),
        ("upper bound of y: 1 -> 2", sp.Integral(x * y, x, (y, 0, 2))),
        ("upper bound of y: 1 -> 0", sp.Integral(x * y, x, (y, 0, 0))),
    ]


def test_shift_moves_the_bounds_of_a_sum_inside_a_dict_entry():
    # Sum over a (real) from 1 to 3 of x: no integer symbol, 1 and 3 are bounds, not constants
    def total(lower, upper):
        return {"s": sp.Sum(x, (a, lower, upper))}

    assert candidates("shift", total(1, 3)) == [
        ("lower bound of a: 1 -> 2 in s", total(2, 3)),
        ("lower bound of a: 1 -> 0 in s", total(0, 3)),
        ("upper bound of a: 3 -> 4 in s", total(1, 4)),
        ("upper bound of a: 3 -> 2 in s", total(1, 2)),
    ]


def test_shift_names_an_index_moved_up_and_down():
    # x/k: k is the only integer symbol; the -1 of k**-1 is an exponent, not a constant
    assert candidates("shift", x / k) == [
        ("index k -> k + 1", x / (k + 1)),
        ("index k -> k - 1", x / (k - 1)),
    ]


def test_factor_skips_a_unit_coefficient_and_keeps_the_sign_of_a_negative_one():
    # x*y: coefficient 1 (nothing to drop), x dropped, y dropped, then doubled
    assert candidates("factor", x * y) == [
        ("factor x dropped", y), ("factor y dropped", x), ("multiplied by 2", 2 * x * y),
    ]  # fmt: skip
    # -3xy: 3 dropped (the sign stays), x dropped, y dropped, then doubled
    assert candidates("factor", -3 * x * y) == [
        ("factor 3 dropped", -x * y), ("factor x dropped", -3 * y),
        ("factor y dropped", -3 * x), ("multiplied by 2", -6 * x * y),
    ]  # fmt: skip


def test_factor_drops_a_factor_of_a_product_inside_a_sum_keeping_the_sum():
    # x*y + 1: the product x*y loses x, then y, the 1 stays; then the whole sum doubled
    assert candidates("factor", x * y + 1) == [
        ("factor x dropped", y + 1), ("factor y dropped", x + 1),
        ("multiplied by 2", 2 * (x * y + 1)),
    ]  # fmt: skip


def test_factor_doubles_a_number_but_not_zero():
    assert candidates("factor", {"n": 3}) == [("multiplied by 2 in n", {"n": 6})]
    assert candidates("factor", sp.Integer(1)) == [("multiplied by 2", sp.Integer(2))]
    assert candidates("factor", sp.Integer(0)) == []


def test_factor_doubles_the_left_side_of_a_relation_unless_it_is_zero():
    assert candidates("factor", sp.Lt(x, y)) == [("left side multiplied by 2", sp.Lt(2 * x, y))]
    assert candidates("factor", sp.Lt(x, 0)) == [("left side multiplied by 2", sp.Lt(2 * x, 0))]
    assert candidates("factor", sp.Lt(1, x)) == [("left side multiplied by 2", sp.Lt(2, x))]
    assert candidates("factor", sp.Lt(0, x)) == []
    assert candidates("factor", {"c": sp.Lt(x, y)}) == [
        ("left side multiplied by 2 in c", {"c": sp.Lt(2 * x, y)}),
    ]


def test_term_swaps_a_difference_and_keeps_the_other_terms():
    # a + b - y: each term dropped; then a - y -> y - a and b - y -> y - b, the rest kept
    assert candidates("term", a + b - y) == [
        ("term a dropped", b - y), ("term b dropped", a - y), ("term -y dropped", a + b),
        ("a and y swapped in a difference", b + y - a),
        ("b and y swapped in a difference", a + y - b),
    ]  # fmt: skip


def test_term_drops_each_piece_of_a_piecewise_in_a_dict_entry_but_never_the_only_one():
    pieces = sp.Piecewise((x, x > 0), (y, True))
    # piece 1 dropped leaves y everywhere; piece 2 dropped leaves x where x > 0
    assert candidates("term", {"p": pieces}) == [
        ("piece 1 (x) dropped in p", {"p": sp.Piecewise((y, True))}),
        ("piece 2 (y) dropped in p", {"p": sp.Piecewise((x, x > 0))}),
    ]
    assert candidates("term", sp.Piecewise((x, x > 0))) == []  # one piece: nothing to drop


def test_term_drops_each_condition_of_an_and_keeping_the_other():
    got = dict(candidates("term", sp.And(x > 0, y > 0)))
    assert got == {"condition x > 0 dropped": y > 0, "condition y > 0 dropped": x > 0}


def test_log_names_the_removed_factor_and_the_dict_entry():
    # M^2 log M in entry c: the log factor removed; log(M) -> M; times log(M)
    value = M**2 * sp.log(M)
    assert candidates("log", {"c": value}) == [
        ("log factor log(M) removed in c", {"c": M**2}),
        ("log(M) -> M in c", {"c": M**3}),
        ("times log(M) in c", {"c": value * sp.log(M)}),
    ]


def test_swap_exchanges_the_sides_of_a_relation_in_a_dict_entry():
    # one free symbol (no pair to exchange); the relation's sides swapped in entry c; a
    # relation is no expression, so there are no entry values to exchange
    assert candidates("swap", {"c": sp.Lt(x, 1)}) == [("sides swapped in c", {"c": sp.Lt(1, x)})]


def test_swap_exchanges_every_pair_of_arguments_of_a_function():
    f = sp.Function("f")
    # f(x, 1, 2): pairs (1, 2), (1, 3), (2, 3) of its three arguments
    assert candidates("swap", f(x, 1, 2)) == [
        ("arguments 1 and 2 of f swapped", f(1, x, 2)),
        ("arguments 1 and 3 of f swapped", f(2, 1, x)),
        ("arguments 2 and 3 of f swapped", f(x, 2, 1)),
    ]
    assert candidates("swap", {"g": f(x, 1)}) == [
        ("arguments 1 and 2 of f swapped in g", {"g": f(1, x)}),
    ]


def test_swap_exchanges_numeric_entries_skipping_equal_ones_and_counts_parts_from_one():
    assert candidates("swap", {"p": 2, "q": 3}) == [("values of p and q swapped", {"p": 3, "q": 2})]
    # p and q are equal (no change); p <-> r, then q <-> r
    assert candidates("swap", {"p": 1, "q": 1, "r": 2}) == [
        ("values of p and r swapped", {"p": 2, "q": 1, "r": 1}),
        ("values of q and r swapped", {"p": 1, "q": 2, "r": 1}),
    ]
    assert candidates("swap", (1, 2, 3)) == [
        ("values of 1 and 2 swapped", (2, 1, 3)),
        ("values of 1 and 3 swapped", (3, 2, 1)),
        ("values of 2 and 3 swapped", (1, 3, 2)),
    ]


def test_candidates_stop_at_a_thousand():
    # 46 distinct numeric entries: C(46, 2) = 1035 pairs to swap, cut at 1000
    got = candidates("swap", {f"p{i}": i for i in range(46)})
    assert len(got) == 1000 and got[0][0] == "values of p0 and p1 swapped"


def test_an_operator_skips_the_forms_own_text_and_repeats_then_goes_on():
    # x + y < 1: x <-> y prints as the form itself (skipped); then its sides swapped
    assert texts(swap(Form(x + y < 1))) == [sp.sstr(sp.Lt(1, x + y))]
    # x*y/2: 1/2 dropped, x dropped, y dropped; doubling repeats the first
    assert texts(factor(Form(x * y / 2))) == strs(x * y, y / 2, x / 2)


def test_a_zero_limit_or_cap_gives_no_mutant():
    assert sign(Form(x), limit=0) == []
    assert generate(Form(x), cap=0) == []


def test_generate_drops_a_mutant_equal_to_the_form_even_when_its_text_differs():
    from dataclasses import dataclass
    from typing import Any

    @dataclass(frozen=True)
    class Named:  # a form whose text shows its name: only the value can tell a repeat
        value: Any
        name: str = "printed"

        def text(self) -> str:
            return f"{self.name}: {sp.sstr(self.value)}"

    # swap of x + y < 1: x <-> y gives the same relation (dropped), then the sides swapped
    swapped = [m for operator, m in generate(Named(x + y < 1)) if operator == "swap"]
    assert [(m.name, m.value) for m in swapped] == [("sides swapped", sp.Lt(1, x + y))]


def test_the_default_reason_for_code_names_a_pseudocode_string():
    assert inapplicable_to_code() == dict.fromkeys(OPERATORS, "pseudocode string: no SymPy tree")


def test_no_sign_is_flipped_inside_a_sums_limits_where_shift_moves_the_bounds():
    # Sum(k, (k, 1, n - 1)) gave "sign of term n flipped", Sum(k, (k, 1, -n - 1)): reversed
    # bounds, which SymPy reads as minus the sum over the gap, so it "held" against
    # n (n + 1) / 2 and was listed as a candidate correction of a failing form
    k, n = sp.symbols("k n", integer=True, positive=True)
    form = Form(sp.Sum(k, (k, 1, n - 1)) + n)
    flipped = [mutant.value for mutant in sign(form)]
    assert all(isinstance(arg, sp.Sum) is False or arg.limits == ((k, 1, n - 1),)
               for value in flipped for arg in sp.Add.make_args(value))  # fmt: skip
    assert -sp.Sum(k, (k, 1, n - 1)) + n in flipped  # the sum's own sign, outside its limits
    assert any(mutant.value.has(sp.Sum(k, (k, 1, n))) for mutant in shift(form))  # a bound moved
