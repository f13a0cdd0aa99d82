"""The claim API's smaller contracts: verdict names, display of sequences and LaTeX escapes, the
mutant makers, failed corrections, undecided claims, the random points of symbolic_equality."""

import math
import random
import re

import numpy as np
import pytest
import sympy as sp

from gradlab import GradlabError
from gradlab.symbolic import (
    Claim,
    Form,
    Verdict,
    audit_claim,
    evaluate,
    format_markdown,
    mutant,
    negated,
    run_audit,
    scaled,
    substituted,
    symbolic_equality,
    with_parameters,
)
from gradlab.symbolic.claims import VERDICTS, undecided
from tests.helpers.refusals import refusal_of
from tests.helpers.witness import witness

x, y = sp.symbols("x y", positive=True)

CONFIRMED = "(100 digits, the same to 30 of them at a higher working precision)."
"""How a witness that is not exact was confirmed, as its detail ends."""


def test_a_verdict_outside_the_four_is_refused_by_name():
    with pytest.raises(ValueError) as error:
        Verdict("maybe", "")
    assert str(error.value) == f"verdict must be one of {VERDICTS}; got 'maybe'"


def test_sequences_display_as_semicolon_lists():
    form = Form((x, [y, 2]))
    assert form.text() == "x; y; 2"
    assert form.latex() == r"x;\ y;\ \text{2}"


def test_latex_escapes_every_special_character_of_plain_text():
    # backslash, caret and tilde become spaces; the others get a backslash; X is plain text
    form = Form("a\\b{c}d_e^f&g%h$i#j~kX")
    assert form.latex() == r"\text{a b\{c\}d\_e f\&g\%h\$i\#j kX}"


def test_scaled_multiplies_and_says_by_what():
    assert (scaled(Form(x)).value, scaled(Form(x)).name) == (2 * x, "multiplied by 2")
    assert (scaled(Form(x), 3).value, scaled(Form(x), 3).name) == (3 * x, "multiplied by 3")


def test_substituted_swaps_simultaneously():
    swapped = substituted(Form(x - 2 * y), {x: y, y: x}, "x <-> y")
    assert (swapped.value, swapped.name) == (y - 2 * x, "x <-> y")


def test_with_parameters_changes_only_the_named_parameters():
    form = Form({"a": 1, "b": 2}, lhs="p")
    changed = with_parameters(form, "b doubled", b=4)
    assert (changed.value, changed.name, changed.lhs) == ({"a": 1, "b": 4}, "b doubled", "p")


def test_a_correction_that_fails_too_is_reported_with_both_details():
    def check(form):
        return symbolic_equality(form.value, 2 * x, [x])

    claim = Claim("mine", "eq1", "twice x", Form(3 * x), check,
                  correction=mutant(Form(3 * x), 4 * x, "corrected"))  # fmt: skip
    first, fixed = check(Form(3 * x)), check(Form(4 * x))
    assert evaluate(claim) == Verdict(
        "fails", f"{first.detail} The correction was checked and does not hold either: "
        f"{fixed.detail}"
    )  # fmt: skip


def test_a_correction_the_check_cannot_decide_is_said_undecided_and_the_claim_fails():
    # was: "The correction was checked and does not hold either: cannot ...", though the check
    # said nothing of the correction; wrong as printed with no correction shown to hold, the
    # claim still fails
    def check(form):
        if form.value == 4 * x:
            return undecided("cannot take the limit of 4 x")
        return symbolic_equality(form.value, 2 * x, [x])

    claim = Claim("mine", "eq1", "twice x", Form(3 * x), check,
                  correction=mutant(Form(3 * x), 4 * x, "corrected"))  # fmt: skip
    first = symbolic_equality(3 * x, 2 * x, [x])
    assert evaluate(claim) == Verdict(
        "fails", f"{first.detail} The correction was checked, but its check could not decide "
        "it: cannot take the limit of 4 x"
    )  # fmt: skip


def test_undecided_is_inconclusive_with_its_reason():
    assert undecided("no data") == Verdict("inconclusive", "no data")


def test_a_record_without_mutants_has_no_mutant_fields():
    claim = Claim("mine", "eq1", "x is x", Form(x), lambda f: symbolic_equality(f.value, x, [x]))
    assert "mutants" not in audit_claim(claim)


def test_a_counterexample_names_the_point_and_how_it_was_found():
    verdict = symbolic_equality(x + 1, x, [x], sampler=lambda generator: {x: 3})
    expected = "printed minus true is 1.0000000 at x = 3 (exact evaluation)."
    assert verdict == Verdict("fails", expected)


def test_the_sampler_chooses_the_points_and_gets_a_seeded_generator():
    seen = []

    def at_three(generator):
        seen.append(type(generator))
        return {x: 3 + 0 * generator.random()}

    # x - 3 vanishes at every sampled point; sympy cannot call it zero, so the points decide
    verdict = symbolic_equality(x, sp.Integer(3), [x], sampler=at_three, points=5)
    expected = "printed minus true vanishes at 5 random points (50 digits)."
    assert verdict == Verdict("holds", expected)
    assert seen == [random.Random] * 5
    assert symbolic_equality(x, sp.Integer(3), [x], points=5).verdict == "fails"


def test_an_exact_difference_of_any_size_is_a_witness():
    # differences below 1e-40 once counted as zero, exact ones included
    tiny = sp.Rational(1, 10**45)
    assert symbolic_equality(x + tiny, x, [x], sampler=lambda generator: {x: 3}) == Verdict(
        "fails", "printed minus true is 1.0000000e-45 at x = 3 (exact evaluation).")


@pytest.mark.parametrize("tau", [sp.Rational(1, 100), sp.Rational(1, 1000)])
@pytest.mark.slow
def test_a_wrong_slope_of_a_steep_sigmoid_fails_though_its_values_are_tiny(tau):
    # at the default points x / tau reaches thousands: the slope is ~1e-3000, far below
    # 1e-40, and every wrong form read as "vanishes"
    s = sp.Symbol("s", real=True)
    sigmoid = 1 / (1 + sp.exp(-s / tau))
    slope = sp.diff(sigmoid, s)
    assert symbolic_equality(sigmoid * (1 - sigmoid) / tau, slope, [s]).verdict == "holds"
    for wrong in (sp.Integer(0), sigmoid * (1 - sigmoid), -sigmoid * (1 - sigmoid) / tau):
        verdict = symbolic_equality(wrong, slope, [s])
        assert verdict.verdict == "fails"
        assert verdict.detail.endswith(CONFIRMED)


@pytest.mark.slow
def test_an_identity_holds_at_the_float_points_of_a_sampler():
    # a float is 15 digits: the residue (-2.8e-17) read as a witness "(exact evaluation)"
    s = sp.Symbol("s", real=True)
    sigmoid = 1 / (1 + sp.exp(-s))
    floats = lambda generator: {s: generator.uniform(-3, 3)}  # noqa: E731
    assert symbolic_equality(sigmoid * (1 - sigmoid), sp.diff(sigmoid, s), [s],
                             sampler=floats).verdict == "holds"  # fmt: skip
    assert symbolic_equality(sp.sin(s) ** 2 + sp.cos(s) ** 2, sp.Integer(1), [s],
                             sampler=floats).verdict == "holds"  # fmt: skip
    verdict = symbolic_equality(sigmoid * (1 + sigmoid), sp.diff(sigmoid, s), [s], sampler=floats)
    assert verdict.verdict == "fails"


@pytest.mark.slow
def test_a_sum_from_a_term_one_over_zero_fails_with_an_infinite_difference():
    # SymPy's evalf raised "cannot unpack non-iterable ComplexInfinity object"
    k = sp.Symbol("k", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    verdict = symbolic_equality(sp.Sum(1 / k, (k, 0, n)), sp.harmonic(n), [n],
                                sampler=lambda generator: {n: 5})  # fmt: skip
    # the printed sum has the term 1/0: it is the form without a value there
    assert verdict == Verdict("fails", "printed minus true is infinite at n = 5 (exact "
                                       "evaluation).", "undefined")  # fmt: skip
    for low, high in ((1, n - 1), (2, n), (1, n + 1)):
        assert symbolic_equality(sp.Sum(1 / k, (k, low, high)), sp.harmonic(n),
                                 [n]).verdict == "fails"  # fmt: skip
    assert symbolic_equality(sp.Sum(1 / k, (k, 1, n)), sp.harmonic(n), [n]).verdict == "holds"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("difference", "reason"),
    # conditions not linear in x: no threshold of its own adds points (the random ones alone)
    [(sp.Piecewise((0, x**3 <= 97**3), (1, True)), "numerators reach 97"),
     (sp.Piecewise((0, x**3 >= sp.Rational(1, 13**3)), (1, True)), "denominators reach 13")],
)  # fmt: skip
def test_default_points_are_fractions_p_over_q_with_p_to_97_and_q_to_13(difference, reason):
    # no default point of a symbol with a sign lies beyond 97 or below 1/13, so these
    # differences vanish at all of them
    verdict = symbolic_equality(difference, sp.Integer(0), [x], points=3000)
    assert verdict.verdict == "holds", reason


@pytest.mark.slow
@pytest.mark.parametrize(("declared", "smallest"), [({"negative": True}, sp.Rational(1, 13)),
                                                   ({"real": True}, sp.Rational(1, 13 * 10**4))])
def test_points_of_either_sign_reach_down_to_zero_by_powers_of_ten(declared, smallest):
    # |s| from 1/13 to 97 for a symbol with a sign (a negative coordinate is a positive one
    # negated); a symbol of either sign (a score) is also divided by up to 10^4, so that a
    # sigmoid at a small tau is sampled where s / tau is of order one. Squares: conditions not
    # linear in s, so no threshold of its own adds points.
    s = sp.Symbol("s", **declared)
    beyond = sp.Piecewise((0, (s**2 <= 97**2) & (s**2 >= smallest**2)), (1, True))
    assert symbolic_equality(beyond, sp.Integer(0), [s], points=3000).verdict == "holds"
    reached = sp.Piecewise((0, s**2 < 90**2), (1, True))  # and they do reach past 90
    assert symbolic_equality(reached, sp.Integer(0), [s], points=3000).verdict == "fails"
    small = sp.Piecewise((0, s**2 > sp.Rational(1, 1000) ** 2), (1, True))  # below 1/1000?
    expected = "fails" if declared == {"real": True} else "holds"
    assert symbolic_equality(small, sp.Integer(0), [s], points=3000).verdict == expected



@pytest.mark.parametrize("points", [0, -3, True, 2.5])
def test_points_must_be_a_positive_integer(points):
    # zero points would leave only simplify's attempt: x and x + 1 "held" at 0 random points
    with pytest.raises(GradlabError, match=rf"^points must be a positive integer \(the random "
                                           rf"points evaluated\); got {points!r}$"):
        symbolic_equality(x, x + 1, [x], points=points)


def test_a_free_symbol_left_out_of_the_symbols_or_the_sampler_is_named():
    tau = sp.Symbol("tau", positive=True)
    with pytest.raises(GradlabError, match=r"^symbols must include every free symbol of printed "
                                           r"and truth; missing tau, y \(given: x\)$"):
        symbolic_equality(x / tau + y, x, [x])
    with pytest.raises(GradlabError, match=r"^the sampler's point must include every free "
                                           r"symbol of printed and truth; missing tau "
                                           r"\(given: x\)$"):
        symbolic_equality(x / tau, x, [x, tau], sampler=lambda generator: {x: 2})
    # a symbol listed but absent from the difference is harmless
    assert symbolic_equality(2 * x, x + x, [x, tau]).verdict == "holds"


def test_symbols_or_a_sampler_s_point_that_give_none_are_said_to_give_none():
    with pytest.raises(GradlabError) as empty_symbols:
        symbolic_equality(x, sp.Integer(0), [])
    assert str(empty_symbols.value) == (
        "symbols must include every free symbol of printed and truth; missing x (given: none)")
    with pytest.raises(GradlabError) as empty_point:
        symbolic_equality(x, sp.Integer(0), [x], sampler=lambda generator: {})
    assert str(empty_point.value) == ("the sampler's point must include every free symbol of "
                                      "printed and truth; missing x (given: none)")  # fmt: skip


_SLOPE_X = sp.Symbol("x", real=True)
_SLOPE_TAU = sp.Symbol("tau", positive=True)
_SLOPE_N = sp.Symbol("n", integer=True)
_SIGMOID = 1 / (1 + sp.exp(-_SLOPE_X / _SLOPE_TAU))


@pytest.mark.parametrize(("point", "said"), [
    # at x = inf both the slope without its 1/tau and the true one are 0: the slip "held"
    ({_SLOPE_X: math.inf, _SLOPE_TAU: 1.0}, "x = inf (float), which is not finite"),
    ({_SLOPE_X: -sp.oo, _SLOPE_TAU: 1}, "x = -oo (NegativeInfinity), which is not finite"),
    ({_SLOPE_X: math.nan, _SLOPE_TAU: 1.0}, "x = nan (float), which is not finite"),
    ({_SLOPE_X: 1.0, _SLOPE_TAU: -1.0},
     "tau = -1.0 (float), but tau is declared real, positive, nonnegative"),
    ({_SLOPE_X: 1.0, _SLOPE_TAU: 0}, "tau = 0 (int), but tau is declared real, positive, "
                                     "nonnegative"),
    ({_SLOPE_X: 1j, _SLOPE_TAU: 1.0}, "x = 1j (complex), which is not a real number"),
    ({_SLOPE_X: "1", _SLOPE_TAU: 1.0}, "x = '1' (str), which is not a number"),
    ({_SLOPE_X: True, _SLOPE_TAU: 1.0}, "x = True (bool), which is not a number"),
    ({_SLOPE_X: [1.0], _SLOPE_TAU: 1.0}, "x = [1.0] (list), which is not a number"),
    ({_SLOPE_X: sp.Symbol("y"), _SLOPE_TAU: 1.0}, "x = y (Symbol), which is not a number"),
])  # fmt: skip
def test_a_sampler_s_value_outside_its_symbol_s_declaration_is_refused(point, said):
    with pytest.raises(GradlabError) as refused:
        symbolic_equality(_SIGMOID * (1 - _SIGMOID), sp.diff(_SIGMOID, _SLOPE_X),
                          [_SLOPE_X, _SLOPE_TAU], sampler=lambda generator: point)  # fmt: skip
    assert str(refused.value) == ("the sampler's point must give each symbol a finite real "
                                  f"number where the symbol is declared; got {said}")


@pytest.mark.parametrize(("declared", "value"), [
    ({"negative": True}, 0), ({"nonnegative": True}, -1.0), ({"nonpositive": True}, 0.5),
    ({"positive": True}, -2), ({"integer": True}, 0.5),
])  # fmt: skip
def test_each_declared_sign_and_kind_bounds_a_sampler_s_values(declared, value):
    u = sp.Symbol("u", **declared)
    with pytest.raises(GradlabError, match=rf"; got u = {re.escape(repr(value))} \(\w+\), but u "
                                           rf"is declared .*{next(iter(declared))}"):
        symbolic_equality((u + 1) ** 2, u**2 + 2 * u + 1, [u],
                          sampler=lambda generator: {u: value})  # fmt: skip
    inside = {"negative": -1.0, "nonnegative": 0, "nonpositive": 0, "positive": 2,
              "integer": -3}[next(iter(declared))]  # fmt: skip
    assert symbolic_equality((u + 1) ** 2, u**2 + 2 * u + 1, [u],
                             sampler=lambda generator: {u: inside}).verdict == "holds"


def test_a_sampler_s_point_keyed_by_names_is_refused_with_the_fix():
    # it said "missing tau, x (given: tau, x)": the names and the symbols print alike
    with pytest.raises(GradlabError) as refused:
        symbolic_equality(_SLOPE_X / _SLOPE_TAU, _SLOPE_X, [_SLOPE_X, _SLOPE_TAU],
                          sampler=lambda generator: {"x": 1.0, "tau": 1.0})  # fmt: skip
    assert str(refused.value) == ("the sampler's point must map SymPy symbols to values; got "
                                  "the key str 'x' (use the symbol itself, not its name)")


def test_a_sampler_s_point_inside_the_declarations_is_evaluated():
    # an integer symbol at a non-integer is refused; at integers, of NumPy or Python, the check
    # runs (and finds the slip of the second form)
    expanded = _SLOPE_N * (_SLOPE_X**2 + 2 * _SLOPE_X + 1)
    with pytest.raises(GradlabError, match=r"got n = 2\.5 \(float\), but n is declared real, "
                                           r"integer$"):
        symbolic_equality((_SLOPE_X + 1) ** 2 * _SLOPE_N, expanded, [_SLOPE_X, _SLOPE_N],
                          sampler=lambda generator: {_SLOPE_X: 1.5, _SLOPE_N: 2.5})
    for n in (2, np.int64(3), sp.Integer(-4)):
        point = {_SLOPE_X: np.float64(1.5), _SLOPE_N: n}
        assert symbolic_equality((_SLOPE_X + 1) ** 2 * _SLOPE_N, expanded, [_SLOPE_X, _SLOPE_N],
                                 sampler=lambda generator, p=point: p).verdict == "holds"
        assert symbolic_equality(_SLOPE_X**2 * _SLOPE_N, expanded, [_SLOPE_X, _SLOPE_N],
                                 sampler=lambda generator, p=point: p).verdict == "fails"
    slip = symbolic_equality(_SIGMOID * (1 - _SIGMOID), sp.diff(_SIGMOID, _SLOPE_X),
                             [_SLOPE_X, _SLOPE_TAU],
                             sampler=lambda generator: {_SLOPE_X: 0.5, _SLOPE_TAU: 0.25})
    assert slip.verdict == "fails"


def _sampled_signs(symbol, points=200):
    """The signs of the default points' values of ``symbol``: the first point of checks of
    ``symbol == 0`` (which fails there, naming the point) with 1 to ``points`` points."""
    signs = set()
    for count in range(1, points + 1):
        detail = symbolic_equality(symbol, sp.Integer(0), [symbol], points=count).detail
        signs.add(sp.sign(sp.Rational(witness(detail)[1]["s"])))
    return signs


UNDECLARED = sp.Symbol("u")  # no assumptions: drawn positive


def test_a_holds_on_points_drawn_positive_for_want_of_a_sign_says_so():
    # was: "holds: printed minus true vanishes at 12 random points (50 digits)." for
    # sqrt(u**2) against u, which is false at every negative u: sqrt((-3)**2) = 3, not -3
    u = UNDECLARED
    assert sp.sqrt(sp.Integer(-3) ** 2) != -3  # the premise, in SymPy's numbers
    assert symbolic_equality(sp.sqrt(u**2), u, [u]) == Verdict(
        "holds", "printed minus true vanishes at 12 random points (50 digits; u drawn > 0: no "
        "sign declared).")  # fmt: skip
    # a symbol declared real is drawn of either sign: only the undeclared one is named
    r = sp.Symbol("r", real=True)
    detail = symbolic_equality(sp.sqrt(u**2) + r, u + r, [r, u]).detail
    assert detail.endswith("(50 digits; u drawn > 0: no sign declared).")


def test_a_witness_where_a_symbol_without_a_sign_is_positive_says_it_was_drawn_so():
    u = UNDECLARED
    verdict = symbolic_equality(-u, u, [u])
    assert verdict.verdict == "fails"
    assert verdict.detail.endswith("(exact evaluation; u drawn > 0: no sign declared).")
    # at a threshold point of u at or below 0 (|u| against u: at -1/97, beside the kink at 0)
    # it was not drawn positive, and a sampler's points are its own: no such words
    kink = symbolic_equality(sp.Abs(u), u, [u])
    assert kink == Verdict("fails", f"printed minus true is {sp.N(sp.Rational(2, 97), 8)} at "
                                    "u = -1/97 (exact evaluation).")  # fmt: skip
    sampled = symbolic_equality(-u, u, [u], sampler=lambda generator: {u: 2})
    assert sampled == Verdict("fails", "printed minus true is -4.0000000 at u = 2 (exact "
                                       "evaluation).")  # fmt: skip


@pytest.mark.parametrize(("at", "said"), [(sp.Integer(0), False), (sp.Rational(1, 2), True)])
def test_a_threshold_witness_of_a_symbol_without_a_sign_says_drawn_where_it_is_positive(at, said):
    # 1 at u = at alone, which no random point is: the witness is the threshold point itself,
    # positive (1/2) or not (0)
    u = UNDECLARED
    verdict = symbolic_equality(sp.Piecewise((1, sp.Eq(u, at)), (0, True)), sp.Integer(0), [u])
    drawn = "; u drawn > 0: no sign declared" if said else ""
    assert verdict == Verdict("fails", f"printed minus true is {sp.N(1, 8)} at u = {at} (exact "
                                       f"evaluation{drawn}).")  # fmt: skip


def test_an_undefined_point_of_a_symbol_drawn_positive_for_want_of_a_sign_says_so():
    # _Gap(u) is nan below 20 and 0 above: no witness, and no proof either
    verdict = symbolic_equality(_Gap(UNDECLARED), sp.Integer(0), [UNDECLARED])
    assert verdict.verdict == "inconclusive"
    assert re.search(r"\(the first: u = [\d/]+; u drawn > 0: no sign declared\)", verdict.detail)


@pytest.mark.slow
def test_default_points_take_the_sign_a_symbol_is_declared_with():
    assert _sampled_signs(sp.Symbol("s", real=True)) == {1, -1}
    for declared in ({"positive": True}, {"nonnegative": True}, {}):
        assert _sampled_signs(sp.Symbol("s", **declared)) == {1}, declared
    for declared in ({"negative": True}, {"nonpositive": True}):
        assert _sampled_signs(sp.Symbol("s", **declared)) == {-1}, declared


def test_a_form_valid_only_for_positive_scores_fails_for_a_real_score():
    s = sp.Symbol("s", real=True)
    for printed, truth in ((sp.Abs(s), s), (sp.Max(s, 0), s), (sp.Heaviside(s), sp.Integer(1))):
        verdict = symbolic_equality(printed, truth, [s])
        assert verdict.verdict == "fails", printed
        point = sp.Rational(witness(verdict.detail)[1]["s"])
        assert point < 0  # the witness is a negative score
        assert printed.subs(s, point) != truth.subs(s, point)
    positive = sp.Symbol("s", positive=True)  # declared positive: the same forms hold
    assert symbolic_equality(sp.Abs(positive), positive, [positive]).verdict == "holds"

def _derivative_check(form):
    return symbolic_equality(form.value, sp.diff(x**2, x), [x])


@pytest.mark.parametrize(
    ("returned", "shown"), [(True, "bool True"), (None, "NoneType None"), ("holds", "str 'holds'")]
)
def test_a_check_that_returns_no_verdict_is_refused_by_name(returned, shown):
    # a check written as `return sp.simplify(a - b) == 0` returned a bool: the audit raised
    # AttributeError "'bool' object has no attribute 'verdict'"
    claim = Claim("mine", "eq1", "d/dx x^2", Form(2 * x), lambda form: returned)
    with pytest.raises(GradlabError) as error:
        audit_claim(claim)
    message = str(error.value)
    assert message.startswith("mine:eq1: check must return a Verdict") and message.endswith(shown)


@pytest.mark.parametrize(
    ("fields", "argument"),
    [
        ({"printed": 2 * x}, "printed"),
        ({"check": "sympy.diff"}, "check"),
        ({"correction": 2 * x}, "correction"),
        ({"mutants": (2 * x,)}, "mutants"),
        ({"label": 1}, "label"),
        # the record's id is seed:label: an empty seed made ":eq1"
        ({"seed": ""}, "seed"),
        ({"label": "equation one"}, "label"),
        ({"label": "eq1:b"}, "label"),
    ],
)
def test_a_claim_with_a_field_of_the_wrong_kind_is_refused_when_built(fields, argument):
    arguments = {"seed": "mine", "label": "eq1", "statement": "d/dx x^2",
                 "printed": Form(2 * x), "check": _derivative_check, **fields}  # fmt: skip
    with pytest.raises(GradlabError, match=f"^Claim's {argument} must be"):
        Claim(**arguments)


def test_audit_claim_and_symbolic_equality_name_a_wrong_argument():
    with pytest.raises(GradlabError, match=r"^claim must be a Claim; got str 'eq1'"):
        audit_claim("eq1")
    with pytest.raises(GradlabError, match=r"^symbols must be a list or tuple of SymPy symbols"):
        symbolic_equality(2 * x, 2 * x, x)
    with pytest.raises(GradlabError, match=r"^printed must be a SymPy expression or a number "
                                           r"\(symbolic_equality compares them\); got str '2\*x'"):
        symbolic_equality("2*x", 2 * x, [x])
    with pytest.raises(GradlabError, match=r"^form.value must be a SymPy expression or a "
                                           r"number \(negated flips its sign\); got dict"):
        negated(Form({"bins": 4}))
    # the well-formed claim still holds, and its mutants are still killed
    claim = Claim("mine", "eq1", "d/dx x^2", Form(2 * x), _derivative_check)
    record = audit_claim(claim, mutants=True)
    assert record["verdict"] == "holds" and record["mutants"] == record["mutants_killed"] > 0


def test_a_truthy_non_bool_mutants_option_is_refused_before_any_work():
    # mutants="no" was taken as True: the whole mutant audit ran
    claim = Claim("mine", "eq1", "d/dx x^2", Form(2 * x), _derivative_check)
    for call in (lambda: audit_claim(claim, mutants="no"),
                 lambda: run_audit([claim], mutants="no")):  # fmt: skip
        with pytest.raises(GradlabError, match=r"^mutants must be True or False; got 'no'$"):
            call()


def test_a_wrong_argument_message_names_its_kind_and_what_takes_it():
    with pytest.raises(GradlabError) as caught:
        scaled(Form("code"))
    assert str(caught.value) == ("form.value must be a SymPy expression or a number (scaled "
                                 "multiplies it); got str 'code'")
    with pytest.raises(GradlabError) as caught:
        symbolic_equality(2 * x, "2*x", [x])
    assert str(caught.value) == ("truth must be a SymPy expression or a number (symbolic_equality "
                                 "compares them); got str '2*x'")
    arguments = {"seed": "mine", "label": "eq1", "statement": "d/dx x^2",
                 "check": _derivative_check}  # fmt: skip
    with pytest.raises(GradlabError) as caught:
        Claim(**arguments, printed=2 * x)
    assert str(caught.value) == ("Claim's printed must be a Form (e.g. Form(expression, "
                                 f"lhs=...)); got {type(2 * x).__name__} 2*x")
    with pytest.raises(GradlabError) as caught:
        Claim(**arguments, printed=Form(2 * x), correction=2 * x)
    assert str(caught.value) == (f"Claim's correction must be None or a Form; got "
                                 f"{type(2 * x).__name__} 2*x")


def test_a_symbol_left_out_because_its_twin_has_other_assumptions_is_explained():
    # Symbol("s") and Symbol("s", real=True) are two symbols: listing one does not cover both
    declared, bare = sp.Symbol("s", real=True), sp.Symbol("s")
    with pytest.raises(GradlabError, match=(
            r"^symbols must include every free symbol of printed and truth; missing s \(s \(no "
            r"assumptions\) in printed or truth, s \(real\) in symbols: two symbols with one "
            r"name; declare each once and use it on both sides\)$")):  # fmt: skip
        symbolic_equality(declared, bare, [declared])


@pytest.mark.parametrize(("arguments", "message"), [
    ({"printed": sp.Eq(x, 1)}, r"^printed must be a SymPy expression or a number \(symbolic_"
                               r"equality compares them\) \(a relation or a logical statement is "
                               r"not one: pass its two sides apart\); got Equality Eq\(x, 1\)$"),
    ({"relative": "yes"}, r"^relative must be True or False; got 'yes'$"),
    ({"sampler": 3}, r"^sampler must be None or a function of a random.Random returning a dict "
                     r"symbol -> value; got int 3$"),
    ({"sampler": lambda generator: [1]}, r"^sampler must return a dict symbol -> value \(a "
                                         r"point\); got list \[1\]$"),
])
def test_symbolic_equality_names_a_wrong_argument(arguments, message):
    given = {"printed": x, "truth": x, "symbols": [x], **arguments}
    with pytest.raises(GradlabError, match=message):
        symbolic_equality(given.pop("printed"), given.pop("truth"), given.pop("symbols"), **given)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: mutant(x, 1, "one"), r"^form must be a Form \(e.g. Form\(expression, lhs=...\)\); "
                                  r"got Symbol x$"),
    (lambda: mutant(Form(x), 1, 3), r"^name must be a non-empty str \(what the mutant changes\); "
                                    r"got 3$"),
    (lambda: negated(x), r"^form must be a Form .*; got Symbol x$"),
    (lambda: scaled(Form(x), "2"), r"^factor must be a SymPy expression or a number \(scaled "
                                   r"multiplies form.value by it\); got str '2'$"),
    (lambda: scaled(Form(x), 1), r"^factor must not be 1 \(the mutant would be the form "
                                 r"itself\); got 1$"),
    (lambda: substituted(Form("a = b"), {x: 1}, "swap"), r"^form.value must be a SymPy object "
                                                         r"\(substituted applies SymPy's subs\); "
                                                         r"got str 'a = b'$"),
    (lambda: substituted(Form(x), [(x, 1)], "x = 1"), r"^changes must be a dict old -> new .*; "
                                                      r"got list \[\(x, 1\)\]$"),
    (lambda: with_parameters(Form(x), "more", bins=3), r"^form.value must be a dict of "
                                                       r"parameters .*; got Symbol x$"),
    # a misspelt parameter made a mutant beside the form, which changed nothing it checks
    (lambda: with_parameters(Form({"bins": 10, "width": 0.2}), "one more", binz=11),
     r"^with_parameters changes the form's own parameters \('bins', 'width'\); got 'binz'$"),
])
def test_a_mutant_maker_names_a_wrong_argument(make, message):
    with pytest.raises(GradlabError, match=message):
        make()


@pytest.mark.parametrize(("claims", "shown"), [
    (Claim("mine", "eq1", "x is x", Form(x), lambda form: None), r"Claim Claim\("),
    (["eq1"], r"list \['eq1'\]"),
    (3, "int 3"),
])
def test_run_audit_refuses_claims_that_are_not_a_list_of_claims(claims, shown):
    with pytest.raises(GradlabError, match=rf"^claims must be None or a list of Claims \(e.g. "
                                           rf"\[claim\]\); got {shown}"):  # fmt: skip
        run_audit(claims)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: Form(None), "Form's value must be the printed form (a SymPy expression or "
                         "relation, a dict of parameters, or a code string); got None"),
    (lambda: Form(x, lhs=3), "Form's lhs must be a str; got int 3"),  # it showed "3 = x"
    (lambda: Form(x, name=None), "Form's name must be a str; got NoneType None"),
    (lambda: Form(x, render="latex"), "Form's render must be None or a function value -> str; "
                                      "got str 'latex'"),
    (lambda: scaled(Form(x), float("nan")), "factor must be finite (a mutant of nan or oo "
                                            "times the form checks no slip); got nan"),
    (lambda: scaled(Form(x), sp.oo), "factor must be finite (a mutant of nan or oo times the "
                                     "form checks no slip); got oo"),
    (lambda: scaled(Form(x), -sp.oo), "factor must be finite (a mutant of nan or oo times the "
                                      "form checks no slip); got -oo"),
    (lambda: scaled(Form(x), sp.zoo), "factor must be finite (a mutant of nan or oo times the "
                                      "form checks no slip); got zoo"),
    (lambda: with_parameters(Form({}), "more", bins=3),
     "with_parameters changes the form's own parameters (none); got 'bins'"),
    (lambda: with_parameters(Form({"bins": 1}), "two slips", binz=2, widht=3),
     "with_parameters changes the form's own parameters ('bins'); got 'binz', 'widht'"),
])  # fmt: skip
def test_a_form_or_a_scaled_mutant_that_says_nothing_is_refused(make, message):
    assert refusal_of(make) == message


def test_evaluate_refuses_what_is_not_a_claim_or_a_form():
    # an expression given as the form ended in "'Mul' object has no attribute 'value'"
    claim = Claim("mine", "eq1", "twice x", Form(2 * x),
                  lambda form: symbolic_equality(form.value, 2 * x, [x]))  # fmt: skip
    with pytest.raises(GradlabError, match=r"^form must be a Form \(e.g. Form\(expression, "
                                           r"lhs=...\)\); got Mul 3\*x$"):  # fmt: skip
        evaluate(claim, 3 * x)
    with pytest.raises(GradlabError, match=r"^claim must be a Claim; got str 'eq1'$"):
        evaluate("eq1")
    assert evaluate(claim, Form(3 * x)).verdict == "fails"
    assert evaluate(claim, None).verdict == evaluate(claim).verdict == "holds"


def test_a_verdict_detail_that_is_not_text_is_refused():
    with pytest.raises(GradlabError, match=r"^detail must be a str \(what supports the verdict\); "
                                           r"got int 3$"):  # fmt: skip
        Verdict("holds", 3)


def test_a_check_of_ones_own_can_say_inconclusive_through_the_public_api():
    from gradlab.symbolic import undecided as public_undecided

    claim = Claim("mine", "eq1", "an undecidable claim", Form(x),
                  lambda form: public_undecided("sympy.limit left it unevaluated"))  # fmt: skip
    record = audit_claim(claim)
    assert (record["verdict"], record["detail"]) == (
        "inconclusive", "sympy.limit left it unevaluated")
    with pytest.raises(GradlabError, match=r"^reason must be a non-empty str .*; got ''$"):
        public_undecided("")


def test_a_correction_of_a_form_that_does_not_fail_is_said_unchecked():
    # the printed x = x holds; the "correction" 2x is wrong and never checked
    def check(form):
        return symbolic_equality(form.value, x, [x])

    claim = Claim("mine", "eq1", "x is x", Form(x), check, correction=Form(2 * x))
    (record,) = run_audit([claim])
    assert record["verdict"] == "holds"
    assert record["detail"].endswith("The correction given was not checked (only a printed "
                                     "form that fails is corrected; this one holds).")
    report = format_markdown([record])
    assert "- correction given, not checked: `2*x`" in report and "- corrected:" not in report
    undecidable = Claim("mine", "eq2", "x is x", Form(x), lambda form: undecided("no data"),
                        correction=Form(2 * x))  # fmt: skip
    assert evaluate(undecidable).detail == (
        "no data The correction given was not checked (only a printed form that fails is "
        "corrected; this one is inconclusive).")


def test_a_witness_of_abstract_functions_names_the_functions_it_evaluated():
    # the witness came from polynomials the detail never showed: 6.3762446e-5 at x = 87 for
    # Eq. 11 could not be reproduced from the functions it named (those of the relative error)
    import re

    f, g = sp.Function("f")(x), sp.Function("g")(x)
    printed, truth = sp.diff(f, x) * g, sp.diff(f * g, x)  # the product rule, half of it
    verdict = symbolic_equality(printed, truth, [x], sampler=lambda generator: {x: 5})
    match = re.fullmatch(r"printed minus true is (\S+) at x = 5 \(exact evaluation, with "
                         r"f\(x\) = (.+), g\(x\) = (.+)\)\.", verdict.detail)  # fmt: skip
    assert verdict.verdict == "fails" and match is not None
    stand_in = {f: sp.sympify(match.group(2), locals={"x": x}),
                g: sp.sympify(match.group(3), locals={"x": x})}  # fmt: skip
    missing = -f * sp.diff(g, x)  # printed minus true, by hand: the other half, negated
    expected = missing.subs(stand_in).doit().subs(x, 5)
    assert sp.Float(match.group(1)) == pytest.approx(float(expected), rel=1e-7, abs=0)


def test_a_function_applied_at_several_arguments_has_one_stand_in_named_once():
    # T(0) and T(d) are one function: the witness listed a polynomial per application, though
    # every application was evaluated with the first one's
    import re

    d = sp.Symbol("d", integer=True, positive=True)
    T = sp.Function("T")
    verdict = symbolic_equality(2 * T(d), T(d) + T(0), [d], sampler=lambda generator: {d: 3})
    match = re.fullmatch(r"printed minus true is (\S+) at d = 3 \(exact evaluation, with "
                         r"T\(u\) = (.+)\)\.", verdict.detail)  # fmt: skip
    assert match is not None, verdict.detail
    u = sp.Symbol("u")
    stand_in = sp.Lambda(u, sp.sympify(match.group(2), locals={"u": u}))
    # printed minus true, shown to 8 digits
    assert float(match.group(1)) == pytest.approx(float(stand_in(3) - stand_in(0)), rel=1e-7)


def test_every_function_after_a_repeated_one_gets_its_stand_in_named_with_its_arguments():
    import re

    d, e = sp.Symbol("d", integer=True, positive=True), sp.Symbol("e", positive=True)
    A, B = sp.Function("A"), sp.Function("B")
    verdict = symbolic_equality(2 * A(d) + B(d, e), A(d) + A(0) + 2 * B(d, e), [d, e],
                                sampler=lambda generator: {d: 3, e: 2})  # fmt: skip
    match = re.fullmatch(r"printed minus true is (\S+) at d = 3, e = 2 \(exact "
                         r"evaluation, with A\(u\) = (.+), B\(d, e\) = (.+)\)\.", verdict.detail)
    assert match is not None, verdict.detail
    u = sp.Symbol("u")
    a_of = sp.Lambda(u, sp.sympify(match.group(2), locals={"u": u}))
    b_of = sp.sympify(match.group(3), locals={"d": d, "e": e})
    expected = a_of(3) - a_of(0) - b_of.subs({d: 3, e: 2})  # printed minus true, by hand
    assert float(match.group(1)) == pytest.approx(float(expected), rel=1e-7)  # 8 digits shown


def test_a_product_with_a_factor_one_over_zero_fails_with_an_infinite_difference():
    k = sp.Symbol("k", integer=True, positive=True)
    n = sp.Symbol("n", integer=True, positive=True)
    verdict = symbolic_equality(sp.Product(1 / k, (k, 0, n)), 1 / sp.factorial(n), [n],
                                sampler=lambda generator: {n: 5})  # fmt: skip
    # the printed product has the factor 1/0: it is the form without a value there
    assert verdict == Verdict("fails", "printed minus true is infinite at n = 5 (exact "
                                       "evaluation).", "undefined")  # fmt: skip


def test_a_function_of_several_arguments_applied_at_numbers_is_shown_of_u1_u2():
    import re

    e = sp.Symbol("e", positive=True)
    C = sp.Function("C")
    verdict = symbolic_equality(2 * C(0, e), C(0, e), [e], sampler=lambda generator: {e: 2})
    match = re.fullmatch(r"printed minus true is (\S+) at e = 2 \(exact evaluation, with "
                         r"C\(u1, u2\) = (.+)\)\.", verdict.detail)  # fmt: skip
    assert match is not None, verdict.detail
    u1, u2 = sp.symbols("u1 u2")
    stand_in = sp.sympify(match.group(2), locals={"u1": u1, "u2": u2})
    expected = float(stand_in.subs({u1: 0, u2: 2}))  # C(0, 2), by hand; 8 digits shown
    assert float(match.group(1)) == pytest.approx(expected, rel=1e-7)


def test_a_difference_of_exactly_one_at_fifty_digits_is_a_witness():
    # sin^2 + cos^2 against 0: the 50-digit difference is 1 (not rational), stable at 100
    s = sp.Symbol("s", real=True)
    verdict = symbolic_equality(sp.sin(s) ** 2 + sp.cos(s) ** 2, sp.Integer(0), [s],
                                sampler=lambda generator: {s: sp.Rational(3, 7)})  # fmt: skip
    assert verdict == Verdict("fails", "printed minus true is 1.0000000 at s = 3/7 "
                                       f"{CONFIRMED}")  # fmt: skip


def test_a_float_difference_of_exactly_one_is_a_witness():
    # x + 1.0 - x is the float 1.0 at every point: not rational, yet no residue either
    verdict = symbolic_equality(x + 1.0, x, [x], sampler=lambda generator: {x: 3})
    assert verdict == Verdict("fails", "printed minus true is 1.0000000 at x = 3 "
                                       f"{CONFIRMED}")  # fmt: skip


def test_an_identity_of_huge_terms_is_not_refuted_by_their_rounding():
    # exp(200 x) (sin^2 + cos^2) - exp(200 x) is 0; evaluated, what is left of the cancellation
    # of terms up to 10^8000 is far from 0, but not the same at 50 and at 100 digits: no witness
    verdict = symbolic_equality(sp.exp(200 * x) * (sp.sin(x) ** 2 + sp.cos(x) ** 2),
                                sp.exp(200 * x), [x])  # fmt: skip
    assert verdict == Verdict("holds", "sympy.simplify reduces printed minus true to 0.")


@pytest.mark.slow
def test_a_tiny_residue_the_same_at_50_and_100_digits_is_no_witness():
    # (e^s + 1) e^-s - 1 - e^-s is 0; at s = -1000, e^s = 1e-434 is lost beside the 1 of
    # e^s + 1 at 100 digits of working precision, so e^s times it is -e^s = -1e-434 at 50 and
    # at 100 digits alike: only more digits show that it vanishes
    s = sp.Symbol("s", real=True)
    zero = sp.exp(s) * ((sp.exp(s) + 1) * sp.exp(-s) - 1 - sp.exp(-s))
    verdict = symbolic_equality(zero, sp.Integer(0), [s], sampler=lambda generator: {s: -1000})
    assert verdict == Verdict("holds", "sympy.simplify reduces printed minus true to 0.")


def test_an_identity_whose_points_evaluate_to_a_zero_of_no_precision_holds_on_them():
    # atan(x) + atan(1/x) = pi/2 for x > 0, which sympy.simplify does not prove: at each point
    # printed minus true evaluates to a float of no significant digit (-0.e-160), not to the
    # exact 0; finer evaluations show it a residue, and the verdict rests on the points
    verdict = symbolic_equality(sp.atan(x) + sp.atan(1 / x), sp.pi / 2, [x])
    assert verdict == Verdict("holds", "printed minus true vanishes at 12 random points "
                                       "(50 digits).")  # fmt: skip


def test_a_function_of_three_arguments_stands_in_as_a_finite_polynomial():
    # atan(x) + atan(1/x) = pi/2 for x > 0, which sympy.simplify does not prove: the points
    # decide, each with F(x, y, z) evaluated to a finite number
    z = sp.Symbol("z", positive=True)
    F = sp.Function("F")
    verdict = symbolic_equality(F(x, y, z) * (sp.atan(x) + sp.atan(1 / x)),
                                F(x, y, z) * sp.pi / 2, [x, y, z])  # fmt: skip
    assert verdict == Verdict("holds", "printed minus true vanishes at 12 random points (50 "
                                       "digits).")  # fmt: skip


def test_the_mixed_partial_of_a_second_function_of_two_arguments_is_not_zero():
    # A(x) = A(x) (1 + d^2 B / dx dy) holds only if the mixed partial of B vanishes
    A, B = sp.Function("A"), sp.Function("B")
    verdict = symbolic_equality(A(x), A(x) * (1 + sp.diff(B(x, y), x, y)), [x, y])
    assert verdict.verdict == "fails"


def test_the_stand_in_of_a_function_of_two_arguments_is_a_polynomial_of_degree_seven():
    import re

    d, e = sp.Symbol("d", integer=True, positive=True), sp.Symbol("e", positive=True)
    B = sp.Function("B")
    verdict = symbolic_equality(2 * B(d, e), B(d, e), [d, e],
                                sampler=lambda generator: {d: 3, e: 2})  # fmt: skip
    match = re.fullmatch(r"printed minus true is (\S+) at d = 3, e = 2 \(exact evaluation, "
                         r"with B\(d, e\) = (.+)\)\.", verdict.detail)  # fmt: skip
    assert match is not None, verdict.detail
    stand_in = sp.sympify(match.group(2), locals={"d": d, "e": e})
    assert stand_in.is_polynomial(d, e)
    assert sp.Poly(stand_in, d, e).total_degree() == 7  # the documented degree
    assert float(match.group(1)) == pytest.approx(float(stand_in.subs({d: 3, e: 2})), rel=1e-7)


def test_a_difference_under_a_deep_cancellation_is_a_witness_while_30_digits_stay():
    # exp(s) - 1 - s at s = 3e-65 is s^2/2 + s^3/6 + ... = 4.5e-130: 130 digits below the
    # terms that cancel, so its 50-digit value is good to about 30 digits, which suffice
    s = sp.Symbol("s", positive=True)
    point = sp.Rational(3, 10**65)
    verdict = symbolic_equality(sp.exp(s), 1 + s, [s], sampler=lambda generator: {s: point})
    shown = sp.N(point**2 / 2 + point**3 / 6, 8)  # the rest changes none of its 8 digits
    assert verdict == Verdict("fails", f"printed minus true is {shown!s} at s = {point} "
                                       f"{CONFIRMED}")  # fmt: skip


@pytest.mark.parametrize("at", [-600, -1000, -2000])
def test_an_identity_whose_terms_cancel_far_beyond_100_digits_holds(at):
    # at s = -1000 both sides are 1 + e^1000 (435 digits): at 50 and 100 digits the 1 is lost
    # in the cancellation alike, a residue of -1 that read as a witness; at s = -600 SymPy
    # leaves the same 8.9e-103 with its working precision held to 100 digits and to 200
    s = sp.Symbol("s", real=True)
    verdict = symbolic_equality((sp.exp(s) + 1) * sp.exp(-s), 1 + sp.exp(-s), [s],
                                sampler=lambda generator: {s: at})  # fmt: skip
    assert verdict.verdict == "holds", verdict.detail


@pytest.mark.parametrize("exponent", [66, 80])
def test_a_true_difference_under_a_cancellation_of_over_100_digits_is_a_witness(exponent):
    # exp(s) - 1 - s at s = 3e-66 (3e-80) is 4.5e-132 (4.5e-160), 130 (160) digits below the
    # terms that cancel: its 50-digit value keeps 28 digits (none), its 100-digit ones agree
    s = sp.Symbol("s", positive=True)
    point = sp.Rational(3, 10**exponent)
    verdict = symbolic_equality(sp.exp(s), 1 + s, [s], sampler=lambda generator: {s: point})
    shown = sp.N(point**2 / 2 + point**3 / 6, 8)  # the rest changes none of its 8 digits
    assert verdict == Verdict("fails", f"printed minus true is {shown!s} at s = {point} "
                                       f"{CONFIRMED}")  # fmt: skip


def test_the_stand_ins_of_two_functions_of_two_arguments_are_the_documented_polynomials():
    # the k-th function (in name order): k + 3 + T_k(u1) + T_(k+1)(u2) + (k + 1 + (k + 2) u1
    # + (k + 2)^2 u2) u1 u2, T_k(u) = sum_(i=1..7) (-1)^(i(k+1)) (k + 2i + 1)/(k + i + 1) u^i
    import re

    u1, u2 = sp.symbols("d e", positive=True)
    A, B = sp.Function("A"), sp.Function("B")

    def terms(u, k):
        return sum(sp.Rational((-1) ** (i * (k + 1)) * (k + 2 * i + 1), k + i + 1) * u**i
                   for i in range(1, 8))  # fmt: skip

    def documented(k):
        mixed = (k + 1 + (k + 2) * u1 + (k + 2) ** 2 * u2) * u1 * u2
        return sp.expand(k + 3 + terms(u1, k) + terms(u2, k + 1) + mixed)

    verdict = symbolic_equality(A(u1, u2) + B(u1, u2), sp.Integer(0), [u1, u2],
                                sampler=lambda generator: {u1: 3, u2: 2})  # fmt: skip
    match = re.fullmatch(r"printed minus true is \S+ at d = 3, e = 2 \(exact evaluation, "
                         r"with A\(d, e\) = (.+), B\(d, e\) = (.+)\)\.",
                         verdict.detail)  # fmt: skip
    assert match is not None, verdict.detail
    shown = [sp.sympify(text, locals={"d": u1, "e": u2}) for text in match.groups()]
    assert [sp.expand(polynomial - documented(k)) for k, polynomial in enumerate(shown)] == [0, 0]


def test_a_difference_its_two_100_digit_values_keep_to_19_digits_only_is_taken_for_a_residue():
    # the documented blind spot: exp(s) - 1 - s at s = 3e-95 is 4.5e-190, under a cancellation
    # of 190 digits; with SymPy's working precision held to 100 digits its value agrees with the
    # finest one to 19 digits, short of the 30 a witness needs, and the identity holds
    s = sp.Symbol("s", positive=True)
    point = sp.Rational(3, 10**95)
    value = (sp.exp(s) - 1 - s).xreplace({s: point})
    held, finest = value.evalf(100, maxn=100), value.evalf(100, maxn=5000)
    assert 1e-25 < abs(held - finest) / abs(finest) < 1e-15  # the premise, in SymPy's numbers
    verdict = symbolic_equality(sp.exp(s), 1 + s, [s], sampler=lambda generator: {s: point})
    assert verdict.verdict == "holds"


def _cut_at_30_digits(difference, point):
    """``|held - finest| / |finest|``: the relative distance between ``difference``'s 100-digit
    values with SymPy's working precision held to 100 digits and raised to 5000."""
    value = difference.xreplace(point)
    held, finest = value.evalf(100, maxn=100), value.evalf(100, maxn=5000)
    return abs(held - finest) / abs(finest)


def test_a_true_difference_its_held_value_keeps_to_30_digits_is_a_witness():
    # sin^2 + cos^2 + 1e-177 against 1 is 1e-177 (sin^2 + cos^2 = 1, by hand), under a
    # cancellation of 177 digits; held to 100 digits its value keeps 30 digits, not 31: enough
    pythagoras = sp.sin(x) ** 2 + sp.cos(x) ** 2
    tiny = sp.Rational(1, 10**177)
    assert 1e-31 < _cut_at_30_digits(pythagoras - 1 + tiny, {x: sp.Rational(3, 7)}) <= 1e-30
    verdict = symbolic_equality(pythagoras + tiny, sp.Integer(1), [x],
                                sampler=_at(sp.Rational(3, 7)), points=1)  # fmt: skip
    assert verdict == Verdict("fails", f"printed minus true is 1.0000000e-177 at x = 3/7 "
                                       f"{CONFIRMED}")  # fmt: skip


def test_a_value_its_held_value_keeps_to_29_digits_only_is_passed_over_for_the_next_point():
    # 1e-178 under a cancellation of 178 digits: held to 100 digits its value is off in the
    # 30th digit (a witness needs 30), so the witness is the next point, x = 1/2, where the
    # difference is 1e-178 + 1/2 - 3/7 = 0.071428571... (by hand)
    pythagoras = sp.sin(x) ** 2 + sp.cos(x) ** 2
    tiny = sp.Rational(1, 10**178)
    assert 1e-30 < _cut_at_30_digits(pythagoras - 1 + tiny, {x: sp.Rational(3, 7)}) < 2e-30
    verdict = symbolic_equality(pythagoras + tiny + x - sp.Rational(3, 7), sp.Integer(1), [x],
                                sampler=_at(sp.Rational(3, 7), sp.Rational(1, 2)), points=2)
    assert verdict == Verdict("fails", f"printed minus true is 0.071428571 at x = 1/2 "
                                       f"{CONFIRMED}")  # fmt: skip


class _Fading(sp.Function):
    """sqrt(2), except evaluated at more than ``_Fading.bits`` bits (50 digits take 173, 100
    take 340), where it is ``_Fading.beyond``: a function whose evaluation gives out at a
    higher precision."""

    bits, beyond = 300, sp.nan

    def _eval_evalf(self, prec):
        return sp.sqrt(sp.Float(2, prec)) if prec <= self.bits else self.beyond


class _Steady(sp.Function):
    """sqrt(2) at every precision (``_Fading`` where that does not give out)."""

    def _eval_evalf(self, prec):
        return sp.sqrt(sp.Float(2, prec))


@pytest.mark.parametrize(("bits", "beyond", "fading"), [
    (300, sp.nan, lambda: _Fading(x)),  # no 100-digit value
    # _Fading - _Steady cancels: SymPy raises its working precision past 800 bits only where
    # it is held no longer, so the value held to 100 digits is there and the finer one is nan
    (800, sp.nan, lambda: _Fading(x) - _Steady(x)),
    (300, sp.Integer(0), lambda: _Fading(x) / 10**60),  # 1.4e-60 at 50 digits, 0 at 100
], ids=["nan at 100 digits", "nan at a higher working precision", "0 at 100 digits"])  # fmt: skip
def test_a_difference_without_a_non_zero_100_digit_value_is_no_witness(
        monkeypatch, bits, beyond, fading):  # fmt: skip
    # nothing confirms such a value: it neither fails the claim nor ends the check (comparing
    # nan with the other 100-digit value raises TypeError; two values of 0 agree, yet are 0)
    monkeypatch.setattr(_Fading, "bits", bits)
    monkeypatch.setattr(_Fading, "beyond", beyond)
    verdict = symbolic_equality(fading(), sp.Integer(0), [x], sampler=_at(sp.Rational(3, 7)),
                                points=1)  # fmt: skip
    assert verdict.verdict != "fails", verdict.detail
    if beyond is sp.nan:  # no number to go on at that point: undecided, not "vanishes"
        assert verdict.verdict == "inconclusive", verdict.detail
        assert "at 50 digits and not a number at 100 digits" in verdict.detail


class _FadingBelowOne(sp.Function):
    """1 from its argument 1 on; below it ``_Fading``: sqrt(2) to 300 bits, nan beyond."""

    def _eval_evalf(self, prec):
        if self.args[0] >= 1:
            return sp.Float(1, prec)
        return sp.sqrt(sp.Float(2, prec)) if prec <= 300 else sp.nan


def test_a_point_without_a_100_digit_value_does_not_end_the_search_for_a_witness():
    # the first point has no 100-digit value (no evidence there); the second is a witness
    verdict = symbolic_equality(_FadingBelowOne(x), sp.Integer(0), [x],
                                sampler=_at(sp.Rational(3, 7), 5), points=2)  # fmt: skip
    assert verdict.verdict == "fails", verdict.detail
    assert witness(verdict.detail) == (str(sp.N(1, 8)), {"x": "5"})


def test_a_holds_on_a_samplers_points_names_no_symbol_drawn_positive():
    # the sampler's points are its own: nothing was drawn positive for want of a sign
    u = UNDECLARED
    verdict = symbolic_equality(sp.sqrt(u**2), u, [u], sampler=lambda generator: {u: 2})
    assert verdict == Verdict("holds", "printed minus true vanishes at 12 random points (50 "
                                       "digits).")  # fmt: skip


class _Huge(sp.Function):
    """Its argument, except that evaluating it above 50 raises what mpmath raises on a number
    too large for it (``MemoryError``; ``OverflowError`` as ``_Huge.raised`` says)."""

    raised: type[Exception] = MemoryError

    def _eval_evalf(self, prec):
        if self.args[0] > 50:
            raise self.raised
        return self.args[0]._eval_evalf(prec)


class _Gap(sp.Function):
    """nan below 20, else 0 (an undefined point beside the others)."""

    @classmethod
    def eval(cls, arg):
        if arg.is_Number:
            return sp.nan if arg < 20 else sp.Integer(0)
        return None


def _at(*values):
    """A sampler that hands out ``x = value`` for each of ``values`` in turn."""
    points = iter(values)
    return lambda generator: {x: next(points)}


@pytest.mark.parametrize("raised", [MemoryError, OverflowError])
def test_a_point_mpmath_cannot_evaluate_is_no_evidence(monkeypatch, raised):
    # was: the MemoryError (or OverflowError) of mpmath's evaluation ended symbolic_equality
    monkeypatch.setattr(_Huge, "raised", raised)
    verdict = symbolic_equality(_Huge(x), x, [x], sampler=_at(30, 60, 40), points=3)
    assert verdict == Verdict("inconclusive", (
        f"printed minus true is too large for mpmath to evaluate ({raised.__name__}) at 1 of 3 "
        "random points (the first: x = 60), and vanishes at the others; sympy.simplify does not "
        "reduce it to 0: the random points cannot decide (pass a sampler that avoids the points "
        "where printed or true is undefined or too large to evaluate)."))
    # a point that can be evaluated still decides: _Huge(x) is x, 1 less than x + 1 at x = 30
    wrong = symbolic_equality(_Huge(x), x + 1, [x], sampler=_at(60, 30), points=2)
    assert wrong.verdict == "fails"
    assert witness(wrong.detail) == ("-1.0000000", {"x": "30"})


def test_points_undefined_and_too_large_to_evaluate_are_counted_apart():
    verdict = symbolic_equality(_Huge(x) + _Gap(x), x, [x], sampler=_at(5, 60, 3, 70, 30),
                                points=5)  # fmt: skip
    assert verdict == Verdict("inconclusive", (
        "printed minus true is not a number at 2 and too large for mpmath to evaluate at 2 of 5 "
        "random points (the first: x = 5, where it is nan (not a number)), and vanishes at the "
        "others; sympy.simplify does not reduce it to 0: the random points cannot decide (pass "
        "a sampler that avoids the points where printed or true is undefined or too large to "
        "evaluate)."))


def test_a_true_value_too_large_to_evaluate_is_said_so_beside_the_witness():
    # printed minus true is 1 (exact), but the true value _Huge(60) cannot be evaluated
    verdict = symbolic_equality(_Huge(x) + 1, _Huge(x), [x], sampler=_at(60), points=1,
                                relative=True)  # fmt: skip
    assert verdict == Verdict("fails", (
        "printed minus true is 1.0000000 at x = 60 (exact evaluation); the true value there is "
        "too large for mpmath to evaluate (MemoryError)."))


@pytest.mark.slow  # about 4 s: SymPy's simplify of a softmax gradient over three logits
def test_the_gradient_of_a_tempered_softmax_holds_though_mpmath_cannot_evaluate_one_point():
    # was: MemoryError at t = 43, where e^t s is about -1.5e20 inside an exp
    t = sp.Symbol("t", real=True)
    s = sp.symbols("s0:3", real=True)
    z = [sp.exp(t) * v for v in s]
    p = [sp.exp(u) / sum(sp.exp(w) for w in z) for u in z]
    printed = sum(a * b for a, b in zip(p, z, strict=True)) - z[0]  # E_p[z] - z_0, by hand
    verdict = symbolic_equality(printed, sp.diff(-sp.log(p[0]), t), [t, *s])
    assert verdict == Verdict("holds", "sympy.simplify reduces printed minus true to 0.")


def test_a_check_that_decides_no_form_kills_no_mutant_and_the_report_says_why():
    # it was credited with every mutant killed ("8 of 8"): each mutant was "rejected" as
    # inconclusive by a check that is inconclusive on everything, the printed form included
    import sympy as sp

    from gradlab.symbolic import Claim, Form, audit_claim, format_markdown, undecided

    x = sp.Symbol("x", real=True)
    never = Claim("my-notes", "eq4", "x is x", Form(x + 1),
                  lambda form: undecided("cannot decide"))  # fmt: skip
    record = audit_claim(never, mutants=True)
    assert record["verdict"] == "inconclusive" and record["mutants"] >= 3
    assert record["mutants_killed"] == 0
    assert all(not o["killed"] and o["verdict"] == "inconclusive"
               for o in record["mutant_results"])  # fmt: skip
    line = next(line for line in format_markdown([record]).splitlines()
                if line.startswith("- mutants killed:"))  # fmt: skip
    assert line == (f"- mutants killed: 0 of {record['mutants']}; the check accepted no form of "
                    "this claim, so rejecting its mutants shows nothing of it")
    # the same mutants under a check that decides: the printed form holds, they are killed
    deciding = Claim("my-notes", "eq4", "x + 1 is x + 1", Form(x + 1),
                     lambda form: symbolic_equality(form.value, x + 1, [x]))  # fmt: skip
    decided = audit_claim(deciding, mutants=True)
    assert decided["verdict"] == "holds"
    assert decided["mutants_killed"] == decided["mutants"] == record["mutants"]


def test_an_empirical_check_that_reproduces_a_mutant_kills_the_others():
    # a not-reproduced printed form whose slip 2m is reproduced: the check tells forms apart,
    # so its rejections count (they were all set to not killed); with none reproduced, none do
    import sympy as sp

    from gradlab.symbolic import Claim, Form, Verdict, audit_claim, format_markdown

    m = sp.Symbol("m", positive=True)

    def doubles(form):
        same = sp.simplify(form.value - 2 * m) == 0
        return Verdict("reproduced" if same else "not-reproduced", f"value {form.value}")

    claim = Claim("my-notes", "claim-x", "P doubles", Form(3 * m, lhs="P"), doubles,
                  mutants=(Form(2 * m, lhs="P", name="slip: 2m"),))  # fmt: skip
    record = audit_claim(claim, mutants=True)
    kills = {o["mutant"]: o["killed"] for o in record["mutant_results"]}
    assert record["verdict"] == "not-reproduced" and kills.pop("slip: 2m") is False
    assert kills and all(kills.values()) and record["mutants_killed"] == len(kills)
    never = Claim("my-notes", "claim-y", "P doubles", Form(3 * m, lhs="P"),
                  lambda form: Verdict("not-reproduced", "never"))  # fmt: skip
    nothing = audit_claim(never, mutants=True)
    assert nothing["mutants_killed"] == 0 < nothing["mutants"]
    assert any(line.endswith("so rejecting its mutants shows nothing of it")
               for line in format_markdown([nothing]).splitlines())  # fmt: skip
